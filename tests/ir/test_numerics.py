"""Exact numerics, checked against independent oracles.

* ml_dtypes (bf16, the four FP8 formats) and numpy (f16, f32) for decoding every bit pattern
  and encoding dense float32 samples (ties, subnormals, boundaries, overflow, ±inf, NaN);
* a "grid" oracle that rounds by searching the sorted list of a format's values (decoded by
  the oracle above) for round-toward-zero, ties-away and saturation;
* exact rational arithmetic (``fractions``) and 120-bit mpmath for arithmetic, fma, exp2,
  int conversions and MMA.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from argus.ir import dtypes as D
from argus.ir import numerics as nx
from argus.ir.dtypes import DType, DTypeError, dtype

ORACLE = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "e4m3fn": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}
SMALL = tuple(ORACLE)
RNG_SEED = 20240611


# ------------------------------------------------------------------------------------------
# oracles
# ------------------------------------------------------------------------------------------


def oracle_decode(name: str, bits: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return bits.astype(dtype(name).np_storage).view(ORACLE[name]).astype(np.float64)


def oracle_encode(name: str, x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even encoding by the oracle library (float32 input)."""
    with np.errstate(all="ignore"):
        return x.astype(ORACLE[name]).view(dtype(name).np_storage)


def exact_round(q: Fraction, t: DType, mode: str = "rn", satfinite: bool = False) -> float:
    """Round an exact rational to the values of ``t`` (rational arithmetic only)."""
    if q == 0:
        return 0.0
    sign = -1.0 if q < 0 else 1.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    k = max(e, t.emin) - t.mantissa_bits
    scaled = a / Fraction(2) ** k
    n = math.floor(scaled)
    rem = scaled - n
    if mode == "rn":
        n += rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1)
    elif mode == "rna":
        n += rem >= Fraction(1, 2)
    v = Fraction(n) * Fraction(2) ** k
    if v > Fraction(t.max_finite):
        if satfinite or mode == "rz":
            return sign * t.max_finite
        return sign * math.inf if t.has_inf else math.nan
    result = sign * float(v)
    if result == 0 and not t.has_negative_zero:
        return 0.0
    return result


def grid(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted non-negative finite values of a format (from the oracle) and their patterns,
    followed by the "virtual" next value above the largest (pattern max_bits + 1)."""
    t = dtype(name)
    bits = np.arange(t.fmt.sign_mask, dtype=np.int64)  # sign clear
    vals = oracle_decode(name, bits)
    keep = np.isfinite(vals)
    vals, bits = vals[keep], bits[keep]
    order = np.argsort(vals, kind="stable")
    vals, bits = vals[order], bits[order]
    top_spacing = vals[-1] - vals[-2]
    return np.append(vals, vals[-1] + top_spacing), np.append(bits, t.max_bits + 1)


def grid_round(name: str, x: np.ndarray, mode: str, satfinite: bool) -> np.ndarray:
    """Round float64 ``x`` by searching the format's value grid; returns float64."""
    t = dtype(name)
    vals, bits = grid(name)
    a = np.abs(x)
    finite = np.isfinite(a)
    a_safe = np.where(finite, a, 0.0)
    hi_i = np.clip(np.searchsorted(vals, a_safe, side="left"), 0, len(vals) - 1)
    lo_i = np.clip(np.where(vals[hi_i] == a_safe, hi_i, hi_i - 1), 0, len(vals) - 1)
    lo, hi = vals[lo_i], vals[hi_i]
    beyond = a_safe > vals[-1]
    if mode == "rz":
        r = np.where(beyond, vals[-1], lo)
    else:
        d_lo, d_hi = a_safe - lo, hi - a_safe
        tie = d_lo == d_hi
        if mode == "rn":
            tie_hi = (bits[hi_i] % 2) == 0
        else:  # rna
            tie_hi = np.ones_like(tie)
        take_hi = (d_hi < d_lo) | (tie & tie_hi)
        r = np.where(take_hi & (hi_i != lo_i), hi, lo)
        r = np.where(beyond, np.inf, r)
    max_finite = t.max_finite
    over = r > max_finite
    if satfinite or mode == "rz":
        r = np.where(over, max_finite, r)
    else:
        r = np.where(over, np.inf if t.has_inf else np.nan, r)
    r = np.where(np.isinf(a), max_finite if satfinite else (np.inf if t.has_inf else np.nan), r)
    r = np.where(np.isnan(a), np.nan, r)
    r = np.copysign(r, x)
    if not t.has_negative_zero:
        r = np.where(r == 0, 0.0, r)
    return r


def dense_f32_sample(name: str) -> np.ndarray:
    """Every format value, every midpoint between neighbours, each ±1 float32 ulp, both
    signs; the overflow threshold and around it; a strided scan of all float32 patterns."""
    vals, _ = grid(name)
    with np.errstate(over="ignore"):  # bf16's virtual value above the maximum is 2^128
        v32 = vals.astype(np.float32)
        mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)  # exact: one more bit
    pts = np.concatenate([v32, mids])
    up = np.nextafter(pts, np.float32(np.inf))
    down = np.nextafter(pts, np.float32(0))
    extra = np.array(
        [np.inf, np.nan, 1e30, 3.0e38, np.finfo(np.float32).max, np.finfo(np.float32).tiny,
         np.float32(2.0**-149), 0.0],
        dtype=np.float32,
    )  # fmt: skip
    scan = np.arange(0, 1 << 32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32)
    pos = np.concatenate([pts, up, down, extra])
    return np.concatenate([pos, -pos, scan])


def f32_random(rng: np.random.Generator, n: int, lo_exp: int = -140, hi_exp: int = 120):
    """float32 values with random sign, exponent in [lo_exp, hi_exp) and random mantissa."""
    mant = rng.random(n) + 1.0
    e = rng.integers(lo_exp, hi_exp, n)
    sign = rng.choice([-1.0, 1.0], n)
    return (sign * np.ldexp(mant, e)).astype(np.float32)


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True)) and bool(
        np.array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)]))
    )


# ------------------------------------------------------------------------------------------
# decode / encode against the oracle
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SMALL)
def test_from_bits_exhaustive(name: str) -> None:
    t = dtype(name)
    bits = np.arange(1 << t.bits, dtype=t.np_storage)
    got = nx.from_bits(t, bits)
    assert got.dtype == np.float32
    assert bits_equal(got.astype(np.float64), oracle_decode(name, bits))
    assert np.array_equal(np.isnan(got), nx.is_nan_bits(t, bits))


