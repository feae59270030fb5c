"""Warm solver worker processes and the protocol the parent speaks to them.

Each solver runs in its own long-lived process (``forkserver`` start method where the
platform has it, ``spawn`` otherwise; never ``fork`` of a process that may hold solver
threads), so a solver crash, a native abort or a runaway query never takes argus down, and
no query pays for a Python start.

Protocol
--------
Requests and replies are small frozen dataclasses pickled over a duplex pipe.  Terms travel
as pickled :mod:`argus.smt.terms` DAGs, not as SMT-LIB text: a hash-consed DAG pickles each
shared subterm once, the worker translates it with argus's own translators (the path
verification relies on, so differential testing exercises it too), and models come back keyed
by argus variable names with no printer/parser round trip on the hot path.  SMT-LIB text is
what argus *writes* for people (``--smtlib``, reproducers), not what it pipes to itself.

====================  =======================================================================
parent -> worker       ``Check`` (scratch check: push, assert, check, pop; or a check in an
                       open session), ``SessionOp`` (open / close / push / pop / assert),
                       ``Stop``
worker -> parent       ``Hello`` once at start-up (solver version, or why the backend or an
                       option was rejected), then one ``Reply`` per request, in order
cancel channel         a shared integer "cancel every check with id <= N" plus a wake-up
                       pipe read by the worker's watchdog thread
====================  =======================================================================

Limits
------
``rlimit`` (z3 ``rlimit``, cvc5 ``rlimit-per``) is applied to every check: it is
deterministic, so it is what decides ``unknown`` (reason ``resource_limit``).  The wall clock
``wall_clock_s`` is the solver's own soft limit (z3: a thread that interrupts the context, as
z3's ``timeout`` parameter changes its search; cvc5 ``tlimit-per``; reason ``timeout``) and the parent kills and restarts the worker at
``wall_clock_s + grace`` (also ``timeout``, message ``killed``).  Cancellation: the watchdog
thread calls the backend's :meth:`Backend.interrupt` (z3: ``Context.interrupt()``, which is
thread-safe and works because z3's bindings release the GIL).  cvc5's Python bindings hold the
GIL for the whole of ``checkSat`` and expose no interrupt, so a cancelled cvc5 check runs to
its own resource/time limit; checks queued behind it are skipped without being started.

Backends are named by ``"module:attribute"`` so that the worker can import them after a spawn;
:func:`register_backend` adds one (tests register fault-injecting wrappers this way).
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
import types
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from argus.errors import ArgusError, ToolchainError
from argus.smt.results import SolverRun

__all__ = [
    "Backend",
    "BackendSpec",
    "Check",
    "Hello",
    "Limits",
    "Reply",
    "SessionOp",
    "Stop",
    "Worker",
    "WorkerDied",
    "backend_spec",
    "register_backend",
    "registered_backends",
]

# --------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Limits:
    """Per-check limits: ``rlimit`` resource units (0 = none), soft wall clock in seconds."""

    rlimit: int = 0
    wall_clock_s: float = 0.0


@dataclass(frozen=True)
class Check:
    """Check satisfiability, of a whole :class:`~argus.smt.query.Query` or of a session.

    With ``query`` the check is stateless: z3 first checks it in a context of its own with
    plain assertions on a part of the resource limit
    (:data:`argus.smt.session.PLAIN_SHARE`), then (and every other solver at once)
    the worker asserts the query in a scratch context (one per logic, kept warm), checks and
    retracts it.  Without, it checks the open session
    ``session`` plus ``assumptions`` (``(term, name or None)`` pairs, for this check only, as
    ``check-sat-assuming``).
    """

    qid: int
    limits: Limits
    query: Any = None
    assumptions: tuple[tuple[Any, str | None], ...] = ()
    session: int = 0
    model: bool = True
    core: bool = False
    #: check ``query`` in a context of its own instead of a warm scratch context, so that
    #: its resource use does not depend on the queries the worker answered before
    fresh: bool = False


@dataclass(frozen=True)
class SessionOp:
    """Change an incremental session: ``open``, ``close``, ``push``, ``pop`` (``arg`` levels),
    ``assert`` (``arg`` = ``(term, name or None)``)."""

    qid: int
    session: int
    op: str
    arg: Any = None


@dataclass(frozen=True)
class Stop:
    """Ask the worker to exit."""


@dataclass(frozen=True)
class Hello:
    """First message of a worker: its solver's version, or why it could not start."""

    solver: str
    version: str = ""
    options: tuple[tuple[str, str], ...] = ()
    error: str | None = None
    pid: int = 0


