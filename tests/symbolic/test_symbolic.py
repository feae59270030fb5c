"""argus.symbolic: each operation against Python's own integer semantics (the oracle)."""

from __future__ import annotations

import operator

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

import argus.symbolic as S

small = st.integers(-300, 300)
nonzero = small.filter(lambda v: v != 0)


def c_trunc_div(a: int, b: int) -> int:
    # independent oracle: float-free truncation toward zero
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@given(small, nonzero)
def test_int_semantics(a, b):
    assert S.floordiv(a, b) == a // b
    assert S.mod(a, b) == a % b
    assert S.trunc_div(a, b) == c_trunc_div(a, b)
    assert S.trunc_mod(a, b) == a - b * c_trunc_div(a, b)
    assert S.xor(a, b) == a ^ b and S.bit_and(a, b) == a & b and S.bit_or(a, b) == a | b


@given(small, nonzero)
def test_sympy_functions_agree_with_ints_after_substitution(a, b):
    x, y = sympy.Symbol("x", integer=True), sympy.Symbol("y", integer=True)
    cases = [
        (S.floordiv(x, y), a // b),
        (S.mod(x, y), a % b),
        (S.trunc_div(x, y), c_trunc_div(a, b)),
        (S.trunc_mod(x, y), a - b * c_trunc_div(a, b)),
        (S.xor(x, y), a ^ b),
        (S.bit_and(x, y), a & b),
        (S.bit_or(x, y), a | b),
    ]
    for expr, expected in cases:
        assert isinstance(expr, sympy.Expr) and not expr.is_Integer
        assert S.evaluate(expr, {"x": a, "y": b}) == expected, expr


@given(st.integers(0, 1000), st.integers(0, 8))
def test_shifts(a, k):
    i = S.index_symbol("i")
    assert S.shl(a, k) == a << k
    assert S.shr(a, k) == a >> k
    assert S.evaluate(S.shr(i, k), {"i": a}) == a >> k
    assert S.evaluate(S.shl(i, k), {"i": a}) == a << k


@given(st.integers(0, 500), st.integers(1, 9), st.integers(1, 9), st.integers(0, 50))
def test_floordiv_simplifications_are_exact(i, p, q, n):
    iv, nv = S.index_symbol("i"), S.size_symbol("n")
    nested = S.floordiv(S.floordiv(iv, p), q)
    assert S.evaluate(nested, {"i": i}) == (i // p) // q
    split = S.floordiv(q * nv + iv, q)
    assert S.evaluate(split, {"i": i, "n": max(n, 1)}) == (q * max(n, 1) + i) // q


def test_simplifications_fire():
    i, n = S.index_symbol("i"), S.size_symbol("n")
    assert S.floordiv(8 * n + i, 8) == n + S.FloorDiv(i, 8)
    assert S.floordiv(S.floordiv(i, 4), 2) == S.FloorDiv(i, 8)
    assert S.xor(i, 0) == i and S.xor(i, i) == 0
    assert S.floordiv(i, 1) == i and S.mod(8 * n, 8) == 0


def test_static_helpers():
    assert S.is_static(3) and S.is_static(sympy.Integer(3)) and not S.is_static(True)
    assert S.static_value(sympy.Integer(7)) == 7 and S.static_value(S.size_symbol("n")) is None
    assert type(S.normalize(sympy.Integer(4))) is int
    assert S.free_symbols(5) == frozenset()


def test_divides_is_three_valued():
    n = S.size_symbol("n")
    assert S.divides(4, 12) is True
    assert S.divides(4, 10) is False
    assert S.divides(8, 16 * n) is True
    assert S.divides(8, n) is None
    assert S.divides(1, n) is True


def test_decide():
    n = S.size_symbol("n")
    assert S.decide(sympy.Gt(n, 0)) is True
    assert S.decide(sympy.Lt(n, 0)) is False
    assert S.decide(sympy.Gt(n, 5)) is None
    assert S.decide(True) is True


def test_evaluate_reports_unbound_symbols():
    with pytest.raises(ValueError, match="unbound symbols m, n"):
        S.evaluate(S.size_symbol("n") + S.size_symbol("m"), {})


def test_division_by_zero_is_an_error():
    with pytest.raises(ZeroDivisionError):
        S.floordiv(1, 0)
    with pytest.raises(ZeroDivisionError):
        S.evaluate(S.floordiv(S.index_symbol("i"), S.index_symbol("j")), {"i": 1, "j": 0})


class Recorder:
    """A foreign int-like: records which operator the dispatch picked."""

    def __init__(self, log):
        self.log = log

    def _op(name):
        def method(self, other):
            self.log.append(name)
            return self

        return method

    __add__ = __radd__ = __mul__ = __rmul__ = _op("+*")
    __floordiv__ = _op("//")
    __mod__ = _op("%")
    __xor__ = _op("^")
    __and__ = _op("&")
    __or__ = _op("|")
    __lshift__ = _op("<<")
    __rshift__ = _op(">>")

    def trunc_div(self, other):
        self.log.append("tdiv")
        return self

    def trunc_mod(self, other):
        self.log.append("tmod")
        return self


def test_foreign_terms_use_their_own_operators():
    log: list[str] = []
    t = Recorder(log)
    S.floordiv(t, 4), S.mod(t, 4), S.xor(t, 3), S.bit_and(t, 3), S.bit_or(t, 3)
    S.shl(t, 2), S.shr(t, 2), S.trunc_div(t, 3), S.trunc_mod(t, 3)
    assert log == ["//", "%", "^", "&", "|", "<<", ">>", "tdiv", "tmod"]
    assert isinstance(t, S.IntTerm)


@pytest.mark.parametrize("op", [operator.floordiv, operator.mod])
def test_sympy_never_builds_floor_nodes(op):
    i = S.index_symbol("i")
    expr = S.floordiv(i, 4) if op is operator.floordiv else S.mod(i, 4)
    assert not expr.has(sympy.floor)
