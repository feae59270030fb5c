"""Layout construction, evaluation, coordinates, coalesce and filter, against the oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from layout_oracle import at, layouts, leaves, size_of, table

from argus.layout_algebra import (
    Layout,
    LayoutError,
    coalesce,
    compatible,
    congruent,
    cosize,
    crd2idx,
    depth,
    filter,
    flatten,
    idx2crd,
    make_layout,
    prefix_product,
    product,
    product_each,
    rank,
    shape_div,
    size,
)

P = Layout.parse


# --------------------------------------------------------------------------- golden examples


def test_cute_doc_evaluation_example():
    layout = P("(3,(2,3)):(3,(12,1))")
    assert layout(16) == 17
    assert layout.idx2crd(16) == (1, (1, 2))
    assert layout((1, (1, 2))) == 17
    assert layout(1, 5) == 17  # coarse coordinate: 5 is split over the (2,3) mode
    assert layout((1, 5)) == 17
    assert table(layout) == [layout(i) for i in range(18)]


def test_default_strides_are_column_major():
    assert Layout((4, (2, 3))) == P("(4,(2,3)):(1,(4,8))")
    assert Layout(7) == P("7:1")
    assert prefix_product((2, (3, 4), 5)) == (1, (2, 6), 24)


def test_size_cosize_rank_depth():
    layout = P("(3,(2,3)):(3,(12,1))")
    assert (layout.size, size(layout), size((3, (2, 3)))) == (18, 18, 18)
    assert layout.cosize == cosize(layout) == max(table(layout)) + 1 == 21
    assert (layout.rank, rank(layout), rank(7), rank((1, (2, 3)))) == (2, 2, 1, 2)
    assert (layout.depth, depth(P("4:1")), depth(P("(4,2):(1,4)"))) == (2, 0, 1)
    assert flatten(layout) == P("(3,2,3):(3,12,1)")
    assert layout[1] == P("(2,3):(12,1)") and layout[-1] == layout[1]
    assert P("5:2")[0] == P("5:2")


def test_notation_round_trip_and_parse_forms():
    for text in ["(3,(2,3)):(3,(12,1))", "12:1", "(4,):(1,)", "((2,2),(2,3)):((4,1),(2,8))"]:
        assert str(P(text)) == text and repr(P(text)) == text
    assert P("(4)") == P("4:1")
    assert P("( 4 , 2 ) : ( 1 , 4 )") == Layout((4, 2), (1, 4))
    assert str(P("(M,4):(4,M*N)")) == "(M,4):(4,M*N)"
    with pytest.raises(LayoutError, match="parse"):
        P("(4,2):(1,")
    with pytest.raises(LayoutError, match="parse"):
        P("(4,2)]")


def test_slice_returns_sub_layout_and_offset():
    layout = P("(4,(2,3)):(1,(4,8))")
    sub, offset = layout.slice((None, (1, None)))
    assert (sub, offset) == (P("(4,3):(1,8)"), 4)
    for i in range(4):
        for k in range(3):
            assert layout((i, (1, k))) == offset + sub((i, k))
    sub, offset = layout.slice((2, None))
    assert (sub, offset) == (P("(2,3):(4,8)"), 2)
    assert layout.slice((1, 3)) == (P("1:0"), layout(1, 3))
    with pytest.raises(LayoutError, match="free mode"):
        layout(None, 1)


def test_make_layout_concatenates_modes():
    a, b = P("(2,2):(1,2)"), P("3:4")
    layout = make_layout(a, b)
    assert layout == P("((2,2),3):((1,2),4)")
    assert all(layout(i, j) == a(i) + b(j) for i in range(4) for j in range(3))
    assert make_layout(4, 2) == P("(4,2):(1,1)")


def test_int_tuple_helpers():
    assert product((2, (3, 4))) == 24 and product(()) == 1
    assert product_each((2, (3, 4), 5)) == (2, 12, 5)
    assert congruent((1, (2, 3)), (4, (5, 6))) and not congruent((1, 2), (1, (2, 3)))
    assert compatible(12, (3, 4)) and compatible((2, 12), (2, (3, 4)))
    assert not compatible((2, 12), (2, 12, 1)) and not compatible((3, 4), 12)
    assert shape_div((6, 4), 12) == (1, 2) and shape_div(4, 8) == 1 and shape_div(12, 4) == 3
    with pytest.raises(LayoutError, match="shape_div"):
        shape_div(6, 4)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Layout((4, 0)), "positive"),
        (lambda: Layout((4, -2)), "positive"),
        (lambda: Layout((4, 2), (1,)), "congruent"),
        (lambda: Layout((4, 2), 1), "congruent"),
        (lambda: Layout(4.5), "not an int"),
        (lambda: Layout(True), "bool"),
        (lambda: P("(4,2):(1,4)")(8), "out of range"),
        (lambda: P("(4,2):(1,4)")(-1), "out of range"),
        (lambda: P("(4,2):(1,4)")(4, 0), "out of range"),
        (lambda: P("(4,2):(1,4)")((1, 1, 1)), "rank"),
        (lambda: P("4:1")((1, 1)), "rank"),
        (lambda: P("(4,2):(1,4)")[2], "rank"),
        (lambda: P("(4,2):(1,4)").slice((None, None, 1)), "rank"),
    ],
)
def test_bad_input_raises_layout_error(build, message):
    with pytest.raises(LayoutError, match=message):
        build()


def test_layout_error_points_at_the_caller():
    with pytest.raises(LayoutError) as info:
        P("(4,2):(1,4)")(9)
    assert info.value.position is not None and info.value.position.file == __file__
    assert "Layout call" in str(info.value)


def test_extended_continues_the_last_mode():
    layout = P("(4,3):(1,4)")
    assert [layout.extended(i) for i in range(16)] == list(range(16))
    assert P("(4,3):(2,100)").extended(13) == 2 * 1 + 100 * 3


def test_layouts_are_immutable_and_hashable():
    layout = P("(4,2):(1,4)")
    with pytest.raises(AttributeError):
        layout.shape = (8,)  # type: ignore[misc]
    assert {layout, P("(4,2):(1,4)")} == {layout}


# --------------------------------------------------------------------------- properties


@given(layouts())
def test_evaluation_matches_the_oracle(layout):
    assert [layout(i) for i in range(layout.size)] == table(layout)


@given(layouts())
def test_idx2crd_crd2idx_round_trip(layout):
    for i in range(layout.size):
        coord = idx2crd(i, layout.shape)
        assert congruent(coord, layout.shape)
        assert all(0 <= c < s for c, s in zip(leaves(coord), leaves(layout.shape)))
        assert crd2idx(coord, layout.shape) == i
        assert layout(coord) == layout(i) == crd2idx(coord, layout.shape, layout.stride)


@given(layouts())
def test_coalesce_preserves_the_function(layout):
    result = coalesce(layout)
    assert result.size == layout.size
    assert table(result) == table(layout)
    assert result.depth <= 1
    # nothing left to merge: no size-1 mode, no adjacent pair with s0*d0 == d1
    shapes, strides = leaves(result.shape), leaves(result.stride)
    assert all(s != 1 for s in shapes) or result == Layout(1, 0)
    assert all(shapes[k] * strides[k] != strides[k + 1] for k in range(len(shapes) - 1))


@given(layouts(), st.data())
def test_coalesce_by_mode_keeps_the_modes(layout, data):
    profile = tuple(data.draw(st.sampled_from([None, 1])) for _ in range(layout.rank))
    result = coalesce(layout, profile)
    assert result.rank == layout.rank
    for mode_before, mode_after in zip(layout.modes, result.modes):
        assert table(mode_before) == table(mode_after)


@given(layouts())
def test_filter_keeps_the_image_and_the_zero_stride_free_restriction(layout):
    result = filter(layout)
    assert set(table(result)) == set(table(layout))
    nontrivial = [(s, d) for s, d in zip(leaves(layout.shape), leaves(layout.stride)) if s != 1]
    kept = [(s, d) for s, d in nontrivial if d != 0]
    assert result.size == size_of(tuple(s for s, _ in kept))
    restricted = Layout(tuple(s for s, _ in kept) or 1, tuple(d for _, d in kept) or 0)
    assert table(result) == table(restricted)
    assert all(d != 0 for d in leaves(result.stride)) or result == Layout(1, 0)


def test_golden_coalesce_and_filter():
    assert coalesce(P("(2,(1,6)):(1,(6,2))")) == P("12:1")
    assert coalesce(P("(2,4):(1,3)")) == P("(2,4):(1,3)")
    assert coalesce(P("(2,(1,6)):(1,(6,2))"), (1, None)) == P("(2,6):(1,2)")
    assert coalesce(P("((2,4),(3,5)):((1,2),(8,24))"), (1, 1)) == P("(8,15):(1,8)")
    assert coalesce(P("(1,1):(3,5)")) == P("1:0")
    assert filter(P("(4,2,1,3):(0,1,5,3)")) == P("(2,3):(1,3)")
    assert filter(P("(3,2):(0,0)")) == P("1:0")


@given(layouts(max_stride=8))
def test_cosize_is_one_past_the_largest_offset(layout):
    assert layout.cosize == max(table(layout)) + 1 == at(layout, layout.size - 1) + 1
