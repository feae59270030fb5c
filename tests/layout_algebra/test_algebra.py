"""Composition, complement, inverses, divides and products: golden examples from the CuTe
documentation compared as functions, and every post-condition over the whole domain."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from layout_oracle import (
    admissible_pairs,
    at,
    complementable_layouts,
    layout_at,
    layouts,
    leaves,
    mode_coords,
    mode_sizes,
    size_of,
    table,
)

from argus.layout_algebra import (
    Layout,
    LayoutError,
    blocked_product,
    complement,
    composition,
    filter,
    flat_divide,
    flat_product,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    raked_product,
    right_inverse,
    tiled_divide,
    tiled_product,
    zipped_divide,
    zipped_product,
)

P = Layout.parse


def same(a: Layout, b: Layout) -> bool:
    """Equal as functions over the whole domain, and equal in shape structure."""
    return a.shape == b.shape and table(a) == table(b)


# --------------------------------------------------------------------------- golden examples


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("(6,2):(8,2)", "(4,3):(3,1)", "((2,2),3):((24,2),8)"),
        ("20:2", "(5,4):(4,1)", "(5,4):(8,2)"),
        ("(10,2):(16,4)", "(5,4):(1,5)", "(5,(2,2)):(16,(80,4))"),
    ],
)
def test_golden_composition(a, b, expected):
    result = composition(P(a), P(b))
    assert same(result, P(expected))
    assert table(result) == [at(P(a), at(P(b), i)) for i in range(result.size)]


@pytest.mark.parametrize(
    ("a", "expected"),
    [("4:1", "6:4"), ("4:2", "(2,3):(1,8)"), ("(2,2):(1,6)", "(3,2):(2,12)")],
)
def test_golden_complement(a, expected):
    assert same(complement(P(a), 24), P(expected))


def test_golden_divide_product_inverses():
    assert same(logical_divide(P("(4,2,3):(2,1,8)"), P("4:2")), P("((2,2),(2,3)):((4,1),(2,8))"))
    assert same(logical_product(P("(2,2):(4,1)"), P("6:1")), P("((2,2),(2,3)):((4,1),(2,8))"))
    assert same(right_inverse(P("(8,4):(4,1)")), P("(4,8):(8,1)"))
    assert same(left_inverse(P("4:2")), P("(2,4):(4,1)"))


def test_golden_by_mode_divides():
    a = P("(9,(4,8)):(59,(13,1))")  # CuTe documentation's 2-D divide example
    tiler = (P("3:3"), P("(2,4):(1,8)"))
    result = logical_divide(a, tiler)
    assert same(result, P("((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"))
    zipped = zipped_divide(a, tiler)
    assert same(zipped, P("((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"))
    assert same(tiled_divide(a, tiler), P("((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))"))
    assert same(flat_divide(a, tiler), P("(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))"))


def test_golden_blocked_and_raked_products():
    block, tiling = P("(2,5):(5,1)"), P("(3,4):(1,3)")
    assert same(blocked_product(block, tiling), P("((2,3),(5,4)):((5,10),(1,30))"))
    assert same(raked_product(block, tiling), P("((3,2),(4,5)):((10,5),(30,1))"))


# --------------------------------------------------------------------------- composition


@given(admissible_pairs())
def test_composition_is_function_composition(pair):
    a, b = pair
    result = composition(a, b)
    assert result.size == b.size
    assert table(result) == [at(a, at(b, i)) for i in range(b.size)]
    # the result has B's shape structure at the top
    if isinstance(b.shape, tuple):
        assert result.rank == b.rank


@given(layouts(max_size=256), layouts(max_size=64, max_stride=12))
def test_composition_is_correct_or_refuses(a, b):
    try:
        result = composition(a, b)
    except LayoutError as error:
        assert "composition" in str(error)
        return
    assert table(result) == [at(a, at(b, i)) for i in range(b.size)]


@given(layouts(max_size=256), st.data())
def test_composition_by_mode(a, data):
    tiler = tuple(
        data.draw(st.sampled_from([None, Layout(1, 0), Layout(mode.size)])) for mode in a.modes
    )
    result = composition(a, tiler)
    for mode, t, out in zip(a.modes, tiler, result.modes):
        if t is None:
            assert out == mode
        else:
            assert table(out) == [at(mode, at(t, i)) for i in range(t.size)]


def test_composition_refuses_non_divisible_strides():
    with pytest.raises(LayoutError, match="stride divisibility"):
        composition(P("(6,2):(1,6)"), P("2:4"))
    with pytest.raises(LayoutError, match="shape divisibility"):
        composition(P("(4,6):(1,4)"), P("6:1"))
    with pytest.raises(LayoutError, match="negative stride"):
        composition(P("8:1"), P("2:-1"))
    with pytest.raises(LayoutError, match="overlap"):
        composition(P("(2,3):(1,2)"), P("(2,2):(1,1)"))
    assert composition(P("8:1"), P("(2,2):(1,1)")) == P("(2,2):(1,1)")  # linear: no carry
    with pytest.raises(LayoutError, match="by-mode tiler has 3 modes"):
        composition(P("(4,6):(1,4)"), (2, 2, 2))


# --------------------------------------------------------------------------- complement


def check_complement(a: Layout, cotarget: int, result: Layout) -> None:
    kept = filter(a)
    values = table(result)
    # ordered
    assert all(values[k] < values[k + 1] for k in range(len(values) - 1))
    # disjoint and bounded: (filter(A), R) is a bijection onto [0, size(A') * size(R))
    joint = make_layout(kept, result)
    assert sorted(table(joint)) == list(range(kept.size * result.size))
    assert kept.size * result.size >= cotarget
    span = max(s * d for s, d in zip(leaves(kept.shape), leaves(kept.stride)))
    assert kept.size * result.size < max(cotarget, 1) + max(span, 1)


@given(complementable_layouts(), st.integers(1, 600))
def test_complement_post_conditions(a, cotarget):
    check_complement(a, cotarget, complement(a, cotarget))


@given(complementable_layouts())
def test_complement_default_cotarget_is_cosize(a):
    result = complement(a)
    assert result == complement(a, a.cosize)
    check_complement(a, a.cosize, result)


@given(layouts(max_size=256, max_stride=16), st.integers(1, 300))
def test_complement_is_correct_or_refuses(a, cotarget):
    try:
        result = complement(a, cotarget)
    except LayoutError as error:
        assert "complement" in str(error)
        return
    check_complement(a, cotarget, result)


def test_complement_refuses_overlapping_layouts():
    with pytest.raises(LayoutError, match="not complementable"):
        complement(P("(2,2):(1,1)"), 8)
    with pytest.raises(LayoutError, match="not complementable"):
        complement(P("(2,2):(1,3)"), 12)
    with pytest.raises(LayoutError, match="positive"):
        complement(P("4:1"), 0)


# --------------------------------------------------------------------------- inverses


@given(layouts(max_stride=16))
def test_right_inverse(layout):
    inverse = right_inverse(layout)
    assert [at(layout, at(inverse, i)) for i in range(inverse.size)] == list(range(inverse.size))


@given(complementable_layouts(allow_trivial=False), st.data())
def test_right_inverse_of_a_bijection_is_its_inverse(layout, data):
    compact = complement(layout, 1)  # with gaps filled, make_layout(A, C) is a bijection
    bijection = make_layout(layout, compact) if compact.size > 1 else layout
    inverse = right_inverse(bijection)
    assert inverse.size == bijection.size
    assert [at(inverse, at(bijection, i)) for i in range(bijection.size)] == list(
        range(bijection.size)
    )


@given(complementable_layouts())
def test_left_inverse(layout):
    assume(all(d != 0 or s == 1 for s, d in zip(leaves(layout.shape), leaves(layout.stride))))
    inverse = left_inverse(layout)
    assert [at(inverse, at(layout, i)) for i in range(layout.size)] == list(range(layout.size))


def test_left_inverse_refuses_non_injective_layouts():
    with pytest.raises(LayoutError, match="not injective"):
        left_inverse(P("(4,2):(1,0)"))
    with pytest.raises(LayoutError, match="not complementable"):
        left_inverse(P("(2,2):(1,1)"))


# --------------------------------------------------------------------------- divides


def small_tilers():
    """Complementable tilers (layouts) of modest size."""
    return complementable_layouts(allow_trivial=False, max_size=32, max_gap=2)


@given(layouts(max_size=256), small_tilers())
def test_logical_divide_is_its_definition(a, b):
    try:
        result = logical_divide(a, b)
    except LayoutError:
        return  # the composition's divisibility conditions may fail for arbitrary A
    rest = complement(b, a.size)
    assert result.rank == 2 and result[0].size == b.size and result[1].size == rest.size
    for k in range(rest.size):
        for j in range(b.size):
            # R(j, k) == A(B(j) + C(k)), A extended past its size
            assert layout_at(result, (j, k)) == at(a, at(b, j) + at(rest, k))
    assert b.size * rest.size >= a.size


def prefix_tile_sizes(layout: Layout) -> list[int]:
    """Tile sizes that meet the shape divisibility condition along ``layout``'s flat modes:
    a product of its first leaves times a divisor of the next one."""
    sizes, prefix, out = leaves(layout.shape), 1, set()
    for s in sizes:
        out.update(prefix * e for e in range(1, s + 1) if s % e == 0)
        prefix *= s
    return sorted(out)


@given(layouts(max_size=256), st.data())
def test_logical_divide_by_compact_tile_is_a_regrouping(a, data):
    tile = data.draw(st.sampled_from(prefix_tile_sizes(a)))
    result = logical_divide(a, tile)
    assert result[0].size == tile
    expected = [at(a, i) for i in range(result.size)]  # A extended when the tile is partial
    assert table(result) == expected


def by_mode_tilers(a: Layout, data) -> tuple:
    tiler = []
    for mode in a.modes[: data.draw(st.integers(1, a.rank))]:
        sizes = prefix_tile_sizes(mode)
        tiler.append(
            data.draw(
                st.one_of(
                    st.none(),
                    st.sampled_from(sizes),
                    st.sampled_from(sizes).map(lambda d: Layout(d)),
                )
            )
        )
    return tuple(tiler)


def regroup_check(zipped: Layout, logical: Layout, a: Layout, tiler: tuple) -> None:
    """zipped((t0..), (k0.., extra..)) == logical((t0, k0), ..., extra..)."""
    r = len(tiler)
    tile_sizes = mode_sizes(zipped[0])
    rest_sizes = mode_sizes(zipped[1])
    assert len(tile_sizes) == r and len(rest_sizes) == a.rank
    for tiles in mode_coords(tile_sizes):
        for rests in mode_coords(rest_sizes):
            modes = tuple((t, k) for t, k in zip(tiles, rests[:r])) + tuple(rests[r:])
            assert layout_at(zipped, (tiles, rests)) == layout_at(logical, modes)


@given(layouts(max_size=128), st.data())
def test_zipped_tiled_flat_divide_regroup_logical_divide(a, data):
    tiler = by_mode_tilers(a, data)
    logical = logical_divide(a, tiler)
    for mode, t, out in zip(a.modes, tiler, logical.modes):
        if t is not None:
            assert table(out) == table(logical_divide(mode, t))
    zipped = zipped_divide(a, tiler)
    regroup_check(
        zipped,
        make_layout(
            *(
                m if t is not None else make_layout(Layout(1, 0), m)
                for m, t in zip(logical.modes, tiler)
            ),
            *logical.modes[len(tiler) :],
        ),
        a,
        tiler,
    )
    tiled = tiled_divide(a, tiler)
    flat = flat_divide(a, tiler)
    assert tiled.rank == 1 + zipped[1].rank and flat.rank == zipped[0].rank + zipped[1].rank
    assert table(tiled) == table(zipped) == table(flat)
    assert tiled[0] == zipped[0] and tiled.modes[1:] == zipped[1].modes
    assert flat.modes == zipped[0].modes + zipped[1].modes


def test_zipped_divide_with_layout_tiler_is_logical_divide():
    a, b = P("(8,6):(1,8)"), P("4:2")
    assert zipped_divide(a, b) == logical_divide(a, b)


def test_divide_with_partial_tile_covers_the_extent():
    result = logical_divide(P("10:1"), 4)
    assert result == P("(4,3):(1,4)")  # the last tile runs past 10: predicates are needed
    assert size_of(result.shape) == 12


# --------------------------------------------------------------------------- products


def compact_layouts(max_size: int = 32):
    """Bijections onto [0, size): compact layouts with permuted, nested modes."""
    return complementable_layouts(allow_trivial=False, max_size=max_size, max_gap=1)


def check_logical_product(a: Layout, b: Layout, result: Layout) -> None:
    rest = complement(a, a.size * b.cosize)
    assert result.rank == 2 and result[0] == a and result[1].size == b.size
    for j in range(b.size):
        for i in range(a.size):
            assert layout_at(result, (i, j)) == at(a, i) + at(rest, at(b, j))


@given(compact_layouts(), layouts(max_size=32, max_stride=6))
def test_logical_product_is_its_definition(a, b):
    check_logical_product(a, b, logical_product(a, b))


@given(complementable_layouts(max_size=32), layouts(max_size=32, max_stride=6))
def test_logical_product_is_correct_or_refuses(a, b):
    try:
        result = logical_product(a, b)
    except LayoutError:
        return
    check_logical_product(a, b, result)


@given(compact_layouts(16), compact_layouts(16))
def test_product_of_bijections_is_a_bijection(a, b):
    result = logical_product(a, b)
    assert sorted(table(result)) == list(range(result.size))


@given(compact_layouts(), layouts(max_size=32, max_stride=8))
def test_blocked_and_raked_products_regroup_the_logical_product(a, b):
    blocked = blocked_product(a, b)
    raked = raked_product(a, b)
    r = max(a.rank, b.rank)

    def padded(layout: Layout) -> Layout:
        modes = layout.modes + (Layout(1, 0),) * (r - layout.rank)
        return make_layout(*modes) if r > 1 else layout

    product = logical_product(padded(a), padded(b))
    a_sizes, b_sizes = mode_sizes(product[0]), mode_sizes(product[1])
    if r == 1:
        assert blocked.rank == raked.rank == 1
        for i in range(a.size):
            for j in range(b.size):
                expected = layout_at(product, (i, j))
                assert layout_at(blocked, ((i, j),)) == expected
                assert layout_at(raked, ((j, i),)) == expected
        return
    for ai in mode_coords(a_sizes):
        for bi in mode_coords(b_sizes):
            expected = layout_at(product, (ai, bi))
            assert layout_at(blocked, tuple(zip(ai, bi))) == expected
            assert layout_at(raked, tuple(zip(bi, ai))) == expected


@given(compact_layouts(), st.data())
def test_zipped_tiled_flat_product_regroup_logical_product(a, data):
    tiler = tuple(data.draw(st.sampled_from([None, 2, 3, Layout((2, 2), (2, 1))])) for _ in a.modes)
    try:
        logical = logical_product(a, tiler)
    except LayoutError:
        return
    zipped = zipped_product(a, tiler)
    regroup_check(
        zipped,
        make_layout(
            *(
                m if t is not None else make_layout(Layout(1, 0), m)
                for m, t in zip(logical.modes, tiler)
            )
        ),
        a,
        tiler,
    )
    assert table(tiled_product(a, tiler)) == table(zipped) == table(flat_product(a, tiler))