@pytest.mark.parametrize("name", SMALL)
def test_round_trip_exhaustive(name: str) -> None:
    t = dtype(name)
    bits = np.arange(1 << t.bits, dtype=t.np_storage)
    back = nx.to_bits(t, nx.from_bits(t, bits))
    nan = nx.is_nan_bits(t, bits)
    assert back.dtype == t.np_storage
    assert np.array_equal(back[~nan], bits[~nan])
    assert np.all(back[nan] == t.nan_bits)


@pytest.mark.parametrize("name", SMALL)
def test_to_bits_round_to_nearest_even_matches_oracle(name: str) -> None:
    t = dtype(name)
    x = dense_f32_sample(name)
    got = nx.to_bits(t, x)
    ref = oracle_encode(name, x)
    ref_nan = np.isnan(oracle_decode(name, ref))
    assert np.array_equal(nx.is_nan_bits(t, got), ref_nan)
    assert np.array_equal(got[~ref_nan], ref[~ref_nan])
    assert np.all(got[ref_nan] == t.nan_bits)
    # round_to gives the same values, in float32 for float32 input
    r = nx.round_to(t, x)
    assert r.dtype == np.float32
    assert bits_equal(r.astype(np.float64), oracle_decode(name, ref))


@pytest.mark.parametrize("name", SMALL)
def test_satfinite_matches_oracle_on_clamped_input(name: str) -> None:
    t = dtype(name)
    x = dense_f32_sample(name)
    got = nx.to_bits(t, x, satfinite=True)
    clamped = np.clip(x, np.float32(-t.max_finite), np.float32(t.max_finite))  # keeps NaN
    ref = oracle_encode(name, clamped)
    ref_nan = np.isnan(x)
    assert np.array_equal(nx.is_nan_bits(t, got), ref_nan)
    assert np.array_equal(got[~ref_nan], ref[~ref_nan])
    vals = nx.from_bits(t, got)
    assert np.all(np.abs(vals[~ref_nan]) <= t.max_finite)


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize(("mode", "sat"), [("rn", False), ("rn", True), ("rz", False),
                                           ("rz", True), ("rna", False), ("rna", True)])  # fmt: skip
def test_round_to_matches_grid_oracle(name: str, mode: str, sat: bool) -> None:
    t = dtype(name)
    with np.errstate(invalid="ignore"):  # signaling NaNs in the scan
        x = dense_f32_sample(name).astype(np.float64)
    got = nx.round_to(t, x, rounding=mode, satfinite=sat)  # type: ignore[arg-type]
    assert got.dtype == np.float64
    assert bits_equal(got, grid_round(name, x, mode, sat))


@pytest.mark.parametrize("name", SMALL)
def test_round_to_from_float64_between_float32_values(name: str) -> None:
    """float64 inputs a hair away from every midpoint (closer than any float32 step)."""
    vals, _ = grid(name)
    mids = (vals[1:] + vals[:-1]) / 2
    x = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40), vals * (1 + 2.0**-45)])
    x = np.concatenate([x, -x])
    for mode in ("rn", "rz", "rna"):
        got = nx.round_to(name, x, rounding=mode)  # type: ignore[arg-type]
        assert bits_equal(got, grid_round(name, x, mode, False))


finite64 = st.floats(allow_nan=False, allow_infinity=False)


@given(finite64, st.sampled_from(["f32", "bf16", "f16", "e4m3fn", "e5m2fnuz", "tf32", "f64"]),
       st.sampled_from(["rn", "rz", "rna"]), st.booleans())  # fmt: skip
def test_round_to_matches_exact_rounding(v: float, name: str, mode: str, sat: bool) -> None:
    t = dtype(name)
    got = float(nx.round_to(t, v, rounding=mode, satfinite=sat))  # type: ignore[arg-type]
    ref = exact_round(Fraction(v), t, mode, sat)
    if ref == 0:
        ref = math.copysign(0.0, v) if t.has_negative_zero else 0.0
    assert bits_equal(np.array([got]), np.array([ref]))


f32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(f32s, f32s, f32s)
def test_fma_matches_exact_rounding(a: float, b: float, c: float) -> None:
    got = nx.fma(np.float32(a), np.float32(b), np.float32(c))
    rational_check("fma", np.asarray(got), (np.array(a), np.array(b), np.array(c)), D.F32)


def test_overflow_rules_per_format() -> None:
    big = np.array([1e6, -1e6, np.inf, -np.inf, np.nan])
    r = nx.round_to(D.E4M3FN, big)
    assert np.all(np.isnan(r))  # no infinity: overflow and inf give NaN
    assert np.array_equal(nx.round_to(D.E4M3FN, big[:4], satfinite=True), [448, -448, 448, -448])
    assert np.array_equal(nx.round_to(D.E5M2, big[:4]), [np.inf, -np.inf, np.inf, -np.inf])
    sat = nx.round_to(D.E5M2, big[:4], satfinite=True)
    assert np.array_equal(sat, [57344, -57344, 57344, -57344])
    assert np.isnan(nx.round_to(D.E5M2, np.nan, satfinite=True))
    for t in (D.E4M3FNUZ, D.E5M2FNUZ):
        assert np.all(nx.to_bits(t, big) == 0x80)
    # e4m3fn: 464 is the tie between 448 (even) and the virtual 480 -> 448; above it, NaN
    assert nx.round_to(D.E4M3FN, 464.0) == 448
    assert np.isnan(nx.round_to(D.E4M3FN, np.nextafter(464.0, 500.0)))
    assert nx.round_to(D.E4M3FN, 479.0, rounding="rz") == 448
    # bf16 from f32: the largest f32 rounds to +inf, and to the bf16 maximum under rz
    fmax = float(np.finfo(np.float32).max)
    assert nx.round_to(D.BF16, fmax) == np.inf
    assert nx.round_to(D.BF16, fmax, rounding="rz") == D.BF16.max_finite


def test_zero_signs() -> None:
    for t in (D.BF16, D.F16, D.E4M3FN, D.E5M2, D.E4M3FNUZ, D.E5M2FNUZ):
        q = t.min_subnormal / 4
        tiny = np.array([-q, -0.0, q, 0.0])
        if not t.has_negative_zero:
            assert not np.any(np.signbit(nx.round_to(t, tiny)))
            assert np.all(nx.to_bits(t, tiny) == 0)
            continue
        assert np.array_equal(np.signbit(nx.round_to(t, tiny)), [True, True, False, False])
        assert np.array_equal(nx.to_bits(t, tiny), [t.fmt.sign_mask, t.fmt.sign_mask, 0, 0])


