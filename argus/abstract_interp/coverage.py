"""Coverage: every k of an MMA chain's reduction reaches each accumulator element exactly once.

The interpreter (:mod:`argus.ir.interp_mma`) keeps, per accumulator element, the set of
reduction keys (the k field of A's tag) that reached it since it was last set by another op
than an MMA, reports a key arriving twice, and checks that the set is the whole *reduction
domain* where the sum leaves the chain (a store, a conversion, any non-MMA read but an
in-place rescaling).  The domain is derived from the kernel's tags
(:func:`~argus.ir.interp_mma.reduction_domain`: ``tag(a, lambda i, k: (i, k))`` on an M×K
tensor makes it ``0 .. K - 1``); where it cannot be derived, only duplicates are checked.

Tags do not see coverage: ``D[m, n]`` carries the row fields of A and the column fields of B
whether the loop went over K once, twice or half.  Each contribution (an A element ``A[m, kk]``
of one MMA instance) has a *key*: the k of its record, or for a known zero (the zero fill of a
TMA box or a masked copy) the k of the tag it stands for.  The interpreter counts a record's k,
and a known zero's where it lies in the domain (a row past M is the padding of that k); a zero
past K counts nothing.  The verifier states four properties whose conjunction makes the
interpreter's keys exactly the domain, for symbolic trip counts:

* **injectivity** (at each MMA site ``s``): two contributions to the same accumulator element
  (same block, thread and register) in the same *chain* — equal counters of the loops around
  the accumulator's reset — that are distinct (another site, other loop counters, or another
  k index of the atom) carry different keys.  One VC per MMA site writing the same registers
  at or before ``s`` (sites whose registers are constants and disjoint are skipped);
* **range** (at each MMA site, domain known): every contribution has a key, a record's k lies
  in the domain and every key at or above its start — for rows of A whose first element has a
  key (a row is tagged as a whole, lemma ``mma-operands``; an untagged row gives D no record);
* **bound** (at each non-MMA read of an accumulator, per MMA site of the chain): the keys of
  the contributions to the element read lie below the domain's start plus their number;
* **cardinality** (at the same reads): the number of contributions to the element read,
  ``Σ_s [register ∈ D(s)] · Π trip counts · k extent`` over the MMA sites between the last
  reset and the read, is 0 (no chain) or at least the domain's size.  The count is exact only
  when every such site runs on every path that reaches the read, once per iteration of its
  loops: an MMA under a branch the read is not under, a read inside the loop that
  accumulates, or trip counts that depend on each other give ``unknown`` with the reason.

Distinct, at least the start, below start plus their number: the keys are exactly that range,
which holds the domain; the keys in the domain are the interpreter's (records' k and padding),
the others known zeros past it.  Each k exactly once.

Partial sums the interpreter carries through register moves and elementwise ops *within* the
chain (an accumulator rebound as ``acc = mma(..., acc)`` in a loop, a rescaling ``o = o *
alpha``) are not followed here: such chains are ``unknown`` with that reason.  A move *out of*
the chain (a conversion of the whole fragment, an epilogue's ``acc + bias``) is checked as the
read where the sum leaves it: the interpreter checks the moved keys at the later store, the
verifier already at the move (a stronger check).  Refutations name the site(s), block,
thread, element and loop counters, and replay on the interpreter (a duplicate at the MMA, a
missing k at the read).
"""

from __future__ import annotations

from itertools import product as cartesian
from typing import Any

from argus import symbolic
from argus.abstract_interp import memory as M
from argus.abstract_interp.analysis import _merge_deps
from argus.abstract_interp.collectives import define_tag
from argus.abstract_interp.encoding import EncodingError, Instance
from argus.abstract_interp.mma import MmaInstance, _static_extents, has_k, k_value
from argus.abstract_interp.program import Site, common_loops
from argus.ir import nodes as N
from argus.ir.atoms import mma_atom
from argus.ir.interp_mma import ReductionDomain, carries_keys, reduction_domain
from argus.smt import terms as T
from argus.smt.evaluate import evaluate

COUNTING = ("the keys of a chain's contributions lying below its start plus their number is a step of the "
            "verifier's count, not a check of the interpreter")
