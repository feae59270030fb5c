"""The properties, each turned into VCs with provenance.

======================  ===================================================================
property                VC (for a fresh thread ``tid`` of block ``bid``, element ``c``, loop
                        counters ``k``; ``active`` = path ∧ validity ∧ copy predicate)
======================  ===================================================================
``in-bounds``           per op: ``active(access) → 0 <= address < size`` for each view
``uninitialized``       per read of shared/register memory: ``active → some write hits``
``tag``                 per ``assert_tag``: ``valid → tag ≠ ⊥ ∧ predicate(coordinate, tag)``;
                        ``assert_tag_eq``: ``tag ≠ ⊥ ∧ tag == other tag``; one VC per possible
                        last writer of the element when there are several
``race``                per access of shared/global memory, against every access of the same
                        buffer at or before it: no second thread ``tid'`` of the block with
                        both active, one a write, equal addresses and equal barrier epochs;
                        reads of global memory also against writes of *other* blocks
``write-conflict``      per global write: no other block writes the same address
``barrier``             per barrier: no two threads of a block (same loop iterations) where
                        one reaches it and the other does not; block-uniform control is
                        proved structurally by the uniformity analysis
``witness``             per write a read resolves to: ``guard(d) → w⁻¹(write(d)) == d``
``coordinates``         per access of a tensor matched by coordinate: inside every dimension,
                        at the address its layout gives
``unsupported``         an op or loop the verifier does not model: always ``unknown``
``collective``          per shuffle / cross-lane reduction: its whole group executes it
                        (:mod:`~argus.abstract_interp.collectives`)
``alignment``           per fixed-width vector copy: each access is aligned to its width
                        (:mod:`~argus.abstract_interp.alignment`)
``bank-conflicts``      per shared access: its degree, reported; per assertion: the bound
                        (:mod:`~argus.abstract_interp.banks`)
``coverage``            per MMA and per read of its accumulator: each k of the reduction
                        reaches each accumulator element exactly once
                        (:mod:`~argus.abstract_interp.coverage`)
``launch-order``        per global access of a kernel that waits on the grid dependency: the
                        thread's wait precedes it (:mod:`~argus.abstract_interp.launch_order`)
``async`` ...           asynchronous copies, mbarriers, proxy fences, descriptors
                        (:mod:`~argus.abstract_interp.asynchrony`); warp roles, register
                        budgets, named barriers (:mod:`~argus.abstract_interp.roles`)
======================  ===================================================================
"""

from __future__ import annotations

from typing import Any

import sympy

from argus.abstract_interp import (
    alignment,
    asynchrony,
    banks,
    collectives,
    coverage,
    launch_order,
    mma,
)
from argus.abstract_interp import memory as M
from argus.abstract_interp import tags as TG
from argus.abstract_interp.analysis import (
    Analysis,
    Resolution,
    Writer,
    _interval,
    _merge_deps,
    disjoint,
)
from argus.abstract_interp.encoding import EncodingError, Instance
from argus.abstract_interp.program import Site, common_loops
from argus.abstract_interp.vc import VC
from argus.ir import nodes as N
from argus.ir.uniformity import Uniformity
from argus.smt import terms as T

#: properties stated in modules of their own (``site`` makers like the ones below)
EXTRA_PROPERTIES = (collectives.collective, asynchrony.properties, mma.k_agreement, alignment.alignment,
                    banks.bank_conflicts, coverage.coverage, launch_order.launch_order)


def _roles(analysis: Analysis, inst: Instance, view: N.View | None = None, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        f"{prefix}thread": inst.values.get(analysis.tid),
        f"{prefix}block": tuple(inst.values.get(b) for b in analysis.block_ids),
        f"{prefix}iteration": {lp.var.name: inst.values[lp.var] for lp in inst.site.loops},
    }
    if view is not None:
        out[f"{prefix}element"] = tuple(inst.values[s] for s in analysis._coord_symbols(view))
        out[f"{prefix}logical"] = analysis.logical(inst, view)
        out[f"{prefix}view"] = view
    return out


