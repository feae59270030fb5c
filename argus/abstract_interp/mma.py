"""Matrix multiply-accumulate in the verifier: ``Mma`` through its atom's fragment layouts.

The reference interpreter (:mod:`argus.ir.interp_mma`) defines the semantics; this module
states the same rules over symbolic instances.

*Fragments.*  An atom's thread-value layout maps ``(t, v)`` — thread ``t`` of the group (a
warp, a warpgroup or a wavefront) and its fragment value ``v`` — to the column-major offset
of a tile element; value ``v`` of a register fragment is the element of the view whose
column-major index is ``v``.  Both directions are layout-algebra expressions
(:func:`~argus.layout_algebra.inverse.layout_inverse`), so "who holds A[m, k]" is a
quantifier-free term: thread ``group_base + t(m + rows·k)`` at its value ``v(m + rows·k)``.
Operands the atom reads from shared memory (wgmma) are read at tile coordinate ``(m, k)``.

*Tags* (as in the interpreter; ``k`` is the last field of each operand's record unless the
op names its fields):

* property ``tag`` at every MMA: for every ``m, n, k`` of the tile, tagged ``A[m, k]`` and
  ``B[n, k]`` agree on ``k`` (one VC over symbolic ``m, n, k``);
* element ``D[m, n]`` carries the row fields of ``A[m, 0]`` followed by the column fields
  of ``B[n, 0]``; that this is the interpreter's "common row fields" rule is the lemma
  ``mma-operands`` (every element of row ``m`` of A is tagged exactly when ``A[m, 0]`` is,
  with the same row fields; likewise the columns of B);
* the accumulator rule: a tagged ``C`` element that differs from that record makes ``D``
  untagged.

*Accumulators around loops.*  ``C`` of an MMA is usually the ``D`` of earlier MMAs, in the
same iteration or the previous one: resolving it literally would unfold the whole loop.
Instead the read of ``C`` is resolved under the inductive hypothesis that every MMA wrote
its record (the ``D`` an MMA writes when its own ``C`` is ⊥ or agrees).  An MMA whose ``C``
in fact was ⊥ writes that same record, and one whose ``C`` disagreed wrote ⊥, which the
hypothesis replaces by a tagged value only where the resolved tag is then compared: the
resolved tag of ``D`` is the actual one or ⊥, never a tag the kernel does not produce.  Since
every tag property fails on ⊥, a proof stays a proof; a refutation through this step is
checked on the interpreter like any other.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import sympy

from argus import symbolic
from argus.abstract_interp import memory as M
from argus.abstract_interp import tags as TG
from argus.abstract_interp.encoding import EncodingError, Instance, view_extents
from argus.ir import nodes as N
from argus.ir.atoms import mma_atom
from argus.smt import terms as T

MMA_OPS = (N.Mma,)

_T = sympy.Symbol("__mma_thread", integer=True, nonnegative=True)
_V = sympy.Symbol("__mma_value", integer=True, nonnegative=True)
_X = sympy.Symbol("__mma_offset", integer=True, nonnegative=True)


# --------------------------------------------------------------------------- the op table


def accesses(op: N.Mma) -> list[M.Access]:
    """Each thread reads its own fragments of A, B (or the shared tiles) and C, and writes
    its fragment of D."""
    return [M.Access(op.a, "a", "read", None, True), M.Access(op.b, "b", "read", None, True),
            M.Access(op.c, "c", "read", None, True), M.Access(op.d, "d", "write")]


def writes(op: N.Mma) -> list[M.Write]:
    guard = (op.d.valid,) if op.d.valid is not None else ()
    return [M.Write(op.d, True, guard, (op.a, op.b, op.c))]


# --------------------------------------------------------------------------- layouts


@cache
def _layouts(atom: str, which: str) -> tuple[Any, tuple[Any, Any]]:
    """``(offset(t, v), (t(x), v(x)))`` of an operand's TV layout as sympy expressions."""
    from argus.layout_algebra.inverse import layout_inverse

    spec = mma_atom(atom)
    layout = spec.layouts.operand(which)
    forward = symbolic.to_sympy(layout(_T, _V))
    coords = layout_inverse(layout).flat_coordinate(_X)
    thread_shape = layout.shape[0]
    thread_modes = _flat(thread_shape)
    value_modes = _flat(layout.shape[1])
    t, scale = sympy.Integer(0), 1
    for c, size in zip(coords[: len(thread_modes)], thread_modes):
        t, scale = t + symbolic.to_sympy(c) * scale, scale * size
    v, scale = sympy.Integer(0), 1
    for c, size in zip(coords[len(thread_modes):], value_modes):
        v, scale = v + symbolic.to_sympy(c) * scale, scale * size
    return forward, (t, v)


