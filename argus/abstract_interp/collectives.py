"""Collectives and atomics in the verifier: ``Reduce``, ``Shuffle`` and ``Atomic``.

The reference interpreter (:mod:`argus.ir.interp_mma`) defines what they mean; this module
states the same semantics over symbolic instances.

==========  =====================================  =========================================
op          accesses                               what the destination element holds
==========  =====================================  =========================================
Shuffle     own ``src`` read, ``dst`` write        ``src`` of the source lane, same element
Reduce      own ``src`` read, ``dst`` write        the fields on which every combined element
                                                   agrees (the interpreter's reduction rule)
Atomic      ``src`` read; ``dst`` read and write   not tracked: a read of it is havocked
==========  =====================================  =========================================

*Source lanes.*  A shuffle's group is ``max(width, 32)`` threads (a warp, or an AMD
wavefront); lane ``l`` of it reads lane ``idx: start + o % width``, ``xor: l ^ o``,
``up: l - o`` or ``down: l + o`` (``o`` the lane operand of ``l``, ``start`` the first lane of
``l``'s ``width``-lane segment); a source outside the segment gives ``l`` its own value.  A
reduction over ``across_lanes`` masks ``M`` combines the lanes ``l ^ x`` for every ``x`` in
the span of ``M``: the same set for every lane of the butterfly, enumerated from the group's
first lane ``l - Σ_m m·bit_m(l)``.  The combined tag of one butterfly is computed once,
shared by all its lanes and named by variables (:func:`define`), which keeps a reduction of
reductions (softmax: the sum of exponentials of values less the row maximum) linear in the
group size instead of quadratic, in the terms and in the SMT-LIB text alike.

*Participants* (property ``collective``): every thread of the group executes the collective
when one does — the same path for every lane, in the same loop iterations — and the group
lies inside the block.  Control the uniformity analysis (:mod:`argus.ir.uniformity`) shows
uniform over the group proves it structurally; otherwise it is a VC over two lanes.

*Atomics* commute: two atomics on one element never race and atomics of different blocks
on one element are no write conflict (:func:`commutative_pair`); an atomic and a plain
access of another thread with no barrier between them race as any write does.  The value
an atomic leaves is the combination of every thread's contribution, which the read
resolution does not enumerate: a read that may see it is havocked, a sound approximation
recorded on the VCs that depend on it.
"""

from __future__ import annotations

import itertools
from typing import Any

from argus.abstract_interp import memory as M
from argus.abstract_interp import tags as TG
from argus.abstract_interp.encoding import EncodingError, Instance, view_extents
from argus.ir import nodes as N
from argus.ir.uniformity import WARP_SIZE, Uniformity
from argus.smt import terms as T

COLLECTIVE_OPS = (N.Reduce, N.Shuffle)


# --------------------------------------------------------------------------- the op table


def accesses(op: N.Op) -> list[M.Access]:
    """The accesses of a collective or atomic, in the interpreter's order."""
    match op:
        case N.Reduce(src=src, dst=dst) | N.Shuffle(src=src, dst=dst):
            return [Access(src, "src", "read", None, True), Access(dst, "dst", "write")]
        case N.Atomic(src=src, dst=dst, pred=pred):
            return [Access(dst, "dst", "read", pred, True), Access(src, "src", "read", None, True),
                    Access(dst, "dst", "write", pred)]
    raise M.Unsupported(f"operation {op.kind}")


Access = M.Access


def writes(op: N.Op) -> list[M.Write]:
    """What a collective or atomic writes.  An atomic's write is not an initializing write
    (the interpreter requires the element written before), and its tag is not tracked."""
    match op:
        case N.Reduce(dst=dst, src=src) | N.Shuffle(dst=dst, src=src):
            return [M.Write(dst, True, _valid(dst), (src,))]
        case N.Atomic(dst=dst, src=src, pred=pred):
            guard = (*_valid(dst), *((pred,) if pred is not None else ()))
            return [M.Write(dst, False, guard, (src, dst))]
    return []


def _valid(view: N.View) -> tuple[Any, ...]:
    return (view.valid,) if view.valid is not None else ()


def witness_problem(op: N.Op) -> str | None:
    """Why the writes of ``op`` cannot be resolved exactly (``None``: they can)."""
    if isinstance(op, N.Atomic):
        where = f" at {op.loc}" if op.loc else ""
        return (f"atomic {op.fn}{where}: the value several threads accumulate in %{op.dst.buffer.name} "
                "is not tracked")
    return None


