"""The portfolio: verdicts, checked models, definedness, limits, crashes, sessions."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import smt_fault_backends as faults

from argus.errors import ArgusError
from argus.smt.evaluate import evaluate
from argus.smt.portfolio import Portfolio
from argus.smt.query import Query
from argus.smt.results import Proved, Refuted, Unknown
from argus.smt.terms import and_, eq, int_var, ite, ne

IDX = int_var("i", 0, 127)
N = int_var("n", 1, 128)
K = int_var("k", -8, 8)
A, B, C = int_var("a", 1, None), int_var("b", 1, None), int_var("c", 1, None)
FERMAT = eq(A * A * A + B * B * B, C * C * C)  # no solver decides it quickly


@pytest.fixture(scope="module")
def portfolio():
    with Portfolio(wall_clock_s=10.0) as p:
        yield p


def test_proved_with_core(portfolio):
    result = portfolio.prove(
        {"in_range": IDX < N, "small": N <= 64, "unused": K > 0}, IDX < 64, core=True
    )
    assert isinstance(result, Proved) and result
    assert result.solver in ("z3", "cvc5")
    assert {"in_range", "small", "goal"} <= set(result.core) and "unused" not in result.core
    assert result.resources is not None


def test_refuted_model_is_checked_python_values(portfolio):
    result = portfolio.prove({"in_range": IDX < N}, (IDX * 4 + 3) // 4 < 100)
    assert isinstance(result, Refuted) and not result
    assert result.violation == "goal"
    model = result.model
    assert all(isinstance(v, int) for v in model.values())
    assert model["i"] < model["n"] and (model["i"] * 4 + 3) // 4 >= 100


def test_division_that_may_be_by_zero_is_not_proved(portfolio):
    # i // k < 200 holds for every k != 0; k == 0 must be reported, not proved
    result = portfolio.prove([IDX < N], IDX // K < 200)
    assert isinstance(result, Refuted) and result.violation == "definedness"
    assert result.model["k"] == 0
    guarded = portfolio.prove([IDX < N], ite(ne(K, 0), IDX // K, 0) < 200)
    assert isinstance(guarded, Proved)
    assert isinstance(portfolio.prove([ne(K, 0)], IDX // K < 200), Proved)


def test_check_sat(portfolio):
    sat = portfolio.check_sat([eq(IDX % 7, 3), IDX > 50])
    assert isinstance(sat, Refuted) and sat.model["i"] % 7 == 3 and sat.model["i"] > 50
    unsat = portfolio.check_sat([eq(IDX % 4, 1), eq(IDX % 2, 0)])
    assert isinstance(unsat, Proved)
    # with the definedness guards, a model never divides by zero
    guarded = portfolio.check_sat([eq(IDX // K, 3)])
    assert isinstance(guarded, Refuted) and guarded.model["k"] != 0


def test_timeout_is_unknown_within_the_limit_plus_one_second():
    with Portfolio(rlimit=0, wall_clock_s=1.0) as p:
        started = time.monotonic()
        result = p.check_query(Query.of(FERMAT))
        elapsed = time.monotonic() - started
    assert isinstance(result, Unknown) and not result
    assert result.reasons == {"z3": "timeout", "cvc5": "timeout"} and result.timed_out
    assert elapsed < 2.0


def test_hung_solver_is_killed_and_restarted():
    name = faults.register("z3-hangs", "hang", trigger="a")
    with Portfolio([name], wall_clock_s=0.5, grace_s=0.3) as p:
        started = time.monotonic()
        result = p.check_query(Query.of(FERMAT))
        assert time.monotonic() - started < 1.5
        assert isinstance(result, Unknown) and result.reasons == {name: "timeout"}
        assert "killed" in result.runs[0].message
        assert isinstance(p.prove([IDX < N], IDX < 128), Proved)
        assert p.restarts() == {name: 1}


def test_resource_limit_decides_unknown_reproducibly():
    with Portfolio(rlimit={"z3": 200_000, "cvc5": 20_000}, wall_clock_s=20.0) as p:
        first = p.check_query(Query.of(FERMAT))
        second = p.check_query(Query.of(FERMAT))
    assert isinstance(first, Unknown) and isinstance(second, Unknown)
    assert first.reasons == second.reasons == {"z3": "resource_limit", "cvc5": "resource_limit"}
    assert not first.timed_out


def test_isolated_resource_use_does_not_depend_on_history(portfolio):
    query = Query.of(eq((IDX * 3 + K) % 8, 5), IDX > 40, K < 0)
    first = portfolio.run_all(query)
    for offset in range(12):  # other queries in between
        portfolio.prove([IDX < N], (IDX + offset) // 2 < 64 + offset)
    again = portfolio.run_all(query)
    for solver in ("z3", "cvc5"):
        assert first[solver].status == again[solver].status == "sat"
        assert first[solver].resources == again[solver].resources > 0


def test_worker_killed_mid_query_is_reported_and_next_query_works():
    with Portfolio(["cvc5"], rlimit=0, wall_clock_s=20.0) as p:
        pid = p.workers["cvc5"].pid
        threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
        result = p.check_query(Query.of(FERMAT))
        assert isinstance(result, Unknown) and result.reasons == {"cvc5": "crash"}
        assert "SIGKILL" in result.runs[0].message
        assert isinstance(p.prove([IDX < N], IDX < 128), Proved)
        assert p.restarts() == {"cvc5": 1} and p.workers["cvc5"].pid != pid


def test_native_crash_never_crashes_argus():
    name = faults.register("z3-segfaults", "crash", trigger="i")
    with Portfolio([name, "cvc5"]) as p:
        result = p.prove([IDX < N], IDX < 128)
        assert isinstance(result, Proved) and result.solver == "cvc5"
        alone = Portfolio([name]).start()
        try:
            crashed = alone.prove([IDX < N], IDX < 128)
            assert isinstance(crashed, Unknown) and crashed.reasons == {name: "crash"}
            assert "SIGSEGV" in crashed.runs[0].message
            assert isinstance(alone.check_query(Query.of(eq(K, 3))), Refuted)  # no trigger var
        finally:
            alone.close()


def test_invalid_model_is_a_solver_failure_never_a_refutation():
    name = faults.register("z3-bad-model", "invalid_model")
    with Portfolio([name]) as p:
        result = p.prove([IDX < N], IDX < 100)
        assert isinstance(result, Unknown) and result.reasons == {name: "invalid_model"}
    with Portfolio([name, "cvc5"]) as p:
        result = p.prove([IDX < N], IDX < 100)
        assert isinstance(result, Refuted) and result.solver == "cvc5"
        assert evaluate(and_(IDX < N, IDX >= 100), result.model) is True


def test_winner_interrupts_the_other_solver():
    name = faults.register("instant", "instant_unsat")
    with Portfolio([name, "z3"], rlimit=0, wall_clock_s=30.0) as p:
        started = time.monotonic()
        assert isinstance(p.check_query(Query.of(FERMAT)), Proved)
        # z3 was interrupted, so it answers the next query at once
        result = p.check_query(Query.of(eq(K, 3)))
        assert isinstance(result, Proved)  # the instant solver wins the race again
        assert time.monotonic() - started < 2.0
        runs = p.run_all(Query.of(eq(K, 3)))
        assert runs["z3"].status == "sat" and runs[name].status == "unsat"


def test_truthiness_only_proved_passes():
    assert Proved("z3")
    assert not Refuted("z3", {})
    assert not Unknown(())


def test_session_incremental_checks_and_replay_after_a_kill():
    with Portfolio(["z3", "cvc5"]) as p, p.session() as s:
        s.add(IDX < N, "in_range")
        s.add(N <= 64, "small")
        assert isinstance(s.prove(IDX < 64), Proved)
        refuted = s.prove(IDX < 63)
        assert isinstance(refuted, Refuted) and refuted.model["i"] == 63
        s.push()
        s.add(eq(N, 10), "ten")
        assert isinstance(s.prove(IDX < 10), Proved)
        core = s.check({"big": IDX > 20}, core=True)
        assert isinstance(core, Proved) and {"big", "ten", "in_range"} <= set(core.core)
        for worker in p.workers.values():
            os.kill(worker.pid, signal.SIGKILL)
        time.sleep(0.2)
        assert isinstance(s.prove(IDX < 10), Proved)  # replayed into the restarted workers
        s.pop()
        assert isinstance(s.prove(IDX < 10), Refuted)
        assert s.level == 0
        assert p.restarts() == {"z3": 1, "cvc5": 1}


def test_configuration_errors():
    with pytest.raises(ArgusError, match="unknown solver"):
        Portfolio(["z3", "boolector"])
    with pytest.raises(ArgusError, match="not in the portfolio"):
        Portfolio(["z3"], options={"cvc5": {"seed": 1}})
    with pytest.raises(ArgusError, match="unknown parameter"):
        Portfolio(["z3"], options={"z3": {"not_a.param": 1}}).start()
