"""Element types: registry, lookup, encoding facts (checked against ml_dtypes and numpy), target
names and the matrix-instruction type tables."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from argus.errors import ArgusError
from argus.ir import dtypes as D
from argus.ir.dtypes import DTYPES, DTypeError, Kind, NanStyle, dtype

# Formats with an independent numpy-level oracle: the numpy/ml_dtypes scalar type.
ORACLE = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "e4m3fn": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}
SMALL = ("f16", "bf16", "e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz")


def _finfo(name: str):
    t = ORACLE[name]
    return np.finfo(t) if t in (np.float64, np.float32, np.float16) else ml_dtypes.finfo(t)


def test_registry_covers_the_required_types() -> None:
    required = {
        "f32", "f16", "bf16", "e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz",
        "i32", "i8", "u32", "bool", "i64", "u64", "u8", "u16", "i16", "f64", "tf32",
    }  # fmt: skip
    assert required <= set(DTYPES)
    for name, t in DTYPES.items():
        assert t.name == name
        assert str(t) == name
        assert repr(t) == f"dtype({name!r})"
        assert dtype(name) is t
        for alias in t.aliases:
            assert dtype(alias) is t
        assert dtype(t) is t


def test_lookup_by_numpy_and_ml_dtypes_types() -> None:
    assert dtype(np.float32) is D.F32
    assert dtype(np.dtype("float16")) is D.F16
    assert dtype(np.int8) is D.I8
    assert dtype(np.uint32) is D.U32
    assert dtype(np.bool_) is D.BOOL
    assert dtype(ml_dtypes.bfloat16) is D.BF16
    assert dtype(ml_dtypes.float8_e4m3fn) is D.E4M3FN
    assert dtype(ml_dtypes.float8_e5m2) is D.E5M2
    assert dtype(ml_dtypes.float8_e4m3fnuz) is D.E4M3FNUZ
    assert dtype(ml_dtypes.float8_e5m2fnuz) is D.E5M2FNUZ
    assert dtype("e4m3") is D.E4M3FN  # the PTX spelling


def test_unknown_type_is_a_user_error_with_a_hint() -> None:
    with pytest.raises(DTypeError) as info:
        dtype("float8")
    err = info.value
    assert isinstance(err, ArgusError) and isinstance(err, ValueError)
    assert "unknown element type" in str(err)
    assert err.hint is not None and "bf16" in err.hint
    with pytest.raises(DTypeError):
        dtype(np.complex64)
    with pytest.raises(DTypeError):
        dtype(3)


def test_dtypes_are_frozen_and_hashable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        D.F32.bits = 16  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        D.BF16.fmt.bias = 3  # type: ignore[misc]
    assert len({*DTYPES.values()}) == len(DTYPES)
    assert {D.BF16: 1}[dtype("bfloat16")] == 1


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_float_facts_match_the_oracle(name: str) -> None:
    t = dtype(name)
    fi = _finfo(name)
    assert t.kind is Kind.FLOAT and t.is_float and not t.is_int
    assert t.bits == fi.bits
    assert t.mantissa_bits == fi.nmant
    assert t.exponent_bits == fi.nexp
    assert t.max_finite == float(fi.max)
    assert -t.max_finite == float(fi.min)
    assert t.min_normal == float(fi.smallest_normal)
    assert t.min_subnormal == float(fi.smallest_subnormal)
    assert t.epsilon == float(fi.eps)
    assert t.min_normal == 2.0 ** (1 - t.bias)
    assert t.precision == t.mantissa_bits + 1
    assert t.itemsize * 8 == t.bits
    assert t.np_storage == np.dtype(f"uint{t.bits}")


@pytest.mark.parametrize("name", SMALL)
def test_special_patterns_exhaustively(name: str) -> None:
    """Which patterns are NaN / inf / max / -0, read off the oracle's decoding of every pattern."""
    t = dtype(name)
    bits = np.arange(1 << t.bits, dtype=t.np_storage)
    with np.errstate(invalid="ignore"):
        values = bits.view(ORACLE[name]).astype(np.float64)
    nan_patterns = np.flatnonzero(np.isnan(values))
    assert len(nan_patterns) == t.fmt.nan_count
    assert np.isnan(values[t.nan_bits])
    assert t.nan_bits < t.fmt.sign_mask or t.nan_style is NanStyle.FNUZ
    assert values[t.max_bits] == t.max_finite
    assert np.nanmax(values[np.isfinite(values)]) == t.max_finite
    assert t.has_inf == bool(np.isinf(values).any())
    if t.has_inf:
        assert values[t.inf_bits] == np.inf
        assert values[t.inf_bits | t.fmt.sign_mask] == -np.inf
    else:
        assert t.inf_bits is None
    sign_only = values[t.fmt.sign_mask]
    if t.has_negative_zero:
        assert sign_only == 0 and np.signbit(sign_only)
    else:
        assert np.isnan(sign_only) and nan_patterns.tolist() == [t.fmt.sign_mask]
    assert t.nan_encoding


def test_format_families() -> None:
    assert D.E4M3FN.nan_style is NanStyle.FN and not D.E4M3FN.has_inf
    assert D.E4M3FN.max_finite == 448.0 and D.E4M3FN.nan_bits == 0x7F
    assert D.E5M2.nan_style is NanStyle.IEEE and D.E5M2.max_finite == 57344.0
    assert D.E5M2.inf_bits == 0x7C and D.E5M2.nan_bits == 0x7F
    for t in (D.E4M3FNUZ, D.E5M2FNUZ):
        assert t.nan_style is NanStyle.FNUZ
        assert t.nan_bits == 0x80 and not t.has_negative_zero and not t.has_inf
    assert D.E4M3FNUZ.bias == 8 and D.E4M3FNUZ.max_finite == 240.0
    assert D.E5M2FNUZ.bias == 16 and D.E5M2FNUZ.max_finite == 57344.0
    assert D.F32.nan_bits == 0x7FFFFFFF and D.F16.nan_bits == 0x7FFF and D.BF16.nan_bits == 0x7FFF
    assert D.F64.nan_bits == 0x7FFFFFFFFFFFFFFF