def _flat(shape: Any) -> list[int]:
    if isinstance(shape, tuple):
        return [x for s in shape for x in _flat(s)]
    return [int(shape)]


def _static_extents(view: N.View, what: str) -> list[int]:
    out = []
    for e in view_extents(view):
        value = symbolic.static_value(e)
        if value is None:
            raise EncodingError(f"the {what} fragment of an MMA must have constant extents")
        out.append(value)
    return out


def _value_index(coords: tuple[T.Term, ...], extents: list[int]) -> T.Term:
    """The column-major index of a fragment coordinate (its value number)."""
    out: T.Term = T.int_const(0)
    scale = 1
    for c, e in zip(coords, extents):
        out = T.add(out, T.mul(scale, c)) if scale != 1 else T.add(out, c)
        scale *= e
    return out


def _value_coords(v: T.Term, extents: list[int]) -> tuple[T.Term, ...]:
    out = []
    scale = 1
    for e in extents:
        out.append(T.floormod(T.floordiv(v, scale), e) if scale != 1 else T.floormod(v, e))
        scale *= e
    return tuple(out)


class MmaInstance:
    """One MMA at one instance, with term-level access to its operands' elements."""

    def __init__(self, analysis: Any, inst: Instance) -> None:
        self.a = analysis
        self.inst = inst
        self.op: N.Mma = inst.site.op
        self.spec = mma_atom(self.op.atom)
        tid = inst.values[analysis.tid]
        self.lane = T.floormod(tid, self.spec.threads)
        self.base = T.mul(self.spec.threads, T.floordiv(tid, self.spec.threads))

    def element(self, which: str, row: T.Term, col: T.Term) -> Any:
        """The resolution of operand ``which``'s element at tile coordinate ``(row, col)``."""
        a, op = self.a, self.op
        view = op.a if which == "a" else op.b
        if self.spec.source(which) == "shared":
            return a.read(_moved(a, self.inst, op.d, view, None, (row, col)), view)
        rows, _ = self.spec.tile(which)
        _, (t_expr, v_expr) = _layouts(self.spec.name, which)
        offset = T.add(row, T.mul(rows, col))
        t = a.encoder.term(t_expr, {_X: offset})
        v = a.encoder.term(v_expr, {_X: offset})
        coords = _value_coords(v, _static_extents(view, which.upper()))
        return a.read(_moved(a, self.inst, op.d, view, T.add(self.base, t), coords), view)

    def position(self) -> tuple[T.Term, T.Term]:
        """The tile coordinate ``(m, n)`` of the D element this instance writes."""
        forward, _ = _layouts(self.spec.name, "c")
        coords = tuple(self.inst.values[s] for s in self.a._coord_symbols(self.op.d))
        v = _value_index(coords, _static_extents(self.op.d, "D"))
        offset = self.a.encoder.term(forward, {_T: self.lane, _V: v})
        rows, _ = self.spec.tile("c")
        return T.floormod(offset, rows), T.floordiv(offset, rows)

    def k_field(self, which: str) -> int:
        fields = self.op.k_fields
        return -1 if fields is None else fields[0 if which == "a" else 1]


