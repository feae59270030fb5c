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
  ``wgmma.wait_group`` that retires it, for a wgmma operand), and the round of that arrive;
  where that arrive names another element (it gives back the previous iteration's stage),
  the release is an arrive on the read's stage in the next iteration or after the loop,
  after a ``wgmma.wait_group(n)`` with ``n`` groups committed after the read's, by the
  reader's thread or by one elected thread after a barrier the reader passes once done
  (``asynchrony._pipelined_releases``).

Persistent kernels.  A ring that runs on across the tiles of a persistent kernel is indexed
by the *flattened counter* ``f = (o − o₀)·n + (i − i₀)`` of a tile loop ``o`` around a k-block
loop ``i`` of ``n`` iterations (:func:`flattened`): the iterations run in the order of ``f``,
which takes each value of ``[0, trips(o)·n)`` once, so counts over a site in both loops are
those of one loop over ``f``.  A site that runs only from inner iteration ``a`` on (``if
kc > 0``) subtracts the skipped iterations, a site that runs in one inner iteration only
(``if kc == 0``) or from some outer iteration on (``if j > 0``) counts one column of the nest or
a later part of the flattened range, and a site after the inner loop on the tile's
last stage ``(o·n + n − 1) % S`` counts over the tile loop: both are ``#{o : (o·n + c) % S ==
e}`` for a symbolic ``n``, which is linear by cases on ``n % S`` and ``(e − c) % S``
(:meth:`Counter._strided_count`).  A wait observed iterations ago (a release of the previous
k-block, or after the loop) is the latest earlier instance of the wait on the element.

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

Shapes outside this (more than two nested loops around an arrive, conditions on a counter
other than ``inner >= a``, ``inner == c`` or ``outer >= a``, elements that are neither periodic in the (flattened) counter nor
``(n·o + c) % S``) raise :class:`NotModelled`, which the properties report as ``unknown``
with the reason.
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


@dataclass(frozen=True)
class _FlatLoop:
    """The flattened counter of two nested loops, as :meth:`Counter._in_range` reads a loop."""

    var: sympy.Symbol
    op: N.For


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


#: a condition ``inner counter >= start + a`` on a site in nested loops is modelled up to this ``a``
_SKIP_LIMIT = 8


def _lower_bound(cond: Any, var: sympy.Symbol) -> Any:
    """``a`` when ``cond`` is ``var >= a`` (or ``var > a − 1``) with ``a`` free of ``var``."""
    if isinstance(cond, (sympy.GreaterThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.StrictLessThan)):
        lhs, rhs = cond.lhs, cond.rhs
        if isinstance(cond, (sympy.LessThan, sympy.StrictLessThan)):
            lhs, rhs = rhs, lhs
            strict = isinstance(cond, sympy.StrictLessThan)
        else:
            strict = isinstance(cond, sympy.StrictGreaterThan)
        if lhs == var and var not in sympy.sympify(rhs).free_symbols:
            return rhs + 1 if strict else rhs
    return None


def _equal_to(cond: Any, var: sympy.Symbol) -> Any:
    """``a`` when ``cond`` is ``var == a`` with ``a`` free of ``var``."""
    if isinstance(cond, sympy.Eq):
        for lhs, rhs in ((cond.lhs, cond.rhs), (cond.rhs, cond.lhs)):
            if lhs == var and var not in sympy.sympify(rhs).free_symbols:
                return rhs
    return None


def flattened(site: Site, expr: Any) -> tuple[sympy.Symbol, Any] | None:
    """``(f, e)`` with ``e`` (over ``f``) equal to ``expr`` at every iteration of the site's
    symbolic loops, ``f`` their flattened counter (``k − k₀`` for one loop; ``(o − o₀)·n + (i − i₀)``
    for two rectangular nested loops, ``n`` the inner trip count); ``None`` when ``expr`` is
    not a function of ``f`` alone or the loops do not have that shape."""
    flat = sympy.Symbol("__flat", integer=True)
    expr = sympy.sympify(site.expr(expr))
    if any(lp.step != 1 for lp in site.loops) or not site.loops or len(site.loops) > 2:
        return None
    if len(site.loops) == 1:
        (loop,) = site.loops
        out = expr.xreplace({loop.var: loop.start + flat})
        return (flat, out) if loop.var not in out.free_symbols else None
    outer, inner = site.loops
    if outer.var in (sympy.sympify(inner.start).free_symbols | sympy.sympify(inner.stop).free_symbols):
        return None
    n = inner.stop - inner.start
    out = expr.xreplace({inner.var: inner.start + flat - (outer.var - outer.start) * n})
    out = out.replace(lambda x: isinstance(x, (sympy.Mod, sympy.floor)),
                      lambda x: x.func(*(sympy.expand(arg) for arg in x.args)))
    out = sympy.expand(out)
    return (flat, out) if not {outer.var, inner.var} & out.free_symbols else None


