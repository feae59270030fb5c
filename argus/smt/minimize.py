"""Delta debugging of queries: the smallest query that still shows a behaviour.

:func:`minimize` shrinks a :class:`~argus.smt.query.Query` while a predicate keeps holding
(for ``argus smt-diff``: "the classification is unchanged", same category, same solver
blamed).  Two passes, repeated until neither changes anything or the budget is spent:

1. **assertions**: ``ddmin`` (Zeller and Hildebrandt) over the list of assertions, removing
   chunks of halving size, then single assertions;
2. **subterms**: each subterm, largest first, is replaced by something smaller of the same
   sort: one of its own arguments (hoisting), or a literal (``0``, ``1``, ``true``,
   ``false``, the zero bit-vector); the rebuilt term is simplified by the term constructors,
   so constants fold away.

Variable domains follow the variables that remain (they are part of every query), so a
minimized query is still self-contained.  Each candidate is tested once (results are
cached); ``max_tests`` and ``max_seconds`` bound the work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from argus.smt.query import Query
from argus.smt.terms import FALSE, TRUE, Term, bv_const, int_const, substitute, subterms

__all__ = ["Minimized", "minimize", "query_size"]

Assertion = tuple[Term, "str | None"]


@dataclass(frozen=True)
class Minimized:
    """The outcome of :func:`minimize`: the smallest query found and what it cost."""

    query: Query
    size_before: int
    size_after: int
    tests: int
    seconds: float
    exhausted: bool  # True when the budget ran out before a fixed point


def query_size(query: Query) -> int:
    """Distinct subterms of the query's assertions (domain constraints not counted)."""
    return sum(1 for _ in subterms(*query.terms))


def _build(assertions: Sequence[Assertion], label: str) -> Query:
    unnamed = [t for t, n in assertions if n is None]
    named = [(n, t) for t, n in assertions if n is not None]
    return Query.of(*unnamed, named=named, label=label)


class _Budget(Exception):
    pass


class _Tester:
    def __init__(
        self, predicate: Callable[[Query], bool], max_tests: int, max_seconds: float, label: str
    ) -> None:
        self.predicate = predicate
        self.max_tests = max_tests
        self.deadline = time.monotonic() + max_seconds
        self.label = label
        self.tests = 0
        self.cache: dict[tuple[Assertion, ...], bool] = {}

    def __call__(self, assertions: Sequence[Assertion]) -> bool:
        if time.monotonic() > self.deadline:
            raise _Budget
        key = tuple(assertions)
        if key in self.cache:
            return self.cache[key]
        if self.tests >= self.max_tests:
            raise _Budget
        self.tests += 1
        try:
            query = _build(assertions, self.label)
        except Exception:  # an ill-formed candidate simply does not reproduce
            self.cache[key] = False
            return False
        verdict = bool(self.predicate(query))
        self.cache[key] = verdict
        return verdict


def _ddmin(items: list[Assertion], test: _Tester) -> list[Assertion]:
    """Classic ddmin: a 1-minimal sublist of ``items`` on which ``test`` holds."""
    granularity = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // granularity)
        subsets = [items[i : i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for index, subset in enumerate(subsets):
            complement = [x for j, s in enumerate(subsets) if j != index for x in s]
            if test(subset):
                items, granularity, reduced = subset, 2, True
                break
            if len(subsets) > 2 and test(complement):
                items, granularity, reduced = complement, max(granularity - 1, 2), True
                break
        if not reduced:
            if granularity >= len(items):
                break
            granularity = min(len(items), granularity * 2)
    return items


def _replacements(t: Term) -> list[Term]:
    """Smaller terms of ``t``'s sort: its same-sorted arguments, then literals."""
    out = [a for a in t.args if a.sort == t.sort]
    if t.sort.is_int:
        out += [int_const(0), int_const(1)]
    elif t.sort.is_bool:
        out += [TRUE, FALSE]
    else:
        out.append(bv_const(0, t.sort.width))  # type: ignore[arg-type]
    return [r for r in out if r is not t]


def _measure(term: Term) -> tuple[int, int, int]:
    """What shrinking decreases: distinct subterms, then variables, then literal magnitudes.

    Every accepted replacement decreases it, so shrinking terminates (``0`` and ``1`` never
    replace each other back and forth)."""
    nodes = variables = magnitude = 0
    for t in subterms(term):
        nodes += 1
        if t.op == "var":
            variables += 1
        elif t.op == "const" and not t.sort.is_bool:
            magnitude += abs(t.value)  # type: ignore[arg-type]
        elif t is TRUE:
            magnitude += 1
    return nodes, variables, magnitude


def _shrink_terms(items: list[Assertion], test: _Tester) -> list[Assertion]:
    """Greedy subterm replacement, largest subterms first, until nothing applies."""
    changed = True
    while changed:
        changed = False
        for index in range(len(items)):
            term, name = items[index]
            measure = _measure(term)
            # parents come after their children in subterms(): reverse for largest first
            for sub in reversed(list(subterms(term))):
                done = False
                for replacement in _replacements(sub):
                    candidate = substitute(term, {sub: replacement})
                    if candidate is term or _measure(candidate) >= measure:
                        continue
                    trial = [*items[:index], (candidate, name), *items[index + 1 :]]
                    if test(trial):
                        items, changed, done = trial, True, True
                        break
                if done:
                    break
    return items


def minimize(
    query: Query,
    predicate: Callable[[Query], bool],
    *,
    max_tests: int = 400,
    max_seconds: float = 60.0,
) -> Minimized:
    """Shrink ``query`` while ``predicate`` holds (it must hold for ``query`` itself).

    ``predicate`` receives whole queries and may be expensive (it runs solvers); it is
    called at most ``max_tests`` times.  The result holds the smallest query that passed.
    """
    started = time.monotonic()
    test = _Tester(predicate, max_tests, max_seconds, query.label)
    items: list[Assertion] = list(query.assertions)
    best = items
    exhausted = False
    try:
        previous = None
        while previous != best:
            previous = best
            best = _ddmin(best, test)
            best = _shrink_terms(best, test)
    except _Budget:
        exhausted = True
        # the best list so far is the last one that passed
        passing = [k for k, v in test.cache.items() if v]
        if passing:
            best = list(min(passing, key=lambda k: _assertions_size(k)))
    result = _build(best, query.label) if best != list(query.assertions) else query
    return Minimized(
        result,
        query_size(query),
        query_size(result),
        test.tests,
        time.monotonic() - started,
        exhausted,
    )


def _assertions_size(assertions: Sequence[Assertion]) -> int:
    return sum(1 for _ in subterms(*(t for t, _ in assertions))) if assertions else 0