def test_f32_round_to_matches_numpy_cast() -> None:
    rng = np.random.default_rng(RNG_SEED)
    raw = rng.integers(0, 1 << 63, 400_000, dtype=np.int64).astype(np.uint64)
    raw |= rng.integers(0, 2, raw.size).astype(np.uint64) << np.uint64(63)
    x = raw.view(np.float64)
    # float64 values at and around float32 midpoints, near the subnormal and overflow ends
    f = f32_random(rng, 100_000, -160, 128).astype(np.float64)
    nxt = np.nextafter(f.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    mid = (f + nxt) / 2
    edge = np.array([2.0**128 - 2.0**103, 2.0**128 - 2.0**104, 2.0**-150, 2.0**-151, 3 * 2.0**-151])
    mids = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), edge])
    x = np.concatenate([x, mids, -mids])
    got = nx.round_to(D.F32, x)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(np.float32).astype(np.float64)
    assert bits_equal(got, ref)
    bits = nx.to_bits(D.F32, x)
    with np.errstate(over="ignore", invalid="ignore"):
        ref_bits = x.astype(np.float32).view(np.uint32)
    ok = ~np.isnan(x)
    assert np.array_equal(bits[ok], ref_bits[ok])
    assert np.all(bits[~ok] == 0x7FFFFFFF)


def test_f32_round_toward_zero() -> None:
    rng = np.random.default_rng(RNG_SEED + 1)
    f = f32_random(rng, 50_000, -160, 128).astype(np.float64)
    x = np.concatenate([f * (1 + 2.0**-30), f * (1 - 2.0**-30), f, [1e39, -1e39, 2.0**-160]])
    got = nx.round_to(D.F32, x, rounding="rz")
    with np.errstate(over="ignore"):
        rn = x.astype(np.float32)
    toward0 = np.nextafter(rn, np.float32(0)).astype(np.float64)
    ref = np.where(np.abs(rn.astype(np.float64)) > np.abs(x), toward0, rn.astype(np.float64))
    ref = np.clip(ref, -D.F32.max_finite, D.F32.max_finite)
    assert bits_equal(got, ref)


