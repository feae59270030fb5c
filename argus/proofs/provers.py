"""Who discharges VCs: the cvc5 ‖ Z3 portfolio, one solver in a worker, or one in-process.

Every prover answers :meth:`Prover.prove` ``(hypotheses, goal)`` with the SMT layer's
:class:`~argus.smt.results.Proved` / :class:`~argus.smt.results.Refuted` /
:class:`~argus.smt.results.Unknown`, for the same query :func:`vc_query` builds (the one
``--smtlib`` writes and the VC hash is taken of): ``hyps ∧ ¬(D ∧ goal)`` with ``D`` the
definedness guards of every division and modulo.  A model is believed only after concrete
evaluation confirms it on the original terms.

* :class:`PortfolioProver` — :class:`argus.smt.portfolio.Portfolio` (warm worker processes,
  reproducible resource limits, the first usable answer wins); ``solvers=("z3",)`` gives a
  single solver behind the same safety net.
* :class:`SequentialProver` — the same workers asked one after the other (z3, then cvc5 on
  ``unknown``): the default of ``argus verify``.
* :class:`LocalProver` — one solver in this process (no worker start-up; for tests and small
  kernels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from argus.smt import terms as T
from argus.smt.diff import check_assertions
from argus.smt.evaluate import EvaluationError, evaluate
from argus.smt.query import Query
from argus.smt.results import Proved, Refuted, Result, SolverRun, Unknown

Hypotheses = Sequence[tuple[str, T.Term]]

#: solver choices of ``argus verify --solver``: ``portfolio`` is z3, then cvc5 where z3 gave up
#: (:class:`SequentialProver`); ``race`` sends every VC to both at once (:class:`PortfolioProver`)
SOLVER_CHOICES = ("portfolio", "race", "z3", "cvc5")


def vc_query(hypotheses: Hypotheses, goal: T.Term, label: str = "") -> tuple[Query, tuple[T.Term, ...]]:
    """The satisfiability query of ``hypotheses => goal`` and its definedness guards.

    Every term is first linearly normalized (:func:`argus.abstract_interp.linear.simplify`:
    divisions and modulos by constants folded where the variables' bounds decide them,
    comparisons the bounds decide replaced by their value), an identity wherever the
    variables lie in their bounds, which the query asserts."""
    from argus.abstract_interp import linear

    memo: dict = {}
    hypotheses = [(name, linear.simplify(h, memo)) for name, h in hypotheses]
    goal = linear.simplify(goal, memo)
    hyps = [h for _, h in hypotheses]
    guards = definedness_guards(T.implies(T.and_(*hyps), goal))
    query = Query.of(named=[*hypotheses, ("goal", T.not_(T.and_(*guards, goal)))], label=label)
    return query, guards


#: most goal parts :func:`split_query` makes, and most parts of the guards
SPLIT_LIMIT = 8
GUARD_PARTS_LIMIT = 16


def _goal_conjuncts(term: T.Term) -> list[T.Term]:
    """``term`` as a conjunction one level deeper (``[term]`` where it is no conjunction):
    ``a ∧ b`` -> ``[a, b]``; ``p => (a ∧ b)`` -> ``[p => a, p => b]``; ``ite(c, a, b)`` ->
    ``[c => a, ¬c => b]``."""
    if term.op == "and":
        return list(term.args)
    if term.op == "=>":
        p, q = term.args
        inner = _goal_conjuncts(q)
        return [term] if len(inner) == 1 else [T.implies(p, c) for c in inner]
    if term.op == "ite" and term.sort == T.BOOL:
        c, a, b = term.args
        return [T.implies(c, a), T.implies(T.not_(c), b)]
    return [term]


def split_query(query: Query, guards: tuple[T.Term, ...], limit: int = SPLIT_LIMIT) -> list[Query]:
    """The validity query of :func:`vc_query` as queries whose conjunction is equivalent to it:
    ``hyps ∧ ¬(D ∧ goal)`` is unsat exactly when ``hyps ∧ ¬D`` is and ``hyps ∧ ¬g`` is for every
    conjunct ``g`` of the goal, so a VC is proved when every part is, and a model of any part
    is a model of the whole query.  The goal is split at conjunctions (through implications'
    conclusions and Boolean ``ite``) breadth-first, into at most ``limit`` parts; the guards
    are grouped by what they conclude (``d != 0`` for one divisor ``d``, under the many path
    conditions that reach the division), at most :data:`GUARD_PARTS_LIMIT` groups.  Each part
    is a smaller problem: a solver that gives up on the whole often decides every part in
    seconds (z3's search over one large disjunction is what runs long).  ``[query]`` when
    there is nothing to split."""
    named = [(n, t) for t, n in query.assertions if n is not None and n != "goal"]
    unnamed = [t for t, n in query.assertions if n is None]
    goal = next((t for t, n in query.assertions if n == "goal"), None)
    if goal is None or goal.op != "not":
        return [query]
    conjuncts = list(goal.args[0].args) if goal.args[0].op == "and" else [goal.args[0]]
    guard_set = set(guards)
    own = [c for c in conjuncts if c not in guard_set]
    defined = [c for c in conjuncts if c in guard_set]
    parts = own
    while True:  # one level deeper while the parts stay within the limit
        deeper = [c for p in parts for c in _goal_conjuncts(p)]
        if len(deeper) == len(parts) or len(deeper) > limit:
            break
        parts = deeper
    if len(parts) > limit:  # a goal of many conjuncts: ``limit`` parts of several each
        parts = [T.and_(*parts[i::limit]) for i in range(limit)]
    groups: dict[T.Term, list[T.Term]] = {}
    for g in defined:
        groups.setdefault(g.args[1] if g.op == "=>" else g, []).append(g)
    chunks: list[list[T.Term]] = [[] for _ in range(min(len(groups), GUARD_PARTS_LIMIT))]
    for i, group in enumerate(groups.values()):
        chunks[i % len(chunks)].extend(group)
    pieces = [T.and_(*chunk) for chunk in chunks] + parts
    if len(pieces) < 2:
        return [query]
    return [Query.of(*unnamed, named=[*named, ("goal", T.not_(piece))], logic=query.logic,
                     label=f"{query.label} part {i + 1}/{len(pieces)}".strip())
            for i, piece in enumerate(pieces)]


#: most cubes :func:`cube_query` makes of one query, and the most values one case may take
CUBE_LIMIT = 16
CUBE_VALUES = 4


def ring_offsets(query: Query) -> list[tuple[T.Term, int, int]]:
    """The case splits :func:`cube_query` makes: ``(q, lo, hi)`` for each quotient ``q =
    e div C`` (``C`` a constant) that is a summand of a ring position ``(... + q + ...) mod
    S`` in ``query`` and takes at most :data:`CUBE_VALUES` values ``lo..hi`` within the
    bounds of its variables, in the order the query first mentions them.

    Such a quotient is the stage offset of a staged buffer's address: which ring stage, seen
    from one TMA box's base, holds the element read (the element lies in this iteration's
    stage or in the one before, as seen from a box that does not hold it).  A solver that is
    not told its value explores the delivered iteration of every box at once; each value
    alone leaves one box that holds the element and folds the others' addresses away.

    A quotient the query already fixes (an unnamed ``q = v``, as a case of :func:`cube_query`
    asserts) is no split: the offsets of a case are the ones its cases left open."""
    fixed = {t.args[0] for t, n in query.assertions
             if n is None and t.op == "=" and t.args[1].op == "const" and t.args[0].op == "div"}
    out: dict[T.Term, tuple[int, int]] = {}
    for term, _ in query.assertions:
        for s in T.subterms(term):
            if s.op != "mod" or s.args[1].op != "const":
                continue
            arg = s.args[0]
            for q in (arg.args if arg.op == "+" else (arg,)):
                if q.op != "div" or q.args[1].op != "const" or q in out or q in fixed:
                    continue
                lo, hi = T.interval(q)
                if lo is not None and hi is not None and 1 <= hi - lo < CUBE_VALUES:
                    out[q] = (lo, hi)
    return [(q, lo, hi) for q, (lo, hi) in out.items()]


def cube_query(query: Query, limit: int = CUBE_LIMIT) -> list[Query]:
    """``query`` as cubes whose disjunction is equivalent to it: one per combination of the
    values of its ring offsets (:func:`ring_offsets`, as many as fit in ``limit`` cubes),
    each cube the query with ``q = v`` asserted for each offset.  The values ``lo..hi`` of an
    offset are its interval under the variables' bounds, which every query asserts, so the
    cubes cover every model: the query is unsat exactly when every cube is, and a cube's
    model is one of the query.  ``[query]`` where there is nothing to split on.  A cube is
    split again the same way on the offsets the limit left out of it (and on those only)."""
    import itertools

    chosen: list[tuple[T.Term, int, int]] = []
    size = 1
    for q, lo, hi in ring_offsets(query):
        if size * (hi - lo + 1) > limit:
            continue
        chosen.append((q, lo, hi))
        size *= hi - lo + 1
    if not chosen:
        return [query]
    named = [(n, t) for t, n in query.assertions if n is not None]
    unnamed = [t for t, n in query.assertions if n is None]
    cubes = []
    for i, values in enumerate(itertools.product(*(range(lo, hi + 1) for _, lo, hi in chosen))):
        case = [T.eq(q, v) for (q, _, _), v in zip(chosen, values)]
        cubes.append(Query.of(*unnamed, *case, named=named, logic=query.logic,
                              label=f"{query.label} case {i + 1}/{size}".strip()))
    return cubes


def shown_guards(query: Query, guards: Sequence[T.Term]) -> tuple[T.Term, ...] | None:
    """The definedness guards a part of :func:`split_query` shows, when its goal is the
    negation of ``guards`` only (one or a conjunction of several); ``None`` for any other part."""
    goal = next((t for t, n in query.assertions if n == "goal"), None)
    if goal is None or goal.op != "not":
        return None
    shown, known = goal.args[0], set(guards)
    conjuncts = shown.args if shown.op == "and" else (shown,)
    return tuple(conjuncts) if all(c in known for c in conjuncts) else None


def single_guards(query: Query, guards: Sequence[T.Term]) -> list[Query]:
    """A part of :func:`split_query` that shows several definedness guards, as one query per
    guard: ``hyps ∧ ¬(g1 ∧ ... ∧ gn)`` is unsat exactly when every ``hyps ∧ ¬gi`` is, and a
    model of one is a model of the part.  The guards of one part are one divisor's ``d != 0``
    under each path condition that reaches a division by it (or several divisors'); z3's search
    over their disjunction can run past minutes where each guard alone is decided in seconds
    (the 8 guards of one divisor of the GEMM's tile order: no answer in 90 s together, each
    alone in at most 9 s).  ``[query]`` when the part is not of guards or shows one."""
    conjuncts = shown_guards(query, guards)
    if conjuncts is None or len(conjuncts) < 2:
        return [query]
    named = [(n, t) for t, n in query.assertions if n is not None and n != "goal"]
    unnamed = [t for t, n in query.assertions if n is None]
    return [Query.of(*unnamed, named=[*named, ("goal", T.not_(c))], logic=query.logic,
                     label=f"{query.label} guard {i + 1}/{len(conjuncts)}".strip())
            for i, c in enumerate(conjuncts)]


_BITWISE = frozenset({"int_xor", "int_and", "int_or"})


def definedness_guards(term: T.Term) -> tuple[T.Term, ...]:
    """:func:`argus.smt.terms.definedness`, with a linear-time pass first.

    The guards are collected once per subterm, unconditionally (each one at least as strong
    as its path-conditioned form); those implied by constant divisors or by the operands'
    intervals are dropped.  Only when some guard remains is the precise, path-sensitive (and
    on ``ite``-heavy terms much slower) :func:`~argus.smt.terms.definedness` computed.
    """
    for t in T.subterms(term):
        if t.op in ("div", "mod"):
            divisor = t.args[1]
            if divisor.op == "const" and divisor.value != 0:
                continue
            lo, hi = T.interval(divisor)
            if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                continue
            return tuple(T.definedness(term))
        if t.op in _BITWISE:
            width, signed = t.params
            lo_ok, hi_ok = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            for a in t.args:
                lo, hi = T.interval(a)
                if lo is None or hi is None or lo < lo_ok or hi > hi_ok:
                    return tuple(T.definedness(term))
    return ()


class Prover(Protocol):
    """What the verifier needs from a solver back end."""

    name: str

    def prove(self, hypotheses: Hypotheses, goal: T.Term) -> Result: ...

    def check(self, query: Query, guards: tuple[T.Term, ...]) -> Result: ...

    def versions(self) -> dict[str, str]: ...

    def close(self) -> None: ...


class PortfolioProver:
    """VCs through :class:`argus.smt.portfolio.Portfolio` (see the module docstring)."""

    def __init__(self, solvers: Sequence[str] = ("z3", "cvc5"), *, rlimit: int | dict | None = None,
                 wall_clock_s: float = 20.0, seed: int = 0) -> None:
        from argus.smt.portfolio import Portfolio

        self.name = "portfolio" if len(solvers) > 1 else solvers[0]
        self.seed = int(seed)
        self.portfolio = Portfolio(solvers=tuple(solvers), rlimit=rlimit, wall_clock_s=wall_clock_s,
                                   options=seed_options(solvers, self.seed))
        self._config = (tuple(solvers), rlimit, wall_clock_s)

    def fork(self, seed: int | None = None, wall_clock_s: float | None = None) -> PortfolioProver:
        """An independent prover of the same solvers and limits (workers of its own), with the
        solvers' random seed ``seed`` and the wall-clock safety net ``wall_clock_s`` (default:
        this prover's)."""
        solvers, rlimit, own_clock = self._config
        return PortfolioProver(solvers, rlimit=rlimit, wall_clock_s=own_clock if wall_clock_s is None else wall_clock_s,
                               seed=self.seed if seed is None else seed)

    def prove(self, hypotheses: Hypotheses, goal: T.Term) -> Result:
        return self.check(*vc_query(hypotheses, goal))

    def check(self, query: Query, guards: tuple[T.Term, ...]) -> Result:
        """The validity query built by :func:`vc_query`; a model is checked on its terms."""
        result = self.portfolio.check_query(query)
        if isinstance(result, Refuted):
            return dataclasses.replace(result, violation=_violation(guards, dict(result.model)))
        return result

    def versions(self) -> dict[str, str]:
        return self.portfolio.versions()

    def close(self) -> None:
        self.portfolio.close()


class SequentialProver:
    """A sequential portfolio: each VC goes to the first solver, and to the next only when the
    previous one gave up (``unknown``).  Every solver runs in its own warm worker, under the
    same reproducible resource limits as :class:`PortfolioProver`.

    On a machine with few cores this beats racing: a cvc5 check cannot be interrupted, so a
    race keeps a core busy with the losing solver long after the winner answered.
    """

    def __init__(self, solvers: Sequence[str] = ("z3", "cvc5"), *, rlimit: int | dict | None = None,
                 wall_clock_s: float = 20.0, seed: int = 0) -> None:
        self.name = "portfolio"
        self.seed = int(seed)
        self.stages = [PortfolioProver((s,), rlimit=rlimit, wall_clock_s=wall_clock_s, seed=self.seed)
                       for s in solvers]
        self._config = (tuple(solvers), rlimit, wall_clock_s)

    def fork(self, seed: int | None = None, wall_clock_s: float | None = None) -> SequentialProver:
        """An independent prover of the same solvers and limits (workers of its own, started
        when first used), with the solvers' random seed ``seed`` and the wall-clock safety net
        ``wall_clock_s`` (default: this prover's)."""
        solvers, rlimit, own_clock = self._config
        return SequentialProver(solvers, rlimit=rlimit, wall_clock_s=own_clock if wall_clock_s is None else wall_clock_s,
                                seed=self.seed if seed is None else seed)

    def prove(self, hypotheses: Hypotheses, goal: T.Term) -> Result:
        return self.check(*vc_query(hypotheses, goal))

    def check(self, query: Query, guards: tuple[T.Term, ...]) -> Result:
        runs: list[SolverRun] = []
        for stage in self.stages:
            result = stage.check(query, guards)
            if not isinstance(result, Unknown):
                return result
            runs.extend(result.runs)
        return Unknown(tuple(runs))

    def versions(self) -> dict[str, str]:
        return {k: v for stage in self.stages for k, v in stage.versions().items()}

    def close(self) -> None:
        for stage in self.stages:
            stage.close()


class LocalProver:
    """One solver (``"z3"`` or ``"cvc5"``) in this process, a fresh context per VC."""

    def __init__(self, solver: str = "z3", *, rlimit: int = 50_000_000, timeout_s: float = 30.0) -> None:
        self.name = solver
        self.solver = solver
        self.rlimit = rlimit
        self.timeout_s = timeout_s

    def prove(self, hypotheses: Hypotheses, goal: T.Term) -> Result:
        return self.check(*vc_query(hypotheses, goal))

    def check(self, query: Query, guards: tuple[T.Term, ...]) -> Result:
        """The validity query built by :func:`vc_query`; a model is checked on its terms."""
        from argus.smt.session import solve

        answer = solve(query, self.solver, rlimit=self.rlimit, timeout_s=self.timeout_s)
        run = SolverRun(self.solver, answer.status, answer.reason, answer.message, answer.seconds,
                        answer.resources, answer.model)
        if answer.status == "unsat":
            return Proved(self.solver, answer.resources, answer.seconds, runs=(run,))
        if answer.status == "sat" and answer.model is not None:
            check = check_assertions(tuple(query.domain) + query.terms, answer.model)
            if check.status == "valid":
                return Refuted(self.solver, answer.model, answer.resources, answer.seconds,
                               _violation(guards, answer.model), runs=(run,))
            bad = SolverRun(self.solver, "sat", "invalid_model", check.detail, answer.seconds, answer.resources)
            return Unknown((bad,))
        return Unknown((run,))

    def versions(self) -> dict[str, str]:
        from argus.smt.session import Session

        with Session(self.solver) as s:
            return {self.solver: s.version}

    def close(self) -> None:
        pass


#: the random-seed option of each solver (z3 parameter ``random_seed``, cvc5 option ``seed``)
SEED_OPTIONS = {"z3": "random_seed", "cvc5": "seed"}


def seed_options(solvers: Sequence[str], seed: int) -> dict[str, dict[str, int]]:
    """Portfolio options that give every solver the random seed ``seed`` (none for 0, the
    solvers' default).  On a hard nonlinear query z3's run time is heavy-tailed in the seed:
    one GEMM operand lemma is proved in 2-15 s under seeds 1, 2 and 3 and runs past 100 s
    under seeds 0 and 4, with the same resource limit; so a retry that changes the seed
    searches anew where a retry with the same seed repeats the same search."""
    if not seed:
        return {}
    return {s: {SEED_OPTIONS[s]: int(seed)} for s in solvers if s in SEED_OPTIONS}


def _violation(guards: tuple[T.Term, ...], model: dict) -> str:
    for g in guards:
        try:
            if evaluate(g, model) is False:
                return "definedness"
        except EvaluationError:
            return "definedness"
    return "goal"


def make_prover(choice: str = "portfolio", *, local: bool = False, wall_clock_s: float = 20.0,
                rlimit: int | dict | None = None) -> Prover:
    """The prover for a ``--solver`` choice; ``local`` runs a single solver in-process.
    ``wall_clock_s`` is the per-VC safety net; ``rlimit`` the solvers' resource limit (one
    number, or per solver; ``None``: the defaults), which decides verdicts reproducibly."""
    if choice not in SOLVER_CHOICES:
        from argus.errors import ArgusError

        raise ArgusError(f"unknown solver choice {choice!r}", hint=f"use one of {', '.join(SOLVER_CHOICES)}")
    if choice == "portfolio":
        return SequentialProver(("z3", "cvc5"), wall_clock_s=wall_clock_s, rlimit=rlimit)
    if choice == "race":
        return PortfolioProver(("z3", "cvc5"), wall_clock_s=wall_clock_s, rlimit=rlimit)
    if local:
        if isinstance(rlimit, dict):
            rlimit = rlimit.get(choice)
        return LocalProver(choice, timeout_s=wall_clock_s, **({} if rlimit is None else {"rlimit": rlimit}))
    return PortfolioProver((choice,), wall_clock_s=wall_clock_s, rlimit=rlimit)


def resource_limits(prover: Any) -> dict[str, int]:
    """The resource limit per solver that ``prover`` decides VCs under (recorded with proofs)."""
    if isinstance(prover, PortfolioProver):
        return dict(prover.portfolio.rlimits)
    if isinstance(prover, SequentialProver):
        return {k: v for stage in prover.stages for k, v in resource_limits(stage).items()}
    if isinstance(prover, LocalProver):
        return {prover.solver: prover.rlimit}
    return {}
