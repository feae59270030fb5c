"""SMT-LIB printer and reader: round trips, benchmark syntax, and stock solvers reading the text."""

from __future__ import annotations

import cvc5
import pytest
import z3
from hypothesis import given, settings
from smt_strategies import DECLARATIONS, any_terms, bool_terms

from argus.smt import terms as T
from argus.smt.query import Query
from argus.smt.session import solve
from argus.smt.smtlib import (
    Command,
    SmtlibError,
    parse_script,
    parse_term,
    query_to_smtlib,
    read_query,
    script_to_smtlib,
    term_to_smtlib,
)

x = T.int_var("x", -8, 8)
y = T.int_var("y", 0, 15)
b = T.bv_var("b", 4)
f = T.Function("f", (T.INT,), T.INT, bounds=(0, 7))


@given(any_terms(max_leaves=30))
def test_print_read_round_trip_is_identity(t):
    text = term_to_smtlib(t)
    assert parse_term(text, DECLARATIONS) is t, text


@settings(max_examples=30)
@given(bool_terms(max_leaves=8), bool_terms(max_leaves=8))
def test_query_round_trip_is_identity(a, c):
    query = Query.of(a, named={"second": c, "third: odd name": T.not_(a)}, label="round trip")
    text = query_to_smtlib(query, model=True, core=True)
    assert read_query(text, label="round trip") == query


def test_names_that_cannot_be_quoted_are_rejected():
    with pytest.raises(T.TermError):
        Query.of(named={"a|b": x > 0})


