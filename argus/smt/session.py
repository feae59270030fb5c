"""In-process incremental solver sessions over one solver (Z3 or cvc5).

A :class:`Session` owns one solver and one translator.  It keeps an assertion stack
(``push`` / ``pop``), asserts the bounds of every variable the first time a term mentions
it (scoped like the assertion that introduced it), tracks named assertions for unsat cores,
and answers :meth:`Session.check` with a :class:`CheckAnswer`: status, the reason of an
``unknown``, the model as Python values, the core as assertion names, the resource limit
applied and the resources used.  It is the layer the portfolio's worker processes wrap.

Named assertions and assumptions are tracked through fresh indicator literals ``p`` with
``p => φ`` asserted and ``p`` assumed at each check, so both solvers report cores the same
way (the failed assumptions) and one formula may carry two names.

Resource limits (deterministic; they decide ``unknown`` reproducibly):

* Z3: ``rlimit`` is set before each check and counts from the units already spent;
  resources used = growth of the ``rlimit count`` statistic during the check.
* cvc5: ``rlimit-per`` can only be set before a solver is initialized, so a check that asks
  for a limit the solver was not built with rebuilds the solver on the same term manager and
  re-asserts the (cached) assertion stack; resources used = growth of
  ``resource::resourceUnitsUsed``.

A wall-clock ``timeout_s`` (Z3: a thread that interrupts the context, so the limit cannot change
z3's search; cvc5: ``tlimit-per``) is only a safety net; its expiry is reported as reason
``timeout``, never as ``resource_limit``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from argus.errors import ArgusError
from argus.smt.query import Query
from argus.smt.terms import BOOL, Term, domain_constraints, lift, subterms

__all__ = ["SOLVERS", "CheckAnswer", "Session", "solve"]

#: solver names a session accepts
SOLVERS = ("z3", "cvc5")


@dataclass(frozen=True)
class CheckAnswer:
    """One check's answer.

    ``status`` is ``"sat"``, ``"unsat"`` or ``"unknown"``; ``reason`` is ``None`` for sat/unsat,
    else ``"resource_limit"`` (the recorded ``rlimit`` ran out), ``"timeout"`` (wall clock),
    ``"interrupted"`` or ``"unknown"`` (the solver gave up; ``message`` has its own words).
    ``model`` maps variable names to ints/bools and function names to
    ``{argument tuple: value, None: default}`` tables; ``core`` lists the names of the named
    assertions and assumptions an ``unsat`` answer used.
    """

    solver: str
    status: str
    reason: str | None = None
    message: str = ""
    seconds: float = 0.0
    rlimit: int = 0
    resources: int | None = None
    model: dict[str, Any] | None = None
    core: tuple[str, ...] | None = None
    statistics: Mapping[str, int | float] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        """A decided answer (sat or unsat)."""
        return self.status in ("sat", "unsat")


Assumptions = Mapping[str, Term] | Iterable[tuple[Term, str | None] | Term]


class Session:
    """An incremental context over one solver (``"z3"`` or ``"cvc5"``).

    ``logic`` (default: all theories) fixes the solver's logic; ``rlimit`` is the default
    per-check resource limit (0 = none); ``timeout_s`` the default wall-clock safety net
    (0 = none); ``options`` are passed to the solver verbatim (z3 parameters / cvc5 options).
    """

    def __init__(
        self,
        solver: str = "z3",
        *,
        logic: str | None = None,
        rlimit: int = 0,
        timeout_s: float = 0.0,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if solver not in SOLVERS:
            raise ArgusError(f"unknown solver {solver!r}", hint=f"use one of: {', '.join(SOLVERS)}")
        self.solver = solver
        self.logic = logic
        self.rlimit = int(rlimit)
        self.timeout_s = float(timeout_s)
        self._driver: _Driver = (
            _Z3Driver(logic, options or {})
            if solver == "z3"
            else _Cvc5Driver(logic, options or {}, self.rlimit)
        )
        # one frame per scope: (user terms asserted, tracked (literal, name), variables bounded)
        self._frames: list[_Frame] = [_Frame()]
        self._counter = 0

    # ---- context management
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the solver."""
        self._driver.close()

    @property
    def version(self) -> str:
        return self._driver.version()

    @property
    def level(self) -> int:
        """Number of open ``push`` scopes."""
        return len(self._frames) - 1

    # ---- assertions
    def declare(self, *terms: Term) -> None:
        """Declare the variables and functions of ``terms`` and assert their bounds now."""
        for t in terms:
            self._driver.translate(t)
            self._bound(t)

    def add(self, term: Term, name: str | None = None) -> None:
        """Assert a Bool term, tracked under ``name`` (for unsat cores) when given."""
        term = lift(term, BOOL)
        self._bound(term)
        frame = self._frames[-1]
        frame.terms.append(term)
        expr = self._driver.translate(term)
        if name is None:
            self._driver.add(expr)
            return
        literal = self._driver.fresh_literal(self._fresh_name())
        self._driver.add(self._driver.implies(literal, expr))
        frame.tracked.append((literal, name))

    def add_query(self, query: Query, *, tracked: bool = True) -> None:
        """Assert a query's domain constraints and assertions (names kept for unsat cores,
        unless ``tracked`` is false: then they are plain assertions, which z3's preprocessing
        may rewrite and eliminate — definitions solved away, for one — where a tracked one
        stays an opaque implication of its literal)."""
        for d in query.domain:
            self.add(d)
        for term, name in query.assertions:
            self.add(term, name if tracked else None)

    def push(self) -> None:
        """Open a scope."""
        self._driver.push()
        self._frames.append(_Frame())

    def pop(self, levels: int = 1) -> None:
        """Close ``levels`` scopes, dropping what was asserted in them."""
        if levels < 0 or levels > self.level:
            raise ArgusError(f"cannot pop {levels} scopes: {self.level} open")
        if levels:
            self._driver.pop(levels)
            del self._frames[-levels:]

    def _fresh_name(self) -> str:
        self._counter += 1
        return f"argus!track!{self._counter}"

    def _bound(self, term: Term) -> None:
        """Assert the bounds of the variables of ``term`` not bounded in an open scope."""
        known = set().union(*(f.bounded for f in self._frames))
        fresh = [
            t
            for t in subterms(term)
            if (t.op == "var" and t.sort.is_int) or (t.op == "apply" and t.params[0].bounds)
        ]
        fresh = [t for t in fresh if t not in known]
        if not fresh:
            return
        frame = self._frames[-1]
        for c in domain_constraints(*fresh):
            frame.terms.append(c)
            self._driver.add(self._driver.translate(c))
        frame.bounded.update(fresh)

    # ---- checking
    def check(
        self,
        assumptions: Assumptions = (),
        *,
        rlimit: int | None = None,
        timeout_s: float | None = None,
        model: bool = True,
        core: bool = False,
        statistics: bool = False,
    ) -> CheckAnswer:
        """``check-sat-assuming``: satisfiability of the assertions plus ``assumptions``.

        ``assumptions`` (terms, ``(term, name)`` pairs or a ``{name: term}`` mapping) hold for
        this check only; named ones can appear in the core.  ``rlimit`` / ``timeout_s``
        override the session defaults for this check.  ``statistics=True`` also collects the
        solver's full statistics table (it costs more than a small check itself).
        """
        pairs = _assumption_pairs(assumptions)
        rlimit = self.rlimit if rlimit is None else int(rlimit)
        timeout_s = self.timeout_s if timeout_s is None else float(timeout_s)
        driver = self._driver
        scoped = bool(pairs)
        if scoped:
            self.push()
        try:
            for term, name in pairs:
                self.add(term, name)
            literals = [lit for f in self._frames for lit, _ in f.tracked]
            start = time.perf_counter()
            status, reason, message, resources = driver.check(literals, rlimit, timeout_s)
            seconds = time.perf_counter() - start
            values = None
            if status == "sat" and model:
                roots = [t for f in self._frames for t in f.terms]
                values = driver.model_values(roots)
            names = None
            if status == "unsat" and core:
                failed = driver.failed(literals)
                by_literal = [(lit, name) for f in self._frames for lit, name in f.tracked]
                names = tuple(
                    dict.fromkeys(
                        name
                        for lit, name in by_literal
                        if any(lit is x or driver.same(lit, x) for x in failed)
                    )
                )
            return CheckAnswer(
                solver=self.solver,
                status=status,
                reason=reason,
                message=message,
                seconds=seconds,
                rlimit=rlimit,
                resources=resources,
                model=values,
                core=names,
                statistics=driver.statistics() if statistics else {},
            )
        finally:
            if scoped:
                self.pop()

    def interrupt(self) -> None:
        """Ask a running check to stop (from another thread); it answers unknown ``interrupted``.

        Z3 only: cvc5's Python API has no interrupt, so a cvc5 check stops at its limits.
        """
        self._driver.interrupt()


