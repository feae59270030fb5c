"""Differential testing: the classifier on injected faults, the oracle, generated campaigns."""

from __future__ import annotations

import pytest
import smt_fault_backends as faults

from argus.smt.diff import (
    CATEGORIES,
    Campaign,
    ModelCheck,
    OracleResult,
    check_assertions,
    classify,
    enumerate_query,
    implied_bounds,
)
from argus.smt.generate import generate
from argus.smt.portfolio import Portfolio
from argus.smt.query import Query
from argus.smt.results import SolverRun
from argus.smt.terms import eq, int_var, ne, or_

X = int_var("x", 0, 15)
Y = int_var("y", -3, 3)
SAT = Query.of(eq(X % 4, 3), X > 8, label="sat")  # x in {11, 15}
UNSAT = Query.of(eq(X % 4, 1), eq(X % 2, 0), label="unsat")
DIV0 = Query.of(eq(X.div(Y), 5), eq(Y, 0), label="div0")  # only x div 0 can be 5


def campaign(*solvers: str, **kw) -> Campaign:
    portfolio = Portfolio(solvers, wall_clock_s=kw.pop("wall_clock_s", 5.0)).start()
    return Campaign(portfolio, minimize=False, **kw)


@pytest.fixture(scope="module")
def real():
    c = campaign("z3", "cvc5")
    yield c
    c.portfolio.close()


# --------------------------------------------------------------------------- the oracle


def test_enumeration_decides_small_queries():
    sat = enumerate_query(SAT)
    assert sat.status == "sat" and sat.witness["x"] % 4 == 3 and sat.witness["x"] > 8
    unsat = enumerate_query(UNSAT)
    assert (unsat.status, unsat.points) == ("unsat", 16)
    div0 = enumerate_query(DIV0)
    assert div0.status == "undefined" and div0.undefined_points == 16
    wide = enumerate_query(Query.of(int_var("w", 0, 10**6) > 3))
    assert wide.status == "skipped" and "points" in wide.detail


def test_enumeration_uses_bounds_the_query_asserts():
    z = int_var("z")  # unbounded, as read from a plain SMT-LIB file
    query = Query.of(z >= -2, z < 5, eq(z * z, 9))
    assert implied_bounds(query) == {"z": (-2, 4)}
    result = enumerate_query(query)
    assert result.status == "sat" and result.witness == {"z": 3} and result.points == 6


def test_model_checks():
    assert check_assertions(SAT.terms, {"x": 11}).status == "valid"
    bad = check_assertions(SAT.terms, {"x": 12})
    assert bad.status == "invalid" and "assertion 0" in bad.detail
    assert check_assertions(DIV0.terms, {"x": 3, "y": 0}).status == "undefined"
    # a false assertion beats an undefined one
    assert check_assertions((*DIV0.terms, X > 20), {"x": 3, "y": 0}).status == "invalid"


# --------------------------------------------------------------------------- classify (pure)


def run(solver: str, status: str, reason: str | None = None, seconds: float = 0.01, **kw):
    return SolverRun(solver, status, reason, seconds=seconds, **kw)


def test_classify_table():
    valid, invalid = ModelCheck("valid"), ModelCheck("invalid", "assertion 0 is false")
    undefined = ModelCheck("undefined", "x div 0")
    sat, unsat = OracleResult("sat", 3, {"x": 1}), OracleResult("unsat", 16)
    cases = [
        ({"a": run("a", "sat"), "b": run("b", "sat")}, {"a": valid, "b": valid}, sat, "agree", ()),
        ({"a": run("a", "unsat"), "b": run("b", "sat")}, {"b": valid}, None, "soundness", ("a",)),
        ({"a": run("a", "unsat"), "b": run("b", "unsat")}, {}, sat, "soundness", ("a", "b")),
        ({"a": run("a", "sat"), "b": run("b", "unsat")}, {"a": invalid}, unsat, "invalid_model", ("a",)),
        ({"a": run("a", "sat"), "b": run("b", "unsat")}, {"a": undefined}, None, "underspecified", ()),
        ({"a": run("a", "unknown", "crash"), "b": run("b", "sat")}, {"b": valid}, None, "crash", ("a",)),
        ({"a": run("a", "unknown", "resource_limit"), "b": run("b", "unsat")}, {}, unsat, "unknown_vs_answer", ()),
        ({"a": run("a", "unknown", "timeout"), "b": run("b", "unknown", "unknown")}, {}, None, "both_unknown", ()),
        ({"a": run("a", "unsat", seconds=0.9), "b": run("b", "unsat", seconds=0.01)}, {}, unsat, "performance_gap", ("a",)),
        ({"a": run("a", "unsat", seconds=0.02), "b": run("b", "unsat", seconds=0.001)}, {}, unsat, "agree", ()),
        ({"a": run("a", "sat"), "b": run("b", "sat")}, {"a": valid, "b": valid}, unsat, "internal", ()),
        ({"a": run("a", "unknown", "error"), "b": run("b", "sat")}, {"b": valid}, None, "error", ()),
    ]  # fmt: skip
    for runs, checks, oracle, category, wrong in cases:
        got = classify(runs, checks, oracle)
        assert (got.category, got.wrong) == (category, wrong), (runs, got)
        assert got.category in CATEGORIES
        assert got.detail or category == "agree"


