"""Random queries from the index-arithmetic family argus's verifier produces.

Kernels index memory with small integer expressions over bounded variables (thread ids,
block ids, loop counters, tile sizes): sums and products by constants, products of two
symbols, floor / Euclidean / truncating division and modulo by constants *and* by symbols
(which may be zero), XOR swizzles ``x ^ ((x >> s) & m)``, and ``ite`` for predicated
accesses.  :func:`generate_query` draws one conjunction of such constraints; about half are
negated index identities (usually unsat, the shape of a proof obligation), the rest random
relations (usually sat).

Every variable has a small domain, so the enumeration oracle of :mod:`argus.smt.diff` can
decide each query on its own.  Generation is deterministic: query ``index`` of seed ``seed``
is the same on every machine and does not depend on the other queries drawn.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from argus.smt.query import Query
from argus.smt.terms import (
    Term,
    TermError,
    and_,
    eq,
    ge,
    gt,
    int_and,
    int_const,
    int_var,
    int_xor,
    ite,
    le,
    lt,
    ne,
    not_,
    or_,
    trunc_div,
    trunc_mod,
)

__all__ = ["generate", "generate_query"]

#: constant divisors: powers of two (tile sizes), odd sizes, negatives (floor vs Euclid)
_DIVISORS = (1, 2, 3, 4, 5, 8, 16, -2, -3, -4)


class _Draw:
    """One query's random choices (all from one ``random.Random``)."""

    def __init__(self, rng: random.Random, max_points: int) -> None:
        self.rng = rng
        self.variables = self._variables(max_points)

    def _variables(self, max_points: int) -> list[Term]:
        rng = self.rng
        shapes = [
            ("tid", 0, rng.choice((7, 15, 31, 63))),  # a thread / lane id
            ("blk", 0, rng.choice((1, 3, 7))),  # a block id
            ("k", rng.choice((-4, -2, 0)), rng.choice((3, 5, 7))),  # a loop counter
            ("n", rng.choice((0, 1)), rng.choice((4, 6, 8))),  # a size (0 allowed: divisor!)
        ]
        count = rng.choice((1, 2, 2, 3, 3))
        chosen = rng.sample(shapes, count)
        out: list[Term] = []
        points = 1
        for name, lo, hi in chosen:
            while points * (hi - lo + 1) > max_points and hi > lo:
                hi = lo + (hi - lo) // 2
            points *= hi - lo + 1
            out.append(int_var(name, lo, hi))
        return out

    # -- integer expressions

    def leaf(self) -> Term:
        if self.rng.random() < 0.75:
            return self.rng.choice(self.variables)
        return int_const(self.rng.randint(-3, 16))

    def divisor(self) -> Term:
        """A symbolic divisor (its domain may contain 0) or a non-zero literal: kernels never
        divide by a literal zero, and SMT-LIB's linear logics do not allow one."""
        if self.rng.random() < 0.75:
            return self.rng.choice(self.variables)
        return int_const(self.rng.choice(_DIVISORS))

    def expr(self, depth: int) -> Term:
        if depth <= 0:
            return self.leaf()
        rng = self.rng
        makers: list[tuple[int, Callable[[], Term]]] = [
            (3, lambda: self.expr(depth - 1) + self.expr(depth - 1)),
            (1, lambda: self.expr(depth - 1) - self.expr(depth - 1)),
            (3, lambda: rng.choice((2, 3, 4, 8, -1)) * self.expr(depth - 1)),
            (1, lambda: self.expr(depth - 1) * self.leaf()),  # product of symbols
            (3, lambda: self.expr(depth - 1) // rng.choice(_DIVISORS)),
            (3, lambda: self.expr(depth - 1) % rng.choice(_DIVISORS)),
            (1, lambda: self.expr(depth - 1) // self.divisor()),  # divisor may be zero
            (1, lambda: self.expr(depth - 1) % self.divisor()),
            (1, lambda: self.expr(depth - 1).div(rng.choice(_DIVISORS))),
            (1, lambda: self.expr(depth - 1).mod(self.divisor())),
            (1, lambda: trunc_div(self.expr(depth - 1), rng.choice(_DIVISORS))),
            (1, lambda: trunc_mod(self.expr(depth - 1), self.divisor())),
            (2, lambda: self.swizzle(self.expr(depth - 1))),
            (1, lambda: int_xor(self.expr(depth - 1), self.expr(depth - 1))),
            (2, lambda: ite(self.atom(depth - 1), self.expr(depth - 1), self.expr(depth - 1))),
        ]
        return _weighted(rng, makers)()

    def swizzle(self, x: Term) -> Term:
        """``x ^ ((x >> shift) & mask)``: the XOR swizzle of shared-memory layouts."""
        shift = self.rng.choice((1, 2, 3))
        mask = self.rng.choice((1, 3, 7))
        return int_xor(x, int_and(x >> shift, mask))

    # -- Boolean atoms and assertions

    def atom(self, depth: int) -> Term:
        a, b = self.expr(depth), self.expr(max(0, depth - 1))
        return self.rng.choice((eq, ne, lt, le, gt, ge))(a, b)

    def identity(self) -> Term:
        """An index identity that holds wherever it is defined (its negation is the VC)."""
        rng = self.rng
        x = self.expr(rng.choice((0, 1, 1, 2)))
        c = rng.choice(_DIVISORS)
        v = rng.choice(self.variables)
        shift = rng.choice((1, 2, 3))
        mask = rng.choice((1, 3, 7))
        candidates = [
            lambda: eq((x // c) * c + x % c, x),  # floor division decomposition
            lambda: eq(x.div(v) * v + x.mod(v), x),  # Euclid, symbolic divisor
            lambda: eq(trunc_div(x, c) * c + trunc_mod(x, c), x),
            lambda: (
                eq(self._swizzle_with(self._swizzle_with(v, shift, mask), shift, mask), v)
                if shift >= 2 or mask == 1
                else eq(int_xor(int_xor(v, x), x), v)
            ),
            lambda: and_(ge(x % abs(c), 0), lt(x % abs(c), abs(c))),
            lambda: eq((x * 4) // 4, x),
            lambda: le((x // 2) * 2, x),
            lambda: eq(x % 8, int_and(x, 7)) if _nonnegative(x) else eq(x - x, 0),
        ]
        return rng.choice(candidates)()

    def _swizzle_with(self, x: Term, shift: int, mask: int) -> Term:
        return int_xor(x, int_and(x >> shift, mask))

    def assertion(self) -> Term:
        for _ in range(20):  # constants folded away are not worth a solver call
            term = self._assertion()
            if not term.is_const:
                return term
        return term

    def _assertion(self) -> Term:
        rng = self.rng
        roll = rng.random()
        if roll < 0.55:
            return self.atom(rng.choice((0, 1, 1, 2)))
        if roll < 0.75:
            return or_(self.atom(1), self.atom(0))
        if roll < 0.9:
            return not_(self.atom(1))
        return ite(self.atom(0), self.atom(1), self.atom(0))

    def query(self, label: str) -> Query:
        rng = self.rng
        if rng.random() < 0.5:
            # a proof obligation: context facts and the negation of an (often valid) goal
            goal = self.identity()
            while goal.is_const:
                goal = self.identity()
            if rng.random() < 0.3:  # break it now and then so that some are sat
                goal = or_(goal, self.atom(0)) if rng.random() < 0.5 else not_(goal)
            context = [self.assertion() for _ in range(rng.choice((0, 1, 1, 2)))]
            return Query.of(*context, named={"goal": not_(goal)}, label=label)
        parts = [self.assertion() for _ in range(rng.choice((1, 2, 3, 4)))]
        return Query.of(*parts, label=label)


def _nonnegative(x: Term) -> bool:
    from argus.smt.terms import interval

    lo, _ = interval(x)
    return lo is not None and lo >= 0


def _weighted(rng: random.Random, choices: list[tuple[int, Callable[[], Term]]]):
    total = sum(w for w, _ in choices)
    pick = rng.uniform(0, total)
    for weight, maker in choices:
        pick -= weight
        if pick <= 0:
            return maker
    return choices[-1][1]


def generate_query(seed: int, index: int, *, max_points: int = 512) -> Query:
    """Query ``index`` of seed ``seed`` (at most ``max_points`` points in its domain).

    A draw that builds an ill-formed term (e.g. XOR of an operand without finite bounds) is
    redrawn from the same random stream, so the result stays deterministic.
    """
    rng = random.Random(f"argus-smt-generate:{seed}:{index}")
    label = f"generated seed={seed} index={index}"
    for _ in range(100):
        try:
            draw = _Draw(rng, max_points)
            query = draw.query(label)
        except (TermError, RecursionError):
            continue
        if query.assertions:
            return query
    raise RuntimeError(f"could not generate query {index} of seed {seed}")  # pragma: no cover


def generate(count: int, seed: int, *, max_points: int = 512) -> Iterator[tuple[str, Query]]:
    """``count`` queries of seed ``seed`` as ``(id, query)`` pairs, ids ``gen-<seed>-<i>``."""
    for index in range(count):
        yield f"gen-{seed}-{index}", generate_query(seed, index, max_points=max_points)
