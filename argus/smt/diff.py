"""Differential testing of SMT solvers: an enumeration oracle, the classifier, campaigns.

Every query is run on each solver *to completion* (no racing), each ``sat`` model is checked
by concrete evaluation (:func:`argus.smt.portfolio.check_model`), and, when the variables'
domains are small, a third and independent oracle enumerates every point
(:func:`enumerate_query`).  :func:`classify` then decides one category per query:

=====================  ======================================================================
category               decided by
=====================  ======================================================================
``agree``              every solver gave the same usable answer, consistent with the oracle
``soundness``          a solver said ``unsat`` although a point satisfies the query (a valid
                       model from another solver, or the enumeration's witness), or said
                       ``sat`` while enumeration proves ``unsat``; ``wrong`` names it
``invalid_model``      a solver said ``sat`` with a model that falsifies an assertion
``underspecified``     answers disagree (or a model cannot be checked) only because of
                       division / modulo by zero, which SMT-LIB leaves unspecified: a model
                       whose evaluation divides by zero, or an enumeration whose only
                       non-false points divide by zero.  Not a solver bug.
``crash``              a solver's worker died or the solver raised
``error``              argus could not pose the query to a solver (translation refused)
``unknown_vs_answer``  one solver answered, another gave ``unknown`` (resource limit,
                       wall clock, or the solver's own reason)
``both_unknown``       no solver answered
``performance_gap``    same correct answer, the slower solver took >= ``gap`` times as long
                       (and at least ``gap_floor_s``)
``internal``           argus's own oracles contradict each other (a model evaluates true but
                       enumeration finds no satisfying point): a bug in argus, not a solver
=====================  ======================================================================

The order of the table's first column (after ``agree``) is also the severity order used when
several findings apply to one query.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from argus.smt.evaluate import EvaluationError, Undefined, evaluate
from argus.smt.query import Query
from argus.smt.results import SolverRun
from argus.smt.terms import Term

__all__ = [
    "CATEGORIES",
    "Classification",
    "ModelCheck",
    "OracleResult",
    "classify",
    "enumerate_query",
]

#: every category, most severe first (``agree`` last)
CATEGORIES = (
    "soundness",
    "invalid_model",
    "crash",
    "internal",
    "underspecified",
    "error",
    "unknown_vs_answer",
    "performance_gap",
    "both_unknown",
    "agree",
)

#: categories that point at a solver bug (minimized and written as reproducers)
BUG_CATEGORIES = frozenset({"soundness", "invalid_model", "crash"})


# --------------------------------------------------------------------------- model checks


@dataclass(frozen=True)
class ModelCheck:
    """What concrete evaluation says about a model: ``valid`` (every assertion true),
    ``invalid`` (some assertion false: ``detail`` names it) or ``undefined`` (no assertion
    false, but one needs a value SMT-LIB leaves unspecified, e.g. ``x div 0``)."""

    status: str
    detail: str = ""


def check_assertions(assertions: Iterable[Term], env: Mapping[str, Any]) -> ModelCheck:
    """Evaluate every assertion under ``env`` (see :class:`ModelCheck`).

    A false assertion wins over an undefined one: whatever the solver picked for ``x div 0``,
    a false conjunct makes the conjunction false.
    """
    undefined = ""
    for index, term in enumerate(assertions):
        try:
            value = evaluate(term, env)
        except Undefined as err:
            undefined = undefined or f"assertion {index} is undefined: {err.message}"
            continue
        except EvaluationError as err:
            return ModelCheck("invalid", f"assertion {index} cannot be evaluated: {err.message}")
        if value is not True:
            return ModelCheck("invalid", f"assertion {index} is false: {_clip(str(term))}")
    if undefined:
        return ModelCheck("undefined", undefined)
    return ModelCheck("valid")


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- enumeration


@dataclass(frozen=True)
class OracleResult:
    """Exhaustive enumeration of a query over its variables' finite domains.

    ``status``: ``sat`` (``witness`` satisfies every assertion), ``unsat`` (every point
    falsifies some assertion), ``undefined`` (no point satisfies it, but at ``undefined_points``
    points the truth depends on division by zero), or ``skipped`` (``detail`` says why:
    unbounded variable, uninterpreted function, or more than the point budget).
    """

    status: str
    points: int = 0
    witness: Mapping[str, Any] | None = None
    undefined_points: int = 0
    detail: str = ""


def domain_of(var: Term, bv_bits: int = 12) -> range | tuple[bool, bool] | None:
    """The finite domain of a variable, or ``None`` when it is unbounded (or too wide)."""
    if var.sort.is_bool:
        return (False, True)
    if var.sort.is_bv:
        return range(1 << var.sort.width) if var.sort.width <= bv_bits else None
    lo, hi = var.bounds
    if lo is None or hi is None:
        return None
    return range(lo, hi + 1)


def enumerate_query(query: Query, *, max_points: int = 4096) -> OracleResult:
    """Decide ``query`` by evaluating it at every point of its variables' domains.

    The domain constraints are implied by the enumeration and are not re-evaluated.  Stops at
    the first satisfying point.  Independent of every solver: it uses only
    :func:`argus.smt.evaluate.evaluate`.
    """
    if query.functions():
        return OracleResult("skipped", detail="uninterpreted functions")
    variables = query.variables()
    domains: list[Sequence[Any]] = []
    size = 1
    for name, var in variables.items():
        domain = domain_of(var)
        if domain is None:
            return OracleResult("skipped", detail=f"variable {name!r} has no small finite domain")
        domains.append(domain)
        size *= len(domain)
        if size > max_points:
            return OracleResult("skipped", detail=f"more than {max_points} points")
    names = list(variables)
    assertions = query.terms
    undefined = 0
    points = 0
    for values in itertools.product(*domains):
        points += 1
        env = dict(zip(names, values))
        check = check_assertions(assertions, env)
        if check.status == "valid":
            return OracleResult("sat", points, env, undefined)
        if check.status == "undefined":
            undefined += 1
    if undefined:
        return OracleResult(
            "undefined", points, None, undefined, f"{undefined} of {points} points divide by zero"
        )
    return OracleResult("unsat", points)


# --------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class Classification:
    """The verdict of differential testing on one query.

    ``category`` is the most severe finding (see :data:`CATEGORIES`); ``wrong`` the solvers
    shown wrong by it; ``truth`` what the oracles establish (``sat``, ``unsat``,
    ``undefined`` or ``None`` when nothing independent decides it); ``findings`` every
    ``(category, solver, detail)`` found, most severe first.
    """

    category: str
    wrong: tuple[str, ...] = ()
    detail: str = ""
    truth: str | None = None
    findings: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    @property
    def signature(self) -> tuple[str, tuple[str, ...]]:
        """What a minimized query must preserve: the category and the solvers it blames."""
        return self.category, self.wrong


_UNANSWERED = ("resource_limit", "timeout", "unknown", "cancelled")


def classify(
    runs: Mapping[str, SolverRun],
    checks: Mapping[str, ModelCheck],
    oracle: OracleResult | None = None,
    *,
    gap: float = 10.0,
    gap_floor_s: float = 0.05,
) -> Classification:
    """Classify one query from every solver's run, the model checks of the ``sat`` runs
    (solver -> :class:`ModelCheck`) and the enumeration result (see the module table)."""
    oracle = oracle or OracleResult("skipped")
    findings: list[tuple[str, str, str]] = []
    sat_valid = [s for s, r in runs.items() if _answered(r, "sat") and _check(checks, s) == "valid"]

    truth: str | None = None
    if oracle.status == "sat" or sat_valid:
        truth = "sat"
    elif oracle.status == "unsat":
        truth = "unsat"
    elif oracle.status == "undefined":
        truth = "undefined"
    if sat_valid and oracle.status in ("unsat", "undefined"):
        findings.append(
            (
                "internal",
                "",
                f"{sat_valid[0]}'s model satisfies the query but enumeration says {oracle.status}",
            )
        )

    for solver, run in runs.items():
        if run.reason == "crash":
            findings.append(("crash", solver, run.message or "crashed"))
        elif run.reason == "error":
            findings.append(("error", solver, run.message or "query refused"))
        elif run.status == "sat":
            check = checks.get(solver, ModelCheck("undefined", "no model"))
            if check.status == "invalid":
                findings.append(("invalid_model", solver, check.detail))
            elif check.status == "undefined" and truth != "sat":
                if oracle.status == "unsat":
                    findings.append(
                        (
                            "soundness",
                            solver,
                            f"sat, but enumeration over {oracle.points} points "
                            f"finds none ({check.detail})",
                        )
                    )
        elif _answered(run, "unsat") and truth == "sat":
            witness = sat_valid[0] + "'s model" if sat_valid else "the enumeration's witness"
            findings.append(("soundness", solver, f"unsat, but {witness} satisfies the query"))

    answers = {s: r.status for s, r in runs.items() if r.reason is None}
    undefined_sat = [
        s for s, r in runs.items() if _answered(r, "sat") and _check(checks, s) == "undefined"
    ]
    if "sat" in answers.values() and "unsat" in answers.values() and truth != "sat":
        if undefined_sat or truth == "undefined":
            why = (
                f"{undefined_sat[0]}'s model divides by zero"
                if undefined_sat
                else oracle.detail or "the truth depends on division by zero"
            )
            findings.append(
                ("underspecified", "", f"sat vs unsat hinges on division by zero: {why}")
            )

    unanswered = [s for s, r in runs.items() if r.reason in _UNANSWERED]
    if answers and unanswered:
        for solver in unanswered:
            run = runs[solver]
            findings.append(
                ("unknown_vs_answer", solver, f"{run.reason}: {run.message}".rstrip(": "))
            )
    if not answers and unanswered and not findings:
        findings.append(("both_unknown", "", "; ".join(runs[s].describe() for s in unanswered)))

    if not findings and len(answers) == len(runs) and len(set(answers.values())) == 1:
        times = {s: runs[s].seconds for s in runs}
        slow = max(times, key=times.__getitem__)
        fast = min(times, key=times.__getitem__)
        if times[slow] >= gap_floor_s and times[slow] >= gap * max(times[fast], 1e-6):
            ratio = times[slow] / max(times[fast], 1e-6)
            findings.append(
                (
                    "performance_gap",
                    slow,
                    f"{slow} {times[slow]:.3f} s vs {fast} {times[fast]:.3f} s ({ratio:.0f}x)",
                )
            )

    if not findings:
        return Classification("agree", truth=truth, detail=_agreement(answers))
    findings.sort(key=lambda f: CATEGORIES.index(f[0]))
    category = findings[0][0]
    same = [f for f in findings if f[0] == category]
    wrong = tuple(sorted({f[1] for f in same if f[1]})) if category in BUG_CATEGORIES else ()
    if category == "performance_gap":
        wrong = (same[0][1],)
    detail = "; ".join(f"{f[1]}: {f[2]}" if f[1] else f[2] for f in same)
    return Classification(category, wrong, detail, truth, tuple(findings))


def _answered(run: SolverRun, status: str) -> bool:
    return run.status == status and run.reason in (None, "invalid_model")


def _check(checks: Mapping[str, ModelCheck], solver: str) -> str:
    check = checks.get(solver)
    return check.status if check is not None else "undefined"


def _agreement(answers: Mapping[str, str]) -> str:
    values = set(answers.values())
    return f"all {values.pop()}" if len(values) == 1 else ""