# --------------------------------------------------------------------------- injected faults


def test_real_solvers_agree_with_the_oracle(real):
    for query, truth in ((SAT, "sat"), (UNSAT, "unsat")):
        outcome = real.examine(query)
        assert outcome.category == "agree" and outcome.classification.truth == truth
        assert outcome.oracle.status == truth


def test_division_by_zero_alone_is_not_a_disagreement(real):
    outcome = real.examine(DIV0)  # both sat: their models need a value for x div 0
    assert outcome.category == "agree"
    assert set(outcome.checks.values()) == {ModelCheck("undefined", outcome.checks["z3"].detail)}


def test_division_by_zero_dependent_verdicts_are_underspecified():
    name = faults.register("z3-div0-is-0", "div0_is_zero")
    c = campaign(name, "cvc5")
    try:
        outcome = c.examine(DIV0)
        assert outcome.runs[name].status == "unsat" and outcome.runs["cvc5"].status == "sat"
        assert outcome.category == "underspecified" and outcome.classification.wrong == ()
        assert "division by zero" in outcome.classification.detail
        assert c.examine(SAT).category == "agree"  # same semantics away from zero
    finally:
        c.portfolio.close()


@pytest.mark.parametrize(
    ("fault", "query", "category"),
    [
        ("wrong_verdict", SAT, "soundness"),
        ("invalid_model", SAT, "invalid_model"),
        ("crash", SAT, "crash"),
        ("slow", UNSAT, "performance_gap"),
    ],
)
def test_each_injected_fault_is_classified(fault, query, category):
    name = faults.register(f"z3-{fault}", fault, delay_s=0.4)
    c = campaign(name, "cvc5")
    try:
        outcome = c.examine(query)
        assert outcome.category == category, outcome.classification
        assert outcome.classification.wrong == (name,)
        if category == "soundness":
            assert outcome.classification.truth == "sat"
        # the honest solver and the oracle agree on the truth
        assert outcome.oracle.status == ("sat" if query is SAT else "unsat")
    finally:
        c.portfolio.close()


def test_wrong_unsat_caught_by_enumeration_alone():
    # both solvers lie; only the oracle knows better
    wrong_a = faults.register("z3-liar", "wrong_verdict")
    wrong_b = faults.register("cvc5-liar", "wrong_verdict", inner="cvc5")
    c = campaign(wrong_a, wrong_b)
    try:
        outcome = c.examine(SAT)
        assert outcome.category == "soundness"
        assert outcome.classification.wrong == ("cvc5-liar", "z3-liar")
        assert "enumeration" in outcome.classification.detail
    finally:
        c.portfolio.close()


def test_hung_solver_is_unknown_vs_answer():
    name = faults.register("z3-hang", "hang")
    c = campaign(name, "cvc5", wall_clock_s=0.5)
    try:
        outcome = c.examine(SAT)
        assert outcome.category == "unknown_vs_answer"
        assert outcome.runs[name].reason == "timeout"
        assert c.examine(UNSAT).category == "unknown_vs_answer"  # the worker was restarted
    finally:
        c.portfolio.close()


# --------------------------------------------------------------------------- campaigns

#: not a disagreement between the solvers and the oracle
ACCEPTED = {"agree", "performance_gap", "underspecified", "unknown_vs_answer", "both_unknown"}


def _campaign_is_consistent(count: int, seed: int) -> None:
    # resource limits (a fraction of a second of work), not the wall clock, stop hard queries
    with Portfolio(rlimit={"z3": 500_000, "cvc5": 30_000}, wall_clock_s=20.0) as p:
        report = Campaign(p, minimize=False).run(generate(count, seed), seed=seed)
    counts = report.counts()
    assert sum(counts.values()) == count and counts["both_unknown"] <= count // 100
    unexplained = [o for o in report.outcomes if o.category not in ACCEPTED]
    assert not unexplained, [(o.id, o.category, o.classification.detail) for o in unexplained]
    decided = [o for o in report.outcomes if o.oracle.status in ("sat", "unsat")]
    assert len(decided) >= 0.85 * count  # the oracle is independent for most queries
    for o in decided:
        for run in o.runs.values():
            if run.reason is None:  # every answer matches the enumeration
                assert run.status == o.oracle.status, (o.id, run)
    for o in report.outcomes:
        if o.category != "agree":
            assert o.classification.detail


def test_generated_campaign_agrees_with_enumeration():
    _campaign_is_consistent(150, seed=11)


@pytest.mark.slow
def test_long_generated_campaign():
    # the default run has 1000 queries in test_generate.py; this is the long soak
    _campaign_is_consistent(3000, seed=2027)


def test_unreadable_query_is_reported_not_fatal(real):
    report = real.run([("broken.smt2", ValueError("bad token")), ("ok", SAT)])
    assert [o.category for o in report.outcomes] == ["error", "agree"]
    assert "bad token" in report.outcomes[0].classification.detail
    data = report.to_json()
    assert data["counts"]["error"] == 1 and data["findings"] == 0


def test_or_of_guards_is_not_flagged(real):
    # ite/or short-circuits: x div y is only evaluated where y != 0
    guarded = Query.of(or_(eq(Y, 0), eq(X.div(Y), 2)), ne(Y, 0))
    assert real.examine(guarded).category == "agree"
