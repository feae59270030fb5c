"""Hopper shared-memory layouts, wgmma descriptors and TMA boxes against the PTX ISA."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from argus.layout_algebra import ComposedLayout, Layout, LayoutError, Swizzle
from argus.layout_algebra.hopper import (
    Major,
    SwizzleMode,
    WgmmaDescriptor,
    canonical_wgmma_layout,
    decode_wgmma_descriptor,
    encode_wgmma_descriptor,
    matrix_base_offset,
    smem_tile_layout,
    tma_box_smem_layout,
    tma_smem_alignment,
    tma_transaction_bytes,
    wgmma_descriptor,
)
from argus.layout_algebra.swizzle import evaluate_all, is_bijective_onto

# --------------------------------------------------------------------------- independent model
# PTX ISA 9.7.15.5.1.2.1.3 "Canonical Layouts" written out as arithmetic (T = 16 / e elements per
# 16 bytes, w = span / 16) and the swizzle of 5.5.7 as bit operations: the address wgmma reads
# for element (mn, k) of one K step, given the descriptor fields.


def ptx_swizzle(span: int, address: int) -> int:
    bits = {16: 0, 32: 1, 64: 2, 128: 3}[span]
    line = (address >> 7) & ((1 << bits) - 1)
    return address ^ (line << 4)


def ptx_read_address(
    span: int, major: str, e: int, start: int, lbo, sbo: int, mn: int, k: int
) -> int:
    t = 16 // e
    if major == "K":
        if span == 16:
            linear = (mn % 8) * 16 + (mn // 8) * sbo + (k % t) * e + (k // t) * lbo
        else:
            linear = (mn % 8) * span + (mn // 8) * sbo + k * e
    else:
        w = span // 16
        if span == 16:
            linear = (mn % t) * e + (mn // t) * sbo + (k % 8) * 16 + (k // 8) * lbo
        else:
            linear = (mn % t) * e + ((mn // t) % w) * 16 + (mn // (t * w)) * lbo
            linear += (k % 8) * span + (k // 8) * sbo
    return ptx_swizzle(span, start + linear)


# --------------------------------------------------------------------------- PTX examples
# PTX ISA 9.7.15.5.1.2.1.3 "Examples": exact layouts (elements; the swizzle acts on bytes) with
# the LBO / SBO encodings the document states.

PTX_EXAMPLES = [
    # (name, element bytes, swizzle bits, layout, (LBO >> 4 or None), SBO >> 4)
    ("K-major none tf32", 4, 0, "((8,2),(4,4)):((4,32),(1,64))", 16, 8),
    ("K-major 32B tf32", 4, 1, "((8,2),(4,4)):((8,64),(1,4))", None, 16),
    ("MN-major none bf16", 2, 0, "((8,1,2),(8,2)):((1,8,64),(8,128))", 16, 8),
    ("MN-major 32B bf16", 2, 1, "((8,2,2),(8,2)):((1,8,128),(16,256))", 16, 32),
    ("MN-major 64B bf16", 2, 2, "((8,4,2),(8,2)):((1,8,256),(32,512))", 32, 64),
]


@pytest.mark.parametrize(("name", "e", "bits", "text", "lbo", "sbo"), PTX_EXAMPLES)
def test_descriptor_fields_of_ptx_examples(name, e, bits, text, lbo, sbo) -> None:
    element_swizzle = Swizzle(bits, 4, 3).element_units(e)
    layout = ComposedLayout(element_swizzle, 0, Layout.parse(text))
    steps = layout[1].size * e // 32
    for step in range(steps):
        desc = wgmma_descriptor(layout, e, k_step=step)
        assert desc.mode.span_bytes == {0: 16, 1: 32, 2: 64}[bits]
        assert desc.major is (Major.K if name.startswith("K") else Major.MN)
        got_lbo = None if desc.leading_byte_offset is None else desc.leading_byte_offset >> 4
        assert (got_lbo, desc.stride_byte_offset >> 4) == (lbo, sbo)
        word = desc.encode(0)
        assert (word >> 16) & 0x3FFF == (1 if lbo is None else lbo)
        assert (word >> 32) & 0x3FFF == sbo


# --------------------------------------------------------------------------- descriptor encoding


def test_descriptor_bit_layout() -> None:
    word = encode_wgmma_descriptor(0x1230, 128, 256, SwizzleMode.INTERLEAVE)
    assert word == (0x1230 >> 4) | (128 >> 4) << 16 | (256 >> 4) << 32
    word = encode_wgmma_descriptor(0x400, None, 1024, SwizzleMode.B128, base_offset=3)
    assert word & 0x3FFF == 0x40
    assert (word >> 16) & 0x3FFF == 1
    assert (word >> 32) & 0x3FFF == 64
    assert (word >> 49) & 0x7 == 3
    assert word >> 62 == 1
    assert encode_wgmma_descriptor(0, 16, 16, SwizzleMode.B64) >> 62 == 2
    assert encode_wgmma_descriptor(0, 16, 16, SwizzleMode.B32) >> 62 == 3
    # untouched bits stay 0
    assert word & ~(0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 0x7 << 49 | 0x3 << 62) == 0
    fields = decode_wgmma_descriptor(word)
    assert fields == {
        "start_address": 0x400,
        "leading_byte_offset": 16,
        "stride_byte_offset": 1024,
        "base_offset": 3,
        "mode": SwizzleMode.B128,
    }


def test_descriptor_encoding_rejects_unencodable_fields() -> None:
    for bad in (8, -16, 1 << 18):
        with pytest.raises(LayoutError):
            encode_wgmma_descriptor(bad, 16, 16, SwizzleMode.B128)
        with pytest.raises(LayoutError):
            encode_wgmma_descriptor(0, bad, 16, SwizzleMode.INTERLEAVE)
        with pytest.raises(LayoutError):
            encode_wgmma_descriptor(0, 16, bad, SwizzleMode.INTERLEAVE)
    with pytest.raises(LayoutError):
        encode_wgmma_descriptor(0, 16, 16, SwizzleMode.B128, base_offset=8)
    desc = WgmmaDescriptor(SwizzleMode.B128, Major.K, 32, None, 1024)
    assert desc.encode(2048) & 0x3FFF == (2048 + 32) >> 4
    with pytest.raises(LayoutError):
        desc.encode(2048 + 128)  # not aligned to the 1024-byte pattern


def test_mode_codes_and_base_offset() -> None:
    assert [m.descriptor_code for m in SwizzleMode] == [0, 3, 2, 1]
    assert [m.tma_code for m in SwizzleMode] == [0, 1, 2, 3]
    assert [m.repeat_bytes for m in SwizzleMode] == [128, 256, 512, 1024]
    assert SwizzleMode.from_byte_swizzle(Swizzle(3, 4, 3)) is SwizzleMode.B128
    assert SwizzleMode.from_byte_swizzle(Swizzle(0, 0, 0)) is SwizzleMode.INTERLEAVE
    with pytest.raises(LayoutError):
        SwizzleMode.from_byte_swizzle(Swizzle(3, 3, 3))
    assert matrix_base_offset(4096, SwizzleMode.B128) == 0
    assert matrix_base_offset(4096 + 384, SwizzleMode.B128) == 3
    assert matrix_base_offset(384, SwizzleMode.INTERLEAVE) == 0


# --------------------------------------------------------------------------- tiles and descriptors

TILE_CASES = [
    (mode, major, e, mn, k, mn_first)
    for mode in SwizzleMode
    for major in Major
    for e in (1, 2, 4)
    if major is Major.K or e == 2
    for mn, k in ((8, 128 // e), (64, 256 // e), (128, 128 // e))
    for mn_first in (True, False)
    if (major is Major.K and mn % 8 == 0)
    or (major is Major.MN and mn % (mode.span_bytes // e) == 0 and k % 8 == 0)
]


@pytest.mark.parametrize(("mode", "major", "e", "mn", "k", "mn_first"), TILE_CASES)
def test_tile_descriptors_reproduce_the_tile(mode, major, e, mn, k, mn_first) -> None:
    tile = smem_tile_layout(mode, major, e, mn, k, atoms_mn_first=mn_first)
    assert tile.shape[0] and tile[0].size == mn and tile[1].size == k
    assert is_bijective_onto(tile, mn * k)
    as_bytes = smem_tile_layout(mode, major, e, mn, k, atoms_mn_first=mn_first, units="bytes")
    assert np.array_equal(evaluate_all(as_bytes), evaluate_all(tile) * e)
    k_width = 32 // e
    rows, cols = np.meshgrid(np.arange(mn), np.arange(k_width), indexing="ij")
    for step in range(k // k_width):
        desc = wgmma_descriptor(tile, e, k_step=step)
        assert desc.mode is mode and desc.major is major
        assert wgmma_descriptor(as_bytes, e, k_step=step, units="bytes") == desc
        stored = tile(rows, cols + step * k_width) * e
        model = ptx_read_address(
            mode.span_bytes,
            major.value,
            e,
            desc.start_offset,
            desc.leading_byte_offset,
            desc.stride_byte_offset,
            rows,
            cols,
        )
        assert np.array_equal(model, stored)
        # spot-check the vectorized model against scalar evaluation
        for r, c in ((0, 0), (mn - 1, k_width - 1), (mn // 2, 1)):
            scalar = ptx_read_address(
                mode.span_bytes,
                major.value,
                e,
                desc.start_offset,
                desc.leading_byte_offset,
                desc.stride_byte_offset,
                r,
                c,
            )
            assert scalar == tile(r, c + step * k_width) * e
        if major is Major.K:
            atom, atoms_k = 8 * mode.span_bytes, k * e // mode.span_bytes
            expected_sbo = atom if (mn_first or mn == 8) else atoms_k * atom
            assert desc.stride_byte_offset == expected_sbo
            if mode is not SwizzleMode.INTERLEAVE:
                assert desc.leading_byte_offset is None


def test_common_gemm_tile_descriptors() -> None:
    """128x64 bf16 K-major, 128B swizzle: SBO = 1024, LBO unused, k steps advance 32 bytes."""
    tile = smem_tile_layout(SwizzleMode.B128, Major.K, 2, 128, 64)
    descs = [wgmma_descriptor(tile, 2, k_step=s) for s in range(4)]
    assert [d.start_offset for d in descs] == [0, 32, 64, 96]
    assert {(d.leading_byte_offset, d.stride_byte_offset) for d in descs} == {(None, 1024)}
    word = descs[1].encode(1 << 14)
    assert word == ((1 << 14) + 32) >> 4 | 1 << 16 | 64 << 32 | 1 << 62


def test_canonical_layouts_match_model_for_explicit_offsets() -> None:
    for mode, major, e in itertools.product(SwizzleMode, Major, (1, 2, 4)):
        if major is Major.MN and e != 2:
            with pytest.raises(LayoutError):
                canonical_wgmma_layout(
                    mode, major, e, 64, leading_byte_offset=256, stride_byte_offset=512
                )
            continue
        lbo, sbo = 4096, 2048
        layout = canonical_wgmma_layout(
            mode, major, e, 64, leading_byte_offset=lbo, stride_byte_offset=sbo
        )
        assert layout[1].size == 32 // e
        model_lbo = None if (major is Major.K and mode is not SwizzleMode.INTERLEAVE) else lbo
        for r in range(64):
            for c in range(32 // e):
                want = ptx_read_address(mode.span_bytes, major.value, e, 0, model_lbo, sbo, r, c)
                assert layout(r, c) == want


def test_layouts_without_a_descriptor_are_rejected() -> None:
    # rows 64 bytes apart under the 128-byte swizzle: not the canonical 128-byte row pitch
    bad_pitch = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((64, 16), (32, 1)))
    with pytest.raises(LayoutError, match="not a K-major B128"):
        wgmma_descriptor(bad_pitch, 2)
    # a swizzle that is not a Hopper mode
    with pytest.raises(LayoutError):
        wgmma_descriptor(ComposedLayout(Swizzle(2, 3, 4), 0, Layout((64, 16), (64, 1))), 2)
    # neither dimension contiguous
    with pytest.raises(LayoutError, match="neither"):
        wgmma_descriptor(Layout((64, 16), (32, 2)), 2)
    # MN-major is only for 16-bit types
    tf32_mn = Layout((64, 8), (1, 64))
    with pytest.raises(LayoutError, match="f16/bf16"):
        wgmma_descriptor(tf32_mn, 4)
    # core matrices of a K-major unswizzled layout must be 16-byte rows, 128-byte blocks
    with pytest.raises(LayoutError):
        wgmma_descriptor(Layout((64, 16), (16, 1)), 2)
    # sizes
    with pytest.raises(LayoutError):
        wgmma_descriptor(Layout((60, 16), (16, 1)), 2)
    with pytest.raises(LayoutError):
        wgmma_descriptor(smem_tile_layout(SwizzleMode.B128, Major.K, 2, 64, 64), 2, k_step=4)
    with pytest.raises(LayoutError):
        wgmma_descriptor(Layout(64), 2)
    # an offset too large to encode
    huge = smem_tile_layout(SwizzleMode.INTERLEAVE, Major.K, 2, 8, 16)
    spread = Layout(huge.inner.shape, ((16, 128), (1, 1 << 17)))
    with pytest.raises(LayoutError):
        wgmma_descriptor(spread, 2)


def test_descriptor_of_a_tile_slice_with_offset() -> None:
    """A second pipeline stage (offset by one stage) only moves the start address."""
    tile = smem_tile_layout(SwizzleMode.B128, Major.K, 2, 64, 64)
    stage = 64 * 64
    staged = ComposedLayout(tile.outer, stage, tile.inner)
    for step in range(4):
        base = wgmma_descriptor(tile, 2, k_step=step)
        moved = wgmma_descriptor(staged, 2, k_step=step)
        assert moved.start_offset == base.start_offset + 2 * stage
        assert moved.stride_byte_offset == base.stride_byte_offset


# --------------------------------------------------------------------------- TMA


def test_tma_box_layout_is_swizzle_of_dense_box() -> None:
    for mode, e in itertools.product(SwizzleMode, (1, 2, 4, 8)):
        inner = min(mode.span_bytes if mode is not SwizzleMode.INTERLEAVE else 64, 256 * e) // e
        box = (inner, 16, 2)
        layout = tma_box_smem_layout(box, e, mode)
        for x0, x1, x2 in itertools.product(range(box[0]), range(16), range(2)):
            dense = e * (x0 + box[0] * (x1 + 16 * x2))
            assert layout(x0, x1, x2) == ptx_swizzle(mode.span_bytes, dense)
        assert is_bijective_onto(layout, range(0, tma_transaction_bytes(box, e), e))
        elements = tma_box_smem_layout(box, e, mode, units="elements")
        assert np.array_equal(evaluate_all(elements) * e, evaluate_all(layout))


def test_tma_box_constraints() -> None:
    ok = tma_box_smem_layout((64, 128), 2, SwizzleMode.B128)
    assert ok.size == 64 * 128
    with pytest.raises(LayoutError, match="exceeds"):
        tma_box_smem_layout((128, 8), 2, SwizzleMode.B128)  # 256 bytes > 128-byte span
    with pytest.raises(LayoutError, match="exceeds"):
        tma_box_smem_layout((32, 8), 2, SwizzleMode.B32)  # 64 bytes > 32
    with pytest.raises(LayoutError, match="multiple of 16"):
        tma_box_smem_layout((4, 8), 2, SwizzleMode.INTERLEAVE)  # 8 bytes
    with pytest.raises(LayoutError):
        tma_box_smem_layout((8, 300), 2, SwizzleMode.INTERLEAVE)
    with pytest.raises(LayoutError):
        tma_box_smem_layout((8, 0), 2, SwizzleMode.INTERLEAVE)
    with pytest.raises(LayoutError):
        tma_box_smem_layout((8,) * 6, 2, SwizzleMode.INTERLEAVE)
    with pytest.raises(LayoutError):
        tma_box_smem_layout((8, 8), 3, SwizzleMode.INTERLEAVE)
    assert tma_box_smem_layout((16,), 1, SwizzleMode.INTERLEAVE)(5) == 5
    assert tma_transaction_bytes((64, 128), 2) == 16384
    assert [tma_smem_alignment(m) for m in SwizzleMode] == [128, 256, 512, 1024]


@pytest.mark.parametrize("mode", [SwizzleMode.B32, SwizzleMode.B64, SwizzleMode.B128])
@pytest.mark.parametrize("e", [1, 2, 4])
def test_k_major_tma_boxes_write_what_wgmma_reads(mode: SwizzleMode, e: int) -> None:
    """TMA boxes (span bytes of K) x (MN rows), one per K atom, tile the K-major operand."""
    mn, per_span = 128, mode.span_bytes // e
    k = 2 * per_span
    tile = smem_tile_layout(mode, Major.K, e, mn, k, units="bytes")
    box = tma_box_smem_layout((per_span, mn), e, mode)
    box_bytes = tma_transaction_bytes((per_span, mn), e)
    for atom in range(2):
        for r in range(mn):
            for c in range(per_span):
                assert box(c, r) + atom * box_bytes == tile(r, atom * per_span + c)
    # and the (mn, k) view of one box has the descriptor wgmma expects
    view = ComposedLayout(box.outer, 0, Layout((mn, per_span), (box.inner.stride[1], e)))
    desc = wgmma_descriptor(view, e, units="bytes")
    assert (desc.mode, desc.major, desc.stride_byte_offset) == (mode, Major.K, 8 * mode.span_bytes)


@pytest.mark.parametrize("mode", [SwizzleMode.B32, SwizzleMode.B64, SwizzleMode.B128])
def test_mn_major_tma_boxes_write_what_wgmma_reads(mode: SwizzleMode) -> None:
    """MN-major: TMA boxes (span bytes of MN) x (all K rows), one per MN atom, K atoms first."""
    e, k = 2, 32
    per_span = mode.span_bytes // e
    mn = 2 * per_span
    tile = smem_tile_layout(mode, Major.MN, e, mn, k, atoms_mn_first=False, units="bytes")
    box = tma_box_smem_layout((per_span, k), e, mode)
    box_bytes = tma_transaction_bytes((per_span, k), e)
    for atom in range(2):
        for r in range(per_span):
            for c in range(k):
                assert box(r, c) + atom * box_bytes == tile(atom * per_span + r, c)
    desc = wgmma_descriptor(tile, e, units="bytes", k_step=1)
    assert desc.major is Major.MN
    assert desc.leading_byte_offset == box_bytes and desc.stride_byte_offset == 8 * mode.span_bytes