class _Builder:
    def __init__(self, analysis: Analysis) -> None:
        self.analysis = analysis
        self.vcs: list[VC] = []
        self.counter = 0
        self.assumptions = analysis.encoder.assumptions()

    def add(self, prop: str, site: Site | None, hyps: list[T.Term], goal: T.Term, message: str,
            roles: dict | None = None, deps: tuple[frozenset[int], tuple[str, ...]] = (frozenset(), ()),
            **extra: Any) -> VC:
        where = site.op.loc if site is not None and site.op.loc else None
        ident = f"{prop}#{self.counter}" + (f"@{where.line}" if where else "")
        self.counter += 1
        named = [*self.assumptions, *((f"h{i}", h) for i, h in enumerate(hyps))]
        named += collectives.definitions(self.analysis, [goal, *hyps])
        vc = VC(ident, prop, site, tuple(named), goal, message, roles or {}, deps[0], deps[1], **extra)
        self.vcs.append(vc)
        return vc

    def unknown(self, prop: str, site: Site | None, reason: str) -> VC:
        return self.add(prop, site, [], T.TRUE, reason, unknown=reason)


def generate(analysis: Analysis) -> list[VC]:
    """Every VC of the kernel, in program order, then the witness lemmas they rely on."""
    b = _Builder(analysis)
    for _op, reason in analysis.program.unsupported:
        b.unknown("unsupported", None, reason)
    for site in analysis.program.sites:
        if site.index in analysis.unsupported:
            b.unknown("unsupported", site, analysis.unsupported[site.index])
            continue
        for make in (_barrier, _tag, _bounds, _uninitialized, _races, _write_conflicts, *EXTRA_PROPERTIES):
            try:
                make(b, site)
            except (EncodingError, T.TermError) as err:
                b.unknown(make.__name__.strip("_").replace("_", "-"), site,
                          f"cannot encode {site.describe()}: {err.message}")
    _lemmas(b)
    return b.vcs


# --------------------------------------------------------------------------- per property


def _barrier(b: _Builder, site: Site) -> None:
    op = site.op
    if not isinstance(op, N.Barrier):
        return
    a = b.analysis
    if op.id != 0 or op.participants not in (None, a.encoder.threads):
        from argus.abstract_interp import roles

        roles.named_barrier(b, site)
        return
    first, hyps = a.fresh(site)
    loops = {lp.var: first.values[lp.var] for lp in site.loops}
    block = {s: first.values[s] for s in a.block_ids}
    second, more = a.fresh(site, "'", block=block, loops=loops)
    roles = {**_roles(a, first), "other_thread": second.values[a.tid]}
    message = "every thread of the block reaches the barrier"
    if a.uniformity.context(op) is Uniformity.BLOCK:
        b.add("barrier", site, hyps + more, T.TRUE, message, roles,
              structural="block-uniform control (uniformity analysis)")
        return
    goal = T.not_(T.and_(a.path(first), T.not_(a.path(second))))
    b.add("barrier", site, hyps + more, goal, message, roles)


def _expected_fields(op: N.AssertTag) -> dict[int, Any]:
    """``tag[i] == e`` conjuncts of a predicate: what each field should be."""
    out = {}
    fields = {s: int(name[1:]) for name, s in op.tag_symbols}
    if op.predicate is None:
        return out
    for part in sympy.And.make_args(op.predicate):
        if isinstance(part, sympy.Eq):
            lhs, rhs = part.args
            for x, y in ((lhs, rhs), (rhs, lhs)):
                if x in fields and not (sympy.sympify(y).free_symbols & set(fields)):
                    out[fields[x]] = y
    return out