def _moved(analysis: Any, inst: Instance, dst: N.View, src: N.View, tid: T.Term | None,
           coords: tuple[T.Term, ...]) -> Instance:
    dropped = set(analysis._coord_symbols(dst))
    values = {s: v for s, v in inst.values.items() if s not in dropped}
    if tid is not None:
        values[analysis.tid] = tid
    values.update(zip(analysis._coord_symbols(src), coords))
    return Instance(inst.site, values)


# --------------------------------------------------------------------------- records


def _k_index(tag: TG.TagValue, field: int) -> T.Term:
    return T.sub(tag.length, 1) if field < 0 else T.int_const(field)


def has_k(tag: TG.TagValue, field: int) -> T.Term:
    """The record has its ``k`` field (a tagged record long enough)."""
    if field < 0:
        return T.ge(tag.length, 1)
    return T.gt(tag.length, field)


def k_value(tag: TG.TagValue, field: int) -> T.Term:
    if field >= 0:
        return tag.fields[field] if field < TG.FIELDS else T.int_const(0)
    out: T.Term = T.int_const(0)
    for i in reversed(range(TG.FIELDS)):
        out = T.ite(T.eq(tag.length, i + 1), tag.fields[i], out)
    return out


def rest(tag: TG.TagValue, field: int) -> tuple[list[T.Term], T.Term]:
    """The fields other than ``k`` (compacted, in order) and their number."""
    kidx = _k_index(tag, field)
    n = T.sub(tag.length, 1)
    out = []
    for j in range(TG.FIELDS):
        nxt = tag.fields[j + 1] if j + 1 < TG.FIELDS else T.int_const(0)
        value = T.ite(T.lt(j, kidx), tag.fields[j], nxt)
        out.append(T.ite(T.lt(j, n), value, 0))
    return out, n


def same_rest(x: TG.TagValue, y: TG.TagValue, field: int) -> T.Term:
    """Both records have ``k`` and agree on every other field."""
    fx, nx = rest(x, field)
    fy, ny = rest(y, field)
    return T.and_(T.eq(nx, ny), *(T.eq(p, q) for p, q in zip(fx, fy)))


def record(a0: TG.TagValue, b0: TG.TagValue, ka: int, kb: int) -> TG.TagValue:
    """``D``'s record from ``A[m, 0]`` and ``B[n, 0]`` (⊥ unless both have ``k``)."""
    ra, na = rest(a0, ka)
    rb, nb = rest(b0, kb)
    total = T.add(na, nb)
    fields = []
    for p in range(TG.FIELDS):
        from_b: T.Term = T.int_const(0)
        for q in range(p + 1):  # B's field q lands at p when na == p - q
            from_b = T.ite(T.eq(na, p - q), rb[q], from_b)
        fields.append(T.ite(T.lt(p, na), ra[p], T.ite(T.lt(p, total), from_b, 0)))
    ok = T.and_(has_k(a0, ka), has_k(b0, kb), T.le(total, TG.FIELDS))
    return TG.TagValue(T.ite(ok, total, TG.UNTAGGED), tuple(T.ite(ok, f, 0) for f in fields))


def product_tag(analysis: Any, inst: Instance) -> Any:
    """The record an MMA instance gives its D element before the accumulator rule."""
    from argus.abstract_interp.analysis import Resolution, _merge_deps

    cache_ = analysis.__dict__.setdefault("_mma_records", {})
    key = _record_key(analysis, inst)
    got = cache_.get(key)
    if got is not None:
        return got
    m = MmaInstance(analysis, inst)
    row, col = m.position()
    zero = T.int_const(0)
    a0 = m.element("a", row, zero)
    b0 = m.element("b", col, zero)
    lemmas, approx = _merge_deps([a0, b0])
    name = f"mma{inst.site.index}.{len(cache_)}"
    ta, tb = named(analysis, f"{name}.a", a0.tag), named(analysis, f"{name}.b", b0.tag)
    tag = record(ta, tb, m.k_field("a"), m.k_field("b"))
    got = cache_[key] = Resolution(named(analysis, name, tag), T.TRUE, lemmas | {("mma", inst.site.index)}, approx)
    # every product term has a known-zero factor (see :func:`silent`)
    analysis.__dict__.setdefault("_mma_silent", {})[key] = analysis.simplify(T.or_(ta.zero, tb.zero))
    analysis.__dict__.setdefault("_mma_operands0", {})[key] = (ta, tb)
    return got