UNTAGGED_ROWS = ("a row of A whose first element carries neither a k nor a known zero's k is not counted "
                 "(it gives the result no record)")


def coverage(b: Any, site: Site) -> None:
    """The coverage VCs of one site (a site maker of :mod:`~argus.abstract_interp.properties`)."""
    a = b.analysis
    chains = _chains(a)
    if isinstance(site.op, N.Mma):
        chain = chains.get(site.op.d.buffer.name)
        if chain is not None and chain.unmodelled is not None:
            b.unknown("coverage", site, chain.unmodelled)
        elif chain is not None:
            _injective(b, site, chain)
            if chain.domain is not None:
                _in_domain(b, site, chain)
    for acc in a.accesses.get(site.index, []):
        chain = chains.get(acc.buffer.name)
        if acc.kind != "read" or chain is None or chain.domain is None or chain.unmodelled is not None:
            continue
        if isinstance(site.op, N.Mma) and acc.view in (site.op.c, site.op.d):
            continue  # the accumulator itself: the chain goes on
        _complete(b, site, acc, chain)


# --------------------------------------------------------------------------- chains


class _Chain:
    """The MMA sites writing one accumulator buffer, the sites that reset it (any other
    writer) and the reduction domain (``None`` unless every MMA site derives the same)."""

    def __init__(self, a: Any, buffer: str, mmas: list[Site], resets: list[Site], accumulators: set[str]) -> None:
        self.buffer, self.mmas, self.resets = buffer, mmas, resets
        domains = {reduction_domain(a.kernel, s.op) for s in mmas}
        same = {(d.offset, d.extent) for d in domains if d is not None}
        self.domain: ReductionDomain | None = (min(domains, key=lambda d: d.tensor)
                                               if None not in domains and len(same) == 1 else None)
        self.addresses = {s.index: _static_addresses(a, s) for s in mmas}
        self.unmodelled = _unmodelled(a, buffer, mmas, accumulators)

    def chain_loops(self, site: Site) -> tuple:
        """The loops around ``site`` whose counters identify its chain: those it shares with
        a reset of the accumulator (the longest such prefix).  A reset under a branch ``site``
        is not under may not run: it does not cut chains (more pairs are compared)."""
        best: tuple = ()
        for r in self.resets:
            if not _guards(r) <= set(site.conditions):
                continue
            common = common_loops(site, r)
            if len(common) > len(best):
                best = common
        return best


def _chains(a: Any) -> dict[str, _Chain]:
    cached = a.__dict__.get("_coverage_chains")
    if cached is not None:
        return cached
    mmas: dict[str, list[Site]] = {}
    for site in a.program.sites:
        if isinstance(site.op, N.Mma):
            mmas.setdefault(site.op.d.buffer.name, []).append(site)
    out = {}
    for name, sites in mmas.items():
        resets = [w.site for w in a.writers.get(name, []) if not isinstance(w.site.op, N.Mma)]
        out[name] = _Chain(a, name, sites, resets, set(mmas))
    a._coverage_chains = out
    return out


def _unmodelled(a: Any, buffer: str, mmas: list[Site], accumulators: set[str]) -> str | None:
    """Why the chains of ``buffer`` are beyond this module (``None`` when they are not): the
    interpreter carries partial sums through register moves and elementwise ops (``acc =
    mma(...)`` rebound in a loop, ``o = o * alpha``), which the VCs here do not follow."""
    for s in mmas:
        if s.op.c.buffer.name != buffer:
            return (f"the MMA at {s.op.loc} accumulates %{s.op.c.buffer.name} into another buffer (%{buffer}): "
                    "coverage of partial sums moved between registers is not modelled by the verifier")
    for site in a.program.sites:
        op = site.op
        if not carries_keys(op):
            continue
        # a move out of the chain (into another buffer) is where the sum leaves it: its read is
        # checked like a store's; a move into the chain's buffer carries partial sums in, and an
        # op of two partial sums (split-k) unites their keys
        sources = [x for x in op.srcs if isinstance(x, N.View)] if isinstance(op, N.Elementwise) else [op.src]
        if buffer not in {v.buffer.name for v in [op.dst, *sources]}:
            continue
        if op.dst.buffer.name == buffer or sum(v.buffer.name in accumulators for v in sources) > 1:
            return (f"%{buffer} is moved or rescaled in registers at {op.loc}: coverage of partial sums moved "
                    "between registers is not modelled by the verifier")
    return None


