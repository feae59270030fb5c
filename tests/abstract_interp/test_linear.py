"""Linear normalization with divisions and modulos folded: every rewrite is an identity over
the variables' declared ranges (checked by evaluation), and the folds the witnesses need fire."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.abstract_interp.linear import simplify
from argus.smt import terms as T
from argus.smt.evaluate import evaluate

t = T.int_var("t", 0, 127)
c = T.int_var("c", 0, 3)
b = T.int_var("b", 0, None)


def _check_identity(original, folded, ranges):
    names = [v for v, _ in ranges]
    for values in itertools.product(*(r for _, r in ranges)):
        model = dict(zip(names, values))
        assert evaluate(original, model) == evaluate(folded, model), (model, original, folded)


@pytest.mark.parametrize("make, expected", [
    (lambda: T.floormod(T.sub(t, T.floormod(t, 32)), 4), "0"),
    (lambda: T.floormod(T.floormod(t, 32), 4), "(mod t 4)"),
    (lambda: T.floordiv(T.floordiv(t, 32), 2), "(div t 64)"),
    (lambda: T.floordiv(T.add(T.mul(64, b), T.mul(8, c), 3), 64), "b"),
    (lambda: T.floormod(T.sub(T.add(T.mul(64, b), c), T.mul(64, b)), 16), "c"),
    (lambda: T.floormod(T.mul(32, T.floordiv(t, 32)), 4), "0"),
])
def test_folds(make, expected):
    assert str(simplify(make())) == expected


ATOMS = [t, c, T.floormod(t, 32), T.floordiv(t, 4), T.floormod(T.floordiv(t, 8), 4)]


@st.composite
def linear_terms(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(["add", "sub", "mul", "mod", "div"]))
    x = draw(linear_terms(depth=depth - 1))
    if kind == "add":
        return T.add(x, draw(linear_terms(depth=depth - 1)), draw(st.integers(-40, 40)))
    if kind == "sub":
        return T.sub(x, draw(linear_terms(depth=depth - 1)))
    if kind == "mul":
        return T.mul(draw(st.integers(-9, 9)), x)
    divisor = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 32, 64]))
    return T.floormod(x, divisor) if kind == "mod" else T.floordiv(x, divisor)


@settings(max_examples=60, deadline=None)
@given(linear_terms())
def test_simplify_is_an_identity_on_the_declared_ranges(term):
    _check_identity(term, simplify(term), [("t", range(0, 128, 3)), ("c", range(4))])


@st.composite
def comparisons(draw):
    x, y = draw(linear_terms(depth=2)), draw(linear_terms(depth=2))
    make = draw(st.sampled_from([T.eq, T.lt, T.le, T.gt, T.ge]))
    atom = make(x, y)
    kind = draw(st.sampled_from(["atom", "not", "and", "ite"]))
    if kind == "not":
        return T.not_(atom)
    if kind == "and":
        return T.and_(atom, T.le(draw(linear_terms(depth=1)), draw(st.integers(-5, 40))))
    if kind == "ite":
        return T.eq(T.ite(atom, x, y), draw(linear_terms(depth=1)))
    return atom


@settings(max_examples=80, deadline=None)
@given(comparisons())
def test_comparisons_and_connectives_are_identities_on_the_declared_ranges(term):
    _check_identity(term, simplify(term), [("t", range(0, 128, 3)), ("c", range(4))])


def test_an_equation_splits_at_a_modulus_its_remainder_cannot_reach():
    k, k2 = T.int_var("k", 0, None), T.int_var("k2", 0, None)
    bx, bx2 = T.int_var("bx", 0, 3), T.int_var("bx2", 0, 3)
    u, u2 = T.int_var("u", 0, 63), T.int_var("u2", 0, 63)
    same = T.eq(T.add(T.mul(256, k), T.mul(64, bx), u), T.add(T.mul(256, k2), T.mul(64, bx2), u2))
    folded = simplify(same)
    # tile offset, block offset and offset inside the tile equal apart: no search over k
    assert folded.op == "and" and {str(p) for p in folded.args} == {"(= u u2)", "(= bx bx2)", "(= k k2)"}
    ranges = [("k", range(3)), ("k2", range(3)), ("bx", range(4)), ("bx2", range(4)), ("u", (0, 5, 63)),
              ("u2", (0, 5, 63))]
    _check_identity(same, folded, ranges)
    assert str(simplify(T.eq(T.mul(4, c), 6))) == "false"  # 2 divides the left side, not 6
    assert str(simplify(T.lt(c, 4))) == "true" and str(simplify(T.gt(c, 3))) == "false"
