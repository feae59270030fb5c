"""XOR swizzles and layouts composed with them.

A :class:`Swizzle` permutes offsets by xor-ing one group of address bits into another; shared
memory layouts use it to spread the rows of a tile over the banks.  A
:class:`ComposedLayout` ``outer ∘ (offset + inner)`` is how a swizzled layout is written: a
plain :class:`~argus.layout_algebra.layout.Layout` (``inner``) gives the linear offset, the
swizzle (``outer``) permutes it.

Everything here evaluates on int-likes (Python ints, sympy expressions, foreign terms such as
SMT terms or numpy arrays) through :mod:`argus.symbolic`, so a swizzled address of a symbolic
offset becomes a ``BitXor``/``BitAnd`` expression that the SMT layer encodes with bit-vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic as sym
from argus.layout_algebra.algebra import composition
from argus.layout_algebra.layout import Layout, LayoutError

__all__ = [
    "LDS_BANKS",
    "LDS_BANK_BYTES",
    "SWIZZLE_32B",
    "SWIZZLE_64B",
    "SWIZZLE_128B",
    "SWIZZLE_NONE",
    "ComposedLayout",
    "Swizzle",
    "bank_conflict_degree",
    "evaluate_all",
    "evaluate_at",
    "hopper_swizzle",
    "image",
    "is_bijective_onto",
    "is_injective",
    "lds_swizzle",
    "lds_tile_layout",
]


@dataclass(frozen=True)
class Swizzle:
    """The XOR swizzle ``Swizzle(B, M, S)`` of CuTe, on integer offsets.

    Write an offset in binary.  Three fields matter:

    * the low ``M`` bits are kept as they are (``2**M`` consecutive offsets move together);
    * the *source* field: ``B`` bits starting at bit ``M + max(0, S)``;
    * the *target* field: ``B`` bits starting at bit ``M - min(0, S)``.

    The result keeps every bit except the target field, which is xor-ed with the source field::

        Swizzle(B, M, S)(x) = x ^ ((x & source_mask) >> S)      for S >= 0
        Swizzle(B, M, S)(x) = x ^ ((x & source_mask) << -S)     for S <  0

    with ``source_mask = (2**B - 1) << (M + max(0, S))``.  ``|S| >= B`` is required so the two
    fields do not overlap; then the source field is unchanged by the swizzle, which makes every
    swizzle its own inverse (``sw(sw(x)) == x``) and a bijection of the integers that maps each
    aligned block of ``2**bit_span`` offsets onto itself.  ``B == 0`` is the identity.

    ========================  ======================  ==========================================
    ``Swizzle(3, 3, 3)``       ``64 -> 72``             bits 6..8 xor-ed into bits 3..5
    ``Swizzle(3, 3, 3)``       ``128 -> 144``
    ``Swizzle(3, 3, 3)``       ``520 -> 520``           source bits of 520 are 0
    ``Swizzle(3, 4, 3)``       ``128-byte`` mode        16-byte chunk index ^= 128-byte row % 8
    ========================  ======================  ==========================================
    """

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        for name in ("bits", "base", "shift"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise LayoutError(f"Swizzle {name} must be a Python int, got {value!r}")
        if self.bits < 0 or self.base < 0:
            raise LayoutError(
                f"Swizzle({self.bits}, {self.base}, {self.shift}): B and M must be >= 0",
                hint="B is a bit count and M a bit position",
            )
        if abs(self.shift) < self.bits:
            raise LayoutError(
                f"Swizzle({self.bits}, {self.base}, {self.shift}): |S| must be >= B",
                hint="otherwise the xor-ed fields overlap and the swizzle is not a bijection",
            )

    # ----------------------------------------------------------------------- bit fields

    @property
    def source_mask(self) -> int:
        """Mask of the bits that are read (the ``yyy`` field)."""
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    @property
    def target_mask(self) -> int:
        """Mask of the bits that are xor-ed (the ``zzz`` field)."""
        return ((1 << self.bits) - 1) << (self.base - min(0, self.shift))

    @property
    def bit_span(self) -> int:
        """One past the highest bit the swizzle reads or writes (0 for the identity).

        Adding a multiple of ``2**bit_span`` commutes with the swizzle:
        ``sw(x + k * 2**bit_span) == sw(x) + k * 2**bit_span``.
        """
        if self.bits == 0:
            return 0
        return self.base + abs(self.shift) + self.bits

    @property
    def is_identity(self) -> bool:
        return self.bits == 0

    # ----------------------------------------------------------------------- evaluation

    def __call__(self, offset: Any) -> Any:
        """The swizzled offset; ints give ints, symbolic offsets give BitXor expressions."""
        if self.bits == 0:
            return offset
        picked = sym.bit_and(offset, self.source_mask)
        moved = sym.shr(picked, self.shift) if self.shift >= 0 else sym.shl(picked, -self.shift)
        return sym.xor(offset, moved)

    def inverse(self) -> Swizzle:
        """A swizzle is an involution: its inverse is itself."""
        return self

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    def element_units(self, element_bytes: int) -> Swizzle:
        """This byte-offset swizzle rewritten for offsets counted in elements of that size.

        ``sw_bytes(e * i) == e * sw_elements(i)`` for every element index ``i``; needs a
        power-of-two element size no larger than ``2**M`` bytes.
        """
        if element_bytes <= 0 or element_bytes & (element_bytes - 1):
            raise LayoutError(f"element size {element_bytes} bytes is not a power of two")
        log = element_bytes.bit_length() - 1
        if self.bits == 0:
            return Swizzle(0, max(0, self.base - log), self.shift)
        if log > self.base:
            raise LayoutError(
                f"{self} moves {1 << self.base}-byte chunks; {element_bytes}-byte elements "
                "would be split",
                hint="use elements no larger than the swizzle's unit",
            )
        return Swizzle(self.bits, self.base - log, self.shift)

    def byte_units(self, element_bytes: int) -> Swizzle:
        """The inverse of :meth:`element_units`: this element swizzle on byte offsets."""
        if element_bytes <= 0 or element_bytes & (element_bytes - 1):
            raise LayoutError(f"element size {element_bytes} bytes is not a power of two")
        return Swizzle(self.bits, self.base + element_bytes.bit_length() - 1, self.shift)


# --------------------------------------------------------------------------- composed layouts

Offsetter = Any  # Swizzle | Layout | ComposedLayout: a function from an integer offset to an offset


@dataclass(frozen=True)
class ComposedLayout:
    """The layout ``outer ∘ (offset + inner)``: ``C(c) == outer(offset + inner(c))``.

    ``inner`` is a :class:`Layout` (or another composed layout) and gives the domain: shape,
    size, rank and modes are the inner layout's.  ``outer`` is any offset function, normally a
    :class:`Swizzle`; ``offset`` an int-like added before ``outer`` applies (a swizzle does not
    commute with addition, which is why slicing a composed layout keeps its offset inside).

    Operations that only re-index the domain (slicing, mode selection, flattening, coalescing,
    composing with a layout on the right) act on ``inner`` and keep ``outer`` and ``offset``.
    """

    outer: Offsetter
    offset: Any
    inner: Layout | ComposedLayout

    def __post_init__(self) -> None:
        if not isinstance(self.inner, (Layout, ComposedLayout)):
            raise LayoutError(
                f"ComposedLayout: inner must be a Layout or ComposedLayout, got {self.inner!r}"
            )
        if not isinstance(self.outer, (Swizzle, Layout, ComposedLayout)):
            raise LayoutError(
                f"ComposedLayout: outer must be a Swizzle, Layout or ComposedLayout, got "
                f"{self.outer!r}"
            )

    # ----------------------------------------------------------------------- structure

    @property
    def shape(self) -> Any:
        return self.inner.shape

    @property
    def size(self) -> Any:
        return self.inner.size

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def depth(self) -> int:
        return self.inner.depth

    @property
    def modes(self) -> tuple[ComposedLayout, ...]:
        return tuple(self.with_inner(m) for m in self.inner.modes)

    @property
    def is_static(self) -> bool:
        outer_static = getattr(self.outer, "is_static", True)
        return (
            bool(outer_static)
            and sym.static_value(self.offset) is not None
            and self.inner.is_static
        )

    def __getitem__(self, mode: int) -> ComposedLayout:
        """Top-level mode ``mode``: ``C[k](c_k) == C(0, .., c_k, .., 0)``."""
        return self.with_inner(self.inner[mode])

    def with_inner(self, inner: Layout | ComposedLayout) -> ComposedLayout:
        """The same ``outer`` and ``offset`` over another inner layout."""
        return ComposedLayout(self.outer, self.offset, inner)

    @property
    def cosize(self) -> Any:
        """One past the largest offset.

        Exact for static layouts (by evaluating every coordinate).  With symbolic extents and a
        swizzle outside: the smallest multiple of ``2**bit_span`` covering
        ``offset + inner.cosize`` (a swizzle maps such aligned blocks onto themselves), an upper
        bound that is exact when that sum is already a multiple.
        """
        if self.is_static:
            return int(evaluate_all(self).max()) + 1
        if isinstance(self.outer, Swizzle):
            span = 1 << self.outer.bit_span
            covered = self.offset + self.inner.cosize
            return sym.normalize(sym.ceil_div(covered, span) * span)
        raise LayoutError(
            "ComposedLayout.cosize needs static extents unless the outer function is a swizzle",
            hint="specialize the sizes first (Layout.specialize / ComposedLayout.specialize)",
        )

    # ----------------------------------------------------------------------- evaluation

    def __call__(self, *coord: Any) -> Any:
        """``outer(offset + inner(coord))``; the same index and coordinate forms as a Layout."""
        linear = self.inner(*coord)
        if sym.static_value(self.offset) != 0:
            linear = sym.normalize(self.offset + linear)
        return self.outer(linear)

    def idx2crd(self, index: Any) -> Any:
        return self.inner.idx2crd(index)

    def slice(self, coord: Any) -> tuple[ComposedLayout, int]:
        """Fix the integer modes of ``coord``; the offset they give stays inside the outer function.

        Returns ``(sub, 0)`` with ``C(c) == sub(c restricted to the None modes)``, the same form
        as :meth:`Layout.slice` (whose offset can be pulled out; here it cannot).
        """
        sub, extra = self.inner.slice(coord)
        return ComposedLayout(self.outer, sym.normalize(self.offset + extra), sub), 0

    # ----------------------------------------------------------------------- re-indexing

    def flatten(self) -> ComposedLayout:
        return self.with_inner(self.inner.flatten())

    def coalesce(self, profile: Any = None) -> ComposedLayout:
        return self.with_inner(self.inner.coalesce(profile))

    def compose(self, layout: Layout) -> ComposedLayout:
        """``C ∘ layout``: ``result(i) == C(layout(i))`` for every ``i < size(layout)``."""
        if isinstance(self.inner, ComposedLayout):
            return self.with_inner(self.inner.compose(layout))
        return self.with_inner(composition(self.inner, layout))

    def specialize(self, env: dict[Any, int]) -> ComposedLayout:
        """Replace size symbols by values in every part."""
        outer = self.outer.specialize(env) if hasattr(self.outer, "specialize") else self.outer
        offset = self.offset
        if isinstance(offset, sympy.Expr) and offset.free_symbols:
            binding = {
                s: sympy.Integer(env[s] if s in env else env[s.name])
                for s in offset.free_symbols
                if s in env or s.name in env
            }
            offset = sym.normalize(offset.xreplace(binding))
        return ComposedLayout(outer, offset, self.inner.specialize(env))

    def __str__(self) -> str:
        return f"{self.outer} o {self.offset} o {self.inner}"

    __repr__ = __str__


# --------------------------------------------------------------------------- enumeration

#: Largest domain the concrete helpers below enumerate.
MAX_ENUMERATION = 1 << 24


def _flat_static(layout: Layout) -> tuple[tuple[int, ...], tuple[int, ...]]:
    flat = layout.flatten()
    shape = flat.shape if isinstance(flat.shape, tuple) else (flat.shape,)
    stride = flat.stride if isinstance(flat.stride, tuple) else (flat.stride,)
    if not all(isinstance(x, int) for x in (*shape, *stride)):
        raise LayoutError(
            f"{layout} has symbolic extents: it cannot be enumerated",
            hint="specialize the sizes first",
        )
    return shape, stride


def evaluate_at(function: Any, indices: Any) -> Any:
    """A static Swizzle, Layout or ComposedLayout at every 1-D index of a numpy int array.

    Layouts extend their last mode past their size (as :meth:`Layout.extended`).
    """
    import numpy as np

    if isinstance(function, Swizzle):
        return function(indices)
    if isinstance(function, ComposedLayout):
        linear = evaluate_at(function.inner, indices) + np.int64(int(function.offset))
        return evaluate_at(function.outer, linear)
    shape, stride = _flat_static(function)
    result = np.zeros_like(indices)
    rest = indices
    for k, (s, d) in enumerate(zip(shape, stride)):
        if k == len(shape) - 1:
            coord = rest
        else:
            coord, rest = rest % s, rest // s
        result = result + coord * d
    return result


def evaluate_all(layout: Layout | ComposedLayout) -> Any:
    """The offsets of a static layout at indices ``0 .. size-1``, as a numpy int64 array.

    Post-condition: ``evaluate_all(L)[i] == L(i)`` for every ``i < size(L)``.
    """
    import numpy as np

    size_value = sym.static_value(layout.size)
    if size_value is None or not layout.is_static:
        raise LayoutError(
            f"{layout} has symbolic extents: it cannot be enumerated",
            hint="specialize the sizes first",
        )
    if size_value > MAX_ENUMERATION:
        raise LayoutError(f"{layout}: {size_value} coordinates is too many to enumerate")
    return evaluate_at(layout, np.arange(size_value, dtype=np.int64))


def image(layout: Layout | ComposedLayout) -> frozenset[int]:
    """The set of offsets a static layout takes: ``{L(i) for i < size(L)}``."""
    return frozenset(int(x) for x in evaluate_all(layout))


def is_injective(layout: Layout | ComposedLayout) -> bool:
    """True when no two coordinates of a static layout share an offset."""
    import numpy as np

    values = evaluate_all(layout)
    return len(np.unique(values)) == len(values)


def is_bijective_onto(layout: Layout | ComposedLayout, codomain: Any) -> bool:
    """True when a static layout is a bijection from its domain onto ``codomain``.

    ``codomain`` is an int ``n`` (meaning ``range(n)``), a ``range`` or any iterable of ints.
    Example: a TV layout of an MMA atom is a bijection onto ``range(M * N)``.
    """
    import numpy as np

    if isinstance(codomain, int):
        codomain = range(codomain)
    wanted = np.array(sorted(set(int(x) for x in codomain)), dtype=np.int64)
    values = evaluate_all(layout)
    if len(values) != len(wanted):
        return False
    return bool(np.array_equal(np.sort(values), wanted))


# --------------------------------------------------------------------------- target swizzles
#
# NVIDIA Hopper: the shared-memory swizzle modes of wgmma descriptors (PTX ISA 9.7.15.5.1.2) and
# of TMA tensor copies (PTX ISA 5.5.7, CUtensorMapSwizzle) xor the 16-byte chunk index inside a
# span of 32, 64 or 128 bytes with the index of the 128-byte line: on BYTE offsets they are
# Swizzle(1,4,3), Swizzle(2,4,3) and Swizzle(3,4,3), repeating every 256, 512 and 1024 bytes.

#: 32-byte swizzle mode on byte offsets (16-byte chunk bit 4 ^= line bit 7).
SWIZZLE_32B = Swizzle(1, 4, 3)
#: 64-byte swizzle mode on byte offsets (chunk bits 4-5 ^= line bits 7-8).
SWIZZLE_64B = Swizzle(2, 4, 3)
#: 128-byte swizzle mode on byte offsets (chunk bits 4-6 ^= line bits 7-9).
SWIZZLE_128B = Swizzle(3, 4, 3)
#: No swizzle (the "interleave" mode of wgmma descriptors).
SWIZZLE_NONE = Swizzle(0, 4, 3)

_HOPPER_BY_SPAN = {16: SWIZZLE_NONE, 32: SWIZZLE_32B, 64: SWIZZLE_64B, 128: SWIZZLE_128B}


def hopper_swizzle(span_bytes: int, element_bytes: int = 1) -> Swizzle:
    """The Hopper swizzle of a 32/64/128-byte span (16: no swizzle), in units of ``element_bytes``.

    ``hopper_swizzle(128) == Swizzle(3, 4, 3)`` on bytes; for 2-byte elements
    ``hopper_swizzle(128, 2) == Swizzle(3, 3, 3)``, so ``2 * sw_elements(i) == sw_bytes(2 * i)``.
    """
    if span_bytes not in _HOPPER_BY_SPAN:
        raise LayoutError(
            f"no Hopper swizzle spans {span_bytes} bytes", hint="use 16 (none), 32, 64 or 128"
        )
    if element_bytes > 16:
        raise LayoutError(f"{element_bytes}-byte elements are larger than a 16-byte chunk")
    return _HOPPER_BY_SPAN[span_bytes].element_units(element_bytes)


# AMD gfx942 (CDNA3) LDS: 32 banks of 4 bytes (the ROCm CK-Tile notes on LDS bank conflicts).
# A ds_read_b128 / ds_write_b128 is served in 8 phases of 8 lanes (lanes 0-7, 8-15, ...), each
# phase reading 8 x 16 bytes = all 32 banks once, so a phase is conflict-free exactly when its 8
# lanes hit 8 different 16-byte slots modulo 128 bytes.  The layout argus uses for a row-major
# LDS tile read by MFMA operand loads (lane i of a phase reads row r0 + i, same 16-byte chunk)
# xors the 16-byte chunk index with the row bits that do not already select the slot:
#
#   row_bytes >= 128:  Swizzle(3, 4, log2(row_bytes) - 4)  chunk ^= row % 8
#   row_bytes  <  128: Swizzle(log2(row_bytes) - 4, 4, 3)  chunk ^= (row // (128 / row_bytes))
#
# It permutes the chunks inside each row (rows stay whole: a row-major ds_write_b128 of 8 lanes
# per row-segment stays conflict-free too), and 8 consecutive rows at one logical chunk land in 8
# different slots.  This is the same XOR-preshuffle idea as CK's LDS index swapping and Triton's
# swizzled shared layouts (vec = 16 bytes), written as one CuTe swizzle so the verifier can
# invert it.

#: Banks and bank width of the gfx942 LDS (also the NVIDIA shared-memory bank geometry).
LDS_BANKS = 32
LDS_BANK_BYTES = 4


def lds_swizzle(row_bytes: int, element_bytes: int = 1) -> Swizzle:
    """The gfx942 LDS swizzle for row-major tiles with ``row_bytes``-byte rows (16-byte vectors).

    Returned in units of ``element_bytes``.  ``row_bytes`` must be a power of two >= 16; 16-byte
    rows need no swizzle (identity).
    """
    if row_bytes < 16 or row_bytes & (row_bytes - 1):
        raise LayoutError(
            f"LDS swizzle: a row of {row_bytes} bytes is not a power of two >= 16",
            hint="pad the row to a power of two or use an unswizzled layout",
        )
    log_row = row_bytes.bit_length() - 1
    if log_row >= 7:
        byte_swizzle = Swizzle(3, 4, log_row - 4)
    else:
        byte_swizzle = Swizzle(log_row - 4, 4, 3)
    return byte_swizzle.element_units(element_bytes)


def lds_tile_layout(rows: int, row_elements: int, element_bytes: int) -> ComposedLayout:
    """A row-major ``rows x row_elements`` LDS tile with :func:`lds_swizzle`, in element units."""
    row_bytes = row_elements * element_bytes
    return ComposedLayout(
        lds_swizzle(row_bytes, element_bytes), 0, Layout((rows, row_elements), (row_elements, 1))
    )


def bank_conflict_degree(
    addresses: Any,
    access_bytes: int,
    *,
    banks: int = LDS_BANKS,
    bank_bytes: int = LDS_BANK_BYTES,
) -> int:
    """Worst number of serialized passes of one shared-memory / LDS instruction.

    ``addresses`` are the byte addresses of the lanes (in lane order).  Model: the lanes are
    served in phases of ``banks * bank_bytes / access_bytes`` consecutive lanes (8 lanes for
    16-byte accesses, 16 for 8-byte, 32 for 4-byte); within a phase, each bank serves one
    distinct ``bank_bytes`` word per pass (lanes reading the same word share it).  Returns the
    maximum over phases of the largest number of distinct words any bank must serve; 1 means
    conflict-free.
    """
    words_per_access = max(1, access_bytes // bank_bytes)
    lanes_per_phase = max(1, (banks * bank_bytes) // access_bytes)
    addresses = [int(a) for a in addresses]
    worst = 0
    for start in range(0, len(addresses), lanes_per_phase):
        per_bank: dict[int, set[int]] = {}
        for address in addresses[start : start + lanes_per_phase]:
            first_word = address // bank_bytes
            for word in range(first_word, first_word + words_per_access):
                per_bank.setdefault(word % banks, set()).add(word)
        worst = max(worst, max((len(words) for words in per_bank.values()), default=0))
    return worst