def _static_addresses(a: Any, site: Site) -> frozenset[int] | None:
    """The registers an MMA site's D view covers, when they are constants (fragments indexed
    by unrolled counters), else ``None``."""
    view = site.op.d
    try:
        extents = _static_extents(view, "D")
        inst, _ = a.fresh(site, "#addr", view=view)
        out = set()
        for coords in cartesian(*(range(e) for e in extents)):
            values = dict(inst.values)
            values.update({s: T.int_const(c) for s, c in zip(a._coord_symbols(view), coords)})
            term = a.key(Instance(site, values), view)
            if T.variables(term):
                return None
            out.add(int(evaluate(term, {})))
        return frozenset(out)
    except (EncodingError, T.TermError):
        return None


# --------------------------------------------------------------------------- contributions


class _Contribution:
    """One MMA instance's contribution to its D element: A[m, kk] for a symbolic ``kk``."""

    def __init__(self, a: Any, inst: Instance, suffix: str) -> None:
        op: N.Mma = inst.site.op
        self.mma = MmaInstance(a, inst)
        self.inst = inst
        _, extent = self.mma.spec.tile("a")
        self.kk = T.int_var(f"kk{suffix}#{inst.site.index}", 0, extent - 1)
        row, _ = self.mma.position()
        self.a_element = self.mma.element("a", row, self.kk)
        field = self.mma.k_field("a")
        count = a.__dict__.get("_coverage_names", 0)
        a._coverage_names = count + 1
        tag = define_tag(a, f"cov{count}.a#{inst.site.index}", self.a_element.tag)
        self.tagged = has_k(tag, field)
        self.k = k_value(tag, field)
        # the element's key: its k, or for a known zero the k of the tag it stands for (a row
        # past M: padding of that k; a column past K: a zero outside the domain)
        self.has_key, self.key = _key(tag, field)
        self.register = a.key(inst, op.d)
        # the row's first element: a row without a key there (untagged data) gives D no
        # record, and the lemma ``mma-operands`` makes every element of the row so
        self.row_start = self.mma.element("a", row, T.int_const(0))
        self.row_keyed = _key(define_tag(a, f"cov{count}.a0#{inst.site.index}", self.row_start.tag), field)[0]


def _key(tag: Any, field: int) -> tuple[T.Term, T.Term]:
    """``(has a key, key)`` of an A element: a record's k, or a known zero's stood-for k."""
    from argus.abstract_interp import tags as TG

    stood = TG.TagValue(tag.stands_for, tag.fields)
    real = has_k(tag, field)
    return (T.or_(real, T.and_(tag.zero, has_k(stood, field))),
            T.ite(real, k_value(tag, field), k_value(stood, field)))


def _roles(a: Any, inst: Instance, view: N.View, prefix: str = "") -> dict[str, Any]:
    return {f"{prefix}thread": inst.values[a.tid], f"{prefix}block": tuple(inst.values[s] for s in a.block_ids),
            f"{prefix}iteration": {lp.var.name: inst.values[lp.var] for lp in inst.site.loops},
            f"{prefix}element": tuple(inst.values[s] for s in a._coord_symbols(view)),
            **({"view": view} if not prefix else {})}