def named(analysis: Any, name: str, tag: TG.TagValue) -> TG.TagValue:
    """``tag`` as fresh variables with defining equations (each VC states them once): the
    records of chained MMAs share their operands' tags, which as one term would grow with
    every level."""
    from argus.abstract_interp.collectives import define

    return TG.TagValue(define(analysis, f"{name}.length", tag.length),
                       tuple(define(analysis, f"{name}.f{i}", f) for i, f in enumerate(tag.fields)))


def silent(analysis: Any, inst: Instance) -> T.Term:
    """Every product term of the instance's D element has a known-zero factor: ``A[m, 0]`` or
    ``B[n, 0]`` is a known zero (lemma ``mma-operands``: then so is its whole row or column,
    and otherwise the product at ``k = 0`` counts).  Such an MMA leaves ``D = C``."""
    product_tag(analysis, inst)
    return analysis._mma_silent[_record_key(analysis, inst)]


def _record_key(analysis: Any, inst: Instance) -> tuple:
    related = tuple(inst.values.get(s) for s in (analysis.tid, *analysis.block_ids,
                                                 *analysis._coord_symbols(inst.site.op.d)))
    related += tuple(inst.values[lp.var] for lp in inst.site.loops)
    return (inst.site.index, related)


def first_instance(analysis: Any, inst: Instance) -> Instance | None:
    """The first MMA instance of ``inst``'s chain that writes its D element: the chain's first
    MMA site writing the same fragment view, at the first iteration of the loops inside the
    accumulator's reset, with ``inst``'s thread, block, element and chain counters.  ``None``
    where that instance does not necessarily run whenever ``inst`` does (a branch or a loop
    ``inst`` is not under)."""
    from argus.abstract_interp.coverage import _chains

    site = inst.site
    chain = _chains(analysis).get(site.op.d.buffer.name)
    if chain is None:
        return None
    same = [s for s in chain.mmas if s.op.d == site.op.d and s.index <= site.index]
    if not same:
        return None
    first = min(same, key=lambda s: s.index)
    outer = chain.chain_loops(site)
    if chain.chain_loops(first) != outer or not all(lp in site.loops for lp in first.loops):
        return None
    if not {c for c in first.conditions if c.what != "loop"} <= set(site.conditions):
        return None
    values = {s: v for s, v in inst.values.items() if s in (analysis.tid, *analysis.block_ids,
                                                             *analysis._coord_symbols(site.op.d))}
    for lp in first.loops:
        values[lp.var] = (inst.values[lp.var] if lp in outer
                          else analysis.encoder.term(first.expr(lp.start), values))
    return Instance(first, values)


def _stood_for(tag: TG.TagValue) -> TG.TagValue:
    """A known zero as the record it stands for (any other tag as it is)."""
    return TG.TagValue(T.ite(tag.zero, tag.stands_for, tag.length), tag.fields)


def silent_value(analysis: Any, inst: Instance) -> TG.TagValue | None:
    """What a silent instance's D holds, as the lemma ``mma-acc`` proves it: ⊥ where the
    chain's first instance on the element was silent too (no product reached it yet), else
    the record of the tags its operands' known zeros stand for (the record every product on
    the element gives).  ``None`` where the first instance is not known to run."""
    first = first_instance(analysis, inst)
    if first is None:
        return None
    product_tag(analysis, inst)
    ta, tb = analysis._mma_operands0[_record_key(analysis, inst)]
    m = MmaInstance(analysis, inst)
    whole = record(_stood_for(ta), _stood_for(tb), m.k_field("a"), m.k_field("b"))
    return TG.select(silent(analysis, first), TG.BOTTOM, whole)


