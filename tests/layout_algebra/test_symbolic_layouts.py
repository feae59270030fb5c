"""Layouts over size symbols: symbolic evaluation, foreign int-like terms, side conditions and
"needs static" refusals; every symbolic result is checked against the concrete computation
under random substitutions of the size symbols."""

from __future__ import annotations

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from layout_oracle import at, table

from argus import symbolic
from argus.layout_algebra import (
    Layout,
    LayoutError,
    SideCondition,
    collect_side_conditions,
    complement,
    composition,
    idx2crd,
    local_tile,
    logical_divide,
    right_inverse,
    zipped_divide,
)

M, N, K = (symbolic.size_symbol(n) for n in "MNK")
i, j = symbolic.index_symbol("i"), symbolic.index_symbol("j")


def value(expr, env) -> int:
    return symbolic.evaluate(expr, env)


def sizes(layout: Layout) -> list:
    return [[sub.size for sub in mode.modes] for mode in layout.modes]


def concrete(layout: Layout, env) -> Layout:
    result = layout.specialize(env)
    assert result.is_static, result
    return result


# --------------------------------------------------------------------------- evaluation


@settings(max_examples=25)
@given(st.integers(1, 7), st.integers(1, 5), st.data())
def test_symbolic_evaluation_agrees_with_concrete(m, n, data):
    env = {"M": m, "N": n}
    layouts = [
        Layout((M, (4, N))),
        Layout((M, (4, N)), (4 * N, (1, 4))),
        Layout(((2, M), N), ((M * N, 1), 2 * M)),
    ]
    for layout in layouts:
        flat = layout(i)
        natural = layout((i, j))  # coarse coordinate: j is split over the inner mode
        fixed = concrete(layout, env)
        for index in data.draw(st.lists(st.integers(0, fixed.size - 1), min_size=1, max_size=6)):
            assert value(flat, {**env, "i": index}) == fixed(index) == at(fixed, index)
            c0, c1 = idx2crd(index, (fixed[0].size, fixed[1].size))
            assert value(natural, {**env, "i": c0, "j": c1}) == fixed((c0, c1))


def test_symbolic_expression_shape():
    layout = Layout((M, N))
    assert layout(i) == symbolic.mod(i, M) + M * symbolic.floordiv(i, M)
    assert layout((i, j)) == i + M * j
    assert Layout((4, 8))(i) == sympy.Mod(i, 4) + 4 * symbolic.FloorDiv(i, 4)
    assert layout.size == M * N and layout.cosize == M * N
    assert str(Layout((M, 4), (4, M))) == "(M,4):(4,M)"


