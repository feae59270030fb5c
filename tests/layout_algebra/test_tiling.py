"""Tiles, thread partitions and thread-value layouts: every element of the tensor is owned
exactly once, offsets match the tensor, and predicates mark exactly the partial-tile tails."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layout_oracle import complementable_layouts, layout_at, mode_coords, mode_sizes, table

from argus import symbolic
from argus.layout_algebra import (
    Layout,
    LayoutError,
    ThreadValueLayout,
    complement,
    idx2crd,
    local_partition,
    local_tile,
    make_layout_tv,
)

P = Layout.parse


def tensors(max_extent: int = 13):
    """2-D tensors: column-major, row-major or padded leading dimension."""

    @st.composite
    def build(draw):
        m, n = draw(st.integers(1, max_extent)), draw(st.integers(1, max_extent))
        kind = draw(st.sampled_from(["column", "row", "padded"]))
        if kind == "column":
            return Layout((m, n))
        if kind == "row":
            return Layout((m, n), (n, 1))
        return Layout((m, n), (1, m + draw(st.integers(1, 3))))

    return build()


def elements(layout: Layout):
    """Every coordinate of ``layout`` as a tuple of 1-D indices per top-level mode."""
    return mode_coords(mode_sizes(layout))


def check_owned_once(tensor: Layout, owners: dict) -> None:
    m, n = (mode.size for mode in tensor.modes)
    assert sorted(owners) == sorted(itertools.product(range(m), range(n)))
    assert all(count == 1 for count in owners.values())


def visit(tile, tensor: Layout, owners: dict) -> None:
    """Check every element of ``tile`` against the tensor and count in-range owners."""
    extents = [mode.size for mode in tensor.modes]
    for coord in elements(tile.layout):
        g = tile.global_coord(*coord)
        inside = all(x < e for x, e in zip(g, extents))
        assert tile.predicate(*coord) is inside
        assert [(x, e) for x, e in tile.bounds(*coord)] == list(zip(g, extents))
        if inside:
            assert tile(*coord) == layout_at(tensor, tuple(g))
            owners[tuple(g)] = owners.get(tuple(g), 0) + 1


# --------------------------------------------------------------------------- local_tile


@given(tensors(), st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_local_tile_covers_the_tensor_once(tensor, bm, bn, strided):
    m, n = (mode.size for mode in tensor.modes)
    rows = Layout(bm, 2) if strided else Layout(bm)  # strided: every other row
    tiles_m = complement(rows, m).size
    if not strided:
        assert tiles_m == math.ceil(m / bm)
    owners: dict = {}
    for tm in range(tiles_m):
        for tn in range(math.ceil(n / bn)):
            tile = local_tile(tensor, (rows, bn), (tm, tn))
            assert mode_sizes(tile.layout) == [bm, bn]
            if not strided:
                assert tile.global_coord(0, 0) == (tm * bm, tn * bn)
                assert tile.needs_predicate == (m % bm != 0 or n % bn != 0)
            visit(tile, tensor, owners)
    check_owned_once(tensor, owners)


@given(tensors(), st.integers(1, 5), st.integers(1, 5))
def test_local_tile_keeps_a_mode_of_tiles(tensor, bm, bn):
    m, n = (mode.size for mode in tensor.modes)
    owners: dict = {}
    for tm in range(math.ceil(m / bm)):
        tile = local_tile(tensor, (bm, bn), (tm, None))
        assert mode_sizes(tile.layout) == [bm, bn, math.ceil(n / bn)]
        visit(tile, tensor, owners)
    check_owned_once(tensor, owners)


def test_local_tile_golden():
    tile = local_tile(Layout((8, 6)), (4, 3), (1, 1))
    assert tile.layout == P("(4,3):(1,8)") and tile.offset == 4 + 3 * 8
    assert not tile.needs_predicate and tile.predicate(3, 2) is True
    partial = local_tile(Layout((10, 6)), (4, 3), (2, 0))
    assert partial.needs_predicate and partial.offset == 8
    assert [partial.predicate(i, 0) for i in range(4)] == [True, True, False, False]
    gemm = local_tile(Layout((10, 64), (64, 1)), (4, 16), (0, None))
    assert gemm.layout == P("(4,16,4):(64,1,16)")


def test_rank_one_tiles_of_hierarchical_modes():
    tensor = P("((4,5),):((1,4),)")  # one mode of 20 elements, itself split (4,5)
    owners = {}
    for t in range(3):
        tile = local_tile(tensor, 8, t)
        assert tile.layout.size == 8
        for i in range(8):
            (g,) = tile.global_coord(i)
            assert g == 8 * t + i and tile.predicate(i) is (g < 20)
            if g < 20:
                assert tile(i) == layout_at(tensor, (g,))
                owners[g] = owners.get(g, 0) + 1
    assert owners == {g: 1 for g in range(20)}
    part = local_partition(tensor, Layout(4), 3)
    assert [part.global_coord(r) for r in range(5)] == [(3 + 4 * r,) for r in range(5)]


def test_local_tile_rejects_bad_tilers():
    with pytest.raises(LayoutError, match="more modes"):
        local_tile(Layout((8, 8)), (2, 2, 2), (0, 0, 0))
    with pytest.raises(LayoutError, match="one entry per tiler mode"):
        local_tile(Layout((8, 8)), (2, 2), (0,))
    with pytest.raises(LayoutError, match="out of range"):
        local_tile(Layout((8, 8)), (2, 2), (4, 0))
    with pytest.raises(LayoutError, match="int or a layout"):
        local_tile(Layout((8, 8)), (None, 2), (0, 0))


@settings(max_examples=20)
@given(st.integers(1, 11), st.integers(1, 11))
def test_symbolic_local_tile_agrees_with_concrete(m, n):
    M, N = symbolic.size_symbol("M"), symbolic.size_symbol("N")
    bm, bn = symbolic.index_symbol("bm"), symbolic.index_symbol("bn")
    tile = local_tile(Layout((M, N), (1, M + 2)), (4, 3), (bm, bn))
    assert tile.needs_predicate
    tensor = Layout((m, n), (1, m + 2))
    for tm in range(math.ceil(m / 4)):
        for tn in range(math.ceil(n / 3)):
            env = {"M": m, "N": n, "bm": tm, "bn": tn}
            fixed = local_tile(tensor, (4, 3), (tm, tn))
            assert tile.layout.specialize(env) == fixed.layout
            assert symbolic.evaluate(tile.offset, env) == fixed.offset
            for i, j in [(0, 0), (3, 2), (1, 2), (3, 0)]:
                predicate = tile.predicate(i, j).subs({M: m, N: n, bm: tm, bn: tn})
                assert bool(predicate) == fixed.predicate(i, j)


# --------------------------------------------------------------------------- local_partition


@pytest.mark.parametrize("threads", ["(2,4):(4,1)", "(4,2):(1,4)", "(3,2):(2,1)", "(1,4):(0,1)"])
@given(tensor=tensors())
def test_local_partition_covers_the_tensor_once(threads, tensor):
    thread_layout = P(threads)
    owners: dict = {}
    for thread in range(thread_layout.size):
        part = local_partition(tensor, thread_layout, thread)
        # the thread sits at the coordinate where the thread layout takes its id
        c = part.global_coord(0, 0)
        assert layout_at(thread_layout, c) == thread
        visit(part, tensor, owners)
    check_owned_once(tensor, owners)


def test_local_partition_golden_and_errors():
    part = local_partition(Layout((8, 8)), P("(2,4):(4,1)"), 5)
    assert part.layout == P("(4,2):(2,32)") and part.offset == 9
    assert not part.needs_predicate
    with pytest.raises(LayoutError, match="not a bijection"):
        local_partition(Layout((8, 8)), P("(2,2):(1,1)"), 0)
    with pytest.raises(LayoutError, match="out of range"):
        local_partition(Layout((8, 8)), P("(2,4):(4,1)"), 8)


def test_symbolic_thread_index():
    t = symbolic.index_symbol("t")
    part = local_partition(Layout((64, 64)), P("(16,8):(8,1)"), t)
    for thread in (0, 1, 9, 127):
        expected = local_partition(Layout((64, 64)), P("(16,8):(8,1)"), thread)
        assert symbolic.evaluate(part.offset, {"t": thread}) == expected.offset
    assert part.layout == expected.layout


# --------------------------------------------------------------------------- thread-value layouts


def test_sm80_16x8_accumulator_tv_layout():
    tv = ThreadValueLayout(P("((4,8),(2,2)):((32,1),(16,8))"), (16, 8))
    assert [tv.tile_coord(0, v) for v in range(4)] == [(0, 0), (0, 1), (8, 0), (8, 1)]
    # the PTX ISA fragment table: row = lane / 4 (+ 8), column = 2 * (lane % 4) + (value % 2)
    for lane in range(32):
        for v in range(4):
            row = lane // 4 + 8 * (v // 2)
            assert tv.tile_coord(lane, v) == (row, 2 * (lane % 4) + v % 2)
            assert tv(lane, v) == row + 16 * (2 * (lane % 4) + v % 2)
    assert sorted(table(tv.layout)) == list(range(128))
    assert (tv.threads, tv.values) == (32, 4)


def test_make_layout_tv_cute_example():
    tv = make_layout_tv(P("(32,8):(8,1)"), Layout((4, 1)))
    assert tv.tiler == (128, 8) and (tv.threads, tv.values) == (256, 4)
    assert [tv.tile_coord(1, v) for v in range(4)] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert [tv.tile_coord(8, v) for v in range(4)] == [(4, 0), (5, 0), (6, 0), (7, 0)]
    with pytest.raises(LayoutError, match="make_layout_tv: the thread layout"):
        make_layout_tv(P("(2,2):(1,1)"), Layout((2, 2)))
    with pytest.raises(LayoutError, match="make_layout_tv: the value layout"):
        make_layout_tv(P("(2,2):(1,2)"), P("2:2"))


def compact_2d():
    return complementable_layouts(allow_trivial=False, max_size=16, max_gap=1).filter(
        lambda layout: layout.rank <= 2
    )


@given(compact_2d(), compact_2d())
def test_make_layout_tv_places_each_thread_block(threads, values):
    tv = make_layout_tv(threads, values)
    r = max(threads.rank, values.rank)
    t_sizes = (mode_sizes(threads) + [1] * r)[:r]
    v_sizes = (mode_sizes(values) + [1] * r)[:r]
    assert list(tv.tiler) == [t * v for t, v in zip(t_sizes, v_sizes)]
    seen = set()
    for tc in mode_coords(t_sizes):
        thread = layout_at(threads, tc[: threads.rank] if threads.rank > 1 else tc[0])
        for vc in mode_coords(v_sizes):
            value = layout_at(values, vc[: values.rank] if values.rank > 1 else vc[0])
            expected = tuple(v + vs * t for v, vs, t in zip(vc, v_sizes, tc))
            assert tv.tile_coord(thread, value) == expected
            seen.add(tv(thread, value))
    assert seen == set(range(math.prod(tv.tiler)))


@given(tensors(max_extent=10))
def test_thread_value_partition_covers_the_tensor_once(tensor):
    tv = make_layout_tv(P("(2,2):(2,1)"), Layout((2, 1)))  # a (4,2) tile, 4 threads x 2 values
    assert tv.tiler == (4, 2)
    owners: dict = {}
    for thread in range(tv.threads):
        part = tv.partition(tensor, thread)
        assert mode_sizes(part.layout)[0] == tv.values
        for v in range(tv.values):
            assert part.global_coord(v, 0, 0) == tv.tile_coord(thread, v)
        visit(part, tensor, owners)
    check_owned_once(tensor, owners)


def test_thread_value_apply_matches_zipped_divide():
    tv = make_layout_tv(P("(4,2):(1,4)"), Layout((2, 2)))
    tensor = Layout((16, 12), (12, 1))
    applied = tv.apply(tensor)
    for t in range(tv.threads):
        for v in range(tv.values):
            m, n = idx2crd(tv(t, v), tv.tiler)
            for rm in range(2):
                for rn in range(3):
                    coord = (m + tv.tiler[0] * rm, n + tv.tiler[1] * rn)
                    assert applied((t, v), (rm, rn)) == tensor(coord)
