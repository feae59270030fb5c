"""Incremental sessions: scopes, bounds, cores, assumptions, resource limits, validity VCs."""

from __future__ import annotations

import pytest

from argus.errors import ArgusError
from argus.smt import terms as T
from argus.smt.evaluate import satisfies
from argus.smt.query import Query, validity_queries
from argus.smt.session import Session, solve

SOLVERS = ("z3", "cvc5")
solvers = pytest.mark.parametrize("solver", SOLVERS)

x = T.int_var("x", -100, 100)
y = T.int_var("y", -100, 100)


def hard_query() -> Query:
    """Factor a 150-bit semiprime (two Mersenne primes): far beyond any small budget."""
    n = (2**61 - 1) * (2**89 - 1)
    p = T.int_var("p", 2, n)
    q = T.int_var("q", 2, n)
    return Query.of(T.eq(p * q, n), p <= q)


@solvers
def test_push_pop_scopes(solver):
    with Session(solver) as s:
        s.add(x > 5)
        assert s.check().status == "sat"
        s.push()
        s.add(x < 3)
        assert s.level == 1
        assert s.check().status == "unsat"
        s.push()
        s.push()
        assert s.level == 3
        s.pop(3)
        assert s.level == 0
        answer = s.check()
        assert answer.status == "sat" and answer.model["x"] > 5
        with pytest.raises(ArgusError):
            s.pop()


@solvers
def test_bounds_are_asserted_and_scoped(solver):
    v = T.int_var("v", 0, 3)
    with Session(solver) as s:
        s.push()
        s.add(T.le(v, 100))
        assert s.check().model["v"] in range(4)
        s.pop()
        s.add(v > 3)  # v reappears after its scope was popped: its bounds come back with it
        assert s.check().status == "unsat"


@solvers
def test_unsat_cores_name_the_right_assertions(solver):
    with Session(solver) as s:
        s.add(x > 5, name="big")
        s.add(y > 0, name="positive y")
        s.add(x < 3, name="small")
        s.add(T.eq(x + y, 7))
        answer = s.check(core=True)
        assert answer.status == "unsat"
        assert set(answer.core) == {"big", "small"}


@solvers
def test_assumptions_hold_for_one_check_and_appear_in_cores(solver):
    with Session(solver) as s:
        s.add(x < 3, name="small")
        s.add(y > 0, name="positive y")
        answer = s.check({"huge": x > 50}, core=True)
        assert answer.status == "unsat" and set(answer.core) == {"huge", "small"}
        assert s.check().status == "sat"  # the assumption is gone
        answer = s.check([(T.eq(x, 2), "two"), T.eq(y, 9)])
        assert answer.status == "sat" and answer.model["x"] == 2 and answer.model["y"] == 9
        assert s.level == 0


@solvers
def test_one_formula_may_carry_two_names(solver):
    with Session(solver) as s:
        s.add(x > 5, name="first")
        s.add(x > 5, name="second")
        s.add(x < 0, name="negative")
        core = set(s.check(core=True).core)
        assert "negative" in core and core & {"first", "second"}


@solvers
def test_models_satisfy_every_assertion(solver):
    f = T.Function("f", (T.INT,), T.INT, bounds=(0, 9))
    assertions = [T.eq(f(x) + f(y), 15), T.ne(x, y), T.eq(x % 7, 3), (x ^ 5) > 60]
    with Session(solver) as s:
        for a in assertions:
            s.add(a)
        answer = s.check()
        assert answer.status == "sat"
        assert satisfies(assertions + T.domain_constraints(*assertions), answer.model)


@solvers
def test_resource_limit_gives_unknown_not_a_hang(solver):
    query = hard_query()
    answer = solve(query, solver, rlimit=20_000, timeout_s=30)
    assert answer.status == "unknown"
    assert answer.reason == "resource_limit", answer.message
    assert answer.rlimit == 20_000
    assert answer.resources is not None and answer.resources > 0
    assert answer.seconds < 30


@solvers
def test_limits_vary_per_check_in_one_session(solver):
    """A limited check then an unlimited one in the same session; cvc5 rebuilds its solver
    and must keep the assertion stack (scopes included)."""
    with Session(solver) as s:
        s.add(x > 5, name="big")
        s.push()
        s.add_query(hard_query())
        assert s.check(rlimit=20_000).reason == "resource_limit"
        s.add(x < 3, name="small")
        answer = s.check(rlimit=0, core=True)
        assert answer.status == "unsat" and set(answer.core) == {"big", "small"}
        s.pop()
        answer = s.check(rlimit=5_000_000)
        assert answer.status == "sat" and answer.rlimit == 5_000_000
        assert answer.resources is not None and not answer.statistics  # opt-in
        assert s.check(statistics=True).statistics


@solvers
def test_wall_clock_timeout_is_reported_as_timeout(solver):
    answer = solve(hard_query(), solver, timeout_s=0.3)
    assert answer.status == "unknown"
    assert answer.reason == "timeout", answer.message


def test_z3_wall_clock_is_an_interrupt_that_leaves_the_search_alone():
    """z3 keeps the wall clock by an alarm thread that interrupts the context; its own
    ``timeout`` parameter (which changes the search) stays unset, and the alarm is gone
    after a check that ended before it."""
    import threading

    with Session("z3", timeout_s=0.3) as s:
        s.add_query(hard_query())
        answer = s.check()
        assert (answer.status, answer.reason) == ("unknown", "timeout")
        assert "0.3 s" in answer.message
    with Session("z3", timeout_s=60.0) as s:
        s.add(x > 5)
        assert s.check().status == "sat"
    assert not [t for t in threading.enumerate() if t.name == "argus-z3-alarm"]
    # the same check uses the same resource units with and without a wall clock
    used = []
    for timeout_s in (0.0, 120.0):
        with Session("z3", timeout_s=timeout_s) as s:
            s.add_query(hard_query())
            used.append(s.check(rlimit=200_000).resources)
    assert used[0] == used[1]


@solvers
def test_validity_queries_prove_goal_and_definedness(solver):
    goal = T.eq(x // 8 * 8 + x % 8, x)
    goal_q, defined_q = validity_queries([], goal)
    assert solve(goal_q, solver).status == "unsat"
    assert solve(defined_q, solver).status == "unsat"  # literal divisor: always defined

    goal = T.eq(x // y * y + x % y, x)
    goal_q, defined_q = validity_queries({"y positive": y > 0}, goal)
    assert solve(goal_q, solver).status == "unsat"
    assert solve(defined_q, solver).status == "unsat"

    goal_q, defined_q = validity_queries([x > 0], goal)  # y may be 0
    assert solve(goal_q, solver).status == "unsat"
    refuted = solve(defined_q, solver)
    assert refuted.status == "sat" and refuted.model["y"] == 0


@solvers
def test_session_declares_and_reports_version(solver):
    with Session(solver, logic="QF_LIA") as s:
        s.declare(x)
        assert s.check().status == "sat"
        assert s.version


def test_unknown_solver_is_rejected():
    with pytest.raises(ArgusError, match="unknown solver"):
        Session("yices")