class Term:
    """A foreign int-like: floor semantics, and a record of every operation applied."""

    def __init__(self, v: int, log: list) -> None:
        self.v, self.log = v, log

    def _wrap(self, op: str, other, result: int) -> Term:
        self.log.append(op)
        return Term(result, self.log)

    @staticmethod
    def _val(x) -> int:
        return x.v if isinstance(x, Term) else int(x)

    def __add__(self, other):
        return self._wrap("+", other, self.v + self._val(other))

    __radd__ = __add__

    def __mul__(self, other):
        return self._wrap("*", other, self.v * self._val(other))

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return self._wrap("//", other, self.v // self._val(other))

    def __mod__(self, other):
        return self._wrap("%", other, self.v % self._val(other))

    def __xor__(self, other):  # part of the protocol; layouts never use it
        raise AssertionError("layouts do not xor")


def test_evaluation_with_foreign_terms():
    layout = Layout.parse("(3,(2,3)):(3,(12,1))")
    for index in range(layout.size):
        log: list = []
        result = layout(Term(index, log))
        assert isinstance(result, Term) and result.v == layout(index)
        assert set(log) <= {"+", "*", "//", "%"} and "%" in log
    log = []
    result = layout(Term(1, log), (Term(1, log), Term(2, log)))
    assert result.v == 17 and "//" not in log  # natural coordinates need no division


# --------------------------------------------------------------------------- algebra


@settings(max_examples=25)
@given(st.integers(1, 40), st.integers(1, 24))
def test_symbolic_tiling_agrees_with_concrete(m, n):
    env = {"M": m, "N": n}
    tensor = Layout((M, N))
    fixed = concrete(tensor, env)
    for tiler in [(4, 8), (Layout(4, 2), 8)]:
        assert table(concrete(logical_divide(tensor, tiler), env)) == table(
            logical_divide(fixed, tiler)
        )
        zipped = concrete(zipped_divide(tensor, tiler), env)
        expected = zipped_divide(fixed, tiler)
        # same function and the same mode sizes (a symbolic size-1 mode may stay uncoalesced)
        assert sizes(zipped) == sizes(expected) and table(zipped) == table(expected)
    row_major = Layout((M, N), (N, 1))
    zipped = concrete(zipped_divide(row_major, (4, 8)), env)
    expected = zipped_divide(concrete(row_major, env), (4, 8))
    assert zipped.shape == expected.shape and table(zipped) == table(expected)


@settings(max_examples=25)
@given(st.integers(1, 12), st.integers(1, 6))
def test_symbolic_inverses_and_complement_agree_with_concrete(m, n):
    env = {"M": m, "N": n}
    layout = Layout((4, M, N), (M * N, 1, M))  # a permuted compact layout
    inverse = right_inverse(layout)
    assert table(concrete(inverse, env)) == table(right_inverse(concrete(layout, env)))
    assert inverse.size == layout.size
    tile = Layout((4, N), (1, 4 * M))
    result = complement(tile, 4 * M * N)
    assert table(concrete(result, env)) == table(complement(concrete(tile, env), 4 * m * n))
    b = Layout((2, M), (M, 1))
    assert table(concrete(composition(Layout((M, 2, N)), b), env)) == [
        at(concrete(Layout((M, 2, N)), env), at(concrete(b, env), x)) for x in range(2 * m)
    ]


# --------------------------------------------------------------------------- side conditions


def test_undecided_precondition_raises_outside_a_collector():
    with pytest.raises(LayoutError, match="cannot decide statically that 4 divides M"):
        complement(Layout((4, N), (1, M)), M * N)


def test_undecided_precondition_becomes_a_side_condition():
    with collect_side_conditions() as conditions:
        result = complement(Layout((4, N), (1, M)), M * N)
    assert len(conditions) == 1
    (condition,) = conditions
    assert isinstance(condition, SideCondition) and condition.operation == "complement"
    assert condition.condition == sympy.Eq(sympy.Mod(M, 4), 0)
    assert "complementable" in condition.reason and condition.position is not None
    assert condition.position.file == __file__
    for m in (4, 8, 12):
        for n in (1, 3):
            env = {"M": m, "N": n}
            assert table(concrete(result, env)) == table(complement(Layout((4, n), (1, m)), m * n))
            assert bool(condition.condition.subs({M: m})) is True
    assert bool(condition.condition.subs({M: 6})) is False


def test_composition_shape_divisibility_side_condition():
    a, b = Layout((8, N)), Layout(12 * M)
    with pytest.raises(LayoutError, match="8 divides 12\\*M"):
        composition(a, b)
    with collect_side_conditions() as conditions:
        result = composition(a, b)
    (condition,) = conditions
    assert condition.operation == "composition" and "shape divisibility" in condition.reason
    assert [bool(condition.condition.subs({M: m})) for m in (1, 2, 3, 4)] == [0, 1, 0, 1]
    env = {"M": 2, "N": 100}
    assert table(concrete(result, env)) == [at(concrete(a, env), x) for x in range(24)]


def test_collectors_nest_and_propagate():
    with collect_side_conditions() as outer:
        with collect_side_conditions() as inner:
            complement(Layout((4, N), (1, M)), M * N)
        assert len(inner) == 1
        Layout(symbolic.size_symbol("Q"))  # positive: nothing to collect
    assert outer == inner


def test_sizes_of_unknown_sign_need_a_side_condition():
    x = sympy.Symbol("x", integer=True)
    with pytest.raises(LayoutError, match="x > 0"):
        Layout((4, x))
    with collect_side_conditions() as conditions:
        Layout((4, x))
    assert [str(c.condition) for c in conditions] == ["x > 0"]
    with pytest.raises(LayoutError, match="positive"):
        Layout(-symbolic.size_symbol("P"))


def test_structural_questions_need_static_values():
    with pytest.raises(LayoutError, match="right_inverse needs static"):
        right_inverse(Layout((4, N), (1, M)))
    with pytest.raises(LayoutError, match="composition needs static"):
        composition(Layout((M, N)), Layout(4))  # does the 4-tile stay inside the M mode?
    with pytest.raises(LayoutError, match="complement needs static"):
        complement(Layout((2, 2), (M, N)))


def test_ceil_division_of_symbolic_extents():
    result = logical_divide(Layout(M), 128)
    assert result == Layout((128, symbolic.ceil_div(M, 128)), (1, 128))
    tile = local_tile(Layout((M, N)), (128, 64), (i, j))
    assert tile.layout == Layout((128, 64), (1, M))
    assert tile.offset == 128 * i + 64 * M * j
    assert tile.needs_predicate
    exact = local_tile(Layout((128 * M, N)), (128, N), (i, 0))
    assert not exact.needs_predicate
