"""Exact numerics of the element types: conversions, bit patterns, and the elementwise and
matrix arithmetic the reference interpreter executes.

Everything here is vectorized over numpy arrays and exact: a result is the one the stated
rounding rule gives for the mathematically exact operand values, never "whatever float64
happened to produce".  Values of every float type of 32 bits or fewer travel in float32
arrays (f64 in float64 arrays); where a computation goes through float64 the comment next
to it says why that is exact.  The ``gpu`` tests run the same conversions and arithmetic as
PTX on an sm_90 device and require bit equality (bounds for the ``.approx`` instructions).

Conversions (PTX ISA 9.x §9.7.9.21 ``cvt``)
-------------------------------------------
``round_to(dt, x)`` rounds to the values of ``dt``; ``to_bits``/``from_bits`` encode and
decode bit patterns.  Rounding modes: ``"rn"`` (to nearest, ties to even: ``cvt.rn``, and
the only mode of the gfx942 ``v_cvt_pk_{fp8,bf8}_f32`` conversions), ``"rz"`` (toward zero:
``cvt.rz``), ``"rna"`` (to nearest, ties away from zero: ``cvt.rna.tf32.f32``).  The result
is the value the exact input rounds to on an unbounded-exponent grid of the format's
precision, with subnormals (gradual underflow; no flush to zero), then:

* *overflow* (rounded magnitude above ``max_finite``): with ``satfinite`` → ±max_finite
  (PTX ``.satfinite``: "if the absolute value of input (ignoring sign) is greater than
  MAX_NORM … the result is sign-preserved MAX_NORM"); otherwise, under ``rn``/``rna``,
  → ±inf where the format has infinities (f32, f16, bf16, tf32, e5m2) and → NaN where it
  has none (e4m3fn: the OCP rule; e4m3fnuz/e5m2fnuz: NaN = 0x80).  Under ``rz`` a finite
  input never rounds past ±max_finite (the value toward zero).
* *infinite input*: ±max_finite under ``satfinite``; else ±inf where the format has it,
  NaN where not.
* *NaN input*: NaN (also under ``satfinite``).  Encoded as the format's canonical NaN
  (``DType.nan_bits``: 0x7fffffff, 0x7fff, 0x7f; FNUZ 0x80), which is what sm_90's
  ``cvt`` to bf16, f16, e4m3 and e5m2 produces.  One hardware exception: ``cvt.rna.tf32.f32``
  keeps a NaN's high 19 bits, so a NaN whose payload lies only in the low 13 bits comes
  out as an infinity pattern; the interpreter keeps it a NaN.
* *zeros*: the sign is kept (a negative input that rounds to zero gives -0), except in
  the FNUZ formats, which have no -0 and give +0.

PTX has no non-saturating f32 → e4m3/e5m2 conversion (``.satfinite`` is mandatory for
``.e4m3x2``/``.e5m2x2`` destinations), so a backend lowers ``satfinite=False`` to those
formats with an explicit range check.  On gfx942, ``v_cvt_pk_fp8_f32`` rounds to nearest
even; the ROCm libraries implement saturation by clamping the input to ±max_finite
(``v_med3_f32``) before the conversion, and the AMD backend does the same for
``satfinite=True``.

Float → int (``float_to_int``) follows ``cvt{.rni,.rzi,.rmi,.rpi}.sNN/uNN.fMM``: round to an
integer (ties to even for ``rni``), then clamp to the destination range (float-to-integer
``cvt`` saturates by default); NaN → 0, except f64 → 64-bit destinations, where NaN →
1 << 63 (PTX §9.7.9.21, "Integer Notes").  Int → float (``int_to_float``) rounds the exact
integer once (``cvt.rn.f32.s32``...).

Arithmetic
----------
Non-``.ftz`` IEEE semantics throughout (subnormal inputs and results are kept; PTX
``add/mul/fma/div.rn/sqrt.rn/rcp.rn.f32`` without ``.ftz``).  A backend that emits an
``.ftz`` or ``.approx`` instruction relies on the bounds given here, not on equality.

* ``add``, ``sub``, ``mul``, ``div``, ``sqrt``, ``rcp`` (``rcp.rn``): the exact result
  rounded once to nearest even.  Computed in float64 and rounded to the target: for
  formats of precision p ≤ 25 (f32 p = 24) double rounding through float64 (p' = 53 ≥
  2p + 2) is innocuous for +, −, ×, ÷ and √, so the result is the correctly rounded one.
  f64 operations are numpy's (IEEE correctly rounded).
* ``fma(a, b, c)``: a·b + c rounded once.  For formats with p ≤ 26 the product of two
  values is exact in float64 (2p ≤ 53 bits, and the exponent range of float64 covers
  every product of f32 values); the sum is then computed in float64 with its exact error
  (TwoSum) and rounded *to odd* (if inexact, the neighbour whose last bit is 1), and
  rounding that to the target is the correctly rounded fused result (round-to-odd at
  precision ≥ p + 2 followed by round-to-nearest equals round-to-nearest).  f64 fma is
  computed with exact rationals (slow; f64 is rare in kernels).
* ``exp2``: the interpreter uses the correctly rounded 2^x.  Hardware does not:
  ``ex2.approx.f32`` has "maximum ulp error 2 ulp from correctly rounded result across the
  full range of inputs" (PTX ISA 9.x §9.7.3.21), i.e. relative error ≤ 2·2^-23 = 2^-22 for
  normal results; −inf → +0, ±0 → 1, +inf → +inf, NaN → NaN.  gfx942's ``v_exp_f32`` is an
  approximation too.  So the verifier relies only on the range :func:`approx_bounds`
  gives (``EX2_APPROX_MAX_ULP``), and tests compare kernels with tolerances.
* ``rcp``: ``rcp.rn.f32`` is correctly rounded; ``rcp.approx.f32`` has maximum error 1 ulp
  (PTX ISA "Floating Point Instructions: rcp"); ±0 → ±inf, ±inf → ±0.
* ``maximum``/``minimum``: PTX ``max.f32``/``min.f32`` (§9.7.3.12): when exactly one operand
  is NaN the result is the other operand; NaN only when both are; +0.0 > −0.0.  With
  ``nan=True`` (the ``.NaN`` variant) any NaN operand gives NaN.

Matrix multiply-accumulate (``mma``)
------------------------------------
D = A·B + C with A (M×K), B (K×N), C and D (M×N).  Products of the input types are exact
(bf16·bf16 needs 16 significand bits, f16·f16 22, fp8·fp8 at most 8, tf32·tf32 22, all
within f32's 24 — and exact in the float64 the interpreter uses, whose exponent range also
covers the products that would over- or underflow f32).  The interpreter accumulates in
k order, k = 0 … K−1, each step one correctly rounded fused multiply-add into the
accumulator type: ``acc ← round_acc(acc + A[i,k]·B[k,j])``, starting from C.  Hardware
does not promise that order: tensor cores and matrix cores add groups of products with
their own alignment and truncation rules, which differ between architectures and input
types (bit-accurate models of them exist, e.g. MMA-Sim, arXiv:2511.10909).  So comparisons
with hardware results use :func:`mma_tolerance`.  Integer MMA is
exact; the result wraps to 32 bits, or clamps with ``satfinite``.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import cache
from typing import Any, Literal

import numpy as np

from argus.ir.dtypes import (
    F32,
    F64,
    TF32,
    DType,
    DTypeError,
    FloatFormat,
    Kind,
    NanStyle,
    dtype,
)

__all__ = [
    "EX2_APPROX_MAX_REL_ERROR",
    "EX2_APPROX_MAX_ULP",
    "FP8_MMA_UNIT_ROUNDOFF",
    "RCP_APPROX_MAX_ULP",
    "FloatRounding",
    "IntRounding",
    "add",
    "approx_bounds",
    "convert",
    "div",
    "exp2",
    "float_to_int",
    "fma",
    "from_bits",
    "int_to_float",
    "is_nan_bits",
    "is_representable",
    "maximum",
    "minimum",
    "mma",
    "mma_tolerance",
    "mul",
    "rcp",
    "round_to",
    "sqrt",
    "sub",
    "to_bits",
    "ulp",
]

FloatRounding = Literal["rn", "rz", "rna"]
IntRounding = Literal["rni", "rzi", "rmi", "rpi"]

#: ``ex2.approx.f32``: at most 2 ulp from the correctly rounded result (PTX ISA §9.7.3.21).
EX2_APPROX_MAX_ULP = 2
#: The same bound as a relative error for normal results: 2 · 2^-23.
EX2_APPROX_MAX_REL_ERROR = 2.0**-22
#: ``rcp.approx.f32``: at most 1 ulp (PTX ISA, "Floating Point Instructions: rcp").
RCP_APPROX_MAX_ULP = 1
#: Per-addition relative error :func:`mma_tolerance` assumes for FP8 inputs (see there).
FP8_MMA_UNIT_ROUNDOFF = 2.0**-17

_FLOAT_ROUNDINGS = ("rn", "rz", "rna")
_INT_ROUNDINGS = ("rni", "rzi", "rmi", "rpi")


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _float_type(dt: DType | str | Any) -> DType:
    t = dtype(dt)
    if not t.is_float:
        raise DTypeError(f"{t} is not a floating-point type", hint="pass a float element type")
    return t


def _int_type(dt: DType | str | Any) -> DType:
    t = dtype(dt)
    if not t.is_int:
        raise DTypeError(f"{t} is not an integer type", hint="pass an integer element type")
    return t


def _check_rounding(rounding: str, allowed: tuple[str, ...]) -> None:
    if rounding not in allowed:
        raise DTypeError(
            f"unknown rounding mode {rounding!r}", hint="use one of: " + ", ".join(allowed)
        )


def _f64(x: Any) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # widening a signaling NaN raises "invalid"
        return np.asarray(x, dtype=np.float64)


def _out_float_dtype(x: Any) -> type[np.floating[Any]]:
    """float32 for float32/float16 inputs, float64 for everything else."""
    xa = np.asarray(x)
    return np.float32 if xa.dtype in (np.float32, np.float16) else np.float64


# ------------------------------------------------------------------------------------------
# rounding core
# ------------------------------------------------------------------------------------------


def _round_value(fmt: FloatFormat, x: np.ndarray, rounding: str, satfinite: bool) -> np.ndarray:
    """Round float64 values ``x`` to ``fmt``; returns float64 values (±inf and NaN included).

    Exactness: ``a = m·2^q`` with the quantum ``2^q`` of a's binade (clamped below at the
    subnormal quantum); ``a / 2^q`` is computed with ``ldexp`` (a power-of-two scaling, exact
    because the scaled value is at most 2^(M+1) and the input is a float64), rounded to an
    integer n by the mode, and ``n·2^q`` is again an exact scaling.
    """
    m_bits = fmt.mantissa_bits
    with np.errstate(all="ignore"):
        a = np.abs(x)
        finite = np.isfinite(a)
        nonzero = finite & (a != 0)
        safe = np.where(nonzero, a, 1.0)
        _, ex = np.frexp(safe)
        q = np.maximum(ex.astype(np.int64) - 1, fmt.emin) - m_bits
        scaled = np.ldexp(np.where(nonzero, a, 0.0), -q)
        if rounding == "rn":
            n = np.rint(scaled)  # numpy rint: round half to even
        elif rounding == "rz":
            n = np.floor(scaled)
        else:  # "rna"
            fl = np.floor(scaled)
            n = fl + ((scaled - fl) >= 0.5)  # scaled - fl is exact (same binade or below)
        r = np.ldexp(n, q)
        max_finite = fmt.max_finite
        overflow = finite & (r > max_finite)
        if satfinite or rounding == "rz":
            big = max_finite
        else:
            big = np.inf if fmt.has_inf else np.nan
        r = np.where(overflow, big, r)
        if satfinite:
            inf_result = max_finite
        else:
            inf_result = np.inf if fmt.has_inf else np.nan
        r = np.where(np.isinf(a), inf_result, r)
        r = np.where(np.isnan(a), np.nan, r)
        r = np.copysign(r, x)
        if fmt.nan_style is NanStyle.FNUZ:
            r = np.where(r == 0, 0.0, r)  # no negative zero
    return r


def round_to(
    dt: DType | str,
    x: Any,
    *,
    rounding: FloatRounding = "rn",
    satfinite: bool = False,
) -> np.ndarray:
    """``x`` rounded to the values of float type ``dt`` (see the module docstring).

    Returns float32 for float32/float16 input, float64 otherwise; every returned value is
    exactly a value of ``dt`` (or ±inf/NaN as the rules say).
    """
    t = _float_type(dt)
    _check_rounding(rounding, _FLOAT_ROUNDINGS)
    out = _out_float_dtype(x)
    r = _round_value(t.fmt, _f64(x), rounding, satfinite)
    if t is F64:
        return r
    return r.astype(out)


def is_representable(dt: DType | str, x: Any) -> np.ndarray:
    """Elementwise: is ``x`` exactly a value of ``dt``?  (NaN counts as representable in
    every float type; ±inf only where the type has infinities; -0 not in FNUZ types.)"""
    t = dtype(dt)
    xa = _f64(x)
    with np.errstate(invalid="ignore"):
        if t.is_float:
            r = _round_value(t.fmt, xa, "rn", False)
            same = (r == xa) & (np.signbit(r) == np.signbit(xa))
            return same | (np.isnan(r) & np.isnan(xa))
        if t.is_bool:
            return (xa == 0) | (xa == 1)
        inside = (xa >= t.int_min) & (xa <= t.int_max)
        return inside & (np.floor(xa) == xa)


def ulp(dt: DType | str, x: Any) -> np.ndarray:
    """Spacing of ``dt``'s values in the binade of ``|x|`` (the larger of the two spacings
    next to a power of two); the smallest subnormal at 0; NaN for ±inf and NaN.  float64."""
    fmt = _float_type(dt).fmt
    a = np.abs(_f64(x))
    with np.errstate(all="ignore"):
        finite = np.isfinite(a)
        _, ex = np.frexp(np.where(finite & (a != 0), a, 1.0))
        e = np.where(a == 0, fmt.emin, ex.astype(np.int64) - 1)
        q = np.maximum(e, fmt.emin) - fmt.mantissa_bits
        return np.where(finite, np.ldexp(1.0, q), np.nan)


def approx_bounds(dt: DType | str, exact: Any, ulps: float) -> tuple[np.ndarray, np.ndarray]:
    """An interval ``[lo, hi]`` (float64) containing every result within ``ulps`` ulp of the
    correctly rounded ``exact`` values, for the ranges the verifier uses with approximate
    instructions (``approx_bounds(F32, exp2(x), EX2_APPROX_MAX_ULP)``).  ±inf and NaN give
    themselves as both bounds."""
    v = _f64(exact)
    u = ulp(dt, v)
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(v), v - ulps * u, v)
        hi = np.where(np.isfinite(v), v + ulps * u, v)
    return lo, hi


# ------------------------------------------------------------------------------------------
# bit patterns
# ------------------------------------------------------------------------------------------


def _encode(fmt: FloatFormat, r: np.ndarray) -> np.ndarray:
    """Bit patterns (uint64) of float64 values ``r`` that are values of ``fmt``."""
    m_bits = fmt.mantissa_bits
    with np.errstate(all="ignore"):
        a = np.abs(r)
        nonzero = np.isfinite(a) & (a != 0)
        _, ex = np.frexp(np.where(nonzero, a, 1.0))
        e = ex.astype(np.int64) - 1
        subnormal = e < fmt.emin
        q = np.maximum(e, fmt.emin) - m_bits
        # Integer significand including the implicit one for normals (exact: < 2^(M+1)).
        sig = np.ldexp(np.where(nonzero, a, 0.0), -q).astype(np.uint64)
        biased_minus_one = np.where(subnormal, 0, e + fmt.bias - 1).astype(np.uint64)
        field = np.where(subnormal, sig, (biased_minus_one << np.uint64(m_bits)) + sig)
        field = np.where(nonzero, field, np.uint64(0))
        bits = field << np.uint64(fmt.pad_bits)
        if fmt.has_inf:
            bits = np.where(np.isinf(a), np.uint64(fmt.inf_bits), bits)
        sign = np.where(np.signbit(r), np.uint64(fmt.sign_mask), np.uint64(0))
        bits = bits | sign
        bits = np.where(np.isnan(r), np.uint64(fmt.nan_bits), bits)
    return bits


def to_bits(
    dt: DType | str,
    x: Any,
    *,
    rounding: FloatRounding = "rn",
    satfinite: bool = False,
) -> np.ndarray:
    """Bit patterns (``dt.np_storage``) of ``x`` converted to ``dt``.

    Float types: ``x`` is rounded as by :func:`round_to`; NaN becomes the canonical NaN.
    Integer types: integer ``x`` wraps to the width (two's complement); bool: 0 or 1.
    """
    t = dtype(dt)
    if t.is_float:
        _check_rounding(rounding, _FLOAT_ROUNDINGS)
        r = _round_value(t.fmt, _f64(x), rounding, satfinite)
        if t in (F32, TF32, F64):
            # r holds values of t, exactly representable in the container's float type.
            container = np.float64 if t is F64 else np.float32
            bits = r.astype(container).view(t.np_storage)
            return np.where(np.isnan(r), t.np_storage.type(t.nan_bits), bits)
        return _encode(t.fmt, r).astype(t.np_storage)
    xa = np.asarray(x)
    if t.is_bool:
        return (xa != 0).astype(np.uint8)
    if xa.dtype.kind not in "iub":
        raise DTypeError(
            f"to_bits({t}) needs integer values, got {xa.dtype}",
            hint="convert floats with float_to_int() first",
        )
    return xa.astype(t.np_storage)  # numpy integer casts wrap modulo 2^bits


@cache
def _decode_table(t: DType) -> np.ndarray:
    """float64 value of every bit pattern of a float type of at most 16 bits."""
    fmt = t.fmt
    bits = np.arange(1 << t.bits, dtype=np.int64)
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    mant = bits & ((1 << m_bits) - 1)
    expo = (bits >> m_bits) & ((1 << e_bits) - 1)
    neg = (bits >> (m_bits + e_bits)) & 1
    mag = np.where(
        expo == 0,
        np.ldexp(mant.astype(np.float64), fmt.emin - m_bits),
        np.ldexp((mant + (1 << m_bits)).astype(np.float64), expo - fmt.bias - m_bits),
    )
    val = np.where(neg == 1, -mag, mag)
    top = (1 << e_bits) - 1
    if fmt.nan_style is NanStyle.IEEE:
        val = np.where((expo == top) & (mant == 0), np.where(neg == 1, -np.inf, np.inf), val)
        val = np.where((expo == top) & (mant != 0), np.nan, val)
    elif fmt.nan_style is NanStyle.FN:
        val = np.where((expo == top) & (mant == (1 << m_bits) - 1), np.nan, val)
    else:
        val = np.where(bits == fmt.sign_mask, np.nan, val)
    val.setflags(write=False)
    return val


def from_bits(dt: DType | str, bits: Any) -> np.ndarray:
    """Values (``dt.value_dtype``) of bit patterns of ``dt``.

    f32/f64 patterns are reinterpreted (NaN payloads kept); tf32 reads the top 19 bits
    (the 13 low mantissa bits of the container are ignored); ≤16-bit floats decode
    exactly to float32.  Ints reinterpret the two's-complement pattern; bool is
    ``bits != 0``.
    """
    t = dtype(dt)
    b = np.asarray(bits)
    if b.dtype.kind not in "iu":
        raise DTypeError(f"bit patterns must be integers, got {b.dtype}")
    if t.is_bool:
        return b != 0
    if t.bits < 64 and b.size:
        negative = b.dtype.kind == "i" and bool(np.any(b < 0))
        if negative or np.any((b.astype(np.uint64) >> np.uint64(t.bits)) != 0):
            raise DTypeError(
                f"bit pattern out of range for {t} ({t.bits} bits)",
                hint=f"pass unsigned patterns below 2**{t.bits}",
            )
    s = b.astype(t.np_storage)
    if t.is_int:
        return s.view(t.value_dtype)
    if t is F32:
        return s.view(np.float32)
    if t is F64:
        return s.view(np.float64)
    if t is TF32:
        return (s & np.uint32(0xFFFFE000)).view(np.float32)
    return _decode_table(t)[s.astype(np.intp)].astype(np.float32)


def is_nan_bits(dt: DType | str, bits: Any) -> np.ndarray:
    """Elementwise: is the bit pattern a NaN of float type ``dt``?"""
    t = _float_type(dt)
    fmt = t.fmt
    b = np.asarray(bits).astype(np.uint64)
    if fmt.nan_style is NanStyle.FNUZ:
        return b == np.uint64(fmt.sign_mask)
    pad = np.uint64(fmt.pad_bits)
    field = (b & np.uint64(fmt.sign_mask - 1)) >> pad
    exp_ones = np.uint64(((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits)
    mant_mask = np.uint64((1 << fmt.mantissa_bits) - 1)
    if fmt.nan_style is NanStyle.FN:
        return field == (exp_ones | mant_mask)
    return ((field & exp_ones) == exp_ones) & ((field & mant_mask) != 0)


# ------------------------------------------------------------------------------------------
# float <-> int
# ------------------------------------------------------------------------------------------

_INT_ROUND_FN: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "rni": np.rint,
    "rzi": np.trunc,
    "rmi": np.floor,
    "rpi": np.ceil,
}


def float_to_int(
    x: Any,
    dt: DType | str = "i32",
    rounding: IntRounding = "rni",
    *,
    src: DType | str | None = None,
) -> np.ndarray:
    """``cvt.<rounding>.<dt>.<src>``: round to an integer, clamp to ``dt``'s range; NaN → 0
    (→ 1 << 63 for an f64 source and a 64-bit destination).  ``src`` defaults to f64 for
    float64 input and f32 otherwise.  Returns ``dt.value_dtype``."""
    t = _int_type(dt)
    _check_rounding(rounding, _INT_ROUNDINGS)
    xa = np.asarray(x)
    src_t = dtype(src) if src is not None else (F64 if xa.dtype == np.float64 else F32)
    x64 = xa.astype(np.float64)
    with np.errstate(invalid="ignore"):
        r = _INT_ROUND_FN[rounding](x64)
        nan = np.isnan(r)
        upper = 2.0 ** (t.bits - 1) if t.kind is Kind.SIGNED else 2.0**t.bits
        over = r >= upper  # `upper` is INT_MAX + 1, exactly a float64
        under = r < float(t.int_min)
        mid = ~(nan | over | under)
    out = np.zeros(xa.shape, dtype=t.value_dtype)
    out[mid] = r[mid].astype(t.value_dtype)  # integral and in range: exact
    out[over] = t.int_max
    out[under] = t.int_min
    if src_t is F64 and t.bits == 64:
        out[nan] = np.array(1 << 63, dtype=np.uint64).astype(t.value_dtype)
    return out


def _bit_length(mag: np.ndarray) -> np.ndarray:
    """Bit length of uint64 values (0 for 0)."""
    length = np.zeros(mag.shape, dtype=np.int64)
    v = mag.copy()
    for s in (32, 16, 8, 4, 2, 1):
        big = (v >> np.uint64(s)) != 0
        length += np.where(big, s, 0)
        v = np.where(big, v >> np.uint64(s), v)
    return length + (v != 0)


def int_to_float(
    x: Any,
    dt: DType | str = "f32",
    rounding: FloatRounding = "rn",
    *,
    satfinite: bool = False,
) -> np.ndarray:
    """``cvt.<rounding>.<dt>.sNN/uNN``: the exact integer rounded once to ``dt``.

    The magnitude is rounded to the type's precision with integer arithmetic (so 64-bit
    inputs above 2^53 are not rounded twice); the range rules are those of
    :func:`round_to`.  Returns ``dt.value_dtype``.
    """
    t = _float_type(dt)
    _check_rounding(rounding, _FLOAT_ROUNDINGS)
    xa = np.asarray(x)
    if xa.dtype.kind not in "iub":
        raise DTypeError(f"int_to_float needs integer values, got {xa.dtype}")
    if xa.dtype.kind == "u" or xa.dtype.kind == "b":
        neg = np.zeros(xa.shape, dtype=bool)
        mag = xa.astype(np.uint64)
    else:
        wide = xa.astype(np.int64)
        neg = wide < 0
        as_u = wide.astype(np.uint64)  # two's complement reinterpretation
        mag = np.where(neg, ~as_u + np.uint64(1), as_u)
    precision = t.fmt.precision
    shift = np.maximum(_bit_length(mag) - precision, 0).astype(np.uint64)
    kept = mag >> shift
    dropped = mag & ((np.uint64(1) << shift) - np.uint64(1))
    has_dropped = shift > 0
    one = np.uint64(1)
    half = np.where(has_dropped, one << (np.maximum(shift, one) - one), np.uint64(0))
    if rounding == "rn":
        up = has_dropped & ((dropped > half) | ((dropped == half) & ((kept & np.uint64(1)) == 1)))
    elif rounding == "rna":
        up = has_dropped & (dropped >= half)
    else:
        up = np.zeros(mag.shape, dtype=bool)
    kept = kept + up.astype(np.uint64)
    # kept ≤ 2^precision ≤ 2^53 and shift ≤ 64: the scaling below is exact.
    value = np.ldexp(kept.astype(np.float64), shift.astype(np.int64))
    value = np.where(neg, -value, value)
    r = _round_value(t.fmt, value, rounding, satfinite)  # range rules only: value has ≤ p bits
    return r.astype(t.value_dtype)


def convert(
    x: Any,
    src: DType | str,
    dst: DType | str,
    *,
    rounding: str | None = None,
    saturate: bool = False,
) -> np.ndarray:
    """The interpreter's conversion between any two element types (PTX ``cvt``).

    * float → float: :func:`round_to` (default ``"rn"``; ``saturate`` = ``.satfinite``).
    * float → int: :func:`float_to_int` (default ``"rzi"``, truncation as in C; always
      saturating).
    * int → float: :func:`int_to_float` (default ``"rn"``).
    * int → int: wraps to the destination width (PTX sign/zero extension and ``chop``), or
      clamps to its range with ``saturate`` (``cvt.sat``).
    * bool → anything: 0 or 1; anything → bool: ``x != 0``.

    Returns ``dst.value_dtype``.
    """
    s, d = dtype(src), dtype(dst)
    xa = np.asarray(x)
    if d.is_bool:
        return xa != 0
    if s.is_bool:
        xa = (xa != 0).astype(np.uint8)
        s = dtype("u8")
    if s.is_float and d.is_float:
        r = round_to(d, _f64(xa), rounding=(rounding or "rn"), satfinite=saturate)  # type: ignore[arg-type]
        return r.astype(d.value_dtype)
    if s.is_float:
        return float_to_int(xa, d, (rounding or "rzi"), src=s)  # type: ignore[arg-type]
    if d.is_float:
        return int_to_float(xa, d, (rounding or "rn"), satfinite=saturate)  # type: ignore[arg-type]
    if saturate:
        if xa.dtype.kind == "u":
            wide = np.minimum(xa.astype(np.uint64), np.uint64(d.int_max))
            return wide.astype(d.value_dtype)
        w = xa.astype(np.int64)
        lo = max(d.int_min, -(1 << 63))
        hi = min(d.int_max, (1 << 63) - 1)
        return np.clip(w, lo, hi).astype(d.value_dtype)
    return xa.astype(d.value_dtype)  # modular


# ------------------------------------------------------------------------------------------
# elementwise arithmetic
# ------------------------------------------------------------------------------------------


def _arith_type(dt: DType | str) -> DType:
    t = _float_type(dt)
    if t is not F64 and t.fmt.precision > 25:
        raise DTypeError(f"no arithmetic model for {t}")
    return t


def _finish(t: DType, r: np.ndarray) -> np.ndarray:
    if t is F64:
        return r
    return _round_value(t.fmt, r, "rn", False).astype(t.value_dtype)


def add(a: Any, b: Any, dt: DType | str = "f32") -> np.ndarray:
    """``add.rn``: a + b rounded once to nearest even (exact via float64, see module doc)."""
    t = _arith_type(dt)
    with np.errstate(all="ignore"):
        return _finish(t, _f64(a) + _f64(b))


def sub(a: Any, b: Any, dt: DType | str = "f32") -> np.ndarray:
    """``sub.rn``: a − b rounded once to nearest even."""
    t = _arith_type(dt)
    with np.errstate(all="ignore"):
        return _finish(t, _f64(a) - _f64(b))


def mul(a: Any, b: Any, dt: DType | str = "f32") -> np.ndarray:
    """``mul.rn``: a · b rounded once to nearest even."""
    t = _arith_type(dt)
    with np.errstate(all="ignore"):
        return _finish(t, _f64(a) * _f64(b))


def div(a: Any, b: Any, dt: DType | str = "f32") -> np.ndarray:
    """``div.rn``: a / b rounded once to nearest even (x/±0 = ±inf, 0/0 = NaN)."""
    t = _arith_type(dt)
    with np.errstate(all="ignore"):
        return _finish(t, _f64(a) / _f64(b))


def rcp(x: Any, dt: DType | str = "f32") -> np.ndarray:
    """``rcp.rn``: 1/x rounded once to nearest even; ±0 → ±inf, ±inf → ±0."""
    return div(1.0, x, dt)


def sqrt(x: Any, dt: DType | str = "f32") -> np.ndarray:
    """``sqrt.rn``: √x rounded once to nearest even; √(−0) = −0, negative → NaN."""
    t = _arith_type(dt)
    with np.errstate(all="ignore"):
        return _finish(t, np.sqrt(_f64(x)))


def _fma_core(p: np.ndarray, c: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """round_fmt(p + c) for float64 ``p`` (an exact product) and ``c``; see module doc."""
    with np.errstate(all="ignore"):
        s = p + c
        # TwoSum: s + err == p + c exactly (no overflow is possible for these operands).
        bv = s - p
        err = (p - (s - bv)) + (c - bv)
        inexact = np.isfinite(s) & np.isfinite(err) & (err != 0)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        toward = np.where(err > 0, np.inf, -np.inf)
        s = np.where(inexact & even, np.nextafter(s, toward), s)  # round to odd
    return _round_value(fmt, s, "rn", False)


def _fma_exact_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.empty(np.broadcast(a, b, c).shape, dtype=np.float64)
    with np.errstate(all="ignore"):
        naive = a * b + c  # right for every non-finite case (inf·0, inf − inf, NaN)
    flat = out.reshape(-1)
    operands = (np.broadcast_to(v, out.shape).reshape(-1) for v in (a, b, c, naive))
    for i, (x, y, z, n) in enumerate(zip(*operands)):
        if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
            flat[i] = n
            continue
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        if exact == 0:
            # sign of an exact zero: -0 only if both addends are -0 (round to nearest)
            prod_neg = np.signbit(x) != np.signbit(y)
            flat[i] = -0.0 if (prod_neg and np.signbit(z)) else 0.0
            continue
        try:
            flat[i] = float(exact)  # int/int true division: correctly rounded
        except OverflowError:
            flat[i] = np.inf if exact > 0 else -np.inf
    return out


def fma(a: Any, b: Any, c: Any, dt: DType | str = "f32") -> np.ndarray:
    """``fma.rn``: a·b + c with a single rounding to nearest even.

    Operands are taken as values of ``dt`` (pass values of that type).  Exact for every
    type; see the module docstring for why the float64 evaluation with TwoSum and round to
    odd is exact for types of precision ≤ 26.
    """
    t = _float_type(dt)
    a64, b64, c64 = _f64(a), _f64(b), _f64(c)
    if t is F64:
        return _fma_exact_f64(a64, b64, c64)
    if t.fmt.precision > 26:
        raise DTypeError(f"no fma model for {t}")
    with np.errstate(all="ignore"):
        p = a64 * b64  # exact: 2·precision ≤ 53 bits, exponents well inside float64's
    return _fma_core(p, c64, t.fmt).astype(t.value_dtype)


def maximum(a: Any, b: Any, *, nan: bool = False, dt: DType | str = "f32") -> np.ndarray:
    """PTX ``max{.NaN}``: the larger operand; +0 > −0; one NaN operand → the other operand
    (both NaN → NaN); with ``nan=True`` any NaN operand → NaN."""
    return _minmax(a, b, nan, dt, larger=True)


def minimum(a: Any, b: Any, *, nan: bool = False, dt: DType | str = "f32") -> np.ndarray:
    """PTX ``min{.NaN}``: the smaller operand; −0 < +0; NaN rules as :func:`maximum`."""
    return _minmax(a, b, nan, dt, larger=False)


def _minmax(a: Any, b: Any, nan: bool, dt: DType | str, *, larger: bool) -> np.ndarray:
    t = _float_type(dt)
    x, y = np.broadcast_arrays(_f64(a), _f64(b))
    with np.errstate(invalid="ignore"):
        pick_x = (x > y) if larger else (x < y)
        # Equal values differ only for ±0: max prefers +0, min prefers −0.
        tie_x = (x == y) & (np.signbit(x) != larger)
        r = np.where(pick_x | tie_x, x, y)
        xn, yn = np.isnan(x), np.isnan(y)
        if nan:
            r = np.where(xn | yn, np.nan, r)
        else:
            r = np.where(xn, y, np.where(yn, x, r))
    return r.astype(t.value_dtype)


# ---- correctly rounded transcendental functions ----------------------------------------------

#: Half-width, in units of the target quantum, of the band around a rounding midpoint in
#: which a float64 approximation (relative error ≤ 2^-52) is not trusted and the result is
#: recomputed with 200-bit arithmetic.  2^-(53 - 24 - 3) for f32 results.
_MIDPOINT_GUARD = 2.0**-26


def _round_fraction(fmt: FloatFormat, q: Fraction) -> float:
    """Round an exact positive rational to ``fmt`` (nearest even); returns a float64."""
    num, den = q.numerator, q.denominator
    e = num.bit_length() - den.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    quantum_exp = max(e, fmt.emin) - fmt.mantissa_bits
    scaled = q / (Fraction(2) ** quantum_exp)
    n, rem = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rem
    if twice > scaled.denominator or (twice == scaled.denominator and n % 2 == 1):
        n += 1
    v = Fraction(n) * Fraction(2) ** quantum_exp
    if v > Fraction(fmt.max_finite):
        return float("inf") if fmt.has_inf else float("nan")
    return float(v)


def _correctly_rounded(
    t: DType,
    x: np.ndarray,
    approx: Callable[[np.ndarray], np.ndarray],
    precise: Callable[[Any], Any],
) -> np.ndarray:
    """Round ``approx(x)`` (float64, relative error ≤ 2^-52) to ``t``, recomputing with
    mpmath where the approximation is too close to a rounding midpoint to decide."""
    fmt = t.fmt
    with np.errstate(all="ignore"):
        y = approx(x)
        r = _round_value(fmt, y, "rn", False)
        a = np.abs(y)
        finite = np.isfinite(a) & (a != 0)
        quantum = ulp(t, np.where(finite, a, 1.0))
        pos = a / quantum
        frac = pos - np.floor(pos)
        hard = finite & (np.abs(frac - 0.5) <= _MIDPOINT_GUARD)
    if np.any(hard):
        import mpmath

        idx = np.flatnonzero(hard)
        flat_r = r.reshape(-1)
        flat_x = x.reshape(-1)
        with mpmath.workprec(200):
            for i in idx:
                v = precise(mpmath.mpf(float(flat_x[i])))
                man, exp = v.man_exp
                q = Fraction(int(man)) * Fraction(2) ** int(exp)
                flat_r[i] = np.copysign(_round_fraction(fmt, abs(q)), float(v))
    return r


def exp2(x: Any, dt: DType | str = "f32") -> np.ndarray:
    """2^x correctly rounded to ``dt`` (the interpreter's ``ex2``; hardware ``ex2.approx``
    is within :data:`EX2_APPROX_MAX_ULP` ulp of this).  −inf → +0, ±0 → 1, +inf → +inf,
    NaN → NaN."""
    t = _float_type(dt)
    if t is F64 or t.fmt.precision > 24:
        raise DTypeError(f"no exp2 model for {t}", hint="exp2 is defined for f32, f16, bf16")
    x64 = _f64(x)

    def precise(v: Any) -> Any:
        import mpmath

        return mpmath.power(2, v)

    return _correctly_rounded(t, x64, np.exp2, precise).astype(t.value_dtype)


# ------------------------------------------------------------------------------------------
# matrix multiply-accumulate
# ------------------------------------------------------------------------------------------


def mma(
    a: Any,
    b: Any,
    c: Any | None = None,
    *,
    a_dtype: DType | str,
    b_dtype: DType | str | None = None,
    acc_dtype: DType | str = "f32",
    satfinite: bool = False,
) -> np.ndarray:
    """D = A·B + C as the reference interpreter defines it (see the module docstring):
    A (M×K) of ``a_dtype``, B (K×N) of ``b_dtype`` (default ``a_dtype``), C (M×N) of
    ``acc_dtype`` or None for zeros.  Float: k-ordered chain of correctly rounded fused
    multiply-adds into the accumulator type.  Integer: exact, wrapped to 32 bits (clamped
    with ``satfinite``).  Operands that are not values of their types are rejected.
    Returns ``acc_dtype.value_dtype``.
    """
    ta = dtype(a_dtype)
    tb = dtype(b_dtype) if b_dtype is not None else ta
    tacc = dtype(acc_dtype)
    am, bm = np.asarray(a), np.asarray(b)
    if am.ndim != 2 or bm.ndim != 2 or am.shape[1] != bm.shape[0]:
        raise DTypeError(
            f"mma shapes do not match: A {am.shape}, B {bm.shape}", hint="A is M×K and B is K×N"
        )
    m, k = am.shape
    n = bm.shape[1]
    cm = np.zeros((m, n)) if c is None else np.asarray(c)
    if cm.shape != (m, n):
        raise DTypeError(f"mma accumulator shape {cm.shape} is not {(m, n)}")
    for name, arr, t in (("A", am, ta), ("B", bm, tb), ("C", cm, tacc)):
        if not np.all(is_representable(t, arr)):
            raise DTypeError(
                f"mma operand {name} holds values that are not {t} values",
                hint=f"round the operand with round_to({t.name!r}, ...) first",
            )
    if tacc.is_int:
        if not (ta.is_int and tb.is_int):
            raise DTypeError(f"integer accumulator {tacc} needs integer operands")
        exact = am.astype(np.int64) @ bm.astype(np.int64) + cm.astype(np.int64)
        if satfinite:
            exact = np.clip(exact, tacc.int_min, tacc.int_max)
        return exact.astype(tacc.value_dtype)
    if not (ta.is_float and tb.is_float and tacc.is_float):
        raise DTypeError(f"float accumulator {tacc} needs float operands")
    acc = cm.astype(np.float64)
    a64, b64 = am.astype(np.float64), bm.astype(np.float64)
    exact_products = ta.fmt.precision + tb.fmt.precision <= 53
    for kk in range(k):
        ak = a64[:, kk : kk + 1]
        bk = b64[kk : kk + 1, :]
        if tacc is F64 or not exact_products:
            acc = _fma_exact_f64(np.broadcast_to(ak, (m, n)), np.broadcast_to(bk, (m, n)), acc)
            if tacc is not F64:
                acc = _round_value(tacc.fmt, acc, "rn", False)
        else:
            with np.errstate(all="ignore"):
                acc = _fma_core(ak * bk, acc, tacc.fmt)
    return acc.astype(tacc.value_dtype)


def mma_tolerance(
    a: Any,
    b: Any,
    c: Any | None = None,
    *,
    acc_dtype: DType | str = "f32",
    in_dtype: DType | str | None = None,
    unit_roundoff: float | None = None,
) -> np.ndarray:
    """Elementwise bound (float64) on |D₁ − D₂| for two evaluations of A·B + C that round
    each of their K + 1 additions with relative error at most ``unit_roundoff``:
    2·(K + 1)·u·(|C| + |A|·|B|), plus a few subnormal quanta.  A first-order bound, for
    comparing the interpreter with hardware.

    Default u: the accumulator's epsilon (one full ulp, which also covers truncating
    adders), or :data:`FP8_MMA_UNIT_ROUNDOFF` when ``in_dtype`` is an 8-bit float: FP8
    matrix products on sm_90 keep fewer accumulator bits than f32 (an H200 FP8 GEMM
    differed from the interpreter by up to 1.5e-4·(|A|·|B|) for K from 32 to 2048, where
    bf16 stayed below 2e-7).
    """
    tacc = _float_type(acc_dtype)
    am, bm = np.abs(_f64(a)), np.abs(_f64(b))
    k = am.shape[1]
    cm = np.zeros((am.shape[0], bm.shape[1])) if c is None else np.abs(_f64(c))
    if unit_roundoff is not None:
        u = unit_roundoff
    elif in_dtype is not None and dtype(in_dtype).is_float and dtype(in_dtype).bits == 8:
        u = max(FP8_MMA_UNIT_ROUNDOFF, tacc.epsilon)
    else:
        u = tacc.epsilon
    scale = cm + am @ bm
    return 2.0 * (k + 1) * u * scale * (1 + 2.0**-20) + 2 * (k + 1) * tacc.min_subnormal
