"""Per-thread symbolic execution: instances, addresses, and reads resolved to their writers.

:class:`Analysis` holds everything the properties need about one kernel specialization:
its sites (:mod:`~argus.abstract_interp.program`), the accesses and writes of each
(:mod:`~argus.abstract_interp.memory`), and the encoder of expressions into terms.

Reads are resolved to writers by :meth:`Analysis.resolve`.  For a read of address ``a`` of
buffer ``B`` by instance ``r``:

1. the *candidates* are the write sites of ``B`` that may come before ``r`` in dynamic order
   (all threads of the block for shared and global memory, ``r``'s own thread for registers,
   the launch-time tags of a global tensor first);
2. each candidate ``w`` gets its *witness* ``d = w⁻¹(a)`` (:mod:`~argus.abstract_interp.witness`),
   and ``hit_w = d in range ∧ write_w(d) == a ∧ guard_w(d) ∧ d precedes r``;
3. the value read is the tag written by the last candidate that hits (an ``ite`` chain in
   static order; where candidates share a symbolic loop, "last" compares their iterations),
   or the initial tag (⊥; global tensors: their launch tags) when none hits.

This is exact when every candidate's witness VC holds (the write is injective and the
witness inverts it) — those VCs are the resolution's *lemmas* — and when no op that the
verifier does not model may have written ``B`` (otherwise the read is havocked: fresh
variables, a sound over-approximation, recorded as an approximation).  Data races are proved
separately, which is what makes "last in program order" the value every thread sees.

Three refinements keep the VCs small and in linear arithmetic:

* a swizzled buffer whose views all carry one swizzle is keyed by the offset *before* the
  swizzle (a bijection), and swizzles that must be evaluated are encoded with floor division
  and modulo by powers of two, not bit-vectors;
* a global tensor with run-time strides is matched by *logical coordinate* (what tiles and
  partitions record per element) instead of by address; its ``coordinates`` lemmas prove
  that every access stays inside each dimension at the address the layout gives;
* a write repeated by every iteration of a loop at the same addresses (a register or a
  staging buffer reused each iteration) is resolved to the reader's latest preceding
  iteration; if its guard depends on the counter, its witness lemma also proves that a write
  in some iteration implies the write in every later one.  A value that flows around a loop
  (an accumulator) is havocked: that needs a loop invariant.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic
from argus.abstract_interp import collectives, linear, roles
from argus.abstract_interp import memory as M
from argus.abstract_interp import tags as TG
from argus.abstract_interp.encoding import (
    Encoder,
    EncodingError,
    Instance,
    view_extents,
    view_inner_address,
)
from argus.abstract_interp.program import (
    Program,
    Site,
    barrier_between,
    build_program,
    common_loops,
    may_precede,
)
from argus.abstract_interp.witness import (
    COORD_TARGETS,
    TARGET,
    NotInvertible,
    Variable,
    invert_address,
    invert_coordinates,
)
from argus.ir import nodes as N
from argus.ir.uniformity import UniformityInfo, analyze
from argus.smt import terms as T

INT = T.INT


@dataclass(frozen=True, eq=False)
class Writer:
    """One write of one site; ``launch``: a tag of a global tensor, in force from the launch."""

    site: Site
    write: M.Write
    launch: bool = False

    @property
    def view(self) -> N.View:
        return self.write.view

    def describe(self) -> str:
        return self.site.describe()


@dataclass(frozen=True)
class Witness:
    """A writer's instance variables as expressions of the address (:data:`TARGET`), and its
    *latest* loops: loops every iteration of which writes the same addresses, whose counter is
    the reader's latest preceding iteration instead."""

    values: dict[sympy.Symbol, Any]
    latest: tuple[Any, ...] = ()
    monotone: tuple[Any, ...] = ()  # latest loops whose guard must be shown monotone
    logical: bool = False  # the witness reads logical coordinates (COORD_TARGETS), not an address
    #: staged loops ``(loop, S, c, P)``: the write lands in stage ``P = (k + c) % S``; the
    #: witness recovers ``P`` from the address and takes the reader's latest iteration with it
    periodic: tuple[tuple[Any, int, int, sympy.Symbol], ...] = ()
    #: the part of the address no instance variable changes (a block's tile offset): ``values``
    #: read ``address - base``, so divisions see a small range, never an unbounded block offset
    base: Any = 0


@dataclass(frozen=True)
class Resolution:
    """What a read sees: its tag, whether the data was ever written, and what that relies on."""

    tag: TG.TagValue
    initialized: T.Term
    lemmas: frozenset[Any] = frozenset()
    approximations: tuple[str, ...] = ()
    #: ``(condition, tag, writer)`` cases, mutually exclusive and exhaustive (``writer`` is
    #: ``None`` for "no write hits": the initial tag); empty when not tracked
    branches: tuple[tuple[T.Term, TG.TagValue, Any], ...] = ()
    #: the cases depend on the order of instances in loops (writes sharing a loop, an MMA's
    #: silent or not): a copy of the element keeps them, and its readers state one VC per case
    dynamic: bool = False


#: a write's own cases (a copy of an element that several writes may have written last) are
#: kept as cases of its readers while there are no more than this many
MAX_CASES = 12


def _cases(condition: T.Term, written: Resolution, writer: Any) -> list[tuple[T.Term, TG.TagValue, Any]]:
    """The cases of a read where ``writer`` wrote last (under ``condition``): one, or where the
    write copied an element with cases of its own (a register copy or conversion of an
    accumulator), one per case of that element."""
    if not written.dynamic or not written.branches or len(written.branches) > MAX_CASES:
        return [(condition, written.tag, writer)]
    return [(T.and_(condition, c), tag, w if w is not None else writer) for c, tag, w in written.branches]


def _merge_deps(parts: Iterable[Resolution]) -> tuple[frozenset[Any], tuple[str, ...]]:
    lemmas: set[Any] = set()
    approx: dict[str, None] = {}
    for p in parts:
        lemmas |= p.lemmas
        approx.update(dict.fromkeys(p.approximations))
    return frozenset(lemmas), tuple(approx)


def _interval(term: T.Term) -> tuple[int | None, int | None]:
    try:
        return T.interval(term)
    except T.TermError:
        return (None, None)


def disjoint(a: tuple[int | None, int | None], b: tuple[int | None, int | None]) -> bool:
    """Two intervals (``None``: unbounded side) share no integer."""
    return (a[1] is not None and b[0] is not None and a[1] < b[0]) or (
        b[1] is not None and a[0] is not None and b[1] < a[0])


def residue(term: T.Term) -> tuple[int, int]:
    """``(g, r)`` with ``term ≡ r (mod g)`` for every value of its variables (``g == 0``: the
    term is the constant ``r``).  Interleaved register fragments (value ``v`` of fragment
    ``f`` at ``8·v + f``) overlap as intervals but never meet: their residues tell them apart."""
    if term.op == "const" and term.sort.is_int:
        return (0, int(term.value))
    if term.op == "+":
        g, r = 0, 0
        for arg in term.args:
            ga, ra = residue(arg)
            g = math.gcd(g, ga)
            r += ra
        return (g, r % g if g else r)
    if term.op == "*":
        g, r = 0, 1
        for arg in term.args:
            ga, ra = residue(arg)
            if ga == 0:
                g, r = g * abs(ra), r * ra
            elif g == 0:
                g, r = ga * abs(r), ra * r
            else:
                return (1, 0)
        return (g, r % g if g else r)
    return (1, 0)


def apart(x: tuple[int, int], y: tuple[int, int]) -> bool:
    """Two residues no integer has both."""
    g = math.gcd(x[0], y[0])
    if g == 0:
        return x[1] != y[1]
    return g > 1 and (x[1] - y[1]) % g != 0


