"""Compiled evaluation (a term evaluated again runs as a Python function) answers exactly what
the term evaluator answers: the same value of the same type, or the same error."""

import importlib
import random

from argus.smt import terms as T
from argus.smt.evaluate import EvaluationError, _Evaluator

E = importlib.import_module("argus.smt.evaluate")

XS = [T.int_var(f"x{i}", -5, 20) for i in range(3)]
BS = [T.bool_var(f"b{i}") for i in range(2)]


def _int(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([*XS, T.int_const(rng.randint(-4, 9))])
    kind = rng.choice(["+", "*", "-", "div", "mod", "ite", "neg", "abs"])
    if kind == "ite":
        return T.ite(_bool(rng, depth - 1), _int(rng, depth - 1), _int(rng, depth - 1))
    if kind in ("neg", "abs"):
        return (T.neg if kind == "neg" else T.abs_)(_int(rng, depth - 1))
    make = {"+": T.add, "*": T.mul, "-": T.sub, "div": T.div, "mod": T.mod}[kind]
    return make(_int(rng, depth - 1), _int(rng, depth - 1))


def _bool(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(BS)
    kind = rng.choice(["<", "<=", "=", "and", "or", "not", "=>", "xor", "ite"])
    if kind in ("<", "<=", "="):
        return {"<": T.lt, "<=": T.le, "=": T.eq}[kind](_int(rng, depth - 1), _int(rng, depth - 1))
    if kind == "not":
        return T.not_(_bool(rng, depth - 1))
    if kind == "ite":
        return T.ite(_bool(rng, depth - 1), _bool(rng, depth - 1), _bool(rng, depth - 1))
    make = {"and": T.and_, "or": T.or_, "=>": T.implies, "xor": T.xor_}[kind]
    return make(_bool(rng, depth - 1), _bool(rng, depth - 1))


def _answer(thunk):
    try:
        value = thunk()
        return ("value", type(value), value)
    except EvaluationError as err:
        return ("error", type(err), None)


def test_compiled_terms_agree_with_the_evaluator():
    rng = random.Random(7)
    compiled = 0
    for i in range(600):
        term = _int(rng, 4) if i % 2 else _bool(rng, 4)
        for _ in range(3):
            env = {f"x{k}": rng.randint(-5, 20) for k in range(3)}
            env.update({f"b{k}": rng.random() < 0.5 for k in range(2)})
            if rng.random() < 0.1:
                del env["x0"]  # a missing variable: an error either way
            if rng.random() < 0.05:
                env["b0"] = 1  # a value of the wrong type: the evaluator's error
            expected = _answer(lambda: _Evaluator(env, False).value(term))  # noqa: B023
            assert _answer(lambda: E.evaluate(term, env)) == expected  # noqa: B023
            assert _answer(lambda: E.evaluate(term, env)) == expected  # noqa: B023
        compiled += E._COMPILED.get(term) is not None
    assert compiled > 100  # the second evaluation of most terms ran compiled