def _tag(b: _Builder, site: Site) -> None:
    op = site.op
    if not isinstance(op, N.AssertTag):
        return
    if getattr(op, "zero_symbol", None) is not None:
        b.unknown("tag", site, f"tag assertion at {op.loc} states known-zero facts, which the verifier does not model")
        return
    a = b.analysis
    inst, hyps = a.fresh(site, view=op.view)
    hyps = hyps + [a.path(inst)] + ([a.value(inst, op.view.valid)] if op.view.valid is not None else [])
    mine = a.read(inst, op.view)
    other = a.read(inst, op.equal_to) if op.equal_to is not None else None
    deps = _merge_deps([mine] + ([other] if other is not None else []))
    at = a.with_logical(inst, op.view)
    expected = {i: a.value(at, e) for i, e in _expected_fields(op).items()}

    def no_zero(t: TG.TagValue) -> bool:
        lo, _ = T.interval(a.simplify(t.length))
        return lo is not None and lo >= TG.UNTAGGED

    def goal(tag: TG.TagValue) -> T.Term:
        # a known zero is checked against the tag it stands for; one that stands for none
        # (no tag function) satisfies the assertion, on either side (the interpreter's rule)
        if other is not None:
            theirs = other.tag
            if no_zero(tag) and no_zero(theirs):
                return T.and_(tag.defined, tag.same(theirs))
            same = T.and_(T.eq(tag.stands_for, theirs.stands_for),
                          *(T.eq(x, y) for x, y in zip(tag.fields, theirs.fields)))
            return T.or_(T.eq(tag.length, TG.KNOWN_ZERO),
                         T.and_(tag.defined, T.or_(T.eq(theirs.length, TG.KNOWN_ZERO), same)))
        binding = dict(at.values)
        for name, sym in op.tag_symbols:
            binding[sym] = tag.fields[int(name[1:])]
        holds = T.and_(tag.defined, a.encoder.term(site.expr(op.predicate), binding))
        return holds if no_zero(tag) else T.or_(T.eq(tag.length, TG.KNOWN_ZERO), holds)

    message = op.message or ("assert_tag_eq" if other is not None else "assert_tag")
    # one VC per last writer of the element when there are several: each is a far easier
    # query than the whole ite chain, and together they are equivalent to it
    cases = mine.branches if len(mine.branches) > 2 else ((T.TRUE, mine.tag, None),)
    for condition, tag, writer in cases:
        roles = {**_roles(a, inst, op.view), "actual": tag, "message": op.message}
        if other is not None:
            roles["expected"] = other.tag
        else:
            roles["expected_fields"] = expected
        if len(cases) > 1:
            roles["case"] = f"last written by {writer.describe()}" if writer is not None else "never written"
            roles["whole"] = {"actual": mine.tag}  # what the element holds, over all cases
        b.add("tag", site, [*hyps, condition], goal(tag), message, roles, deps)


def _bounds(b: _Builder, site: Site) -> None:
    a = b.analysis
    accesses = a.accesses.get(site.index, [])
    groups: dict[tuple, list[M.Access]] = {}
    for acc in accesses:
        groups.setdefault(tuple(str(e) for e in _extents(acc.view)), []).append(acc)
    for group in groups.values():
        inst, hyps = a.fresh(site, view=group[0].view)
        goal = T.and_(*(T.implies(a.active(inst, acc), a.in_bounds(inst, acc.view)) for acc in group))
        names = ", ".join(f"%{acc.buffer.name} ({acc.role})" for acc in group)
        roles = _roles(a, inst, group[0].view)
        roles["checks"] = [(acc, T.implies(a.active(inst, acc), a.in_bounds(inst, acc.view)),
                            a.address(inst, acc.view)) for acc in group]
        bounded = all(_within(a, inst, acc.view) for acc in group)
        b.add("in-bounds", site, hyps, goal, f"accesses of {names} stay inside their buffers", roles,
              structural="interval analysis of the addresses" if bounded else None)


def _within(a: Analysis, inst: Instance, view: N.View) -> bool:
    """Every address of the view lies in its buffer by the bounds of the variables alone."""
    from argus import symbolic

    size = symbolic.static_value(view.buffer.size)
    if size is None:
        return False
    terms = [a.address(inst, view)] + ([a.inner_address(inst, view)] if view.swizzle is not None else [])
    for term in terms:
        lo, hi = _interval(term)
        if lo is None or hi is None or lo < 0 or hi >= size:
            return False
    return True


def _extents(view: N.View) -> tuple:
    from argus.abstract_interp.encoding import view_extents

    return view_extents(view)


