"""What a solver query comes back as: :class:`Proved`, :class:`Refuted` or :class:`Unknown`.

The three results are frozen values, shared by the portfolio (:mod:`argus.smt.portfolio`) and
differential testing (:mod:`argus.smt.diff`).  Each records every solver run that contributed
(:class:`SolverRun`), so a caller can always tell *who* decided and *how much* it cost.

Only :class:`Proved` is truthy.  ``if result:`` therefore never lets an :class:`Unknown` pass,
and ``unknown`` is a rejection with its reasons, never a proof.

================  ==========================================================================
``Proved``         the query is unsatisfiable (``prove``: the goal follows from the
                   hypotheses and every division in it is defined); solver, resources, core
``Refuted``        a model, checked by concrete evaluation against the original terms
``Unknown``        every solver failed; one :class:`SolverRun` per solver says why
================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Union

__all__ = [
    "FAILURE_REASONS",
    "Model",
    "Proved",
    "Refuted",
    "Result",
    "SolverRun",
    "Unknown",
]

#: A model: variable name -> Python ``int`` / ``bool``.  Uninterpreted functions map to a
#: ``{argument tuple: value}`` table plus the default under the key ``None``.
Model = Mapping[str, object]

Status = Literal["sat", "unsat", "unknown"]

#: Why a run produced no usable answer.  ``resource_limit`` is reproducible (the recorded
#: ``rlimit`` ran out); ``timeout`` is the wall-clock safety net (the message says whether the
#: solver stopped itself or its worker was killed); ``unknown`` carries the solver's own reason;
#: ``crash`` the worker's death or the solver's exception; ``invalid_model`` a ``sat`` answer
#: whose model does not satisfy the query; ``cancelled`` a run stopped because another solver
#: answered first; ``error`` a query the solver could not take (e.g. an unsupported term).
FAILURE_REASONS = (
    "resource_limit",
    "timeout",
    "unknown",
    "crash",
    "invalid_model",
    "cancelled",
    "error",
)


@dataclass(frozen=True)
class SolverRun:
    """One solver's answer to one query.

    ``status`` is what the solver said; ``reason`` is ``None`` for a usable ``sat``/``unsat``
    and one of :data:`FAILURE_REASONS` otherwise (a ``sat`` with a bad model keeps
    ``status="sat"`` and gets ``reason="invalid_model"``).  ``seconds`` is the solver's own
    check time (for a killed worker: the time until the kill); ``resources`` the resource
    units the check consumed (z3 ``rlimit count``, cvc5 ``resourceUnitsUsed``), ``None`` when
    unknown.
    """

    solver: str
    status: Status
    reason: str | None = None
    message: str = ""
    seconds: float = 0.0
    resources: int | None = None
    model: Model | None = None
    core: tuple[str, ...] | None = None

    @property
    def ok(self) -> bool:
        """A usable ``sat`` or ``unsat`` answer."""
        return self.reason is None and self.status in ("sat", "unsat")

    def describe(self) -> str:
        """One line: ``z3: unsat (12345 units, 0.003 s)`` or ``cvc5: resource_limit (...)``."""
        what = self.status if self.reason is None else self.reason
        extra = []
        if self.message:
            extra.append(self.message)
        if self.resources is not None:
            extra.append(f"{self.resources} units")
        extra.append(f"{self.seconds:.3f} s")
        return f"{self.solver}: {what} ({', '.join(extra)})"


@dataclass(frozen=True)
class Proved:
    """The query has no model.  ``core`` names the assertions used, when one was requested."""

    solver: str
    resources: int | None = None
    seconds: float = 0.0
    core: tuple[str, ...] | None = None
    runs: tuple[SolverRun, ...] = field(default=(), compare=False)

    verdict = "proved"
    status = "unsat"

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True)
class Refuted:
    """The query has a model, checked by evaluating every original assertion on it.

    ``model`` maps each variable of the query to a Python ``int``/``bool``.  ``violation`` says
    what the model breaks: ``"goal"`` (the goal evaluates to false) or ``"definedness"`` (a
    division or modulo in the query divides by zero) for :meth:`Portfolio.prove`, ``None``
    for a plain satisfiability check.
    """

    solver: str
    model: Model
    resources: int | None = None
    seconds: float = 0.0
    violation: str | None = None
    runs: tuple[SolverRun, ...] = field(default=(), compare=False)

    verdict = "refuted"
    status = "sat"

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Unknown:
    """No solver decided the query; ``runs`` holds one failed run per solver, with its reason."""

    runs: tuple[SolverRun, ...]

    verdict = "unknown"
    status = "unknown"

    def __bool__(self) -> bool:
        return False

    @property
    def reasons(self) -> dict[str, str]:
        """Solver name -> failure reason (one of :data:`FAILURE_REASONS`)."""
        return {run.solver: run.reason or run.status for run in self.runs}

    @property
    def timed_out(self) -> bool:
        """True when some solver hit the wall-clock limit (not reproducible)."""
        return any(run.reason == "timeout" for run in self.runs)

    @property
    def reason(self) -> str:
        """Human-readable summary, one clause per solver."""
        return "; ".join(run.describe() for run in self.runs) or "no solver ran"

    def __str__(self) -> str:
        return f"unknown: {self.reason}"


Result = Union[Proved, Refuted, Unknown]
