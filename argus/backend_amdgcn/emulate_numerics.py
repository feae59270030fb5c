"""Number formats of the gfx942 emulator, written from the CDNA3 ISA's definitions.

The emulator keeps registers as raw 32-bit words; these helpers read and write the
floating-point formats an instruction names: IEEE binary32 (with a correctly rounded fused
multiply-add), binary16, bfloat16 (the upper half of a binary32), and the two 8-bit FNUZ
formats of CDNA3 — ``fp8`` (E4M3, exponent bias 8) and ``bf8`` (E5M2, bias 16): no
infinities, one NaN encoding ``0x80`` (the would-be negative zero), zero only as ``0x00``.
Nothing here is shared with the emitter or the reference interpreter.
"""

from __future__ import annotations

from functools import cache

import numpy as np

__all__ = ["as_f32", "as_u32", "bf16_to_f32", "f32_to_fp8", "fma_f32", "fp8_table", "round_f32"]

F32_SIGN = np.uint32(0x80000000)


def as_f32(bits: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def as_u32(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def round_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> binary32, round to nearest even (numpy's cast)."""
    with np.errstate(all="ignore"):
        return np.asarray(x, np.float64).astype(np.float32)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` with one rounding to binary32 (V_FMA_F32).

    The product of two binary32 values is exact in binary64; the sum is formed in binary64
    with round-to-odd (the exact error of the addition decides the sticky bit), which makes the
    final rounding to binary32 correct: 53 >= 2 * 24 + 2.
    """
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        cc = c.astype(np.float64)
        s = p + cc
        # two-sum error term: s + err == p + cc exactly (finite s)
        bb = s - p
        err = (p - (s - bb)) + (cc - bb)
        finite = np.isfinite(s) & np.isfinite(err)
        inexact = finite & (err != 0)
        bits = s.view(np.uint64)
        even = (bits & np.uint64(1)) == 0
        toward = np.where(err > 0, np.inf, -np.inf)
        odd = np.where(inexact & even, np.nextafter(s, toward), s)
        return odd.astype(np.float32)


def bf16_to_f32(half_words: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (low 16 bits of the input) -> float32 values."""
    return as_f32((np.asarray(half_words, np.uint32) & np.uint32(0xFFFF)) << np.uint32(16))


@cache
def fp8_table(kind: str) -> np.ndarray:
    """The float32 value of each of the 256 codes of ``fp8`` (E4M3 FNUZ) or ``bf8`` (E5M2 FNUZ)."""
    mantissa, bias = {"fp8": (3, 8), "bf8": (2, 16)}[kind]
    out = np.empty(256, np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent = (code >> mantissa) & ((1 << (7 - mantissa)) - 1)
        frac = code & ((1 << mantissa) - 1)
        if exponent == 0:
            value = frac / (1 << mantissa) * 2.0 ** (1 - bias)
        else:
            value = (1 + frac / (1 << mantissa)) * 2.0 ** (exponent - bias)
        out[code] = sign * value
    out[0x80] = np.nan
    return out.astype(np.float32)


@cache
def _positive_codes(kind: str) -> tuple[np.ndarray, float]:
    table = fp8_table(kind).astype(np.float64)
    values = table[:0x80]  # codes 0x00 .. 0x7f, increasing
    top = values[-1]
    below = values[-2]
    return values, top + (top - below) / 2  # values, the overflow boundary (midpoint rounds to even: up)


def f32_to_fp8(x: np.ndarray, kind: str, *, saturate: bool) -> np.ndarray:
    """float32 -> ``fp8``/``bf8`` codes, round to nearest even.  NaN gives ``0x80``; a magnitude
    that rounds above the largest finite value gives ``0x80`` unless ``saturate`` (the clamp
    modifier), which gives the largest finite value.  Zero of either sign gives ``0x00``."""
    values, boundary = _positive_codes(kind)
    x64 = np.asarray(x, np.float64)
    mag = np.abs(x64)
    with np.errstate(invalid="ignore"):
        hi = np.clip(np.searchsorted(values, mag, side="left"), 1, len(values) - 1)
        lo = hi - 1
        dlo = mag - values[lo]
        dhi = values[hi] - mag
        pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
        code = np.where(pick_hi, hi, lo)
        code = np.where(mag >= values[-1], len(values) - 1, code)
        over = mag >= boundary
    code = code.astype(np.uint32)
    sign = np.where(np.signbit(x64) & (code != 0), np.uint32(0x80), np.uint32(0))
    out = code | sign
    if not saturate:
        out = np.where(over, np.uint32(0x80), out)
    return np.where(np.isnan(x64), np.uint32(0x80), out).astype(np.uint32)