def _injective(b: Any, site: Site, chain: _Chain) -> None:
    """One VC per MMA site writing the same registers at or before ``site`` (each pair is
    a far easier query than their disjunction, and together they are equivalent to it)."""
    a = b.analysis
    op: N.Mma = site.op
    chain_vars = {lp.var for lp in chain.chain_loops(site)}
    here = chain.addresses[site.index]
    for other_site in chain.mmas:
        if other_site.index > site.index:
            continue
        there = chain.addresses[other_site.index]
        if here is not None and there is not None and not here & there:
            continue  # other registers
        inst, hyps = a.fresh(site, "#cov", view=op.d)
        mine = _Contribution(a, inst, "")
        block = {s: inst.values[s] for s in a.block_ids}
        shared = {lp.var: inst.values[lp.var] for lp in common_loops(site, other_site) if lp.var in chain_vars}
        second, more = a.fresh(other_site, f"#cov'{other_site.index}", view=other_site.op.d, block=block,
                               tid=inst.values[a.tid], loops=shared)
        theirs = _Contribution(a, second, "'")
        if other_site is site:
            distinct = T.or_(T.ne(mine.kk, theirs.kk),
                             *(T.ne(inst.values[lp.var], second.values[lp.var]) for lp in site.loops
                               if lp.var not in shared))
        else:
            distinct = T.TRUE
        conflict = T.and_(a.path(inst), a.path(second), T.eq(mine.register, theirs.register), distinct,
                          mine.has_key, theirs.has_key, T.eq(mine.key, theirs.key))
        other = {"other_site": other_site, "other_access": M.Access(other_site.op.d, "d", "write"),
                 **_roles(a, second, other_site.op.d, "other_")}
        roles = {**_roles(a, inst, op.d), "alternatives": [(conflict, other)], "k": mine.k, "kk": mine.kk}
        b.add("coverage", site, [*hyps, *more], T.not_(conflict),
              f"{mma_atom(op.atom).name}: no k reaches an accumulator element twice in one chain "
              f"(with {other_site.describe()})", roles, _merge_deps([mine.a_element, theirs.a_element]))


def _in_domain(b: Any, site: Site, chain: _Chain) -> None:
    a = b.analysis
    op: N.Mma = site.op
    inst, hyps = a.fresh(site, "#dom", view=op.d)
    mine = _Contribution(a, inst, "")
    lo = a.value(inst, chain.domain.offset)
    hi = T.add(lo, a.value(inst, chain.domain.extent))
    in_domain = T.implies(mine.tagged, T.and_(T.le(lo, mine.k), T.lt(mine.k, hi)))
    goal = T.implies(T.and_(a.path(inst), mine.row_keyed), T.and_(mine.has_key, in_domain, T.le(lo, mine.key)))
    lemmas, approx = _merge_deps([mine.a_element, mine.row_start])
    lemmas = lemmas | {("mma", site.index)}
    roles = {**_roles(a, inst, op.d), "k": mine.key, "kk": mine.kk}
    b.add("coverage", site, hyps, goal,
          f"{mma_atom(op.atom).name}: every product's k lies in the reduction domain ({chain.domain.describe()}), "
          "a known zero's at or above its start",
          roles, (lemmas, (*approx, UNTAGGED_ROWS)))


# --------------------------------------------------------------------------- cardinality


def _complete(b: Any, site: Site, acc: M.Access, chain: _Chain) -> None:
    a = b.analysis
    op = site.op
    before = [r for r in chain.resets if r.index < site.index]
    last = max(before, key=lambda r: r.index, default=None)
    if last is not None and not (_guards(last) <= set(site.conditions) and all(lp in site.loops for lp in last.loops)):
        b.unknown("coverage", site, f"the contributions to %{acc.buffer.name} read at {op.loc} cannot be counted: "
                  f"the reset at {last.describe()} may not run before the read (a branch or loop the read is "
                  "not in)")
        return
    start = last.index if last is not None else -1
    sites = [s for s in chain.mmas if start < s.index < site.index]
    inst, hyps = a.fresh(site, "#card", view=acc.view)
    register = a.key(inst, acc.view)
    terms, reasons = [], []
    for s in sites:
        reason = _not_counted(s, site, chain)
        if reason is not None:
            reasons.append(reason)
            continue
        addresses = chain.addresses[s.index]
        if addresses is None:
            reasons.append(f"the registers the MMA at {s.describe()} writes are not constants")
            continue
        _, extent = mma_atom(s.op.atom).tile("a")
        count: T.Term = T.int_const(extent)
        for lp in s.loops[len(chain.chain_loops(s)):]:
            count = T.mul(count, _trips(a, inst, lp))
        hit = T.or_(*(T.eq(register, x) for x in sorted(addresses)))
        terms.append(T.ite(hit, count, 0))
    if reasons:
        b.unknown("coverage", site, f"the contributions to %{acc.buffer.name} read at {op.loc} cannot be counted: "
                  + "; ".join(dict.fromkeys(reasons)))
        return
    total = T.add(*terms) if terms else T.int_const(0)
    size = a.value(inst, chain.domain.extent)
    goal = T.implies(a.active(inst, acc), T.or_(T.eq(total, 0), T.ge(total, size)))
    roles = {**_roles(a, inst, acc.view), "logical": a.logical(inst, acc.view), "buffer": acc.buffer.name,
             "contributions": total, "domain_size": size}
    b.add("coverage", site, hyps, goal,
          f"%{acc.buffer.name} leaves its MMA chain with every k of the reduction ({chain.domain.describe()})",
          roles)
    bound = T.add(a.value(inst, chain.domain.offset), total)
    for s in sites:
        _below(b, site, acc, inst, hyps, register, s, chain, bound)