@dataclass(frozen=True)
class Reply:
    """Answer to request ``qid``.  Session operations reply with a run whose status is
    ``unknown`` and ``reason`` ``None`` on success, ``error`` on failure."""

    qid: int
    run: SolverRun


# --------------------------------------------------------------------------- backends


class Backend(ABC):
    """One solver inside a worker process, driven by the worker's request loop.

    A backend reports a solver's *answer* (``unknown`` with a reason is an answer) as a
    :class:`SolverRun`; an exception means the solver or the translation failed and is
    reported by the worker as reason ``crash`` or ``error``, after which the worker drops
    the context the exception happened in.
    """

    #: short solver name written into every :class:`SolverRun`
    solver: str = "solver"

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    @abstractmethod
    def version(self) -> str:
        """The solver's version string (goes into reports and reproducer headers)."""

    @abstractmethod
    def check_query(
        self, query: Any, limits: Limits, *, model: bool, core: bool, fresh: bool = False
    ) -> SolverRun:
        """Check one query statelessly; ``fresh``: in a new context (see :class:`Check`)."""

    @abstractmethod
    def open(self, session: int) -> None:
        """Create an empty incremental session with the given id."""

    @abstractmethod
    def close(self, session: int) -> None:
        """Drop a session (no error if it does not exist)."""

    @abstractmethod
    def push(self, session: int) -> None: ...

    @abstractmethod
    def pop(self, session: int, levels: int) -> None: ...

    @abstractmethod
    def add(self, session: int, term: Any, name: str | None) -> None:
        """Assert ``term`` (a Boolean argus term), tracked under ``name`` for unsat cores."""

    @abstractmethod
    def check(
        self,
        session: int,
        assumptions: Sequence[tuple[Any, str | None]],
        limits: Limits,
        *,
        model: bool,
        core: bool,
    ) -> SolverRun:
        """Check a session plus ``assumptions``."""

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Forget the stateless contexts (after a failure inside one)."""

    def idle(self) -> None:  # noqa: B027 - optional hook
        """Called when no request is waiting: a chance to prepare work ahead of time."""

    def begin(self) -> None:  # noqa: B027 - optional hook
        """A new request starts: forget interrupts meant for earlier ones."""

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """Stop the running check as soon as possible (called from another thread, possibly
        before the check has started, and possibly several times)."""


def _option_value(text: str) -> Any:
    """``"true"`` / ``"false"`` -> bool, integers -> int, anything else stays text (z3 params)."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(lowered)
    except ValueError:
        pass
    try:
        return float(lowered)
    except ValueError:
        return text


@dataclass
class _Scratch:
    """A warm session for stateless checks and the declarations it has seen."""

    logic: str
    session: Any
    declared: dict[str, Any] = field(default_factory=dict)
    uses: int = 0


