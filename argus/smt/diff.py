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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from argus.smt.evaluate import EvaluationError, Undefined, evaluate
from argus.smt.query import Query
from argus.smt.results import SolverRun
from argus.smt.terms import Term

__all__ = [
    "BUG_CATEGORIES",
    "CATEGORIES",
    "Campaign",
    "CampaignReport",
    "Classification",
    "ModelCheck",
    "OracleResult",
    "QueryOutcome",
    "check_assertions",
    "classify",
    "enumerate_query",
    "implied_bounds",
    "smtlib_queries",
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


def check_assertions(
    assertions: Iterable[Term], env: Mapping[str, Any], *, explain: bool = True
) -> ModelCheck:
    """Evaluate every assertion under ``env`` (see :class:`ModelCheck`).

    A false assertion wins over an undefined one: whatever the solver picked for ``x div 0``,
    a false conjunct makes the conjunction false.  ``explain=False`` skips printing the
    failing assertion into ``detail`` (enumeration evaluates many points).
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
            shown = f": {_clip(str(term))}" if explain else ""
            return ModelCheck("invalid", f"assertion {index} is false{shown}")
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


def domain_of(
    var: Term, implied: tuple[int | None, int | None] = (None, None), bv_bits: int = 12
) -> range | tuple[bool, bool] | None:
    """The finite domain of a variable, or ``None`` when it is unbounded (or too wide).

    ``implied`` are bounds the query's own top-level assertions impose (see
    :func:`implied_bounds`); the tighter of them and the declared bounds is used.
    """
    if var.sort.is_bool:
        return (False, True)
    if var.sort.is_bv:
        return range(1 << var.sort.width) if var.sort.width <= bv_bits else None  # type: ignore[operator]
    lo, hi = var.bounds
    if implied[0] is not None:
        lo = implied[0] if lo is None else max(lo, implied[0])
    if implied[1] is not None:
        hi = implied[1] if hi is None else min(hi, implied[1])
    if lo is None or hi is None:
        return None
    return range(lo, hi + 1)


def implied_bounds(query: Query) -> dict[str, tuple[int | None, int | None]]:
    """Bounds ``c <= x``, ``x < c``, ``x = c``, ... asserted at the top level of ``query``
    (inside conjunctions too), for queries read from SMT-LIB files that carry no
    ``argus:bounds`` comments.  Every model satisfies them, so enumerating within them is
    still exhaustive."""
    found: dict[str, list[int | None]] = {}

    def note(var: Term, lo: int | None, hi: int | None) -> None:
        entry = found.setdefault(var.name, [None, None])
        if lo is not None:
            entry[0] = lo if entry[0] is None else max(entry[0], lo)
        if hi is not None:
            entry[1] = hi if entry[1] is None else min(entry[1], hi)

    stack = list(query.terms)
    while stack:
        t = stack.pop()
        if t.op == "and":
            stack.extend(t.args)
            continue
        if t.op not in ("<", "<=", ">", ">=", "=") or len(t.args) != 2:
            continue
        a, b = t.args
        op = t.op
        if a.op == "const" and b.op == "var":  # put the variable on the left
            a, b = b, a
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
        if not (a.op == "var" and a.sort.is_int and b.op == "const"):
            continue
        c = b.value
        match op:
            case "<":
                note(a, None, c - 1)
            case "<=":
                note(a, None, c)
            case ">":
                note(a, c + 1, None)
            case ">=":
                note(a, c, None)
            case "=":
                note(a, c, c)
    return {name: (lo, hi) for name, (lo, hi) in found.items()}


def enumerate_query(query: Query, *, max_points: int = 4096) -> OracleResult:
    """Decide ``query`` by evaluating it at every point of its variables' domains.

    The domain constraints are implied by the enumeration and are not re-evaluated.  Stops at
    the first satisfying point.  A query with no variable is decided by one evaluation.  Independent of every solver: it uses only
    :func:`argus.smt.evaluate.evaluate`.
    """
    if query.functions():
        return OracleResult("skipped", detail="uninterpreted functions")
    variables = query.variables()
    implied = implied_bounds(query)
    domains: list[Sequence[Any]] = []
    size = 1
    for name, var in variables.items():
        domain = domain_of(var, implied.get(name, (None, None)))
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
        check = check_assertions(assertions, env, explain=False)
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


# --------------------------------------------------------------------------- campaigns


@dataclass(frozen=True)
class QueryOutcome:
    """Everything differential testing found out about one query."""

    id: str
    source: str
    logic: str
    classification: Classification
    runs: Mapping[str, SolverRun] = field(default_factory=dict)
    checks: Mapping[str, ModelCheck] = field(default_factory=dict)
    oracle: OracleResult = OracleResult("skipped")
    #: path of the minimized reproducer written for it, if any
    reproducer: str | None = None
    #: ``(subterms before, subterms after, predicate tests)`` of the minimization
    minimized: tuple[int, int, int] | None = None
    #: whether the reproducer, read back from its file, shows the same classification
    reproduces: bool | None = None

    @property
    def category(self) -> str:
        return self.classification.category

    def to_json(self) -> dict[str, Any]:
        c = self.classification
        return {
            "id": self.id,
            "source": self.source,
            "logic": self.logic,
            "category": c.category,
            "wrong": list(c.wrong),
            "truth": c.truth,
            "detail": c.detail,
            "oracle": {
                "status": self.oracle.status,
                "points": self.oracle.points,
                "undefined_points": self.oracle.undefined_points,
            },
            "solvers": {
                name: {
                    "status": run.status,
                    "reason": run.reason,
                    "message": run.message,
                    "seconds": round(run.seconds, 6),
                    "resources": run.resources,
                    "model_check": self.checks[name].status if name in self.checks else None,
                }
                for name, run in self.runs.items()
            },
            "reproducer": self.reproducer,
            "minimized": (
                None
                if self.minimized is None
                else dict(zip(("size_before", "size_after", "tests"), self.minimized))
            ),
            "reproduces": self.reproduces,
        }


#: the schema version of :meth:`CampaignReport.to_json`
JSON_SCHEMA = 1


@dataclass
class CampaignReport:
    """The result of a campaign: one :class:`QueryOutcome` per query, plus its setting."""

    outcomes: list[QueryOutcome]
    solvers: dict[str, dict[str, Any]]
    seed: int | None = None
    elapsed_s: float = 0.0

    def counts(self) -> dict[str, int]:
        """Category -> number of queries, every category present, in :data:`CATEGORIES` order."""
        out = dict.fromkeys(CATEGORIES, 0)
        for outcome in self.outcomes:
            out[outcome.category] += 1
        return out

    def findings(self) -> list[QueryOutcome]:
        """Outcomes that point at a solver bug (see :data:`BUG_CATEGORIES`) or at argus."""
        return [o for o in self.outcomes if o.category in BUG_CATEGORIES | {"internal"}]

    def to_json(self) -> dict[str, Any]:
        """Machine-readable report; the keys are stable (documented in ``argus smt-diff``)."""
        from argus import __version__

        return {
            "schema": JSON_SCHEMA,
            "argus_version": __version__,
            "solvers": self.solvers,
            "seed": self.seed,
            "total": len(self.outcomes),
            "elapsed_s": round(self.elapsed_s, 3),
            "counts": self.counts(),
            "findings": len(self.findings()),
            "queries": [o.to_json() for o in self.outcomes],
        }


class Campaign:
    """Differential testing of a portfolio's solvers (see the module docstring).

    ``examine`` runs one query through every solver (to completion), the model checks and
    the enumeration oracle, and classifies it.  ``run`` does that for a stream of queries,
    minimizes each solver-bug finding (:mod:`argus.smt.minimize`) and, given ``out_dir``,
    writes it as a standalone ``.smt2`` reproducer whose header names the solvers, their
    versions and options.
    """

    def __init__(
        self,
        portfolio: Any,
        *,
        oracle_points: int = 4096,
        gap: float = 10.0,
        gap_floor_s: float = 0.05,
        minimize: bool = True,
        minimize_tests: int = 200,
        minimize_seconds: float = 60.0,
        out_dir: str | None = None,
    ) -> None:
        self.portfolio = portfolio
        self.oracle_points = oracle_points
        self.gap = gap
        self.gap_floor_s = gap_floor_s
        self.minimize = minimize
        self.minimize_tests = minimize_tests
        self.minimize_seconds = minimize_seconds
        self.out_dir = out_dir

    def examine(self, query: Query, query_id: str = "query", source: str = "") -> QueryOutcome:
        """Run, check, enumerate and classify one query."""
        wait = self.portfolio.submit(query)
        oracle = enumerate_query(query, max_points=self.oracle_points)  # while solvers work
        runs = wait()
        everything = (*query.domain, *query.terms)
        checks = {
            name: check_assertions(everything, run.model)
            if run.model is not None
            else ModelCheck("undefined", "no model returned")
            for name, run in runs.items()
            if run.status == "sat" and run.reason is None
        }
        classification = classify(runs, checks, oracle, gap=self.gap, gap_floor_s=self.gap_floor_s)
        return QueryOutcome(
            query_id, source or query.label, query.logic, classification, runs, checks, oracle
        )

    def run(
        self,
        queries: Iterable[tuple[str, Query | Exception]],
        *,
        seed: int | None = None,
        on_outcome: Callable[[QueryOutcome], None] | None = None,
    ) -> CampaignReport:
        """Examine every query; ``on_outcome`` is called after each (progress display)."""
        import time

        started = time.monotonic()
        outcomes: list[QueryOutcome] = []
        for query_id, query in queries:
            if isinstance(query, Exception):
                message = getattr(query, "message", str(query))
                outcome = QueryOutcome(
                    query_id,
                    query_id,
                    "",
                    Classification("error", detail=f"cannot read the query: {message}"),
                )
            else:
                outcome = self.examine(query, query_id)
                if outcome.category in BUG_CATEGORIES and (self.minimize or self.out_dir):
                    outcome = self._reduce(query, outcome)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
        return CampaignReport(outcomes, self.solver_info(), seed, time.monotonic() - started)

    def solver_info(self) -> dict[str, dict[str, Any]]:
        """Solver -> version, options and resource limit (reports and reproducer headers)."""
        versions = self.portfolio.versions()
        options = self.portfolio.options()
        return {
            name: {
                "version": versions.get(name, ""),
                "options": options.get(name, {}),
                "rlimit": self.portfolio.rlimits[name],
            }
            for name in self.portfolio.solvers
        }

    # -- minimization and reproducers

    def _reduce(self, query: Query, outcome: QueryOutcome) -> QueryOutcome:
        from dataclasses import replace

        from argus.smt.minimize import minimize

        signature = outcome.classification.signature
        small = query
        minimized = None
        if self.minimize:
            result = minimize(
                query,
                lambda q: self.examine(q, outcome.id).classification.signature == signature,
                max_tests=self.minimize_tests,
                max_seconds=self.minimize_seconds,
            )
            small = result.query
            minimized = (result.size_before, result.size_after, result.tests)
        outcome = replace(outcome, minimized=minimized)
        if self.out_dir is None:
            return outcome
        path = self._write(small, outcome)
        return replace(outcome, reproducer=path, reproduces=self._reproduces(path, signature))

    def _write(self, query: Query, outcome: QueryOutcome) -> str:
        import os
        import re

        from argus import __version__
        from argus.smt.smtlib import query_to_smtlib

        os.makedirs(self.out_dir, exist_ok=True)  # type: ignore[arg-type]
        c = outcome.classification
        lines = [
            "argus smt-diff reproducer",
            f"query: {outcome.id} ({outcome.source})",
            f"category: {c.category}" + (f" (wrong: {', '.join(c.wrong)})" if c.wrong else ""),
            f"truth: {c.truth or 'not decided independently'}",
            f"detail: {c.detail}",
        ]
        for name, info in self.solver_info().items():
            opts = " ".join(f"{k}={v}" for k, v in info["options"].items()) or "defaults"
            lines.append(
                f"solver: {name} {info['version']}; rlimit {info['rlimit']}; options {opts}"
            )
        if outcome.minimized is not None:
            before, after, tests = outcome.minimized
            lines.append(f"minimized: {before} -> {after} subterms in {tests} tests")
        lines.append(f"argus {__version__}")
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", outcome.id)
        path = os.path.join(self.out_dir, f"{safe}-{c.category}.smt2")  # type: ignore[arg-type]
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(query_to_smtlib(query, model=True, comment="\n".join(lines)))
        return path

    def _reproduces(self, path: str, signature: tuple[str, tuple[str, ...]]) -> bool:
        from argus.smt.smtlib import read_query

        with open(path, encoding="utf-8") as handle:
            query = read_query(handle.read(), label=path)
        return self.examine(query, path).classification.signature == signature


def smtlib_queries(paths: Sequence[str]) -> Iterator[tuple[str, Query | Exception]]:
    """``(id, query)`` for every ``.smt2`` file in ``paths`` (directories searched
    recursively, in sorted order); an unreadable file yields its exception instead."""
    import os

    from argus.smt.smtlib import read_query

    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                files.extend(os.path.join(root, n) for n in names if n.endswith(".smt2"))
        else:
            files.append(path)
    for file in sorted(files):
        try:
            with open(file, encoding="utf-8") as handle:
                text = handle.read()
            yield file, read_query(text, label=file)
        except Exception as err:  # unreadable or unsupported: reported, not fatal
            yield file, err