def tf32_oracle(x: np.ndarray, mode: str) -> np.ndarray:
    """tf32 rounding by integer arithmetic on float32 patterns (finite, non-NaN inputs)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    low = np.uint64(0x1FFF)
    if mode == "rn":
        b = b + np.uint64(0xFFF) + ((b >> np.uint64(13)) & np.uint64(1))
    elif mode == "rna":
        b = b + np.uint64(0x1000)
    b = (b & ~low).astype(np.uint32)
    return b


@pytest.mark.parametrize("mode", ["rn", "rz", "rna"])
def test_tf32_matches_bit_arithmetic(mode: str) -> None:
    rng = np.random.default_rng(RNG_SEED + 2)
    x = rng.integers(0, 1 << 32, 500_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ties = (rng.integers(0, 1 << 19, 50_000, dtype=np.uint64) << np.uint64(13)) | np.uint64(0x1000)
    x = np.concatenate([x, ties.astype(np.uint32).view(np.float32), [np.float32(3.4e38)]])
    x = x[np.isfinite(x)]
    bits = nx.to_bits(D.TF32, x, rounding=mode)  # type: ignore[arg-type]
    ref = tf32_oracle(x, mode)
    if mode == "rz":  # rz never rounds past the largest finite value
        ref = np.where((ref & 0x7FFFFFFF) == 0x7F800000, ref - 0x2000, ref).astype(np.uint32)
    assert np.array_equal(bits, ref)
    assert np.array_equal(nx.from_bits(D.TF32, bits), bits.view(np.float32))
    vals = nx.round_to(D.TF32, x, rounding=mode)  # type: ignore[arg-type]
    assert np.array_equal(vals.view(np.uint32), bits)
    assert nx.to_bits(D.TF32, np.nan) == 0x7FFFFFFF
    assert nx.from_bits(D.TF32, np.uint32(0x3F801FFF)) == 1.0  # low 13 bits are ignored


def test_f64_round_trip() -> None:
    x = np.array([1.0, -0.0, np.pi, 5e-324, -np.inf, 1e308])
    bits = nx.to_bits(D.F64, x)
    assert bits.dtype == np.uint64
    assert np.array_equal(bits, x.view(np.uint64))
    assert bits_equal(nx.from_bits(D.F64, bits), x)
    assert nx.to_bits(D.F64, np.nan) == 0x7FFFFFFFFFFFFFFF


def test_is_representable_and_ulp() -> None:
    x = np.array([1.0, 1.0 + 2.0**-7, 1.0 + 2.0**-8, 448.0, 480.0, -0.0, np.inf, np.nan])
    assert nx.is_representable(D.BF16, x).tolist() == [1, 1, 0, 1, 1, 1, 1, 1]
    assert nx.is_representable(D.E4M3FN, x).tolist() == [1, 0, 0, 1, 0, 1, 0, 1]
    assert nx.is_representable(D.E4M3FNUZ, [-0.0, 0.0, 240.0, 256.0]).tolist() == [0, 1, 1, 0]
    assert nx.is_representable(D.I8, [127, 128, -128, 1.5]).tolist() == [1, 0, 1, 0]
    assert nx.ulp(D.F32, [1.0, 2.0**-149, 0.0, 3.0]).tolist() == [2.0**-23, 2.0**-149,
                                                                  2.0**-149, 2.0**-22]  # fmt: skip
    assert nx.ulp(D.E4M3FN, [448.0, 1.0])[0] == 32.0


def test_from_bits_validates_patterns() -> None:
    with pytest.raises(DTypeError):
        nx.from_bits(D.E4M3FN, np.array([256]))
    with pytest.raises(DTypeError):
        nx.from_bits(D.BF16, np.array([-1]))
    with pytest.raises(DTypeError):
        nx.from_bits(D.F32, np.array([1.0]))
    with pytest.raises(DTypeError):
        nx.round_to(D.BF16, 1.0, rounding="rm")  # type: ignore[arg-type]
    with pytest.raises(DTypeError):
        nx.round_to(D.I32, 1.0)


def test_int_and_bool_bits() -> None:
    assert nx.to_bits(D.I8, np.array([-1, 127, 128])).tolist() == [255, 127, 128]
    assert nx.from_bits(D.I8, np.array([255, 127, 128], np.uint8)).tolist() == [-1, 127, -128]
    assert nx.to_bits(D.I32, np.array([-1])).tolist() == [0xFFFFFFFF]
    assert nx.to_bits(D.BOOL, [True, False, 3]).tolist() == [1, 0, 1]
    assert nx.from_bits(D.BOOL, np.array([0, 1], np.uint8)).tolist() == [False, True]
    with pytest.raises(DTypeError):
        nx.to_bits(D.I32, np.array([1.5]))


# ------------------------------------------------------------------------------------------
# float <-> int
# ------------------------------------------------------------------------------------------

INT_NAMES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]


def f2i_oracle(v: float, t: DType, mode: str, src_f64: bool) -> int:
    if math.isnan(v):
        return (t.int_min if t.is_signed else 1 << 63) if (src_f64 and t.bits == 64) else 0
    if math.isinf(v):
        return t.int_max if v > 0 else t.int_min
    q = Fraction(v)
    n = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}[mode](q)
    return min(max(n, t.int_min), t.int_max)


def f2i_sample() -> np.ndarray:
    rng = np.random.default_rng(RNG_SEED + 3)
    halves = np.arange(-10, 10) + 0.5
    bounds = []
    for b in (7, 8, 15, 16, 31, 32, 63, 64):
        p = 2.0**b
        bounds += [p, -p, p - 0.5, p + 1, -p - 1, -p + 0.5, p - 1]
    bounds += [np.nextafter(2.0**63, 0), np.nextafter(2.0**64, 0), 2147483520.0, 4294967040.0]
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30, -0.7]
    rand = f32_random(rng, 800, -3, 70).astype(np.float64)
    return np.concatenate([halves, bounds, special, rand])


@pytest.mark.parametrize("name", INT_NAMES)
def test_float_to_int_matches_oracle(name: str) -> None:
    t = dtype(name)
    x64 = f2i_sample()
    for mode in ("rni", "rzi", "rmi", "rpi"):
        for src_f64 in (False, True):
            x = x64 if src_f64 else x64.astype(np.float32)
            got = nx.float_to_int(x, t, mode)  # type: ignore[arg-type]
            assert got.dtype == t.value_dtype
            xs = x.astype(np.float64)
            ref = [f2i_oracle(float(v), t, mode, src_f64) for v in xs]
            assert [int(g) for g in got] == ref, (name, mode, src_f64)


def test_cvt_rni_s32_f32_examples() -> None:
    x = np.array([2.5, 3.5, -2.5, 1e10, -1e10, np.nan, -0.4, 2147483520.0], np.float32)
    assert nx.float_to_int(x).tolist() == [2, 4, -2, 2**31 - 1, -(2**31), 0, 0, 2147483520]
    assert nx.float_to_int(x, "i32", "rzi").tolist()[:3] == [2, 3, -2]
    assert nx.float_to_int(np.nan, "u64", src="f64") == 1 << 63
    assert nx.float_to_int(np.nan, "i64", src="f64") == -(1 << 63)
    assert nx.float_to_int(np.nan, "i64", src="f32") == 0


@pytest.mark.parametrize(
    "name", ["f32", "f16", "bf16", "e4m3fn", "e5m2", "e4m3fnuz", "tf32", "f64"]
)
def test_int_to_float_matches_exact_rounding(name: str) -> None:
    t = dtype(name)
    rng = np.random.default_rng(RNG_SEED + 4)
    ints = [0, 1, -1, 2**24 + 1, 2**24 + 3, 2**53 + 1, 2**63 - 1, -(2**63), 2**62 + 2**38 + 1,
            65504, 65519, 65520, 464, 465, -465, 16_777_217, 33_554_435]  # fmt: skip
    ints += [int(v) for v in rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64)]
    ints += [int(v) >> int(s) for v, s in zip(rng.integers(0, 2**63 - 1, 3000, dtype=np.int64),
                                              rng.integers(0, 63, 3000))]  # fmt: skip
    x = np.array(ints, dtype=np.int64)
    for mode in ("rn", "rz", "rna"):
        got = nx.int_to_float(x, t, mode).astype(np.float64)  # type: ignore[arg-type]
        ref = np.array([exact_round(Fraction(v), t, mode) for v in ints])
        assert bits_equal(got, ref), (name, mode)
    big = np.array([2**64 - 1, 2**63 + 2**39 + 1, 12345], dtype=np.uint64)
    got = nx.int_to_float(big, t).astype(np.float64)
    ref = np.array([exact_round(Fraction(int(v)), t) for v in big])
    assert bits_equal(got, ref)


def test_int_to_float_matches_numpy_for_f32() -> None:
    rng = np.random.default_rng(RNG_SEED + 5)
    x = rng.integers(-(2**63), 2**63 - 1, 200_000, dtype=np.int64)
    x = x >> rng.integers(0, 63, x.size)
    assert np.array_equal(nx.int_to_float(x, "f32"), x.astype(np.float32))
    u = rng.integers(0, 2**32 - 1, 100_000, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(nx.int_to_float(u, "f32"), u.astype(np.float32))


def test_convert() -> None:
    x = np.array([1.5, -2.5, 300.0, np.nan], np.float32)
    assert nx.convert(x, "f32", "i32").tolist()[:3] == [1, -2, 300]  # default rzi
    assert nx.convert(x, "f32", "i8", rounding="rni").tolist() == [2, -2, 127, 0]
    bf = nx.convert(x, "f32", "bf16")
    assert bf.dtype == np.float32 and bf[2] == 300.0
    assert nx.convert(np.float32(500.0), "f32", "e4m3fn", saturate=True) == 448
    assert np.isnan(nx.convert(np.float32(500.0), "f32", "e4m3fn"))
    ints = np.array([-1, 300, 70000], np.int32)
    assert nx.convert(ints, "i32", "u8").tolist() == [255, 44, 112]  # wraps
    assert nx.convert(ints, "i32", "u8", saturate=True).tolist() == [0, 255, 255]
    assert nx.convert(ints, "i32", "i16", saturate=True).tolist() == [-1, 300, 32767]
    assert nx.convert(np.array([7, 0]), "i32", "bool").tolist() == [True, False]
    assert nx.convert(np.array([True, False]), "bool", "f32").tolist() == [1.0, 0.0]
    assert nx.convert(ints, "i32", "f16").tolist() == [-1.0, 300.0, np.inf]
    big = np.array([2**32 - 1], np.uint32)
    assert nx.convert(big, "u32", "i32", saturate=True).tolist() == [2**31 - 1]


# ------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------


def rational_check(op: str, got: np.ndarray, args: tuple[np.ndarray, ...], t: DType) -> None:
    for i in range(got.size):
        vals = [float(a.reshape(-1)[i]) for a in args]
        g = float(got.reshape(-1)[i])
        if not all(math.isfinite(v) for v in vals):
            continue
        q = [Fraction(v) for v in vals]
        if op == "add":
            exact = q[0] + q[1]
        elif op == "sub":
            exact = q[0] - q[1]
        elif op == "mul":
            exact = q[0] * q[1]
        elif op == "div":
            if q[1] == 0:
                continue
            exact = q[0] / q[1]
        else:  # fma
            exact = q[0] * q[1] + q[2]
        ref = exact_round(exact, t)
        if exact == 0:
            assert g == 0, (op, vals, g)
        else:
            assert g == ref or (math.isnan(g) and math.isnan(ref)), (op, vals, g, ref)


@pytest.mark.parametrize("name", ["f32", "bf16", "f16"])
def test_add_sub_mul_div_are_correctly_rounded(name: str) -> None:
    t = dtype(name)
    rng = np.random.default_rng(RNG_SEED + 6)
    lo, hi = (-150, 126) if t.exponent_bits == 8 else (-26, 16)
    a = nx.round_to(t, f32_random(rng, 2000, lo, hi))
    b = nx.round_to(t, f32_random(rng, 2000, lo, hi))
    close = nx.round_to(t, a * (1 + rng.normal(0, 2.0**-8, a.size)).astype(np.float32))
    for op in ("add", "sub", "mul", "div"):
        fn = getattr(nx, op)
        for x, y in ((a, b), (a, close)):
            got = fn(x, y, t)
            assert got.dtype == np.float32
            rational_check(op, got, (x, y), t)


def test_f32_arithmetic_specials() -> None:
    inf, nan = np.inf, np.nan
    assert np.isnan(nx.add(inf, -inf))
    assert nx.add(-0.0, -0.0) == 0 and np.signbit(nx.add(-0.0, -0.0))
    assert not np.signbit(nx.add(1.0, -1.0))
    assert nx.mul(2.0**-100, 2.0**-100) == 0  # underflow to +0
    assert nx.mul(2.0**-75, 2.0**-75) == 0  # 2^-150: the tie between 0 and 2^-149 goes to 0
    assert nx.mul(2.0**-75, 1.5 * 2.0**-75) == 2.0**-149
    assert nx.mul(2.0**100, 2.0**100) == inf
    assert nx.div(1.0, 0.0) == inf and nx.div(-1.0, 0.0) == -inf and np.isnan(nx.div(0.0, 0.0))
    assert nx.rcp(-0.0) == -inf and nx.rcp(inf) == 0 and np.signbit(nx.rcp(-inf))
    assert nx.rcp(3.0) == np.float32(1 / 3)
    assert np.isnan(nx.sqrt(-1.0)) and np.signbit(nx.sqrt(-0.0)) and nx.sqrt(inf) == inf
    assert np.isnan(nx.add(nan, 1.0))


def test_sqrt_is_correctly_rounded() -> None:
    rng = np.random.default_rng(RNG_SEED + 7)
    x = np.abs(f32_random(rng, 3000, -149, 127))
    got = nx.sqrt(x)
    for v, r in zip(x.astype(np.float64), got.astype(np.float64)):
        q, rq = Fraction(v), Fraction(r)
        down = Fraction(float(np.nextafter(np.float32(r), np.float32(0))))
        up = Fraction(float(np.nextafter(np.float32(r), np.float32(np.inf))))
        assert ((rq + down) / 2) ** 2 <= q <= ((rq + up) / 2) ** 2


def test_fma_single_rounding() -> None:
    rng = np.random.default_rng(RNG_SEED + 8)
    n = 3000
    a = f32_random(rng, n, -70, 60)
    b = f32_random(rng, n, -70, 60)
    p = a.astype(np.float64) * b.astype(np.float64)
    # cancellation: c close to -a*b; and sticky cases: c much larger than a*b
    c1 = (-p * (1 + rng.normal(0, 2.0**-20, n))).astype(np.float32)
    with np.errstate(over="ignore"):
        c2 = (p * 2.0 ** rng.integers(20, 40, n) * rng.choice([-1, 1], n)).astype(np.float32)
    c3 = f32_random(rng, n, -140, 120)
    for c in (c1, c2, c3):
        got = nx.fma(a, b, c)
        assert got.dtype == np.float32
        rational_check("fma", got, (a, b, c), D.F32)


def test_fma_beats_double_rounding() -> None:
    # a·b = 2^6 − 2^-34 just below the midpoint between c and its upper neighbour; float64
    # rounds the sum onto the midpoint and a second rounding would then go up (to even).
    a, b = np.float32(1 + 2.0**-20), np.float32(64 * (1 - 2.0**-20))
    c = np.float32(2.0**30 + 128)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == np.float32(2.0**30 + 256)
    assert nx.fma(a, b, c) == c
    rational_check("fma", nx.fma(a, b, c), (np.array(a), np.array(b), np.array(c)), D.F32)


def test_fma_specials_and_other_types() -> None:
    inf = np.inf
    assert np.isnan(nx.fma(inf, 0.0, 1.0)) and np.isnan(nx.fma(inf, 1.0, -inf))
    assert nx.fma(1.0, 1.0, inf) == inf
    assert np.signbit(nx.fma(-0.0, 1.0, -0.0)) and not np.signbit(nx.fma(1.0, -1.0, 1.0))
    assert not np.signbit(nx.fma(-0.0, 0.0, 0.0))
    rng = np.random.default_rng(RNG_SEED + 9)
    for t in (D.BF16, D.F16):
        lo, hi = (-60, 60) if t is D.BF16 else (-12, 7)
        a, b, c = (nx.round_to(t, f32_random(rng, 1500, lo, hi)) for _ in range(3))
        rational_check("fma", nx.fma(a, b, c, t), (a, b, c), t)
    a = np.array([1 + 2.0**-52, 1e300, 3.0])
    b = np.array([1 - 2.0**-52, 1e10, 1 / 3])
    c = np.array([-1.0, -1e308, -1.0])
    got = nx.fma(a, b, c, D.F64)
    assert got[0] == -(2.0**-104)
    assert got[1] == np.inf
    assert got[2] == float(Fraction(3.0) * Fraction(1 / 3) - 1)


def test_maximum_minimum_follow_ptx() -> None:
    nan, inf = np.nan, np.inf
    assert nx.maximum(1.0, nan) == 1.0 and nx.maximum(nan, -2.0) == -2.0
    assert np.isnan(nx.maximum(nan, nan))
    assert np.isnan(nx.maximum(1.0, nan, nan=True)) and np.isnan(nx.minimum(nan, 1.0, nan=True))
    assert not np.signbit(nx.maximum(-0.0, 0.0)) and not np.signbit(nx.maximum(0.0, -0.0))
    assert np.signbit(nx.minimum(0.0, -0.0)) and np.signbit(nx.minimum(-0.0, 0.0))
    assert nx.maximum(-inf, 3.0) == 3.0 and nx.minimum(-inf, 3.0) == -inf
    rng = np.random.default_rng(RNG_SEED + 10)
    a = rng.choice([nan, 0.0, -0.0, 1.0, -1.0, inf, -inf, 2.5], 500)
    b = rng.choice([nan, 0.0, -0.0, 1.0, -1.0, inf, -inf, 2.5], 500)

    def ptx_max(x: float, y: float) -> float:  # PTX ISA pseudo code of max_num
        if math.isnan(x) and math.isnan(y):
            return math.nan
        if math.isnan(x):
            return y
        if math.isnan(y):
            return x
        if x == y == 0:
            return 0.0 if not (math.copysign(1, x) < 0 and math.copysign(1, y) < 0) else -0.0
        return x if x > y else y

    ref = np.array([ptx_max(x, y) for x, y in zip(a, b)])
    assert bits_equal(nx.maximum(a, b).astype(np.float64), ref)
    neg = -nx.minimum(-a, -b).astype(np.float64)  # min(x, y) = -max(-x, -y)
    assert bits_equal(neg, ref)


def exp2_oracle(x: float, t: DType) -> float:
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return math.inf if x > 0 else 0.0
    with mpmath.workprec(120):
        v = mpmath.power(2, mpmath.mpf(x))
        man, exp = v.man_exp
    return exact_round(Fraction(int(man)) * Fraction(2) ** int(exp), t)


def test_exp2_is_correctly_rounded() -> None:
    rng = np.random.default_rng(RNG_SEED + 11)
    x = np.concatenate([
        rng.uniform(-152, 129, 4000).astype(np.float32),
        rng.uniform(-2, 2, 2000).astype(np.float32),
        np.array([0.0, -0.0, 1.0, -149, -150, -151, 127, 128, -126, 0.5, np.inf, -np.inf, np.nan,
                  np.nextafter(np.float32(128), np.float32(0)), -149.5, -150.0000001], np.float32),
    ])  # fmt: skip
    got = nx.exp2(x)
    assert got.dtype == np.float32
    ref = np.array([exp2_oracle(float(v), D.F32) for v in x])
    assert bits_equal(got.astype(np.float64), ref)
    for t in (D.BF16, D.F16):
        xs = x[:1500]
        ref_t = np.array([exp2_oracle(float(v), t) for v in xs])
        assert bits_equal(nx.exp2(xs, t).astype(np.float64), ref_t)


def test_exp2_precise_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force every element through the high-precision recomputation."""
    monkeypatch.setattr(nx, "_MIDPOINT_GUARD", 0.5)
    rng = np.random.default_rng(RNG_SEED + 12)
    x = rng.uniform(-150, 128, 400).astype(np.float32)
    ref = np.array([exp2_oracle(float(v), D.F32) for v in x])
    assert bits_equal(nx.exp2(x).astype(np.float64), ref)