def _uninitialized(b: _Builder, site: Site) -> None:
    a = b.analysis
    for acc in a.accesses.get(site.index, []):
        if not acc.checks_init or acc.buffer.space is N.MemorySpace.GLOBAL:
            continue
        inst, hyps = a.fresh(site, view=acc.view)
        res: Resolution = a.read(inst, acc.view)
        roles = {**_roles(a, inst, acc.view), "address": a.address(inst, acc.view), "buffer": acc.buffer.name}
        b.add("uninitialized", site, [*hyps, a.active(inst, acc)], res.initialized,
              f"%{acc.buffer.name} ({acc.role}) is written before it is read", roles,
              (res.lemmas, res.approximations))


def _same(a: Analysis, first: Instance, view: N.View, second: Instance, other: N.View) -> T.Term:
    """The two instances access the same element (logical buffers: the same coordinate)."""
    if a.is_logical(view.buffer):
        return T.and_(*(T.eq(x, y) for x, y in zip(a.logical(first, view), a.logical(second, other))))
    return T.eq(a.key(first, view), a.key(second, other))


def _element_deps(a: Analysis, buffer: N.Buffer) -> tuple[frozenset, tuple[str, ...]]:
    return (frozenset({("coordinates", buffer.name)}) if a.is_logical(buffer) else frozenset(), ())


def _shared_like(buffer: N.Buffer) -> bool:
    return buffer.space in (N.MemorySpace.SHARED, N.MemorySpace.GLOBAL)


def _data_accesses(a: Analysis, site: Site) -> list[M.Access]:
    return [acc for acc in a.accesses.get(site.index, []) if acc.kind in ("read", "write") and _shared_like(acc.buffer)]


def _races(b: _Builder, site: Site) -> None:
    a = b.analysis
    for acc in _data_accesses(a, site):
        first, hyps = a.fresh(site, view=acc.view)
        block = {s: first.values[s] for s in a.block_ids}
        alternatives, conflicts = [], []
        for other_site in a.program.sites[: site.index + 1]:
            for other in _data_accesses(a, other_site):
                if other.buffer is not acc.buffer or (acc.kind == "read" and other.kind == "read"):
                    continue
                if collectives.commutative_pair(site, acc, other_site, other):
                    continue
                if asynchrony.ordered_elsewhere(acc, other):
                    continue  # asynchronous accesses: ordered by the ``async`` VCs
                if (other_site is site and other_site.index == site.index and
                        a.accesses[site.index].index(other) > a.accesses[site.index].index(acc)):
                    continue  # the pair is stated once, at the later access
                e1, e2 = site.epoch, other_site.epoch
                if not (sympy.sympify(e1).free_symbols or sympy.sympify(e2).free_symbols) and e1 != e2 \
                        and not common_loops(site, other_site):
                    continue
                second, more = a.fresh(other_site, f"'{other_site.index}", view=other.view, block=block)
                if disjoint(_interval(a.key(first, acc.view)), _interval(a.key(second, other.view))):
                    continue
                conflict = T.and_(a.active(first, acc), a.active(second, other),
                                  T.ne(first.values[a.tid], second.values[a.tid]),
                                  _same(a, first, acc.view, second, other.view),
                                  a.same_interval(first, second), *more)
                if conflict is T.FALSE:
                    continue
                conflicts.append(conflict)
                alternatives.append((conflict, {"other_site": other_site, "other_access": other,
                                                **_roles(a, second, other.view, "other_")}))
        if not conflicts:
            continue
        roles = {**_roles(a, first, acc.view), "access": acc, "alternatives": alternatives}
        what = "write" if acc.kind == "write" else "read"
        b.add("race", site, hyps, T.not_(T.or_(*conflicts)),
              f"the {what} of %{acc.buffer.name} ({acc.role}) does not conflict with another thread's access "
              "between the same barriers", roles, _element_deps(a, acc.buffer))
    for acc in _data_accesses(a, site):
        if acc.kind != "read" or acc.buffer.space is not N.MemorySpace.GLOBAL or _single_block(a):
            continue
        writers = [(s, x) for s in a.program.sites for x in _data_accesses(a, s)
                   if x.kind == "write" and x.buffer is acc.buffer
                   and not collectives.commutative_pair(site, acc, s, x)]
        if not writers:
            continue
        first, hyps = a.fresh(site, view=acc.view)
        alternatives, conflicts = [], []
        for other_site, other in writers:
            second, more = a.fresh(other_site, f"'{other_site.index}", view=other.view)
            if disjoint(_interval(a.key(first, acc.view)), _interval(a.key(second, other.view))):
                continue
            conflict = T.and_(a.active(first, acc), a.active(second, other), _other_block(a, first, second),
                              _same(a, first, acc.view, second, other.view), *more)
            conflicts.append(conflict)
            alternatives.append((conflict, {"other_site": other_site, "other_access": other,
                                            **_roles(a, second, other.view, "other_")}))
        if not conflicts:
            continue
        roles = {**_roles(a, first, acc.view), "access": acc, "alternatives": alternatives, "cross_block": True}
        b.add("race", site, hyps, T.not_(T.or_(*conflicts)),
              f"the read of %{acc.buffer.name} ({acc.role}) does not read what another block writes "
              "(blocks are not ordered)", roles, _element_deps(a, acc.buffer))


