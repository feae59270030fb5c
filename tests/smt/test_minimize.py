"""Delta debugging: ddmin over assertions, subterm shrinking, planted disagreements."""

from __future__ import annotations

import smt_fault_backends as faults

from argus.smt.diff import Campaign
from argus.smt.minimize import minimize, query_size
from argus.smt.portfolio import Portfolio
from argus.smt.query import Query
from argus.smt.smtlib import read_query
from argus.smt.terms import eq, int_var, ite, ne, subterms

T = int_var("tid", 0, 63)
K = int_var("k", -4, 4)
N = int_var("n", 1, 8)


def test_ddmin_keeps_exactly_the_needed_assertions():
    needed = [eq(T % 8, 3), K > 1]
    noise = [T < 60, N > 2, ne(K, 3), eq(N % 2, 0), T > 4, K < 4]
    query = Query.of(*noise[:3], needed[0], *noise[3:], needed[1])
    calls = []

    def predicate(q: Query) -> bool:
        calls.append(q)
        return all(t in q.terms for t in needed)

    result = minimize(query, predicate)
    assert set(result.query.terms) == set(needed)
    assert result.tests == len(calls) <= 40
    assert result.size_after < result.size_before and not result.exhausted


def test_subterms_shrink_to_what_the_predicate_needs():
    big = ite(K > 0, (T * 4 + K) // 8, (T ^ 5) % 7) + N * 3
    query = Query.of(eq(big, 11), T < N * 8)

    def has_mod_of_tid(q: Query) -> bool:
        return any(s.op == "mod" and T in set(subterms(s)) for s in subterms(*q.terms))

    result = minimize(query, has_mod_of_tid)
    assert has_mod_of_tid(result.query)
    assert query_size(result.query) <= 6 < query_size(query)


def test_budget_is_respected():
    query = Query.of(*(eq(T % m, 1) for m in range(2, 12)))

    def predicate(q: Query) -> bool:
        return sum(1 for t in subterms(*q.terms) if t.op == "mod") >= 4

    result = minimize(query, predicate, max_tests=3)
    assert result.tests == 3 and result.exhausted
    assert predicate(result.query)


def test_planted_disagreement_shrinks_to_a_small_reproducer(tmp_path):
    liar = faults.register("z3-lies-on-bad", "wrong_verdict", trigger="bad")
    bad = int_var("bad", 0, 15)
    query = Query.of(
        T < 60,
        eq(T % 4, 1),
        ne(K, 2),
        eq((T * 2 + K) // 3 + N, bad + 5),
        N * K < 12,
        ite(K > 0, T // N, T % N) < 40,
        bad > 2,
        label="planted",
    )
    with Portfolio([liar, "cvc5"], wall_clock_s=5.0) as p:
        campaign = Campaign(p, out_dir=str(tmp_path), minimize_tests=150)
        report = campaign.run([("planted", query)])
    outcome = report.outcomes[0]
    assert outcome.category == "soundness" and outcome.classification.wrong == (liar,)
    before, after, tests = outcome.minimized
    assert before == query_size(query) and after <= 4 and tests <= 150
    assert outcome.reproduces is True
    text = (tmp_path / "planted-soundness.smt2").read_text()
    assert outcome.reproducer == str(tmp_path / "planted-soundness.smt2")
    header = [line for line in text.splitlines() if line.startswith(";")]
    assert any("category: soundness (wrong: z3-lies-on-bad)" in line for line in header)
    assert any(line.startswith("; solver: cvc5 1.") for line in header)
    z3_line = next(line for line in header if line.startswith("; solver: z3-lies-on-bad "))
    assert "rlimit" in z3_line and "options defaults" in z3_line
    small = read_query(text)
    assert "bad" in small.variables() and len(small.terms) == 1
    assert text.count("(assert") <= 4  # the bounds of `bad` and one assertion
