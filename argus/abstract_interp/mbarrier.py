"""mbarrier phases in closed form: rounds, observed phases, releases.

The interpreter (:mod:`argus.ir.interp_async`) runs an mbarrier as a phase counter that
advances when a phase's arrivals and transaction bytes are all in.  The verifier describes the
same thing per *element* (one mbarrier of a stage array) with counts that are closed forms in
the loop counters, so every VC stays quantifier-free:

* a **round** of an element is one dynamic execution of an arrive site on it (all the
  threads that execute that site in that iteration); the ``arrivals`` VC proves that every
  round brings exactly the init count, so round ``n`` *is* phase ``n``;
* :meth:`Counter.count_before` counts the executions of a site before an instance (or in the
  whole run) whose element equals a given one: for a site in a loop whose element is
  ``(k + c) % S`` that is ``⌊(hi − 1 − x) / S⌋ − ⌊(lo − 1 − x) / S⌋`` with ``x = e − c``; for
  ``k + c`` it is ``[lo <= e − c < hi]``;
* the phase a wait observes is its ``phase`` expression, or for a parity-only wait the phase
  of that parity among the thread's own count of earlier waits on the element and the one
  before it (``−1`` is the initial state, which a parity-1 wait passes at once);
* a copy that completes on an mbarrier (TMA) joins the phase of the round its issuer armed
  last in the same iteration (its ``arrive.expect_tx``), or the next round if none;
* a thread's **release** of what it read is its first arrive after the read (after the
  ``wgmma.wait_group`` that retires it, for a wgmma operand), and the round of that arrive.

Clusters.  ``cluster_rank`` is the rank of the instance's block (:func:`rank_term`) and a peer
is the block of another rank in the same cluster (:func:`peer_block`).  A **remote arrive**
(on a peer's mbarrier, a view with a rank) joins the round of the local arrive before it on
the same element in the same loop body: one round of a block's element is its own threads'
local arrive together with the remote arrives of the peers that target the block, and the
``arrivals`` VC sums both.  A **multicast** copy joins, in every block of its mask, the phase
its issuer's own count names (the blocks run the same program with the same trip counts; the
``async`` and waiter-lag VCs order the cross-block rounds that this relies on).  A release
into another block is a later remote arrive that targets it or a later multicast copy that
lands in it.

Shapes outside this (nested loops around an arrive, conditions on the counter, elements that
are not periodic in the counter) raise :class:`NotModelled`, which the properties report as
``unknown`` with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic
from argus.abstract_interp.encoding import EncodingError, Instance
from argus.abstract_interp.program import Site
from argus.ir import nodes as N
from argus.smt import terms as T


class NotModelled(EncodingError):
    """A shape of synchronisation the closed forms do not cover (the VC is ``unknown``; a read
    resolved through it is havocked with the reason)."""


# --------------------------------------------------------------------------- clusters


def cluster_shape(kernel: N.Kernel) -> tuple[int, int, int]:
    shape = (*(int(c) for c in kernel.launch.cluster), 1, 1, 1)
    return shape[:3]  # type: ignore[return-value]


def cluster_size(kernel: N.Kernel) -> int:
    cx, cy, cz = cluster_shape(kernel)
    return cx * cy * cz


def rank_term(kernel: N.Kernel, block: list[T.Term]) -> T.Term:
    """The cluster rank of a block (x fastest, as ``%cluster_ctarank``)."""
    out: T.Term = T.int_const(0)
    scale = 1
    for b, c in zip(block, cluster_shape(kernel)):
        if c > 1:
            out = T.add(out, T.mul(scale, T.floormod(b, c)))
        scale *= c
    return out


def peer_block(kernel: N.Kernel, block: list[T.Term], rank: T.Term) -> list[T.Term]:
    """The block ids of the block with cluster rank ``rank`` in ``block``'s cluster."""
    out, scale = [], 1
    for b, c in zip(block, cluster_shape(kernel)):
        if c == 1:
            out.append(b)
        else:
            digit = T.floormod(T.floordiv(rank, scale), c) if scale > 1 else T.floormod(rank, c)
            out.append(T.add(T.sub(b, T.floormod(b, c)), digit))
        scale *= c
    return out


def element_expr(site: Site, view: N.View) -> Any:
    """The element index an mbarrier view names at ``site`` (a sympy expression)."""
    extents = view.layout.shape if isinstance(view.layout.shape, tuple) else (view.layout.shape,)
    if any(symbolic.static_value(e) != 1 for e in extents):
        raise NotModelled(f"an mbarrier view of %{view.buffer.name} that names more than one mbarrier")
    return sympy.sympify(site.expr(view.offset))