def _single_block(a: Analysis) -> bool:
    from argus import symbolic

    return all(symbolic.static_value(g) == 1 for g in a.encoder.grid)


def _other_block(a: Analysis, first: Instance, second: Instance) -> T.Term:
    return T.or_(*(T.ne(first.values[s], second.values[s]) for s in a.block_ids))


def _write_conflicts(b: _Builder, site: Site) -> None:
    a = b.analysis
    for acc in _data_accesses(a, site):
        if acc.kind != "write" or acc.buffer.space is not N.MemorySpace.GLOBAL or _single_block(a):
            continue
        first, hyps = a.fresh(site, view=acc.view)
        alternatives, conflicts = [], []
        for other_site in a.program.sites[: site.index + 1]:
            for other in _data_accesses(a, other_site):
                if other.kind != "write" or other.buffer is not acc.buffer:
                    continue
                if collectives.commutative_pair(site, acc, other_site, other):
                    continue
                second, more = a.fresh(other_site, f"'{other_site.index}", view=other.view)
                if disjoint(_interval(a.key(first, acc.view)), _interval(a.key(second, other.view))):
                    continue
                conflict = T.and_(a.active(first, acc), a.active(second, other), _other_block(a, first, second),
                                  _same(a, first, acc.view, second, other.view), *more)
                conflicts.append(conflict)
                alternatives.append((conflict, {"other_site": other_site, "other_access": other,
                                                **_roles(a, second, other.view, "other_")}))
        if not conflicts:
            continue
        roles = {**_roles(a, first, acc.view), "access": acc, "alternatives": alternatives}
        b.add("write-conflict", site, hyps, T.not_(T.or_(*conflicts)),
              f"no other block writes the element of %{acc.buffer.name} this thread writes", roles,
              _element_deps(a, acc.buffer))


# --------------------------------------------------------------------------- lemmas


def _lemmas(b: _Builder) -> None:
    a = b.analysis
    by_site = {w.site.index: w for ws in a.writers.values() for w in ws}
    done: set[Any] = set()
    while True:  # a lemma may rely on lemmas of its own (an MMA's operands on their witnesses)
        needed = sorted({key for vc in b.vcs for key in vc.lemmas} - done, key=str)
        if not needed:
            return
        done.update(needed)
        _state_lemmas(b, needed, by_site)


