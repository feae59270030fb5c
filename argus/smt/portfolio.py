"""The cvc5 ‖ Z3 portfolio: warm worker processes, reproducible limits, checked answers.

::

    with Portfolio(solvers=("z3", "cvc5")) as portfolio:
        result = portfolio.prove({"in_range": i < n}, (i * 4) // 4 == i)
        if isinstance(result, Refuted):
            print(result.model, result.violation)

Each solver runs in its own warm process (:mod:`argus.smt.worker`).  A query goes to every
solver at once; the first *usable* answer wins and the others are cancelled (Z3 is
interrupted in-process; cvc5 finishes at its own limits and any check queued behind it is
skipped).  Usable means:

* ``unsat`` -> :class:`~argus.smt.results.Proved` (with the unsat core when asked for);
* ``sat`` with a model that concrete evaluation (:mod:`argus.smt.evaluate`) confirms on the
  *original* terms -> :class:`~argus.smt.results.Refuted`.  A model that fails the check is a
  solver failure (reason ``invalid_model``), never a refutation.

When no solver gives a usable answer the result is :class:`~argus.smt.results.Unknown` with
one reason per solver.  ``unknown`` is never a pass: only ``Proved`` is truthy.

Limits: ``rlimit`` (per solver; z3 ``rlimit``, cvc5 ``rlimit-per``) decides ``unknown``
reproducibly: by default every one-shot query is checked in a fresh solver context, where
resource counts depend on the query alone (a warm context's counts shift with the queries
it answered before; ``isolated=False`` trades that for speed, and incremental sessions are
reproducible for a given sequence of operations).  ``wall_clock_s`` is a safety net: the solver is told to stop itself at that
time and its worker is killed (and restarted for the next query) at ``wall_clock_s +
grace_s``; both are reported as reason ``timeout``.  A worker that dies (crash, native abort,
``kill``) is reported as reason ``crash`` and restarted on the next query; incremental
sessions are replayed into the new process.

Validity (:meth:`Portfolio.prove`): ``hypotheses => goal`` is proved when
``hypotheses ∧ ¬(D ∧ goal)`` is unsat, with ``D`` the definedness guards of every division,
modulo and integer bitwise operation (:func:`argus.smt.terms.definedness`): a goal that could
divide by zero is refuted with ``violation="definedness"``, never proved.  (This single
query is unsat exactly when both of :func:`argus.smt.query.validity_queries` are.)
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing.connection
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from argus.errors import ArgusError
from argus.smt.diff import ModelCheck, check_assertions
from argus.smt.evaluate import EvaluationError, evaluate
from argus.smt.query import Query
from argus.smt.results import Proved, Refuted, Result, SolverRun, Unknown
from argus.smt.terms import (
    BOOL,
    Term,
    and_,
    definedness,
    domain_constraints,
    implies,
    lift,
    not_,
)
from argus.smt.worker import (
    BackendSpec,
    Check,
    Limits,
    Reply,
    SessionOp,
    Worker,
    WorkerDied,
    backend_spec,
)

__all__ = [
    "DEFAULT_RLIMIT",
    "Portfolio",
    "PortfolioSession",
    "judge_model",
]

#: Default per-check resource limits.  Roughly 5 s of work on small integer queries for each
#: solver; the unit differs between solvers, which is why the limit is per solver.
DEFAULT_RLIMIT: dict[str, int] = {"z3": 50_000_000, "cvc5": 5_000_000}
_FALLBACK_RLIMIT = 50_000_000

Hypotheses = Mapping[str, Term] | Iterable[Term]


@dataclass(frozen=True)
class _Goal:
    """How to judge a ``sat`` answer: the assertions a model must satisfy and, for a
    validity query, the guards that tell a definedness violation from a goal violation."""

    assertions: tuple[Term, ...]
    guards: tuple[Term, ...] | None = None  # None: plain satisfiability, no violation kind


def judge_model(model: Mapping[str, Any], goal: _Goal) -> tuple[ModelCheck, str | None]:
    """Check a model against the original terms; returns the check and the violation kind.

    For a validity query a model whose evaluation divides by zero is accepted exactly when
    it violates a definedness guard (that *is* the counterexample).
    """
    check = check_assertions(goal.assertions, model)
    if goal.guards is None:
        if check.status == "undefined":
            return ModelCheck(
                "invalid", f"the model relies on an unspecified value: {check.detail}"
            ), None
        return check, None
    if check.status == "invalid":
        return check, None
    broken = _first_broken_guard(goal.guards, model)
    if broken is not None:
        return ModelCheck("valid", broken), "definedness"
    if check.status == "undefined":
        return ModelCheck("invalid", f"every guard holds, yet {check.detail}"), None
    return check, "goal"


def _first_broken_guard(guards: Iterable[Term], model: Mapping[str, Any]) -> str | None:
    for guard in guards:
        try:
            holds = evaluate(guard, model)
        except EvaluationError:
            holds = False
        if holds is not True:
            return f"guard violated: {guard}"
    return None


class Portfolio:
    """Warm solver workers answering queries as a portfolio (see the module docstring).

    ``solvers`` are registered backend names (:func:`argus.smt.worker.register_backend`);
    ``rlimit`` is one number for every solver or a ``{solver: units}`` mapping (0 = none;
    default :data:`DEFAULT_RLIMIT`); ``isolated`` (the default) checks every one-shot query
    in a solver context of its own, so its resource use, and hence an ``unknown`` from the
    resource limit, does not depend on the queries answered before; ``isolated=False``
    reuses warm contexts (faster; resource counts then shift slightly with history); ``options`` maps a solver to its ``{option: value}``
    (z3 parameters, cvc5 options; validated when the worker starts: a bad name raises
    :class:`~argus.errors.ArgusError`).  Workers start on :meth:`start` or on entering the
    ``with`` block.  A portfolio serves one caller at a time (it is not thread-safe).
    """

    def __init__(
        self,
        solvers: Iterable[str | BackendSpec] = ("z3", "cvc5"),
        *,
        rlimit: int | Mapping[str, int] | None = None,
        wall_clock_s: float = 20.0,
        grace_s: float = 0.5,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        isolated: bool = True,
        startup_timeout_s: float = 60.0,
    ) -> None:
        specs = [backend_spec(s) for s in solvers]
        if not specs:
            raise ArgusError("a portfolio needs at least one solver")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ArgusError(f"solver names must be distinct, got {names}")
        options = dict(options or {})
        unknown = set(options) - set(names)
        if unknown:
            raise ArgusError(
                f"options given for solvers not in the portfolio: {', '.join(sorted(unknown))}"
            )
        self.workers: dict[str, Worker] = {}
        for spec in specs:
            given = {
                k: str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in options.get(spec.name, {}).items()
            }
            self.workers[spec.name] = Worker(spec.with_options(given), startup_timeout_s)
        self.rlimits = {
            name: int(
                rlimit.get(name, DEFAULT_RLIMIT.get(name, _FALLBACK_RLIMIT))
                if isinstance(rlimit, Mapping)
                else (DEFAULT_RLIMIT.get(name, _FALLBACK_RLIMIT) if rlimit is None else rlimit)
            )
            for name in names
        }
        if wall_clock_s <= 0:
            raise ArgusError("wall_clock_s must be positive (it is the safety net)")
        self.wall_clock_s = float(wall_clock_s)
        self.grace_s = float(grace_s)
        self.isolated = bool(isolated)
        self._qids = itertools.count(1)
        self._session_ids = itertools.count(1)
        self._sessions: dict[int, PortfolioSession] = {}
        self._op_sessions: dict[int, int] = {}  # qid of an in-flight session op -> session id
        self._started = False

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> Portfolio:
        """Start every worker (in parallel) and wait until each has said hello."""
        if not self._started:
            errors = []
            launched = [w for w in self.workers.values() if not w.alive]
            for worker in launched:
                worker.launch()
            for worker in launched:
                try:
                    worker.await_hello()
                except ArgusError as err:
                    errors.append(err)
            if errors:
                self.close()
                raise errors[0]
            self._started = True
        return self

    def close(self) -> None:
        """Stop every worker."""
        for worker in self.workers.values():
            with contextlib.suppress(Exception):
                worker.stop()
        self._started = False

    def __enter__(self) -> Portfolio:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def solvers(self) -> tuple[str, ...]:
        return tuple(self.workers)

    def versions(self) -> dict[str, str]:
        """Solver name -> version string reported by its worker."""
        self.start()
        return {n: w.hello.version if w.hello else "" for n, w in self.workers.items()}

    def options(self) -> dict[str, dict[str, str]]:
        """Solver name -> the options its worker runs with."""
        return {n: dict(w.spec.options) for n, w in self.workers.items()}

    def restarts(self) -> dict[str, int]:
        """How many times each worker was restarted (after a crash, kill or timeout)."""
        return {n: w.restarts for n, w in self.workers.items()}

    # -- one-shot queries --------------------------------------------------------------

    def check_query(self, query: Query, *, core: bool = False, model: bool = True) -> Result:
        """Race the solvers on a query.  ``Proved`` = unsat, ``Refuted`` = sat (model checked
        against the query; a model that needs ``x div 0`` is not accepted)."""
        goal = _Goal(tuple(query.domain) + query.terms)
        return self._race(lambda qid, w: self._query_check(qid, w, query, core, model), goal)

    def check_sat(
        self,
        assertions: Iterable[Term] = (),
        *,
        named: Mapping[str, Term] | None = None,
        core: bool = False,
        defined: bool = True,
    ) -> Result:
        """Satisfiability of a conjunction.  With ``defined`` (the default) the definedness
        guards are asserted too, so every model is one where all divisions are defined."""
        terms = [lift(a, BOOL) for a in assertions]
        named_terms = dict(named or {})
        guards = definedness(and_(*terms, *named_terms.values())) if defined else []
        return self.check_query(Query.of(*terms, *guards, named=named_terms), core=core)

    def prove(self, hypotheses: Hypotheses, goal: Term, *, core: bool = False) -> Result:
        """Prove ``hypotheses => goal`` where every division in it is defined.

        Named hypotheses (a mapping) appear in the unsat core; the goal's name is ``goal``.
        """
        named = _named_hypotheses(hypotheses)
        hyps = [h for _, h in named]
        goal = lift(goal, BOOL)
        guards = tuple(definedness(implies(and_(*hyps), goal)))
        query = Query.of(named=[*named, ("goal", not_(and_(*guards, goal)))])
        judge_goal = _Goal(tuple(query.domain) + query.terms, guards)
        return self._race(lambda qid, w: self._query_check(qid, w, query, core, True), judge_goal)

    def run_all(self, query: Query, *, model: bool = True) -> dict[str, SolverRun]:
        """Run every solver on ``query`` to completion (no racing, no model check): the raw
        runs differential testing compares."""
        return self._collect(
            lambda qid, w: self._query_check(qid, w, query, False, model), judge=None, race=False
        )

    def _query_check(
        self, qid: int, worker: Worker, query: Query, core: bool, model: bool
    ) -> Check:
        limits = self._limits(worker.name)
        return Check(qid, limits, query, model=model, core=core, fresh=self.isolated)

    def _limits(self, solver: str) -> Limits:
        return Limits(self.rlimits[solver], self.wall_clock_s)

    # -- incremental sessions ----------------------------------------------------------

    def session(self) -> PortfolioSession:
        """A new incremental session kept warm in every worker."""
        self.start()
        session = PortfolioSession(self, next(self._session_ids))
        self._sessions[session.id] = session
        return session

    # -- the engine --------------------------------------------------------------------

    def _race(self, make: Callable[[int, Worker], Check | SolverRun], goal: _Goal) -> Result:
        verdicts: dict[str, str | None] = {}

        def judge(run: SolverRun) -> SolverRun:
            if run.status != "sat" or run.reason is not None:
                return run
            if run.model is None:
                return replace(run, reason="invalid_model", message="no model returned")
            check, violation = judge_model(run.model, goal)
            if check.status != "valid":
                return replace(run, reason="invalid_model", message=check.detail)
            verdicts[run.solver] = violation
            return run

        runs = self._collect(make, judge=judge, race=True)
        winner = next((r for r in runs.values() if r.ok), None)
        ordered = tuple(runs.values())
        if winner is None:
            return Unknown(ordered)
        if winner.status == "unsat":
            return Proved(winner.solver, winner.resources, winner.seconds, winner.core, ordered)
        return Refuted(
            winner.solver,
            dict(winner.model or {}),
            winner.resources,
            winner.seconds,
            verdicts.get(winner.solver),
            ordered,
        )

    def _collect(
        self,
        make: Callable[[int, Worker], Check | SolverRun],
        *,
        judge: Callable[[SolverRun], SolverRun] | None,
        race: bool,
    ) -> dict[str, SolverRun]:
        """Send one check to every worker and gather the runs (stop at the first usable one
        when racing, and cancel the rest)."""
        return self._gather(self._dispatch(make), judge=judge, race=race)

    def _dispatch(self, make: Callable[[int, Worker], Check | SolverRun]) -> _InFlight:
        self.start()
        flight = _InFlight(next(self._qids))
        for name, worker in self.workers.items():
            sent = self._send_check(flight.qid, worker, make)
            if isinstance(sent, SolverRun):
                flight.runs[name] = sent
            else:
                flight.waiting[name] = (worker, time.monotonic(), sent)
        return flight

    def _gather(
        self,
        flight: _InFlight,
        *,
        judge: Callable[[SolverRun], SolverRun] | None,
        race: bool,
    ) -> dict[str, SolverRun]:
        runs, waiting = flight.runs, flight.waiting
        while waiting:
            if race and any(r.ok for r in runs.values()):
                break
            self._wait_round(flight.qid, waiting, runs, judge)
        if race:
            for worker, _, _ in waiting.values():
                worker.cancel_through(flight.qid)
        return {name: runs[name] for name in self.workers if name in runs}

    def submit(self, query: Query, *, model: bool = True) -> Callable[[], dict[str, SolverRun]]:
        """Start :meth:`run_all` on ``query`` and return a function that waits for its runs,
        so the caller can work (e.g. enumerate the query) while the solvers do.  Submit the
        next query only after waiting for this one."""
        flight = self._dispatch(lambda qid, w: self._query_check(qid, w, query, False, model))
        return lambda: self._gather(flight, judge=None, race=False)

    def _send_check(
        self, qid: int, worker: Worker, make: Callable[[int, Worker], Check | SolverRun]
    ) -> Check | SolverRun:
        try:
            self._prepare(worker)
            check = make(qid, worker)
            if isinstance(check, SolverRun):
                return check
            self._drain(worker)
            worker.send(check, worker.earliest_start() + self.wall_clock_s + self.grace_s)
            return check
        except WorkerDied as died:
            worker.kill()
            return SolverRun(worker.name, "unknown", "crash", f"worker {died}")
        except ArgusError as err:  # the worker could not be (re)started
            return SolverRun(worker.name, "unknown", "crash", err.message)

    def _prepare(self, worker: Worker) -> None:
        """Restart a dead worker (sessions replay themselves into it on their next use)."""
        worker.ensure_running()

    def _drain(self, worker: Worker) -> None:
        """Read replies already waiting (session-op acknowledgements, stale checks)."""
        while worker.connection.poll():
            self._note(worker, worker.receive())

    def _note(self, worker: Worker, reply: Reply) -> None:
        sid = self._op_sessions.pop(reply.qid, None)
        if sid is not None and reply.run.reason == "error":
            session = self._sessions.get(sid)
            if session is not None:
                session._broken[worker.name] = reply.run.message

    def _wait_round(
        self,
        qid: int,
        waiting: dict[str, tuple[Worker, float, Check]],
        runs: dict[str, SolverRun],
        judge: Callable[[SolverRun], SolverRun] | None,
    ) -> None:
        deadlines = [w.next_deadline() or math.inf for w, _, _ in waiting.values()]
        timeout = max(0.0, min(deadlines) - time.monotonic())
        handles = [h for w, _, _ in waiting.values() for h in (w.connection, w.sentinel)]
        ready = set(
            multiprocessing.connection.wait(handles, None if math.isinf(timeout) else timeout)
        )
        now = time.monotonic()
        for name, (worker, sent_at, check) in list(waiting.items()):
            if worker.connection in ready or worker.sentinel in ready:
                try:
                    while worker.connection.poll():
                        reply = worker.receive()
                        self._note(worker, reply)
                        if reply.qid == qid:
                            run = reply.run if judge is None else judge(reply.run)
                            runs[name] = run
                            del waiting[name]
                            break
                    else:
                        if not worker.alive:
                            raise WorkerDied(worker.exit_description())
                except WorkerDied as died:
                    runs[name] = SolverRun(
                        name, "unknown", "crash", f"worker {died}", seconds=now - sent_at
                    )
                    del waiting[name]
                    worker.kill()
                continue
            head = worker.next_deadline()
            if head is not None and now >= head:
                stale = worker.pending_ids()[0] != qid
                worker.kill()
                if not stale:
                    runs[name] = SolverRun(
                        name,
                        "unknown",
                        "timeout",
                        f"no answer within {self.wall_clock_s:g} s + {self.grace_s:g} s grace; "
                        "worker killed and restarted",
                        seconds=now - sent_at,
                    )
                    del waiting[name]
                    continue
                # an older, cancelled check hung: restart and resend this one
                sent = self._send_check(qid, worker, lambda _q, _w, c=check: c)
                if isinstance(sent, SolverRun):
                    runs[name] = sent
                    del waiting[name]
                else:
                    waiting[name] = (worker, time.monotonic(), check)

    # -- session plumbing --------------------------------------------------------------

    def _session_op(self, session: PortfolioSession, op: str, arg: Any = None) -> None:
        for worker in self.workers.values():
            if worker.name in session._broken:
                continue
            try:
                self._prepare(worker)
                if worker.generation not in session._synced.get(worker.name, ()):
                    session._replay(worker)
                    continue  # the replay already includes this operation
                self._send_op(worker, session.id, op, arg)
            except (WorkerDied, ArgusError):
                worker.kill()  # replayed on the next use

    def _send_op(self, worker: Worker, sid: int, op: str, arg: Any) -> None:
        qid = next(self._qids)
        self._drain(worker)
        self._op_sessions[qid] = sid
        worker.send(SessionOp(qid, sid, op, arg))

    def _forget_session(self, session: PortfolioSession) -> None:
        self._sessions.pop(session.id, None)
        for worker in self.workers.values():
            if worker.alive and worker.generation in session._synced.get(worker.name, ()):
                with contextlib.suppress(WorkerDied):
                    self._send_op(worker, session.id, "close", None)


@dataclass
class _InFlight:
    """One check sent to the workers: runs received so far, workers still working on it."""

    qid: int
    runs: dict[str, SolverRun] = field(default_factory=dict)
    waiting: dict[str, tuple[Worker, float, Check]] = field(default_factory=dict)


def _named_hypotheses(hypotheses: Hypotheses) -> list[tuple[str, Term]]:
    if isinstance(hypotheses, Mapping):
        return [(name, lift(term, BOOL)) for name, term in hypotheses.items()]
    return [(f"hyp{i}", lift(term, BOOL)) for i, term in enumerate(hypotheses)]


class PortfolioSession:
    """An incremental context mirrored in every worker: assertions, scopes, and checks
    under assumptions, for families of related queries (invariant inference).

    The session keeps its own copy of the assertion stack, so that models are checked
    against the original terms and a restarted worker is brought back to the same state.
    """

    def __init__(self, portfolio: Portfolio, session_id: int) -> None:
        self.portfolio = portfolio
        self.id = session_id
        self._frames: list[list[tuple[Term, str | None]]] = [[]]
        self._synced: dict[str, set[int]] = {}  # worker -> generations holding this session
        self._broken: dict[str, str] = {}  # worker -> why the session is unusable there
        self._closed = False
        for worker in portfolio.workers.values():
            with contextlib.suppress(WorkerDied, ArgusError):
                portfolio._prepare(worker)
                self._replay(worker)

    def __enter__(self) -> PortfolioSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def level(self) -> int:
        return len(self._frames) - 1

    def assertions(self) -> list[tuple[Term, str | None]]:
        """Everything asserted in the open scopes, oldest first."""
        return [pair for frame in self._frames for pair in frame]

    def add(self, term: Term, name: str | None = None) -> None:
        """Assert ``term`` (tracked for unsat cores under ``name``)."""
        self._live()
        term = lift(term, BOOL)
        self._frames[-1].append((term, name))
        self.portfolio._session_op(self, "assert", (term, name))

    def push(self) -> None:
        self._live()
        self._frames.append([])
        self.portfolio._session_op(self, "push")

    def pop(self, levels: int = 1) -> None:
        self._live()
        if levels < 0 or levels > self.level:
            raise ArgusError(f"cannot pop {levels} scopes: {self.level} open")
        if levels:
            del self._frames[-levels:]
            self.portfolio._session_op(self, "pop", levels)

    def check(
        self,
        assumptions: Mapping[str, Term] | Iterable[Term] = (),
        *,
        core: bool = False,
    ) -> Result:
        """``check-sat-assuming``: ``Proved`` = unsat, ``Refuted`` = a checked model."""
        self._live()
        pairs = _assumption_pairs(assumptions)
        terms = [t for t, _ in self.assertions()] + [t for t, _ in pairs]
        goal = _Goal(tuple(domain_constraints(*terms)) + tuple(terms))
        return self.portfolio._race(self._maker(pairs, core), goal)

    def prove(self, goal: Term, *, core: bool = False) -> Result:
        """Prove ``assertions => goal`` with every division defined (as :meth:`Portfolio.prove`)."""
        self._live()
        goal = lift(goal, BOOL)
        hyps = [t for t, _ in self.assertions()]
        guards = tuple(definedness(implies(and_(*hyps), goal)))
        negated = not_(and_(*guards, goal))
        terms = [*hyps, negated]
        judge_goal = _Goal(tuple(domain_constraints(*terms)) + tuple(terms), guards)
        return self.portfolio._race(self._maker([(negated, "goal")], core), judge_goal)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.portfolio._forget_session(self)

    def _live(self) -> None:
        if self._closed:
            raise ArgusError("the session is closed")

    def _maker(self, pairs: list[tuple[Term, str | None]], core: bool):
        portfolio = self.portfolio

        def make(qid: int, worker: Worker) -> Check | SolverRun:
            if worker.name in self._broken:
                return SolverRun(worker.name, "unknown", "error", self._broken[worker.name])
            if worker.generation not in self._synced.get(worker.name, ()):
                self._replay(worker)
            return Check(
                qid,
                portfolio._limits(worker.name),
                None,
                tuple(pairs),
                session=self.id,
                core=core,
            )

        return make

    def _replay(self, worker: Worker) -> None:
        """Open this session in ``worker`` (a fresh or restarted process) and re-assert it."""
        if self._closed:
            return
        self._broken.pop(worker.name, None)
        send = self.portfolio._send_op
        send(worker, self.id, "open", None)
        for depth, frame in enumerate(self._frames):
            if depth:
                send(worker, self.id, "push", None)
            for pair in frame:
                send(worker, self.id, "assert", pair)
        self._synced.setdefault(worker.name, set()).add(worker.generation)


def _assumption_pairs(
    assumptions: Mapping[str, Term] | Iterable[Term],
) -> list[tuple[Term, str | None]]:
    if isinstance(assumptions, Mapping):
        return [(lift(t, BOOL), n) for n, t in assumptions.items()]
    return [(lift(t, BOOL), None) for t in assumptions]