def test_approx_bounds_for_ex2_and_rcp() -> None:
    x = np.array([0.3, -20.7, 100.1, -140.2], np.float32)
    cr = nx.exp2(x)
    lo, hi = nx.approx_bounds(D.F32, cr, nx.EX2_APPROX_MAX_ULP)
    two_ulp_down = np.nextafter(np.nextafter(cr, np.float32(0)), np.float32(0))
    two_ulp_up = np.nextafter(np.nextafter(cr, np.float32(np.inf)), np.float32(np.inf))
    assert np.all(lo <= two_ulp_down) and np.all(hi >= two_ulp_up)
    normal = np.abs(cr) >= D.F32.min_normal
    rel = (hi - cr) / cr
    assert np.all(rel[normal] <= nx.EX2_APPROX_MAX_REL_ERROR)
    lo1, hi1 = nx.approx_bounds("f32", nx.rcp(x), nx.RCP_APPROX_MAX_ULP)
    assert np.all((lo1 < nx.rcp(x)) & (nx.rcp(x) < hi1))
    inf_lo, inf_hi = nx.approx_bounds("f32", np.array([np.inf]), 2)
    assert inf_lo[0] == inf_hi[0] == np.inf


# ------------------------------------------------------------------------------------------
# mma
# ------------------------------------------------------------------------------------------