def bar_view(op: N.Op) -> N.View | None:
    """The mbarrier an op uses (``None``: it uses none)."""
    match op:
        case N.MbarrierInit(bar=bar) | N.MbarrierArrive(bar=bar) | N.MbarrierWait(bar=bar):
            return bar
        case N.Copy(mbarrier=bar) if bar is not None:
            return bar
    return None


def _periodic(expr: Any, var: sympy.Symbol) -> tuple[Any, int] | None:
    """``(c, S)`` when ``expr == (var + c) % S``."""
    if isinstance(expr, sympy.Mod):
        inner, modulus = expr.args
        if modulus.is_Integer and int(modulus) > 0:
            rest = sympy.expand(inner - var)
            if var not in rest.free_symbols:
                return rest, int(modulus)
    return None


@dataclass
class Counter:
    """Counts executions of sites, encoded at the values of an instance."""

    analysis: Any  # Analysis

    def term(self, expr: Any, values: dict) -> T.Term:
        return self.analysis.encoder.term(expr, values)

    def _factor(self, site: Site, values: dict) -> T.Term:
        """1 when the site's block-uniform conditions hold, else 0 (conditions on the thread
        choose who executes it, not whether it runs)."""
        tid = self.analysis.tid
        parts = []
        for cond in site.conditions:
            if cond.what == "loop":
                continue
            expr = sympy.sympify(site.expr(cond.expr))
            if tid in expr.free_symbols:
                continue
            parts.append(self.term(expr, values))
        return T.and_(*parts) if parts else T.TRUE

    def count_before(self, site: Site, at: Instance | None, element: T.Term | None = None,
                     elem: Any = None, values: dict | None = None) -> T.Term:
        """Executions of ``site`` before ``at`` (``None``: all of them, with the block and
        thread of ``values``) whose ``elem`` (an expression over the site's counter) equals
        ``element``."""
        values = dict(at.values) if at is not None else dict(values or {})
        if len(site.loops) > 1:
            raise NotModelled(f"{site.describe()} is inside nested symbolic loops")
        if not site.loops:
            if at is not None and site.index >= at.site.index:
                return T.int_const(0)
            hit = self._factor(site, values)
            if elem is not None:
                hit = T.and_(hit, T.eq(self.term(elem, values), element))
            return T.ite(hit, 1, 0)
        (loop,) = site.loops
        if loop.step != 1:
            raise NotModelled(f"loop at {loop.op.loc} with step {loop.step}")
        for cond in site.conditions:
            if cond.what != "loop" and loop.var in sympy.sympify(site.expr(cond.expr)).free_symbols:
                raise NotModelled(f"{site.describe()} runs under a condition on the counter of the loop at "
                                  f"{loop.op.loc}")
        lo = self.term(loop.start, values)
        if at is not None and loop in at.site.loops:
            k = values[loop.var]
            count = self._in_range(loop, lo, k, element, elem, values)
            if site.index < at.site.index:
                same = T.TRUE if elem is None else T.eq(self.term(elem, values), element)
                count = T.add(count, T.ite(same, 1, 0))
        elif at is None or site.index < at.site.index:
            count = self._in_range(loop, lo, self.term(loop.stop, values), element, elem, values)
        else:
            return T.int_const(0)
        return T.ite(self._factor(site, {**values, loop.var: lo}), count, 0)

    def _in_range(self, loop: Any, lo: T.Term, hi: T.Term, element: T.Term | None, elem: Any,
                  values: dict) -> T.Term:
        """``#{k in [lo, hi) : elem(k) == element}``."""
        if elem is None or loop.var not in elem.free_symbols:
            n = T.ite(T.gt(hi, lo), T.sub(hi, lo), 0)
            if elem is None:
                return n
            return T.ite(T.eq(self.term(elem, values), element), n, 0)
        shift = sympy.expand(elem - loop.var)
        if loop.var not in shift.free_symbols:  # one element per iteration: elem == k + c
            k = T.sub(element, self.term(shift, values))
            return T.ite(T.and_(T.le(lo, k), T.lt(k, hi)), 1, 0)
        shape = _periodic(elem, loop.var)
        if shape is None:
            raise NotModelled(f"mbarrier element {elem} is neither counter + c nor (counter + c) % S in the loop "
                              f"at {loop.op.loc}")
        offset, stages = shape
        x = T.sub(element, self.term(offset, values))
        n = T.sub(T.floordiv(T.sub(T.sub(hi, 1), x), stages), T.floordiv(T.sub(T.sub(lo, 1), x), stages))
        return T.ite(T.and_(T.gt(hi, lo), T.le(0, element), T.lt(element, stages)), n, 0)

    def total(self, sites: Iterable[Site], at: Instance | None, element: T.Term, views: dict) -> T.Term:
        """Sum of :meth:`count_before` over ``sites`` (each with its mbarrier element)."""
        parts = [self.count_before(s, at, element, element_expr(s, views[s.index])) for s in sites]
        return T.add(*parts) if parts else T.int_const(0)
