"""Element types shared by the DSL, the tile IR, the reference interpreter, the verifier and
both backends.

A :class:`DType` is a frozen value: name, bit width, kind (float / signed int / unsigned
int / bool), the numpy dtype that holds its bit patterns, the PTX and AMDGCN spellings
where the type exists on that target, and for floating-point types the exact encoding
(:class:`FloatFormat`: exponent and mantissa widths, bias, which patterns are NaN and
infinity).  Every number a user or a pass needs (largest finite value, smallest normal
and subnormal, machine epsilon, canonical NaN bits) is derived from the encoding, never
typed in by hand.  Lookup by name: ``dtype("bf16")``.

Floating-point encodings
------------------------
Three families of special-value rules cover every format here (:class:`NanStyle`):

``IEEE``  IEEE 754 style: the all-ones exponent is reserved, zero mantissa = ±infinity,
          non-zero mantissa = NaN.  f64, f32, tf32, f16, bf16 and OCP E5M2.
``FN``    "finite + NaN" (OCP E4M3, called ``.e4m3`` in PTX): no infinity; only the
          patterns S.1111.111 (0x7f, 0xff) are NaN, so the all-ones exponent with other
          mantissas holds ordinary values and the largest finite value is 1.75·2^8 = 448.
          PTX ISA 9.x §5.2.3 "Alternate Floating-Point Data Formats": "The e4m3 encoding
          does not support infinity and NaN values are limited to 0x7f and 0xff."
``FNUZ``  "finite + NaN, unsigned zero" (the gfx942 FP8/BF8 formats): no infinity, no
          negative zero; the pattern 0x80 (sign set, everything else zero) is the only NaN.
          The exponent bias is one larger than the OCP format of the same widths
          (8 for E4M3, 16 for E5M2), so the largest finite values are 240 and 57344.

Which target has which type
---------------------------
* sm_90a (PTX): f64, f32, tf32, f16, bf16, ``.e4m3`` (= OCP E4M3FN) and ``.e5m2`` (OCP E5M2)
  (PTX ISA §5.2.3).  The FNUZ formats do not exist on NVIDIA hardware.
* gfx942 (CDNA3, MI300): f64, f32, xf32 (the MFMA name of the 1-8-10 format = tf32), f16,
  bf16, ``fp8`` = E4M3FNUZ and ``bf8`` = E5M2FNUZ (the CDNA3 ISA names of the FNUZ
  formats; MFMA mnemonics such as ``v_mfma_f32_16x16x32_fp8_bf8``).  The OCP FP8 formats
  are not supported by gfx942 (they appear with gfx950).

Which operand types each matrix instruction accepts is recorded as data in
:data:`MMA_TYPES` (facts about the instruction sets; whether a kernel may use a given
combination is decided by the atoms in ``argus.spec``).

Storage
-------
A DType's bit patterns live in an unsigned numpy integer of its width (``storage``):
uint8 for the FP8 formats and 8-bit ints, uint16 for f16/bf16, uint32 for f32/tf32/i32,
uint64 for f64/i64.  The reference interpreter keeps the *values* of every float type of
32 bits or fewer in float32 arrays (every such value is exactly a float32) and of f64 in
float64 arrays (``value_dtype``); :mod:`argus.ir.numerics` converts between values and
bit patterns.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from argus.errors import ArgusError

__all__ = [
    "BF16",
    "BOOL",
    "DTYPES",
    "E4M3FN",
    "E4M3FNUZ",
    "E5M2",
    "E5M2FNUZ",
    "F16",
    "F32",
    "F64",
    "I8",
    "I16",
    "I32",
    "I64",
    "MMA_TYPES",
    "TARGETS",
    "TF32",
    "U8",
    "U16",
    "U32",
    "U64",
    "DType",
    "DTypeError",
    "FloatFormat",
    "Kind",
    "MmaTypes",
    "NanStyle",
    "dtype",
    "mma_input_types",
    "mma_type_combinations",
]


class DTypeError(ArgusError, ValueError):
    """An unknown element type name, or an operation a type does not support."""


class Kind(enum.Enum):
    """What a type's values are."""

    FLOAT = "float"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    BOOL = "bool"