def mma_oracle(a: np.ndarray, b: np.ndarray, c: np.ndarray, acc: DType) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n))
    for i in range(m):
        for j in range(n):
            v = float(c[i, j])
            for kk in range(k):
                exact = Fraction(float(a[i, kk])) * Fraction(float(b[kk, j])) + Fraction(v)
                v = exact_round(exact, acc)
            out[i, j] = v
    return out


@pytest.mark.parametrize(("in_name", "acc_name"), [("bf16", "f32"), ("f16", "f16"),
                                                   ("e4m3fn", "f32"), ("e5m2fnuz", "f32"),
                                                   ("tf32", "f32"), ("f32", "f32")])  # fmt: skip
def test_mma_is_a_k_ordered_fma_chain(in_name: str, acc_name: str) -> None:
    tin, tacc = dtype(in_name), dtype(acc_name)
    rng = np.random.default_rng(RNG_SEED + 13)
    hi = 3 if tin.max_finite < 1e5 else 8
    a = nx.round_to(tin, f32_random(rng, 6 * 16, -6, hi).reshape(6, 16))
    b = nx.round_to(tin, f32_random(rng, 16 * 5, -6, hi).reshape(16, 5))
    c = nx.round_to(tacc, f32_random(rng, 6 * 5, -4, 4).reshape(6, 5))
    d = nx.mma(a, b, c, a_dtype=tin, acc_dtype=tacc)
    assert d.dtype == np.float32 and d.shape == (6, 5)
    assert bits_equal(d.astype(np.float64), mma_oracle(a, b, c, tacc))
    if tacc is D.F32:
        # another summation order stays within the tolerance
        rev = nx.mma(a[:, ::-1], b[::-1, :], c, a_dtype=tin, acc_dtype=tacc)
        tol = nx.mma_tolerance(a, b, c)
        assert np.all(np.abs(rev.astype(np.float64) - d) <= tol)
        exact = np.array([[float(sum((Fraction(float(a[i, k])) * Fraction(float(b[k, j]))
                                      for k in range(16)), Fraction(float(c[i, j]))))
                           for j in range(5)] for i in range(6)])  # fmt: skip
        assert np.all(np.abs(exact - d) <= tol)


def test_mma_products_are_exact_beyond_f32_range() -> None:
    # 2^-75 · 2^-75 = 2^-150 is below f32's subnormals; added exactly to 2^-149 it makes the
    # tie 1.5·2^-149, which rounds to even (2^-148).  Rounding the product to f32 first would
    # give 0 and then 2^-149.
    a = np.array([[2.0**-75]], np.float32)
    c = np.array([[2.0**-149]], np.float32)
    d = nx.mma(a, a, c, a_dtype="bf16")
    assert d[0, 0] == np.float32(2.0**-148)


