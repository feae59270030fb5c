"""argus.smt.terms and argus.smt.evaluate: construction, interning, guards, exact semantics.

Oracles: Python's own integer operators (floor), a float-free C truncation, SMT-LIB's
Euclidean definition written from its axioms, and exhaustive enumeration of small domains.
"""

from __future__ import annotations

import copy
import itertools
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from smt_strategies import DECLARATIONS, any_terms, environments

import argus.symbolic as S
from argus.errors import ArgusError
from argus.smt import terms as T
from argus.smt.evaluate import (
    BitwiseOutOfRange,
    DivisionByZero,
    UnboundName,
    Undefined,
    evaluate,
    satisfies,
)

x = T.int_var("x", -8, 8)
y = T.int_var("y", -8, 8)
n = T.int_var("n", 1, 64)

SMALL = range(-9, 10)
NONZERO = [v for v in SMALL if v != 0]


def c_trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def euclid(a: int, b: int) -> tuple[int, int]:
    """The unique (q, r) with a = b*q + r and 0 <= r < |b| (SMT-LIB div/mod), by search."""
    for r in range(abs(b)):
        if (a - r) % b == 0:
            return (a - r) // b, r
    raise AssertionError


# --------------------------------------------------------------------------- interning


def test_structurally_equal_terms_are_one_object():
    a = (x + 1) * y
    b = (x + 1) * y
    assert a is b and a == b and hash(a) == hash(b)
    assert T.int_var("x", -8, 8) is x
    assert T.int_var("x", 0, 8) is not x  # bounds are part of the variable
    assert len({a, b, (x + 1) * y}) == 1


@given(any_terms())
def test_pickle_and_copy_preserve_interning(t):
    assert pickle.loads(pickle.dumps(t)) is t
    assert copy.deepcopy(t) is t and copy.copy(t) is t
    assert pickle.loads(pickle.dumps([t, t])) == [t, t]


def test_terms_are_frozen():
    with pytest.raises(AttributeError):
        x.op = "y"  # type: ignore[misc]


def test_term_refuses_python_truth():
    with pytest.raises(TypeError, match="no Python truth value"):
        bool(x < 3)
    with pytest.raises(TypeError):
        if x < y:
            pass
    assert (x == y) is False  # `==` stays structural


def test_equality_is_structural_and_eq_is_smt():
    assert (x == y) is False and (x == x) is True
    assert T.eq(x, y).op == "=" and T.eq(x, x) is T.TRUE
    assert T.ne(x, 3) is T.not_(T.eq(x, 3))


# --------------------------------------------------------------------------- construction


def test_python_ints_mix_in_and_fold():
    assert str(x + 1) == "(+ x 1)"
    assert str(1 + x) == "(+ x 1)"
    assert str(2 * x - 3) == "(+ (* 2 x) (- 3))"
    assert str(x - y) == "(- x y)"
    assert (x + 0) is x and (x * 1) is x and (x * 0) is T.int_const(0)
    assert T.int_const(3) + 4 is T.int_const(7)
    assert (x + 1 + 2) is (x + 3)
    assert str(x < 3) == "(< x 3)" and str(3 < x) == "(> x 3)"
    assert T.lt(2, 3) is T.TRUE


def test_sort_errors_are_argus_errors():
    b = T.bv_var("b", 8)
    with pytest.raises(ArgusError):
        x + b
    with pytest.raises(ArgusError, match="ambiguous"):
        _ = b < b
    with pytest.raises(ArgusError):
        T.and_(x, T.TRUE)
    with pytest.raises(ArgusError):
        T.Term("frobnicate", (x,))
    with pytest.raises(ArgusError):
        T.bvadd(b, T.bv_var("c", 4))


def test_variable_name_clash_is_reported():
    with pytest.raises(ArgusError, match="two declarations"):
        T.variables(T.int_var("v", 0, 3) + T.int_var("v", 0, 4))
    with pytest.raises(ArgusError):
        T.variables(T.eq(T.int_var("v"), T.bv2nat(T.bv_var("v", 3))))


def test_functions_apply_and_check_arity():
    f = T.Function("f", (T.INT, T.INT), T.INT)
    assert str(f(x, 2)) == "(f x 2)"
    with pytest.raises(ArgusError):
        f(x)
    with pytest.raises(ArgusError):
        T.Function("h", (T.INT,), T.BOOL, bounds=(0, 1))