def _state_lemmas(b: _Builder, needed: list[Any], by_site: dict[int, Writer]) -> None:
    a = b.analysis
    for key in needed:
        if isinstance(key, tuple) and key[0] == "staged":
            writer, reader = by_site[key[1]], a.program.sites[key[2]]
            try:
                _staged_lemma(b, writer, reader)
            except (EncodingError, T.TermError) as err:
                vc = b.unknown("witness", writer.site, f"cannot encode the stages of {writer.describe()}: {err.message}")
                vc.roles["lemma_key"] = key
            continue
        if isinstance(key, tuple) and key[0] == "latest":
            writer, reader = by_site[key[1]], a.program.sites[key[2]]
            try:
                _latest_lemma(b, writer, reader)
            except (EncodingError, T.TermError) as err:
                vc = b.unknown("witness", writer.site, f"cannot encode the latest write of {writer.describe()}: "
                               f"{err.message}")
                vc.roles["lemma_key"] = key
            continue
        if isinstance(key, tuple) and key[0] == "flat":
            site = a.program.sites[key[1]]
            try:
                asynchrony.flat_lemma(b, site)
            except (EncodingError, T.TermError) as err:
                vc = b.unknown("phase", site, f"cannot encode the flattened counter of {site.describe()}: {err.message}")
                vc.roles["lemma_key"] = key
            continue
        if isinstance(key, tuple) and key[0] in ("mma", "mma-acc"):
            site = a.program.sites[key[1]]
            try:
                (mma.operands_lemma if key[0] == "mma" else mma.accumulator_lemma)(b, site)
            except (EncodingError, T.TermError) as err:
                vc = b.unknown("mma-operands", site, f"cannot encode the operands of {site.describe()}: {err.message}")
                vc.roles["lemma_key"] = key
            continue
        if isinstance(key, tuple):
            _coordinates(b, key[1])
            continue
        writer = by_site[key]
        try:
            _lemma(b, writer)
        except (EncodingError, T.TermError) as err:
            vc = b.unknown("witness", writer.site, f"cannot encode the witness of {writer.describe()}: {err.message}")
            vc.roles["lemma_key"] = key


def _coordinates(b: _Builder, name: str) -> None:
    """Every access of a logical buffer stays inside each dimension of its tensor and is at
    the address the tensor's layout gives its coordinate: then equal coordinates are equal
    addresses and conversely, which is what matching by coordinate relies on."""
    a = b.analysis
    key = ("coordinates", name)
    for site in a.program.sites:
        for acc in a.accesses.get(site.index, []):
            if acc.buffer.name != name:
                continue
            try:
                inst, hyps = a.fresh(site, view=acc.view)
                logical = a.logical(inst, acc.view)
                layout = acc.buffer.layout
                shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
                inside = [T.and_(T.le(0, c), T.lt(c, a.value(inst, _size(s)))) for c, s in zip(logical, shape)]
                goal = T.and_(*inside, T.eq(a.key(inst, acc.view), a.tensor_address(inst, acc.buffer, logical)))
                vc = b.add("coordinates", site, [*hyps, a.active(inst, acc)], goal,
                           f"the {acc.role} element of %{name} lies inside the tensor, at its layout's address",
                           {**_roles(a, inst, acc.view), "access": acc, "inside": inside})
            except (EncodingError, T.TermError) as err:
                vc = b.unknown("coordinates", site, f"cannot encode the coordinates of %{name}: {err.message}")
            vc.roles["lemma_key"] = key


def _size(mode: Any) -> Any:
    from argus.layout_algebra import Layout

    return Layout(mode).size


def _staged_lemma(b: _Builder, writer: Writer, reader_site: Site) -> None:
    """Lemma ``witness`` of a staged write whose guard depends on its stage loop's counter:
    for each read of the buffer at ``reader_site``, the latest iteration that wrote the stage
    the read sees (recovered from the read's address, as the resolution does) writes whenever
    an older iteration of the same stage did (so "the latest" is the last writer)."""
    a = b.analysis
    reads = [acc for acc in a.accesses.get(reader_site.index, [])
             if acc.buffer.name == writer.view.buffer.name and acc.kind in ("read", "tag")]
    if not reads:  # a resolution this lemma cannot restate: it stays unproved
        vc = b.unknown("witness", writer.site, f"{reader_site.describe()} reads %{writer.view.buffer.name} other "
                       f"than through its own accesses: the stages of {writer.describe()} are not checked for it")
        vc.roles["lemma_key"] = ("staged", writer.site.index, reader_site.index)
        return
    for acc in reads:
        reader, hyps = a.fresh(reader_site, "#r", view=acc.view)
        hyps = [*hyps, a.active(reader, acc)]
        at_j = a.witness_instance(writer, a.key(reader, acc.view), a.writer_params(writer, reader), reader)
        goals = []
        for lp, s, _c, _p in a.staged_guard_loops(writer):
            if not hasattr(lp, "condition"):
                raise EncodingError(f"a guard of {writer.describe()} depends on the counters of the nested loops "
                                    "whose flattened counter selects its stage")
            j = at_j.values[lp.var]
            older = T.int_var(f"{lp.var.name}.older#{writer.site.index}")
            at_older = Instance(writer.site, {**at_j.values, lp.var: older})
            same_stage = T.and_(T.eq(T.floormod(T.sub(j, older), s), 0), T.lt(older, j),
                                T.le(a.encoder.term(lp.start, at_j.values), older))
            goals.append(T.implies(T.and_(same_stage, a.guard(writer, at_older)), a.guard(writer, at_j)))
        roles = {**_roles(a, reader, acc.view), "writer": writer}
        vc = b.add("witness", writer.site, hyps, T.and_(*goals),
                   f"the latest iteration writing a stage of %{writer.view.buffer.name} at {writer.describe()} "
                   f"writes whenever an older one did (read at {reader_site.describe()})", roles)
        vc.roles["lemma_key"] = ("staged", writer.site.index, reader_site.index)


