"""Nodes of the tile IR.

The IR is a memory-form SSA with structured control flow:

* **Index symbols** (sympy integer symbols) are the SSA scalars: thread and block ids, loop
  counters, size and scalar parameters, and integers read from index tensors
  (:class:`ReadIndex`).  Each is defined exactly once (by the launch, a :class:`For`, or its
  ``ReadIndex``).  All address, predicate and bound arithmetic is a sympy expression over
  them built with :mod:`argus.symbolic` (``//`` and ``%`` are floor division and modulo).
* **Buffers** hold data: global parameters, shared-memory allocations, per-thread register
  fragments, distributed shared memory of a cluster peer.  A buffer is defined once (by the
  signature or an :class:`Alloc`); operations read and write it through **views**
  (buffer + layout + element offset), so the verifier sees every access as
  ``offset + layout(coordinate)`` and can invert the layout of a write.
* **Operations** carry their source position (the user's ``file:line``; ops inserted by a
  policy also carry the position of the policy's line), their scope (thread, warp,
  warpgroup, block, cluster) and, for single-issuer operations, the predicate electing the
  issuing thread.  Asynchronous operations name an explicit :class:`Handle`; waits name
  the handle they complete.

Nodes are frozen dataclasses; structural ops own their :class:`Region`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import sympy

from argus.errors import SourcePosition

Expr = sympy.Expr  # an index expression (integer-valued)
BoolExpr = sympy.Basic  # a predicate over index symbols


COORDS: tuple[sympy.Symbol, ...] = tuple(
    sympy.Symbol(f"c{i}", integer=True, nonnegative=True) for i in range(8)
)
"""Canonical coordinate symbols: ``c0, c1, ...`` name the coordinates of a view's elements in
its expressions (``offset``, ``coords``, ``valid``) and the logical coordinates that tag
functions and tag predicates are written over."""


THREAD_ID = sympy.Symbol("tid", integer=True, nonnegative=True)
BLOCK_IDS: tuple[sympy.Symbol, ...] = tuple(
    sympy.Symbol(f"bid_{d}", integer=True, nonnegative=True) for d in "xyz"
)
CLUSTER_RANK = sympy.Symbol("cluster_rank", integer=True, nonnegative=True)


class MemorySpace(enum.Enum):
    GLOBAL = "global"
    SHARED = "shared"
    REGISTER = "register"
    DSMEM = "dsmem"  # shared memory of another block of the cluster


class Scope(enum.Enum):
    """Who executes an operation together (the concurrency contract)."""

    THREAD = "thread"
    WARP = "warp"
    WARPGROUP = "warpgroup"
    BLOCK = "block"
    CLUSTER = "cluster"


class HandleKind(enum.Enum):
    CP_ASYNC_GROUP = "cp.async.group"
    MBARRIER_PHASE = "mbarrier.phase"
    WGMMA_GROUP = "wgmma.group"
    TMA_STORE_GROUP = "tma.store.group"


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, eq=False)
class Buffer:
    """A memory object.  Identity is the object itself; ``name`` is unique within a kernel.

    ``size`` is in elements (an int, or an expression over size symbols for global params).
    ``shape``/``layout`` describe the logical tensor for global parameters; allocations
    carry the layout they were allocated with.
    """

    name: str
    space: MemorySpace
    dtype: Any  # argus.ir.dtypes.DType
    size: Any
    layout: Any = None  # argus.layout_algebra.Layout of the whole buffer
    alignment: int = 16  # bytes
    param_index: int | None = None

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class View:
    """``buffer[swizzle(offset + layout(coord))]`` for every coordinate of ``layout``'s domain.

    ``swizzle`` (an XOR swizzle of :mod:`argus.layout_algebra`, or ``None``) applies to the
    whole element address, so tiles and stages of a swizzled buffer keep the buffer's swizzle.

    ``rank`` (distributed shared memory, ``mapa``): the cluster rank of the block whose copy
    of the shared ``buffer`` the view addresses; ``None`` is the executing block's own memory.
    Such a view's :attr:`space` is :attr:`MemorySpace.DSMEM`.

    ``coords`` maps a view coordinate to the coordinate of the underlying logical tensor
    (a tuple of expressions over the view-coordinate symbols ``coord_symbols``); it is what
    tags and bounds predicates are stated against.  ``valid`` is the predicate (over the
    same symbols) of elements that exist, for partial tiles; ``None`` means all exist.
    """

    buffer: Buffer
    layout: Any  # Layout or ComposedLayout
    offset: Any = 0  # index expression, elements
    coord_symbols: tuple[sympy.Symbol, ...] = ()
    coords: tuple[Any, ...] | None = None
    valid: BoolExpr | None = None
    swizzle: Any = None
    rank: Any = None  # index expression: cluster rank of the peer block (DSMEM); None = own block

    @property
    def space(self) -> MemorySpace:
        return MemorySpace.DSMEM if self.rank is not None else self.buffer.space

    @property
    def dtype(self) -> Any:
        return self.buffer.dtype


@dataclass(frozen=True)
class Handle:
    """An asynchronous operation's completion handle (a named, SSA-defined token)."""

    name: str
    kind: HandleKind

    def __repr__(self) -> str:
        return f"!{self.name}"