def test_int_like_protocol_of_argus_symbolic():
    assert isinstance(x, S.IntTerm)
    assert S.floordiv(x, 8) is x // 8 is T.div(x, 8)
    assert S.mod(x, 8) is x % 8
    assert S.xor(x, 5) is (x ^ 5)
    assert S.trunc_div(x, 3) is x.trunc_div(3)
    assert S.trunc_mod(x, 3) is x.trunc_mod(3)
    assert S.shl(x, 2) is 4 * x
    assert S.shr(x, 2) is x // 4
    assert S.ceil_div(n, 8) is (n + 7) // 8


def test_substitute_and_rebuild_simplify():
    t = (x + y) * 2
    assert T.substitute(t, {x: 1, y: 2}) is T.int_const(6)
    assert T.substitute(t, {y: x}) is (x + x) * 2


# --------------------------------------------------------------------------- division semantics


@pytest.mark.parametrize(
    ("build", "oracle"),
    [
        (lambda a, b: a // b, lambda a, b: a // b),
        (lambda a, b: a % b, lambda a, b: a % b),
        (T.div, lambda a, b: euclid(a, b)[0]),
        (T.mod, lambda a, b: euclid(a, b)[1]),
        (T.trunc_div, c_trunc_div),
        (T.trunc_mod, lambda a, b: a - b * c_trunc_div(a, b)),
    ],
    ids=["floordiv", "floormod", "div", "mod", "trunc_div", "trunc_mod"],
)
def test_divisions_evaluate_exactly_on_small_domain(build, oracle):
    sym = build(x, y)  # symbolic divisor: the general encoding
    by_const = {b: build(x, b) for b in NONZERO}  # literal divisor: the specialised encodings
    for a, b in itertools.product(range(-8, 9), [v for v in range(-8, 9) if v != 0]):
        want = oracle(a, b)
        assert evaluate(sym, {"x": a, "y": b}) == want, (a, b)
        assert evaluate(by_const[b], {"x": a}) == want, (a, b)
        assert build(T.int_const(a), T.int_const(b)) is T.int_const(want)  # constant folding


def test_division_by_zero_raises_a_specific_error():
    for t in (x // y, x % y, x.div(y), x.mod(y), x.trunc_div(y), x.trunc_mod(y)):
        with pytest.raises(DivisionByZero):
            evaluate(t, {"x": 5, "y": 0})
        assert issubclass(DivisionByZero, Undefined)


def test_definedness_guards_every_division():
    assert T.definedness(x // 8) == []
    assert T.definedness(x.div(y)) == [T.ne(y, 0)]
    guards = T.definedness(x // y + x % (y + 1))
    env_ok = {"x": 3, "y": 2}
    assert satisfies(guards, env_ok)
    assert not satisfies(guards, {"x": 3, "y": 0})
    assert not satisfies(guards, {"x": 3, "y": -1})


def test_definedness_follows_branches_and_short_circuits():
    guarded = T.ite(T.ne(y, 0), x.div(y), 0)
    assert satisfies(T.definedness(guarded), {"x": 1, "y": 0})
    assert evaluate(guarded, {"x": 1, "y": 0}) == 0
    conj = T.and_(T.ne(y, 0), T.gt(x.div(y), 1))
    assert satisfies(T.definedness(conj), {"x": 1, "y": 0})
    assert evaluate(conj, {"x": 1, "y": 0}) is False
    disj = T.or_(T.eq(y, 0), T.gt(x.div(y), 1))
    assert satisfies(T.definedness(disj), {"x": 1, "y": 0})
    assert evaluate(disj, {"x": 1, "y": 0}) is True


def test_definedness_keeps_only_the_weakest_premise_of_each_guard():
    """A division shared by every conjunct of a hypothesis is reached under each prefix of it
    (``h0 => y != 0``, ``h0 ∧ h1 => y != 0``, ...): only the shortest premise stays, the
    longer ones being implied, and the guards still mean exactly what the full list meant."""
    z = T.int_var("z", -8, 8)
    h = [T.gt(x.div(y) + i, z) for i in range(6)]  # each conjunct divides by y
    full = T.implies(T.and_(*h), T.gt(z.div(y + 1), 0))
    guards = T.definedness(full)
    assert guards == [T.ne(y, 0), T.implies(T.and_(*h), T.ne(y + 1, 0))]
    # unrelated premises are both kept: neither implies the other
    branches = T.ite(T.gt(z, 0), x.div(y), T.ite(T.lt(x, 0), z.div(y), 0))
    assert len(T.definedness(branches)) == 2
    for env in itertools.product(SMALL, repeat=3):
        values = dict(zip("xyz", env))
        assert satisfies(T.definedness(branches), values) == (
            values["y"] != 0 or not (values["z"] > 0 or values["x"] < 0))


def test_definedness_does_not_walk_the_paths_of_guard_free_subterms(monkeypatch):
    """A DAG of nested ites reaches its shared leaves by 2^40 paths; only the subterms below a
    division or a bitwise operator are walked with their path conditions, so a guard-free DAG
    costs one pass however many paths it has, and a guard deep inside keeps its conditions."""
    built = []
    conjunction = T.and_

    def counted(*args):
        built.append(None)
        if len(built) >= 100:  # (not an assert: its report would print the terms, 2^40 paths wide)
            raise RuntimeError("definedness builds a path condition per path")
        return conjunction(*args)

    t = x
    for i in range(40):
        t = T.ite(T.gt(t, i), t + 1, t * 2)  # both branches share t
    monkeypatch.setattr(T, "and_", counted)
    assert T.definedness(T.gt(t, 0)) == []
    guarded = T.ite(T.gt(t, 3), x.div(y), 0)
    assert T.definedness(guarded) == [T.implies(conjunction(T.TRUE, T.gt(t, 3)), T.ne(y, 0))]
    assert len(built) == 1  # the one branch condition
    assert satisfies(T.definedness(guarded), {"x": -5, "y": 0})  # the branch is not taken there


@given(any_terms(), environments())
def test_defined_terms_evaluate_without_error(t, env):
    """The guards are exactly what evaluation needs: defined => no Undefined raised (strict)."""
    try:
        defined = satisfies(T.definedness(t), env)
    except Undefined:  # a guard itself mentions an undefined division: the term is too
        return
    if defined:
        evaluate(t, env, strict=True)


# --------------------------------------------------------------------------- integer bitwise


def test_bitwise_width_policy():
    u = T.int_var("u", 0, 100)
    assert (u ^ 5).params == (7, False)  # 100 < 2**7, non-negative: unsigned
    assert (x ^ u).params == (8, True)  # [-8, 100] needs a sign bit
    assert (x & y).params == (5, True)  # [-8, 8]: 8 needs 5 bits with a sign bit
    with pytest.raises(ArgusError, match="unbounded"):
        T.int_var("free") ^ 3
    assert T.int_xor(T.int_var("free"), 3, width=16).params == (16, False)


def test_bitwise_width_holds_bounds():
    for lo, hi in [
        (0, 0),
        (0, 1),
        (0, 255),
        (0, 256),
        (-1, 0),
        (-8, 7),
        (-8, 8),
        (-9, 3),
        (-128, 127),
    ]:
        signed, w = T.bitwise_width((lo, hi), (lo, hi))
        if signed:
            assert -(1 << (w - 1)) <= lo and hi < (1 << (w - 1)), (lo, hi, w)
        else:
            assert 0 <= lo and hi < (1 << w), (lo, hi, w)


@pytest.mark.parametrize("kind", ["xor", "and", "or"])
def test_integer_bitwise_is_python_bitwise_within_bounds(kind):
    a = T.int_var("a", -9, 12)
    b = T.int_var("b", 0, 20)
    t = {"xor": a ^ b, "and": a & b, "or": a | b}[kind]
    t_unsigned = {"xor": b ^ 7, "and": b & 7, "or": b | 7}[kind]
    py = {"xor": int.__xor__, "and": int.__and__, "or": int.__or__}[kind]
    guards = T.definedness(t)
    for va, vb in itertools.product(range(-9, 13), range(0, 21)):
        env = {"a": va, "b": vb}
        assert satisfies(guards, env)
        assert evaluate(t, env, strict=True) == py(va, vb)
        assert evaluate(t_unsigned, env) == py(vb, 7)
        assert evaluate(T.bitwise_encoding(t), env) == py(va, vb)


def test_out_of_range_bitwise_is_flagged():
    t = T.int_xor(T.int_var("free"), 3, width=4)
    assert not satisfies(T.definedness(t), {"free": 16})
    assert evaluate(t, {"free": 16}) == 3  # what the bit-vector encoding computes
    with pytest.raises(BitwiseOutOfRange):
        evaluate(t, {"free": 16}, strict=True)


def test_integer_shifts_are_exact_arithmetic():
    for v in range(-20, 21):
        for k in range(4):
            assert evaluate(x << k, {"x": v}) == v << k
            assert evaluate(x >> k, {"x": v}) == v >> k
    with pytest.raises(ArgusError, match="static"):
        x << y


def test_interval_is_sound():
    t = (x * y - 3) // 2 + abs(x) + (y % 5)
    lo, hi = T.interval(t)
    for vx, vy in itertools.product(range(-8, 9), repeat=2):
        assert lo <= evaluate(t, {"x": vx, "y": vy}) <= hi


def test_domain_constraints_state_bounds():
    f = T.Function("f", (T.INT,), T.INT, bounds=(0, 3))
    cs = T.domain_constraints(x + f(n))
    assert set(cs) == {
        T.le(-8, x),
        T.le(x, 8),
        T.le(1, n),
        T.le(n, 64),
        T.le(0, f(n)),
        T.le(f(n), 3),
    }


# --------------------------------------------------------------------------- evaluation


def test_bitvector_semantics_small_widths_exhaustive():
    """Signed division/remainder at width 3 against SMT-LIB's definitions written over ints."""
    a, b = T.bv_var("a", 3), T.bv_var("b", 3)

    def s(v):
        return v - 8 if v >= 4 else v

    for va, vb in itertools.product(range(8), repeat=2):
        env = {"a": va, "b": vb}
        sa, sb = s(va), s(vb)
        if vb:
            assert evaluate(T.bvsdiv(a, b), env) == c_trunc_div(sa, sb) % 8
            assert evaluate(T.bvsrem(a, b), env) == (sa - sb * c_trunc_div(sa, sb)) % 8
            assert evaluate(T.bvsmod(a, b), env) == (sa % sb) % 8
            assert evaluate(T.bvudiv(a, b), env) == va // vb
        else:
            assert evaluate(T.bvudiv(a, b), env) == 7
            assert evaluate(T.bvurem(a, b), env) == va
        assert evaluate(T.bvashr(a, b), env) == (sa >> min(vb, 2)) % 8
        assert evaluate(T.bvlshr(a, b), env) == (va >> vb if vb < 3 else 0)
        assert evaluate(T.bvshl(a, b), env) == ((va << vb) % 8 if vb < 3 else 0)
        assert evaluate(T.slt(a, b), env) is (sa < sb)
        assert evaluate(T.ult(a, b), env) is (va < vb)
        assert evaluate(T.sign_extend(a, 2), env) == sa % 32
        assert evaluate(T.extract(T.concat(a, b), 4, 2), env) == ((va << 3 | vb) >> 2) & 7


def test_unbound_names_and_function_tables():
    f = T.Function("f", (T.INT,), T.INT)
    with pytest.raises(UnboundName):
        evaluate(x + 1, {})
    with pytest.raises(UnboundName):
        evaluate(f(x), {"x": 1, "f": {(2,): 5}})
    assert evaluate(f(x), {"x": 2, "f": {(2,): 5}}) == 5
    assert evaluate(f(x), {"x": 3, "f": {(2,): 5, None: 9}}) == 9
    assert evaluate(f(x) + 1, {"x": 3, "f": lambda v: v * v}) == 10
    assert evaluate(x, {x: 4}) == 4  # variables may be keyed by term


@given(any_terms(), environments())
def test_every_random_term_evaluates_or_is_undefined(t, env):
    try:
        v = evaluate(t, env)
    except Undefined:
        return
    if t.sort.is_bool:
        assert isinstance(v, bool)
    else:
        assert isinstance(v, int) and not isinstance(v, bool)
        if t.sort.is_bv:
            assert 0 <= v < 2**t.sort.width
        else:
            lo, hi = T.interval(t)
            assert (lo is None or lo <= v) and (hi is None or v <= hi), (str(t), v, lo, hi)


def test_declarations_cover_strategy_vocabulary():
    assert {d.name for d in DECLARATIONS} >= {"x", "y", "z", "p", "q", "b", "c", "f", "g"}


@given(st.integers(-50, 50), st.integers(-50, 50).filter(bool))
def test_constant_folding_agrees_with_evaluation(a, b):
    va, vb = T.int_var("va", -50, 50), T.int_var("vb", -50, 50)
    for build in (T.floordiv, T.floormod, T.div, T.mod, T.trunc_div, T.trunc_mod):
        folded = build(a, b)
        assert folded.is_const
        assert evaluate(build(va, vb), {"va": a, "vb": b}) == folded.value