class NanStyle(enum.Enum):
    """How a floating-point format encodes its special values (see the module docstring)."""

    IEEE = "ieee"
    FN = "fn"
    FNUZ = "fnuz"


@dataclass(frozen=True)
class FloatFormat:
    """The encoding of a binary floating-point format: 1 sign bit, ``exponent_bits``,
    ``mantissa_bits`` (stored fraction bits, without the implicit leading one), ``bias``.

    Values: a pattern with biased exponent e > 0 is ``(1 + m/2^M) * 2^(e - bias)``; e = 0 is
    subnormal, ``m/2^M * 2^(1 - bias)``.  Special patterns follow ``nan_style``.
    """

    exponent_bits: int
    mantissa_bits: int
    bias: int
    nan_style: NanStyle
    #: Zero bits below the mantissa in the container (13 for tf32, whose patterns are f32
    #: patterns with the low 13 mantissa bits clear); 0 for every other format.
    pad_bits: int = 0

    # ---- derived facts -------------------------------------------------------------
    @property
    def width(self) -> int:
        """Bits of the container (sign + exponent + mantissa + padding)."""
        return 1 + self.exponent_bits + self.mantissa_bits + self.pad_bits

    @property
    def precision(self) -> int:
        """Significand bits including the implicit one (24 for f32, 8 for bf16, 4 for E4M3)."""
        return self.mantissa_bits + 1

    @property
    def has_inf(self) -> bool:
        return self.nan_style is NanStyle.IEEE

    @property
    def has_nan(self) -> bool:
        return True  # every format here has at least one NaN pattern

    @property
    def has_negative_zero(self) -> bool:
        return self.nan_style is not NanStyle.FNUZ

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite binade."""
        top = (1 << self.exponent_bits) - 1
        if self.nan_style is NanStyle.IEEE:
            top -= 1  # the all-ones exponent is inf/NaN
        return top - self.bias

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade (also that of the subnormals)."""
        return 1 - self.bias

    @property
    def max_mantissa(self) -> int:
        """Largest stored mantissa in the top binade (FN reserves the all-ones one for NaN)."""
        full = (1 << self.mantissa_bits) - 1
        return full - 1 if self.nan_style is NanStyle.FN else full

    @property
    def max_finite(self) -> float:
        return math.ldexp(
            (1 << self.mantissa_bits) + self.max_mantissa, self.emax - self.mantissa_bits
        )

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def epsilon(self) -> float:
        """Distance from 1.0 to the next larger value, 2^-M."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def sign_mask(self) -> int:
        return 1 << (self.width - 1)

    @property
    def inf_bits(self) -> int | None:
        """Pattern of +infinity, None where the format has none."""
        if not self.has_inf:
            return None
        return ((1 << self.exponent_bits) - 1) << (self.mantissa_bits + self.pad_bits)

    @property
    def max_bits(self) -> int:
        """Pattern of the largest finite value."""
        field = ((self.emax + self.bias) << self.mantissa_bits) | self.max_mantissa
        return field << self.pad_bits

    @property
    def nan_bits(self) -> int:
        """The canonical NaN argus produces for this format (sign clear).

        IEEE and FN formats: every bit but the sign set (PTX's canonical NaN is 0x7fffffff
        for f32, 0x7fff for f16 and bf16; 0x7f for E4M3 and E5M2).  FNUZ: 0x80, the only NaN.
        """
        if self.nan_style is NanStyle.FNUZ:
            return self.sign_mask
        return self.sign_mask - 1

    @property
    def nan_count(self) -> int:
        """How many bit patterns are NaN (both signs)."""
        if self.nan_style is NanStyle.FNUZ:
            return 1
        if self.nan_style is NanStyle.FN:
            return 2
        return 2 * ((1 << self.mantissa_bits) - 1)

    @property
    def nan_encoding(self) -> str:
        """The NaN patterns, in words."""
        if self.nan_style is NanStyle.FNUZ:
            return f"only {self.sign_mask:#x} (sign set, exponent and mantissa zero)"
        if self.nan_style is NanStyle.FN:
            return "S.1…1.1…1: exponent and mantissa all ones, either sign"
        return "exponent all ones with a non-zero mantissa, either sign"


@dataclass(frozen=True)
class DType:
    """An element type.  Compare with ``==`` or ``is`` (one object per type)."""

    name: str
    bits: int
    kind: Kind
    storage: str  # numpy dtype name of the bit pattern container
    ptx: str | None = None  # PTX type suffix: ".f32", ".bf16", ".e4m3", ".s32", ".pred"
    amdgcn: str | None = None  # the name in AMDGCN mnemonics: "f32", "bf16", "fp8", "i32"
    float_format: FloatFormat | None = None
    aliases: tuple[str, ...] = ()
    doc: str = ""

    # ---- printing ---------------------------------------------------------------------
    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"dtype({self.name!r})"

    # ---- kind -------------------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_signed(self) -> bool:
        """True for signed ints and for floats (which carry a sign bit)."""
        return self.kind in (Kind.SIGNED, Kind.FLOAT)

    @property
    def is_bool(self) -> bool:
        return self.kind is Kind.BOOL

    @property
    def itemsize(self) -> int:
        """Bytes one element occupies in memory."""
        return np.dtype(self.storage).itemsize

    @property
    def np_storage(self) -> np.dtype[Any]:
        """numpy dtype of the bit patterns (unsigned, of the type's memory width)."""
        return np.dtype(self.storage)

    @property
    def value_dtype(self) -> np.dtype[Any]:
        """numpy dtype the reference interpreter keeps values in.

        float32 for every float type of 32 bits or fewer (their values are float32 values),
        float64 for f64; the matching numpy integer for ints; numpy bool for bool.
        """
        if self.kind is Kind.FLOAT:
            return np.dtype(np.float64 if self.bits == 64 else np.float32)
        if self.kind is Kind.BOOL:
            return np.dtype(np.bool_)
        prefix = "int" if self.kind is Kind.SIGNED else "uint"
        return np.dtype(f"{prefix}{self.bits}")

    @property
    def ptx_bits(self) -> str:
        """The PTX bit-size type that holds a register of this type (".b16" for bf16...)."""
        if self.kind is Kind.BOOL:
            return ".pred"
        return f".b{8 * self.itemsize}"

    # ---- integer range ------------------------------------------------------------------
    @property
    def int_min(self) -> int:
        self._require(self.is_int or self.is_bool, "an integer")
        if self.kind is Kind.SIGNED:
            return -(1 << (self.bits - 1))
        return 0

    @property
    def int_max(self) -> int:
        self._require(self.is_int or self.is_bool, "an integer")
        if self.kind is Kind.SIGNED:
            return (1 << (self.bits - 1)) - 1
        return (1 << self.bits) - 1

    # ---- float facts, forwarded from the format ---------------------------------------------
    @property
    def fmt(self) -> FloatFormat:
        """The float encoding; :class:`DTypeError` for non-float types."""
        self._require(self.float_format is not None, "a floating-point")
        assert self.float_format is not None
        return self.float_format

    exponent_bits = property(lambda self: self.fmt.exponent_bits)
    mantissa_bits = property(lambda self: self.fmt.mantissa_bits)
    bias = property(lambda self: self.fmt.bias)
    precision = property(lambda self: self.fmt.precision)
    nan_style = property(lambda self: self.fmt.nan_style)
    has_inf = property(lambda self: self.fmt.has_inf)
    has_nan = property(lambda self: self.fmt.has_nan)
    has_negative_zero = property(lambda self: self.fmt.has_negative_zero)
    emax = property(lambda self: self.fmt.emax)
    emin = property(lambda self: self.fmt.emin)
    max_finite = property(lambda self: self.fmt.max_finite)
    min_normal = property(lambda self: self.fmt.min_normal)
    min_subnormal = property(lambda self: self.fmt.min_subnormal)
    epsilon = property(lambda self: self.fmt.epsilon)
    nan_bits = property(lambda self: self.fmt.nan_bits)
    inf_bits = property(lambda self: self.fmt.inf_bits)
    max_bits = property(lambda self: self.fmt.max_bits)
    nan_encoding = property(lambda self: self.fmt.nan_encoding)

    def _require(self, ok: bool, what: str) -> None:
        if not ok:
            raise DTypeError(
                f"{self.name} is not {what} type",
                hint="check the element type of the operand",
            )


def _float(
    name: str,
    e: int,
    m: int,
    bias: int,
    style: NanStyle,
    *,
    storage: str,
    ptx: str | None,
    amdgcn: str | None,
    aliases: tuple[str, ...],
    doc: str,
    pad: int = 0,
) -> DType:
    fmt = FloatFormat(e, m, bias, style, pad)
    return DType(
        name=name,
        bits=fmt.width,
        kind=Kind.FLOAT,
        storage=storage,
        ptx=ptx,
        amdgcn=amdgcn,
        float_format=fmt,
        aliases=aliases,
        doc=doc,
    )


def _int(name: str, bits: int, signed: bool, *, amdgcn: bool = True) -> DType:
    kind = Kind.SIGNED if signed else Kind.UNSIGNED
    letter = "s" if signed else "u"
    np_name = ("int" if signed else "uint") + str(bits)
    return DType(
        name=name,
        bits=bits,
        kind=kind,
        storage=f"uint{bits}",
        ptx=f".{letter}{bits}",
        amdgcn=name if amdgcn else None,
        aliases=(np_name,),
        doc=f"{bits}-bit {'signed (two’s complement)' if signed else 'unsigned'} integer",
    )


F64 = _float(
    "f64",
    11,
    52,
    1023,
    NanStyle.IEEE,
    storage="uint64",
    ptx=".f64",
    amdgcn="f64",
    aliases=("float64", "double"),
    doc="IEEE 754 binary64",
)
F32 = _float(
    "f32",
    8,
    23,
    127,
    NanStyle.IEEE,
    storage="uint32",
    ptx=".f32",
    amdgcn="f32",
    aliases=("float32", "float"),
    doc="IEEE 754 binary32",
)
TF32 = _float(
    "tf32",
    8,
    10,
    127,
    NanStyle.IEEE,
    storage="uint32",
    ptx=".tf32",
    amdgcn="xf32",
    aliases=("tfloat32", "xf32"),
    pad=13,
    doc=(
        "1-8-10 matrix-operand format with the range of f32, held in a 32-bit register: the "
        "value's f32 pattern with the 13 low mantissa bits zero (PTX ISA §5.2.3: layout "
        "implementation defined; a .b32 register).  gfx942 calls it xf32."
    ),
)
F16 = _float(
    "f16",
    5,
    10,
    15,
    NanStyle.IEEE,
    storage="uint16",
    ptx=".f16",
    amdgcn="f16",
    aliases=("float16", "half"),
    doc="IEEE 754 binary16",
)
BF16 = _float(
    "bf16",
    8,
    7,
    127,
    NanStyle.IEEE,
    storage="uint16",
    ptx=".bf16",
    amdgcn="bf16",
    aliases=("bfloat16",),
    doc="bfloat16: the top half of an f32 (PTX ISA §5.2.3, .b16 registers)",
)
E4M3FN = _float(
    "e4m3fn",
    4,
    3,
    7,
    NanStyle.FN,
    storage="uint8",
    ptx=".e4m3",
    amdgcn=None,
    aliases=("float8_e4m3fn", "e4m3"),
    doc="OCP FP8 E4M3: no infinity, NaN = S.1111.111, max 448 (PTX .e4m3; not on gfx942)",
)
E5M2 = _float(
    "e5m2",
    5,
    2,
    15,
    NanStyle.IEEE,
    storage="uint8",
    ptx=".e5m2",
    amdgcn=None,
    aliases=("float8_e5m2",),
    doc="OCP FP8 E5M2: IEEE-style specials, max 57344 (PTX .e5m2; not on gfx942)",
)
E4M3FNUZ = _float(
    "e4m3fnuz",
    4,
    3,
    8,
    NanStyle.FNUZ,
    storage="uint8",
    ptx=None,
    amdgcn="fp8",
    aliases=("float8_e4m3fnuz",),
    doc="gfx942 FP8: E4M3, bias 8, no infinity, no -0, NaN = 0x80, max 240",
)
E5M2FNUZ = _float(
    "e5m2fnuz",
    5,
    2,
    16,
    NanStyle.FNUZ,
    storage="uint8",
    ptx=None,
    amdgcn="bf8",
    aliases=("float8_e5m2fnuz",),
    doc="gfx942 BF8: E5M2, bias 16, no infinity, no -0, NaN = 0x80, max 57344",
)
I64 = _int("i64", 64, True)
I32 = _int("i32", 32, True)
I16 = _int("i16", 16, True)
I8 = _int("i8", 8, True)
U64 = _int("u64", 64, False)
U32 = _int("u32", 32, False)
U16 = _int("u16", 16, False)
U8 = _int("u8", 8, False)
BOOL = DType(
    name="bool",
    bits=1,
    kind=Kind.BOOL,
    storage="uint8",
    ptx=".pred",
    amdgcn=None,
    aliases=("pred", "bool_"),
    doc=(
        "truth value: a predicate register (.pred) on NVIDIA, a lane mask (VCC or an SGPR "
        "pair) on AMD; one byte (0 or 1) in memory"
    ),
)

_ALL: tuple[DType, ...] = (
    F64,
    F32,
    TF32,
    F16,
    BF16,
    E4M3FN,
    E5M2,
    E4M3FNUZ,
    E5M2FNUZ,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    BOOL,
)

#: Every element type by its canonical name.
DTYPES: Mapping[str, DType] = MappingProxyType({t.name: t for t in _ALL})

_LOOKUP: dict[str, DType] = {}
for _t in _ALL:
    for _key in (_t.name, *_t.aliases):
        assert _key not in _LOOKUP, _key
        _LOOKUP[_key] = _t
del _t, _key


def dtype(spec: DType | str | Any) -> DType:
    """The element type named by ``spec``.

    Accepts a :class:`DType` (returned as is), a canonical name (``"bf16"``), an alias
    (``"bfloat16"``, ``"float8_e4m3fn"``, ``"int32"``...) or a numpy dtype / scalar type whose
    name is one of those (``np.float32``, an ``ml_dtypes`` type).
    """
    if isinstance(spec, DType):
        return spec
    key: str | None
    if isinstance(spec, str):
        key = spec
    else:
        try:
            key = np.dtype(spec).name
        except TypeError:
            key = None
    if key is not None and key in _LOOKUP:
        return _LOOKUP[key]
    raise DTypeError(
        f"unknown element type {spec!r}",
        hint="use one of: " + ", ".join(DTYPES),
    )


# ------------------------------------------------------------------------------------------
# Matrix-instruction operand types, per target (facts about the instruction sets).
# ------------------------------------------------------------------------------------------

TARGETS = ("sm_90a", "gfx942")


@dataclass(frozen=True)
class MmaTypes:
    """One operand-type combination a matrix instruction family accepts: D = A·B + C with
    A of ``a``, B of ``b`` and the accumulator C/D of ``acc``."""

    target: str
    family: str  # "wgmma", "mma.sync" (sm_90a) or "mfma" (gfx942)
    a: DType
    b: DType
    acc: DType


def _combos(
    target: str, family: str, ab: tuple[tuple[DType, DType], ...], accs: tuple[DType, ...]
) -> tuple[MmaTypes, ...]:
    return tuple(MmaTypes(target, family, a, b, acc) for a, b in ab for acc in accs)


_FP8_OCP = (E4M3FN, E5M2)
_FP8_FNUZ = (E4M3FNUZ, E5M2FNUZ)
_I8S = (I8, U8)

#: Operand types of the matrix instructions, per target.
#:
#: sm_90a ``wgmma.mma_async`` (PTX ISA, "Asynchronous Warpgroup Level Matrix
#: Multiply-Accumulate Instructions"): f16·f16 → f16|f32; bf16·bf16 → f32; tf32·tf32 → f32;
#: {e4m3, e5m2}·{e4m3, e5m2} (A and B chosen independently) → f16|f32;
#: {s8, u8}·{s8, u8} → s32 (optional ``.satfinite``).  Single-bit (b1) forms are omitted.
#:
#: sm_90a ``mma.sync`` (PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions"): f16 → f16|f32; bf16 → f32;
#: tf32 → f32; f64 → f64; {s8, u8} → s32; {e4m3, e5m2} → f32 (m16n8k32, sm_89+).  Sub-byte
#: integer and b1 forms are omitted.
#:
#: gfx942 ``v_mfma_*`` (CDNA3 ISA, matrix arithmetic): f32 → f32 (``_f32``); xf32 → f32
#: (``_xf32``); f16 → f32; bf16 → f32; i8 → i32 (signed only); f64 → f64;
#: {fp8, bf8}·{fp8, bf8} → f32 (``_fp8_fp8``, ``_fp8_bf8``, ``_bf8_fp8``, ``_bf8_bf8``; FNUZ).
MMA_TYPES: tuple[MmaTypes, ...] = (
    *_combos("sm_90a", "wgmma", ((F16, F16),), (F16, F32)),
    *_combos("sm_90a", "wgmma", ((BF16, BF16),), (F32,)),
    *_combos("sm_90a", "wgmma", ((TF32, TF32),), (F32,)),
    *_combos("sm_90a", "wgmma", tuple((a, b) for a in _FP8_OCP for b in _FP8_OCP), (F16, F32)),
    *_combos("sm_90a", "wgmma", tuple((a, b) for a in _I8S for b in _I8S), (I32,)),
    *_combos("sm_90a", "mma.sync", ((F16, F16),), (F16, F32)),
    *_combos("sm_90a", "mma.sync", ((BF16, BF16),), (F32,)),
    *_combos("sm_90a", "mma.sync", ((TF32, TF32),), (F32,)),
    *_combos("sm_90a", "mma.sync", ((F64, F64),), (F64,)),
    *_combos("sm_90a", "mma.sync", tuple((a, b) for a in _I8S for b in _I8S), (I32,)),
    *_combos("sm_90a", "mma.sync", tuple((a, b) for a in _FP8_OCP for b in _FP8_OCP), (F32,)),
    *_combos("gfx942", "mfma", ((F32, F32),), (F32,)),
    *_combos("gfx942", "mfma", ((TF32, TF32),), (F32,)),
    *_combos("gfx942", "mfma", ((F16, F16),), (F32,)),
    *_combos("gfx942", "mfma", ((BF16, BF16),), (F32,)),
    *_combos("gfx942", "mfma", ((I8, I8),), (I32,)),
    *_combos("gfx942", "mfma", ((F64, F64),), (F64,)),
    *_combos("gfx942", "mfma", tuple((a, b) for a in _FP8_FNUZ for b in _FP8_FNUZ), (F32,)),
)


def mma_type_combinations(target: str, family: str | None = None) -> tuple[MmaTypes, ...]:
    """The operand-type combinations of ``target``'s matrix instructions (of one family)."""
    if target not in TARGETS:
        raise DTypeError(f"unknown target {target!r}", hint="use one of: " + ", ".join(TARGETS))
    return tuple(
        c for c in MMA_TYPES if c.target == target and (family is None or c.family == family)
    )


def mma_input_types(target: str, family: str | None = None) -> frozenset[DType]:
    """The types that can be an A or B operand of ``target``'s matrix instructions."""
    combos = mma_type_combinations(target, family)
    return frozenset(t for c in combos for t in (c.a, c.b))