def test_mma_tolerance_defaults() -> None:
    a = np.ones((2, 32), np.float32)
    b = np.ones((32, 3), np.float32)
    base = nx.mma_tolerance(a, b)
    assert base.shape == (2, 3)
    assert np.allclose(base, 2 * 33 * 2.0**-23 * 32, rtol=1e-5)
    fp8 = nx.mma_tolerance(a, b, in_dtype="e4m3fn")
    assert np.allclose(fp8 / base, nx.FP8_MMA_UNIT_ROUNDOFF / 2.0**-23, rtol=1e-5)
    assert np.array_equal(nx.mma_tolerance(a, b, in_dtype="bf16"), base)
    assert np.allclose(nx.mma_tolerance(a, b, unit_roundoff=2.0**-10), base * 2.0**13, rtol=1e-5)


def test_mma_integer_and_validation() -> None:
    a = np.full((2, 4), 127, np.int8)
    b = np.full((4, 3), 127, np.int8)
    c = np.full((2, 3), 2**31 - 10, np.int32)
    d = nx.mma(a, b, c, a_dtype="i8", acc_dtype="i32")
    assert d.dtype == np.int32
    assert np.all(d == np.int64(2**31 - 10 + 4 * 127 * 127 - 2**32))  # wraps
    sat = nx.mma(a, b, c, a_dtype="i8", acc_dtype="i32", satfinite=True)
    assert np.all(sat == 2**31 - 1)
    ub = np.full((4, 3), 255, np.uint8)
    assert np.all(nx.mma(a, ub, None, a_dtype="i8", b_dtype="u8", acc_dtype="i32") == 4 * 127 * 255)
    with pytest.raises(DTypeError, match="not bf16 values"):
        nx.mma(np.full((2, 2), 1.001, np.float32), np.eye(2, dtype=np.float32), None,
               a_dtype="bf16")  # fmt: skip
    with pytest.raises(DTypeError, match="shapes"):
        nx.mma(np.zeros((2, 3)), np.zeros((2, 3)), None, a_dtype="bf16")
    with pytest.raises(DTypeError):
        nx.mma(np.zeros((2, 2)), np.zeros((2, 2)), None, a_dtype="bf16", acc_dtype="i32")


def test_mma_f64() -> None:
    # step 1: acc = -1; step 2: fma(1 + 2^-52, 1 - 2^-52, -1) = -2^-104, exactly
    a = np.array([[1.0, 1 + 2.0**-52]])
    b = np.array([[-1.0], [1 - 2.0**-52]])
    d = nx.mma(a, b, None, a_dtype="f64", acc_dtype="f64")
    assert d.dtype == np.float64 and d[0, 0] == -(2.0**-104)


# ------------------------------------------------------------------------------------------
# the same semantics on sm_90 hardware (PTX through the driver's JIT)
# ------------------------------------------------------------------------------------------

# name -> PTX computing the 32-bit %out from the f32 operands %fa, %fb, %fc
_PTX_OPS = {
    "bf16_rn": "cvt.rn.bf16.f32 %hs, %fa; cvt.u32.u16 %out, %hs;",
    "bf16_rz": "cvt.rz.bf16.f32 %hs, %fa; cvt.u32.u16 %out, %hs;",
    "f16_rn": "cvt.rn.f16.f32 %hs, %fa; cvt.u32.u16 %out, %hs;",
    "f16_rz": "cvt.rz.f16.f32 %hs, %fa; cvt.u32.u16 %out, %hs;",
    "f16_sat": "cvt.rn.satfinite.f16.f32 %hs, %fa; cvt.u32.u16 %out, %hs;",
    "e4m3_sat": "cvt.rn.satfinite.e4m3x2.f32 %hs, %fa, %fa; cvt.u32.u16 %out, %hs;"
    " and.b32 %out, %out, 255;",
    "e5m2_sat": "cvt.rn.satfinite.e5m2x2.f32 %hs, %fa, %fa; cvt.u32.u16 %out, %hs;"
    " and.b32 %out, %out, 255;",
    "tf32_rna": "cvt.rna.tf32.f32 %out, %fa;",
    "s32_rni": "cvt.rni.s32.f32 %out, %fa;",
    "s32_rzi": "cvt.rzi.s32.f32 %out, %fa;",
    "u32_rni": "cvt.rni.u32.f32 %out, %fa;",
    "s8_rni": "cvt.rni.s8.f32 %hs, %fa; cvt.s32.s16 %out, %hs;",
    "fma": "fma.rn.f32 %fr, %fa, %fb, %fc; mov.b32 %out, %fr;",
    "add": "add.rn.f32 %fr, %fa, %fb; mov.b32 %out, %fr;",
    "mul": "mul.rn.f32 %fr, %fa, %fb; mov.b32 %out, %fr;",
    "div": "div.rn.f32 %fr, %fa, %fb; mov.b32 %out, %fr;",
    "sqrt": "sqrt.rn.f32 %fr, %fa; mov.b32 %out, %fr;",
    "rcp": "rcp.rn.f32 %fr, %fa; mov.b32 %out, %fr;",
    "max": "max.f32 %fr, %fa, %fb; mov.b32 %out, %fr;",
    "max_nan": "max.NaN.f32 %fr, %fa, %fb; mov.b32 %out, %fr;",
    "min": "min.f32 %fr, %fa, %fb; mov.b32 %out, %fr;",
    "ex2_approx": "ex2.approx.f32 %fr, %fa; mov.b32 %out, %fr;",
    "rcp_approx": "rcp.approx.f32 %fr, %fa; mov.b32 %out, %fr;",
}


def _ptx_source(ops: list[str]) -> str:
    body = []
    for name in ops:
        body += [
            f"  // {name}",
            "  " + _PTX_OPS[name],
            "  add.u64 %addr, %ro, %off; st.global.u32 [%addr], %out; add.u64 %ro, %ro, %stride;",
        ]
    return "\n".join([
        ".version 8.1", ".target sm_90", ".address_size 64",
        ".visible .entry numerics(.param .u64 pa, .param .u64 pb, .param .u64 pc,"
        " .param .u64 pout, .param .u32 pn)",
        "{",
        "  .reg .pred %p; .reg .b32 %i, %n, %out, %t1, %t2, %t3; .reg .b16 %hs;",
        "  .reg .b64 %ra, %rb, %rc, %ro, %off, %addr, %stride; .reg .f32 %fa, %fb, %fc, %fr;",
        "  mov.u32 %t1, %ctaid.x; mov.u32 %t2, %ntid.x; mov.u32 %t3, %tid.x;",
        "  mad.lo.u32 %i, %t1, %t2, %t3; ld.param.u32 %n, [pn];",
        "  setp.ge.u32 %p, %i, %n; @%p bra DONE;",
        "  ld.param.u64 %ra, [pa]; cvta.to.global.u64 %ra, %ra;",
        "  ld.param.u64 %rb, [pb]; cvta.to.global.u64 %rb, %rb;",
        "  ld.param.u64 %rc, [pc]; cvta.to.global.u64 %rc, %rc;",
        "  ld.param.u64 %ro, [pout]; cvta.to.global.u64 %ro, %ro;",
        "  mul.wide.u32 %off, %i, 4; mul.wide.u32 %stride, %n, 4;",
        "  add.u64 %addr, %ra, %off; ld.global.f32 %fa, [%addr];",
        "  add.u64 %addr, %rb, %off; ld.global.f32 %fb, [%addr];",
        "  add.u64 %addr, %rc, %off; ld.global.f32 %fc, [%addr];",
        *body,
        "DONE:",
        "  ret;",
        "}",
        "",
    ])  # fmt: skip