def _latest_lemma(b: _Builder, writer: Writer, reader_site: Site) -> None:
    """Lemma ``witness`` of a reused write whose guard depends on the counter of the loop it
    reuses its addresses in (:meth:`~argus.abstract_interp.analysis.Analysis.latest_guard_loop`):
    for each read of the buffer at ``reader_site`` (a fresh reader and element), every older
    iteration of the write that wrote the element before the read is followed by a write the
    resolution sees — some candidate's instance that hits (the latest iteration itself when it
    writes, or another site's write).  The resolution takes the last hit, every hit is a write,
    and every write is followed by a hit: so the last hit is the last write."""
    a = b.analysis
    key = ("latest", writer.site.index, reader_site.index)
    buffer = writer.view.buffer
    lp = a.latest_guard_loop(writer)
    reads = [acc for acc in a.accesses.get(reader_site.index, [])
             if acc.buffer.name == buffer.name and acc.kind in ("read", "tag")]
    if lp is None or not reads:  # a resolution this lemma cannot restate: it stays unproved
        vc = b.unknown("witness", writer.site, f"{reader_site.describe()} reads %{buffer.name} other than through "
                       f"its own accesses: the latest write of {writer.describe()} is not checked for it")
        vc.roles["lemma_key"] = key
        return
    for acc in reads:
        reader, hyps = a.fresh(reader_site, "#r", view=acc.view)
        hyps = [*hyps, a.active(reader, acc)]
        address = a.key(reader, acc.view)
        logical = a.logical(reader, acc.view) if a.is_logical(buffer) else None
        seen = []  # (hit, instance) of every candidate the resolution weighs
        at_j = None
        for other in a.candidates(reader, buffer, address, logical):
            if isinstance(a.witness(other), str) and other is not writer:
                continue  # a havocked candidate: no hit to count on
            try:
                hit, inst = a.hit(other, reader, address, logical)
            except (EncodingError, T.TermError):
                if other is writer:
                    raise
                continue  # likewise (a goal with fewer alternatives is only stronger)
            seen.append((hit, inst))
            if other is writer:
                at_j = inst
        if at_j is None:
            raise EncodingError(f"{reader_site.describe()} does not weigh {writer.describe()}")
        older = T.int_var(f"{lp.var.name}.older#{writer.site.index}")
        at_older = Instance(writer.site, {**at_j.values, lp.var: older})
        if a.witness(writer).logical:
            same = T.and_(*(T.eq(x, y) for x, y in zip(a.logical(at_older, writer.view), logical)))
        else:
            same = T.eq(a.key(at_older, writer.view), address)
        wrote = [a.encoder.term(lp.condition(), at_older.values), T.lt(older, at_j.values[lp.var]),
                 a.ranges(writer, at_older), same, a.guard(writer, at_older), a.precedes(at_older, reader)]
        goal = T.or_(*(T.and_(hit, a.precedes(at_older, inst)) for hit, inst in seen))
        roles = {**_roles(a, reader, acc.view), "writer": writer,
                 "witness": {lp.var.name: at_j.values[lp.var]}, "variables": {lp.var.name: older}}
        vc = b.add("witness", writer.site, [*hyps, *wrote], goal,
                   f"an older iteration of {writer.describe()} that wrote an element of %{buffer.name} is followed "
                   f"by a write the read at {reader_site.describe()} sees (its latest iteration or another write)",
                   roles)
        vc.roles["lemma_key"] = key