@dataclass(frozen=True, eq=False)
class NestedStage:
    """Two nested loops ``(outer, inner)`` whose *flattened counter* ``f = (o − o₀)·n + (i − i₀)``
    (``n`` the inner trip count) selects a staged buffer's stage ``(f + c) % S``: the ring of
    a persistent kernel, which runs on across the outer loop's iterations (tiles)."""

    outer: Any
    inner: Any
    n: Any

    @property
    def var(self) -> sympy.Symbol:
        return self.inner.var

    @property
    def vars(self) -> tuple[sympy.Symbol, sympy.Symbol]:
        return (self.outer.var, self.inner.var)


def staged_vars(entry: Any) -> tuple[sympy.Symbol, ...]:
    """The loop counters a staged-loop entry of a witness stands for."""
    lp = entry[0] if isinstance(entry, tuple) else entry
    return lp.vars if isinstance(lp, NestedStage) else (lp.var,)


def _nested_stages(address: Any, loops: tuple[Any, ...]) -> tuple[Any, list]:
    """The ring stages of nested loops in ``address`` (see :class:`NestedStage`)."""
    found = []
    for outer, inner in itertools.pairwise(loops):
        if outer.step != 1 or inner.step != 1:
            continue
        if outer.var in (sympy.sympify(inner.start).free_symbols | sympy.sympify(inner.stop).free_symbols):
            continue
        n = inner.stop - inner.start
        flat = sympy.expand((outer.var - outer.start) * n + inner.var - inner.start)
        for m in address.atoms(sympy.Mod):
            if not {outer.var, inner.var} <= m.free_symbols:
                continue
            arg, modulus = m.args
            c = sympy.expand(arg - flat)
            if not (isinstance(modulus, sympy.Integer) and modulus > 1 and isinstance(c, sympy.Integer)):
                continue
            p = sympy.Symbol(f"__stage_{outer.var.name}_{inner.var.name}", integer=True, nonnegative=True)
            replaced = address.xreplace({m: p})
            if {outer.var, inner.var} & replaced.free_symbols:
                continue
            address = replaced
            found.append((NestedStage(outer, inner, n), int(modulus), int(c) % int(modulus), p))
            break
    return address, found


def _stages(address: Any, loops: tuple[Any, ...]) -> tuple[Any, tuple[tuple[Any, int, int, sympy.Symbol], ...]]:
    """Loops whose counter enters ``address`` only as ``(k + c) % S`` (a staged buffer:
    iteration ``k`` writes stage ``(k + c) % S``), each with a symbol ``P`` standing for that
    stage; returns the address with the stages replaced by their symbols.  Two nested loops
    whose flattened counter selects the stage are one entry (:class:`NestedStage`)."""
    address, found = _nested_stages(address, loops)
    nested = {v for entry in found for v in staged_vars(entry)}
    loops = tuple(lp for lp in loops if lp.var not in nested)
    for lp in loops:
        if lp.step != 1:
            continue
        mods = [m for m in address.atoms(sympy.Mod) if lp.var in m.free_symbols]
        if len(mods) != 1:
            continue
        inner, s = mods[0].args
        c = sympy.expand(inner - lp.var)
        if not (isinstance(s, sympy.Integer) and s > 1 and isinstance(c, sympy.Integer)):
            continue
        p = sympy.Symbol(f"__stage_{lp.var.name}", integer=True, nonnegative=True)
        replaced = address.xreplace({mods[0]: p})
        if lp.var in replaced.free_symbols:
            continue
        address = replaced
        found.append((lp, int(s), int(c) % int(s), p))
    return address, tuple(found)


#: a witness value of at most this many distinct subterms after normalization is used as it
#: is; a larger one is named (its floor divisions and modulos did not fold away)
SMALL_TERM = 24


def _small(term: T.Term) -> bool:
    count = 0
    for _ in T.subterms(term):
        count += 1
        if count > SMALL_TERM:
            return False
    return True


def _split_base(address: Any, variables: set[sympy.Symbol]) -> tuple[Any, Any]:
    """``(base, rest)`` with ``address == base + rest``: ``base`` the terms of none of ``variables``."""
    base = sympy.Add(*(t for t in sympy.Add.make_args(address) if not t.free_symbols & variables))
    return base, sympy.expand(address - base)