@dataclass
class _Frame:
    terms: list[Term] = field(default_factory=list)
    tracked: list[tuple[Any, str]] = field(default_factory=list)
    bounded: set[Term] = field(default_factory=set)


def _assumption_pairs(assumptions: Assumptions) -> list[tuple[Term, str | None]]:
    if isinstance(assumptions, Mapping):
        return [(t, n) for n, t in assumptions.items()]
    out: list[tuple[Term, str | None]] = []
    for a in assumptions:
        if isinstance(a, Term):
            out.append((a, None))
        else:
            term, name = a
            out.append((term, name))
    return out


def solve(
    query: Query,
    solver: str = "z3",
    *,
    rlimit: int = 0,
    timeout_s: float = 0.0,
    model: bool = True,
    core: bool = False,
    options: Mapping[str, Any] | None = None,
) -> CheckAnswer:
    """Check one query in a fresh session of ``solver`` (logic from the query).  Without an
    unsat core and with a resource limit, z3 first gets a part of the limit with plain
    assertions (its whole preprocessing runs), then the whole limit incrementally (tracked
    assertions), as the solver workers do."""
    if solver == "z3" and rlimit and not core:
        with Session(solver, logic=query.logic, rlimit=rlimit // PLAIN_SHARE or 1, timeout_s=timeout_s,
                     options=options) as s:
            s.add_query(query, tracked=False)
            answer = s.check(model=model)
        if answer.status != "unknown" or answer.reason != "resource_limit":
            return answer
    with Session(
        solver, logic=query.logic, rlimit=rlimit, timeout_s=timeout_s, options=options
    ) as s:
        s.add_query(query)
        return s.check(model=model, core=core)


