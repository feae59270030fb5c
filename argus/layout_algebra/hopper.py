"""Hopper shared-memory operand layouts: wgmma descriptors and TMA boxes.

``wgmma`` reads its shared-memory operands through a 64-bit *matrix descriptor* (start address,
leading and stride byte offsets, swizzle mode); a TMA tensor copy writes a box into shared
memory in one of the same swizzle modes.  This module gives both as layouts, so the verifier
can check that what a TMA (or any other writer) puts in shared memory is what the descriptor
makes ``wgmma`` read.

Units and conventions
---------------------
* Operand tiles are indexed ``(mn, k)``: ``mn`` is M for A and N for B, ``k`` the reduction
  index; the layouts are functions of that coordinate.
* Addresses are BYTE offsets from the start of the shared-memory buffer, which is assumed
  aligned to the swizzle pattern's repeat (128 / 256 / 512 / 1024 bytes for none / 32B / 64B /
  128B): the hardware swizzles absolute addresses, and with that alignment swizzling the
  offset is the same as swizzling the address (:attr:`Swizzle.bit_span`).  With
  ``units="elements"`` the same layouts are given in element offsets (swizzle included).
* A swizzle mode xors 16-byte chunk bits 4.. with 128-byte line bits 7.. of the address:
  ``Swizzle(1,4,3)``, ``Swizzle(2,4,3)``, ``Swizzle(3,4,3)`` on bytes (PTX ISA 5.5.7 and
  9.7.15.5.1.2).

Sources: PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout" (canonical layouts, leading and
stride dimension byte offsets), 9.7.15.5.1.2.2 "Matrix Descriptor Format", 5.5.7 "Swizzling
Modes"; CUDA driver API ``cuTensorMapEncodeTiled`` (box constraints).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from argus import symbolic as sym
from argus.layout_algebra.layout import Layout, LayoutError
from argus.layout_algebra.swizzle import ComposedLayout, Swizzle, hopper_swizzle

__all__ = [
    "Major",
    "SwizzleMode",
    "WgmmaDescriptor",
    "canonical_wgmma_layout",
    "decode_wgmma_descriptor",
    "encode_wgmma_descriptor",
    "matrix_base_offset",
    "smem_tile_layout",
    "tma_box_smem_layout",
    "tma_smem_alignment",
    "tma_transaction_bytes",
    "wgmma_descriptor",
]


class SwizzleMode(enum.Enum):
    """A Hopper shared-memory swizzle mode (``INTERLEAVE`` is the unswizzled mode)."""

    INTERLEAVE = 16
    B32 = 32
    B64 = 64
    B128 = 128

    @property
    def span_bytes(self) -> int:
        """Bytes of one swizzled row (16: one core-matrix row when unswizzled)."""
        return self.value

    @property
    def repeat_bytes(self) -> int:
        """Bytes after which the pattern repeats (8 rows of the span)."""
        return 8 * self.value

    @property
    def byte_swizzle(self) -> Swizzle:
        """The swizzle on byte offsets (``Swizzle(0,4,3)`` for the unswizzled mode)."""
        return hopper_swizzle(self.value)

    def element_swizzle(self, element_bytes: int) -> Swizzle:
        """The swizzle on offsets counted in ``element_bytes``-byte elements."""
        return hopper_swizzle(self.value, element_bytes)

    @property
    def descriptor_code(self) -> int:
        """Bits 62-63 of a wgmma descriptor (PTX ISA 9.7.15.5.1.2.2)."""
        return {16: 0, 128: 1, 64: 2, 32: 3}[self.value]

    @property
    def tma_code(self) -> int:
        """``CUtensorMapSwizzle`` value (NONE, 32B, 64B, 128B = 0, 1, 2, 3)."""
        return {16: 0, 32: 1, 64: 2, 128: 3}[self.value]

    @classmethod
    def from_byte_swizzle(cls, swizzle: Swizzle) -> SwizzleMode:
        """The mode of a byte-offset swizzle; :class:`LayoutError` if it is not a Hopper mode."""
        if swizzle.is_identity:
            return cls.INTERLEAVE
        for mode in (cls.B32, cls.B64, cls.B128):
            if swizzle == mode.byte_swizzle:
                return mode
        raise LayoutError(
            f"{swizzle} on bytes is not a Hopper shared-memory swizzle mode",
            hint="wgmma and TMA support Sw<1,4,3> (32B), Sw<2,4,3> (64B), Sw<3,4,3> (128B) on "
            "byte offsets, or no swizzle",
        )


class Major(enum.Enum):
    """Which index of an operand tile is contiguous in shared memory."""

    K = "K"
    MN = "MN"


def _check_element_bytes(element_bytes: int, allowed: tuple[int, ...], what: str) -> None:
    if element_bytes not in allowed:
        raise LayoutError(
            f"{what}: {element_bytes}-byte elements are not supported",
            hint=f"element sizes: {', '.join(str(a) for a in allowed)} bytes",
        )


def _in_units(inner_bytes: Layout, mode: SwizzleMode, element_bytes: int, units: str) -> Any:
    if units == "bytes":
        return ComposedLayout(mode.byte_swizzle, 0, inner_bytes)
    if units == "elements":
        strides = tuple(_divide_strides(d, element_bytes) for d in inner_bytes.stride)
        return ComposedLayout(
            mode.element_swizzle(element_bytes), 0, Layout(inner_bytes.shape, strides)
        )
    raise LayoutError(f"units must be 'bytes' or 'elements', not {units!r}")


def _divide_strides(stride: Any, element_bytes: int) -> Any:
    if isinstance(stride, tuple):
        return tuple(_divide_strides(d, element_bytes) for d in stride)
    if stride % element_bytes:
        raise LayoutError(f"stride {stride} bytes is not a whole number of elements")
    return stride // element_bytes


# --------------------------------------------------------------------------- canonical layouts


def canonical_wgmma_layout(
    mode: SwizzleMode,
    major: Major,
    element_bytes: int,
    mn: int,
    *,
    leading_byte_offset: int | None = None,
    stride_byte_offset: int | None = None,
) -> ComposedLayout:
    """What one wgmma K step reads through a descriptor: ``(mn, k) -> byte offset``.

    Transcribes the canonical layouts of PTX ISA 9.7.15.5.1.2.1.3 for the ``mn x K`` slice one
    instruction reads (``K * element_bytes == 32``: 16 for 16-bit types, 32 for 8-bit, 8 for
    tf32), with ``T = 16 / element_bytes`` elements per 16 bytes and ``w = span / 16``:

    ================  ==================  ===========================================
    major, mode       shape               byte strides
    ================  ==================  ===========================================
    K, none           ``((8,m),(T,2))``   ``((16, SBO), (e, LBO))``
    K, swizzled       ``((8,m),(T,2))``   ``((span, SBO), (e, 16))``    (LBO unused)
    MN, none          ``((T,m),(8,2))``   ``((e, SBO), (16, LBO))``
    MN, swizzled      ``((T,w,m),(8,2))`` ``((e, 16, LBO), (span, SBO))``
    ================  ==================  ===========================================

    composed with the mode's byte swizzle, starting at offset 0 (a descriptor's start address
    adds to the offset before the swizzle).  Offsets the layout does not use may be omitted.
    """
    e = element_bytes
    t = 16 // e
    if major is Major.K:
        _check_element_bytes(e, (1, 2, 4), "wgmma K-major operand")
        if mn % 8:
            raise LayoutError(f"wgmma operand: MN = {mn} is not a multiple of 8")
        m = mn // 8
        sbo = stride_byte_offset if stride_byte_offset is not None else 8 * mode.span_bytes
        if mode is SwizzleMode.INTERLEAVE:
            if leading_byte_offset is None:
                raise LayoutError("K-major unswizzled layouts need a leading byte offset")
            inner = Layout(((8, m), (t, 2)), ((16, sbo), (e, leading_byte_offset)))
        else:
            inner = Layout(((8, m), (t, 2)), ((mode.span_bytes, sbo), (e, 16)))
        return ComposedLayout(mode.byte_swizzle, 0, inner)
    _check_element_bytes(e, (2,), "wgmma MN-major operand (only f16/bf16 may be transposed)")
    w = mode.span_bytes // 16
    if mn % (t * w):
        raise LayoutError(f"wgmma MN-major operand: MN = {mn} is not a multiple of {t * w}")
    m = mn // (t * w)
    if mode is SwizzleMode.INTERLEAVE:
        sbo = stride_byte_offset if stride_byte_offset is not None else 128
        if leading_byte_offset is None:
            raise LayoutError("MN-major unswizzled layouts need a leading byte offset")
        inner = Layout(((t, m), (8, 2)), ((e, sbo), (16, leading_byte_offset)))
    else:
        lbo = leading_byte_offset if leading_byte_offset is not None else mode.repeat_bytes
        if stride_byte_offset is None:
            raise LayoutError("MN-major swizzled layouts need a stride byte offset")
        inner = Layout(((t, w, m), (8, 2)), ((e, 16, lbo), (mode.span_bytes, stride_byte_offset)))
    return ComposedLayout(mode.byte_swizzle, 0, inner)


def smem_tile_layout(
    mode: SwizzleMode,
    major: Major,
    element_bytes: int,
    mn: int,
    k: int,
    *,
    atoms_mn_first: bool = True,
    units: str = "elements",
) -> ComposedLayout:
    """A whole ``mn x k`` operand tile made of swizzle atoms.

    The atom is 8 rows of ``span`` bytes: for K-major, 8 MN-rows each holding ``span`` bytes of
    K; for MN-major, 8 K-rows each holding ``span`` bytes of MN (unswizzled: one 8 x 16-byte core
    matrix).  Atoms follow each other along MN, then along K (``atoms_mn_first``, the order of
    the PTX ISA examples and of K-major TMA boxes of inner extent ``span`` bytes), or along K
    first (what MN-major TMA boxes of ``span`` bytes by the whole K write).  Every K step of the
    tile has a wgmma descriptor (:func:`wgmma_descriptor`).  Post-condition: a bijection from
    the tile onto ``[0, mn * k)`` elements.
    """
    e = element_bytes
    _check_element_bytes(e, (1, 2, 4, 8), "shared-memory tile")
    span = mode.span_bytes
    per_span = span // e
    if major is Major.K:
        if mn % 8 or k % per_span:
            raise LayoutError(
                f"K-major {mode.name} tile {mn}x{k}: MN must be a multiple of 8 and K of "
                f"{per_span} ({span} bytes)"
            )
        atoms_mn, atoms_k = mn // 8, k // per_span
    else:
        if mn % per_span or k % 8:
            raise LayoutError(
                f"MN-major {mode.name} tile {mn}x{k}: MN must be a multiple of {per_span} "
                f"({span} bytes) and K of 8"
            )
        atoms_mn, atoms_k = mn // per_span, k // 8
    atom = 8 * span
    if atoms_mn_first:
        mn_atom_stride, k_atom_stride = atom, atoms_mn * atom
    else:
        mn_atom_stride, k_atom_stride = atoms_k * atom, atom
    if major is Major.K:
        inner = Layout(
            ((8, atoms_mn), (per_span, atoms_k)), ((span, mn_atom_stride), (e, k_atom_stride))
        )
    else:
        inner = Layout(
            ((per_span, atoms_mn), (8, atoms_k)), ((e, mn_atom_stride), (span, k_atom_stride))
        )
    return _in_units(inner, mode, e, units)


# --------------------------------------------------------------------------- descriptors

_FIELD_LIMIT = 1 << 18  # descriptor-encode keeps address bits 4..17


@dataclass(frozen=True)
class WgmmaDescriptor:
    """The fields of a wgmma matrix descriptor, offsets in bytes.

    ``start_offset`` is relative to the shared-memory buffer (add the buffer's address when
    encoding).  ``leading_byte_offset`` is ``None`` where the PTX ISA says it is unused
    (K-major swizzled layouts: "not used, assumed to be 1"); it is then encoded as 1.
    ``base_offset`` is 0: the buffer is assumed aligned to the swizzle pattern's repeat.
    """

    mode: SwizzleMode
    major: Major
    start_offset: int
    leading_byte_offset: int | None
    stride_byte_offset: int
    base_offset: int = 0

    def encode(self, buffer_address: int = 0) -> int:
        """The 64-bit descriptor for a buffer at shared-memory address ``buffer_address``."""
        if self.mode is not SwizzleMode.INTERLEAVE and buffer_address % self.mode.repeat_bytes:
            raise LayoutError(
                f"a {self.mode.name} buffer at shared-memory address {buffer_address} is not "
                f"aligned to the {self.mode.repeat_bytes}-byte swizzle pattern",
                hint="align the buffer to the pattern repeat (base offset 0), as TMA and "
                "wgmma layouts assume",
            )
        return encode_wgmma_descriptor(
            buffer_address + self.start_offset,
            self.leading_byte_offset,
            self.stride_byte_offset,
            self.mode,
            self.base_offset,
        )


def _encode_field(value: int, what: str) -> int:
    if value < 0 or value >= _FIELD_LIMIT or value % 16:
        raise LayoutError(
            f"wgmma descriptor: {what} {value} is not a multiple of 16 in [0, {_FIELD_LIMIT})",
            hint="descriptor fields hold (x & 0x3FFFF) >> 4 in 14 bits",
        )
    return (value & 0x3FFFF) >> 4


def encode_wgmma_descriptor(
    start_address: int,
    leading_byte_offset: int | None,
    stride_byte_offset: int,
    mode: SwizzleMode,
    base_offset: int = 0,
) -> int:
    """Pack a wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format").

    ===========  =====================================================
    bits 0-13    ``(start_address & 0x3FFFF) >> 4``
    bits 16-29   ``(leading_byte_offset & 0x3FFFF) >> 4`` (1 if None)
    bits 32-45   ``(stride_byte_offset & 0x3FFFF) >> 4``
    bits 49-51   matrix base offset
    bits 62-63   swizzle mode: 0 none, 1 128B, 2 64B, 3 32B
    ===========  =====================================================
    """
    if not 0 <= base_offset < 8:
        raise LayoutError(f"wgmma descriptor: base offset {base_offset} is not in [0, 8)")
    lbo = 1 if leading_byte_offset is None else _encode_field(leading_byte_offset, "LBO")
    return (
        _encode_field(start_address, "start address")
        | lbo << 16
        | _encode_field(stride_byte_offset, "SBO") << 32
        | base_offset << 49
        | mode.descriptor_code << 62
    )


def decode_wgmma_descriptor(value: int) -> dict[str, Any]:
    """The fields of a 64-bit descriptor, offsets in bytes (inverse of the encoder)."""
    code = (value >> 62) & 0x3
    return {
        "start_address": (value & 0x3FFF) << 4,
        "leading_byte_offset": ((value >> 16) & 0x3FFF) << 4,
        "stride_byte_offset": ((value >> 32) & 0x3FFF) << 4,
        "base_offset": (value >> 49) & 0x7,
        "mode": {0: SwizzleMode.INTERLEAVE, 1: SwizzleMode.B128, 2: SwizzleMode.B64}.get(
            code, SwizzleMode.B32
        ),
    }


def matrix_base_offset(pattern_start_address: int, mode: SwizzleMode) -> int:
    """The descriptor's base offset for a pattern starting at that address (PTX 9.7.15.5.1.2.2).

    0 when the pattern starts on its repeat boundary, else ``(address >> 7) & 7``.
    """
    if mode is SwizzleMode.INTERLEAVE or pattern_start_address % mode.repeat_bytes == 0:
        return 0
    return (pattern_start_address >> 7) & 0x7


def _byte_function(layout: Any, element_bytes: int, units: str) -> tuple[SwizzleMode, Any]:
    """The mode of ``layout`` and a numpy function ``(mn, k) -> unswizzled byte offset``."""
    if units not in ("bytes", "elements"):
        raise LayoutError(f"units must be 'bytes' or 'elements', not {units!r}")
    scale = element_bytes if units == "elements" else 1
    if isinstance(layout, ComposedLayout):
        if not isinstance(layout.outer, Swizzle):
            raise LayoutError(f"{layout}: the outer function is not a swizzle")
        swizzle = layout.outer.byte_units(scale) if scale > 1 else layout.outer
    elif isinstance(layout, Layout):
        swizzle = Swizzle(0, 4, 3)
    else:
        raise LayoutError(f"{layout!r} is not a Layout or ComposedLayout")
    mode = SwizzleMode.from_byte_swizzle(swizzle)

    def unswizzled(mn: Any, k: Any) -> Any:
        return mode.byte_swizzle(layout(mn, k) * scale)  # a swizzle is its own inverse

    return mode, unswizzled


def wgmma_descriptor(
    layout: Layout | ComposedLayout,
    element_bytes: int,
    *,
    k_step: int = 0,
    units: str = "elements",
) -> WgmmaDescriptor:
    """The descriptor with which wgmma reads K step ``k_step`` of an operand tile.

    ``layout`` maps the tile coordinate ``(mn, k)`` to the shared-memory offset (a plain layout
    means no swizzle; a :class:`ComposedLayout` must have a Hopper swizzle outside).  K step
    ``s`` is ``k`` in ``[s * K, (s + 1) * K)`` with ``K * element_bytes == 32``.  The fields are
    read off the layout (start, then LBO and SBO at the coordinates the PTX ISA defines them by)
    and the canonical layout they describe is compared with ``layout`` at every coordinate of
    the K step: a layout that no descriptor describes raises :class:`LayoutError` naming the first
    coordinate where the best candidate differs.
    """
    import numpy as np

    e = element_bytes
    _check_element_bytes(e, (1, 2, 4), "wgmma operand")
    if layout.rank != 2 or not layout.is_static:
        raise LayoutError(
            f"wgmma_descriptor: {layout} must be a static rank-2 (mn, k) layout",
            hint="specialize the sizes and select the (mn, k) modes of the operand tile",
        )
    mn = sym.static_value(layout[0].size)
    k_total = sym.static_value(layout[1].size)
    k_width = 32 // e
    if k_total % k_width or mn % 8:
        raise LayoutError(
            f"wgmma_descriptor: a {mn}x{k_total} tile is not a whole number of {k_width}-element "
            "K steps of a multiple of 8 rows"
        )
    if not 0 <= k_step < k_total // k_width:
        raise LayoutError(f"wgmma_descriptor: K step {k_step} is outside the tile")
    mode, unswizzled = _byte_function(layout, e, units)
    rows = np.arange(mn, dtype=np.int64)[:, None]
    cols = np.arange(k_step * k_width, (k_step + 1) * k_width, dtype=np.int64)[None, :]
    rows, cols = np.broadcast_arrays(rows, cols)
    table = np.asarray(unswizzled(rows, cols), dtype=np.int64)
    start = int(table[0, 0])

    def probe(r: int, c: int, default: int) -> int:
        if r < table.shape[0] and c < table.shape[1]:
            return int(table[r, c]) - start
        return default

    span = mode.span_bytes
    if int(table[0, 1]) - start == e:
        major = Major.K
        lbo = probe(0, 16 // e, 0) if mode is SwizzleMode.INTERLEAVE else None
        sbo = probe(8, 0, 8 * span)
    elif int(table[1, 0]) - start == e:
        major = Major.MN
        if e != 2:
            raise LayoutError(
                f"wgmma_descriptor: an MN-major operand of {e}-byte elements",
                hint="wgmma transposes (reads MN-major) only f16/bf16 operands",
            )
        if mode is SwizzleMode.INTERLEAVE:
            sbo, lbo = probe(8, 0, 128), probe(0, 8, 0)
        else:
            lbo, sbo = probe(span // 2, 0, mode.repeat_bytes), probe(0, 8, 0)
    else:
        raise LayoutError(
            f"wgmma_descriptor: neither k nor mn is contiguous at (0, {k_step * k_width}) of "
            f"{layout}",
            hint="a descriptor needs 16-byte core-matrix rows: K-major or MN-major",
        )
    if start < 0 or start % 16:
        raise LayoutError(f"wgmma_descriptor: start offset {start} is not a multiple of 16")
    for name, value in (("leading", lbo), ("stride", sbo)):
        if value is not None and (value <= 0 or value % 16 or value >= _FIELD_LIMIT):
            raise LayoutError(
                f"wgmma_descriptor: {name} byte offset {value} of {layout} cannot be encoded",
                hint="offsets must be positive multiples of 16 below 2**18",
            )
    canonical = canonical_wgmma_layout(
        mode, major, e, mn, leading_byte_offset=lbo, stride_byte_offset=sbo
    ).inner
    expected = start + np.asarray(canonical(rows, cols - k_step * k_width), dtype=np.int64)
    mismatch = np.argwhere(expected != table)
    if len(mismatch):
        r, c = (int(x) for x in mismatch[0])
        raise LayoutError(
            f"wgmma_descriptor: {layout} is not a {major.value}-major {mode.name} wgmma layout: at "
            f"(mn, k) = ({r}, {k_step * k_width + c}) it has unswizzled byte offset "
            f"{int(table[r, c])}, a descriptor with start {start}, LBO {lbo}, SBO {sbo} gives "
            f"{int(expected[r, c])}",
            hint="use a canonical layout (smem_tile_layout) or one TMA writes",
        )
    return WgmmaDescriptor(mode, major, start, lbo, sbo)


# --------------------------------------------------------------------------- TMA boxes

_TMA_ELEMENT_BYTES = (1, 2, 4, 8)


def tma_box_smem_layout(
    box: tuple[int, ...], element_bytes: int, mode: SwizzleMode, *, units: str = "bytes"
) -> ComposedLayout:
    """Where a TMA tiled copy puts box element ``(x0, x1, ...)`` in shared memory.

    ``box`` is in TMA order (``box[0]`` the innermost, contiguous dimension).  The box is
    written densely (``x0`` fastest) and the mode's swizzle applies to the resulting address
    (PTX ISA 5.5.7), so the layout is ``swizzle ∘ box:(e, e*box0, ...)`` in bytes, for a
    destination aligned to :func:`tma_smem_alignment`.  Checked constraints
    (``cuTensorMapEncodeTiled``, interleave none): rank 1..5; every box extent in ``[1, 256]``;
    ``box[0] * element_bytes`` a multiple of 16 bytes; with a swizzle, ``box[0] *
    element_bytes`` at most the swizzle span (32, 64 or 128 bytes); element size 1, 2, 4 or 8.
    """
    box = tuple(box)
    e = element_bytes
    _check_element_bytes(e, _TMA_ELEMENT_BYTES, "TMA box")
    if not 1 <= len(box) <= 5:
        raise LayoutError(f"TMA box {box}: rank {len(box)} is not in 1..5")
    for extent in box:
        if not isinstance(extent, int) or not 1 <= extent <= 256:
            raise LayoutError(f"TMA box {box}: extent {extent!r} is not in [1, 256]")
    inner_bytes = box[0] * e
    if inner_bytes % 16:
        raise LayoutError(
            f"TMA box {box}: the inner extent is {inner_bytes} bytes, not a multiple of 16",
            hint="boxDim[0] * element size must be a multiple of 16 bytes",
        )
    if mode is not SwizzleMode.INTERLEAVE and inner_bytes > mode.span_bytes:
        raise LayoutError(
            f"TMA box {box}: the inner extent of {inner_bytes} bytes exceeds the "
            f"{mode.span_bytes}-byte swizzle span",
            hint="split the box along its inner dimension or use a wider swizzle",
        )
    strides: list[int] = []
    running = e
    for extent in box:
        strides.append(running)
        running *= extent
    inner = Layout(box, tuple(strides)) if len(box) > 1 else Layout(box[0], e)
    return _in_units(inner, mode, e, units)


def tma_transaction_bytes(box: tuple[int, ...], element_bytes: int) -> int:
    """Bytes one TMA box copy delivers (what ``mbarrier.expect_tx`` must declare)."""
    total = element_bytes
    for extent in box:
        total *= extent
    return total


def tma_smem_alignment(mode: SwizzleMode) -> int:
    """Shared-memory alignment a TMA destination needs for :func:`tma_box_smem_layout` to hold.

    128 bytes for any tensor copy, and the pattern repeat (256 / 512 / 1024 bytes) for the
    swizzled modes so that the swizzle base offset is 0 (PTX ISA 5.5.7).
    """
    return max(128, mode.repeat_bytes) if mode is not SwizzleMode.INTERLEAVE else 128