def commutative_pair(site: Any, access: M.Access, other_site: Any, other: M.Access) -> bool:
    """Both accesses are the destination of a commutative atomic: neither a race nor a
    write conflict."""
    return (isinstance(site.op, N.Atomic) and isinstance(other_site.op, N.Atomic)
            and access.role == "dst" and other.role == "dst"
            and site.op.fn in COMMUTATIVE and other_site.op.fn == site.op.fn)


#: atomics whose order does not change the result
COMMUTATIVE = frozenset({"add", "max", "min"})


def group_threads(op: N.Op) -> int | None:
    """Threads that execute ``op`` together (``None``: each thread on its own)."""
    match op:
        case N.Shuffle(width=width):
            return max(width, WARP_SIZE)
        case N.Reduce(across_lanes=masks) if masks:
            return max(2 * max(masks), WARP_SIZE)
    return None


# --------------------------------------------------------------------------- tags


def written_tag(analysis: Any, writer: Any, inst: Instance) -> Any:
    """The tag a ``Reduce`` or ``Shuffle`` writer stores at its instance ``inst``
    (a :class:`~argus.abstract_interp.analysis.Resolution`)."""
    op = writer.site.op
    if isinstance(op, N.Shuffle):
        return _shuffle_tag(analysis, op, inst)
    return _reduce_tag(analysis, op, inst)


def _source_instance(analysis: Any, inst: Instance, dst: N.View, src: N.View, tid: T.Term,
                     coords: tuple[T.Term, ...]) -> Instance:
    """``inst`` moved to thread ``tid`` and to element ``coords`` of ``src``."""
    dropped = set(analysis._coord_symbols(dst))
    values = {s: v for s, v in inst.values.items() if s not in dropped}
    values[analysis.tid] = tid
    values.update(zip(analysis._coord_symbols(src), coords))
    return Instance(inst.site, values)


def shuffle_source(mode: str, lane: T.Term, operand: T.Term, width: int) -> T.Term:
    """The lane (within the group) whose value ``lane`` receives (see the module docstring)."""
    start = T.sub(lane, T.floormod(lane, width))
    match mode:
        case "idx":
            return T.add(start, T.floormod(operand, width))
        case "xor":
            source = xor_lane(lane, operand)
        case "up":
            source = T.sub(lane, operand)
        case "down":
            source = T.add(lane, operand)
        case _:
            raise EncodingError(f"shuffle mode {mode!r} is not idx, xor, up or down")
    inside = T.and_(T.le(start, source), T.lt(source, T.add(start, width)))
    return T.ite(inside, source, lane)


def xor_lane(lane: T.Term, operand: T.Term) -> T.Term:
    """``lane ^ operand`` for a non-negative ``lane``: linear (one digit per set bit) when the
    operand is a constant, a bounded bitwise term otherwise."""
    if operand.op == "const":
        k = int(operand.value)
        if k < 0:
            raise EncodingError(f"shuffle xor operand {k} is negative")
        out = lane
        for b in range(k.bit_length()):
            if k >> b & 1:
                bit = T.floormod(T.floordiv(lane, 1 << b), 2)
                out = T.add(out, T.mul(1 << b, T.sub(1, T.mul(2, bit))))
        return out
    try:
        return T.int_xor(lane, operand)
    except T.TermError as err:
        raise EncodingError(f"shuffle xor lane: {err.message}") from None


def _shuffle_tag(analysis: Any, op: N.Shuffle, inst: Instance) -> Any:
    group = max(op.width, WARP_SIZE)
    tid = inst.values[analysis.tid]
    lane = T.floormod(tid, group)
    operand = analysis.value(inst, op.lane)
    source = shuffle_source(op.mode, lane, operand, op.width)
    source_tid = T.add(T.sub(tid, lane), source)
    coords = tuple(inst.values[s] for s in analysis._coord_symbols(op.dst))
    return analysis.read(_source_instance(analysis, inst, op.dst, op.src, source_tid, coords), op.src)