def _below(b: Any, site: Site, acc: M.Access, reader: Instance, hyps: list, register: T.Term, mma: Site,
           chain: _Chain, bound: T.Term) -> None:
    """Every contribution of ``mma`` to the element read has its key (a k, or a known zero's)
    below ``offset + contributions``: with the range and injectivity VCs, the keys are then
    exactly ``offset .. offset + contributions - 1``, which holds the whole domain."""
    a = b.analysis
    block = {x: reader.values[x] for x in a.block_ids}
    shared = {lp.var: reader.values[lp.var] for lp in chain.chain_loops(mma)}
    inst, more = a.fresh(mma, f"#below{mma.index}", view=mma.op.d, block=block, tid=reader.values[a.tid],
                         loops=shared)
    mine = _Contribution(a, inst, f"#below{mma.index}")
    premise = T.and_(a.active(reader, acc), a.path(inst), T.eq(mine.register, register), mine.row_keyed)
    roles = {**_roles(a, reader, acc.view), "k": mine.key, "kk": mine.kk,
             **_roles(a, inst, mma.op.d, "other_")}
    lemmas, approx = _merge_deps([mine.a_element, mine.row_start])
    b.add("coverage", site, [*hyps, *more], T.implies(premise, T.lt(mine.key, bound)),
          f"the keys of the contributions of {mma.describe()} to %{acc.buffer.name} lie below the domain's start "
          "plus their number", roles, (lemmas | {("mma", mma.index)}, (*approx, COUNTING)))


def _not_counted(mma: Site, reader: Site, chain: _Chain) -> str | None:
    """Why the number of instances of ``mma`` before ``reader`` is not a product of trip
    counts (``None`` when it is)."""
    chain_loops = chain.chain_loops(mma)
    inner = mma.loops[len(chain_loops):]
    if any(lp in reader.loops for lp in inner):
        return f"%{chain.buffer} is read inside the loop at {inner[0].op.loc} that accumulates it"
    if not all(lp in reader.loops for lp in chain_loops):
        return f"the read is outside the loops that reset %{chain.buffer}"
    if not _guards(mma) <= set(reader.conditions):
        return f"the MMA at {mma.describe()} runs under a condition the read is not under"
    counters = {lp.var for lp in inner}
    for lp in inner:
        free = symbolic.free_symbols(lp.start) | symbolic.free_symbols(lp.stop)
        if free & counters:
            return f"the trip count of the loop at {lp.op.loc} depends on an enclosing loop's counter"
    return None


def _guards(site: Site) -> set:
    """The branch (and warp role) conditions of a site's path, its loops' ranges aside."""
    return {c for c in site.conditions if c.what != "loop"}


def _trips(a: Any, inst: Instance, loop: Any) -> T.Term:
    """``max(0, ceil((stop - start) / step))`` at the reader's instance."""
    span = T.sub(a.value(inst, loop.stop), a.value(inst, loop.start))
    count = T.floordiv(T.add(span, loop.step - 1), loop.step) if loop.step != 1 else span
    return T.ite(T.gt(count, 0), count, 0)
