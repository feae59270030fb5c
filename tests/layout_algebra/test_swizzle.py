"""Swizzle and ComposedLayout: goldens, a bit-by-bit oracle, exhaustive post-conditions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from argus import symbolic as sym
from argus.layout_algebra import Layout, LayoutError
from argus.layout_algebra.swizzle import (
    SWIZZLE_32B,
    SWIZZLE_64B,
    SWIZZLE_128B,
    ComposedLayout,
    Swizzle,
    bank_conflict_degree,
    evaluate_all,
    hopper_swizzle,
    image,
    is_bijective_onto,
    is_injective,
    lds_swizzle,
    lds_tile_layout,
)


def reference_swizzle(bits: int, base: int, shift: int, x: int) -> int:
    """Swizzle written bit by bit from its definition (independent of the implementation).

    Target bit ``base - min(0, shift) + j`` is xor-ed with source bit
    ``base + max(0, shift) + j`` for ``j < bits``; every other bit is kept.
    """
    digits = [(x >> p) & 1 for p in range(40)]
    out = list(digits)
    for j in range(bits):
        source = base + max(0, shift) + j
        target = base - min(0, shift) + j
        out[target] = digits[target] ^ digits[source]
    return sum(bit << p for p, bit in enumerate(out))


ALL_SWIZZLES = [
    Swizzle(b, m, s) for b in range(0, 4) for m in range(0, 5) for s in range(-5, 6) if abs(s) >= b
]


# --------------------------------------------------------------------------- goldens


def test_golden_swizzle_333() -> None:
    sw = Swizzle(3, 3, 3)
    assert sw(64) == 72
    assert sw(128) == 144
    assert sw(520) == 520


def test_masks_of_hopper_128b_swizzle() -> None:
    sw = Swizzle(3, 4, 3)
    assert sw.source_mask == 0b1110000000
    assert sw.target_mask == 0b0001110000
    assert sw.bit_span == 10
    negative = Swizzle(2, 1, -3)
    assert negative.source_mask == 0b000110
    assert negative.target_mask == 0b110000


# PTX ISA 5.5.7 "Swizzling Modes": 16-byte chunk p of 128-byte shared-memory line r holds chunk
# TABLE[r % rows][p] of that line (starting address aligned to the pattern repeat).
PTX_TENSOR_SWIZZLE_TABLES = {
    Swizzle(1, 4, 3): [[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 3, 2, 5, 4, 7, 6]],
    Swizzle(2, 4, 3): [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
        [2, 3, 0, 1, 6, 7, 4, 5],
        [3, 2, 1, 0, 7, 6, 5, 4],
    ],
    Swizzle(3, 4, 3): [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
        [2, 3, 0, 1, 6, 7, 4, 5],
        [3, 2, 1, 0, 7, 6, 5, 4],
        [4, 5, 6, 7, 0, 1, 2, 3],
        [5, 4, 7, 6, 1, 0, 3, 2],
        [6, 7, 4, 5, 2, 3, 0, 1],
        [7, 6, 5, 4, 3, 2, 1, 0],
    ],
}


@pytest.mark.parametrize("sw", list(PTX_TENSOR_SWIZZLE_TABLES))
def test_hopper_swizzles_match_ptx_tensor_swizzle_tables(sw: Swizzle) -> None:
    table = PTX_TENSOR_SWIZZLE_TABLES[sw]
    for line in range(3 * len(table)):
        for position in range(8):
            chunk = table[line % len(table)][position]
            for byte in (0, 5, 15):
                assert sw(128 * line + 16 * chunk + byte) == 128 * line + 16 * position + byte


# --------------------------------------------------------------------------- exhaustive


@pytest.mark.parametrize("sw", ALL_SWIZZLES, ids=str)
def test_matches_bitwise_reference_and_is_an_involution(sw: Swizzle) -> None:
    xs = np.arange(0, 1 << 12, dtype=np.int64)
    got = sw(xs)
    want = np.array([reference_swizzle(sw.bits, sw.base, sw.shift, int(x)) for x in xs])
    assert np.array_equal(got, want)
    assert np.array_equal(sw(got), xs)
    assert sw.inverse() is sw


@pytest.mark.parametrize("sw", ALL_SWIZZLES, ids=str)
def test_aligned_blocks_map_onto_themselves(sw: Swizzle) -> None:
    block = 1 << sw.bit_span
    for start in (0, block, 5 * block):
        xs = np.arange(start, start + block, dtype=np.int64)
        assert np.array_equal(np.sort(sw(xs)), xs)
        shifted = sw(xs - start) + start
        assert np.array_equal(shifted, sw(xs))


@given(st.integers(min_value=0, max_value=3), st.integers(0, 6), st.integers(-7, 7), st.integers())
def test_int_evaluation_matches_reference(bits: int, base: int, shift: int, x: int) -> None:
    if abs(shift) < bits:
        return
    x = x % (1 << 30)
    assert Swizzle(bits, base, shift)(x) == reference_swizzle(bits, base, shift, x)


def test_rejects_overlapping_fields_and_bad_arguments() -> None:
    with pytest.raises(LayoutError):
        Swizzle(3, 4, 2)
    with pytest.raises(LayoutError):
        Swizzle(-1, 4, 3)
    with pytest.raises(LayoutError):
        Swizzle(2, -1, 3)
    with pytest.raises(LayoutError):
        Swizzle(2, 4, 3.0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- symbolic


def test_symbolic_offset_gives_bitxor_expression() -> None:
    x = sym.index_symbol("x")
    expr = Swizzle(3, 4, 3)(x)
    assert expr.has(sym.BitXor) and expr.has(sym.BitAnd)
    for value in (0, 17, 128, 1000, 4095):
        assert sym.evaluate(expr, {"x": value}) == Swizzle(3, 4, 3)(value)
    assert Swizzle(0, 4, 3)(x) is x


def test_negative_shift_symbolic() -> None:
    x = sym.index_symbol("x")
    sw = Swizzle(2, 1, -3)
    expr = sw(x)
    for value in range(0, 256, 7):
        assert sym.evaluate(expr, {"x": value}) == reference_swizzle(2, 1, -3, value)


def test_element_and_byte_units() -> None:
    byte_sw = Swizzle(3, 4, 3)
    for element_bytes, expected in (
        (1, Swizzle(3, 4, 3)),
        (2, Swizzle(3, 3, 3)),
        (4, Swizzle(3, 2, 3)),
        (16, Swizzle(3, 0, 3)),
    ):
        elem_sw = byte_sw.element_units(element_bytes)
        assert elem_sw == expected
        assert elem_sw.byte_units(element_bytes) == byte_sw
        idx = np.arange(0, 4096 // element_bytes, dtype=np.int64)
        assert np.array_equal(byte_sw(idx * element_bytes), elem_sw(idx) * element_bytes)
    with pytest.raises(LayoutError):
        byte_sw.element_units(32)
    with pytest.raises(LayoutError):
        byte_sw.element_units(3)


# --------------------------------------------------------------------------- ComposedLayout

INNERS = [
    Layout((8, 64), (64, 1)),
    Layout((8, 64), (128, 2)),
    Layout(((8, 2), (8, 4)), ((64, 512), (1, 8))),
    Layout((16, 16)),
]


@pytest.mark.parametrize("inner", INNERS, ids=str)
@pytest.mark.parametrize("offset", [0, 16, 96])
def test_composed_layout_evaluates_outer_of_offset_plus_inner(inner: Layout, offset: int) -> None:
    sw = Swizzle(3, 3, 3)
    composed = ComposedLayout(sw, offset, inner)
    assert composed.shape == inner.shape and composed.size == inner.size
    assert composed.rank == inner.rank
    values = evaluate_all(composed)
    for i in range(inner.size):
        want = sw(offset + inner(i))
        assert composed(i) == want == values[i]
        assert composed(inner.idx2crd(i)) == want
    for mode in range(inner.rank):
        sub = composed[mode]
        coord_shape = inner.shape[mode]
        for c in range(Layout(coord_shape).size):
            full = tuple(c if k == mode else 0 for k in range(inner.rank))
            assert sub(c) == composed(full)
    assert composed.cosize == max(values) + 1


def test_composed_layout_slice_keeps_offset_inside() -> None:
    inner = Layout((8, 64), (64, 1))
    composed = ComposedLayout(Swizzle(3, 3, 3), 0, inner)
    for row in range(8):
        sub, extra = composed.slice((row, None))
        assert extra == 0
        for col in range(64):
            assert sub(col) == composed(row, col)


def test_composed_layout_nested_and_layout_outer() -> None:
    inner = Layout((4, 4))
    outer = Layout(32, 2)
    composed = ComposedLayout(outer, 3, inner)
    assert [composed(i) for i in range(16)] == [2 * (3 + i) for i in range(16)]
    nested = ComposedLayout(Swizzle(1, 1, 2), 0, ComposedLayout(Swizzle(1, 0, 2), 0, inner))
    for i in range(16):
        assert nested(i) == Swizzle(1, 1, 2)(Swizzle(1, 0, 2)(i))
        assert evaluate_all(nested)[i] == nested(i)


def test_composed_layout_symbolic_coordinate_and_cosize_bound() -> None:
    n = sym.size_symbol("n")
    composed = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, n), (n, 1)))
    i = sym.index_symbol("i")
    j = sym.index_symbol("j")
    expr = composed(i, j)
    for nv, iv, jv in ((64, 3, 17), (128, 7, 100)):
        assert sym.evaluate(expr, {"i": iv, "j": jv, "n": nv}) == Swizzle(3, 3, 3)(iv * nv + jv)
    bound = composed.cosize
    for nv in (64, 72, 128):
        exact = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, nv), (nv, 1))).cosize
        assert sym.evaluate(bound, {"n": nv}) >= exact
    assert sym.evaluate(bound, {"n": 64}) == 512


def test_composed_layout_compose_on_the_right() -> None:
    composed = ComposedLayout(Swizzle(3, 3, 3), 8, Layout((8, 64), (64, 1)))
    tiler = Layout((4, 16), (1, 8))
    result = composed.compose(tiler)
    for i in range(tiler.size):
        assert result(i) == composed(tiler(i))


def test_injectivity_image_and_bijection() -> None:
    sw = Swizzle(3, 4, 3)
    bytes_layout = ComposedLayout(sw, 0, Layout((8, 64), (128, 2)))
    assert is_injective(bytes_layout)
    assert is_bijective_onto(bytes_layout, range(0, 1024, 2))
    assert not is_bijective_onto(bytes_layout, 1024)
    assert image(bytes_layout) == frozenset(range(0, 1024, 2))
    broadcast = Layout((4, 2), (1, 0))
    assert not is_injective(broadcast)
    assert image(broadcast) == frozenset(range(4))
    assert not is_bijective_onto(broadcast, 8)
    assert is_bijective_onto(Layout((4, 2), (2, 1)), 8)
    with pytest.raises(LayoutError):
        evaluate_all(Layout((sym.size_symbol("n"), 2)))


def test_is_injective_agrees_with_brute_force_on_small_layouts() -> None:
    shapes = [(2, 2), (2, 3), (4, 2)]
    strides = range(0, 5)
    for shape in shapes:
        for stride in itertools.product(strides, repeat=2):
            layout = Layout(shape, stride)
            values = [layout(i) for i in range(layout.size)]
            assert is_injective(layout) == (len(set(values)) == len(values))
            for sw in (Swizzle(1, 0, 1), Swizzle(1, 1, 2)):
                composed = ComposedLayout(sw, 1, layout)
                cv = [sw(1 + v) for v in values]
                assert is_injective(composed) == (len(set(cv)) == len(cv))
                assert image(composed) == frozenset(cv)


def test_sympy_integer_offset_and_str() -> None:
    composed = ComposedLayout(Swizzle(1, 0, 1), sympy.Integer(2), Layout(4))
    assert composed(1) == Swizzle(1, 0, 1)(3)
    assert str(composed) == "Sw<1,0,1> o 2 o 4:1"


# --------------------------------------------------------------------------- target swizzles


def test_hopper_swizzles_in_byte_and_element_units() -> None:
    assert SWIZZLE_128B == Swizzle(3, 4, 3) == hopper_swizzle(128)
    assert SWIZZLE_64B == Swizzle(2, 4, 3) == hopper_swizzle(64)
    assert SWIZZLE_32B == Swizzle(1, 4, 3) == hopper_swizzle(32)
    assert hopper_swizzle(16).is_identity
    assert hopper_swizzle(128, 2) == Swizzle(3, 3, 3)
    assert hopper_swizzle(64, 4) == Swizzle(2, 2, 3)
    assert hopper_swizzle(32, 1) == Swizzle(1, 4, 3)
    for span in (32, 64, 128):
        sw = hopper_swizzle(span)
        assert 1 << sw.bit_span == 8 * span  # pattern repeats every 256 / 512 / 1024 bytes
    with pytest.raises(LayoutError):
        hopper_swizzle(256)
    with pytest.raises(LayoutError):
        hopper_swizzle(128, 32)


def test_bank_conflict_model_goldens() -> None:
    assert bank_conflict_degree([4 * lane for lane in range(32)], 4) == 1
    assert bank_conflict_degree([128 * lane for lane in range(32)], 4) == 32
    assert bank_conflict_degree([0] * 32, 4) == 1  # broadcast
    assert bank_conflict_degree([8 * lane for lane in range(64)], 8) == 1
    assert bank_conflict_degree([16 * lane for lane in range(64)], 16) == 1
    assert bank_conflict_degree([256 * lane for lane in range(64)], 16) == 8
    # only lanes of one phase compete: lanes 0 and 8 of a b128 access may share banks
    assert bank_conflict_degree([0, 16, 32, 48, 64, 80, 96, 112, 0 + 128], 16) == 1


@pytest.mark.parametrize("row_bytes", [16, 32, 64, 128, 256, 512])
@pytest.mark.parametrize("element_bytes", [1, 2, 4])
def test_lds_swizzle_is_row_preserving_and_conflict_free_for_b128(
    row_bytes: int, element_bytes: int
) -> None:
    sw_bytes = lds_swizzle(row_bytes)
    sw = lds_swizzle(row_bytes, element_bytes)
    rows = 64
    offsets = np.arange(rows * row_bytes, dtype=np.int64)
    swizzled = sw_bytes(offsets)
    assert np.array_equal(swizzled // row_bytes, offsets // row_bytes)  # rows stay whole
    assert np.array_equal(swizzled % 16, offsets % 16)  # 16-byte vectors stay whole
    elements = np.arange(rows * row_bytes // element_bytes, dtype=np.int64)
    assert np.array_equal(sw(elements) * element_bytes, sw_bytes(elements * element_bytes))
    chunks = row_bytes // 16
    for chunk in range(chunks):
        for first_row in (0, 8, 24):
            # a wavefront reads 64 rows at one logical 16-byte chunk, 8 rows per phase
            reads = [(first_row + lane) % rows * row_bytes + 16 * chunk for lane in range(64)]
            assert bank_conflict_degree([sw_bytes(a) for a in reads], 16) == 1
            if row_bytes >= 32:
                assert bank_conflict_degree(reads, 16) > 1  # the swizzle is needed
    # row-major ds_write_b128: consecutive lanes write consecutive 16-byte chunks
    writes = [16 * lane for lane in range(64)]
    assert bank_conflict_degree([sw_bytes(a) for a in writes], 16) == 1


def test_lds_tile_layout_is_a_bijection_onto_the_tile() -> None:
    tile = lds_tile_layout(32, 64, 2)
    assert tile.shape == (32, 64)
    assert is_bijective_onto(tile, 32 * 64)
    for row in range(32):
        for col in range(64):
            assert tile(row, col) // 64 == row
    with pytest.raises(LayoutError):
        lds_swizzle(48)


def test_composed_layout_specialize() -> None:
    n = sym.size_symbol("n")
    composed = ComposedLayout(Swizzle(3, 3, 3), 2 * n, Layout((8, n), (n, 1)))
    concrete = composed.specialize({"n": 64})
    assert concrete.is_static and concrete.offset == 128
    assert concrete == ComposedLayout(Swizzle(3, 3, 3), 128, Layout((8, 64), (64, 1)))
    for i in range(0, 512, 37):
        assert concrete(i) == Swizzle(3, 3, 3)(128 + concrete.inner(i))