# --------------------------------------------------------------------------- ops


@dataclass(frozen=True, kw_only=True)
class Op:
    """Base of every operation."""

    loc: SourcePosition | None = None
    inserted_by: SourcePosition | None = None  # the policy line that inserted this op
    scope: Scope = Scope.THREAD
    elected: BoolExpr | None = None  # single-issuer ops: which thread issues

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Region:
    """An ordered list of operations (a structured block)."""

    ops: tuple[Op, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Alloc(Op):
    buffer: Buffer


@dataclass(frozen=True, kw_only=True)
class Copy(Op):
    """Copy ``src`` to ``dst`` element by element (same domain) through an atom.

    ``atom`` names an entry of the atom registry (``"sync"``, ``"cp.async"``, ``"tma.load"``,
    ``"buffer.load"``...).  ``pred`` masks elements (over the view coordinate symbols and the
    index symbols); masked-off elements of a zero-filling atom are written with zero.
    Asynchronous atoms complete through ``handle`` (cp.async group, mbarrier phase).
    """

    src: View
    dst: View
    atom: str = "sync"
    pred: BoolExpr | None = None
    handle: Handle | None = None
    mbarrier: View | None = None
    multicast: Any = None
    l2: str | None = None  # a TMA load's L2 eviction priority (a hint: no effect on what is copied)


@dataclass(frozen=True, kw_only=True)
class Fill(Op):
    """``dst[c] = value`` for every valid element.

    ``tail``: the source view of a following copy (same shape as ``dst``) whose out-of-range
    elements the fill stands for (``load(..., other=0)`` of a partial tile).  With value 0 those
    elements carry a *known zero* fact in the tag state (DESIGN.md, "Tag functions"), together
    with the tag the source's tag function gives their (out-of-range) coordinate.
    """

    dst: View
    value: float | int
    tail: View | None = None


@dataclass(frozen=True, kw_only=True)
class Elementwise(Op):
    """``dst[c] = fn(srcs[0][c], srcs[1][c], ...)``; a source may be a Python scalar."""

    fn: str
    dst: View
    srcs: tuple[View | float | int, ...]


@dataclass(frozen=True, kw_only=True)
class Convert(Op):
    """``dst[c] = round(src[c])`` into ``dst``'s element type (``rounding`` mode, ``satfinite``)."""

    dst: View
    src: View
    rounding: str = "rn"
    satfinite: bool = False


@dataclass(frozen=True, kw_only=True)
class Mma(Op):
    """``d = a @ b + c`` through an MMA atom, on the atom's fragment layouts.

    ``k_fields``: which tag field of an A and of a B element is its ``k`` (the k-agreement
    check); ``None`` means the last field of each.
    """

    atom: str
    a: View
    b: View
    c: View
    d: View
    handle: Handle | None = None
    k_fields: tuple[int, int] | None = None


@dataclass(frozen=True, kw_only=True)
class Reduce(Op):
    """Reduce ``src`` over ``modes`` with ``fn`` (``max``, ``add``) into ``dst``; ``across`` names
    lanes that combine their partial results (a shuffle tree over those lane-id bits)."""

    fn: str
    dst: View
    src: View
    modes: tuple[int, ...]
    across_lanes: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Shuffle(Op):
    """Warp shuffle: ``dst`` of lane l receives ``src`` of lane ``source_lane(l)``."""

    mode: str  # "idx", "xor", "up", "down"
    dst: View
    src: View
    lane: Expr
    width: int = 32


@dataclass(frozen=True, kw_only=True)
class Atomic(Op):
    fn: str  # "add", "max", "min", "exch", "cas"
    dst: View
    src: View
    pred: BoolExpr | None = None


@dataclass(frozen=True, kw_only=True)
class ReadIndex(Op):
    """Define the index symbol ``result`` as the integer at ``src`` (a one-element view)."""

    result: sympy.Symbol
    src: View


@dataclass(frozen=True, kw_only=True)
class Barrier(Op):
    """A block barrier (``id`` 0) or a named barrier with a declared participant count."""

    id: int = 0
    participants: int | None = None  # threads; None = the whole block


@dataclass(frozen=True, kw_only=True)
class ClusterBarrier(Op):
    pass


@dataclass(frozen=True, kw_only=True)
class Fence(Op):
    """``proxy.async`` (generic → async proxy), ``mbarrier_init``, ``acq_rel`` ..."""

    fence: str


@dataclass(frozen=True, kw_only=True)
class MbarrierInit(Op):
    bar: View
    count: int


@dataclass(frozen=True, kw_only=True)
class MbarrierArrive(Op):
    bar: View
    expect_tx: Any = 0  # bytes declared for the current phase
    count: int = 1


@dataclass(frozen=True, kw_only=True)
class MbarrierWait(Op):
    """Wait until the phase of ``bar`` with parity ``parity`` has completed (``try_wait.parity``).

    ``phase``, when known, is the phase number the waiter means (``parity == phase % 2``): the
    interpreter and the verifier then also check that the waiter is at most one phase behind.
    """

    bar: View
    parity: Expr
    phase: Expr | None = None
    handle: Handle | None = None


@dataclass(frozen=True, kw_only=True)
class AsyncCommit(Op):
    """Close the thread's open cp.async / wgmma / TMA-store group as ``handle``."""

    handle: Handle


@dataclass(frozen=True, kw_only=True)
class AsyncWait(Op):
    """Wait until at most ``pending`` groups of kind ``group`` are outstanding (completes ``handles``).

    ``read``: for TMA-store groups, wait only until their shared-memory sources have been read
    (``cp.async.bulk.wait_group.read``); their global writes complete later.
    """

    group: HandleKind
    pending: int
    handles: tuple[Handle, ...] = ()
    read: bool = False


@dataclass(frozen=True, kw_only=True)
class SetMaxNReg(Op):
    registers: int
    increase: bool


@dataclass(frozen=True, kw_only=True)
class Tag(Op):
    """Attach ``record`` (field name → expression over ``view``'s logical coordinates) to ``view``."""

    view: View
    name: str
    fields: tuple[tuple[str, Any], ...]


@dataclass(frozen=True, kw_only=True)
class AssertTag(Op):
    """Every valid element of ``view`` satisfies ``predicate`` over its coordinates and tags.

    ``predicate`` is a sympy boolean over the view coordinate symbols and tag symbols
    ``tag_symbols`` (field name → symbol standing for that field of the element's tag).
    ``equal_to``: for ``assert_tag_eq``, the other view whose tags must be equal elementwise.
    ``zero_symbol``, when the predicate mentions it, stands for 1 at an element that carries a
    known-zero fact (a zero fill of an out-of-range element) and 0 elsewhere; a predicate that does
    not mention it holds at known zeros (whatever it says about their tags).
    """

    view: View
    predicate: BoolExpr | None = None
    tag_symbols: tuple[tuple[str, sympy.Symbol], ...] = ()
    equal_to: View | None = None
    message: str = ""
    zero_symbol: sympy.Symbol | None = None


@dataclass(frozen=True, kw_only=True)
class AssertBankConflicts(Op):
    """Verification only: a warp's access of the shared-memory ``view`` at this point takes at
    most ``max_degree`` passes (bank conflicts; 1 = conflict-free).  Erased after verification."""

    view: View
    max_degree: int


@dataclass(frozen=True, kw_only=True)
class ResetTags(Op):
    view: View


@dataclass(frozen=True, kw_only=True)
class For(Op):
    """``for var in range(start, stop, step): body`` with policies (``pipeline``, ``unroll``)."""

    var: sympy.Symbol
    start: Expr
    stop: Expr
    step: int
    body: Region
    pipeline: int | None = None
    unroll: int | bool | None = None


@dataclass(frozen=True, kw_only=True)
class If(Op):
    cond: BoolExpr
    then: Region
    orelse: Region = field(default_factory=Region)


@dataclass(frozen=True, kw_only=True)
class WarpRole(Op):
    """Warps for which ``cond`` holds run ``body`` (a producer or consumer role)."""

    name: str
    cond: BoolExpr
    body: Region
    registers: int | None = None


# --------------------------------------------------------------------------- kernel


@dataclass(frozen=True)
class Param:
    """A kernel parameter: a global tensor (``buffer``), a scalar index symbol, or a float scalar."""

    name: str
    kind: str  # "tensor", "index", "scalar"
    buffer: Buffer | None = None
    symbol: sympy.Symbol | None = None
    dtype: Any = None


@dataclass(frozen=True)
class Assumption:
    """A declared assumption the verifier may use and the launch (and the interpreter) checks.

    ``kind``:

    * ``"predicate"`` — ``predicate`` over sizes and index parameters (``M % 128 == 0``);
    * ``"aligned"`` — ``tensors[0]``'s base address is a multiple of ``bound[0]`` bytes;
    * ``"no_alias"`` — the memory of ``tensors`` does not overlap;
    * ``"ids_in_range"`` — every element of index tensor ``tensors[0]`` lies in
      ``[bound[0], bound[1])`` (expressions over sizes);
    * ``"monotone"`` — index tensor ``tensors[0]`` is non-decreasing (offsets of segments).
    """

    predicate: BoolExpr
    text: str
    loc: SourcePosition | None = None
    kind: str = "predicate"
    tensors: tuple[str, ...] = ()
    bound: tuple[Any, ...] = ()


@dataclass(frozen=True)
class LaunchConfig:
    threads: int
    grid: tuple[Any, ...]  # expressions over size symbols
    cluster: tuple[int, int, int] = (1, 1, 1)


@dataclass(frozen=True)
class Kernel:
    """One specialization of a kernel: consts bound, body traced."""

    name: str
    params: tuple[Param, ...]
    consts: tuple[tuple[str, Any], ...]
    launch: LaunchConfig
    assumptions: tuple[Assumption, ...]
    body: Region
    loc: SourcePosition | None = None
    thread_id: sympy.Symbol = field(default_factory=lambda: THREAD_ID)
    block_ids: tuple[sympy.Symbol, ...] = field(default_factory=lambda: BLOCK_IDS)


def walk(region: Region):
    """Every op of ``region`` in program order, descending into nested regions."""
    for op in region.ops:
        yield op
        for child in child_regions(op):
            yield from walk(child)


def child_regions(op: Op) -> tuple[Region, ...]:
    match op:
        case For(body=body) | WarpRole(body=body):
            return (body,)
        case If(then=then, orelse=orelse):
            return (then, orelse)
        case _:
            return ()