def _run_on_gpu(
    ops: list[str], a: np.ndarray, b: np.ndarray, c: np.ndarray
) -> dict[str, np.ndarray]:
    """Run the listed operations elementwise on device 0; returns each op's 32-bit results."""
    import ctypes

    from cuda.bindings import driver as cu

    def ok(result):  # type: ignore[no-untyped-def]
        err, *rest = result if isinstance(result, tuple) else (result,)
        assert err == cu.CUresult.CUDA_SUCCESS, err
        return rest[0] if len(rest) == 1 else rest

    n = a.size
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    buffers = []
    try:
        module = ok(cu.cuModuleLoadData(_ptx_source(ops).encode() + b"\0"))
        func = ok(cu.cuModuleGetFunction(module, b"numerics"))
        host_out = np.empty(len(ops) * n, dtype=np.uint32)
        dev_in = []
        for arr in (a, b, c):
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            d = ok(cu.cuMemAlloc(arr.nbytes))
            buffers.append(d)
            ok(cu.cuMemcpyHtoD(d, arr, arr.nbytes))
            dev_in.append(d)
        d_out = ok(cu.cuMemAlloc(host_out.nbytes))
        buffers.append(d_out)
        block = 256
        params = ((*dev_in, d_out, n), (None, None, None, None, ctypes.c_uint32))
        ok(cu.cuLaunchKernel(func, (n + block - 1) // block, 1, 1, block, 1, 1, 0, 0, params, 0))
        ok(cu.cuCtxSynchronize())
        ok(cu.cuMemcpyDtoH(host_out, d_out, host_out.nbytes))
        ok(cu.cuModuleUnload(module))
    finally:
        for d in buffers:
            cu.cuMemFree(d)
        cu.cuDevicePrimaryCtxRelease(dev)
    return {name: host_out[j * n : (j + 1) * n] for j, name in enumerate(ops)}


@pytest.mark.gpu
def test_sm90_conversions_agree_with_numerics() -> None:
    with np.errstate(invalid="ignore"):
        x = np.unique(
            np.concatenate([dense_f32_sample(nm) for nm in ("bf16", "f16", "e4m3fn", "e5m2")])
        )
    nan = np.isnan(x)
    ops = ["bf16_rn", "bf16_rz", "f16_rn", "f16_rz", "f16_sat", "e4m3_sat", "e5m2_sat",
           "tf32_rna", "s32_rni", "s32_rzi", "u32_rni", "s8_rni"]  # fmt: skip
    hw = _run_on_gpu(ops, x, x, x)
    expect_bits = {
        "bf16_rn": nx.to_bits(D.BF16, x),
        "bf16_rz": nx.to_bits(D.BF16, x, rounding="rz"),
        "f16_rn": nx.to_bits(D.F16, x),
        "f16_rz": nx.to_bits(D.F16, x, rounding="rz"),
        "f16_sat": nx.to_bits(D.F16, x, satfinite=True),
        "e4m3_sat": nx.to_bits(D.E4M3FN, x, satfinite=True),
        "e5m2_sat": nx.to_bits(D.E5M2, x, satfinite=True),
        "tf32_rna": nx.to_bits(D.TF32, x, rounding="rna"),
    }
    for name, ref in expect_bits.items():
        got = hw[name]
        assert np.array_equal(got[~nan], ref[~nan].astype(np.uint32)), name
        if name != "tf32_rna":  # the canonical NaN (cvt.rna.tf32 keeps the NaN's high bits)
            assert np.all(got[nan] == ref[nan]), name
    for name, t, mode in (("s32_rni", D.I32, "rni"), ("s32_rzi", D.I32, "rzi"),
                          ("u32_rni", D.U32, "rni"), ("s8_rni", D.I8, "rni")):  # fmt: skip
        got = hw[name].view(np.int32) if t.is_signed else hw[name]
        assert np.array_equal(got.astype(np.int64), nx.float_to_int(x, t, mode).astype(np.int64))


@pytest.mark.gpu
def test_sm90_arithmetic_agrees_with_numerics() -> None:
    rng = np.random.default_rng(RNG_SEED + 20)
    n = 1 << 20
    a, b, c = (f32_random(rng, n, -150, 127) for _ in range(3))
    p = a.astype(np.float64) * b.astype(np.float64)
    with np.errstate(over="ignore"):
        c[: n // 2] = (-p[: n // 2] * (1 + rng.normal(0, 2.0**-22, n // 2))).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-149], np.float32)
    a[:4096] = rng.choice(specials, 4096)
    b[:4096] = rng.choice(specials, 4096)
    a[4096 : n // 4] = rng.uniform(-155, 130, n // 4 - 4096)  # exp2's whole range
    ops = ["fma", "add", "mul", "div", "sqrt", "rcp", "max", "max_nan", "min",
           "ex2_approx", "rcp_approx"]  # fmt: skip
    hw = {k: v.view(np.float32) for k, v in _run_on_gpu(ops, a, b, c).items()}
    expect = {
        "fma": nx.fma(a, b, c),
        "add": nx.add(a, b),
        "mul": nx.mul(a, b),
        "div": nx.div(a, b),
        "sqrt": nx.sqrt(a),
        "rcp": nx.rcp(a),
        "max": nx.maximum(a, b),
        "max_nan": nx.maximum(a, b, nan=True),
        "min": nx.minimum(a, b),
    }
    for name, ref in expect.items():
        assert bits_equal(hw[name].astype(np.float64), ref.astype(np.float64)), name
    for name, exact, ulps in (("ex2_approx", nx.exp2(a), nx.EX2_APPROX_MAX_ULP),
                              ("rcp_approx", nx.rcp(a), nx.RCP_APPROX_MAX_ULP)):  # fmt: skip
        got = hw[name].astype(np.float64)
        lo, hi = nx.approx_bounds(D.F32, exact, ulps)
        finite = np.isfinite(exact)
        assert np.all((got[finite] >= lo[finite]) & (got[finite] <= hi[finite])), name
        assert bits_equal(got[~finite], exact[~finite].astype(np.float64)), name
