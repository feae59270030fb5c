"""Queries: what is sent to a solver, with its variables' domains and its logic.

A :class:`Query` is a conjunction of Bool terms, some of them named (names are what unsat
cores report), plus the *domain constraints* of every bounded variable and bounded function
application it mentions (``lo <= x <= hi``), which are always asserted, unnamed.  The logic
is detected once, when the query is built (:func:`argus.smt.logic.detect_logic`).

A validity VC is two queries (:func:`validity_queries`): with ``D`` the guards of
``hyps => goal`` (:func:`argus.smt.terms.definedness`),

* the *goal* query ``hyps ∧ D ∧ ¬goal``: unsat means the goal holds wherever it is defined;
* the *definedness* query ``hyps ∧ ¬(∧ D)``: unsat means the hypotheses imply ``D``.

The VC is proved when both are unsat; a model of either is a counterexample (a goal violation
or a division by zero / out-of-range bitwise operand reachable under the hypotheses).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from argus.smt.logic import detect_logic
from argus.smt.terms import (
    BOOL,
    Function,
    Term,
    TermError,
    _check_name,
    and_,
    definedness,
    domain_constraints,
    functions,
    implies,
    lift,
    not_,
    variables,
)

__all__ = ["Query", "validity_queries"]


@dataclass(frozen=True)
class Query:
    """A satisfiability query.

    ``assertions`` pairs each Bool term with its name (``None`` = unnamed); ``domain`` holds
    the bounds of the variables; ``logic`` the detected logic.  Build one with
    :meth:`Query.of`.  Queries are hashable values (terms are interned).
    """

    assertions: tuple[tuple[Term, str | None], ...]
    domain: tuple[Term, ...]
    logic: str
    #: free-form description carried into reports and SMT-LIB headers
    label: str = field(default="", compare=False)

    @staticmethod
    def of(
        *assertions: Term,
        named: Mapping[str, Term] | Iterable[tuple[str, Term]] | None = None,
        logic: str | None = None,
        label: str = "",
    ) -> Query:
        """A query asserting ``assertions`` (unnamed) and ``named`` (name -> term), in order."""
        pairs: list[tuple[Term, str | None]] = [(lift(a, BOOL), None) for a in assertions]
        items = named.items() if isinstance(named, Mapping) else (named or ())
        seen: set[str] = set()
        for name, term in items:
            _check_name(name)
            if name in seen:
                raise TermError(f"two assertions are named {name!r}")
            seen.add(name)
            pairs.append((lift(term, BOOL), name))
        terms = [t for t, _ in pairs]
        domain = tuple(dict.fromkeys(domain_constraints(*terms)))
        return Query(tuple(pairs), domain, logic or detect_logic(*terms, *domain), label)

    @property
    def terms(self) -> tuple[Term, ...]:
        """The assertions' terms, without names and without the domain constraints."""
        return tuple(t for t, _ in self.assertions)

    def all_assertions(self) -> list[tuple[Term, str | None]]:
        """Domain constraints (unnamed) followed by the assertions: what a solver is given."""
        return [(d, None) for d in self.domain] + list(self.assertions)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for _, n in self.assertions if n is not None)

    def variables(self) -> dict[str, Term]:
        """Variables by name."""
        return variables(*self.terms)

    def functions(self) -> dict[str, Function]:
        """Uninterpreted functions by name."""
        return functions(*self.terms)

    def conjunction(self) -> Term:
        """Everything the query asserts, domain included, as one term."""
        return and_(*self.domain, *self.terms)


def validity_queries(
    hypotheses: Iterable[Term] | Mapping[str, Term],
    goal: Term,
    *,
    goal_name: str = "goal",
    label: str = "",
) -> tuple[Query, Query]:
    """``(goal_query, definedness_query)`` for the VC ``hypotheses => goal`` (module docstring).

    Named hypotheses (a mapping) keep their names so unsat cores can report them.
    """
    if isinstance(hypotheses, Mapping):
        named = list(hypotheses.items())
    else:
        named = [(f"hyp{i}", h) for i, h in enumerate(hypotheses)]
    hyps = [h for _, h in named]
    guards = definedness(implies(and_(*hyps), goal))
    goal_query = Query.of(*guards, named=[*named, (goal_name, not_(goal))], label=label)
    defined_query = Query.of(not_(and_(*guards)), named=named, label=label)
    return goal_query, defined_query