class SessionBackend(Backend):
    """A real solver (``"z3"`` or ``"cvc5"``) through :class:`argus.smt.session.Session`.

    Stateless checks run in warm scratch sessions (push, assert, check, pop), one per logic
    and set of compatible declarations; a scratch session is rebuilt after
    ``recycle_after`` checks so that translation caches do not grow without bound.  Options are applied to every session and validated
    once at start-up by a trivial check, so a misspelled option fails the worker's start.
    """

    recycle_after = 4000
    max_scratch = 6

    def __init__(self, options: Mapping[str, str], *, solver: str) -> None:
        super().__init__(options)
        from argus.smt import session as session_module

        self._session_module = session_module
        self.solver = solver
        self._solver_options = {
            k: (_option_value(v) if solver == "z3" else v) for k, v in self.options.items()
        }
        self._scratch: list[_Scratch] = []  # most recently used last
        self._spare: tuple[tuple[str, int], Any] | None = None  # a pre-built fresh context
        self._spare_key: tuple[str, int] | None = None
        self._sessions: dict[int, Any] = {}
        self._running: Any = None
        self._interrupted = False
        self._validate()

    def _new_session(self, logic: str | None, rlimit: int = 0) -> Any:
        return self._session_module.Session(
            self.solver, logic=logic, rlimit=rlimit, options=self._solver_options
        )

    def _validate(self) -> None:
        from argus.smt.terms import bool_var

        try:
            probe = self._new_session(None)
            probe.add(bool_var("argus!probe"))
            answer = probe.check(model=False)
            probe.close()
        except Exception as err:
            raise ValueError(_first_line(err)) from None
        if answer.status != "sat":
            raise ValueError(f"a trivial check answered {answer.status} ({answer.message})")

    def version(self) -> str:
        probe = self._new_session(None)
        try:
            version = probe.version
        finally:
            probe.close()
        return version.decode() if isinstance(version, bytes) else str(version)

    # -- stateless checks

    def _scratch_session(self, query: Any, rlimit: int) -> Any:
        """A warm scratch session for ``query``: same logic, and no variable or function
        declared there under the query's names with other sorts or bounds (translators
        declare a name once per context)."""
        names = {**query.variables(), **query.functions()}
        for index, slot in enumerate(self._scratch):
            if slot.logic != query.logic or slot.uses >= self.recycle_after:
                continue
            if any(slot.declared.get(n, d) != d for n, d in names.items()):
                continue
            del self._scratch[index]
            break
        else:
            slot = _Scratch(query.logic, self._new_session(query.logic, rlimit))
            while len(self._scratch) >= self.max_scratch:
                self._scratch.pop(0).session.close()
        slot.declared.update(names)
        slot.uses += 1
        self._scratch.append(slot)  # most recently used last
        return slot.session

    def check_query(
        self, query: Any, limits: Limits, *, model: bool, core: bool, fresh: bool = False
    ) -> SolverRun:
        try:
            return self._check_query(query, limits, model=model, core=core, fresh=fresh)
        except Exception as err:
            self.reset()
            if query.logic == "ALL":
                raise
            # Did the solver refuse the query only because of its declared logic?  Then the
            # logic is wrong (argus's side), not the solver: report an error, not a crash.
            try:
                self._check_query(
                    replace(query, logic="ALL"), limits, model=False, core=False, fresh=True
                )
            except Exception:
                raise err from None
            message = f"rejected in the declared logic {query.logic}: {_first_line(err)}"
            return SolverRun(self.solver, "unknown", "error", message)

    def _check_query(
        self, query: Any, limits: Limits, *, model: bool, core: bool, fresh: bool
    ) -> SolverRun:
        if not core and not fresh and self.solver == "z3" and limits.rlimit:
            # first a context of its own with plain assertions (no push, no assumption
            # literals: z3 runs its whole preprocessing, which an incremental check skips and
            # which solves chains of definitions and modular arithmetic at once), on a part of
            # the budget; then, if that ran out, the incremental check with all of it (the two
            # search differently, and each wins on some queries).  Both deterministic.
            first = replace(limits, rlimit=max(1, limits.rlimit // self._session_module.PLAIN_SHARE))
            run = self._check_query(query, first, model=model, core=False, fresh=True)
            if run.status != "unknown" or run.reason != "resource_limit" or self._interrupted:
                return run
        if fresh:
            key = (query.logic, limits.rlimit)
            spare, self._spare = self._spare, None
            if spare is not None and spare[0] == key:
                session = spare[1]
            else:
                if spare is not None:
                    spare[1].close()
                session = self._new_session(*key)
            self._spare_key = key
            try:
                session.add_query(query, tracked=core)
                return self._check(session, (), limits, model=model, core=core)
            finally:
                session.close()
        session = self._scratch_session(query, limits.rlimit)
        session.push()
        try:
            session.add_query(query)
            return self._check(session, (), limits, model=model, core=core)
        finally:
            session.pop()

    def idle(self) -> None:
        """Build the next fresh context ahead of time (a new, empty session is as fresh as
        one built on demand), for the logic and limit of the last isolated check."""
        if self._spare is None and self._spare_key is not None:
            self._spare = (self._spare_key, self._new_session(*self._spare_key))

    def reset(self) -> None:
        if self._spare is not None:
            with contextlib.suppress(Exception):
                self._spare[1].close()
            self._spare = None
        for slot in self._scratch:
            with contextlib.suppress(Exception):
                slot.session.close()
        self._scratch.clear()

    # -- sessions

    def open(self, session: int) -> None:
        self.close(session)
        self._sessions[session] = self._new_session(None)

    def close(self, session: int) -> None:
        old = self._sessions.pop(session, None)
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()

    def _session(self, session: int) -> Any:
        try:
            return self._sessions[session]
        except KeyError:
            raise KeyError(f"no open session {session}") from None

    def push(self, session: int) -> None:
        self._session(session).push()

    def pop(self, session: int, levels: int) -> None:
        self._session(session).pop(levels)

    def add(self, session: int, term: Any, name: str | None) -> None:
        self._session(session).add(term, name)

    def check(self, session, assumptions, limits, *, model, core) -> SolverRun:
        return self._check(self._session(session), assumptions, limits, model=model, core=core)

    # -- the check itself

    def _check(self, session: Any, assumptions: Any, limits: Limits, *, model: bool, core: bool):
        self._running = session
        if self._interrupted:  # cancelled while the query was being set up
            self._running = None
            return SolverRun(self.solver, "unknown", "cancelled", "interrupted before the check")
        try:
            answer = session.check(
                list(assumptions),
                rlimit=limits.rlimit,
                timeout_s=limits.wall_clock_s,
                model=model,
                core=core,
            )
        finally:
            self._running = None
        reason = answer.reason
        if reason == "interrupted":
            # In incremental mode z3 says "canceled" for an interrupt, an exhausted rlimit
            # and an expired timeout alike: tell them apart by what happened.
            if self._interrupted:
                reason = "cancelled"
            elif limits.rlimit and (answer.resources or 0) >= limits.rlimit:
                reason = "resource_limit"
            elif limits.wall_clock_s and answer.seconds >= 0.9 * limits.wall_clock_s:
                reason = "timeout"
            else:
                reason = "unknown"
        if reason == "timeout":
            message = f"solver stopped at the wall-clock limit ({limits.wall_clock_s:g} s)"
        elif reason == "resource_limit":
            message = f"rlimit {limits.rlimit} exhausted"
        else:
            message = answer.message
        return SolverRun(
            self.solver,
            answer.status,
            reason,
            message if answer.status == "unknown" else "",
            answer.seconds,
            answer.resources,
            answer.model,
            answer.core,
        )

    def begin(self) -> None:
        self._interrupted = False

    def interrupt(self) -> None:
        self._interrupted = True
        session = self._running
        if session is not None:
            session.interrupt()


class Z3Backend(SessionBackend):
    """Z3 through :class:`argus.smt.session.Session` (interruptible)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options, solver="z3")


class Cvc5Backend(SessionBackend):
    """cvc5 through :class:`argus.smt.session.Session` (stops at its own limits only)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options, solver="cvc5")


def _first_line(err: BaseException) -> str:
    text = str(err)
    if text.startswith(("b'", 'b"')):  # z3 formats its messages as bytes literals
        text = text[2:-1].encode().decode("unicode_escape")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


@dataclass(frozen=True)
class BackendSpec:
    """How a worker builds its backend: ``factory`` is ``"module:attribute"``."""

    name: str
    factory: str
    options: tuple[tuple[str, str], ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def with_options(self, options: Mapping[str, str]) -> BackendSpec:
        merged = dict(self.options)
        merged.update(options)
        return BackendSpec(self.name, self.factory, tuple(sorted(merged.items())), self.kwargs)


_REGISTRY: dict[str, BackendSpec] = {
    "z3": BackendSpec("z3", "argus.smt.worker:Z3Backend"),
    "cvc5": BackendSpec("cvc5", "argus.smt.worker:Cvc5Backend"),
}


def register_backend(
    name: str, factory: str, *, options: Mapping[str, str] | None = None, **kwargs: Any
) -> BackendSpec:
    """Make ``name`` usable as a solver: ``factory`` is ``"module:Class"`` importable in a
    fresh interpreter; ``kwargs`` (picklable) are passed to it after the options."""
    spec = BackendSpec(name, factory, tuple(sorted((options or {}).items())), tuple(kwargs.items()))
    _REGISTRY[name] = spec
    return spec


def registered_backends() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def backend_spec(name: str | BackendSpec) -> BackendSpec:
    """The registered spec of a solver name (a spec passes through)."""
    if isinstance(name, BackendSpec):
        return name
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ArgusError(f"unknown solver {name!r}", hint=f"use one of: {known}") from None


def _load_backend(spec: BackendSpec) -> Backend:
    module_name, _, attribute = spec.factory.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    return factory(dict(spec.options), **dict(spec.kwargs))


# --------------------------------------------------------------------------- worker side


class _Cancellation:
    """Worker-side view of the parent's cancel channel (shared counter + wake-up pipe)."""

    def __init__(self, backend: Backend, cancel_through: Any, wake: Any) -> None:
        self.backend = backend
        self.cancel_through = cancel_through
        self.wake = wake
        self.lock = threading.Lock()
        self.running: int | None = None  # qid of the check in progress

    def cancelled(self, qid: int) -> bool:
        return qid <= self.cancel_through.value

    def start(self, qid: int) -> bool:
        """Mark ``qid`` as running unless it was already cancelled."""
        with self.lock:
            if self.cancelled(qid):
                return False
            self.running = qid
            self.backend.begin()
            return True

    def finish(self) -> None:
        with self.lock:
            self.running = None

    #: while a cancelled check is still running, interrupt it again this often (seconds):
    #: an interrupt that lands before the solver starts checking may be forgotten by it
    REPEAT_S = 0.05

    def watch(self) -> None:
        """Watchdog thread: interrupt the running check once it is cancelled (and keep at it
        until the check returns)."""
        repeating = False
        while True:
            try:
                if self.wake.poll(self.REPEAT_S if repeating else None):
                    self.wake.recv_bytes()
            except (EOFError, OSError):
                return
            with self.lock:
                repeating = self.running is not None and self.cancelled(self.running)
                if repeating:
                    with contextlib.suppress(Exception):
                        self.backend.interrupt()


def _serve(conn: Any, wake: Any, cancel_through: Any, spec: BackendSpec) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        backend = _load_backend(spec)
        version = backend.version()
    except Exception as err:  # the backend or one of its options was rejected
        conn.send(Hello(spec.name, error=_first_line(err), pid=os.getpid()))
        return
    conn.send(Hello(spec.name, version, spec.options, pid=os.getpid()))
    cancellation = _Cancellation(backend, cancel_through, wake)
    threading.Thread(target=cancellation.watch, name="argus-smt-watchdog", daemon=True).start()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if isinstance(request, Stop):
            return
        if isinstance(request, Check):
            reply = _run_check(backend, cancellation, request, spec.name)
        else:
            reply = _run_session_op(backend, request, spec.name)
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return
        if not conn.poll():
            with contextlib.suppress(Exception):
                backend.idle()


def _run_check(backend: Backend, cancellation: _Cancellation, request: Check, name: str) -> Reply:
    if not cancellation.start(request.qid):
        return Reply(request.qid, SolverRun(name, "unknown", "cancelled", "not started"))
    started = time.perf_counter()
    try:
        if request.query is not None:
            run = backend.check_query(
                request.query,
                request.limits,
                model=request.model,
                core=request.core,
                fresh=request.fresh,
            )
        else:
            run = backend.check(
                request.session,
                request.assumptions,
                request.limits,
                model=request.model,
                core=request.core,
            )
        if run.status == "unknown" and cancellation.cancelled(request.qid):
            run = replace(run, reason="cancelled")
        # the solver's own check time when the backend measured it, else the whole request
        run = replace(run, solver=name, seconds=run.seconds or time.perf_counter() - started)
    except Exception as err:
        run = SolverRun(
            name,
            "unknown",
            _exception_reason(err),
            _one_line(err),
            seconds=time.perf_counter() - started,
        )
        with contextlib.suppress(Exception):
            if request.query is not None:
                backend.reset()
    finally:
        cancellation.finish()
    return Reply(request.qid, run)


def _run_session_op(backend: Backend, request: SessionOp, name: str) -> Reply:
    try:
        match request.op:
            case "open":
                backend.open(request.session)
            case "close":
                backend.close(request.session)
            case "push":
                backend.push(request.session)
            case "pop":
                backend.pop(request.session, int(request.arg))
            case "assert":
                term, label = request.arg
                backend.add(request.session, term, label)
            case _:
                raise ValueError(f"unknown session operation {request.op!r}")
    except Exception as err:
        return Reply(request.qid, SolverRun(name, "unknown", "error", _one_line(err)))
    return Reply(request.qid, SolverRun(name, "unknown"))


def _exception_reason(err: BaseException) -> str:
    """``error`` for queries the translator refused, ``crash`` for everything else."""
    if isinstance(err, (TypeError, ValueError, NotImplementedError, KeyError, ArgusError)):
        return "error"
    return "crash"


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {_first_line(err)}"


# --------------------------------------------------------------------------- parent side


class WorkerDied(Exception):
    """The worker process is gone (crash, kill, or it never started)."""


#: modules the fork server imports once, so that a restarted worker starts warm
_PRELOAD = [
    "argus.smt.worker",
    "argus.smt.session",
    "argus.smt.z3_backend",
    "argus.smt.cvc5_backend",
]


def _mp_context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        # Restarts fork from the server: keep the solvers' import cost out of them.
        context.set_forkserver_preload(_PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start a worker without re-running the caller's ``__main__`` in it.

    spawn / forkserver children normally re-import the parent's main script (which re-runs a
    script without a ``__name__ == "__main__"`` guard, and imports whatever it imports).  A
    worker needs only argus, so the start sees a bare stand-in main module.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


@dataclass
class _Pending:
    qid: int
    hard_deadline: float | None  # monotonic time after which the worker is killed


@dataclass
class Worker:
    """Parent-side handle of one warm solver process.

    Requests are answered in order; :meth:`send` returns at once and :meth:`poll` /
    :meth:`receive` collect replies.  The handle restarts its process on demand
    (:meth:`ensure_running`) after a crash or a kill, and counts restarts.
    """

    spec: BackendSpec
    startup_timeout_s: float = 60.0
    restarts: int = 0
    generation: int = 0  # incremented at every start: state held by older processes is gone
    hello: Hello | None = None
    _process: Any = None
    _conn: Any = None
    _wake: Any = None
    _cancel_through: Any = None
    _pending: list[_Pending] = field(default_factory=list)

    # -- life cycle ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def connection(self) -> Any:
        return self._conn

    @property
    def sentinel(self) -> Any:
        return self._process.sentinel

    def start(self) -> Hello:
        """Start the process and wait for its ``Hello``; a rejected backend or option
        raises :class:`ArgusError` with the solver's message."""
        self.launch()
        return self.await_hello()

    def launch(self) -> None:
        """Start the process without waiting for it (see :meth:`await_hello`)."""
        context = _mp_context()
        parent_conn, child_conn = context.Pipe(duplex=True)
        wake_read, wake_write = context.Pipe(duplex=False)
        self._cancel_through = context.Value("q", -1, lock=False)
        process = context.Process(
            target=_serve,
            args=(child_conn, wake_read, self._cancel_through, self.spec),
            name=f"argus-smt-{self.spec.name}",
            daemon=True,
        )
        with _main_module_hidden():
            process.start()
        child_conn.close()
        wake_read.close()
        self._process, self._conn, self._wake = process, parent_conn, wake_write
        self._pending = []
        self.hello = None
        self.generation += 1

    def await_hello(self) -> Hello:
        """Wait for the ``Hello`` of a launched process (raises as :meth:`start`)."""
        if self.hello is not None:
            return self.hello
        conn, process = self._conn, self._process
        if not conn.poll(self.startup_timeout_s):
            self.kill()
            raise ToolchainError(
                f"solver worker {self.spec.name!r} did not start within "
                f"{self.startup_timeout_s:.0f} s"
            )
        try:
            hello = conn.recv()
        except (EOFError, OSError):
            code = process.exitcode
            self.kill()
            raise ToolchainError(
                f"solver worker {self.spec.name!r} died while starting ({_exit_text(code)})"
            ) from None
        if hello.error is not None:
            self.kill()
            raise ArgusError(
                f"solver {self.spec.name!r} rejected its configuration: {hello.error}",
                hint="check the solver name and every --options NAME=VALUE for it",
            )
        self.hello = hello
        return hello

    def ensure_running(self) -> bool:
        """Start (or restart) the process if it is not alive; True when it was restarted."""
        if self.alive:
            return False
        restart = self.generation > 0
        self.kill()
        self.start()
        if restart:
            self.restarts += 1
        return restart

    def kill(self) -> None:
        """Kill the process at once (SIGKILL) and forget what it was doing."""
        process = self._process
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join(timeout=5)
            with contextlib.suppress(Exception):
                process.close()
        for end in (self._conn, self._wake):
            if end is not None:
                with contextlib.suppress(Exception):
                    end.close()
        self._process = self._conn = self._wake = None
        self._pending = []

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the worker to exit; kill it if it does not within ``timeout_s``."""
        if self.alive:
            with contextlib.suppress(Exception):
                self._conn.send(Stop())
            self._process.join(timeout=timeout_s)
        self.kill()

    def exit_description(self) -> str:
        """How the process ended, e.g. ``killed by SIGKILL``."""
        if self._process is None:
            return "not running"
        return _exit_text(self._process.exitcode)

    # -- requests --------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def earliest_start(self) -> float:
        """When a request sent now can start at the latest: after the queued checks' hard
        deadlines (checks without a deadline count as starting now)."""
        deadlines = [p.hard_deadline for p in self._pending if p.hard_deadline is not None]
        return max([time.monotonic(), *deadlines])

    def send(self, request: Check | SessionOp, hard_deadline: float | None = None) -> None:
        """Queue a request.  Raises :class:`WorkerDied` if the pipe is broken."""
        try:
            self._conn.send(request)
        except (BrokenPipeError, EOFError, OSError, AttributeError) as err:
            raise WorkerDied(self.exit_description()) from err
        self._pending.append(_Pending(request.qid, hard_deadline))

    def cancel_through(self, qid: int) -> None:
        """Cancel every check with id <= ``qid`` (running or queued)."""
        if self._cancel_through is None or qid <= self._cancel_through.value:
            return
        self._cancel_through.value = qid
        with contextlib.suppress(Exception):
            self._wake.send_bytes(b"c")

    def pending_ids(self) -> list[int]:
        return [p.qid for p in self._pending]

    def next_deadline(self) -> float | None:
        """The hard deadline of the request the worker is (or will next be) working on."""
        for pending in self._pending:
            return pending.hard_deadline
        return None

    def receive(self) -> Reply:
        """Read one reply (blocking).  Raises :class:`WorkerDied` when the process is gone."""
        try:
            reply = self._conn.recv()
        except (EOFError, OSError, AttributeError) as err:
            if self._process is not None:
                self._process.join(timeout=1)
            raise WorkerDied(self.exit_description()) from err
        if self._pending and self._pending[0].qid == reply.qid:
            self._pending.pop(0)
        else:  # out of order should not happen; drop the matching entry if any
            self._pending = [p for p in self._pending if p.qid != reply.qid]
        return reply

    def request(self, request: Check | SessionOp, timeout_s: float | None = None) -> Reply:
        """Send one request and wait for its reply, draining older replies first.

        A worker that does not answer within ``timeout_s`` is killed and
        :class:`WorkerDied` is raised.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.send(request, deadline)
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait([self._conn, self.sentinel], remaining)
            if not ready:
                self.kill()
                raise WorkerDied("killed after the wall-clock limit")
            reply = self.receive()
            if reply.qid == request.qid:
                return reply


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"