def butterfly_base(analysis: Any, tid: T.Term, masks: tuple[int, ...]) -> T.Term:
    """The first lane of ``tid``'s butterfly group (``tid`` with the masks' bits cleared);
    a lane this module enumerated from a base maps back to that same base term."""
    bases = analysis.__dict__.setdefault("_butterfly_bases", {})
    key = (tid, frozenset(masks))
    got = bases.get(key)
    if got is None:
        got = bases[key] = T.sub(tid, T.add(*(T.mul(low, T.floormod(T.floordiv(tid, low), high // low))
                                             for low, high in _bit_runs(masks))))
    return got


def _bit_runs(masks: tuple[int, ...]) -> list[tuple[int, int]]:
    """The masks' bits as runs of consecutive bits ``[low, high)`` (powers of two): one
    division and one modulo per run (``(8, 4, 2, 1)`` is the single run ``[1, 16)``)."""
    runs: list[tuple[int, int]] = []
    for m in sorted(set(masks)):
        if runs and runs[-1][1] == m:
            runs[-1] = (runs[-1][0], 2 * m)
        else:
            runs.append((m, 2 * m))
    return runs


def butterfly_lanes(analysis: Any, base: T.Term, masks: tuple[int, ...]) -> list[T.Term]:
    """Every lane of the butterfly group that starts at ``base``."""
    bases = analysis.__dict__.setdefault("_butterfly_bases", {})
    distinct = sorted(set(masks))
    lanes = []
    for chosen in itertools.product((0, 1), repeat=len(distinct)):
        offset = sum(m for m, c in zip(distinct, chosen) if c)
        lane = T.add(base, offset) if offset else base
        bases.setdefault((lane, frozenset(masks)), base)
        lanes.append(lane)
    return lanes


def _reduce_tag(analysis: Any, op: N.Reduce, inst: Instance) -> Any:
    from argus.abstract_interp.analysis import Resolution, _merge_deps

    tid = inst.values[analysis.tid]
    base = butterfly_base(analysis, tid, op.across_lanes) if op.across_lanes else tid
    dst_coords = tuple(inst.values[s] for s in analysis._coord_symbols(op.dst))
    related = tuple(inst.values.get(s) for s in analysis.block_ids) + tuple(
        inst.values[lp.var] for lp in inst.site.loops)
    cache = analysis.__dict__.setdefault("_reduce_tags", {})
    key = (inst.site.index, base, dst_coords, related)
    got = cache.get(key)
    if got is not None:
        return got
    extents = []
    for extent in view_extents(op.src):
        from argus import symbolic

        value = symbolic.static_value(extent)
        if value is None:
            raise EncodingError(f"reduce at {op.loc}: the source's extents must be constants")
        extents.append(value)
    kept = [d for d in range(len(extents)) if d not in op.modes]
    lanes = butterfly_lanes(analysis, base, op.across_lanes) if op.across_lanes else [tid]
    reads = []
    for lane in lanes:
        for reduced in itertools.product(*(range(extents[d]) for d in op.modes)):
            coords: list[T.Term] = [T.int_const(0)] * len(extents)
            for d, c in zip(op.modes, reduced):
                coords[d] = T.int_const(c)
            for d, c in zip(kept, dst_coords):
                coords[d] = c
            reads.append(analysis.read(_source_instance(analysis, inst, op.dst, op.src, lane, tuple(coords)),
                                       op.src))
    lemmas, approximations = _merge_deps(reads)
    name = f"reduce{inst.site.index}.{len(cache)}"
    tag = common_fields([r.tag for r in reads])
    got = cache[key] = Resolution(define_tag(analysis, name, tag), T.TRUE, lemmas, approximations)
    return got


# --------------------------------------------------------------------------- definitions


def define_tag(analysis: Any, name: str, tag: TG.TagValue) -> TG.TagValue:
    """``tag`` with its length and fields named (:func:`define`)."""
    return TG.TagValue(define(analysis, f"{name}.length", tag.length),
                       tuple(define(analysis, f"{name}.f{i}", f) for i, f in enumerate(tag.fields)))


def define(analysis: Any, name: str, term: T.Term) -> T.Term:
    """A fresh variable standing for ``term`` (a constant or a variable stays itself).  A
    reduction's tag feeds every lane of the next one; named, each VC states it once
    (:func:`definitions`) instead of repeating its whole term at every use.  Names are kept
    to those: a definition is a hypothesis the solvers cannot substitute away beforehand,
    and naming small, often-used terms (a thread) makes the queries harder, not easier."""
    if term.op in ("const", "var"):
        return term
    named = analysis.__dict__.setdefault("defined_terms", {})
    got = named.get(term)
    if got is not None:
        return got
    definitions = analysis.__dict__.setdefault("definitions", {})
    var = T.int_var(name) if term.sort.is_int else T.bool_var(name)
    definitions[name] = (var, term)
    named[term] = var
    return var


def definitions(analysis: Any, terms: list[T.Term]) -> list[tuple[str, T.Term]]:
    """The defining equations of every named variable ``terms`` use (transitively), as
    hypotheses: each introduces a fresh variable equal to its definition, so they are
    satisfiable whatever the rest of the VC says.

    A definition whose term divides by a value that may be zero (a witness of another role's
    instance, evaluated where that instance does not exist: a tile index past the grid) holds
    where its divisions are defined; elsewhere the variable is any integer, as the division's
    result is.  Its divisions are then no definedness obligation of the VC: a proof holds for
    every value the variable may take, and a use of it under a path that needs the value
    needs the definition, hence the guards, to hold there."""
    known = analysis.__dict__.get("definitions")
    if not known:
        return []
    equations = analysis.__dict__.setdefault("_definition_equations", {})
    out: list[tuple[str, T.Term]] = []
    seen: set[str] = set()
    pending = [name for name in T.variables(*terms) if name in known]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        var, term = known[name]
        equation = equations.get(name)
        if equation is None:
            from argus.proofs.provers import definedness_guards

            equation = T.eq(var, term)
            guards = definedness_guards(equation)
            if guards:
                equation = T.implies(T.and_(*guards), equation)
            equations[name] = equation
        out.append((f"def:{name}", equation))
        pending += [n for n in T.variables(term) if n in known and n not in seen]
    out.sort(key=lambda item: item[0])
    return out


def common_fields(tags: list[TG.TagValue]) -> TG.TagValue:
    """The interpreter's reduction rule: the fields (in order, compacted to the front) on which
    every tag agrees; ⊥ when one of them is ⊥ or no field agrees."""
    first = tags[0]
    tagged = T.and_(*(t.defined for t in tags))
    same_length = T.and_(*(T.eq(t.length, first.length) for t in tags[1:]))
    agree = [T.and_(T.lt(f, first.length), same_length, *(T.eq(t.fields[f], first.fields[f]) for t in tags[1:]))
             for f in range(TG.FIELDS)]
    counts = [T.ite(a, 1, 0) for a in agree]
    before = [T.add(*counts[:f]) if f else T.int_const(0) for f in range(TG.FIELDS)]
    n = T.add(*counts)
    ok = T.and_(tagged, T.gt(n, 0))
    fields = []
    for k in range(TG.FIELDS):
        value: T.Term = T.int_const(0)
        for f in reversed(range(k, TG.FIELDS)):
            value = T.ite(T.and_(agree[f], T.eq(before[f], k)), first.fields[f], value)
        fields.append(T.ite(ok, value, 0))
    return TG.TagValue(T.ite(ok, n, TG.UNTAGGED), tuple(fields))


# --------------------------------------------------------------------------- participants


def collective(b: Any, site: Any) -> None:
    """Property ``collective``: the whole group executes the collective together."""
    op = site.op
    size = group_threads(op)
    if size is None:
        return
    a = b.analysis
    threads = a.encoder.threads
    first, hyps = a.fresh(site)
    tid = first.values[a.tid]
    member = T.int_var("lane'", 0, size - 1)
    other_tid = T.add(T.mul(size, T.floordiv(tid, size)), member)
    block = {s: first.values[s] for s in a.block_ids}
    loops = {lp.var: first.values[lp.var] for lp in site.loops}
    second, more = a.fresh(site, "'", block=block, loops=loops, tid=other_tid)
    roles = {"thread": tid, "block": tuple(block.values()),
             "iteration": {lp.var.name: first.values[lp.var] for lp in site.loops}, "other_thread": other_tid}
    message = f"the {size} threads of the group execute the {op.kind.lower()} together"
    context = a.uniformity.context(op)
    uniform = context is Uniformity.BLOCK or (context is Uniformity.WARP and size == WARP_SIZE)
    if uniform and threads % size == 0:
        b.add("collective", site, hyps + more, T.TRUE, message, roles,
              structural="uniform control over the group (uniformity analysis), whole groups in the block")
        return
    goal = T.implies(a.path(first), T.and_(T.lt(other_tid, threads), a.path(second)))
    b.add("collective", site, hyps + more, goal, message, roles)