def test_query_text_shape():
    query = Query.of(T.eq(f(x) + y, 3), named={"goal": T.ne(x // 2, -3)}, label="demo\nsecond line")
    text = query_to_smtlib(query, model=True)
    lines = text.splitlines()
    assert lines[:2] == ["; demo", "; second line"]
    assert "(set-option :produce-models true)" in lines
    assert "(set-logic QF_UFLIA)" in lines
    assert "(declare-fun f (Int) Int)" in lines
    assert "; argus:bounds x -8 8" in lines and "(declare-const x Int)" in lines
    assert "(assert (<= (- 8) x))" in lines
    assert "(assert (! (not (= (div x 2) (- 3))) :named goal))" in lines
    assert lines[-2:] == ["(check-sat)", "(get-model)"]


def test_script_round_trip_with_incremental_commands():
    commands = [
        Command("set-option", ("produce-unsat-cores", "true")),
        Command("set-logic", ("QF_LIA",)),
        Command("declare", (x,)),
        Command("assert", (x > 2, None)),
        Command("push", (1,)),
        Command("assert", (x < 1, "low")),
        Command("check-sat-assuming", (T.eq(x, 3),)),
        Command("get-unsat-core"),
        Command("pop", (1,)),
        Command("check-sat"),
        Command("get-value", (x, x + 1)),
        Command("exit"),
    ]
    text = script_to_smtlib(commands)
    assert parse_script(text) == commands


def test_reader_accepts_benchmark_syntax():
    text = """
    ; a comment (with parentheses)
    (set-info :status sat)
    (set-logic ALL)
    (declare-fun a () Int)
    (declare-const v (_ BitVec 8))
    (declare-fun g (Int Bool) (_ BitVec 8))
    (define-fun two () Int 2)
    (define-fun twice ((k Int)) Int (* two k))
    (assert (let ((s (+ a 1)) (t a)) (and (< t s 10) (=> (> s 0) (> t (- 1)) true))))
    (assert (! (= (bvadd v #b00000001 (_ bv2 8)) #xff) :named bv_sum))
    (assert (distinct (twice a) (abs a) 7))
    (assert (xor (= (g a false) v) (bvult v (bvnot v))))
    (assert (= (ubv_to_int ((_ int_to_bv 8) a)) (mod a 256)))
    (check-sat)
    """
    commands = parse_script(text)
    names = [c.name for c in commands]
    assert names == [
        "set-info",
        "set-logic",
        "declare",
        "declare",
        "declare",
        "assert",
        "assert",
        "assert",
        "assert",
        "assert",
        "check-sat",
    ]
    v = T.bv_var("v", 8)
    assert commands[6].args[1] == "bv_sum"
    assert (
        str(commands[5].args[0])
        == "(and (and (< a (+ a 1)) (< (+ a 1) 10)) (=> (> (+ a 1) 0) (=> (> a (- 1)) true)))"
    )
    assert commands[6].args[0] is T.app(
        "=", T.bvadd(T.bvadd(v, T.bv_const(1, 8)), T.bv_const(2, 8)), T.bv_const(255, 8)
    )
    assert str(commands[7].args[0]) == "(distinct (* 2 a) (abs a) 7)"
    query = read_query(text)
    assert query.logic == "ALL"
    for solver in ("z3", "cvc5"):
        answer = solve(query, solver)
        assert answer.status == "sat"


def test_reader_errors_name_the_line():
    with pytest.raises(SmtlibError, match="line 2: undeclared symbol 'q'"):
        parse_script("(declare-const p Bool)\n(assert (and p q))")
    with pytest.raises(SmtlibError, match="unbalanced"):
        parse_script("(assert true")
    with pytest.raises(SmtlibError, match="unsupported sort"):
        parse_script("(declare-const r Real)")
    with pytest.raises(SmtlibError, match="ill-sorted"):
        parse_script("(declare-const p Bool)(assert (+ p 1))")


def _stock_z3(text: str) -> str:
    solver = z3.Solver()
    solver.from_string(text)
    return str(solver.check())


def _stock_cvc5(text: str) -> str:
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "argus")
    out = []
    while True:
        command = parser.nextCommand()
        if command.isNull():
            break
        out.append(command.invoke(solver, symbols).strip())
    return next(o for o in out if o in ("sat", "unsat", "unknown"))


QUERIES = [
    Query.of(T.eq(x * y, 12), x > 0),
    Query.of(T.eq(x // 3 + y % 4, 5), named={"g": x < 0}),
    Query.of(T.eq(x ^ y, 7), T.eq(x & 3, 1)),
    Query.of(T.eq(f(x), f(y) + 1), T.eq(x, y)),
    Query.of(T.eq(T.bvmul(b, b), T.bv_const(9, 4)), T.ne(b, 3)),
    Query.of(T.eq(x.trunc_div(y + 1), -2)),
]


@pytest.mark.parametrize("query", QUERIES, ids=[q.logic + str(i) for i, q in enumerate(QUERIES)])
def test_stock_solvers_read_printed_queries_and_agree(query):
    text = query_to_smtlib(query)
    expected = solve(query, "z3").status
    assert _stock_z3(text) == expected
    assert _stock_cvc5(text) == expected


def _chain(levels: int, a: T.Term = x, b: T.Term = y) -> T.Term:
    """A term whose DAG has ~3 nodes per level and whose tree has ~3**levels."""
    t = a
    for i in range(levels):
        t = T.ite(t > b + i, t - 1, t + 2)
    return t


def test_shared_subterms_are_written_once():
    deep = _chain(40)
    query = Query.of(T.eq(deep, 5), named={"goal": deep > x})
    text = query_to_smtlib(query, model=True)
    assert len(text) < 20_000, len(text)  # the unfolded tree would be ~3**40 nodes
    assert text.count("(define-fun |argus:s") >= 40
    assert read_query(text) == query
    assert _stock_z3(text) == _stock_cvc5(text) == solve(query, "z3").status
    # without sharing a term is a function of itself alone: a small query prints as its tree
    small = Query.of(T.eq(x + y, (x + y) * 2))
    plain = query_to_smtlib(small, share=False)
    assert "define-fun" not in plain and plain.count("(+ x y)") == 2
    assert read_query(plain) == small


def test_definitions_inside_a_push_are_written_again_after_the_pop():
    u, v = T.int_var("u"), T.int_var("v")  # unbounded: the script asserts no domain
    deep = _chain(6, u, v * 7)
    commands = [
        Command("set-logic", ("QF_LIA",)),
        Command("declare", (u,)),
        Command("declare", (v,)),
        Command("push", (1,)),
        Command("assert", (T.eq(deep, 3), None)),
        Command("assert", (T.eq(u, 0), None)),
        Command("check-sat"),
        Command("pop", (1,)),
        Command("assert", (T.eq(deep, 4), None)),
        Command("check-sat"),
    ]
    text = script_to_smtlib(commands)
    before, after = text.split("(pop 1)")
    assert "define-fun" in before and "define-fun" in after  # the pop removed the first ones
    assert parse_script(text) == commands
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("incremental", "true")
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "argus")
    answers = []
    while not (command := parser.nextCommand()).isNull():
        out = command.invoke(solver, symbols).strip()
        assert "error" not in out, out
        answers += [out] if out in ("sat", "unsat", "unknown") else []
    assert answers == [
        solve(Query.of(T.eq(deep, 3), T.eq(u, 0)), "z3").status,
        solve(Query.of(T.eq(deep, 4)), "z3").status,
    ]
    assert answers[0] != answers[1]  # the scopes differ in what they decide