def written_tag(analysis: Any, writer: Any, inst: Instance) -> Any:
    """The tag an MMA writes at ``inst`` (see the module docstring): its record, or where the
    instance is silent (:func:`silent`) its ``C``: :func:`silent_value`, or where that is not
    available the tag of its ``C`` resolved under the accumulator hypothesis.  Outside the
    hypothesis both rely on the lemma ``mma-acc``."""
    from argus.abstract_interp.analysis import Resolution, _merge_deps

    product = product_tag(analysis, inst)
    lemmas, approx = product.lemmas, product.approximations
    if not analysis.__dict__.get("_mma_hypothesis", 0):
        # the accumulator rule keeps the record exactly when C is ⊥ or agrees with it: that is
        # the lemma ``mma-accumulator`` of the site, stated once instead of in every reader's VC
        lemmas = lemmas | {("mma-acc", inst.site.index)}
    quiet = silent(analysis, inst)
    if quiet == T.FALSE:
        return Resolution(product.tag, T.TRUE, lemmas, approx)
    cache_ = analysis.__dict__.setdefault("_mma_records", {})
    value = silent_value(analysis, inst)
    if value is not None:
        name = f"mma{inst.site.index}.w{len(cache_)}"
        cache_[name] = None
        return Resolution(named(analysis, name, TG.select(quiet, value, product.tag)), T.TRUE, lemmas, approx)
    op: N.Mma = inst.site.op
    c = read_accumulator(analysis, _moved(analysis, inst, op.d, op.c, None,
                                          tuple(inst.values[s] for s in analysis._coord_symbols(op.d))), op.c)
    more_lemmas, more_approx = _merge_deps([c])
    tag = TG.select(quiet, c.tag, product.tag)
    name = f"mma{inst.site.index}.w{len(cache_)}"
    cache_[name] = None
    return Resolution(named(analysis, name, tag), T.TRUE, lemmas | more_lemmas,
                      tuple(dict.fromkeys(approx + more_approx)))


def read_accumulator(analysis: Any, inst: Instance, view: N.View) -> Any:
    """Resolve an MMA's ``C`` under the hypothesis that every MMA wrote its record."""
    depth = analysis.__dict__.get("_mma_hypothesis", 0)
    analysis._mma_hypothesis = depth + 1
    try:
        return analysis.read(inst, view)
    finally:
        analysis._mma_hypothesis = depth


# --------------------------------------------------------------------------- properties


def k_agreement(b: Any, site: Any) -> None:
    """Property ``tag`` at an MMA: tagged ``A[m, k]`` and ``B[n, k]`` agree on ``k``."""
    if not isinstance(site.op, MMA_OPS):
        return
    a = b.analysis
    op: N.Mma = site.op
    spec = mma_atom(op.atom)
    inst, hyps = a.fresh(site)
    m = MmaInstance(a, inst)
    rows_m, kk = spec.tile("a")
    rows_n, _ = spec.tile("b")
    mi = T.int_var(f"m#{site.index}", 0, rows_m - 1)
    ni = T.int_var(f"n#{site.index}", 0, rows_n - 1)
    ki = T.int_var(f"k#{site.index}", 0, kk - 1)
    ea, eb = m.element("a", mi, ki), m.element("b", ni, ki)
    fa, fb = m.k_field("a"), m.k_field("b")
    from argus.abstract_interp.analysis import _merge_deps

    deps = _merge_deps([ea, eb])
    both = T.and_(a.path(inst), has_k(ea.tag, fa), has_k(eb.tag, fb))
    goal = T.implies(both, T.eq(k_value(ea.tag, fa), k_value(eb.tag, fb)))
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops},
             "mma_element": (mi, ni, ki), "a_tag": ea.tag, "b_tag": eb.tag}
    b.add("tag", site, hyps, goal, f"{spec.name}: A[m, k] and B[n, k] agree on k", roles, deps)