#: z3 first spends 1 / PLAIN_SHARE of the resource limit with plain assertions (:func:`solve`).
#: A quarter: the hardest accumulator lemmas of the Hopper GEMMs take 1.3-1.7·10^8 units and
#: 10-35 s there, but over 300 s (bf16) or past 900 s (fp16) in the incremental check that
#: follows when the plain one runs out
PLAIN_SHARE = 4


# --------------------------------------------------------------------------- drivers


class _Driver:
    """What a session needs from a solver (native expressions are opaque)."""

    def version(self) -> str:
        raise NotImplementedError

    def translate(self, term: Term) -> Any:
        raise NotImplementedError

    def fresh_literal(self, name: str) -> Any:
        raise NotImplementedError

    def implies(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def add(self, expr: Any) -> None:
        raise NotImplementedError

    def push(self) -> None:
        raise NotImplementedError

    def pop(self, levels: int) -> None:
        raise NotImplementedError

    def check(
        self, literals: Sequence[Any], rlimit: int, timeout_s: float
    ) -> tuple[str, str | None, str, int | None]:
        raise NotImplementedError

    def model_values(self, roots: Sequence[Term]) -> dict[str, Any]:
        raise NotImplementedError

    def failed(self, literals: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def same(self, a: Any, b: Any) -> bool:
        return bool(a == b)

    def statistics(self) -> dict[str, int | float]:
        return {}

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Z3Driver(_Driver):
    def __init__(self, logic: str | None, options: Mapping[str, Any]) -> None:
        import z3

        from argus.smt.logic import STANDARD_LOGICS
        from argus.smt.z3_backend import Z3Translator

        self.z3 = z3
        self.translator = Z3Translator(z3.Context())
        ctx = self.translator.ctx
        self.solver = (
            z3.SolverFor(logic, ctx=ctx) if logic in STANDARD_LOGICS else z3.Solver(ctx=ctx)
        )
        for key, value in options.items():
            self.solver.set(key, value)
        self.spent = 0  # rlimit units consumed so far

    def version(self) -> str:
        return self.z3.get_full_version()

    def translate(self, term: Term) -> Any:
        return self.translator.translate(term)

    def fresh_literal(self, name: str) -> Any:
        return self.z3.FreshBool(name, ctx=self.translator.ctx)

    def implies(self, a: Any, b: Any) -> Any:
        return self.z3.Implies(a, b)

    def add(self, expr: Any) -> None:
        self.solver.add(expr)

    def push(self) -> None:
        self.solver.push()

    def pop(self, levels: int) -> None:
        self.solver.pop(levels)

    def check(self, literals, rlimit, timeout_s):
        z3 = self.z3
        self.solver.set("rlimit", int(rlimit))
        # The wall clock is kept by a thread that interrupts the context, not by z3's own
        # ``timeout`` parameter: with that parameter set, z3 searched differently on the same
        # query (a GEMM operand lemma proved in 22 s without it ran past 4 minutes with it),
        # so a safety net must not change what the solver does before it fires.
        expired = _Alarm(timeout_s, self.translator.ctx.interrupt) if timeout_s > 0 else None
        try:
            result = self.solver.check(*literals)
        finally:
            if expired is not None:
                expired.stop()
        used = self._rlimit_count()
        resources = max(0, used - self.spent) if used is not None else None
        if used is not None:
            self.spent = used
        if result == z3.sat:
            return "sat", None, "", resources
        if result == z3.unsat:
            return "unsat", None, "", resources
        message = self.solver.reason_unknown()
        reason = _z3_reason(message)
        if expired is not None and expired.fired:
            reason, message = "timeout", f"wall-clock limit {timeout_s:g} s reached"
        elif rlimit and resources is not None and resources >= rlimit:
            reason = "resource_limit"  # z3 reports an exhausted rlimit as "canceled"
        return "unknown", reason, message, resources

    def _rlimit_count(self) -> int | None:
        try:
            return int(self.solver.statistics().get_key_value("rlimit count"))
        except self.z3.Z3Exception:
            return None

    def statistics(self) -> dict[str, int | float]:
        stats = self.solver.statistics()
        return {k: stats.get_key_value(k) for k in stats.keys()}

    def model_values(self, roots):
        return self.translator.model_values(self.solver.model(), roots)

    def failed(self, literals):
        return list(self.solver.unsat_core())

    def same(self, a: Any, b: Any) -> bool:
        return a.eq(b)

    def interrupt(self) -> None:
        self.translator.ctx.interrupt()


class _Alarm:
    """Calls ``action`` once ``seconds`` have passed, and again every ``repeat_s`` after that
    until :meth:`stop` (an interrupt that reaches z3 before its check has begun is forgotten)."""

    def __init__(self, seconds: float, action, repeat_s: float = 0.5) -> None:
        import threading

        self.fired = False
        self._done = threading.Event()
        self._action, self._seconds, self._repeat = action, seconds, repeat_s
        self._thread = threading.Thread(target=self._run, name="argus-z3-alarm", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = self._seconds
        while not self._done.wait(wait):
            self.fired = True
            self._action()
            wait = self._repeat

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _z3_reason(message: str) -> str:
    text = message.lower()
    if "resource" in text or "rlimit" in text:
        return "resource_limit"
    if "timeout" in text:
        return "timeout"
    if "cancel" in text or "interrupt" in text:
        return "interrupted"
    return "unknown"


class _Cvc5Driver(_Driver):
    def __init__(self, logic: str | None, options: Mapping[str, Any], rlimit: int) -> None:
        import cvc5

        from argus.smt.cvc5_backend import Cvc5Translator

        self.cvc5 = cvc5
        self.translator = Cvc5Translator(cvc5.TermManager())
        self.logic = logic or "ALL"
        self.options = {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()
        }
        self._stack: list[list[Any]] = [[]]
        self._build(rlimit)

    def _build(self, rlimit: int) -> None:
        """A fresh solver with ``rlimit-per`` = ``rlimit``, holding the current assertion stack."""
        s = self.cvc5.Solver(self.translator.tm)
        s.setOption("produce-models", "true")
        s.setOption("incremental", "true")
        s.setOption("produce-unsat-assumptions", "true")
        if rlimit:
            s.setOption("rlimit-per", str(int(rlimit)))
        for key, value in self.options.items():
            s.setOption(key, value)
        s.setLogic(self.logic)
        for depth, frame in enumerate(self._stack):
            if depth:
                s.push()
            for expr in frame:
                s.assertFormula(expr)
        self.solver = s
        self.rlimit = rlimit
        self.spent = 0

    def version(self) -> str:
        return self.solver.getVersion()

    def translate(self, term: Term) -> Any:
        return self.translator.translate(term)

    def fresh_literal(self, name: str) -> Any:
        return self.translator.tm.mkConst(self.translator.tm.getBooleanSort(), name)

    def implies(self, a: Any, b: Any) -> Any:
        return self.translator.tm.mkTerm(self.cvc5.Kind.IMPLIES, a, b)

    def add(self, expr: Any) -> None:
        self.solver.assertFormula(expr)
        self._stack[-1].append(expr)

    def push(self) -> None:
        self.solver.push()
        self._stack.append([])

    def pop(self, levels: int) -> None:
        self.solver.pop(levels)
        del self._stack[-levels:]

    def check(self, literals, rlimit, timeout_s):
        if rlimit != self.rlimit:
            self._build(rlimit)
        self.solver.setOption("tlimit-per", str(int(timeout_s * 1000)) if timeout_s > 0 else "0")
        result = self.solver.checkSatAssuming(*literals) if literals else self.solver.checkSat()
        used = self._resources_used()
        resources = max(0, used - self.spent) if used is not None else None
        if used is not None:
            self.spent = used
        if result.isSat():
            return "sat", None, "", resources
        if result.isUnsat():
            return "unsat", None, "", resources
        explanation = result.getUnknownExplanation()
        return "unknown", _cvc5_reason(explanation), str(explanation), resources

    def _resources_used(self) -> int | None:
        stats = self.solver.getStatistics().get(True, True)
        entry = stats.get("resource::resourceUnitsUsed")
        return int(entry["value"]) if entry is not None else None

    def statistics(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {}
        for key, entry in self.solver.getStatistics().get(True, False).items():
            value = entry.get("value") if isinstance(entry, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = value
        return out

    def model_values(self, roots):
        return self.translator.model_values(self.solver, roots)

    def failed(self, literals):
        return list(self.solver.getUnsatAssumptions())


def _cvc5_reason(explanation: Any) -> str:
    name = getattr(explanation, "name", str(explanation))
    if name == "RESOURCEOUT":
        return "resource_limit"
    if name == "TIMEOUT":
        return "timeout"
    if name == "INTERRUPTED":
        return "interrupted"
    return "unknown"
