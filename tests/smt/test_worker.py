"""Worker processes: protocol, limits, cancellation, crashes and restarts."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import smt_fault_backends as faults

from argus.errors import ArgusError
from argus.smt.query import Query
from argus.smt.terms import eq, gt, int_var
from argus.smt.worker import Check, Limits, SessionOp, Worker, WorkerDied, backend_spec

X = int_var("x", 0, 100)
Y = int_var("y", -5, 5)
SAT = Query.of(eq(X // 3 + Y, 7), gt(X, 10), named={"small": X < 50})
UNSAT = Query.of(eq(X % 4, 1), eq(X % 2, 0))
# x^3 + y^3 = z^3 over positive integers: no solver decides it quickly
A, B, C = int_var("a", 1, None), int_var("b", 1, None), int_var("c", 1, None)
HARD = Query.of(eq(A * A * A + B * B * B, C * C * C))


@pytest.fixture(scope="module", params=["z3", "cvc5"])
def worker(request):
    w = Worker(backend_spec(request.param))
    w.start()
    yield w
    w.stop()


def check(qid: int, query: Query, rlimit: int = 0, wall: float = 10.0, **kw) -> Check:
    return Check(qid, Limits(rlimit, wall), query, **kw)


def test_hello_reports_version(worker):
    assert worker.hello is not None and worker.hello.error is None
    assert worker.hello.version[0].isdigit()
    assert worker.hello.pid == worker.pid != os.getpid()


def test_sat_answer_carries_a_model_as_python_values(worker):
    run = worker.request(check(1, SAT)).run
    assert (run.status, run.reason, run.solver) == ("sat", None, worker.name)
    x, y = run.model["x"], run.model["y"]
    assert isinstance(x, int) and x // 3 + y == 7 and 10 < x < 50 and -5 <= y <= 5
    assert run.resources is not None and run.resources > 0


def test_unsat_answer_with_core(worker):
    query = Query.of(named={"odd": eq(X % 2, 1), "even": eq(X % 2, 0), "big": X > 3})
    run = worker.request(check(2, query, core=True)).run
    assert run.status == "unsat"
    assert set(run.core) <= {"odd", "even", "big"} and {"odd", "even"} <= set(run.core)


def test_resource_limit_is_reproducible(worker):
    first = worker.request(check(3, HARD, rlimit=20_000)).run
    second = worker.request(check(4, HARD, rlimit=20_000)).run
    assert first.reason == second.reason == "resource_limit"
    assert first.status == "unknown"


def test_soft_wall_clock_stops_the_solver(worker):
    started = time.monotonic()
    run = worker.request(check(5, HARD, wall=0.5), timeout_s=5).run
    assert (run.status, run.reason) == ("unknown", "timeout")
    assert time.monotonic() - started < 1.5


def test_session_operations(worker):
    worker.request(SessionOp(10, 7, "open"))
    worker.request(SessionOp(11, 7, "assert", (X > 90, "big")))
    worker.request(SessionOp(12, 7, "push"))
    worker.request(SessionOp(13, 7, "assert", (X < 50, "small")))
    run = worker.request(Check(14, Limits(0, 5.0), session=7, core=True)).run
    assert run.status == "unsat" and set(run.core) == {"big", "small"}
    worker.request(SessionOp(15, 7, "pop", 1))
    run = worker.request(Check(16, Limits(0, 5.0), session=7, assumptions=((X < 95, None),))).run
    assert run.status == "sat" and 90 < run.model["x"] < 95
    bad = worker.request(SessionOp(17, 99, "push")).run
    assert bad.reason == "error" and "no open session" in bad.message


def test_queued_checks_cancelled_before_they_start_are_skipped(worker):
    worker.send(check(20, HARD, wall=0.6), None)
    worker.send(check(21, HARD, wall=30.0), None)
    worker.cancel_through(21)
    started = time.monotonic()
    replies = [worker.receive(), worker.receive()]
    assert [r.qid for r in replies] == [20, 21]
    assert replies[1].run.reason == "cancelled" and replies[1].run.message == "not started"
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("delay_s", [0.0, 0.001, 0.005, 0.3])
def test_z3_is_interrupted_in_process(delay_s):
    """However early the cancel lands (before the check starts, while the query is being
    translated, or mid-search), z3 stops at once."""
    w = Worker(backend_spec("z3"))
    w.start()
    try:
        for qid in (1, 2):
            w.send(check(qid, HARD, wall=60.0), None)
            time.sleep(delay_s)
            started = time.monotonic()
            w.cancel_through(qid)
            reply = w.receive()
            assert reply.run.reason == "cancelled"
            assert time.monotonic() - started < 1.0
        assert w.request(check(3, SAT)).run.status == "sat"
    finally:
        w.stop()


def test_killed_worker_is_reported_and_restarts():
    w = Worker(backend_spec("cvc5"))
    w.start()
    try:
        first_pid = w.pid
        threading.Timer(0.3, os.kill, (first_pid, signal.SIGKILL)).start()
        with pytest.raises(WorkerDied, match="SIGKILL"):
            w.request(check(1, HARD, wall=30.0), timeout_s=10)
        assert w.ensure_running() is True
        assert w.pid != first_pid and w.restarts == 1
        assert w.request(check(2, SAT)).run.status == "sat"
    finally:
        w.stop()


def test_solver_exception_is_a_crash_and_the_worker_survives():
    name = faults.register("z3-raises", "raise", trigger="a")
    w = Worker(backend_spec(name))
    w.start()
    try:
        run = w.request(check(1, HARD)).run
        assert (run.status, run.reason) == ("unknown", "crash")
        assert "injected solver failure" in run.message
        assert w.request(check(2, SAT)).run.status == "sat"
        assert w.alive
    finally:
        w.stop()


@pytest.mark.parametrize(
    ("solver", "option", "needle"),
    [("z3", "no_such.param", "unknown parameter"), ("cvc5", "no-such-option", "unrecognized")],
)
def test_bad_option_is_a_clear_argus_error(solver, option, needle):
    spec = backend_spec(solver).with_options({option: "1"})
    with pytest.raises(ArgusError, match=needle) as info:
        Worker(spec).start()
    assert option in str(info.value)
    assert "\n" not in info.value.message


def test_unknown_solver_name():
    with pytest.raises(ArgusError, match="unknown solver 'yices'"):
        backend_spec("yices")