def accumulator_lemma(b: Any, site: Any) -> None:
    """Lemma ``mma-operands`` (accumulator part): the ``C`` an MMA reads is ⊥ or carries the
    record the MMA computes, so ``D`` is that record (the interpreter's accumulator rule)."""
    from argus.abstract_interp.analysis import _merge_deps

    a = b.analysis
    op: N.Mma = site.op
    inst, hyps = a.fresh(site, "#acc", view=op.d)
    product = product_tag(a, inst)
    c = read_accumulator(a, _moved(a, inst, op.d, op.c, None, tuple(inst.values[s] for s in a._coord_symbols(op.d))),
                         op.c)
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops}}
    # a silent instance (every product term has a known-zero factor) leaves D = C: C is what
    # readers take it to be (:func:`silent_value`; nothing to show where they resolve C itself)
    quiet = silent(a, inst)
    value = silent_value(a, inst) if quiet != T.FALSE else None
    # one VC per write that may have written C last, and per silent or not: together they are
    # the lemma, each a far easier query than the whole
    cases = c.branches if len(c.branches) > 1 else ((T.TRUE, c.tag, None),)
    for is_silent in ((False, True) if value is not None else (False,)):
        for condition, tag, _ in cases:
            if is_silent:
                goal = tag.same(value)
            else:
                goal = T.not_(T.and_(tag.tagged, T.not_(tag.same(product.tag))))
            vc = b.add("mma-operands", site, [*hyps, condition, quiet if is_silent else T.not_(quiet)],
                       T.implies(a.path(inst), goal),
                       f"{mma_atom(op.atom).name}: the accumulator holds this MMA's record (or none) before it",
                       roles, _merge_deps([product, c]))
            vc.roles["lemma_key"] = ("mma-acc", site.index)


def operands_lemma(b: Any, site: Any) -> None:
    """Lemma ``mma-operands``: row ``m`` of A is tagged exactly where ``A[m, 0]`` is, with the
    same row fields, and likewise the columns of B (what makes ``D``'s record that of
    ``A[m, 0]`` and ``B[n, 0]``)."""
    a = b.analysis
    op: N.Mma = site.op
    spec = mma_atom(op.atom)
    inst, hyps = a.fresh(site, "#rows")
    m = MmaInstance(a, inst)
    _, kk = spec.tile("a")
    from argus.abstract_interp.analysis import _merge_deps

    goals, parts = [], []
    for which in ("a", "b"):
        rows, _ = spec.tile(which)
        r = T.int_var(f"{which}.row#{site.index}", 0, rows - 1)
        k = T.int_var(f"{which}.k#{site.index}", 0, kk - 1)
        e0, ek = m.element(which, r, T.int_const(0)), m.element(which, r, k)
        parts += [e0, ek]
        field = m.k_field(which)
        # known zeros contribute nothing: a row that starts with one is zero throughout (the
        # instance is silent), any other row carries one record apart from k where it is not zero
        agree = T.and_(T.eq(has_k(ek.tag, field), has_k(e0.tag, field)),
                       T.implies(has_k(e0.tag, field), same_rest(e0.tag, ek.tag, field)))
        goals.append(T.ite(e0.tag.zero, ek.tag.zero, T.or_(ek.tag.zero, agree)))
    goal = T.implies(a.path(inst), T.and_(*goals))
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops}}
    vc = b.add("mma-operands", site, hyps, goal,
               f"{spec.name}: every row of A (column of B) carries one record apart from k", roles,
               _merge_deps(parts))
    vc.roles["lemma_key"] = ("mma", site.index)
