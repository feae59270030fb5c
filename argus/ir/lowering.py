"""Target-independent lowering: the decisions every backend shares, made once.

:func:`lower_kernel` turns one kernel specialization (IR after policies) into a
:class:`LoweredKernel`: a tree of :class:`Stmt` in which nothing is left for a backend to
decide that does not depend on its instruction set.

What is decided here
--------------------
* **Registers.**  Every register buffer becomes ``size`` indexed virtual registers
  (:class:`Reg` ``(buffer, index)``).  Register views are resolved element by element to
  constant indices: a fragment indexed by a run-time value is a :class:`LoweringError`
  (DESIGN: fragments are indexed by compile-time constants after unrolling).
* **Accesses.**  For every view access, each element's address (``swizzle(offset +
  layout(c))``, an element index into its buffer) and predicate (``valid(c) ∧ pred(c)``) are
  computed and simplified with the kernel's :class:`Facts`; elements are grouped into
  :class:`MemoryRun` s: contiguous, aligned runs that one vector instruction moves, with the
  predicate they share.  Runs never cross a swizzle's unit and their alignment is proved
  (divisibility of the address, the buffer's base alignment), never assumed.
* **Expressions.**  Index expressions and predicates are simplified by interval and
  divisibility reasoning (ranges of ``tid``, block ids, loop counters; sizes are non-negative
  and below ``2**31``, checked at launch; divisibility and lower bounds from the declared
  assumptions).  Floor ``//`` and ``%`` become the hardware's truncating forms
  (:class:`~argus.symbolic.TruncDiv`, :class:`~argus.symbolic.TruncMod`) only where the
  dividend is proved non-negative and the divisor a positive constant; the rest stay floor.
  :meth:`LoweredKernel.bits` says whether an expression fits 32-bit arithmetic.
* **Uniformity.**  :meth:`LoweredKernel.uniformity` answers for any expression with the one
  analysis of :mod:`argus.ir.uniformity`; every branch and loop carries the uniformity of its
  control (scalar vs vector registers on AMD, uniform branches on NVIDIA).
* **Control.**  Loops stay loops (:class:`Loop`); ``If``, warp roles and single-issuer
  (elected) operations become :class:`Branch` es — consecutive operations elected by the same
  predicate share one branch.  Tags and tag assertions are erased.
* **Shared memory.**  Block-scope allocations get byte offsets in one static arena, each
  aligned to what its uses need (the swizzle repeat, the TMA box alignment, 8 bytes for
  mbarriers).

What is left to a target: instruction selection for each statement, register types and
allocation, the ABI of parameters, waits and fences the hardware needs beyond the IR's.

Example (``vector_add``): the load of ``a`` lowers to one :class:`Transfer` from a width-1
:class:`MemoryRun` of ``%a`` at ``128*bid_x + tid`` into ``Reg('r0', 0)`` under the predicate
``128*bid_x + tid < n`` (the conjunct ``tid < 128`` was decided by the range of ``tid``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import sympy

from argus import symbolic
from argus.errors import ArgusError, SourcePosition
from argus.ir import nodes as N
from argus.ir import uniformity as U
from argus.ir.atoms import copy_atom, mma_atom

__all__ = [
    "Barrier",
    "Branch",
    "Facts",
    "Loop",
    "LoweredKernel",
    "LoweringError",
    "MatrixCopyStmt",
    "MemoryRun",
    "Reg",
    "SharedAllocation",
    "Stmt",
    "TensorCopy",
    "TensorMapSpec",
    "Transfer",
    "lower_kernel",
]

SIZE_LIMIT = 2**31 - 1
"""Every size and index parameter lies in ``[0, SIZE_LIMIT]`` (the runtime checks it at launch)."""

INT32 = (-(2**31), 2**31 - 1)


class LoweringError(ArgusError):
    """The kernel uses something no backend can lower (with the op's source position)."""


# =========================================================================== facts


Interval = tuple[int | None, int | None]  # inclusive bounds; None = unbounded


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul_interval(x: Interval, y: Interval) -> Interval:
    if None in x or None in y:
        # unbounded: only the sign can be kept
        if x[0] is not None and y[0] is not None and x[0] >= 0 and y[0] >= 0:
            return (x[0] * y[0], None)
        return (None, None)
    products = [a * b for a in x for b in y]  # type: ignore[operator]
    return (min(products), max(products))


def _floor_relational(rel: sympy.Basic) -> sympy.Expr | None:
    """``d`` with ``rel ⟺ d > 0`` for an integer relational (None for Eq/Ne)."""
    lhs, rhs = rel.args  # type: ignore[attr-defined]
    match rel:
        case sympy.StrictLessThan():
            return rhs - lhs
        case sympy.LessThan():
            return rhs - lhs + 1
        case sympy.StrictGreaterThan():
            return lhs - rhs
        case sympy.GreaterThan():
            return lhs - rhs + 1
    return None


@dataclass
class Facts:
    """What is known about the index symbols of one kernel: ranges and divisors.

    Ranges are inclusive; a missing symbol is unbounded.  ``divisors[s] = g`` means every
    value of ``s`` is a multiple of ``g``.
    """

    ranges: dict[sympy.Symbol, Interval] = field(default_factory=dict)
    divisors: dict[sympy.Symbol, int] = field(default_factory=dict)

    # ------------------------------------------------------------ intervals
    def interval(self, expr: Any) -> Interval:
        """Inclusive bounds of an integer expression (``None``: unknown on that side)."""
        expr = sympy.sympify(expr)
        if isinstance(expr, sympy.Integer):
            return (int(expr), int(expr))
        if isinstance(expr, sympy.Symbol):
            return self.ranges.get(expr, (None, None))
        if isinstance(expr, sympy.Add):
            lo, hi = 0, 0
            for term in expr.args:
                t = self.interval(term)
                lo, hi = _add(lo, t[0]), _add(hi, t[1])
            return (lo, hi)
        if isinstance(expr, sympy.Mul):
            result: Interval = (1, 1)
            for factor in expr.args:
                result = _mul_interval(result, self.interval(factor))
            return result
        if isinstance(expr, (symbolic.FloorDiv, symbolic.TruncDiv)):
            a, b = expr.args
            if isinstance(b, sympy.Integer) and b > 0:
                lo, hi = self.interval(a)
                if isinstance(expr, symbolic.TruncDiv) and (lo is None or lo < 0):
                    return (None if lo is None else -(abs(lo) // int(b)), None if hi is None else hi // int(b))
                return (None if lo is None else lo // int(b), None if hi is None else hi // int(b))
            return (None, None)
        if isinstance(expr, sympy.Mod):
            a, b = expr.args
            if isinstance(b, sympy.Integer) and b > 0:
                lo, hi = self.interval(a)
                m = int(b)
                if lo is not None and hi is not None and lo // m == hi // m:
                    return (lo - (lo // m) * m, hi - (lo // m) * m)
                return (0, m - 1)
            return (None, None)
        if isinstance(expr, symbolic.TruncMod):
            a, b = expr.args
            if isinstance(b, sympy.Integer) and b > 0:
                lo, _ = self.interval(a)
                return (0, int(b) - 1) if lo is not None and lo >= 0 else (-(int(b) - 1), int(b) - 1)
            return (None, None)
        if isinstance(expr, (symbolic.BitXor, symbolic.BitOr)):
            a, b = (self.interval(x) for x in expr.args)
            if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0 and a[1] is not None \
                    and b[1] is not None:
                top = max(a[1], b[1]).bit_length()
                return (0, (1 << top) - 1)
            return (None, None)
        if isinstance(expr, symbolic.BitAnd):
            a, b = (self.interval(x) for x in expr.args)
            bounds = [iv[1] for iv in (a, b) if iv[0] is not None and iv[0] >= 0 and iv[1] is not None]
            if bounds and all(iv[0] is not None and iv[0] >= 0 for iv in (a, b)):
                return (0, min(bounds))
            return (None, None)
        if isinstance(expr, (sympy.Min, sympy.Max)):
            parts = [self.interval(x) for x in expr.args]
            pick = min if isinstance(expr, sympy.Min) else max
            los = [p[0] for p in parts]
            his = [p[1] for p in parts]
            if isinstance(expr, sympy.Min):
                lo = None if None in los else pick(los)  # type: ignore[type-var]
                known = [h for h in his if h is not None]
                hi = min(known) if known else None
            else:
                hi = None if None in his else pick(his)  # type: ignore[type-var]
                known = [x for x in los if x is not None]
                lo = max(known) if known else None
            return (lo, hi)
        return (None, None)

    def nonnegative(self, expr: Any) -> bool:
        lo, _ = self.interval(expr)
        return lo is not None and lo >= 0

    def bits(self, expr: Any) -> int:
        """32 when every value of ``expr`` (and of each sub-expression) fits int32, else 64."""
        expr = sympy.sympify(expr)
        for sub in sympy.preorder_traversal(expr):
            if isinstance(sub, sympy.Basic) and not isinstance(sub, (sympy.Symbol, sympy.Integer)) \
                    and not sub.is_Boolean and not isinstance(sub, sympy.core.relational.Relational):
                lo, hi = self.interval(sub)
                if lo is None or hi is None or lo < INT32[0] or hi > INT32[1]:
                    return 64
            if isinstance(sub, sympy.Symbol):
                lo, hi = self.interval(sub)
                if lo is None or hi is None or lo < INT32[0] or hi > INT32[1]:
                    return 64
        return 32

    # ------------------------------------------------------------ divisibility
    def divisor(self, expr: Any) -> int:
        """A positive ``g`` proved to divide every value of ``expr`` (0 when ``expr`` is 0)."""
        expr = sympy.sympify(expr)
        if isinstance(expr, sympy.Integer):
            return abs(int(expr))
        if isinstance(expr, sympy.Symbol):
            return self.divisors.get(expr, 1)
        if isinstance(expr, sympy.Add):
            return reduce(math.gcd, (self.divisor(t) for t in expr.args), 0) or 0
        if isinstance(expr, sympy.Mul):
            return reduce(lambda a, b: a * b, (self.divisor(f) for f in expr.args), 1)
        if isinstance(expr, (sympy.Mod, symbolic.TruncMod)):
            a, b = expr.args
            return math.gcd(self.divisor(a), self.divisor(b))
        if isinstance(expr, (symbolic.BitXor, symbolic.BitOr)):
            return _pow2_part(math.gcd(self.divisor(expr.args[0]), self.divisor(expr.args[1])))
        if isinstance(expr, symbolic.BitAnd):
            return _pow2_part(max(self.divisor(expr.args[0]), self.divisor(expr.args[1])))
        return 1

    def aligned(self, expr: Any, multiple: int) -> bool:
        """Is every value of ``expr`` a multiple of ``multiple``?"""
        g = self.divisor(expr)
        return g == 0 or g % multiple == 0

    # ------------------------------------------------------------ decisions
    def decide(self, cond: Any) -> bool | None:
        """Three-valued truth of a predicate from the facts (None: depends on run-time values)."""
        if cond is None or cond is True or cond is sympy.true:
            return True
        if cond is False or cond is sympy.false:
            return False
        if isinstance(cond, sympy.core.relational.Relational):
            d = _floor_relational(cond)
            if d is not None:
                lo, hi = self.interval(sympy.expand(d))
                if lo is not None and lo > 0:
                    return True
                if hi is not None and hi <= 0:
                    return False
                return None
            diff = sympy.expand(cond.lhs - cond.rhs)  # type: ignore[attr-defined]
            lo, hi = self.interval(diff)
            equal = lo == hi == 0
            never = (lo is not None and lo > 0) or (hi is not None and hi < 0)
            if isinstance(cond, sympy.Eq):
                return True if equal else False if never else None
            return False if equal else True if never else None
        return None

    # ------------------------------------------------------------ simplification
    def simplify(self, expr: Any) -> Any:
        """An equal index expression with ``floor(a/b)`` spelled ``FloorDiv``, and ``//``/``%``
        removed where the ranges decide them (``x % m == x`` for ``0 <= x < m``...)."""
        if not isinstance(expr, sympy.Basic):
            return sympy.Integer(expr) if isinstance(expr, int) else expr
        expr = _floors_to_floordiv(expr)
        return self._simplify(expr)

    def _simplify(self, expr: sympy.Basic) -> sympy.Basic:
        if not expr.args or isinstance(expr, sympy.Symbol):
            return expr
        args = [self._simplify(a) for a in expr.args]
        if isinstance(expr, sympy.Mod) or isinstance(expr, symbolic.FloorDiv):
            a, b = args
            if isinstance(b, sympy.Integer) and b > 0:
                lo, hi = self.interval(a)
                m = int(b)
                if lo is not None and hi is not None and lo // m == hi // m:
                    q = lo // m
                    return sympy.expand(a - q * m) if isinstance(expr, sympy.Mod) else sympy.Integer(q)
                if isinstance(expr, sympy.Mod) and isinstance(a, sympy.Mod):
                    inner_a, inner_b = a.args
                    if isinstance(inner_b, sympy.Integer) and int(inner_b) % m == 0:
                        return self._simplify(sympy.Mod(inner_a, b))
            if isinstance(expr, sympy.Mod):
                return symbolic.mod(a, b)
            return symbolic.FloorDiv(a, b)
        try:
            return expr.func(*args)
        except TypeError:
            return expr

    def simplify_predicate(self, pred: Any) -> Any:
        """An equivalent predicate with every conjunct the facts decide replaced by its value."""
        if pred is None or pred is True:
            return sympy.true
        if pred is False:
            return sympy.false
        pred = _floors_to_floordiv(pred)
        return self._simplify_predicate(pred)

    def _simplify_predicate(self, pred: sympy.Basic) -> sympy.Basic:
        if isinstance(pred, sympy.And):
            return sympy.And(*[self._simplify_predicate(a) for a in pred.args])
        if isinstance(pred, sympy.Or):
            return sympy.Or(*[self._simplify_predicate(a) for a in pred.args])
        if isinstance(pred, sympy.Not):
            return sympy.Not(self._simplify_predicate(pred.args[0]))
        if isinstance(pred, sympy.core.relational.Relational):
            lhs = self.simplify(pred.lhs)  # type: ignore[attr-defined]
            rhs = self.simplify(pred.rhs)  # type: ignore[attr-defined]
            rel = pred.func(lhs, rhs)
            if rel is sympy.true or rel is sympy.false:
                return rel
            verdict = self.decide(rel)
            if verdict is not None:
                return sympy.true if verdict else sympy.false
            return rel
        return pred

    def truncating(self, expr: Any) -> Any:
        """``expr`` with each floor ``//`` / ``%`` whose dividend is proved non-negative (and
        divisor a positive constant) rewritten to the truncating ``TruncDiv`` / ``TruncMod``.

        On those operands the two agree; elsewhere floor semantics stay (a backend emits the
        sign correction there).
        """
        if not isinstance(expr, sympy.Basic) or not expr.args:
            return expr
        args = [self.truncating(a) for a in expr.args]
        if isinstance(expr, (symbolic.FloorDiv, sympy.Mod)):
            a, b = args
            if isinstance(b, sympy.Integer) and b > 0 and self.nonnegative(a):
                return (symbolic.TruncDiv if isinstance(expr, symbolic.FloorDiv) else symbolic.TruncMod)(a, b)
            return symbolic.FloorDiv(a, b) if isinstance(expr, symbolic.FloorDiv) else sympy.Mod(a, b)
        try:
            return expr.func(*args)
        except TypeError:
            return expr


def _pow2_part(g: int) -> int:
    return g & -g if g else 0


def _floors_to_floordiv(expr: sympy.Basic) -> sympy.Basic:
    """Rewrite sympy's ``floor(p/q)`` (what Python ``//`` on symbols builds) as ``FloorDiv(p, q)``."""
    if not expr.has(sympy.floor):
        return expr

    def rewrite(node: sympy.Basic) -> sympy.Basic:
        if isinstance(node, sympy.floor):
            inner = node.args[0]
            denominator = 1
            for term in sympy.Add.make_args(sympy.expand(inner)):
                coeff, _ = term.as_coeff_Mul()
                if isinstance(coeff, sympy.Rational):
                    denominator = math.lcm(denominator, int(coeff.q))
            numerator = sympy.expand(inner * denominator)
            return symbolic.FloorDiv(numerator, sympy.Integer(denominator))
        return node

    return expr.replace(lambda n: isinstance(n, sympy.floor), rewrite)


def _assumption_facts(kernel: N.Kernel, facts: Facts) -> None:
    """Divisors and bounds of sizes from ``predicate`` assumptions (``Eq(K % 64, 0)``, ``K >= 64``,
    ``K <= 2**20``)."""
    for a in kernel.assumptions:
        if a.kind != "predicate" or not isinstance(a.predicate, sympy.Basic):
            continue
        for conjunct in sympy.And.make_args(a.predicate):
            if isinstance(conjunct, sympy.Eq):
                lhs, rhs = conjunct.args
                if rhs != 0:
                    lhs, rhs = rhs, lhs
                if rhs == 0 and isinstance(lhs, sympy.Mod) and isinstance(lhs.args[0], sympy.Symbol) \
                        and isinstance(lhs.args[1], sympy.Integer):
                    s, g = lhs.args[0], int(lhs.args[1])
                    facts.divisors[s] = math.lcm(facts.divisors.get(s, 1), g)
            elif isinstance(conjunct, sympy.core.relational.Relational):
                d = _floor_relational(conjunct)
                if d is None:
                    continue
                d = sympy.expand(d)  # d > 0, i.e. d >= 1
                for s in d.free_symbols:
                    coeff = d.coeff(s)
                    rest = sympy.expand(d - coeff * s)
                    if coeff == 1 and isinstance(rest, sympy.Integer) and s in facts.ranges:
                        lo, hi = facts.ranges[s]
                        bound = 1 - int(rest)
                        facts.ranges[s] = (max(lo or 0, bound), hi)
                    elif coeff == -1 and isinstance(rest, sympy.Integer) and s in facts.ranges:  # K <= c
                        lo, hi = facts.ranges[s]
                        bound = int(rest) - 1
                        facts.ranges[s] = (lo, bound if hi is None else min(hi, bound))


# =========================================================================== lowered program


@dataclass(frozen=True)
class Reg:
    """Element ``index`` of register buffer ``buffer`` (one virtual register per element)."""

    buffer: str
    index: int

    def __str__(self) -> str:
        return f"{self.buffer}[{self.index}]"


@dataclass(frozen=True)
class MemoryRun:
    """``width`` consecutive elements of ``buffer`` starting at element index ``address``.

    ``address`` is the final element index (swizzle applied; a run never crosses a swizzle
    unit, so its elements are consecutive after the swizzle too).  ``alignment``: bytes the
    first element's address is proved to be a multiple of, the buffer's base alignment
    included.  ``elements``: the positions of the view's elements (enumeration order) it moves.
    """

    buffer: N.Buffer
    address: Any
    width: int
    alignment: int
    elements: tuple[int, ...]

    @property
    def space(self) -> N.MemorySpace:
        return self.buffer.space

    @property
    def dtype(self) -> Any:
        return self.buffer.dtype

    @property
    def nbytes(self) -> int:
        return self.width * self.buffer.dtype.itemsize


Operand = MemoryRun | tuple[Reg, ...] | float | int


@dataclass(frozen=True)
class Transfer:
    """Move ``width`` elements from ``src`` to ``dst`` when ``predicate`` holds.

    ``src`` is a :class:`MemoryRun`, registers, or a constant (a fill).  ``source_predicate``
    (zero-filling atoms such as ``cp.async``): the source is read when it holds, else zeros
    are written; ``None`` when the atom does not zero-fill.
    """

    src: Operand
    dst: MemoryRun | tuple[Reg, ...]
    predicate: Any = sympy.true
    source_predicate: Any = None

    @property
    def width(self) -> int:
        side = self.dst
        return side.width if isinstance(side, MemoryRun) else len(side)


@dataclass(frozen=True, kw_only=True)
class Stmt:
    """Base of lowered statements: the op it came from (for ``file:line``) and its position."""

    op: N.Op | None = None

    @property
    def loc(self) -> SourcePosition | None:
        return None if self.op is None else self.op.loc


@dataclass(frozen=True, kw_only=True)
class CopyStmt(Stmt):
    """A copy through a per-thread atom (``sync``, ``reg``, ``cp.async*``, ``ldmatrix``...)."""

    atom: str
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True, kw_only=True)
class MatrixCopyStmt(Stmt):
    """``ldmatrix`` / ``stmatrix``: the warp moves ``len(regs) // 2`` 8x8 matrices of 16-bit
    elements between shared memory and the lanes' fragments.  ``address`` (an element index into
    ``buffer``) is the row this lane supplies: row ``lane % 8`` of matrix ``lane // 8`` (modulo
    the matrix count); ``regs`` is the fragment in value order, register ``j`` of the instruction
    packing values ``2j`` (low half) and ``2j + 1``."""

    atom: str
    load: bool
    buffer: N.Buffer
    address: Any
    regs: tuple[Reg, ...]


@dataclass(frozen=True, kw_only=True)
class TensorMapSpec:
    """A host-built tensor map (TMA descriptor) the kernel takes as a parameter.

    ``param``: the global tensor; ``box``: the box extents, innermost first; ``swizzle``:
    a :class:`~argus.layout_algebra.hopper.SwizzleMode`.  The dimensions and strides are the
    tensor's (known at launch).
    """

    param: str
    box: tuple[int, ...]
    swizzle: Any
    dtype: Any


@dataclass(frozen=True, kw_only=True)
class TensorCopy(Stmt):
    """A TMA tensor copy of one box (issued by one thread; its guard is an enclosing Branch).

    ``load``: global → shared completing on ``mbarrier`` (an element index into an mbarrier
    buffer); else shared → global in the thread's bulk group.  ``coords``: the box origin in
    the tensor, innermost dimension first.  ``smem_address``: element index of the box in
    ``smem`` (unswizzled start; the hardware applies ``tensor_map.swizzle``).
    """

    load: bool
    tensor_map: int  # index into LoweredKernel.tensor_maps
    coords: tuple[Any, ...]
    smem: N.Buffer
    smem_address: Any
    nbytes: int
    mbarrier: tuple[N.Buffer, Any] | None = None
    multicast: Any = None  # load: mask of the cluster ranks the box (and its mbarrier signal) reach
    l2: str | None = None  # load: the L2 eviction priority of the box's lines (a cache hint)


@dataclass(frozen=True, kw_only=True)
class FillStmt(Stmt):
    dst: tuple[Reg, ...]
    value: float | int


@dataclass(frozen=True, kw_only=True)
class ElementwiseStmt(Stmt):
    """``dst[i] = fn(srcs[0][i], srcs[1][i], ...)`` on ``dtype``; a source is a register or constant."""

    fn: str
    dtype: Any
    dst: tuple[Reg, ...]
    srcs: tuple[tuple[Reg | float | int, ...], ...]


@dataclass(frozen=True, kw_only=True)
class ConvertStmt(Stmt):
    dst: tuple[Reg, ...]
    src: tuple[Reg, ...]
    src_dtype: Any
    dst_dtype: Any
    rounding: str
    satfinite: bool


@dataclass(frozen=True, kw_only=True)
class SharedOperand:
    """A wgmma operand read from shared memory through a matrix descriptor.

    The descriptor's start is ``buffer`` + ``address`` elements (the unswizzled start of the
    tile); ``descriptor`` holds the mode, major-ness and byte offsets.
    """

    buffer: N.Buffer
    address: Any
    descriptor: Any  # argus.layout_algebra.hopper.WgmmaDescriptor


@dataclass(frozen=True, kw_only=True)
class MmaStmt(Stmt):
    """One MMA atom; register operands are listed in the atom's value order."""

    atom: Any  # MmaAtomSpec
    a: tuple[Reg, ...] | SharedOperand
    b: tuple[Reg, ...] | SharedOperand
    c: tuple[Reg, ...]
    d: tuple[Reg, ...]
    asynchronous: bool  # True when the IR names a handle (completion by an explicit wait)


@dataclass(frozen=True, kw_only=True)
class ReduceStmt(Stmt):
    """``dst[e] = fn over groups[e]`` (left to right), then an xor butterfly over ``across_lanes``."""

    fn: str
    dtype: Any
    dst: tuple[Reg, ...]
    groups: tuple[tuple[Reg, ...], ...]
    across_lanes: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class ShuffleStmt(Stmt):
    mode: str
    dst: tuple[Reg, ...]
    src: tuple[Reg, ...]
    lane: Any
    width: int
    dtype: Any


@dataclass(frozen=True, kw_only=True)
class AtomicStmt(Stmt):
    fn: str
    dst: tuple[MemoryRun, ...]
    src: tuple[Reg, ...]
    predicates: tuple[Any, ...]


@dataclass(frozen=True, kw_only=True)
class ReadIndexStmt(Stmt):
    result: sympy.Symbol
    src: MemoryRun
    predicate: Any


@dataclass(frozen=True, kw_only=True)
class Barrier(Stmt):
    """A block barrier (``id`` 0, all threads) or a named barrier of ``participants`` threads."""

    id: int
    participants: int | None


@dataclass(frozen=True, kw_only=True)
class ClusterBarrierStmt(Stmt):
    pass


@dataclass(frozen=True, kw_only=True)
class FenceStmt(Stmt):
    fence: str


@dataclass(frozen=True, kw_only=True)
class MbarrierInitStmt(Stmt):
    buffer: N.Buffer
    address: Any
    count: int


@dataclass(frozen=True, kw_only=True)
class MbarrierArriveStmt(Stmt):
    buffer: N.Buffer
    address: Any
    expect_tx: Any
    count: int
    rank: Any = None  # the cluster rank of the block whose mbarrier this is (None: the own block)


@dataclass(frozen=True, kw_only=True)
class MbarrierWaitStmt(Stmt):
    buffer: N.Buffer
    address: Any
    parity: Any


@dataclass(frozen=True, kw_only=True)
class AsyncCommitStmt(Stmt):
    group: N.HandleKind


@dataclass(frozen=True, kw_only=True)
class AsyncWaitStmt(Stmt):
    group: N.HandleKind
    pending: int
    read: bool


@dataclass(frozen=True, kw_only=True)
class SetMaxNRegStmt(Stmt):
    registers: int
    increase: bool


@dataclass(frozen=True, kw_only=True)
class Loop(Stmt):
    """``for var in range(start, stop, step)``; ``uniformity`` of its bounds and context."""

    var: sympy.Symbol
    start: Any
    stop: Any
    step: int
    body: tuple[Stmt, ...]
    uniformity: U.Uniformity
    unroll: int | bool | None = None


@dataclass(frozen=True, kw_only=True)
class Branch(Stmt):
    """Run ``then`` where ``cond`` holds, else ``orelse``.

    ``kind``: ``"if"`` (user control flow), ``"warp_role"`` (``registers`` = its budget) or
    ``"elected"`` (the single issuer of the operations in ``then``).
    """

    cond: Any
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    uniformity: U.Uniformity = U.Uniformity.THREAD
    kind: str = "if"
    registers: int | None = None


@dataclass(frozen=True)
class SharedAllocation:
    buffer: N.Buffer
    offset: int  # bytes from the start of the block's shared arena
    nbytes: int
    alignment: int


@dataclass(frozen=True)
class RegisterFile:
    """One register buffer: ``size`` virtual registers of ``dtype``."""

    buffer: N.Buffer

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def dtype(self) -> Any:
        return self.buffer.dtype

    @property
    def size(self) -> int:
        return int(symbolic.static_value(self.buffer.size) or 0)


@dataclass
class LoweredKernel:
    """A kernel with every target-independent decision made (see the module docstring)."""

    kernel: N.Kernel
    target: str
    body: tuple[Stmt, ...]
    facts: Facts
    uniformity_info: U.UniformityInfo
    registers: dict[str, RegisterFile]
    shared: tuple[SharedAllocation, ...]
    shared_bytes: int
    shared_alignment: int
    tensors: tuple[N.Param, ...]
    sizes: tuple[sympy.Symbol, ...]
    scalars: tuple[N.Param, ...]
    tensor_maps: tuple[TensorMapSpec, ...]

    def uniformity(self, expr: Any) -> U.Uniformity:
        return self.uniformity_info.of(expr)

    def bits(self, expr: Any) -> int:
        return self.facts.bits(expr)

    def shared_offset(self, buffer: N.Buffer) -> int:
        for alloc in self.shared:
            if alloc.buffer is buffer or alloc.buffer.name == buffer.name:
                return alloc.offset
        raise LoweringError(f"shared buffer %{buffer.name} has no allocation")

    def walk(self) -> Iterable[Stmt]:
        """Every statement in program order, descending into loops and branches."""
        yield from _walk(self.body)


def _walk(stmts: Sequence[Stmt]) -> Iterable[Stmt]:
    for s in stmts:
        yield s
        if isinstance(s, Loop):
            yield from _walk(s.body)
        elif isinstance(s, Branch):
            yield from _walk(s.then)
            yield from _walk(s.orelse)


# =========================================================================== element access


@dataclass(frozen=True)
class _Element:
    coord: tuple[int, ...]
    linear: Any  # offset + layout(c), simplified (before the swizzle)
    conjuncts: tuple[Any, ...]  # the element's predicate, one entry per template conjunct


def _shape(layout: Any) -> tuple[int, ...]:
    from argus.layout_algebra import Layout

    shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    out = []
    for mode in shape:
        size = symbolic.static_value(Layout(mode).size)
        if size is None:
            raise LoweringError(f"a view of shape {layout.shape} is not static; only static tiles are lowered")
        out.append(int(size))
    return tuple(out)


def _coords(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Row-major enumeration of a shape (the interpreter's element order)."""
    out: list[tuple[int, ...]] = [()]
    for extent in shape:
        out = [(*c, i) for c in out for i in range(extent)]
    return out


def _value_index(coord: tuple[int, ...], shape: tuple[int, ...]) -> int:
    """Column-major linear index of a coordinate: the value index of fragment elements."""
    index, scale = 0, 1
    for c, extent in zip(coord, shape):
        index += c * scale
        scale *= extent
    return index


class _Lowerer:
    def __init__(self, kernel: N.Kernel, target: str) -> None:
        self.kernel = kernel
        self.target = target
        self.info = U.analyze(kernel)
        self.facts = self._facts()
        self.registers: dict[str, RegisterFile] = {}
        self.shared: dict[str, N.Buffer] = {}
        self.shared_alignment: dict[str, int] = {}
        self.tensor_maps: list[TensorMapSpec] = []
        self._element_cache: dict[tuple, list[_Element]] = {}

    # ------------------------------------------------------------ facts
    def _facts(self) -> Facts:
        k = self.kernel
        facts = Facts()
        facts.ranges[k.thread_id] = (0, k.launch.threads - 1)
        for p in k.params:
            if p.kind == "index" and p.symbol is not None:
                facts.ranges[p.symbol] = (0, SIZE_LIMIT)
            if p.kind == "tensor" and p.buffer is not None:
                for s in symbolic.free_symbols(p.buffer.size):
                    facts.ranges[s] = (0, SIZE_LIMIT)
                for s in symbolic.free_symbols(p.buffer.layout.shape if p.buffer.layout is not None else 0):
                    facts.ranges[s] = (0, SIZE_LIMIT)
        _assumption_facts(k, facts)
        for d, sym in enumerate(k.block_ids):
            extent = k.launch.grid[d] if d < len(k.launch.grid) else 1
            _, hi = facts.interval(facts.simplify(extent))
            facts.ranges[sym] = (0, None if hi is None else max(hi - 1, 0))
        cluster = k.launch.cluster
        facts.ranges[N.CLUSTER_RANK] = (0, cluster[0] * cluster[1] * cluster[2] - 1)
        return facts

    # ------------------------------------------------------------ expressions
    def expr(self, e: Any) -> Any:
        """Simplified, with truncating division where proved: what backends emit."""
        return self.facts.truncating(self.facts.simplify(e))

    def pred(self, p: Any) -> Any:
        return self.facts.truncating(self.facts.simplify_predicate(p))

    def error(self, op: N.Op, message: str, hint: str | None = None) -> LoweringError:
        return LoweringError(message, position=op.loc, hint=hint)

    # ------------------------------------------------------------ views
    def elements(self, op: N.Op, view: N.View, pred: Any = None) -> list[_Element]:
        key = (id(view), id(pred))
        cached = self._element_cache.get(key)
        if cached is not None:
            return cached
        shape = _shape(view.layout)
        template = [c for c in sympy.And.make_args(view.valid)] if view.valid is not None else []
        if pred is not None and pred is not True and pred is not sympy.true:
            template += [c for c in sympy.And.make_args(pred) if c not in template]
        template = [_floors_to_floordiv(c) if isinstance(c, sympy.Basic) else c for c in template]
        offset = self.facts.simplify(view.offset)
        out = []
        for coord in _coords(shape):
            value = view.layout(coord if len(coord) != 1 else coord[0])
            linear = self.facts.simplify(sympy.expand(offset + sympy.sympify(value)))
            subs = {s: sympy.Integer(c) for s, c in zip(view.coord_symbols, coord)}
            conjuncts = tuple(self.facts.simplify_predicate(c.xreplace(subs) if isinstance(c, sympy.Basic) else c)
                              for c in template)
            out.append(_Element(coord, linear, conjuncts))
        self._element_cache[key] = out
        return out

    def register_elements(self, op: N.Op, view: N.View) -> list[Reg]:
        """The registers of a register view, in element enumeration order."""
        buffer = view.buffer
        if buffer.space is not N.MemorySpace.REGISTER:
            raise self.error(op, f"%{buffer.name} is not a register buffer")
        self.registers.setdefault(buffer.name, RegisterFile(buffer))
        size = self.registers[buffer.name].size
        regs = []
        for element in self.elements(op, view):
            index = symbolic.static_value(element.linear)
            if index is None:
                raise self.error(op, f"register fragment %{buffer.name} is indexed by the run-time value "
                                 f"{element.linear}",
                                 hint="index register fragments with compile-time constants (unrolled loops)")
            if not 0 <= index < size:
                raise self.error(op, f"register %{buffer.name}[{index}] is outside its {size} elements")
            regs.append(Reg(buffer.name, int(index)))
        return regs

    def value_order(self, op: N.Op, view: N.View) -> tuple[Reg, ...]:
        """A fragment's registers in value order (column-major index of the coordinate)."""
        shape = _shape(view.layout)
        elements = self.elements(op, view)
        regs = self.register_elements(op, view)
        if len(regs) != len(elements):
            raise self.error(op, f"fragment %{view.buffer.name} has masked elements")
        order = sorted(range(len(elements)), key=lambda i: _value_index(elements[i].coord, shape))
        return tuple(regs[i] for i in order)

    def matrix_copy(self, op: N.Copy, spec: Any) -> MatrixCopyStmt:
        """The lane's row address of a ``ldmatrix``/``stmatrix`` tile (matrix ``m`` is the 8x8
        block at block row ``m % (rows / 8)``, block column ``m // (rows / 8)``) and the fragment
        in value order.  The tile's element offsets must be affine in (row, column)."""
        load = spec.matrix.direction == "load"
        smem, frag = (op.src, op.dst) if load else (op.dst, op.src)
        shape = _shape(smem.layout)
        if len(shape) != 2 or shape[0] % 8 or shape[1] % 8:
            raise self.error(op, f"{op.atom}: the shared tile must be rows x columns in multiples of 8, got {shape}")
        linear = {e.coord: e.linear for e in self.elements(op, smem)}
        base = linear[(0, 0)]
        row_stride = self.facts.simplify(linear[(1, 0)] - base)
        column_stride = self.facts.simplify(linear[(0, 1)] - base)
        for (r, c), value in linear.items():
            if self.facts.simplify(value - (base + r * row_stride + c * column_stride)) != 0:
                raise self.error(op, f"{op.atom}: the shared tile's offsets are not affine in (row, column)")
        count = int(op.atom.split(".x")[1].split(".")[0])
        blocks = shape[0] // 8
        lane = symbolic.mod(self.kernel.thread_id, 32)
        matrix = symbolic.mod(symbolic.floordiv(lane, 8), count)
        row = 8 * symbolic.mod(matrix, blocks) + symbolic.mod(lane, 8)
        column = 8 * symbolic.floordiv(matrix, blocks)
        address = self._address(smem, self.facts.simplify(sympy.expand(base + row * row_stride + column * column_stride)))
        regs = self.value_order(op, frag)
        if len(regs) != 2 * count:
            raise self.error(op, f"{op.atom}: the fragment holds {len(regs)} values, the atom moves {2 * count}")
        return MatrixCopyStmt(op=op, atom=op.atom, load=load, buffer=smem.buffer, address=address, regs=regs)

    def _address(self, view: N.View, linear: Any) -> Any:
        address = view.swizzle(linear) if view.swizzle is not None else linear
        return self.expr(address)

    def _base_alignment(self, buffer: N.Buffer) -> int:
        if buffer.space is N.MemorySpace.SHARED:
            return self.shared_alignment.get(buffer.name, buffer.alignment)
        return buffer.alignment

    def _run_alignment(self, view: N.View, linear: Any) -> int:
        """Bytes the element at ``linear`` is proved aligned to (base alignment included)."""
        itemsize = view.buffer.dtype.itemsize
        g = self.facts.divisor(linear)
        elements = _pow2_part(g) if g else 1 << 12
        if view.swizzle is not None and not view.swizzle.is_identity:
            elements = min(elements, 1 << view.swizzle.base)
        return min(elements * itemsize, self._base_alignment(view.buffer))

    # ------------------------------------------------------------ copies
    def copy(self, op: N.Copy) -> CopyStmt | MatrixCopyStmt:
        spec = copy_atom(op.atom)
        if spec.matrix is not None:
            return self.matrix_copy(op, spec)
        src_space, dst_space = op.src.space, op.dst.space
        zero_fill = spec.zero_fill and spec.is_async
        src_pred = op.pred
        dst_pred = None if zero_fill else op.pred
        src = self.elements(op, op.src, src_pred)
        dst = self.elements(op, op.dst, dst_pred)
        if len(src) != len(dst):
            raise self.error(op, f"copy between views of {len(src)} and {len(dst)} elements")
        src_regs = self.register_elements(op, op.src) if src_space is N.MemorySpace.REGISTER else None
        dst_regs = self.register_elements(op, op.dst) if dst_space is N.MemorySpace.REGISTER else None
        if src_regs is not None and dst_regs is not None:
            transfers = []
            for i, (s, d) in enumerate(zip(src, dst)):
                p = self.pred(sympy.And(*s.conjuncts, *d.conjuncts))
                if p is not sympy.false:
                    transfers.append(Transfer((src_regs[i],), (dst_regs[i],), p))
            return CopyStmt(op=op, atom=op.atom, transfers=tuple(transfers))
        widths = self._widths(op, spec)
        memory_views = [(v, e) for v, e in ((op.src, src), (op.dst, dst)) if v.space is not N.MemorySpace.REGISTER]
        _primary_view, primary = memory_views[0]
        order = self._contiguous_order(primary)
        transfers = []
        for segment in order:
            start = 0
            while start < len(segment):
                width = self._chunk(op, segment, start, widths, memory_views, src, dst, zero_fill)
                chunk = segment[start:start + width]
                transfers.append(self._transfer(op, chunk, src, dst, src_regs, dst_regs, zero_fill))
                start += width
        required = [w for w in spec.access_bytes if w]
        if spec.is_async and len(required) == 1:
            bad = [t for t in transfers if t.width * op.dst.dtype.itemsize != required[0]]
            if bad:
                raise self.error(op, f"{op.atom}: an access of {bad[0].width * op.dst.dtype.itemsize} bytes; "
                                 f"the atom moves exactly {required[0]} bytes per thread",
                                 hint="copy runs of contiguous, aligned elements of the atom's width")
        transfers = [t for t in transfers if t.predicate is not sympy.false]
        return CopyStmt(op=op, atom=op.atom, transfers=tuple(transfers))

    def _widths(self, op: N.Copy, spec: Any) -> tuple[int, ...]:
        """Candidate vector widths in bytes, widest first, from the atom's lowering for the target."""
        try:
            lowering = spec.lowering(self.target)
            widths = lowering.vector_bytes or spec.access_bytes
        except ArgusError:
            widths = spec.access_bytes
        return tuple(sorted({int(w) for w in widths if w and (w & (w - 1)) == 0}, reverse=True)) or (
            op.dst.dtype.itemsize,)

    def _contiguous_order(self, elements: list[_Element]) -> list[list[int]]:
        """Maximal segments of element positions whose linear addresses are consecutive."""
        base = elements[0].linear
        keyed = []
        for i, e in enumerate(elements):
            delta = sympy.expand(e.linear - base)
            const, rest = delta.as_coeff_Add() if isinstance(delta, sympy.Expr) else (delta, 0)
            keyed.append((sympy.srepr(rest), int(const) if isinstance(const, sympy.Integer) else 0, i))
        keyed.sort()
        segments: list[list[int]] = []
        previous = None
        for rest, const, i in keyed:
            if previous is not None and previous[0] == rest and previous[1] + 1 == const:
                segments[-1].append(i)
            else:
                segments.append([i])
            previous = (rest, const)
        return segments

    def _chunk(self, op: N.Copy, segment: list[int], start: int, widths: tuple[int, ...],
               memory_views: list, src: list[_Element], dst: list[_Element], zero_fill: bool) -> int:
        itemsize = op.dst.dtype.itemsize
        remaining = len(segment) - start
        for nbytes in widths:
            if nbytes % itemsize:
                continue
            width = nbytes // itemsize
            if width > remaining or width < 1:
                continue
            chunk = segment[start:start + width]
            if width > 1 and not self._chunk_ok(chunk, memory_views, src, dst, zero_fill):
                continue
            if width > 1 or nbytes == itemsize:
                return width
        return 1

    def _chunk_ok(self, chunk: list[int], memory_views: list, src: list[_Element], dst: list[_Element],
                  zero_fill: bool) -> bool:
        width = len(chunk)
        for view, elements in memory_views:
            first = elements[chunk[0]].linear
            for j, i in enumerate(chunk):
                if sympy.expand(elements[i].linear - first) != j:
                    return False
            if self._run_alignment(view, first) < width * view.buffer.dtype.itemsize:
                return False
        sides = [src, dst] if not zero_fill else [dst]
        for elements in sides:
            if not _uniform_conjuncts(self.facts, [elements[i].conjuncts for i in chunk]):
                return False
        if zero_fill and not _uniform_conjuncts(self.facts, [src[i].conjuncts for i in chunk]):
            return False
        return True

    def _transfer(self, op: N.Copy, chunk: list[int], src: list[_Element], dst: list[_Element],
                  src_regs: list[Reg] | None, dst_regs: list[Reg] | None, zero_fill: bool) -> Transfer:
        def side(view: N.View, elements: list[_Element], regs: list[Reg] | None) -> Any:
            if regs is not None:
                return tuple(regs[i] for i in chunk)
            first = elements[chunk[0]].linear
            return MemoryRun(view.buffer, self._address(view, first), len(chunk),
                             self._run_alignment(view, first), tuple(chunk))

        s = side(op.src, src, src_regs)
        d = side(op.dst, dst, dst_regs)
        first = chunk[0]
        if zero_fill:
            return Transfer(s, d, self.pred(sympy.And(*dst[first].conjuncts)),
                            self.pred(sympy.And(*src[first].conjuncts)))
        return Transfer(s, d, self.pred(sympy.And(*src[first].conjuncts, *dst[first].conjuncts)))

    # ------------------------------------------------------------ TMA
    def tensor_copy(self, op: N.Copy) -> TensorCopy:
        from argus.layout_algebra.hopper import SwizzleMode, tma_transaction_bytes

        load = op.atom == "tma.load"
        glob, smem = (op.src, op.dst) if load else (op.dst, op.src)
        buffer = glob.buffer
        param = next((p for p in self.kernel.params if p.buffer is buffer), None)
        if param is None:
            raise self.error(op, f"a TMA copy of %{buffer.name}, which is not a tensor parameter")
        shape = _shape(glob.layout)
        coords = glob.coords if glob.coords is not None else glob.coord_symbols
        zero = {s: sympy.Integer(0) for s in glob.coord_symbols}
        origin = [self.facts.simplify(sympy.sympify(c).xreplace(zero)) for c in coords]
        tensor_layout = buffer.layout
        tensor_shape = tensor_layout.shape if isinstance(tensor_layout.shape, tuple) else (tensor_layout.shape,)
        if len(origin) != len(tensor_shape) or len(shape) != len(tensor_shape):
            raise self.error(op, "a TMA box must have the rank of its tensor")
        strides = glob.layout.stride if isinstance(glob.layout.stride, tuple) else (glob.layout.stride,)
        tensor_strides = tensor_layout.stride if isinstance(tensor_layout.stride, tuple) else (tensor_layout.stride,)
        if any(sympy.expand(sympy.sympify(a) - sympy.sympify(b)) != 0 for a, b in zip(strides, tensor_strides)):
            raise self.error(op, f"the TMA box {glob.layout} does not have the strides of its tensor {tensor_layout}")
        base = tensor_layout(tuple(origin) if len(origin) != 1 else origin[0])
        if sympy.expand(self.facts.simplify(sympy.sympify(glob.offset)) - sympy.sympify(base)) != 0:
            raise self.error(op, f"the TMA box offset {glob.offset} is not the tensor element at {tuple(origin)}")
        # the predicate must be exactly "inside the tensor": what TMA's bounds handling does
        bounds = {sympy.StrictLessThan(sympy.sympify(c), sympy.sympify(extent))
                  for c, extent in zip(coords, tensor_shape)}
        conds = set()
        for p in (glob.valid, op.pred):
            if p is not None and p is not sympy.true:
                conds |= set(sympy.And.make_args(p))
        extra = {c for c in conds if c not in bounds and self.facts.decide(c) is not True}
        if extra:
            raise self.error(op, f"the TMA copy is masked by {sympy.And(*extra)}, which is not the tensor's bounds",
                             hint="TMA masks exactly the elements outside the tensor; mask other elements otherwise")
        itemsize = buffer.dtype.itemsize
        mode = SwizzleMode.INTERLEAVE
        if smem.swizzle is not None and not smem.swizzle.is_identity:
            mode = next((m for m in SwizzleMode if m is not SwizzleMode.INTERLEAVE
                         and m.element_swizzle(itemsize) == smem.swizzle), None)
            if mode is None:
                raise self.error(op, f"shared swizzle {smem.swizzle} is not a TMA swizzle mode")
        box = tuple(reversed(shape))
        spec = TensorMapSpec(param=param.name, box=box, swizzle=mode, dtype=buffer.dtype)
        if spec not in self.tensor_maps:
            self.tensor_maps.append(spec)
        self._need_alignment(smem.buffer, max(128, mode.repeat_bytes if mode is not SwizzleMode.INTERLEAVE else 128))
        mbarrier = None
        if load:
            if op.mbarrier is None:
                raise self.error(op, "a tma.load without an mbarrier")
            mbarrier = (op.mbarrier.buffer, self.expr(op.mbarrier.offset))
        return TensorCopy(op=op, load=load, tensor_map=self.tensor_maps.index(spec),
                          coords=tuple(self.expr(c) for c in reversed(origin)), smem=smem.buffer,
                          smem_address=self.expr(smem.offset), nbytes=tma_transaction_bytes(box, itemsize),
                          mbarrier=mbarrier,
                          multicast=self.expr(op.multicast) if load and op.multicast is not None else None,
                          l2=op.l2 if load else None)

    def _need_alignment(self, buffer: N.Buffer, alignment: int) -> None:
        self.shared_alignment[buffer.name] = max(self.shared_alignment.get(buffer.name, buffer.alignment), alignment)

    # ------------------------------------------------------------ MMA
    def mma(self, op: N.Mma) -> MmaStmt:
        from argus.layout_algebra import ComposedLayout, LayoutError, wgmma_descriptor

        spec = mma_atom(op.atom)
        operands: dict[str, Any] = {}
        for which, view in (("a", op.a), ("b", op.b)):
            if spec.source(which) == "shared":
                layout = view.layout
                if view.swizzle is not None:
                    layout = ComposedLayout(view.swizzle, 0, layout)
                try:
                    descriptor = wgmma_descriptor(layout, view.dtype.itemsize, units="elements")
                except LayoutError as err:
                    raise self.error(op, f"{spec.name}: operand {which} has no wgmma descriptor: {err.message}") from None
                if descriptor.mode.value > 16:
                    self._need_alignment(view.buffer, descriptor.mode.repeat_bytes)
                operands[which] = SharedOperand(buffer=view.buffer, address=self.expr(view.offset),
                                                descriptor=descriptor)
            else:
                operands[which] = self.value_order(op, view)
        c = self.value_order(op, op.c)
        d = self.value_order(op, op.d)
        return MmaStmt(op=op, atom=spec, a=operands["a"], b=operands["b"], c=c, d=d,
                       asynchronous=op.handle is not None)

    # ------------------------------------------------------------ reductions, shuffles
    def reduce(self, op: N.Reduce) -> ReduceStmt:
        src_shape = _shape(op.src.layout)
        src = self.register_elements(op, op.src)
        dst = self.register_elements(op, op.dst)
        coords = _coords(src_shape)
        kept = [d for d in range(len(src_shape)) if d not in op.modes]
        dst_shape = _shape(op.dst.layout)
        dst_extents = [dst_shape[i] for i in range(len(kept))] if kept else []
        groups: dict[int, list[Reg]] = {}
        for position, coord in enumerate(coords):
            target = 0
            for d, src_d in enumerate(kept):
                target = target * dst_extents[d] + coord[src_d]
            groups.setdefault(target, []).append(src[position])
        ordered = tuple(tuple(groups[t]) for t in sorted(groups))
        if len(ordered) != len(dst):
            raise self.error(op, "reduce: the destination does not have one element per reduced group")
        return ReduceStmt(op=op, fn=op.fn, dtype=op.src.dtype, dst=tuple(dst), groups=ordered,
                          across_lanes=tuple(int(m) for m in op.across_lanes))

    def shuffle(self, op: N.Shuffle) -> ShuffleStmt:
        return ShuffleStmt(op=op, mode=op.mode, dst=self.value_order(op, op.dst), src=self.value_order(op, op.src),
                           lane=self.expr(op.lane), width=op.width, dtype=op.src.dtype)

    # ------------------------------------------------------------ statements
    def region(self, region: N.Region) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for op in region.ops:
            lowered = self.op(op)
            if lowered is None:
                continue
            if op.elected is not None:
                cond = self.pred(op.elected)
                if cond is sympy.false:
                    continue
                if cond is not sympy.true:
                    previous = out[-1] if out else None
                    if isinstance(previous, Branch) and previous.kind == "elected" and previous.cond == cond:
                        out[-1] = Branch(op=previous.op, cond=cond, then=(*previous.then, *lowered),
                                         uniformity=previous.uniformity, kind="elected")
                        continue
                    level = max(self.info.context(op), self.info.of(op.elected))
                    out.append(Branch(op=op, cond=cond, then=tuple(lowered), uniformity=level, kind="elected"))
                    continue
            out.extend(lowered)
        return tuple(out)

    def op(self, op: N.Op) -> list[Stmt] | None:
        match op:
            case N.Tag() | N.AssertTag() | N.ResetTags() | N.AssertBankConflicts():
                return None  # erased: tags and assertions cost nothing at run time
            case N.Alloc(buffer=buffer):
                if buffer.space is N.MemorySpace.REGISTER:
                    self.registers.setdefault(buffer.name, RegisterFile(buffer))
                elif buffer.space is N.MemorySpace.SHARED:
                    self.shared.setdefault(buffer.name, buffer)
                    if buffer.dtype.bits == 64:
                        self._need_alignment(buffer, 8)
                else:
                    raise self.error(op, f"allocation in {buffer.space.value} memory is not lowered")
                return None
            case N.Copy() if op.atom in ("tma.load", "tma.store"):
                return [self.tensor_copy(op)]
            case N.Copy():
                return [self.copy(op)]
            case N.Fill(dst=dst, value=value):
                if dst.space is not N.MemorySpace.REGISTER:
                    raise self.error(op, "fill of memory: fill registers and copy them")
                return [FillStmt(op=op, dst=tuple(self.register_elements(op, dst)), value=value)]
            case N.Elementwise():
                dst_elements = self.elements(op, op.dst)
                dst = self.register_elements(op, op.dst)
                if len(dst) != len(dst_elements):
                    raise self.error(op, "elementwise on a partially valid register view")
                srcs = []
                for s in op.srcs:
                    if isinstance(s, N.View):
                        regs = self.register_elements(op, s)
                        if len(regs) != len(dst):
                            raise self.error(op, "elementwise operands of different sizes")
                        srcs.append(tuple(regs))
                    else:
                        srcs.append(tuple(s for _ in dst))
                per_element = tuple(tuple(src[i] for src in srcs) for i in range(len(dst)))
                return [ElementwiseStmt(op=op, fn=op.fn, dtype=op.dst.dtype, dst=tuple(dst), srcs=per_element)]
            case N.Convert():
                dst = self.register_elements(op, op.dst)
                src = self.register_elements(op, op.src)
                if len(dst) != len(src):
                    raise self.error(op, "convert between views of different sizes")
                return [ConvertStmt(op=op, dst=tuple(dst), src=tuple(src), src_dtype=op.src.dtype,
                                    dst_dtype=op.dst.dtype, rounding=op.rounding, satfinite=op.satfinite)]
            case N.Mma():
                return [self.mma(op)]
            case N.Reduce():
                return [self.reduce(op)]
            case N.Shuffle():
                return [self.shuffle(op)]
            case N.Atomic():
                elements = self.elements(op, op.dst, op.pred)
                src = self.register_elements(op, op.src)
                runs = tuple(MemoryRun(op.dst.buffer, self._address(op.dst, e.linear), 1,
                                       self._run_alignment(op.dst, e.linear), (i,)) for i, e in enumerate(elements))
                preds = tuple(self.pred(sympy.And(*e.conjuncts)) for e in elements)
                return [AtomicStmt(op=op, fn=op.fn, dst=runs, src=tuple(src), predicates=preds)]
            case N.ReadIndex(result=result, src=src):
                (element,) = self.elements(op, src)
                run = MemoryRun(src.buffer, self._address(src, element.linear), 1,
                                self._run_alignment(src, element.linear), (0,))
                return [ReadIndexStmt(op=op, result=result, src=run, predicate=self.pred(sympy.And(*element.conjuncts)))]
            case N.Barrier(id=bid, participants=participants):
                return [Barrier(op=op, id=bid, participants=participants)]
            case N.ClusterBarrier():
                return [ClusterBarrierStmt(op=op)]
            case N.Fence(fence=fence):
                return [FenceStmt(op=op, fence=fence)]
            case N.MbarrierInit(bar=bar, count=count):
                self._need_alignment(bar.buffer, 8)
                return [MbarrierInitStmt(op=op, buffer=bar.buffer, address=self.expr(bar.offset), count=count)]
            case N.MbarrierArrive(bar=bar, expect_tx=tx, count=count):
                rank = self.expr(bar.rank) if bar.rank is not None else None
                if rank is not None and tx != 0:
                    raise self.error(op, "an expect-tx arrival on a peer block's mbarrier",
                                     hint="each block arms its own barrier for the bytes it receives")
                return [MbarrierArriveStmt(op=op, buffer=bar.buffer, address=self.expr(bar.offset),
                                           expect_tx=self.expr(tx), count=count, rank=rank)]
            case N.MbarrierWait(bar=bar, parity=parity):
                return [MbarrierWaitStmt(op=op, buffer=bar.buffer, address=self.expr(bar.offset),
                                         parity=self.expr(parity))]
            case N.AsyncCommit(handle=handle):
                return [AsyncCommitStmt(op=op, group=handle.kind)]
            case N.AsyncWait(group=group, pending=pending, read=read):
                return [AsyncWaitStmt(op=op, group=group, pending=pending, read=read)]
            case N.SetMaxNReg(registers=registers, increase=increase):
                return [SetMaxNRegStmt(op=op, registers=registers, increase=increase)]
            case N.For(var=var, start=start, stop=stop, step=step, body=body):
                lo, _ = self.facts.interval(self.facts.simplify(start))
                _, hi = self.facts.interval(self.facts.simplify(stop))
                self.facts.ranges[var] = (lo, None if hi is None else hi - 1)
                if step > 1:
                    g = math.gcd(self.facts.divisor(self.facts.simplify(start)), step)
                    if g > 1:
                        self.facts.divisors[var] = g
                inner = self.region(body)
                level = max(self.info.context(op), self.info.symbols.get(var, U.Uniformity.BLOCK))
                return [Loop(op=op, var=var, start=self.expr(start), stop=self.expr(stop), step=step, body=inner,
                             uniformity=level, unroll=op.unroll)]
            case N.If(cond=cond, then=then, orelse=orelse):
                c = self.pred(cond)
                if c is sympy.true:
                    return list(self.region(then))
                if c is sympy.false:
                    return list(self.region(orelse))
                level = max(self.info.context(op), self.info.of(cond))
                then_body, else_body = self.region(then), self.region(orelse)
                if not then_body and not else_body:
                    return None  # e.g. a branch that only held tag assertions
                return [Branch(op=op, cond=c, then=then_body, orelse=else_body, uniformity=level)]
            case N.WarpRole(cond=cond, body=body, registers=registers):
                level = max(self.info.context(op), self.info.of(cond))
                return [Branch(op=op, cond=self.pred(cond), then=self.region(body), uniformity=level,
                               kind="warp_role", registers=registers)]
        raise self.error(op, f"operation {op.kind} has no lowering")

    # ------------------------------------------------------------ arena
    def arena(self) -> tuple[tuple[SharedAllocation, ...], int, int]:
        allocations, offset, top = [], 0, 16
        for name, buffer in self.shared.items():
            size = symbolic.static_value(buffer.size)
            if size is None:
                raise LoweringError(f"shared buffer %{name} has a run-time size {buffer.size}")
            alignment = max(16, self.shared_alignment.get(name, buffer.alignment))
            offset = -(-offset // alignment) * alignment
            nbytes = int(size) * buffer.dtype.itemsize
            allocations.append(SharedAllocation(buffer, offset, nbytes, alignment))
            offset += nbytes
            top = max(top, alignment)
        return tuple(allocations), offset, top


def _uniform_conjuncts(facts: Facts, rows: list[tuple[Any, ...]]) -> bool:
    """Do the predicates of a run (one tuple of conjuncts per element) hold for all or none of it?

    Conjunct ``k`` agrees when it is the same expression everywhere, or when it reads
    ``d_j > 0`` with ``d_j = d_0 - δ_j``, ``0 <= δ_j < g`` and ``g`` dividing ``d_0``: then
    ``d_0 > 0 ⟺ d_0 >= g ⟺ d_j > 0`` (the usual ``offset + lane < n`` mask over an aligned run
    with ``n`` a multiple of the run's width).
    """
    first = rows[0]
    for k, c0 in enumerate(first):
        if all(row[k] == c0 for row in rows[1:]):
            continue
        if not isinstance(c0, sympy.core.relational.Relational):
            return False
        d0 = _floor_relational(c0)
        if d0 is None:
            return False
        d0 = sympy.expand(d0)
        shifts = []
        for row in rows[1:]:
            c = row[k]
            if not isinstance(c, sympy.core.relational.Relational) or _floor_relational(c) is None:
                return False
            delta = sympy.expand(d0 - _floor_relational(c))
            if not isinstance(delta, sympy.Integer) or delta < 0:
                return False
            shifts.append(int(delta))
        g = facts.divisor(d0)
        if g and max(shifts) >= g:
            return False
    return True


# =========================================================================== entry point


def lower_kernel(kernel: N.Kernel, target: str = "sm_90a") -> LoweredKernel:
    """Make every target-independent lowering decision for one specialization (IR after policies)."""
    lowerer = _Lowerer(kernel, target)
    body = lowerer.region(kernel.body)
    shared, shared_bytes, shared_alignment = lowerer.arena()
    tensors = tuple(p for p in kernel.params if p.kind == "tensor")
    scalars = tuple(p for p in kernel.params if p.kind == "scalar")
    sizes: list[sympy.Symbol] = []
    for p in kernel.params:
        if p.kind == "index" and p.symbol is not None and p.symbol not in sizes:
            sizes.append(p.symbol)
    for p in tensors:
        layout = p.buffer.layout if p.buffer is not None else None
        found = symbolic.free_symbols(p.buffer.size) if p.buffer is not None else frozenset()
        if layout is not None:
            shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
            ordered = [s for dim in shape for s in sorted(symbolic.free_symbols(dim), key=lambda x: x.name)]
            found = list(dict.fromkeys(ordered + sorted(found, key=lambda x: x.name)))
        for s in found:
            if s not in sizes:
                sizes.append(s)
    return LoweredKernel(kernel=kernel, target=target, body=body, facts=lowerer.facts,
                         uniformity_info=lowerer.info, registers=lowerer.registers, shared=shared,
                         shared_bytes=shared_bytes, shared_alignment=shared_alignment, tensors=tensors,
                         sizes=tuple(sizes), scalars=scalars, tensor_maps=tuple(lowerer.tensor_maps))