def flat_position(a: Any, site: Site, values: dict) -> T.Term:
    """The flattened counter (see :func:`flattened`) of an instance of ``site``."""
    if len(site.loops) == 1:
        (loop,) = site.loops
        return T.sub(values[loop.var], a.encoder.term(loop.start, values))
    outer, inner = site.loops
    n = a.encoder.term(inner.stop - inner.start, values)
    return T.add(T.mul(T.sub(values[outer.var], a.encoder.term(outer.start, values)), n),
                 T.sub(values[inner.var], a.encoder.term(inner.start, values)))


def flat_trips(a: Any, site: Site, values: dict, outer_done: T.Term | None = None) -> T.Term:
    """How many flattened iterations of ``site``'s loops there are (``outer_done``: in that
    many iterations of the outer loop)."""
    if len(site.loops) == 1:
        (loop,) = site.loops
        return a.encoder.term(loop.trip_count(), values) if outer_done is None else outer_done
    outer, inner = site.loops
    n = a.encoder.term(inner.stop - inner.start, values)
    done = a.encoder.term(outer.trip_count(), values) if outer_done is None else outer_done
    return T.mul(done, n)


def _whole_strides(n: Any, c: Any) -> tuple[int, Any]:
    """``(m, c₀)`` with ``c == c₀ + m·n`` (``m`` an integer): ``(n·k + c) % S`` over ``k`` in
    ``[lo, hi)`` is ``(n·k' + c₀) % S`` over ``k'`` in ``[lo + m, hi + m)``.  Stating every
    count of one stride with the same ``c₀`` lets the solver match a site that skips a tile's
    first k-block (``(o·n − 1) % S``) with the one after the tile (``(o·n + n − 1) % S``)."""
    c = sympy.expand(c)
    m = c.coeff(n) if not sympy.sympify(n).is_number else 0
    if m != 0 and sympy.sympify(m).is_Integer:
        rest = sympy.expand(c - m * n)
        if not (sympy.sympify(n).free_symbols & rest.free_symbols) or rest.is_number:
            return int(m), rest
    return 0, c


def _strided(expr: Any, var: sympy.Symbol) -> tuple[Any, Any, int] | None:
    """``(n, c, S)`` when ``expr == (n·var + c) % S`` with ``n`` and ``c`` free of ``var`` (the
    ring stage of the last k-block of tile ``var``: ``(var·nk + nk − 1) % S``)."""
    if isinstance(expr, sympy.Mod):
        inner, modulus = expr.args
        if modulus.is_Integer and int(modulus) > 0:
            inner = sympy.expand(inner)
            n = inner.coeff(var)
            c = sympy.expand(inner - n * var)
            if n != 0 and var not in sympy.sympify(n).free_symbols and var not in c.free_symbols:
                return n, c, int(modulus)
    return None