class Analysis:
    """The symbolic model of one kernel specialization (see the module docstring)."""

    def __init__(self, kernel: N.Kernel, *, unroll_limit: int | None = None) -> None:
        self.kernel = kernel
        self.program: Program = build_program(kernel) if unroll_limit is None else build_program(
            kernel, unroll_limit=unroll_limit)
        self.encoder = Encoder(kernel)
        self.uniformity: UniformityInfo = analyze(kernel)
        self.tid = kernel.thread_id
        self.block_ids = kernel.block_ids
        self.encoder.instance_symbols.update((TARGET, *COORD_TARGETS))
        for site in self.program.sites:
            for loop in site.loops:
                self.encoder.instance_symbols.add(loop.var)
            if site.subst:
                self.encoder.instance_symbols.update(s for s, _ in site.subst)
        self.unsupported: dict[int, str] = {}
        self.taint: dict[str, str] = {}
        self.accesses: dict[int, list[M.Access]] = {}
        self.writers: dict[str, list[Writer]] = {}
        self.read_index_sites: dict[sympy.Symbol, list[Site]] = {}
        self._current_site: Site | None = None
        self._collect()
        self.encoder.read_index = self._read_index_value
        self._witnesses: dict[int, dict[sympy.Symbol, Any] | str] = {}
        self._resolutions: dict[tuple, Resolution] = {}
        self._resolving: set[tuple[int, str]] = set()
        self._havoc = itertools.count()
        self._inner: dict[int, Any] = {}
        self._ranges: dict[int, tuple[int | None, int | None]] = {}

    # ---------------------------------------------------------------- the op table

    def _collect(self) -> None:
        for op, reason in self.program.unsupported:
            for view in M.views_in(op):
                self.taint.setdefault(view.buffer.name, f"{reason} may write %{view.buffer.name}")
        global_written: set[str] = set()
        multicast: list[Site] = []
        for site in self.program.sites:
            op = site.op
            try:
                accesses = M.accesses(op)
            except M.Unsupported as err:
                reason = f"unsupported {err} at {op.loc}" if op.loc else f"unsupported {err}"
                self.unsupported[site.index] = reason
                for view in M.views_in(op):
                    self.taint.setdefault(view.buffer.name, f"{reason} may write %{view.buffer.name}")
                continue
            self.accesses[site.index] = accesses
            if isinstance(op, N.Copy) and getattr(op, "multicast", None) is not None:
                multicast.append(site)
            for write in M.writes(op):
                buffer = write.view.buffer
                launch = False
                if isinstance(op, N.Tag) and buffer.space is N.MemorySpace.GLOBAL:
                    problem = self._launch_tag_problem(site, write, buffer.name in global_written)
                    if problem:
                        self.unsupported[site.index] = problem
                        self.taint.setdefault(buffer.name, problem)
                        continue
                    launch = True
                if write.data and buffer.space is N.MemorySpace.GLOBAL:
                    global_written.add(buffer.name)
                self.writers.setdefault(buffer.name, []).append(Writer(site, write, launch))
            if isinstance(op, N.ReadIndex):
                self.read_index_sites.setdefault(op.result, []).append(site)
                self.encoder.instance_symbols.add(op.result)
        for site in multicast:
            # a multicast box lands in every block of the mask: reads of it resolve to the copy
            # of the cluster block whose box holds the address (its rank is an instance variable)
            # when every write of the buffer is such a copy (there is no program order between
            # blocks to pick the last of several kinds of writes)
            name = site.op.dst.buffer.name
            if any(not (isinstance(w.site.op, N.Copy) and getattr(w.site.op, "multicast", None) is not None)
                   for w in self.writers.get(name, [])):
                where = f" at {site.op.loc}" if site.op.loc else ""
                self.taint.setdefault(name, f"multicast TMA copy{where}: %{name} is also written by other ops; "
                                      "the boxes peer blocks deliver into it are not resolved")
        swizzles: dict[str, set] = {}
        for site in self.program.sites:
            for acc in self.accesses.get(site.index, []):
                swizzles.setdefault(acc.buffer.name, set()).add(acc.view.swizzle)
        #: buffers all of whose views apply one swizzle: keyed by the offset before it
        self.swizzle_keyed = {name for name, kinds in swizzles.items() if len(kinds) == 1 and None not in kinds}
        self.logical_buffers = self._logical_buffers()
        for site in (s for sites in self.read_index_sites.values() for s in sites):
            buffer = site.op.src.buffer
            if buffer.space is not N.MemorySpace.GLOBAL or any(w.write.data for w in self.writers.get(buffer.name, [])):
                self.unsupported[site.index] = (f"read_index of memory the kernel writes (%{buffer.name}) "
                                                f"at {site.op.loc}")

    def _logical_buffers(self) -> set[str]:
        """Global tensors with run-time strides whose every view states its elements' logical
        coordinates: reads and writes of them are matched by coordinate (static arithmetic)
        rather than by address, which the ``coordinates`` lemmas justify."""
        views: dict[str, list[N.View]] = {}
        for site in self.program.sites:
            for acc in self.accesses.get(site.index, []):
                views.setdefault(acc.buffer.name, []).append(acc.view)
        out = set()
        for name, vs in views.items():
            buffer = vs[0].buffer
            layout = buffer.layout
            if buffer.space is not N.MemorySpace.GLOBAL or layout is None or name in self.taint:
                continue
            strides = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
            if all(symbolic.static_value(s) is not None for s in strides):
                continue
            if all(self.logical_view(v) is not None for v in vs):
                out.add(name)
        return out

    @staticmethod
    def logical_view(view: N.View) -> tuple[Any, ...] | None:
        """The view's element coordinates in its buffer's tensor (``None``: not stated)."""
        layout = view.buffer.layout
        if layout is None:
            return None
        rank = len(layout.shape) if isinstance(layout.shape, tuple) else 1
        if view.coords is not None:
            return tuple(view.coords) if len(view.coords) == rank else None
        if symbolic.static_value(view.offset) == 0 and view.layout == layout:
            return tuple(Analysis._coord_symbols(view))
        return None

    def is_logical(self, buffer: N.Buffer) -> bool:
        return buffer.name in self.logical_buffers

    def tensor_address(self, inst: Instance, buffer: N.Buffer, logical: tuple[T.Term, ...]) -> T.Term:
        """The buffer layout at a logical coordinate."""
        rank = len(logical)
        coords = N.COORDS[:rank]
        expr = buffer.layout(coords[0] if rank == 1 else tuple(coords))
        return self.encoder.term(symbolic.to_sympy(expr), {**inst.values, **dict(zip(coords, logical))})

    def _launch_tag_problem(self, site: Site, write: M.Write, written: bool) -> str | None:
        where = f" at {site.op.loc}" if site.op.loc else ""
        if site.conditions or site.loops or site.unrolled:
            return f"tag of global tensor %{write.view.buffer.name} under control flow{where}"
        if written:
            return f"tag of global tensor %{write.view.buffer.name} after it was written{where}"
        context = {self.tid, *self.block_ids}
        exprs = [write.view.offset, write.view.valid, *(write.view.coords or ()), *(e for _, e in write.record or ())]
        if any(isinstance(e, sympy.Basic) and e.free_symbols & context for e in exprs):
            return f"tag of global tensor %{write.view.buffer.name} that depends on the thread or block{where}"
        return None

    # ---------------------------------------------------------------- instances

    def fresh(self, site: Site, suffix: str = "", *, view: N.View | None = None,
              block: dict | None = None, tid: T.Term | None = None,
              loops: dict | None = None) -> tuple[Instance, list[T.Term]]:
        """A fresh instance of ``site`` (variables named with ``suffix``) and its hypotheses:
        launch bounds of a fresh block, coordinate bounds of ``view``'s elements."""
        values: dict[sympy.Symbol, T.Term] = {}
        hyps: list[T.Term] = []
        values[self.tid] = tid if tid is not None else self.encoder.thread_var(suffix)
        if block is None:
            block = self.encoder.block_vars(suffix)
            hyps += self.encoder.launch(block)
        values.update(block)
        if self.multicast_writer(site):
            values[N.CLUSTER_RANK] = self._read_index_value(N.CLUSTER_RANK, values)
        for loop in site.loops:
            if loops and loop.var in loops:
                values[loop.var] = loops[loop.var]
                continue
            lo, hi = symbolic.static_value(loop.start), symbolic.static_value(loop.stop)
            values[loop.var] = T.int_var(f"{loop.var.name}{suffix}", lo, hi - 1 if hi is not None else None)
        if view is not None:
            coords, more = self.coordinates(view, suffix)
            values.update(coords)
            hyps += more
        return Instance(site, values), hyps

    def coordinates(self, view: N.View, suffix: str = "") -> tuple[dict, list[T.Term]]:
        values, hyps = {}, []
        for sym, extent in zip(self._coord_symbols(view), view_extents(view)):
            hi = symbolic.static_value(extent)
            var = T.int_var(f"{sym.name}{suffix}", 0, hi - 1 if hi is not None else None)
            values[sym] = var
            if hi is None:
                hyps.append(T.lt(var, self.encoder.term(extent, {})))
        return values, hyps

    @staticmethod
    def _coord_symbols(view: N.View) -> tuple[sympy.Symbol, ...]:
        return tuple(view.coord_symbols) or N.COORDS[: len(view_extents(view))]

    # ---------------------------------------------------------------- expressions at an instance

    def value(self, inst: Instance, expr: Any) -> T.Term:
        previous, self._current_site = self._current_site, inst.site
        try:
            return self.encoder.term(inst.site.expr(expr), inst.values)
        finally:
            self._current_site = previous

    def path(self, inst: Instance) -> T.Term:
        return self.value(inst, inst.site.path)

    def inner_address(self, inst: Instance, view: N.View) -> T.Term:
        """``offset + layout(c)`` of the instance's element, before the view's swizzle."""
        inner = self._inner.get(id(view))
        if inner is None:
            inner = self._inner[id(view)] = (view, view_inner_address(view))
        return self.value(inst, inner[1])

    def address(self, inst: Instance, view: N.View) -> T.Term:
        term = self.inner_address(inst, view)
        return self.swizzle(view, term) if view.swizzle is not None else term

    def key(self, inst: Instance, view: N.View) -> T.Term:
        """The element's place in memory as reads, writes and races compare it: the address,
        or for a swizzled buffer whose views all carry the same swizzle (a bijection) the
        offset before it, which keeps bit-vector arithmetic out of most VCs."""
        if view.buffer.name in self.swizzle_keyed:
            return self.inner_address(inst, view)
        return self.address(inst, view)

    @staticmethod
    def swizzle(view: N.View, term: T.Term) -> T.Term:
        """``view.swizzle(term)`` in linear integer arithmetic: each bit of the two ``B``-bit
        fields is read with a floor division and a modulo by a power of two, and their xor is
        the parity of the sum.  Exact on every integer (floor division is the arithmetic
        shift of two's complement), and far easier for the solvers than bit-vector
        conversions; swizzles other than :class:`~argus.layout_algebra.Swizzle` are applied
        as they are."""
        from argus.layout_algebra.swizzle import Swizzle

        sw = view.swizzle
        if not isinstance(sw, Swizzle):
            try:
                return sw(term)
            except T.TermError as err:
                raise EncodingError(f"cannot swizzle the address of %{view.buffer.name}: {err.message}") from None
        if sw.bits == 0:
            return term
        source = T.floormod(T.floordiv(term, 1 << (sw.base + max(0, sw.shift))), 1 << sw.bits)
        target = T.floormod(T.floordiv(term, 1 << (sw.base - min(0, sw.shift))), 1 << sw.bits)
        xor = T.add(*(T.mul(1 << i, T.floormod(T.add(T.floordiv(source, 1 << i), T.floordiv(target, 1 << i)), 2))
                      for i in range(sw.bits)))
        return T.add(term, T.mul(T.sub(xor, target), 1 << (sw.base - min(0, sw.shift))))

    def active(self, inst: Instance, access: M.Access) -> T.Term:
        parts = [self.path(inst)]
        if access.view.valid is not None:
            parts.append(self.value(inst, access.view.valid))
        if access.pred is not None:
            parts.append(self.value(inst, access.pred))
        return T.and_(*parts)

    def in_bounds(self, inst: Instance, view: N.View) -> T.Term:
        size = self.value(inst, view.buffer.size)
        a = self.address(inst, view)
        parts = [T.le(0, a), T.lt(a, size)]
        if view.swizzle is not None:
            inner = self.inner_address(inst, view)
            parts += [T.le(0, inner), T.lt(inner, size)]
        return T.and_(*parts)

    def epoch(self, inst: Instance) -> T.Term:
        return self.value(inst, inst.site.epoch)

    def barrier_orders(self, first: Instance, second: Instance, *, later: bool = False) -> T.Term:
        """A barrier that both threads pass lies after ``first`` and before ``second``: a block
        barrier, or a named barrier scoped to the warp role of both (see program.py).
        ``later`` states it as ``second``'s epoch being greater (the same fact; the term is
        part of the VC's hash)."""
        _, role = barrier_between(first.site, second.site)
        compare = (lambda x, y: T.gt(y, x)) if later else T.lt
        out = compare(self.epoch(first), self.epoch(second))
        if role is not None:
            out = T.or_(out, compare(self.value(first, role[0]), self.value(second, role[1])))
        return out

    def same_interval(self, first: Instance, second: Instance) -> T.Term:
        """No barrier that both threads pass lies between the two instances (either way)."""
        _, role = barrier_between(first.site, second.site)
        out = T.eq(self.epoch(first), self.epoch(second))
        if role is not None:
            out = T.and_(out, T.eq(self.value(first, role[0]), self.value(second, role[1])))
        return out

    def logical(self, inst: Instance, view: N.View) -> tuple[T.Term, ...]:
        """The element's coordinate in the view's logical tensor."""
        coords = view.coords if view.coords is not None else self._coord_symbols(view)
        return tuple(self.value(inst, c) for c in coords)

    def with_logical(self, inst: Instance, view: N.View) -> Instance:
        """``inst`` with ``c0, c1, ...`` meaning the logical coordinates (as tag functions and
        tag predicates are written)."""
        logical = self.logical(inst, view)
        return inst.bind({N.COORDS[d]: v for d, v in enumerate(logical)})

    def _read_index_value(self, symbol: sympy.Symbol, values: dict) -> T.Term | None:
        """The integer a ``ReadIndex`` read: an uninterpreted function of the address (of an
        index tensor the kernel never writes), at the definition in the same unrolled copy.
        The cluster rank is that of the instance's block."""
        if symbol is N.CLUSTER_RANK and all(b in values for b in self.block_ids):
            from argus.abstract_interp.mbarrier import rank_term

            return rank_term(self.kernel, [values[b] for b in self.block_ids])
        sites = self.read_index_sites.get(symbol)
        if not sites:
            return None
        here = dict(self._current_site.subst) if self._current_site is not None else {}
        site = next((s for s in reversed(sites) if all(here.get(k, v) == v for k, v in s.subst)), sites[-1])
        src = site.op.src
        inst = Instance(site, {**values, **{s: T.int_const(0) for s in self._coord_symbols(src)}})
        fn = T.Function(f"mem.{src.buffer.name}", (INT,), INT)
        return fn(self.address(inst, src))

    # ---------------------------------------------------------------- order

    @staticmethod
    def precedes(first: Instance, second: Instance) -> T.Term:
        """``first`` comes before ``second`` in dynamic order (see program.py)."""
        common = common_loops(first.site, second.site)
        static = first.site.index < second.site.index
        if not common:
            return T.TRUE if static else T.FALSE
        alternatives = []
        equal: list[T.Term] = []
        for loop in common:
            a, b = first.values[loop.var], second.values[loop.var]
            alternatives.append(T.and_(*equal, T.lt(a, b)))
            equal.append(T.eq(a, b))
        if static:
            alternatives.append(T.and_(*equal))
        return T.or_(*alternatives)

    # ---------------------------------------------------------------- witnesses

    def instance_variables(self, writer: Writer) -> list[Variable]:
        """The variables a writer's instance ranges over (its witness solves for them)."""
        out = []
        site, view = writer.site, writer.view
        if not writer.launch and view.buffer.space is not N.MemorySpace.REGISTER:
            span = roles.role_threads(site, self.tid, self.encoder.threads)  # a warp role's threads
            first, end = span if span is not None else (0, self.encoder.threads)
            out.append(Variable(self.tid, end - first, first))
        for loop in site.loops:
            out.append(Variable(loop.var, loop.trip_count(), loop.start, loop.step))
        for sym, extent in zip(self._coord_symbols(view), view_extents(view)):
            out.append(Variable(sym, extent))
        if self.multicast_writer(site):  # which block of the cluster issued the box
            out.append(Variable(N.CLUSTER_RANK, math.prod(self.kernel.launch.cluster)))
        return out

    @staticmethod
    def multicast_writer(site: Site) -> bool:
        return isinstance(site.op, N.Copy) and getattr(site.op, "multicast", None) is not None

    def witness(self, writer: Writer) -> Witness | str:
        """How to recover the writer's instance from an address (or why it cannot be)."""
        key = id(writer)
        got = self._witnesses.get(key)
        if got is None:
            got = self._witnesses[key] = self._build_witness(writer)
        return got

    def _build_witness(self, writer: Writer) -> Witness | str:
        site = writer.site
        problem = collectives.witness_problem(site.op)
        if problem is not None:
            return problem
        variables = self.instance_variables(writer)
        names = {v.symbol for v in variables}
        pinned = {}
        for cond in site.conditions:
            for part in sympy.And.make_args(cond.expr):
                if isinstance(part, sympy.Eq):
                    lhs, rhs = part.args
                    for a, b in ((lhs, rhs), (rhs, lhs)):
                        if a in names and not (sympy.sympify(b).free_symbols & names):
                            pinned[a] = b
        address = sympy.sympify(site.expr(view_inner_address(writer.view))).xreplace(pinned)
        periodic: tuple = ()
        if not self.is_logical(writer.view.buffer):
            address, periodic = _stages(address, site.loops)
        latest, monotone = self._latest_loops(writer, address, pinned)
        staged = {v for entry in periodic for v in staged_vars(entry)}
        latest = tuple(lp for lp in latest if lp.var not in staged)
        monotone = tuple(lp for lp in monotone if lp.var not in staged)
        free = [v for v in variables if v.symbol not in {lp.var for lp in latest} | staged]
        free += [Variable(p, s) for _, s, _, p in periodic]
        try:
            if self.is_logical(writer.view.buffer):
                coords = [site.expr(c) for c in self.logical_view(writer.view)]
                return Witness(invert_coordinates(coords, free, pinned), latest, monotone, True)
            base, relative = _split_base(sympy.expand(sympy.sympify(address).xreplace(pinned)),
                                         {v.symbol for v in free})
            return Witness(invert_address(relative, free, pinned), latest, monotone, base=base, periodic=periodic)
        except NotInvertible as err:
            return f"cannot invert the write at {site.describe()}: {err}"

    def _latest_loops(self, writer: Writer, address: Any, pinned: dict) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """Loops every iteration of which writes the same addresses (a register or a buffer
        reused every iteration): their witness is the reader's latest preceding iteration
        rather than a function of the address.  Returns ``(latest, monotone)``: the second
        lists those whose guard depends on the counter, so the witness VC must also show that
        a write in some iteration implies the write in every later one (unless an earlier,
        unconditional write of the same elements in the same body overwrites older ones)."""
        site = writer.site
        loop_vars = {lp.var for lp in site.loops}
        guard_symbols: set[sympy.Symbol] = set()
        for g in writer.write.guard:
            guard_symbols |= sympy.sympify(site.expr(g)).free_symbols
        for cond in site.conditions:
            if cond.what != "loop":
                guard_symbols |= cond.expr.free_symbols
        latest, monotone = [], []
        for lp in site.loops:
            if lp.var in address.free_symbols or lp.var in pinned:
                continue
            bounds = sympy.sympify(lp.start).free_symbols | sympy.sympify(lp.stop).free_symbols
            if bounds & loop_vars:
                continue
            if any(lp.var in (sympy.sympify(o.start).free_symbols | sympy.sympify(o.stop).free_symbols)
                   for o in site.loops):
                continue
            latest.append(lp)
            if lp.var in guard_symbols and not self._overwritten_each_iteration(writer, lp):
                monotone.append(lp)
        return tuple(latest), tuple(monotone)

    def _reset_each_iteration(self, writer: Writer, outer: tuple, reader: Instance) -> bool:
        """Is there a write of the same elements in the body of the loops ``outer`` (around the
        innermost loop ``writer`` shares with ``reader``, not in it), before the reader, that
        runs in every iteration of them whenever the reader does (an accumulator's reset)?
        Then a write of an earlier iteration of ``outer`` is overwritten before the reader."""
        site = writer.site
        mine = site.expr(view_inner_address(writer.view))
        conditions = {id(c) for c in reader.site.conditions}
        for other in self.writers.get(writer.view.buffer.name, []):
            o = other.site
            if o.index >= reader.site.index or tuple(o.loops) != tuple(outer) or not other.write.data \
                    or other.write.guard or other.launch:
                continue
            if view_extents(other.view) != view_extents(writer.view):
                continue
            if o.expr(view_inner_address(other.view)) != mine:
                continue
            if all(id(c) in conditions for c in o.conditions if c.what != "loop"):
                return True
        return False

    def _overwritten_each_iteration(self, writer: Writer, loop: Any) -> bool:
        """Is there an earlier write in the same loop body, of the same elements, that runs
        in every iteration whenever ``writer`` runs in some iteration?"""
        site = writer.site
        mine = site.expr(view_inner_address(writer.view))
        conditions = {id(c) for c in site.conditions}
        for other in self.writers.get(writer.view.buffer.name, []):
            o = other.site
            if o.index >= site.index or o.loops != site.loops or not other.write.data or other.write.guard:
                continue
            if view_extents(other.view) != view_extents(writer.view):
                continue
            if o.expr(view_inner_address(other.view)) != mine:
                continue
            own = [c for c in o.conditions if c.what != "loop"]
            if all(id(c) in conditions and loop.var not in c.expr.free_symbols for c in own):
                return True
        return False

    def writer_params(self, writer: Writer, reader: Instance) -> dict[sympy.Symbol, T.Term]:
        """What a writer's instance shares with the reader: the block, and for registers the thread."""
        if writer.launch:
            return {}
        params = {s: reader.values[s] for s in self.block_ids}
        if writer.view.buffer.space is N.MemorySpace.REGISTER:
            params[self.tid] = reader.values[self.tid]
        return params

    def witness_instance(self, writer: Writer, address: T.Term, params: dict,
                         reader: Instance | None = None, logical: tuple[T.Term, ...] | None = None) -> Instance:
        """The writer's instance that wrote the element keyed ``address`` (:meth:`key`), or at
        the ``logical`` coordinate for a logical buffer, if any did, as terms."""
        witness = self.witness(writer)
        assert not isinstance(witness, str)
        values = dict(params)
        view = writer.view
        if view.swizzle is not None and view.buffer.name not in self.swizzle_keyed:
            address = self.swizzle(view, address)  # views disagree on the swizzle: undo this one's
        if witness.base != 0:
            address = T.sub(address, self.encoder.term(writer.site.expr(witness.base), params))
        binding = {**params, TARGET: address}
        if witness.logical:
            if logical is None:
                raise EncodingError(f"a read of %{writer.view.buffer.name} without logical coordinates")
            binding.update(zip(COORD_TARGETS, logical))
        for sym, expr in witness.values.items():
            values[sym] = self._named(f"w{writer.site.index}.{sym.name}", self.encoder.term(writer.site.expr(expr), binding))
        if N.CLUSTER_RANK in witness.values and all(s in values for s in self.block_ids):
            # a multicast box: written by the block of the witnessed rank in the reader's cluster
            from argus.abstract_interp.mbarrier import peer_block

            values.update(zip(self.block_ids, peer_block(self.kernel, [values[s] for s in self.block_ids],
                                                         values[N.CLUSTER_RANK])))
        if witness.latest:
            if reader is None:
                raise EncodingError("a reused write needs its reader")
            values.update(self._latest_iterations(writer, witness, reader, values))
        if witness.periodic:
            if reader is None:
                raise EncodingError("a staged write needs its reader")
            values.update(self.staged_iterations(writer, witness, reader, values))
        return Instance(writer.site, values)

    def latest_guard_loop(self, writer: Writer) -> Any | None:
        """The loop of a reused write (:meth:`_latest_loops`) whose counter its guard depends on,
        when there is exactly one: a read resolved to the write's latest preceding iteration then
        relies on the lemma ``latest`` stated for its reader (an older iteration that wrote the
        element is followed by a write the resolution sees: that latest iteration itself, or
        another candidate's), rather than on the write being monotone in the counter (a
        prefetch under ``k + 1 < K`` stops writing in the last iteration).  Only where that loop
        is the write's one reused loop and no loop selects a stage: then every instance that
        writes a given element is that element's witness at some iteration of the loop, which
        is what the lemma ranges over — and where the counter enters a branch condition around
        the write (``if kt + 1 < KT``), not only the write's own guard (a partial tile's
        validity, which is monotone where the loop covers whole tiles).  ``None`` otherwise:
        then the witness lemma states monotonicity."""
        witness = self.witness(writer)
        if isinstance(witness, str) or len(witness.monotone) != 1 or len(witness.latest) != 1 or witness.periodic:
            return None
        lp = witness.monotone[0]
        if not any(c.what in ("then", "else") and lp.var in c.expr.free_symbols for c in writer.site.conditions):
            return None
        return lp

    def staged_guard_loops(self, writer: Writer) -> tuple[Any, ...]:
        """The staged loops of ``writer`` whose counter its guard depends on: there the
        latest iteration of a stage might not write, and an older one might (lemma
        ``staged``)."""
        witness = self.witness(writer)
        if isinstance(witness, str) or not witness.periodic:
            return ()
        site = writer.site
        symbols: set = set()
        for g in writer.write.guard:
            symbols |= sympy.sympify(site.expr(g)).free_symbols
        for cond in site.conditions:
            if cond.what != "loop":
                symbols |= cond.expr.free_symbols
        return tuple(entry for entry in witness.periodic if set(staged_vars(entry)) & symbols)

    def staged_iterations(self, writer: Writer, witness: Witness, reader: Instance,
                          values: dict) -> dict[sympy.Symbol, T.Term]:
        """For each staged loop: the latest iteration before ``reader`` that wrote stage ``P``
        (``j = J - ((J + c - P) mod S)``, ``J`` the reader's latest preceding iteration)."""
        common = common_loops(writer.site, reader.site)
        out: dict[sympy.Symbol, T.Term] = {}
        for lp, s, c, p in witness.periodic:
            if isinstance(lp, NestedStage):
                out.update(self._nested_stage_iterations(writer, reader, lp, s, c, values[p], values))
                continue
            if lp in common:
                if common[-1] is not lp:
                    raise EncodingError(f"{writer.site.describe()}: a staged write inside a loop nested in "
                                        "its stage loop")
                last = reader.values[lp.var]
                if writer.site.index > reader.site.index:
                    last = T.sub(last, lp.step)
            elif any(c.what == "role" for c in (*writer.site.conditions, *reader.site.conditions)):
                # another warp role's loop runs beside the reader: not its last iteration, but
                # the one whose copy completed the mbarrier phase the reader observed
                if not (isinstance(writer.site.op, N.Copy) and getattr(writer.site.op, "mbarrier", None) is not None):
                    raise EncodingError(f"{writer.site.describe()}: a staged write of another warp role that no "
                                        "mbarrier delivers to its reader")
                lo, hi = symbolic.static_value(lp.start), symbolic.static_value(lp.stop)
                pinned = self.__dict__.setdefault("_delivered", set())
                var = T.int_var(f"w{writer.site.index}.{lp.var.name}.delivered#{len(pinned)}", lo,
                                hi - 1 if hi is not None else None)
                pinned.add(var)
                out[lp.var] = var
                guess = self._delivered_iteration(writer, reader, lp, s, c, values[p], values)
                if guess is not None:
                    # the iteration is a definition, not a free choice: a free variable let the
                    # solver pick an iteration that delivered nothing and report the read as
                    # unwritten.  The phase equation stays in the read's hit condition, so a
                    # wrong guess reads as unwritten (a failed proof), never as a wrong writer.
                    self.__dict__.setdefault("definitions", {})[var.name] = (var, guess)
                continue
            else:
                last = self.encoder.term(lp.start + lp.step * (lp.trip_count() - 1), {**reader.values, **values})
            stage = values[p]
            out[lp.var] = self._named(f"w{writer.site.index}.{lp.var.name}",
                                      T.sub(last, T.floormod(T.sub(T.add(last, c), stage), s)))
        return out

    def _nested_stage_iterations(self, writer: Writer, reader: Instance, nest: NestedStage, stages: int,
                                 offset: int, stage: T.Term, values: dict) -> dict[sympy.Symbol, T.Term]:
        """:meth:`staged_iterations` for a ring over nested loops: the flattened iteration
        ``F`` that wrote stage ``P`` (the latest before the reader, or for another role's TMA
        copy the one whose phase the reader observed: ``first + S·q``), then the writer's
        counters ``(o₀ + F div n, i₀ + F mod n)`` — stated as the reader's own counters where
        the reader runs in a nest of the same inner trip count and ``F`` is its flattened
        counter, so that the usual case needs no division by the symbolic ``n``."""
        from argus.abstract_interp import asynchrony
        from argus.abstract_interp.mbarrier import flattened

        outer, inner = nest.outer, nest.inner
        env = {**reader.values, **values}
        n = self.encoder.term(nest.n, env)
        o0, i0 = self.encoder.term(outer.start, env), self.encoder.term(inner.start, env)
        common = common_loops(writer.site, reader.site)
        name = f"w{writer.site.index}.{outer.var.name}.{inner.var.name}"

        def latest_below(bound: T.Term) -> T.Term:
            last = T.sub(bound, 1)
            return self._named(name, T.sub(last, T.floormod(T.sub(T.add(last, offset), stage), stages)))

        delivered = False
        if common[-2:] == (outer, inner) or common[-1:] == (inner,):
            f_r = T.add(T.mul(T.sub(reader.values[outer.var], o0), n), T.sub(reader.values[inner.var], i0))
            flat = latest_below(f_r if writer.site.index > reader.site.index else T.add(f_r, 1))
        elif common and common[-1] is outer:
            done = T.sub(reader.values[outer.var], o0)
            flat = latest_below(T.mul(T.add(done, 1) if writer.site.index < reader.site.index else done, n))
        elif not common and any(c.what == "role" for c in (*writer.site.conditions, *reader.site.conditions)):
            if not (isinstance(writer.site.op, N.Copy) and getattr(writer.site.op, "mbarrier", None) is not None):
                raise EncodingError(f"{writer.site.describe()}: a staged write of another warp role that no "
                                    "mbarrier delivers to its reader")
            m = asynchrony.model(self)
            bar = m.bars[writer.site.index].buffer.name
            elem = flattened(writer.site, asynchrony.element_expr(writer.site, m.bars[writer.site.index]))
            if elem is None:
                raise EncodingError(f"{writer.site.describe()}: its mbarrier element is not a function of the "
                                    "flattened counter of its loops")
            first = T.floormod(T.sub(stage, offset), stages)
            element = self.encoder.term(elem[1], {**env, elem[0]: first})
            phase = asynchrony.observed(self, m, reader, bar, element)
            pinned = self.__dict__.setdefault("_delivered", set())
            flat = T.int_var(f"{name}.delivered#{len(pinned)}", 0)
            self.__dict__.setdefault("definitions", {})[flat.name] = (flat, T.add(first, T.mul(stages, phase)))
            delivered = True
        else:
            trips = self.encoder.term(outer.trip_count(), env)
            flat = latest_below(T.mul(trips, n))
        positive = T.ite(T.gt(n, 0), n, 1)  # (no iteration at all when n <= 0)
        div, mod = T.floordiv(flat, positive), T.floormod(flat, positive)
        nest_r = reader.site.loops[-2:] if len(reader.site.loops) >= 2 else ()
        if len(nest_r) == 2 and sympy.simplify(nest_r[1].stop - nest_r[1].start - nest.n) == 0 \
                and nest_r[0].start == outer.start and nest_r[1].start == inner.start:
            ro, ri = nest_r
            f_r = T.add(T.mul(T.sub(reader.values[ro.var], o0), n), T.sub(reader.values[ri.var], i0))
            same = T.eq(flat, f_r)
            div = T.ite(same, T.sub(reader.values[ro.var], o0), div)
            mod = T.ite(same, T.sub(reader.values[ri.var], i0), mod)
        out = {outer.var: T.add(o0, div), inner.var: T.add(i0, mod)}
        if delivered:
            self.__dict__["_delivered"].add(out[outer.var])
        return out

    def _delivered_iteration(self, writer: Writer, reader: Instance, lp: Any, stages: int, offset: int,
                             stage: T.Term, values: dict) -> T.Term | None:
        """The iteration of another role's staged TMA copy whose data ``reader`` sees: the copy
        into stage ``P`` joins phase ``q`` of its mbarrier element in iteration
        ``first + S·q`` (``first`` the loop's first iteration writing ``P``; one arming round
        per element every ``S`` iterations), and ``q`` is the phase the reader's latest wait
        on that element observed.  ``None`` where the loop does not have that shape."""
        from argus.abstract_interp import asynchrony

        start, step = symbolic.static_value(lp.start), symbolic.static_value(lp.step)
        if start is None or step != 1:
            return None
        first = T.add(start, T.floormod(T.sub(stage, offset + start), stages))
        m = asynchrony.model(self)
        bar = m.bars[writer.site.index].buffer.name
        element = asynchrony._element(self, m, writer.site, {**values, lp.var: first})
        phase = asynchrony.observed(self, m, reader, bar, element)
        return T.add(first, T.mul(stages, phase))

    def _named(self, name: str, term: T.Term) -> T.Term:
        """A witness value as a fresh variable with its defining equation (stated once per VC
        that uses it): a read through several writes composes their witnesses, and as one
        term the floor divisions and modulos of each level would nest into the next."""
        if term.op in ("const", "var"):
            return term
        names = self.__dict__.setdefault("_witness_names", {})
        got = names.get(term)
        if got is None:
            original = term
            term = self.simplify(term)
            if _small(term):
                names[original] = term
                return term
            lo, hi = _interval(term)  # bounds of the definition, declared on its variable
            label = f"{name}#{len(names)}"
            got = names[original] = names[term] = T.int_var(label, lo, hi)
            self.__dict__.setdefault("definitions", {})[label] = (got, term)
        return got

    def simplify(self, term: T.Term) -> T.Term:
        """``term`` linearly normalized (:func:`argus.abstract_interp.linear.simplify`), with
        one memo for the whole analysis."""
        return linear.simplify(term, self.__dict__.setdefault("_linear_memo", {}))

    def simplify_tag(self, tag: TG.TagValue) -> TG.TagValue:
        return TG.TagValue(self.simplify(tag.length), tuple(self.simplify(f) for f in tag.fields))

    def _latest_iterations(self, writer: Writer, witness: Witness, reader: Instance,
                           values: dict) -> dict[sympy.Symbol, T.Term]:
        """The counters of a reused write's latest loops at the reader's latest preceding
        iteration.  In a loop the reader shares, that is the reader's own iteration, or the one
        before where the write comes after the reader in the loop body.  The reader may share
        inner loops whose counters the address or a condition fixes (a write under ``kc == 0``
        in a k-block loop): around them the outer shared loops are the latest ones, and whether
        the write comes after the reader compares the fixed counters with the reader's, then
        the order in the body (:meth:`_comes_after`)."""
        common = common_loops(writer.site, reader.site)
        latest_common = [lp for lp in common if lp in witness.latest]
        fixed = common[len(latest_common):]
        if latest_common and (tuple(common[:len(latest_common)]) != tuple(latest_common)
                              or (fixed and (len(latest_common) > 1 or any(lp.var not in values for lp in fixed)))):
            raise EncodingError(f"{writer.site.describe()}: a reused write in loops shared with its reader "
                                "whose other counters select the element")
        out: dict[sympy.Symbol, T.Term] = {}
        after: bool | T.Term = writer.site.index > reader.site.index
        if latest_common and fixed:
            after = self._comes_after(writer, fixed, reader, values)
        elif after and common and len(common) != 1 and not self._reset_each_iteration(writer, common[:-1], reader):
            raise EncodingError(f"{writer.site.describe()}: a reused write after its reader in nested loops")
        for lp in witness.latest:
            if lp in common:
                k = reader.values[lp.var]
                if after is not False and lp is latest_common[-1]:
                    # the previous iteration of the innermost loop; in nested loops, a write of an
                    # earlier iteration of the outer ones is overwritten by their reset
                    k = T.sub(k, lp.step) if after is True else T.ite(after, T.sub(k, lp.step), k)
                out[lp.var] = k
            else:
                last = lp.start + lp.step * (lp.trip_count() - 1)
                out[lp.var] = self.encoder.term(last, {**reader.values, **values})
        return out

    @staticmethod
    def _comes_after(writer: Writer, fixed: tuple, reader: Instance, values: dict) -> T.Term:
        """Does the write, at the fixed counters ``values`` of the shared inner loops ``fixed``,
        come after the reader in an iteration of the loops around them?  Lexicographic order of
        those counters, then the order in the body."""
        earlier, equal = [], []
        for lp in fixed:
            w, r = values[lp.var], reader.values[lp.var]
            earlier.append(T.and_(*equal, T.lt(w, r)))
            equal.append(T.eq(w, r))
        if writer.site.index < reader.site.index:
            earlier.append(T.and_(*equal))
        return T.not_(T.or_(*earlier))

    def ranges(self, writer: Writer, inst: Instance) -> T.Term:
        """The witness's thread and element lie in their ranges (loop ranges are in the path)."""
        parts = []
        if not writer.launch and writer.view.buffer.space is not N.MemorySpace.REGISTER:
            tid = inst.values[self.tid]
            parts += [T.le(0, tid), T.lt(tid, self.encoder.threads)]
        for sym, extent in zip(self._coord_symbols(writer.view), view_extents(writer.view)):
            c = inst.values[sym]
            parts += [T.le(0, c), T.lt(c, self.value(inst, extent))]
        return T.and_(*parts)

    def guard(self, writer: Writer, inst: Instance) -> T.Term:
        return T.and_(self.path(inst), *(self.value(inst, g) for g in writer.write.guard))

    # ---------------------------------------------------------------- resolution

    def address_range(self, writer: Writer) -> tuple[int | None, int | None]:
        """Bounds of every address ``writer`` may write (from the variables' bounds)."""
        got = self._ranges.get(id(writer))
        if got is None:
            try:
                inst, _ = self.fresh(writer.site, "#range", view=writer.view)
                got = T.interval(self.key(inst, writer.view))
            except (EncodingError, T.TermError):
                got = (None, None)
            self._ranges[id(writer)] = got
        return got

    def address_residue(self, writer: Writer) -> tuple[int, int]:
        """``(g, r)``: every address ``writer`` writes is ``r`` modulo ``g`` (:func:`residue`)."""
        cache = self.__dict__.setdefault("_residues", {})
        got = cache.get(id(writer))
        if got is None:
            try:
                inst, _ = self.fresh(writer.site, "#range", view=writer.view)
                got = residue(self.key(inst, writer.view))
            except (EncodingError, T.TermError):
                got = (1, 0)
            cache[id(writer)] = got
        return got

    def havoc_tag(self, what: str) -> TG.TagValue:
        n = next(self._havoc)
        return TG.TagValue(T.int_var(f"havoc{n}.{what}.length"),
                           tuple(T.int_var(f"havoc{n}.{what}.f{i}") for i in range(TG.FIELDS)))

    def havoc_bool(self, what: str) -> T.Term:
        return T.bool_var(f"havoc{next(self._havoc)}.{what}")

    def read(self, inst: Instance, view: N.View) -> Resolution:
        """What ``inst`` reads through ``view`` (at its element coordinates)."""
        op = inst.site.op
        if isinstance(op, N.Mma) and view is op.c and not self.__dict__.get("_mma_hypothesis"):
            from argus.abstract_interp import mma  # an accumulator: read under the MMA hypothesis

            return mma.read_accumulator(self, inst, view)
        logical = self.logical(inst, view) if self.is_logical(view.buffer) else None
        return self.resolve(inst, view.buffer, self.key(inst, view), logical)

    def resolve(self, reader: Instance, buffer: N.Buffer, address: T.Term,
                logical: tuple[T.Term, ...] | None = None) -> Resolution:
        """The last write of ``address`` (or, for a logical buffer, of the element at
        ``logical``) before ``reader`` (see the module docstring)."""
        related = tuple(reader.values.get(s) for s in (self.tid, *self.block_ids, *(lp.var for lp in reader.site.loops)))
        # reads of an MMA's accumulator are resolved under the MMA hypothesis (mma.py)
        key = (reader.site.index, buffer.name, address, logical, related, self.__dict__.get("_mma_hypothesis", 0) > 0)
        got = self._resolutions.get(key)
        if got is None:
            cycle = (reader.site.index, buffer.name)
            if cycle in self._resolving:
                # the value flows around a symbolic loop (an accumulator): its tag at iteration
                # k depends on iteration k - 1, which only a loop invariant can summarize
                loop = reader.site.loops[-1] if reader.site.loops else None
                where = f"loop at {loop.op.loc}" if loop is not None else "a loop"
                return Resolution(self.havoc_tag(buffer.name), self.havoc_bool(f"{buffer.name}.written"),
                                  approximations=(f"{where} needs an invariant: %{buffer.name} carries data from "
                                                  "one iteration to the next",))
            self._resolving.add(cycle)
            try:
                got = self._resolutions[key] = self._resolve(reader, buffer, address, logical)
            finally:
                self._resolving.discard(cycle)
        return got

    def _resolve(self, reader: Instance, buffer: N.Buffer, address: T.Term,
                 logical: tuple[T.Term, ...] | None = None) -> Resolution:
        if buffer.name in self.taint:
            reason = self.taint[buffer.name]
            return Resolution(self.havoc_tag(buffer.name), self.havoc_bool(f"{buffer.name}.written"),
                              approximations=(reason,))
        is_global = buffer.space is N.MemorySpace.GLOBAL
        entries = [self._candidate(writer, reader, address, logical)
                   for writer in self.candidates(reader, buffer, address, logical)]
        parts = [e[3] for e in entries]
        lemmas, approximations = _merge_deps(parts)
        lemmas = lemmas | {e[0].site.index for e in entries if e[2] is not None}
        lemmas = lemmas | {("staged", e[0].site.index, reader.site.index) for e in entries
                           if e[2] is not None and self.staged_guard_loops(e[0])}
        lemmas = lemmas | {("latest", e[0].site.index, reader.site.index) for e in entries
                           if e[2] is not None and self.latest_guard_loop(e[0]) is not None}
        if logical is not None and entries:
            lemmas = lemmas | {("coordinates", buffer.name)}
        initial = TG.BOTTOM
        static_order = all(not common_loops(a[0].site, b[0].site) for a, b in itertools.combinations(entries, 2))
        entries.sort(key=lambda e: (not e[0].launch, e[0].site.index))
        tag = initial
        branches = []
        if static_order:
            later: list[T.Term] = []
            for writer, hit, _, res in reversed(entries):
                branches += _cases(T.and_(hit, *later), res, writer)
                later.append(T.not_(hit))
            branches.append((T.and_(*later), initial, None))
            for _, hit, _, res in entries:
                tag = TG.select(hit, res.tag, tag)
        else:
            chosen = []
            for j, (wj, hj, ij, rj) in enumerate(entries):
                later = []
                for i, (wi, hi, ii, _) in enumerate(entries):
                    if i == j:
                        continue
                    if ii is None or ij is None:
                        after = T.TRUE if (wi.site.index > wj.site.index) else T.FALSE
                    else:
                        after = self.precedes(ij, ii)
                    later.append(T.not_(T.and_(hi, after)))
                last = T.and_(hj, *later)
                tag = TG.select(last, rj.tag, tag)
                chosen.append((last, rj, wj))
            # the cases of the select chain just built: the outermost choice first
            excluded: list[T.Term] = []
            for last, res, writer in reversed(chosen):
                branches += _cases(T.and_(last, *excluded), res, writer)
                excluded.append(T.not_(last))
            branches.append((T.and_(*excluded), initial, None))
        if is_global:
            initialized = T.TRUE
        else:
            initialized = T.or_(*(hit for writer, hit, _, _ in entries if writer.write.data))
        return Resolution(tag, initialized, lemmas, approximations, tuple(branches), not static_order)

    def candidates(self, reader: Instance, buffer: N.Buffer, address: T.Term,
                   logical: tuple[T.Term, ...] | None = None) -> list[Writer]:
        """The write sites of ``buffer`` that may have written ``address`` before ``reader``."""
        out = []
        wanted = _interval(address)
        for writer in self.writers.get(buffer.name, []):
            if not (writer.launch or may_precede(writer.site, reader.site)):
                continue
            if disjoint(wanted, self.address_range(writer)):
                continue
            if logical is None and apart(residue(address), self.address_residue(writer)):
                continue
            out.append(writer)
        return out

    def hit(self, writer: Writer, reader: Instance, address: T.Term,
            logical: tuple[T.Term, ...] | None = None) -> tuple[T.Term, Instance]:
        """``(hit, witness instance)``: the instance of ``writer`` that the resolution of a read
        of ``address`` by ``reader`` takes, and the condition that it wrote the element before
        the read (raises :class:`EncodingError` where that cannot be encoded)."""
        witness = self.witness(writer)
        assert not isinstance(witness, str)
        inst = self.witness_instance(writer, address, self.writer_params(writer, reader), reader, logical)
        if witness.logical:
            same = T.and_(*(T.eq(x, y) for x, y in zip(self.logical(inst, writer.view), logical)))
        else:
            same = T.eq(self.key(inst, writer.view), address)
        hit = T.and_(self.ranges(writer, inst), same,
                     self.guard(writer, inst),
                     T.TRUE if writer.launch else self.precedes(inst, reader))
        delivered = self.__dict__.get("_delivered", ())
        if any(inst.values.get(lp.var) in delivered for lp in writer.site.loops):
            from argus.abstract_interp import asynchrony

            hit = T.and_(hit, asynchrony.delivered_to(self, inst, reader))
        elif self.multicast_writer(writer.site):
            raise EncodingError("a multicast box read where no mbarrier phase pins the issuing iteration")
        return self.simplify(hit), inst

    def _candidate(self, writer: Writer, reader: Instance, address: T.Term,
                   logical: tuple[T.Term, ...] | None = None):
        """``(writer, hit, witness instance, resolution of the written tag)``; the instance is
        ``None`` when the writer could not be inverted (then hit and tag are havocked)."""
        witness = self.witness(writer)
        if isinstance(witness, str):
            return (writer, self.havoc_bool("hit"), None,
                    Resolution(self.havoc_tag("written"), T.TRUE, approximations=(witness,)))
        try:
            hit, inst = self.hit(writer, reader, address, logical)
            written = self.written_tag(writer, inst)
            written = Resolution(self.simplify_tag(written.tag), written.initialized, written.lemmas,
                                 written.approximations, written.branches, written.dynamic)
        except (EncodingError, T.TermError) as err:
            reason = f"cannot encode the write at {writer.site.describe()}: {err.message}"
            return (writer, self.havoc_bool("hit"), None,
                    Resolution(self.havoc_tag("written"), T.TRUE, approximations=(reason,)))
        return (writer, hit, inst, written)

    def written_tag(self, writer: Writer, inst: Instance) -> Resolution:
        """The tag ``writer`` stores at its instance ``inst``."""
        write = writer.write
        if isinstance(writer.site.op, collectives.COLLECTIVE_OPS):
            return collectives.written_tag(self, writer, inst)
        if isinstance(writer.site.op, N.Mma):
            from argus.abstract_interp import mma

            return mma.written_tag(self, writer, inst)
        if write.record is not None:
            at = self.with_logical(inst, writer.view)
            return Resolution(TG.TagValue.record([self.value(at, e) for _, e in write.record]), T.TRUE)
        if not write.sources:
            if write.zero_fill is not None:  # a load's zero fill: a known zero on every element
                zero, why = self.known_zero_tag(inst, write.zero_fill[0])
                return Resolution(zero, T.TRUE, approximations=why)
            return Resolution(TG.BOTTOM, T.TRUE)
        reads = [self.read(inst, src) for src in write.sources]
        lemmas, approx = _merge_deps(reads)
        tag = TG.merge([r.tag for r in reads])
        if len(reads) == 1 and write.zero_fill is None and reads[0].dynamic:
            # a copy of an element several writes in loops may have written last: their cases
            return Resolution(tag, T.TRUE, lemmas, approx, reads[0].branches, True)
        if write.zero_fill is not None:
            src, pred = write.zero_fill
            present = [self.value(inst, g) for g in (src.valid, pred) if g is not None]
            if present:
                zero, why = self.known_zero_tag(inst, src)
                tag = TG.select(T.and_(*present), tag, zero)
                approx = approx + why
        return Resolution(tag, T.TRUE, lemmas, approx)

    def known_zero_tag(self, inst: Instance, src: N.View) -> tuple[TG.TagValue, tuple[str, ...]]:
        """The known zero a zero-filling copy writes for an element of ``src`` outside its
        tensor: it stands for the tag the tensor's tag function gives the element's logical
        coordinate (the interpreter's rule), or for none where no tag function applies.  Where
        the tag function is one the verifier does not follow, its fields are fresh variables."""
        buffer = src.buffer
        if buffer.space is not N.MemorySpace.GLOBAL:
            return TG.TagValue.known_zero(None), ()
        if buffer.name in self.taint:
            fresh = self.havoc_tag(f"{buffer.name}.zero")
            return (TG.TagValue(T.ite(fresh.zero, fresh.length, TG.KNOWN_ZERO), fresh.fields),
                    (self.taint[buffer.name],))
        tags = [w for w in self.writers.get(buffer.name, []) if w.launch and w.write.record is not None]
        if not tags:
            return TG.TagValue.known_zero(None), ()
        writer = tags[-1]  # the tensor's tag function: the last tag op on it (at launch)
        logical = self.logical(inst, src)
        at = Instance(writer.site, {N.COORDS[d]: v for d, v in enumerate(logical)})
        return TG.TagValue.known_zero([self.value(at, e) for _, e in writer.write.record]), ()