def test_tf32_is_an_f32_container_with_ten_mantissa_bits() -> None:
    t = D.TF32
    assert (t.bits, t.exponent_bits, t.mantissa_bits, t.bias) == (32, 8, 10, 127)
    assert t.fmt.pad_bits == 13 and t.storage == "uint32"
    f32_of = lambda b: float(np.array(b, np.uint32).view(np.float32))  # noqa: E731
    assert t.max_finite == f32_of(t.max_bits) == f32_of(0x7F7FE000)
    assert t.inf_bits == 0x7F800000
    assert t.min_normal == D.F32.min_normal
    assert t.min_subnormal == 2.0**-136 == f32_of(0x00002000)
    assert np.isnan(f32_of(t.nan_bits))
    assert t.ptx == ".tf32" and t.amdgcn == "xf32"


@pytest.mark.parametrize("name", ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"])
def test_int_facts(name: str) -> None:
    t = dtype(name)
    info = np.iinfo(np.dtype(t.value_dtype))
    assert (t.int_min, t.int_max) == (info.min, info.max)
    assert t.bits == info.bits == 8 * t.itemsize
    assert t.is_int and not t.is_float
    assert t.is_signed == (t.kind is Kind.SIGNED)
    assert t.np_storage == np.dtype(f"uint{t.bits}")
    assert t.ptx == (".s" if t.is_signed else ".u") + str(t.bits)
    assert t.ptx_bits == f".b{t.bits}"
    assert t.amdgcn == name


def test_bool() -> None:
    t = D.BOOL
    assert t.kind is Kind.BOOL and t.is_bool and not t.is_int
    assert t.ptx == ".pred" and t.ptx_bits == ".pred" and t.amdgcn is None
    assert t.np_storage == np.dtype(np.uint8) and t.value_dtype == np.dtype(np.bool_)
    assert (t.int_min, t.int_max) == (0, 1)


def test_value_dtypes() -> None:
    for t in DTYPES.values():
        if t.is_float:
            expected = np.float64 if t is D.F64 else np.float32
            assert t.value_dtype == np.dtype(expected)


def test_target_spellings() -> None:
    ptx = {"f32": ".f32", "f16": ".f16", "bf16": ".bf16", "tf32": ".tf32", "f64": ".f64",
           "e4m3fn": ".e4m3", "e5m2": ".e5m2", "e4m3fnuz": None, "e5m2fnuz": None}  # fmt: skip
    amd = {"f32": "f32", "f16": "f16", "bf16": "bf16", "tf32": "xf32", "f64": "f64",
           "e4m3fn": None, "e5m2": None, "e4m3fnuz": "fp8", "e5m2fnuz": "bf8"}  # fmt: skip
    for name, suffix in ptx.items():
        assert dtype(name).ptx == suffix
    for name, spelled in amd.items():
        assert dtype(name).amdgcn == spelled
    assert D.BF16.ptx_bits == ".b16" and D.E4M3FN.ptx_bits == ".b8" and D.F32.ptx_bits == ".b32"


def test_float_facts_refuse_non_float_types() -> None:
    with pytest.raises(DTypeError):
        _ = D.I32.max_finite
    with pytest.raises(DTypeError):
        _ = D.BOOL.mantissa_bits
    with pytest.raises(DTypeError):
        _ = D.F32.int_max


def test_mma_type_tables() -> None:
    wgmma = D.mma_input_types("sm_90a", "wgmma")
    assert wgmma == {D.F16, D.BF16, D.TF32, D.E4M3FN, D.E5M2, D.I8, D.U8}
    mma_sync = D.mma_input_types("sm_90a", "mma.sync")
    assert D.F64 in mma_sync and D.E4M3FNUZ not in mma_sync
    mfma = D.mma_input_types("gfx942")
    assert mfma == {D.F32, D.TF32, D.F16, D.BF16, D.I8, D.F64, D.E4M3FNUZ, D.E5M2FNUZ}
    assert not ({D.E4M3FN, D.E5M2} & mfma)

    def accs(target: str, family: str, a: D.DType, b: D.DType) -> set[D.DType]:
        combos = D.mma_type_combinations(target, family)
        return {c.acc for c in combos if (c.a, c.b) == (a, b)}

    assert accs("sm_90a", "wgmma", D.BF16, D.BF16) == {D.F32}
    assert accs("sm_90a", "wgmma", D.F16, D.F16) == {D.F16, D.F32}
    assert accs("sm_90a", "wgmma", D.E4M3FN, D.E5M2) == {D.F16, D.F32}
    assert accs("sm_90a", "wgmma", D.U8, D.I8) == {D.I32}
    assert accs("sm_90a", "wgmma", D.BF16, D.F16) == set()
    assert accs("gfx942", "mfma", D.E5M2FNUZ, D.E4M3FNUZ) == {D.F32}
    assert accs("gfx942", "mfma", D.U8, D.U8) == set()
    assert all(c.target in D.TARGETS for c in D.MMA_TYPES)
    assert len(set(D.MMA_TYPES)) == len(D.MMA_TYPES)
    with pytest.raises(DTypeError):
        D.mma_type_combinations("sm_80")