def _composed_witness(a: Analysis, writer: Writer, recipe: Any) -> dict[sympy.Symbol, Any] | None:
    """``w⁻¹(write(d))`` as sympy expressions of the instance ``d``, folded with the instance
    variables' ranges (:func:`~argus.abstract_interp.witness.simplify_in_range`): a block
    offset under a modulo, or a digit that stays in its period, disappears before the solvers
    see it.  ``None`` where the witness is not a plain function of the address."""
    from argus import symbolic
    from argus.abstract_interp.encoding import view_inner_address
    from argus.abstract_interp.witness import COORD_TARGETS, TARGET, simplify_in_range

    view, site = writer.view, writer.site
    if recipe.latest or (view.swizzle is not None and view.buffer.name not in a.swizzle_keyed):
        return None
    if recipe.logical:
        binding = {COORD_TARGETS[d]: site.expr(c) for d, c in enumerate(a.logical_view(view))}
    else:
        base = getattr(recipe, "base", 0)
        binding = {TARGET: sympy.expand(site.expr(view_inner_address(view)) - site.expr(base))}
    bounds = {}
    for v in a.instance_variables(writer):
        lo, hi = symbolic.static_value(v.start), symbolic.static_value(v.extent)
        if lo is not None and v.step > 0:
            bounds[v.symbol] = (lo, lo + v.step * (hi - 1) if hi is not None else None)
    out = {}
    for sym, expr in recipe.values.items():
        e = sympy.sympify(site.expr(expr)).xreplace(binding)
        out[sym] = simplify_in_range(sympy.expand(e), bounds)
    return out


def _lemma(b: _Builder, writer: Writer) -> None:
    a = b.analysis
    site = writer.site
    inst, hyps = a.fresh(site, view=writer.view)
    if writer.launch:
        inst = Instance(site, {s: v for s, v in inst.values.items() if s not in (a.tid, *a.block_ids)})
    hyps = [*hyps, a.guard(writer, inst)]
    params = {s: v for s, v in inst.values.items() if s in (a.tid, *a.block_ids)} if not writer.launch else {}
    if writer.view.buffer.space is not N.MemorySpace.REGISTER:
        params.pop(a.tid, None)
    recipe = a.witness(writer)
    latest = {lp.var for lp in recipe.latest}
    logical = a.logical(inst, writer.view) if recipe.logical else None
    witness = a.witness_instance(writer, a.key(inst, writer.view), params, inst, logical)
    variables = [v.symbol for v in a.instance_variables(writer) if v.symbol not in latest]
    composed = _composed_witness(a, writer, recipe)
    if composed is not None:  # w⁻¹(write(d)) simplified in sympy first: most of it is d again
        witness = Instance(site, {**witness.values, **{s: a.value(inst, e) for s, e in composed.items()}})
    goal = T.and_(*(T.eq(witness.values[s], inst.values[s]) for s in variables))
    for lp in recipe.monotone if a.latest_guard_loop(writer) is None else ():  # else: lemma ``latest``
        later = T.int_var(f"{lp.var.name}.later")
        moved = inst.bind({lp.var: later})
        in_range = a.encoder.term(lp.condition(), {**inst.values, lp.var: later})
        goal = T.and_(goal, T.implies(T.and_(in_range, T.gt(later, inst.values[lp.var])), a.guard(writer, moved)))
    roles = {**_roles(a, inst, writer.view), "witness": {s.name: witness.values[s] for s in variables},
             "variables": {s.name: inst.values[s] for s in variables}}
    b.add("witness", site, hyps, goal,
          f"each element written by {writer.describe()} is written by one instance only "
          "(its writer is recovered from the address)", roles)
    b.vcs[-1].roles["writer"] = writer
    b.vcs[-1].roles["lemma_key"] = writer.site.index
