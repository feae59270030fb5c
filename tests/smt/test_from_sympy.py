"""sympy -> term conversion: the term evaluates like sympy under random substitutions."""

from __future__ import annotations

import pytest
import sympy
from hypothesis import assume, given
from hypothesis import strategies as st

import argus.symbolic as S
from argus.smt import terms as T
from argus.smt.evaluate import DivisionByZero, evaluate
from argus.smt.from_sympy import SympyConversionError, from_sympy

a, b, c = (sympy.Symbol(n, integer=True) for n in "abc")
TERMS = {"a": T.int_var("a", -30, 30), "b": T.int_var("b", -30, 30), "c": T.int_var("c", 0, 30)}
VALUES = st.fixed_dictionaries(
    {"a": st.integers(-30, 30), "b": st.integers(-30, 30), "c": st.integers(0, 30)}
)


def _safe(build):
    """``build`` as a strategy-friendly function: a literal zero divisor gives ``None``."""

    def call(*args):
        try:
            return sympy.sympify(build(*args))
        except ZeroDivisionError:
            return None

    return call


def sympy_exprs():
    """Random integer sympy expressions in the layout-algebra fragment."""
    leaf = st.one_of(st.sampled_from([a, b, c]), st.integers(-9, 9).map(sympy.Integer))
    builders = [
        (sympy.Add, 2),
        (sympy.Mul, 2),
        (lambda u, v: u - v, 2),
        (sympy.Mod, 2),
        (S.floordiv, 2),
        (S.trunc_div, 2),
        (S.trunc_mod, 2),
        (S.xor, 2),
        (S.bit_and, 2),
        (S.bit_or, 2),
        (sympy.Min, 2),
        (sympy.Max, 3),
        (sympy.Abs, 1),
        (lambda u, v, w: sympy.Piecewise((u, v < w), (w, True)), 3),
    ]

    def extend(e):
        nodes = [st.builds(_safe(fn), *([e] * arity)) for fn, arity in builders]
        nodes += [
            st.builds(_safe(lambda u, k: sympy.floor(u / k)), e, st.integers(-5, 5).filter(bool)),
            st.builds(_safe(lambda u, k: sympy.ceiling(u / k)), e, st.integers(-5, 5).filter(bool)),
            st.builds(_safe(lambda u, v, k: sympy.floor(u / k + v / 2)), e, e, st.integers(1, 4)),
            st.builds(_safe(lambda u, k: u**k), e, st.integers(0, 2)),
        ]
        return st.one_of(nodes).filter(lambda x: x is not None and sympy.count_ops(x) < 40)

    return st.recursive(leaf, extend, max_leaves=5)


def _sympy_value(expr, env):
    subs = {s: sympy.Integer(env[s.name]) for s in expr.free_symbols}
    value = expr.xreplace(subs)
    if not value.is_Integer:
        value = sympy.simplify(value)
    if value.has(sympy.zoo, sympy.nan) or not value.is_Integer:
        raise ZeroDivisionError
    return int(value)


@given(sympy_exprs(), VALUES)
def test_conversion_agrees_with_sympy_evaluation(expr, env):
    try:
        term = from_sympy(expr, TERMS)
    except T.TermError:  # an int-level bitwise op over an operand without finite bounds
        assume(False)
    try:
        expected = _sympy_value(expr, env)
    except ZeroDivisionError:
        # sympy evaluates every branch of a Piecewise, an SMT ite only the one taken: a zero
        # divisor in an untaken branch is no error of the term
        assume(not expr.has(sympy.Piecewise))
        with pytest.raises(DivisionByZero):
            evaluate(term, env, strict=True)
        return
    try:
        got = evaluate(term, env, strict=True)
    except DivisionByZero:  # sympy may simplify a zero divisor away (e.g. Mod(x, x) = 0)
        assume(False)
    assert got == expected, (expr, str(term), env)


@given(VALUES)
def test_relations_and_connectives(env):
    cases = [
        sympy.Eq(a, b),
        sympy.Ne(a, 3),
        a < b,
        a <= b,
        a > c,
        a >= c,
        sympy.And(a > 0, b < 0),
        sympy.Or(a > 0, sympy.Not(b < 0)),
        sympy.Implies(a > 0, b > 0),
        sympy.Xor(a > 0, b > 0, c > 3),
        sympy.ITE(a > b, a > 0, b > 0),
    ]
    for cond in cases:
        term = from_sympy(cond, TERMS)
        assert term.sort.is_bool
        expected = bool(cond.xreplace({s: sympy.Integer(env[s.name]) for s in cond.free_symbols}))
        assert evaluate(term, env) is expected, cond


def test_floor_of_a_fraction_is_one_division():
    assert from_sympy(sympy.floor(a / 3), TERMS) is TERMS["a"] // 3
    assert from_sympy(sympy.floor(a / 3 + b / 2), TERMS) is (2 * TERMS["a"] + 3 * TERMS["b"]) // 6
    assert from_sympy(sympy.Mod(c, 8), TERMS) is T.mod(TERMS["c"], 8)
    assert from_sympy(S.floordiv(c, 8), {c: TERMS["c"]}) is TERMS["c"] // 8  # keyed by symbol
    assert from_sympy(sympy.Integer(5), {}) is T.int_const(5)


@pytest.mark.parametrize(
    ("expr", "node"),
    [
        (a / 2, "Mul"),
        (sympy.sign(a), "sign"),
        (sympy.Piecewise((a, a > 0)), "Piecewise"),
        (a**-1, "Pow"),
        (sympy.Rational(1, 3), "Rational"),
    ],
)
def test_unsupported_nodes_are_named(expr, node):
    with pytest.raises(SympyConversionError, match=node):
        from_sympy(expr, TERMS)


def test_missing_symbol_is_named():
    with pytest.raises(SympyConversionError, match="'d'"):
        from_sympy(a + sympy.Symbol("d", integer=True), TERMS)
