"""The asynchrony model as VCs: cp.async groups, mbarrier pipelines, TMA, wgmma, proxy fences.

The reference interpreter (:mod:`argus.ir.interp_async`, :mod:`argus.ir.interp_wgmma`,
:mod:`argus.ir.happens_before`) defines what every asynchronous op means; this module states
the same rules symbolically, for a fresh thread, element and loop iteration:

==================  ========================================================================
property            VC
==================  ========================================================================
``async``           per ordinary access (a wgmma operand: a read until its ``wait_group``) of
                    memory an asynchronous copy writes, against every instance
                    of every such copy at the same address: the copy is *complete and
                    visible* to the reader, or it comes *after* the reader released the
                    data.  cp.async: its group ``g`` (commits before it) is below the
                    completed count ``commits − n`` of the issuer's latest ``wait(n)``
                    (before the read, or before a barrier that precedes the read); TMA:
                    the copy's phase is at most the phase the reader's latest wait on its
                    mbarrier observed, or the issuer's wait on the release barrier
                    observed the round of the reader's release (its first arrive after
                    the read, after the ``wgmma.wait_group`` that retires a wgmma read), or
                    a block barrier orders the access before the copy's issue
``mbarrier``        every use of an mbarrier comes after its init, the init's
                    ``fence.mbarrier_init`` and (for other threads and TMA) a barrier;
                    every round of arrivals brings exactly the init count
``expect-tx``       per ``arrive.expect_tx``: the declared bytes equal the bytes of the
                    copies it arms (whole boxes, zero-filled parts included)
``phase``           per mbarrier wait: the phase it waits for is reached (enough rounds
                    ever arrive: no deadlock, also for trip counts below the stage count)
                    and its parity is that phase's
``async`` (stores)  per ordinary write of shared memory a TMA store reads, against every
                    instance of such a store at the same address: the write comes before
                    the store's issue, or after a ``tma_store_wait`` of the store's thread
                    that completed its group (same thread), or after such a wait and a
                    barrier (another thread): the bulk copy reads its source asynchronously
``proxy``           per TMA store / wgmma operand in shared memory, against every ordinary
                    write of the same element before it: the writer executes
                    ``fence.proxy.async`` after the write, before a barrier that orders it
                    before the asynchronous read
``descriptor``      per wgmma operand in shared memory: its swizzle is the swizzle of every
                    TMA box that fills the buffer (the descriptor's mode)
``wgmma``           per ordinary access of a wgmma accumulator, against every earlier wgmma
                    instance of the thread on it: its group (wgmma commits before it) is
                    below ``commits − n`` of the thread's latest ``wgmma.wait_group(n)``
``cluster``         per remote arrive: a cluster barrier that every thread passes follows it (the
                    target block does not exit before the arrive)
==================  ========================================================================

In a cluster the VCs follow the other blocks: a multicast copy's instance ranges over the
blocks whose mask names the reader's block (block barriers order nothing across blocks), a
round of an mbarrier element counts the peers' remote arrives that target the block, and a
reader's release into another block is a remote arrive that targets it or a multicast copy
that lands in it (see :mod:`~argus.abstract_interp.mbarrier`).

Warp roles, register budgets and named barriers are in :mod:`~argus.abstract_interp.roles`;
the closed forms of mbarrier phases in :mod:`~argus.abstract_interp.mbarrier`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from argus import symbolic
from argus.abstract_interp import memory as M
from argus.abstract_interp import roles as R
from argus.abstract_interp.encoding import EncodingError, Instance, view_extents
from argus.abstract_interp.mbarrier import (
    Counter,
    NotModelled,
    bar_view,
    cluster_size,
    element_expr,
    peer_block,
    rank_term,
)
from argus.abstract_interp.program import Site, common_loops
from argus.ir import nodes as N
from argus.smt import terms as T

CP_ASYNC_ATOMS = frozenset({"cp.async", "cp.async.4", "cp.async.8", "cp.async.16"})
TMA_ATOMS = frozenset({"tma.load", "tma.store"})


@dataclass(frozen=True)
class AsyncAccess(M.Access):
    """An access that completes later than its issue (its order is proved by the ``async``
    VCs, not by barrier epochs)."""

    completes: str = ""


@dataclass(frozen=True)
class AsyncWrite(M.Write):
    """A write that lands when ``completes`` happens."""

    completes: str = ""


def _valid(view: N.View) -> tuple[Any, ...]:
    return (view.valid,) if view.valid is not None else ()


def accesses(op: N.Op) -> list[M.Access] | None:
    """The accesses of an asynchronous or synchronisation op (``None``: not one)."""
    match op:
        case N.Copy(atom=atom, src=src, dst=dst, pred=pred) if atom in CP_ASYNC_ATOMS:
            return [M.Access(src, "src", "read", pred, True),
                    AsyncAccess(dst, "dst", "write", None, completes="its cp.async group wait")]
        case N.Copy(atom="tma.load", src=src, dst=dst, pred=pred, mbarrier=bar):
            out = [M.Access(src, "src", "read", pred, True),
                   AsyncAccess(dst, "dst", "write", None, completes="its mbarrier phase")]
            return out + ([M.Access(bar, "mbarrier", "sync")] if bar is not None else [])
        case N.Copy(atom="tma.store", src=src, dst=dst, pred=pred):
            # the bulk copy reads its shared source after its issue, until a
            # tma_store_wait of its thread completes its group (``_store_sources``)
            return [AsyncAccess(src, "src", "read", None, True, completes="its TMA store group wait"),
                    AsyncAccess(dst, "dst", "write", pred, completes="its TMA store group wait")]
        case N.MbarrierInit(bar=bar) | N.MbarrierArrive(bar=bar) | N.MbarrierWait(bar=bar):
            return [M.Access(bar, "mbarrier", "sync")]
        case N.Fence() | N.AsyncCommit() | N.AsyncWait() | N.SetMaxNReg() | N.ClusterBarrier():
            return []
    return None


def writes(op: N.Op) -> list[M.Write]:
    """What an asynchronous copy writes: its destination, with the source's data and tags
    (zero-filled parts of a box included: known zeros), when it lands; a single-issuer copy is written by
    its elected thread only."""
    elected = (op.elected,) if getattr(op, "elected", None) is not None else ()
    match op:
        case N.Copy(atom=atom, src=src, dst=dst, pred=pred) if atom in CP_ASYNC_ATOMS:
            return [AsyncWrite(dst, True, (*_valid(dst), *elected), (src,), zero_fill=(src, pred),
                               completes="its cp.async group wait")]
        case N.Copy(atom="tma.load", src=src, dst=dst, pred=pred):
            return [AsyncWrite(dst, True, (*_valid(dst), *elected), (src,), zero_fill=(src, pred),
                               completes="its mbarrier phase")]
        case N.Copy(atom="tma.store", src=src, dst=dst, pred=pred):
            guard = (*_valid(dst), *((pred,) if pred is not None else ()), *elected)
            return [AsyncWrite(dst, True, guard, (src,), completes="its TMA store group wait")]
    return []


def ordered_elsewhere(access: M.Access, other: M.Access) -> bool:
    """A pair of accesses whose order the ``async`` VCs prove (not the barrier race check)."""
    return isinstance(access, AsyncAccess) or isinstance(other, AsyncAccess)


# --------------------------------------------------------------------------- the model


def _is_wgmma(op: N.Op) -> bool:
    return isinstance(op, N.Mma) and op.atom.startswith("wgmma")


@dataclass
class Model:
    """The asynchronous sites of one kernel, by kind."""

    counter: Counter
    bars: dict[int, N.View] = field(default_factory=dict)  # site index -> mbarrier view
    inits: list[Site] = field(default_factory=list)
    arrives: list[Site] = field(default_factory=list)  # count > 0
    armers: list[Site] = field(default_factory=list)  # expect_tx != 0
    waits: list[Site] = field(default_factory=list)
    tma_loads: list[Site] = field(default_factory=list)
    cp_copies: list[Site] = field(default_factory=list)
    cp_commits: list[Site] = field(default_factory=list)
    cp_waits: list[Site] = field(default_factory=list)
    wgmma_waits: list[Site] = field(default_factory=list)
    wgmma_commits: list[Site] = field(default_factory=list)
    wgmmas: list[Site] = field(default_factory=list)
    tma_stores: list[Site] = field(default_factory=list)
    tma_commits: list[Site] = field(default_factory=list)
    tma_waits: list[Site] = field(default_factory=list)
    init_fences: list[Site] = field(default_factory=list)
    proxy_fences: list[Site] = field(default_factory=list)
    async_writers: dict[str, list[Site]] = field(default_factory=dict)  # buffer -> cp.async / TMA loads
    #: remote arrive site index -> the local arrive site whose round it joins (see ``_rounds``)
    round_of: dict[int, Site] = field(default_factory=dict)
    #: remote arrive site index -> why it joins no local round (its VCs are ``unknown``)
    unmatched: dict[int, str] = field(default_factory=dict)


def model(analysis: Any) -> Model:
    got = analysis.__dict__.get("_async_model")
    if got is not None:
        return got
    m = Model(Counter(analysis))
    for site in analysis.program.sites:
        op = site.op
        view = bar_view(op)
        if view is not None:
            m.bars[site.index] = view
        match op:
            case N.MbarrierInit():
                m.inits.append(site)
            case N.MbarrierArrive(count=count, expect_tx=tx):
                if count:
                    m.arrives.append(site)
                if symbolic.static_value(tx) != 0:
                    m.armers.append(site)
            case N.MbarrierWait():
                m.waits.append(site)
            case N.Copy(atom="tma.load", dst=dst):
                m.tma_loads.append(site)
                m.async_writers.setdefault(dst.buffer.name, []).append(site)
            case N.Copy(atom=atom, dst=dst) if atom in CP_ASYNC_ATOMS:
                m.cp_copies.append(site)
                m.async_writers.setdefault(dst.buffer.name, []).append(site)
            case N.AsyncCommit(handle=handle) if handle.kind is N.HandleKind.CP_ASYNC_GROUP:
                m.cp_commits.append(site)
            case N.AsyncWait(group=group) if group is N.HandleKind.CP_ASYNC_GROUP:
                m.cp_waits.append(site)
            case N.AsyncWait(group=group) if group is N.HandleKind.WGMMA_GROUP:
                m.wgmma_waits.append(site)
            case N.AsyncCommit(handle=handle) if handle.kind is N.HandleKind.WGMMA_GROUP:
                m.wgmma_commits.append(site)
            case N.AsyncCommit(handle=handle) if handle.kind is N.HandleKind.TMA_STORE_GROUP:
                m.tma_commits.append(site)
            case N.AsyncWait(group=group) if group is N.HandleKind.TMA_STORE_GROUP:
                m.tma_waits.append(site)
            case N.Copy(atom="tma.store"):
                m.tma_stores.append(site)
            case N.Mma() if _is_wgmma(op):
                m.wgmmas.append(site)
            case N.Fence(fence="mbarrier_init"):
                m.init_fences.append(site)
            case N.Fence(fence="proxy.async"):
                m.proxy_fences.append(site)
    _rounds(m)
    analysis.__dict__["_async_model"] = m
    return m


def _rounds(m: Model) -> None:
    """Join each remote arrive (on a peer's mbarrier) to the round of the latest local arrive
    before it on the same mbarrier element, in the same loop body and branch: a round of an
    element is then one execution of the local site by this block's threads together with the
    executions of its remote sites by the peers that target this block."""
    for site in m.arrives:
        if not remote(m, site):
            continue
        view = m.bars[site.index]
        elem = element_expr(site, view)
        local = [s for s in m.arrives if s.index < site.index and not remote(m, s)
                 and m.bars[s.index].buffer.name == view.buffer.name and s.loops == site.loops
                 and [id(c) for c in s.conditions] == [id(c) for c in site.conditions]
                 and sympy.simplify(element_expr(s, m.bars[s.index]) - elem) == 0]
        if local:
            m.round_of[site.index] = local[-1]
        else:
            m.unmatched[site.index] = (f"the remote arrive at {site.op.loc} on %{view.buffer.name} follows no local "
                                       "arrive on the same element in its loop body (its round is not modelled)")


def remote(m: Model, site: Site) -> bool:
    """An arrive on a peer block's mbarrier (a view with a cluster rank)."""
    return isinstance(site.op, N.MbarrierArrive) and m.bars[site.index].rank is not None


def multicast(op: N.Op) -> bool:
    return isinstance(op, N.Copy) and op.atom == "tma.load" and getattr(op, "multicast", None) is not None


# --------------------------------------------------------------------------- clusters


def block_rank(a: Any, values: dict) -> T.Term:
    """The cluster rank of the block of ``values``."""
    return rank_term(a.kernel, [values[s] for s in a.block_ids])


def peer_values(a: Any, values: dict, rank: T.Term) -> dict:
    """``values`` moved to the block of cluster rank ``rank`` in the same cluster."""
    out = {k: v for k, v in values.items() if k is not N.CLUSTER_RANK}
    out.update(zip(a.block_ids, peer_block(a.kernel, [values[s] for s in a.block_ids], rank)))
    return out


def same_block(a: Any, x: dict, y: dict) -> T.Term:
    return T.and_(*(T.eq(x[s], y[s]) for s in a.block_ids))


def _target(a: Any, m: Model, site: Site, values: dict) -> T.Term:
    """The cluster rank whose mbarrier a remote arrive instance signals."""
    return a.encoder.term(site.expr(m.bars[site.index].rank), values)


def multicast_masks(a: Any, copy: Site) -> list[int]:
    """The multicast mask of a copy per issuing cluster rank (constants)."""
    masks = []
    for p in range(cluster_size(a.kernel)):
        value = symbolic.static_value(sympy.sympify(copy.expr(copy.op.multicast)).xreplace({N.CLUSTER_RANK: p}))
        if value is None:
            raise NotModelled(f"the multicast mask of the TMA copy at {copy.op.loc} is not a constant per rank")
        masks.append(int(value))
    return masks


def delivers(a: Any, copy: Site, issuer: T.Term, destination: T.Term) -> T.Term:
    """The copy issued by the block of cluster rank ``issuer`` lands in the block of rank
    ``destination`` (its mask has that bit; without multicast: the issuing block only)."""
    if not multicast(copy.op):
        return T.eq(issuer, destination)
    options = [T.and_(T.eq(issuer, p), T.eq(destination, r))
               for p, mask in enumerate(multicast_masks(a, copy)) for r in range(cluster_size(a.kernel))
               if mask >> r & 1]
    return T.or_(*options) if options else T.FALSE


def rank_var(a: Any, name: str) -> T.Term:
    return T.int_var(f"rank{name}", 0, cluster_size(a.kernel) - 1)


# --------------------------------------------------------------------------- entry point


def properties(b: Any, site: Site) -> None:
    """The asynchrony VCs of one site (a site maker of :mod:`~argus.abstract_interp.properties`)."""
    a = b.analysis
    m = model(a)
    op = site.op
    makers = []
    if site.index in m.bars and not isinstance(op, N.MbarrierInit):
        makers.append(_initialized)
    if isinstance(op, N.MbarrierArrive):
        makers += [_arrivals, _expect_tx]
        if remote(m, site):
            makers.append(_outlived)
    if isinstance(op, N.MbarrierWait):
        makers += [_phase, _lag]
    if isinstance(op, N.Copy) and op.atom == "tma.load":
        makers.append(_armed)
    if (isinstance(op, N.Copy) and op.atom == "tma.store") or _is_wgmma(op):
        makers.append(_proxy)
    if _is_wgmma(op):
        makers.append(_descriptor)
    makers += [_visibility, _store_sources, _accumulators]
    makers += R.MAKERS
    for make in makers:
        try:
            make(b, site)
        except NotModelled as err:
            b.unknown(_PROPERTY_OF.get(make, "async"), site, f"not modelled at {site.describe()}: {err}")
        except (EncodingError, T.TermError) as err:
            b.unknown(_PROPERTY_OF.get(make, "async"), site, f"cannot encode {site.describe()}: {err.message}")


# --------------------------------------------------------------------------- helpers


def _block(a: Any, inst: Instance) -> dict:
    return {s: inst.values[s] for s in a.block_ids}


def _roles(a: Any, inst: Instance, view: N.View | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "thread": inst.values.get(a.tid),
        "block": tuple(inst.values.get(s) for s in a.block_ids),
        "iteration": {lp.var.name: inst.values[lp.var] for lp in inst.site.loops},
    }
    if view is not None:
        out["element"] = tuple(inst.values[s] for s in a._coord_symbols(view))
        out["logical"] = a.logical(inst, view)
        out["view"] = view
    return out


def _other(a: Any, inst: Instance, access: M.Access) -> dict[str, Any]:
    info = {"other_site": inst.site, "other_access": access, "other_thread": inst.values.get(a.tid),
            "other_block": tuple(inst.values.get(s) for s in a.block_ids),
            "other_iteration": {lp.var.name: inst.values[lp.var] for lp in inst.site.loops}}
    coords = [inst.values.get(s) for s in a._coord_symbols(access.view)]
    if all(c is not None for c in coords):
        info["other_element"] = tuple(coords)
    return info


def _at(site: Site, values: dict) -> Instance:
    return Instance(site, values)


def _element(a: Any, m: Model, site: Site, values: dict) -> T.Term:
    return a.encoder.term(element_expr(site, m.bars[site.index]), values)


def _same_bar(m: Model, x: Site, y: Site) -> bool:
    return m.bars[x.index].buffer.name == m.bars[y.index].buffer.name


def _thread_path(a: Any, site: Site, values: dict) -> T.Term:
    """``site``'s path (with its election) at ``values`` (a thread and iteration that need not
    be the site's own)."""
    return a.encoder.term(R.issue_path(site), values)


def _issues(a: Any, inst: Instance) -> T.Term:
    """The instance's thread executes its site (path and election)."""
    return a.value(inst, R.issue_path(inst.site))


def _round_sites(m: Model, bar: str) -> list[Site]:
    """The arrive sites on ``bar`` that open a round (remote arrives join a local one's)."""
    out = []
    for s in m.arrives:
        if m.bars[s.index].buffer.name != bar:
            continue
        if s.index in m.unmatched:
            raise NotModelled(m.unmatched[s.index])
        if not remote(m, s):
            out.append(s)
    return out


def _rounds_before(a: Any, m: Model, bar: str, at: Instance, element: T.Term) -> T.Term:
    """Rounds of arrivals on ``bar[element]`` before ``at`` (for a remote arrive: before the
    local arrive whose round it joins)."""
    sites = _round_sites(m, bar)
    if at.site.index in m.round_of:
        at = Instance(m.round_of[at.site.index], at.values)
    return m.counter.total(sites, at, element, m.bars)


def _rounds_total(a: Any, m: Model, bar: str, values: dict, element: T.Term) -> T.Term:
    sites = _round_sites(m, bar)
    parts = [m.counter.count_before(s, None, element, element_expr(s, m.bars[s.index]), values) for s in sites]
    return T.add(*parts) if parts else T.int_const(0)


def wait_phase(a: Any, m: Model, wait: Site, values: dict) -> T.Term:
    """The phase a wait instance observes (see :mod:`~argus.abstract_interp.mbarrier`)."""
    op: N.MbarrierWait = wait.op
    inst = _at(wait, values)
    if op.phase is not None:
        return a.encoder.term(wait.expr(op.phase), values)
    element = _element(a, m, wait, values)
    sites = [s for s in m.waits if _same_bar(m, s, wait)]
    own = m.counter.total(sites, inst, element, m.bars)
    parity = a.encoder.term(wait.expr(op.parity), values)
    return T.ite(T.eq(T.floormod(T.sub(own, parity), 2), 0), own, T.sub(own, 1))


def observed(a: Any, m: Model, at: Instance, bar: str, element: T.Term) -> T.Term:
    """The phase of ``bar[element]`` the thread of ``at`` last observed before it (``-1``: the
    initial state): its latest wait on that element in the same iteration, or before the loop,
    or in an earlier iteration (:func:`_earlier_wait`: a release of the previous iteration's
    stage, or after the loop, observed the stage's phase iterations ago)."""
    out: T.Term = T.int_const(-1)
    looped = [w for w in m.waits if m.bars[w.index].buffer.name == bar and w.loops]
    if len(looped) == 1:  # one wait site in loops: its latest earlier instance is well defined
        earlier = _earlier_wait(a, m, looped[0], at, element)
        if earlier is not None:
            out = T.ite(earlier[0], earlier[1], out)
    for wait in m.waits:
        if m.bars[wait.index].buffer.name != bar or wait.index >= at.site.index:
            continue
        if tuple(wait.loops) != common_loops(wait, at.site):
            continue
        values = dict(at.values)
        hit = T.and_(_thread_path(a, wait, values), T.eq(_element(a, m, wait, values), element))
        out = T.ite(hit, wait_phase(a, m, wait, values), out)  # later waits override earlier ones
    return out


def _earlier_wait(a: Any, m: Model, wait: Site, at: Instance, element: T.Term) -> tuple[T.Term, T.Term] | None:
    """``(hit, phase)`` of the latest instance of ``wait`` on ``element`` in an iteration of its
    loops that ended before ``at`` (same-iteration instances are :func:`observed`'s own case):
    its loops' flattened counter ``f`` runs below a bound ``U`` (the reader's own ``f``, or the
    iterations its enclosing loops completed), the element is ``(f + c) % S``, so the latest is
    ``U − 1 − ((U − 1 + c − e) mod S)``; ``None`` where the wait does not have that shape."""
    from argus.abstract_interp.mbarrier import flat_position, flat_trips, flattened, periodic

    op: N.MbarrierWait = wait.op
    if op.phase is None:
        return None
    counters = {lp.var for lp in wait.loops}
    own = [c for c in wait.conditions if c.what != "loop"]
    if any(counters & sympy.sympify(wait.expr(c.expr)).free_symbols for c in own):
        return None
    elem = flattened(wait, element_expr(wait, m.bars[wait.index]))
    phase = flattened(wait, op.phase)
    if elem is None or phase is None:
        return None
    flat, elem_f = elem
    shape = periodic(elem_f, flat)
    if shape is None:
        return None
    offset, stages = shape
    common = common_loops(wait, at.site)
    values = dict(at.values)
    if common == tuple(wait.loops):
        bound = flat_position(a, wait, values)
    elif len(common) == 1 and len(wait.loops) == 2:
        outer = wait.loops[0]
        done = T.sub(values[outer.var], a.encoder.term(outer.start, values))
        if wait.index < at.site.index:
            done = T.add(done, 1)
        bound = flat_trips(a, wait, values, done)
    elif not common and wait.index < at.site.index:
        bound = flat_trips(a, wait, values)
    else:
        return None
    last = T.sub(bound, 1)
    latest = T.sub(last, T.floormod(T.sub(T.add(last, a.encoder.term(offset, values)), element), stages))
    path = sympy.And(*(c.expr for c in own), *((wait.expr(op.elected),) if op.elected is not None else ()))
    hit = T.and_(T.le(0, latest), T.le(0, element), T.lt(element, stages), a.encoder.term(wait.expr(path), values))
    return hit, a.encoder.term(phase[1], {**values, flat: latest})


def copy_phase(a: Any, m: Model, copy: Instance) -> T.Term:
    """The phase a TMA copy joins: the round its issuer armed last in the same iteration, else
    the next round."""
    site = copy.site
    bar = m.bars[site.index].buffer.name
    element = _element(a, m, site, dict(copy.values))
    rounds = _rounds_before(a, m, bar, copy, element)
    own = {id(c) for c in site.conditions}
    for armer in m.armers:
        if armer.index >= site.index or m.bars[armer.index].buffer.name != bar or armer.loops != site.loops:
            continue
        if not all(id(c) in own for c in armer.conditions):
            continue
        same = T.and_(_thread_path(a, armer, dict(copy.values)), T.eq(_element(a, m, armer, dict(copy.values)), element))
        if same is T.FALSE:
            continue
        return T.ite(same, T.sub(rounds, 1), rounds)
    return rounds


def delivered_to(a: Any, copy: Instance, reader: Instance) -> T.Term:
    """The TMA ``copy`` instance is the one whose data ``reader`` sees at its address: it
    joined the phase of its mbarrier element that the reader's latest wait observed.  (For read
    resolution across loops — a consumer role reading what a producer role's loop loaded — the
    copy's iteration is pinned by this equation, not by program order.)

    A multicast copy may be another block's: its instance carries the issuing block and its
    rank, which the mask must send to the reader's block.  It joins the phase of the reader's
    mbarrier element that its issuer's own count names: the blocks of a cluster run the same
    program, and the ``async`` and ``phase`` VCs (which follow remote arrives and multicast
    copies across the blocks) order the copies of later rounds after the reader's release."""
    m = model(a)
    bar = m.bars[copy.site.index].buffer.name
    element = _element(a, m, copy.site, dict(copy.values))
    out = T.eq(copy_phase(a, m, copy), observed(a, m, reader, bar, element))
    if multicast(copy.site.op):
        issuer = copy.values.get(N.CLUSTER_RANK, block_rank(a, copy.values))
        out = T.and_(out, T.le(0, issuer), T.lt(issuer, cluster_size(a.kernel)),
                     delivers(a, copy.site, issuer, block_rank(a, reader.values)))
    return out


# --------------------------------------------------------------------------- mbarrier VCs


def _initialized(b: Any, site: Site) -> None:
    """The mbarrier is initialized, the init fenced, and (for another thread or the async
    proxy) a barrier lies between the fence and this use."""
    a = b.analysis
    m = model(a)
    bar = m.bars[site.index]
    inst, hyps = a.fresh(site)
    hyps.append(_issues(a, inst))
    element = _element(a, m, site, dict(inst.values))
    tma = isinstance(site.op, N.Copy)
    # a remote arrive, or a multicast copy that also signals the peers' mbarriers
    peer = bar.rank is not None or multicast(site.op)
    if any(s.loops for s in m.inits if m.bars[s.index].buffer.name == bar.buffer.name) or \
            any(f.loops for f in m.init_fences):
        raise NotModelled(f"%{bar.buffer.name} is initialized (or fenced) inside a symbolic loop")
    options = []
    for init in m.inits:
        if init.index >= site.index or m.bars[init.index].buffer.name != bar.buffer.name or init.loops:
            continue
        e_init = a.encoder.term(element_expr(init, m.bars[init.index]), {})
        init_threads = R.executing_threads(a, init, dict(inst.values))
        for fence in m.init_fences:
            if not (init.index < fence.index < site.index) or fence.loops:
                continue
            fence_threads = R.executing_threads(a, fence, dict(inst.values))
            if fence_threads is not None and init_threads is not None and not set(init_threads) <= set(fence_threads):
                continue
            cluster = T.bool_const(_cluster_barrier_between(a, fence, site))
            if peer:  # a peer's init is ordered before this use by a cluster barrier only
                barrier_between, own = cluster, T.FALSE
            else:
                barrier_between = T.or_(a.barrier_orders(Instance(fence, inst.values), inst, later=True), cluster)
                own = (T.FALSE if tma or init_threads is None
                       else T.or_(*(T.eq(inst.values[a.tid], t) for t in init_threads)))
            options.append(T.and_(T.eq(element, e_init), T.or_(barrier_between, own)))
    goal = T.or_(*options) if options else T.FALSE
    what = "a TMA copy completing on" if tma else f"{site.op.kind} of"
    b.add("mbarrier", site, hyps, goal,
          f"{what} %{bar.buffer.name} comes after its mbarrier_init, fence.mbarrier_init and a barrier",
          _roles(a, inst))


def _cluster_barrier_between(a: Any, first: Site, second: Site) -> bool:
    """A cluster barrier every thread passes, outside loops, between two sites (it orders the
    cluster's blocks, the own block included)."""
    return any(isinstance(s.op, N.ClusterBarrier) and first.index < s.index < second.index and not s.loops
               and not s.conditions for s in a.program.sites)


def _outlived(b: Any, site: Site) -> None:
    """A remote arrive is ordered before the target block's exit: a cluster barrier that every
    thread of the cluster passes (outside loops and branches) follows it.  Without one the
    target may exit (its shared memory freed) while the arrive is still to come."""
    a = b.analysis
    m = model(a)
    later = [s for s in a.program.sites if isinstance(s.op, N.ClusterBarrier) and s.index > site.index
             and not s.loops and not s.conditions]
    inst, hyps = a.fresh(site)
    hyps.append(_issues(a, inst))
    roles = _roles(a, inst)
    name = m.bars[site.index].buffer.name
    message = (f"the remote arrive on the peer's %{name} is ordered before the peer exits (a cluster barrier "
               "follows it)")
    if later:
        b.add("cluster", site, hyps, T.TRUE, message, roles,
              structural=f"the cluster barrier at {later[0].op.loc} follows it")
    else:
        b.add("cluster", site, hyps, T.FALSE, message, roles)


def _arrivals(b: Any, site: Site) -> None:
    """Every round of arrivals on the element brings exactly its init count."""
    a = b.analysis
    m = model(a)
    op: N.MbarrierArrive = site.op
    if not op.count:
        return
    if site.index in m.unmatched:
        raise NotModelled(m.unmatched[site.index])
    if site.index in m.round_of:
        return  # its arrivals are counted in the round of its local arrive
    bar = m.bars[site.index]
    inst, hyps = a.fresh(site)
    values = dict(inst.values)
    arrived = R.thread_sum(a, site, values, op.count)
    here = block_rank(a, values)
    for member in (s for s in m.arrives if m.round_of.get(s.index) is site):
        # the peers (any rank of the cluster, this block's own included) whose remote arrive
        # in the same iteration targets this block
        for p in range(cluster_size(a.kernel)):
            theirs = peer_values(a, values, T.int_const(p))
            arrived = T.add(arrived, T.ite(T.eq(_target(a, m, member, theirs), here),
                                           R.thread_sum(a, member, theirs, member.op.count), 0))
    element = _element(a, m, site, values)
    count = _init_count(a, m, bar.buffer.name, element, site)
    roles = _roles(a, inst)
    roles["arrivals"] = arrived
    waits = [w for w in m.waits if m.bars[w.index].buffer.name == bar.buffer.name]
    if waits:  # a round short of arrivals shows up as a waiter that never returns
        w = waits[0]
        winst = Instance(w, {**values, **{lp.var: T.int_var(f"{lp.var.name}'w", symbolic.static_value(lp.start))
                                          for lp in w.loops}})
        roles["alternatives"] = [(T.lt(arrived, count), _other(a, winst, M.Access(m.bars[w.index], "mbarrier", "sync")))]
    b.add("mbarrier", site, hyps, T.or_(T.eq(arrived, 0), T.eq(arrived, count)),
          f"the arrivals of one round on %{bar.buffer.name} equal its init count", roles)


def _init_count(a: Any, m: Model, bar: str, element: T.Term, site: Site) -> T.Term:
    out: T.Term | None = None
    for init in m.inits:
        if m.bars[init.index].buffer.name != bar or init.loops:
            continue
        e = a.encoder.term(element_expr(init, m.bars[init.index]), {})
        out = T.ite(T.eq(element, e), init.op.count, out if out is not None else -1)
    if out is None:
        raise NotModelled(f"%{bar} has no mbarrier_init outside loops")
    return out


def _armed_copies(m: Model, armer: Site) -> list[Site]:
    """The TMA copies the arrive arms: later copies on the same mbarrier element in the same
    iteration and branch, up to the next arming arrive."""
    out = []
    name = m.bars[armer.index].buffer.name
    mine = {id(c) for c in armer.conditions}
    elem = element_expr(armer, m.bars[armer.index])
    for site in m.tma_loads + m.armers:
        if site.index <= armer.index or site.loops != armer.loops or m.bars[site.index].buffer.name != name:
            continue
        if not all(id(c) in {id(x) for x in site.conditions} for c in armer.conditions if id(c) in mine):
            continue
        if sympy.simplify(element_expr(site, m.bars[site.index]) - elem) != 0:
            continue
        if isinstance(site.op, N.MbarrierArrive):
            break
        out.append(site)
    return sorted(out, key=lambda s: s.index)


def box_bytes(view: N.View) -> int:
    """Bytes a TMA box delivers into shared memory: the whole box, zero-filled parts included."""
    n = 1
    for e in view_extents(view):
        v = symbolic.static_value(e)
        if v is None:
            raise NotModelled(f"a TMA box of %{view.buffer.name} with a symbolic extent")
        n *= v
    return n * (view.buffer.dtype.bits // 8)


def _senders(a: Any, copy: Site, values: dict, hyps: list) -> Any:
    """How many blocks' copies land in this block's barrier: 1 without multicast; with a
    multicast mask, the blocks of the cluster (all issuing the copy) whose mask has this
    block's rank."""
    if copy.op.multicast is None:
        return 1
    size = cluster_size(a.kernel)
    masks = multicast_masks(a, copy)
    rank = a.encoder.term(N.CLUSTER_RANK, values)
    hyps.append(T.and_(T.le(0, rank), T.lt(rank, size)))
    out: Any = 0
    for r in range(size):
        out = T.ite(T.eq(rank, r), sum((m >> r) & 1 for m in masks), out)
    return out


def _expect_tx(b: Any, site: Site) -> None:
    a = b.analysis
    m = model(a)
    if site not in m.armers:
        return
    op: N.MbarrierArrive = site.op
    inst, hyps = a.fresh(site)
    hyps.append(_issues(a, inst))
    values = dict(inst.values)
    declared = a.value(inst, op.expect_tx)
    copies = _armed_copies(m, site)
    parts = []
    for c in copies:
        here = T.and_(*(a.encoder.term(c.expr(cond.expr), values) for cond in c.conditions
                        if cond.what != "loop" and cond not in site.conditions))
        parts.append(T.ite(here, T.mul(box_bytes(c.op.dst), _senders(a, c, values, hyps)), 0))
    delivered = T.add(*parts) if parts else T.int_const(0)
    roles = _roles(a, inst)
    roles["declared"], roles["delivered"] = declared, delivered
    alternatives = []
    if copies:
        last = copies[-1]
        readers = _readers(a, m, last.op.dst.buffer.name)
        if readers:
            r_site, r_view = readers[0]
            rinst = Instance(r_site, {**values, **{lp.var: T.int_var(f"{lp.var.name}'r", symbolic.static_value(lp.start))
                                                   for lp in r_site.loops}})
            alternatives.append((T.lt(declared, delivered), _other(a, rinst, M.Access(r_view, "read", "read"))))
    waits = [w for w in m.waits if _same_bar(m, w, site)]
    if waits:
        w = waits[0]
        winst = Instance(w, {**values, **{lp.var: T.int_var(f"{lp.var.name}'w", symbolic.static_value(lp.start))
                                          for lp in w.loops}})
        alternatives.append((T.gt(declared, delivered), _other(a, winst, M.Access(m.bars[w.index], "mbarrier", "sync"))))
    roles["alternatives"] = alternatives
    b.add("expect-tx", site, hyps, T.eq(declared, delivered),
          f"the transaction bytes declared on %{m.bars[site.index].buffer.name} equal the bytes of the TMA "
          "boxes of that phase", roles)


def _armed(b: Any, site: Site) -> None:
    """A TMA copy whose bytes no arrive of its iteration declares is stated by the arrive
    that does, which the closed forms cannot find."""
    m = model(b.analysis)
    if any(site in _armed_copies(m, armer) for armer in m.armers):
        return
    b.unknown("expect-tx", site, f"the transaction bytes of the TMA copy at {site.op.loc} are not declared by "
              "an arrive.expect_tx of the same iteration")


def _wait_instance(a: Any, m: Model, site: Site) -> tuple[Instance, list[T.Term], str, T.Term, T.Term]:
    """A fresh instance of a wait (its thread executes it), its hypotheses, the mbarrier's
    name, the element waited on and the phase waited for."""
    inst, hyps = a.fresh(site)
    hyps.append(_issues(a, inst))
    values = dict(inst.values)
    return inst, hyps, m.bars[site.index].buffer.name, _element(a, m, site, values), wait_phase(a, m, site, values)


def _phase(b: Any, site: Site) -> None:
    """The wait's phase is one that completes (no deadlock) and its parity is that phase's."""
    a = b.analysis
    m = model(a)
    op: N.MbarrierWait = site.op
    inst, hyps, bar, element, phase = _wait_instance(a, m, site)
    values = dict(inst.values)
    total = _rounds_total(a, m, bar, values, element)
    parity = a.encoder.term(site.expr(op.parity), values)
    roles = _roles(a, inst)
    roles["phase"], roles["rounds"] = phase, total
    goal = T.and_(T.lt(phase, total), T.eq(T.floormod(phase, 2), T.floormod(parity, 2)))
    message = f"the phase this thread waits for on %{bar} completes and has the parity it waits with"
    deps: tuple[frozenset, tuple] = (frozenset(), ())
    if len(site.loops) == 2:  # the flattened counter lies below its trip count (lemma ``flat``)
        hyps.append(flat_fact(a, inst))
        deps = (frozenset({("flat", site.index)}), ())
    if op.phase is None and _guards_reads(a, m, site):
        # a consumer's parity names the phase of its data: its own count of waits on the element
        own = m.counter.total([s for s in m.waits if _same_bar(m, s, site)], inst, element, m.bars)
        goal = T.and_(goal, T.eq(T.floormod(parity, 2), T.floormod(own, 2)))
        roles["phase"] = own
        message = (f"the parity this thread waits with on %{bar} is that of the phase its data's copies join "
                   "(its own count of waits on the element), and that phase completes")
    b.add("phase", site, hyps, goal, message, roles, deps)


def flat_fact(a: Any, inst: Instance) -> T.Term:
    """``0 <= f < trips(outer)·n`` for the flattened counter ``f`` of an instance in two nested
    loops: true of every iteration, but a product of two symbolic counts, which the solvers
    find hard inside a larger query; it is proved on its own (lemma ``flat``, :func:`flat_lemma`)."""
    from argus.abstract_interp.mbarrier import flat_position, flat_trips

    values = dict(inst.values)
    f = flat_position(a, inst.site, values)
    return T.and_(T.le(0, f), T.lt(f, flat_trips(a, inst.site, values)))


def flat_lemma(b: Any, site: Site) -> None:
    """Lemma ``flat`` of a site in two nested loops (see :func:`flat_fact`)."""
    a = b.analysis
    inst, hyps = a.fresh(site, "#flat")
    roles = _roles(a, inst)
    vc = b.add("phase", site, [*hyps, a.path(inst)], flat_fact(a, inst),
               f"the flattened counter of the loops at {site.loops[0].op.loc} and {site.loops[1].op.loc} lies in "
               "its range", roles)
    vc.roles["lemma_key"] = ("flat", site.index)


def _lag(b: Any, site: Site) -> None:
    """The waiter lags at most one phase: round ``q + 1`` of the element it waits on for phase
    ``q`` does not complete before the wait.  A wait tests a parity only; once the barrier is
    two phases ahead it shows the waited parity again, and the wait blocks until a phase that
    carries other data (or forever).  Every arrival of round ``q + 1`` must be ordered after
    the wait: by program order in the waiting thread, by a block barrier, or because its thread
    observed, before arriving, the round of the waiter's release (its next arrive)."""
    a = b.analysis
    m = model(a)
    inst, hyps, bar, element, phase = _wait_instance(a, m, site)
    block = _block(a, inst)
    early = []
    flat: set = set()  # sites whose lemma ``flat`` the VC uses
    if len(site.loops) == 2:
        hyps.append(flat_fact(a, inst))
        flat.add(("flat", site.index))
    for arrive in (s for s in m.arrives if m.bars[s.index].buffer.name == bar):
        if not remote(m, arrive):
            r, more = a.fresh(arrive, f"'lag{arrive.index}", block=block)
        else:  # a peer's remote arrive that targets this block
            issuer = rank_var(a, f"'lag{arrive.index}")
            theirs = {s: v for s, v in peer_values(a, block, issuer).items() if s in a.block_ids}
            r, more = a.fresh(arrive, f"'lag{arrive.index}", block=theirs)
            more = [*more, T.eq(_target(a, m, arrive, dict(r.values)), block_rank(a, block))]
        e_r = _element(a, m, arrive, dict(r.values))
        round_ = _rounds_before(a, m, bar, r, e_r)
        if len(arrive.loops) == 2:
            more = [*more, flat_fact(a, r)]
            flat.add(("flat", arrive.index))
        active = T.and_(_issues(a, r), T.eq(e_r, element), T.eq(round_, T.add(phase, 1)), *more)
        if active is T.FALSE:
            continue
        if remote(m, arrive):
            ordered = _released(a, m, inst, False, r)
        else:
            own = T.and_(T.eq(r.values[a.tid], inst.values[a.tid]), a.precedes(inst, r))
            ordered = T.or_(own, a.barrier_orders(inst, r, later=True), _released(a, m, inst, False, r))
        early.append(T.and_(active, T.not_(ordered)))
    if not early:
        return
    roles = _roles(a, inst)
    roles["phase"] = phase
    b.add("phase", site, hyps, T.not_(T.or_(*early)),
          f"no arrival of the round after the one this thread waits for on %{bar} can come before the wait "
          "(a waiter more than one phase behind sees its parity again)", roles, (frozenset(flat), ()))


def _guards_reads(a: Any, m: Model, wait: Site) -> bool:
    """Does the wait come before reads, in its loop body, of memory that TMA copies completing
    on its mbarrier write (the wait of a consumer, not of a producer)?"""
    name = m.bars[wait.index].buffer.name
    filled = {c.op.dst.buffer.name for c in m.tma_loads if m.bars[c.index].buffer.name == name}
    return any(v.buffer.name in filled for s in a.program.sites if s.index > wait.index and s.loops == wait.loops
               for v, _, _ in _reads(a, s))


# --------------------------------------------------------------------------- reads of async data


def _reads(a: Any, site: Site) -> list[tuple[N.View, M.Access, bool]]:
    """``(view, access, asynchronous)`` of each ordinary read or write of shared memory at
    ``site`` (an access of an element an asynchronous copy may still write); wgmma operands are
    read until their ``wait_group``."""
    out = []
    op = site.op
    if _is_wgmma(op):
        for view, role in ((op.a, "a"), (op.b, "b")):
            if view.space is N.MemorySpace.SHARED:
                out.append((view, M.Access(view, role, "read"), True))
        return out
    for acc in a.accesses.get(site.index, []):
        if acc.kind in ("read", "write") and acc.buffer.space is N.MemorySpace.SHARED \
                and not isinstance(acc, AsyncAccess):
            out.append((acc.view, acc, False))
    return out


def _readers(a: Any, m: Model, buffer: str) -> list[tuple[Site, N.View]]:
    return [(s, v) for s in a.program.sites for v, acc, _ in _reads(a, s)
            if v.buffer.name == buffer and acc.kind == "read"]


def _visibility(b: Any, site: Site) -> None:
    """One VC per site: each of its reads of asynchronously written memory, against every
    instance of every asynchronous copy into that buffer."""
    a = b.analysis
    m = model(a)
    reads = [(v, acc, w) for v, acc, w in _reads(a, site) if m.async_writers.get(v.buffer.name)]
    if not reads:
        return
    inst, hyps = a.fresh(site, view=reads[0][0])
    block = _block(a, inst)
    conflicts, alternatives = [], []
    # the copies share their issuing thread and loop counters: a model moves them together, so
    # the copy it names is the first one the interpreter meets
    shared_tid, shared_loops = a.encoder.thread_var("'w"), {}
    for w in (w for v, _, _ in reads for w in m.async_writers[v.buffer.name]):
        for lp in w.loops:
            lo, hi = symbolic.static_value(lp.start), symbolic.static_value(lp.stop)
            shared_loops.setdefault(lp.var, T.int_var(f"{lp.var.name}'w", lo, hi - 1 if hi is not None else None))
    # a writer's own variables are named so that later writers sort first: the minimizer then
    # keeps the earliest conflicting copy, the one the interpreter reports
    writers = [w for v, _, _ in reads for w in m.async_writers[v.buffer.name]]
    rank = {id(w): len(writers) - i for i, w in enumerate(writers)}
    for view, access, wgmma in reads:
        here = inst
        if view is not reads[0][0]:
            coords, more = a.coordinates(view, f"'{access.role}")
            here = inst.bind(coords)
            hyps = hyps + more
        for w in m.async_writers[view.buffer.name]:
            wblock, sent = block, []
            if multicast(w.op):  # the copy of any block of the cluster whose mask has this block
                issuer = rank_var(a, f"'w{rank[id(w)]}")
                wblock = {s: v for s, v in peer_values(a, block, issuer).items() if s in a.block_ids}
                sent = [delivers(a, w, issuer, block_rank(a, block))]
            winst, more = a.fresh(w, f"'w{rank[id(w)]}", view=w.op.dst, block=wblock, tid=shared_tid,
                                  loops=shared_loops)
            dst = a.accesses[w.index][1]
            same = T.eq(a.key(here, view), a.key(winst, w.op.dst))
            active = T.and_(a.active(here, access), _issues(a, here), a.active(winst, dst), _issues(a, winst),
                            same, *sent, *more)
            if active is T.FALSE:
                continue
            if w.op.atom == "tma.load":
                ok = _tma_ordered(a, m, here, wgmma, winst)
            else:
                ok = _cp_async_ordered(a, m, here, winst)
            conflict = T.and_(active, T.not_(ok))
            conflicts.append(conflict)
            alternatives.append((conflict, _other(a, winst, dst)))
    if not conflicts:
        return
    view, access, _ = reads[0]
    names = ", ".join(f"%{v.buffer.name} ({acc.role})" for v, acc, _ in reads)
    roles = {**_roles(a, inst, view), "access": access, "alternatives": alternatives}
    b.add("async", site, hyps, T.not_(T.or_(*conflicts)),
          f"the accesses of {names} meet only asynchronous copies that completed and were made visible to this "
          "thread, and none that overwrites the elements before their release", roles)


def _tma_ordered(a: Any, m: Model, reader: Instance, wgmma: bool, copy: Instance) -> T.Term:
    """The copy is observed by the reader, or issued after the issuer observed the reader's release."""
    bar = m.bars[copy.site.index].buffer.name
    element = _element(a, m, copy.site, dict(copy.values))
    seen = T.le(copy_phase(a, m, copy), observed(a, m, reader, bar, element))
    # an ordinary access is also ordered before a copy issued after a block barrier that follows it
    later = T.FALSE if wgmma else a.barrier_orders(reader, copy, later=True)
    if multicast(copy.site.op):  # block barriers order the own block only
        later = T.and_(same_block(a, reader.values, copy.values), later)
    return T.or_(seen, _released(a, m, reader, wgmma, copy), later)


def _released(a: Any, m: Model, reader: Instance, wgmma: bool, writer: Instance) -> T.Term:
    """The writer's thread observed, before the write, the round of the reader's release.

    Within a block the release is the reader's first arrive after the read (after the
    ``wgmma.wait_group`` that retires a wgmma read), or the next iteration's first arrive.  A
    writer in another block of the cluster (a multicast copy, a remote arrive) observes only
    its own block's mbarriers: there the release is a later remote arrive of the reader that
    targets the writer's block, or a later multicast copy of the reader's thread that lands in
    it, and its round is the one the reader's block counts (every block of a cluster runs the
    same program, so the rounds of an element agree; the ``async`` and ``phase`` VCs of the
    other blocks order the rounds that would not)."""
    guards = {m.bars[w.index].buffer.name for w in m.waits if w.index < writer.site.index}
    if not guards:
        return T.FALSE
    site = reader.site
    start = site.index
    if wgmma:
        retire = [w for w in m.wgmma_waits if w.index > site.index and w.loops == site.loops and w.op.pending == 0]
        if not retire:  # retired by a wait_group(n > 0) of a later iteration, or after the loop
            pipelined = _pipelined_releases(a, m, reader, wgmma, writer, guards)
            return T.or_(*pipelined) if pipelined else T.FALSE
        start = retire[0].index
    clustered = cluster_size(a.kernel) > 1
    here = same_block(a, reader.values, writer.values) if clustered else T.TRUE
    releases = [s for s in m.arrives if m.bars[s.index].buffer.name in guards and s.loops == site.loops
                and not remote(m, s)]
    after = [s for s in releases if s.index > start]
    values = dict(reader.values)
    options = []
    if after:
        release = after[0]
    elif releases and site.loops:
        release = releases[0]  # the next iteration's
        loop = site.loops[-1]
        values[loop.var] = T.add(values[loop.var], loop.step)
    else:
        release = None
    if release is not None:
        at = Instance(release, values)
        name = m.bars[release.index].buffer.name
        element = _element(a, m, release, values)
        rho = _rounds_before(a, m, name, at, element)
        in_range = T.TRUE
        if release is not (after[0] if after else None) and site.loops:
            loop = site.loops[-1]
            in_range = T.lt(values[loop.var], a.encoder.term(loop.stop, dict(reader.values)))
        options.append(T.and_(here, in_range, _thread_path(a, release, values),
                              T.ge(observed(a, m, writer, name, element), rho)))
    if clustered:
        there = block_rank(a, writer.values)
        values = dict(reader.values)
        for s in m.arrives + m.tma_loads:
            if s.index <= start or s.loops != site.loops or m.bars[s.index].buffer.name not in guards:
                continue
            name = m.bars[s.index].buffer.name
            at = Instance(s, values)
            element = _element(a, m, s, values)
            if isinstance(s.op, N.MbarrierArrive) and remote(m, s):
                reaches = T.eq(_target(a, m, s, values), there)
                rho = _rounds_before(a, m, name, at, element)
            elif multicast(s.op):
                reaches = T.and_(T.not_(here), delivers(a, s, block_rank(a, values), there))
                rho = copy_phase(a, m, at)
            else:
                continue
            options.append(T.and_(reaches, _thread_path(a, s, values), T.ge(observed(a, m, writer, name, element), rho)))
    if release is None or not _releases_its_stage(a, m, reader, release):
        options += _pipelined_releases(a, m, reader, wgmma, writer, guards)
    return T.or_(*options) if options else T.FALSE


def _releases_its_stage(a: Any, m: Model, reader: Instance, release: Site) -> bool:
    """Does ``release`` (an arrive after the read in its iteration) name the element of the
    reader's latest wait, unconditionally?  Otherwise (it gives back the previous iteration's
    stage) the read's own release comes later (:func:`_pipelined_releases`)."""
    site = reader.site
    waits = [w for w in m.waits if w.index <= site.index and w.loops == site.loops]
    if not waits or release.loops != site.loops:
        return False
    if any(c.what not in ("loop", "role") and not any(c is x for x in site.conditions) for c in release.conditions):
        return False
    mine, theirs = element_expr(waits[-1], m.bars[waits[-1].index]), element_expr(release, m.bars[release.index])
    return sympy.simplify(mine - theirs) == 0


def _stage_of(a: Any, m: Model, reader: Instance) -> T.Term | None:
    """The mbarrier element of the latest wait before ``reader`` in its iteration (the wait
    itself for a wait): the stage whose data the reader uses."""
    site = reader.site
    waits = [w for w in m.waits if w.index <= site.index and w.loops == site.loops
             and [id(c) for c in w.conditions] == [id(c) for c in site.conditions][:len(w.conditions)]]
    if not waits:
        return None
    return _element(a, m, waits[-1], dict(reader.values))


def _commit_sites_between(m: Model, loops: tuple, lo: int, hi: int) -> int:
    """wgmma commit sites of a loop body strictly between two static indices (unconditional)."""
    return sum(1 for c in m.wgmma_commits if c.loops == loops and lo < c.index < hi
               and all(x.what == "loop" or x.what == "role" for x in c.conditions))


def _pipelined_releases(a: Any, m: Model, reader: Instance, wgmma: bool, writer: Instance,
                        guards: set[str]) -> list[T.Term]:
    """Releases of a read that come in a later iteration or after the loop: the reader's
    thread arrives on the element of the stage it read (the element of its latest wait) in
    the next iteration of its innermost loop, or — in that loop's last iteration — after the
    loop; a wgmma read needs a ``wgmma.wait_group(n)`` before that arrive with at least ``n``
    groups committed after the read's (a pipelined release: the previous k-block's stage is
    given back once ``wait_group(1)`` retired it, the last one after ``wait_group(0)``).  An
    arrive on that element is a release of the read; a later one of the same element only
    comes after it, so the writer observing its round observed the first one's too."""
    site = reader.site
    if not site.loops or cluster_size(a.kernel) > 1:
        return []
    stage = _stage_of(a, m, reader)
    if stage is None:
        return []
    loop = site.loops[-1]
    body = [s.index for s in a.program.sites if loop in s.loops]
    end = max(body)
    after_read = _commit_sites_between(m, site.loops, site.index, end + 1) if wgmma else 0
    values = dict(reader.values)
    options = []
    nxt = {**values, loop.var: T.add(values[loop.var], loop.step)}
    last = T.eq(T.add(values[loop.var], loop.step), a.encoder.term(loop.stop, values))
    outer = tuple(site.loops[:-1])
    for s in m.arrives:
        if m.bars[s.index].buffer.name not in guards or remote(m, s):
            continue
        if s.loops == site.loops:
            at_values, when, lo = nxt, T.lt(nxt[loop.var], a.encoder.term(loop.stop, values)), min(body) - 1
            loops_of_wait = site.loops
        elif s.loops == outer and s.index > end:
            at_values, when, lo = values, last, end
            loops_of_wait = outer
        else:
            continue
        done = lo  # where the reader's thread is done with the data (its retiring wait)
        if wgmma:
            # the first commit after the read closes its group: the groups committed after it
            # are the other commits up to the wait
            retiring = [w for w in m.wgmma_waits if w.loops == loops_of_wait and lo < w.index < s.index
                        and w.op.pending <= after_read + _commit_sites_between(m, loops_of_wait, lo, w.index) - 1
                        and all(x.what in ("loop", "role") for x in w.conditions)]
            if not retiring:
                continue
            done = retiring[0].index
        arriving = _elected_thread(a, s)
        if arriving is not None:
            # one thread arrives for all: the reader's thread is that one, or it passes a
            # barrier of the arriving thread after it is done and before the arrive
            if not _barrier_between(a, s, done):
                when = T.and_(when, T.eq(values[a.tid], arriving))
            at_values = {**at_values, a.tid: T.int_const(arriving)}
        at = Instance(s, at_values)
        name = m.bars[s.index].buffer.name
        element = _element(a, m, s, at_values)
        rho = _rounds_before(a, m, name, at, element)
        options.append(T.and_(when, _thread_path(a, s, at_values), T.eq(element, stage),
                              T.ge(observed(a, m, writer, name, element), rho)))
    return options


def _elected_thread(a: Any, site: Site) -> int | None:
    """The one thread that executes a single-issuer op (``elected`` names a constant thread)."""
    elected = getattr(site.op, "elected", None)
    if elected is None:
        return None
    elected = sympy.sympify(site.expr(elected))
    if isinstance(elected, sympy.Eq):
        for x, y in (elected.args, elected.args[::-1]):
            if x == a.tid and symbolic.static_value(y) is not None:
                return int(symbolic.static_value(y))
    return None


def _barrier_between(a: Any, site: Site, after: int) -> bool:
    """A barrier in ``site``'s loop body lies after static index ``after`` and before the site,
    and runs whenever the site does (all its conditions are the site's): every participant —
    the whole block, or the whole role for a role-scoped barrier — passes it in between."""
    own = {id(c) for c in site.conditions}
    for b in a.program.sites:
        if not isinstance(b.op, N.Barrier) or b.loops != site.loops or not after < b.index < site.index:
            continue
        if b.role_scope is not None and b.role_scope is not site.role_scope:
            continue
        if all(c.what == "loop" or id(c) in own for c in b.conditions):
            return True
    return False


def _store_sources(b: Any, site: Site) -> None:
    """An ordinary write of shared memory that a TMA store reads comes before the store's
    issue (its fence and barrier are the ``proxy`` VC's) or after the store read it: its group
    is below ``commits − n`` of a ``tma_store_wait(n)`` of the issuing thread before the write
    (the same thread) or before a barrier that orders it before the write (another thread)."""
    a = b.analysis
    m = model(a)
    if not m.tma_stores or (isinstance(site.op, N.Copy) and site.op.atom == "tma.store"):
        return
    for acc in a.accesses.get(site.index, []):
        if acc.kind != "write" or acc.buffer.space is not N.MemorySpace.SHARED or isinstance(acc, AsyncAccess):
            continue
        stores = [s for s in m.tma_stores if s.op.src.buffer.name == acc.buffer.name
                  and (s.index < site.index or common_loops(s, site))]
        if not stores:
            continue
        inst, hyps = a.fresh(site, view=acc.view)
        block = _block(a, inst)
        conflicts, alternatives = [], []
        for st in stores:
            sinst, more = a.fresh(st, f"'s{st.index}", view=st.op.src, block=block)
            src = a.accesses[st.index][0]
            hit = T.and_(a.active(inst, acc), _issues(a, inst), a.active(sinst, src), _issues(a, sinst),
                         T.eq(a.key(inst, acc.view), a.key(sinst, st.op.src)), *more)
            if hit is T.FALSE:
                continue
            conflict = T.and_(hit, T.not_(_store_read_ordered(a, m, inst, sinst)))
            conflicts.append(conflict)
            alternatives.append((conflict, _other(a, sinst, src)))
        if not conflicts:
            continue
        roles = {**_roles(a, inst, acc.view), "access": acc, "alternatives": alternatives}
        b.add("async", site, hyps, T.not_(T.or_(*conflicts)),
              f"the write of %{acc.buffer.name} ({acc.role}) does not overwrite what a TMA store may still be "
              "reading (its group's tma_store_wait comes first)", roles)


def _store_read_ordered(a: Any, m: Model, writer: Instance, store: Instance) -> T.Term:
    """The write comes before the store's issue, or after a wait that completed its group."""
    same_thread = T.eq(writer.values[a.tid], store.values[a.tid])
    group = _commits(a, m, store, m.tma_commits)
    before_issue = T.not_(a.precedes(store, writer))
    mine = T.and_(a.precedes(store, writer), T.lt(group, _done(a, m, store, writer, True, "tma.store")))
    theirs = T.and_(a.barrier_orders(store, writer), T.lt(group, _done(a, m, store, writer, False, "tma.store")))
    earlier_theirs = a.barrier_orders(writer, store, later=True)
    return T.ite(same_thread, T.or_(mine, before_issue), T.or_(theirs, earlier_theirs))


def _cp_async_ordered(a: Any, m: Model, reader: Instance, copy: Instance) -> T.Term:
    """The copy's group completed by the issuer's wait, before the read (same thread) or before
    a barrier that precedes the read (another thread) — or the copy comes after the read."""
    tid = a.tid
    same_thread = T.eq(reader.values[tid], copy.values[tid])
    group = _commits(a, m, copy)
    mine = T.and_(a.precedes(copy, reader), T.lt(group, _done(a, m, copy, reader, True)))
    later_mine = T.not_(a.precedes(copy, reader))
    theirs = T.and_(a.barrier_orders(copy, reader), T.lt(group, _done(a, m, copy, reader, False)))
    later_theirs = a.barrier_orders(reader, copy, later=True)
    return T.ite(same_thread, T.or_(mine, later_mine), T.or_(theirs, later_theirs))


def _commits(a: Any, m: Model, at: Instance, commits: list[Site] | None = None) -> T.Term:
    """Groups the thread of ``at`` committed before it (cp.async groups unless ``commits``)."""
    parts = [m.counter.count_before(c, at) for c in (m.cp_commits if commits is None else commits)]
    return T.add(*parts) if parts else T.int_const(0)


def _done(a: Any, m: Model, copy: Instance, reader: Instance, own: bool, groups: str = "cp.async") -> T.Term:
    """Groups the copy's thread completed with its latest wait before the read (``own``) or
    before the last barrier before the read: ``commits − n`` of that wait."""
    best: T.Term = T.int_const(0)
    commits = {"cp.async": m.cp_commits, "wgmma": m.wgmma_commits, "tma.store": m.tma_commits}[groups]
    for wait in {"cp.async": m.cp_waits, "wgmma": m.wgmma_waits, "tma.store": m.tma_waits}[groups]:
        common = common_loops(wait, reader.site)
        if tuple(wait.loops) != common and common:
            continue
        values = {**reader.values, a.tid: copy.values[a.tid]}
        candidates = []
        if wait.loops and common:
            loop = wait.loops[-1]
            k = reader.values[loop.var]
            candidates.append((values, T.bool_const(wait.index < reader.site.index)))
            candidates.append(({**values, loop.var: T.sub(k, loop.step)},
                               T.le(a.encoder.term(loop.start, values), T.sub(k, loop.step))))
        elif wait.loops:
            if wait.index > reader.site.index or len(wait.loops) > 1:
                continue
            loop = wait.loops[0]
            trips = a.encoder.term(loop.trip_count(), values)
            last = a.encoder.term(loop.start + loop.step * (loop.trip_count() - 1), values)
            candidates.append(({**values, loop.var: last}, T.gt(trips, 0)))
        else:
            candidates.append((values, T.bool_const(wait.index < reader.site.index)))
        for vals, exists in candidates:
            w_inst = Instance(wait, vals)
            before = exists if own else T.and_(exists, a.barrier_orders(w_inst, reader))
            if before is T.FALSE:
                continue
            done = T.sub(_commits(a, m, w_inst, commits), wait.op.pending)
            hit = T.and_(before, _thread_path(a, wait, vals))
            best = T.ite(T.and_(hit, T.gt(done, best)), done, best)
    return best


# --------------------------------------------------------------------------- wgmma accumulators


def _accumulators(b: Any, site: Site) -> None:
    """An ordinary access of a wgmma accumulator, or a write of a register A operand (``.rs``),
    comes after the ``wgmma.wait_group`` that retires every earlier wgmma of the thread on it
    (until then the wgmma owns the accumulator and may still read A)."""
    a = b.analysis
    m = model(a)
    if isinstance(site.op, N.Mma) or not m.wgmmas:
        return
    for acc in a.accesses.get(site.index, []):
        if acc.kind not in ("read", "write") or acc.buffer.space is not N.MemorySpace.REGISTER:
            continue
        owners = [g for g in m.wgmmas if (acc.buffer.name in (g.op.c.buffer.name, g.op.d.buffer.name)
                                          or (acc.kind == "write" and g.op.a.space is N.MemorySpace.REGISTER
                                              and acc.buffer.name == g.op.a.buffer.name))
                  and (g.index < site.index or common_loops(g, site))]
        if not owners:
            continue
        inst, hyps = a.fresh(site, view=acc.view)
        conflicts, alternatives = [], []
        for g in owners:
            ginst, more = a.fresh(g, f"'g{g.index}", block=_block(a, inst), tid=inst.values[a.tid])
            group = _commits(a, m, ginst, m.wgmma_commits)
            done = _done(a, m, ginst, inst, True, groups="wgmma")
            conflict = T.and_(a.active(inst, acc), _issues(a, ginst), a.precedes(ginst, inst),
                              T.ge(group, done), *more)
            if conflict is T.FALSE:
                continue
            conflicts.append(conflict)
            alternatives.append((conflict, _other(a, ginst, M.Access(g.op.d, "d", "write"))))
        if not conflicts:
            continue
        roles = {**_roles(a, inst, acc.view), "access": acc, "alternatives": alternatives}
        b.add("wgmma", site, hyps, T.not_(T.or_(*conflicts)),
              f"the {acc.kind} of %{acc.buffer.name} comes after the wgmma_wait that retires the wgmmas "
              "accumulating into it", roles)


# --------------------------------------------------------------------------- proxy fences, descriptors


def _proxy(b: Any, site: Site) -> None:
    """Ordinary writes of what the async proxy reads are fenced by their writers."""
    a = b.analysis
    m = model(a)
    op = site.op
    views = [op.src] if isinstance(op, N.Copy) else [v for v in (op.a, op.b) if v.space is N.MemorySpace.SHARED]
    for view in views:
        writers = [(s, acc) for s in a.program.sites if s.index < site.index or common_loops(s, site)
                   for acc in a.accesses.get(s.index, [])
                   if acc.kind == "write" and acc.buffer is view.buffer and not isinstance(acc, AsyncAccess)]
        if not writers:
            continue
        inst, hyps = a.fresh(site, view=view)
        block = _block(a, inst)
        conflicts, alternatives = [], []
        for w, acc in writers:
            winst, more = a.fresh(w, f"'{w.index}", view=acc.view, block=block)
            hit = T.and_(a.active(inst, M.Access(view, "src", "read")), _issues(a, inst), a.active(winst, acc),
                         T.eq(a.key(inst, view), a.key(winst, acc.view)), a.precedes(winst, inst)
                         if common_loops(w, site) else T.TRUE, *more)
            if hit is T.FALSE:
                continue
            fenced = []
            for f in m.proxy_fences:
                if f.index <= w.index or f.loops != w.loops:
                    continue
                finst = Instance(f, {**winst.values})
                fenced.append(T.and_(_thread_path(a, f, dict(winst.values)), a.barrier_orders(finst, inst)))
            conflict = T.and_(hit, T.not_(T.or_(*fenced)) if fenced else T.TRUE)
            conflicts.append(conflict)
            alternatives.append((conflict, _other(a, winst, acc)))
        if not conflicts:
            continue
        reader = "a TMA store" if isinstance(op, N.Copy) else "a wgmma"
        roles = {**_roles(a, inst, view), "alternatives": alternatives}
        b.add("proxy", site, hyps, T.not_(T.or_(*conflicts)),
              f"ordinary writes of %{view.buffer.name} that {reader} reads are followed by fence.proxy.async "
              "in their thread and a barrier", roles)


def _descriptor(b: Any, site: Site) -> None:
    """The wgmma operand's swizzle (its descriptor's mode) is the swizzle of the TMA boxes
    that fill its buffer."""
    a = b.analysis
    m = model(a)
    op = site.op
    for view in (op.a, op.b):
        if view.space is not N.MemorySpace.SHARED:
            continue
        fills = [s for s in m.tma_loads if s.op.dst.buffer.name == view.buffer.name]
        mismatched = [s for s in fills if s.op.dst.swizzle != view.swizzle]
        inst, hyps = a.fresh(site, view=view)
        roles = _roles(a, inst, view)
        roles["descriptor"] = str(view.swizzle)
        if mismatched:
            winst, _ = a.fresh(mismatched[0], "'d", view=mismatched[0].op.dst, block=_block(a, inst))
            roles["alternatives"] = [(T.TRUE, _other(a, winst, a.accesses[mismatched[0].index][1]))]
            roles["tma"] = str(mismatched[0].op.dst.swizzle)
        goal = T.not_(a.path(inst)) if mismatched else T.TRUE
        b.add("descriptor", site, hyps, goal,
              f"the wgmma descriptor of %{view.buffer.name} has the swizzle of the TMA boxes that fill it", roles,
              structural=None if mismatched else "the operand's swizzle equals every filling TMA box's")


_PROPERTY_OF = {_store_sources: "async", _outlived: "cluster", _accumulators: "wgmma", _initialized: "mbarrier", _arrivals: "mbarrier", _expect_tx: "expect-tx", _armed: "expect-tx",
                _phase: "phase", _lag: "phase", _visibility: "async", _proxy: "proxy", _descriptor: "descriptor"}