def periodic(expr: Any, var: sympy.Symbol) -> tuple[Any, int] | None:
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

    def _factor(self, site: Site, values: dict, skip: Iterable[Any] = ()) -> T.Term:
        """1 when the site's block-uniform conditions hold, else 0 (conditions on the thread
        choose who executes it, not whether it runs; ``skip``: conditions the count handles)."""
        tid = self.analysis.tid
        parts = []
        skipped = {id(c) for c in skip}
        for cond in site.conditions:
            if cond.what == "loop" or id(cond) in skipped:
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
        if len(site.loops) == 2:
            return self._nested(site, at, element, elem, values)
        if len(site.loops) > 2:
            raise NotModelled(f"{site.describe()} is inside more than two nested symbolic loops")
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
        shape = periodic(elem, loop.var)
        if shape is None:
            strided = _strided(elem, loop.var)
            if strided is None:
                raise NotModelled(f"mbarrier element {elem} is neither counter + c nor (n·counter + c) % S in the "
                                  f"loop at {loop.op.loc}")
            n, offset, stages = strided
            shift, offset = _whole_strides(n, offset)
            if shift:  # count over k + shift: the offsets of one stride agree across sites
                lo, hi = T.add(lo, shift), T.add(hi, shift)
            return self._strided_count(lo, hi, self.term(n, values), self.term(offset, values), stages, element)
        offset, stages = shape
        x = T.sub(element, self.term(offset, values))
        n = T.sub(T.floordiv(T.sub(T.sub(hi, 1), x), stages), T.floordiv(T.sub(T.sub(lo, 1), x), stages))
        return T.ite(T.and_(T.gt(hi, lo), T.le(0, element), T.lt(element, stages)), n, 0)

    def _strided_count(self, lo: T.Term, hi: T.Term, n: T.Term, c: T.Term, stages: int,
                       element: T.Term) -> T.Term:
        """``#{k in [lo, hi) : (n·k + c) % S == element}`` for a symbolic stride ``n``, in linear
        arithmetic: whether ``k`` hits depends on ``k % S`` only, so the count is the sum over
        the residues ``ρ`` that hit (``(ρ·n + c − element) % S == 0``) of their classes' sizes
        ``⌊(hi − 1 − ρ)/S⌋ − ⌊(lo − 1 − ρ)/S⌋``."""
        parts = []
        for rho in range(stages):
            hits = T.eq(T.floormod(T.sub(T.add(T.mul(rho, n), c), element), stages), 0)
            size = T.sub(T.floordiv(T.sub(T.sub(hi, 1), rho), stages), T.floordiv(T.sub(T.sub(lo, 1), rho), stages))
            parts.append(T.ite(hits, size, 0))
        return T.ite(T.and_(T.gt(hi, lo), T.le(0, element), T.lt(element, stages)), T.add(*parts), 0)

    def _nested(self, site: Site, at: Instance | None, element: T.Term | None, elem: Any,
                values: dict) -> T.Term:
        """:meth:`count_before` for a site in two nested loops ``(outer, inner)``, the inner
        loop's range independent of the outer counter: the iterations run in the order of the
        *flattened counter* ``f = (o − o₀)·n + (i − i₀)`` (``n`` the inner trip count), which
        takes every value of ``[0, trips(outer)·n)`` once, so the counts are those of one
        loop over ``f``.  ``elem`` must be a function of ``f`` alone (a ring counter
        ``it = o·n + i`` of a persistent kernel: stage ``it % S``)."""
        outer, inner = site.loops
        for lp in site.loops:
            if lp.step != 1:
                raise NotModelled(f"loop at {lp.op.loc} with step {lp.step}")
        if outer.var in (sympy.sympify(inner.start).free_symbols | sympy.sympify(inner.stop).free_symbols):
            raise NotModelled(f"the loop at {inner.op.loc} has a range that depends on the counter of the loop at "
                              f"{outer.op.loc}")
        skip = 0  # the site runs in inner iterations ``i >= i₀ + skip`` only
        only = None  # ... in inner iteration ``i₀ + only`` alone (``if kc == 0``)
        first_outer = 0  # ... in outer iterations ``o >= o₀ + first_outer`` only (``if j > 0``)
        handled = []
        for cond in site.conditions:
            expr = sympy.sympify(site.expr(cond.expr)) if cond.what != "loop" else None
            if expr is None or not {outer.var, inner.var} & expr.free_symbols:
                continue
            inner_from, inner_at, outer_from = (_lower_bound(expr, inner.var), _equal_to(expr, inner.var),
                                                _lower_bound(expr, outer.var))
            if inner_from is not None:
                offset = symbolic.static_value(inner_from - inner.start)
                if offset is not None and 0 <= offset <= _SKIP_LIMIT:
                    skip = max(skip, offset)
                    handled.append(cond)
                    continue
            elif inner_at is not None and outer.var not in expr.free_symbols:
                offset = symbolic.static_value(inner_at - inner.start)
                if offset is not None and offset >= 0 and only in (None, offset):
                    only = offset
                    handled.append(cond)
                    continue
            elif outer_from is not None and inner.var not in expr.free_symbols:
                offset = symbolic.static_value(outer_from - outer.start)
                if offset is not None and offset >= 0:
                    first_outer = max(first_outer, offset)
                    handled.append(cond)
                    continue
            raise NotModelled(f"{site.describe()} runs under a condition on a loop counter (the nested loops "
                              f"at {outer.op.loc} and {inner.op.loc}) other than inner counter >= a constant, "
                              "inner counter == a constant or outer counter >= a constant")
        n = inner.stop - inner.start  # (no inner iteration when it is not positive)
        flat = sympy.Symbol("__flat", integer=True)
        elem_f = None
        if elem is not None:
            # i = i₀ + f − (o − o₀)·n: the element as a function of f, with o gone
            elem_f = sympy.sympify(elem).xreplace({inner.var: inner.start + flat - (outer.var - outer.start) * n})
            elem_f = sympy.expand(elem_f) if not isinstance(elem_f, sympy.Mod) else sympy.Mod(
                sympy.expand(elem_f.args[0]), elem_f.args[1])
            if outer.var in elem_f.free_symbols:
                raise NotModelled(f"the mbarrier element {elem} of {site.describe()} is not a function of the "
                                  f"flattened counter of the loops at {outer.op.loc} and {inner.op.loc}")
        virtual = _FlatLoop(flat, outer.op)
        n_t = self.term(n, values)
        o0, i0 = self.term(outer.start, values), self.term(inner.start, values)
        common = tuple(lp for lp in site.loops if at is not None and lp in at.site.loops)

        def column(rows: T.Term, b: int) -> T.Term:
            """Executions in inner iteration ``i₀ + b`` of the outer iterations
            ``[first_outer, rows)`` (relative to ``o₀``): a count over the outer counter of the
            element there."""
            lo_o = T.int_const(first_outer)
            if elem is None:
                return T.ite(T.gt(rows, lo_o), T.sub(rows, lo_o) if first_outer else rows, 0)
            at_b = sympy.sympify(elem).xreplace({inner.var: inner.start + b, outer.var: outer.start + flat})
            strided = _strided(sympy.Mod(sympy.expand(at_b.args[0]), at_b.args[1]) if isinstance(at_b, sympy.Mod)
                               else at_b, flat)
            if strided is None:
                raise NotModelled(f"mbarrier element {elem} of {site.describe()} is not (n·outer + c) % S in "
                                  f"inner iteration {b}")
            stride, offset, stages = strided
            shift, offset = _whole_strides(stride, offset)
            return self._strided_count(T.int_const(first_outer + shift), T.add(rows, shift), self.term(stride, values),
                                       self.term(offset, values), stages, element)

        # outer iterations whose inner iteration ``b`` comes before ``at``
        if len(common) == 2:
            k_o, k_i = T.sub(values[outer.var], o0), T.sub(values[inner.var], i0)

            def rows(b: int) -> T.Term:
                passed = T.gt(k_i, b) if site.index > at.site.index else T.ge(k_i, b)
                return T.add(k_o, T.ite(passed, 1, 0))
        elif len(common) == 1:
            done = T.sub(values[outer.var], o0)
            if site.index < at.site.index:  # the inner loop of this outer iteration ran already
                done = T.add(done, 1)

            def rows(b: int) -> T.Term:
                return done
        elif at is None or site.index < at.site.index:
            trips = self.term(outer.trip_count(), values)

            def rows(b: int) -> T.Term:
                return trips
        else:
            return T.int_const(0)
        if only is not None:  # one column of the nest: the outer iterations that reach inner iteration ``only``
            count = T.int_const(0) if only < skip else T.ite(T.gt(n_t, only), column(rows(only), only), 0)
        else:
            # the flattened iterations from the first outer one that runs, less the skipped columns
            lo = T.mul(first_outer, n_t) if first_outer else T.int_const(0)
            if len(common) == 2:
                f_at = T.add(T.mul(k_o, n_t), k_i)
                count = self._in_range(virtual, lo, f_at, element, elem_f, {**values, flat: f_at})
            else:
                count = self._in_range(virtual, lo, T.mul(rows(0), n_t), element, elem_f, values)
            for b in range(skip):
                if len(common) == 2:  # this outer iteration's column ``b`` only if it ran already
                    col = column(T.add(k_o, T.ite(T.gt(k_i, b), 1, 0)), b)
                else:
                    col = column(rows(b), b)
                count = T.sub(count, T.ite(T.gt(n_t, b), col, 0))
            if len(common) == 2 and site.index < at.site.index:  # this very iteration
                same = T.TRUE if elem is None else T.eq(self.term(elem, values), element)
                runs = (T.ge(k_i, skip), T.ge(k_o, first_outer)) if first_outer else (T.ge(k_i, skip),)
                count = T.add(count, T.ite(T.and_(same, *runs), 1, 0))
        start = {**values, outer.var: o0, inner.var: i0}
        return T.ite(self._factor(site, start, skip=handled), count, 0)

    def total(self, sites: Iterable[Site], at: Instance | None, element: T.Term, views: dict) -> T.Term:
        """Sum of :meth:`count_before` over ``sites`` (each with its mbarrier element)."""
        parts = [self.count_before(s, at, element, element_expr(s, views[s.index])) for s in sites]
        return T.add(*parts) if parts else T.int_const(0)
