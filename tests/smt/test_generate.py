"""The query generator: deterministic, small domains, the index-arithmetic family; and a
thousand generated queries on which Z3, cvc5 and enumeration agree."""

from __future__ import annotations

import collections
import math

from argus.smt.diff import Campaign, enumerate_query
from argus.smt.generate import generate, generate_query
from argus.smt.portfolio import Portfolio
from argus.smt.smtlib import query_to_smtlib, read_query
from argus.smt.terms import subterms


def test_generation_is_deterministic_and_index_addressable():
    first = [query_to_smtlib(q) for _, q in generate(40, seed=5)]
    again = [query_to_smtlib(q) for _, q in generate(40, seed=5)]
    assert first == again
    assert query_to_smtlib(generate_query(5, 17)) == first[17]
    other = [query_to_smtlib(q) for _, q in generate(40, seed=6)]
    assert sum(a != b for a, b in zip(first, other)) >= 35
    assert [i for i, _ in generate(3, seed=5)] == ["gen-5-0", "gen-5-1", "gen-5-2"]


def test_domains_are_small_and_bounded():
    for _, query in generate(200, seed=1):
        variables = query.variables()
        assert 1 <= len(variables) <= 3 and not query.functions()
        points = math.prod(v.bounds[1] - v.bounds[0] + 1 for v in variables.values())
        assert points <= 512
        assert all(not t.is_const for t in query.terms)


def test_the_index_arithmetic_family_is_covered():
    ops: collections.Counter[str] = collections.Counter()
    logics: collections.Counter[str] = collections.Counter()
    for _, query in generate(300, seed=2):
        logics[query.logic] += 1
        for t in subterms(*query.terms):
            ops[t.op] += 1
            if t.op == "*" and sum(not a.is_const for a in t.args) > 1:
                ops["symbolic product"] += 1
            if t.op in ("div", "mod") and not t.args[1].is_const:
                ops["symbolic divisor"] += 1
    for op in ("div", "mod", "int_xor", "int_and", "ite", "*", "+", "symbolic product",
               "symbolic divisor", "not", "or"):  # fmt: skip
        assert ops[op] >= 10, (op, ops)
    assert logics["QF_LIA"] >= 50 and logics["QF_NIA"] >= 30


def test_a_mix_of_sat_and_unsat_queries():
    statuses = collections.Counter(enumerate_query(q).status for _, q in generate(200, seed=3))
    assert statuses["sat"] >= 40 and statuses["unsat"] >= 60
    assert statuses["skipped"] == 0
    assert statuses["undefined"] >= 1  # some verdicts hinge on division by zero


def test_queries_survive_the_smtlib_round_trip():
    for _, query in generate(50, seed=4):
        back = read_query(query_to_smtlib(query))
        # an assertion that repeats a bound is folded into the domain by the reader
        assert {*back.domain, *back.terms} == {*query.domain, *query.terms}
        assert back.logic == query.logic


#: a fraction of a second of work per check: far above what nearly all of these queries
#: need, far below the wall clock
RLIMITS = {"z3": 500_000, "cvc5": 30_000}
#: categories that are not a disagreement between the solvers and the oracle
EXPLAINED = {"agree", "performance_gap", "underspecified", "unknown_vs_answer", "both_unknown"}


def test_a_thousand_generated_queries_agree_with_enumeration():
    """Z3, cvc5 and exhaustive enumeration agree, or each difference is explained."""
    # Resource limits, not the wall clock, stop the rare hard query, so the outcome does not
    # depend on how loaded the machine is; warm contexts, since this checks agreement.
    with Portfolio(rlimit=RLIMITS, wall_clock_s=20.0, isolated=False) as p:
        report = Campaign(p, minimize=False).run(generate(1000, seed=2026), seed=2026)
    unexplained = [o for o in report.outcomes if o.category not in EXPLAINED]
    assert not unexplained, [(o.id, o.category, o.classification.detail) for o in unexplained]
    counts = report.counts()
    assert counts["agree"] >= 950 and counts["both_unknown"] <= 10, counts
    assert not any(run.reason == "timeout" for o in report.outcomes for run in o.runs.values())
    decided = [o for o in report.outcomes if o.oracle.status in ("sat", "unsat")]
    assert len(decided) >= 850
    for o in decided:
        for run in o.runs.values():
            if run.reason is None:
                assert run.status == o.oracle.status, (o.id, run)
