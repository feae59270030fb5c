"""Fault-injecting solver backends, used only by the tests.

Each wraps a real solver (:class:`argus.smt.worker.SessionBackend`) and breaks one thing, so
the portfolio and the differential classifier can be checked against known faults.  They
are registered under test-only names with :func:`argus.smt.worker.register_backend`; the
worker process imports this module by name (the tests directory is on ``sys.path``).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from typing import Any

from argus.smt.query import Query
from argus.smt.results import SolverRun
from argus.smt.terms import Term, eq, int_const, ite, rebuild, subterms
from argus.smt.worker import SessionBackend, register_backend

FAULTS = (
    "wrong_verdict",  # a sat answer comes back as unsat
    "invalid_model",  # a sat answer comes back with a model that breaks the query
    "crash",  # the process dies by SIGSEGV, like a native crash
    "raise",  # the solver raises a Python exception
    "slow",  # answers correctly after `delay_s`
    "hang",  # never answers (ignores every limit)
    "instant_unsat",  # answers unsat at once without solving
    "div0_is_zero",  # solves with `x div 0 = 0` and `x mod 0 = 0` instead of SMT-LIB semantics
)


class FaultyBackend(SessionBackend):
    """A real solver with one injected fault; ``trigger`` limits it to queries that mention a
    variable of that name."""

    def __init__(
        self,
        options: dict[str, str],
        *,
        inner: str = "z3",
        fault: str = "wrong_verdict",
        delay_s: float = 0.5,
        trigger: str | None = None,
    ) -> None:
        assert fault in FAULTS, fault
        super().__init__(options, solver=inner)
        self.fault = fault
        self.delay_s = delay_s
        self.trigger = trigger

    def check_query(self, query: Query, limits, *, model: bool, core: bool, fresh=False):
        def solve(q: Query = query) -> SolverRun:
            return SessionBackend.check_query(self, q, limits, model=model, core=core, fresh=fresh)

        if self.trigger is not None and self.trigger not in query.variables():
            return solve()
        if self.fault == "div0_is_zero":
            return self._faulty(lambda: solve(_div0_is_zero(query)))
        return self._faulty(solve)

    def check(self, session, assumptions, limits, *, model, core) -> SolverRun:
        return self._faulty(
            lambda: super(FaultyBackend, self).check(
                session, assumptions, limits, model=model, core=core
            )
        )

    def _faulty(self, solve) -> SolverRun:
        match self.fault:
            case "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            case "raise":
                raise RuntimeError("injected solver failure")
            case "hang":
                time.sleep(3600)
            case "slow":
                time.sleep(self.delay_s)
            case "instant_unsat":
                return SolverRun(self.solver, "unsat", resources=0)
        run = solve()
        if self.fault == "slow":  # the injected delay is part of this solver's check time
            return replace(run, seconds=run.seconds + self.delay_s)
        if run.status != "sat" or run.reason is not None:
            return run
        if self.fault == "wrong_verdict":
            return replace(run, status="unsat", model=None)
        if self.fault == "invalid_model":
            return replace(run, model=_break(run.model or {}))
        return run


def _break(model: dict[str, Any]) -> dict[str, Any]:
    broken: dict[str, Any] = {}
    for name, value in model.items():
        if isinstance(value, bool):
            broken[name] = not value
        elif isinstance(value, int):
            broken[name] = value + 1_000_003
        else:
            broken[name] = value
    return broken


def _div0_is_zero(query: Query) -> Query:
    def rewrite(term: Term) -> Term:
        memo: dict[Term, Term] = {}
        for t in subterms(term):
            args = tuple(memo[a] for a in t.args)
            node = rebuild(t, args) if t.args else t
            if t.op in ("div", "mod"):
                node = ite(eq(args[1], 0), int_const(0), node)
            memo[t] = node
        return memo[term]

    named = [(n, rewrite(t)) for t, n in query.assertions if n is not None]
    unnamed = [rewrite(t) for t, n in query.assertions if n is None]
    return Query.of(*unnamed, named=named)


def register(name: str, fault: str, inner: str = "z3", **kwargs: Any) -> str:
    """Register ``name`` as ``inner`` with ``fault`` injected; returns the name."""
    register_backend(name, "smt_fault_backends:FaultyBackend", inner=inner, fault=fault, **kwargs)
    return name
