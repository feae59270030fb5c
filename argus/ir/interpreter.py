"""The reference interpreter: the ground truth of what every IR operation means.

Execution model
---------------
* Clusters run one after another (a launch without clusters has clusters of one block).  The
  blocks of a cluster run together: each warp of each block is a Python generator that
  executes the op tree with its 32 lanes vectorized in numpy (an active-lane mask handles
  divergence).  A cooperative scheduler runs the warps round-robin and switches at blocking
  operations (barriers, cluster barriers, mbarrier waits); when every unfinished warp is
  blocked and no barrier can release, it reports a deadlock.  Blocks of a cluster reach each
  other's shared memory through views with a ``rank`` (distributed shared memory), arrive on
  each other's mbarriers and receive TMA multicasts; one set of vector clocks covers the
  cluster.
* Values are stored exactly: floating-point buffers hold float64 numbers that are exactly
  representable in the buffer's element type (every write rounds through
  :mod:`argus.ir.numerics`); integer buffers hold int64.
* Index expressions (sympy, over ``tid``, block ids, loop counters, sizes) are compiled once
  per expression to numpy functions and evaluated for all lanes and elements at once.

Dynamic checks, each reported as an :class:`InterpreterError` with the block, thread, element
and program point: out-of-bounds accesses, reads of never-written registers or shared memory,
shared-memory races (a conflicting pair of accesses by different threads that no barrier, mbarrier
phase or async-group wait orders — happens-before is tracked with vector clocks in
:mod:`argus.ir.happens_before`, not inferred from values),
global-memory write conflicts between blocks, barriers reached by only part of a block (or of a
cluster), deadlock, violated tag assertions, and for clusters: races on distributed shared
memory, multicast bytes a receiving block's barrier was not armed for, uses of a peer's
mbarrier before its initialization is ordered, and a block exiting while a peer's access to its
shared memory or mbarriers is not ordered before the exit.  Tags are tracked on concrete elements as records of
integers (``None`` is ⊥, untagged).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from argus import symbolic
from argus.errors import ArgusError, SourcePosition
from argus.ir import nodes as N
from argus.ir.happens_before import HappensBefore

WARP = 32
MAX_TAG_FIELDS = 8
_UNTAGGED = -1
# tag_count of an element zero-filled because it was out of range (or predicated off) in a copy
# (TMA, cp.async, load(..., other=0)): a *known zero*.  ``_KNOWN_ZERO - n`` (n >= 1) is a known
# zero whose fields hold the n-field tag its source coordinate would have had (the tag function
# of the source tensor, evaluated out of range): tag assertions are checked against that tag
# (a known zero in the wrong place still fails), and an MMA product with a known-zero operand
# contributes nothing (argus.ir.interp_mma).  ``_KNOWN_ZERO`` itself: no tag function applies.
_KNOWN_ZERO = -2


def known_zero_tags(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(is a known zero, field count of the tag it stands for)`` of tag counts (-1: none)."""
    zero = counts <= _KNOWN_ZERO
    return zero, np.where(zero, np.where(counts < _KNOWN_ZERO, _KNOWN_ZERO - counts, _UNTAGGED), counts)

# --------------------------------------------------------------------------- errors


@dataclass
class Violation:
    """One dynamic check that failed, with where and for whom."""

    kind: str  # "out-of-bounds", "uninitialized", "race", "barrier", "deadlock", "tag", "write-conflict", "cluster", ...
    message: str
    block: tuple[int, ...] | None = None
    thread: int | None = None
    other_thread: int | None = None
    element: tuple[int, ...] | None = None
    other_block: tuple[int, ...] | None = None  # the other thread's block, when it is a cluster peer
    position: SourcePosition | None = None
    op: str | None = None

    def __str__(self) -> str:
        parts = [f"{self.kind}: {self.message}"]
        if self.block is not None:
            parts.append(f"block {self.block}")
        if self.thread is not None:
            parts.append(f"thread {self.thread}")
        if self.other_thread is not None:
            parts.append(f"other thread {self.other_thread}"
                         + (f" of block {self.other_block}" if self.other_block is not None else ""))
        if self.element is not None:
            parts.append(f"element {self.element}")
        if self.op is not None:
            parts.append(f"op {self.op}")
        return ", ".join(parts)


class InterpreterError(ArgusError):
    """A dynamic check failed while interpreting a kernel."""

    def __init__(self, violation: Violation) -> None:
        self.violation = violation
        super().__init__(str(violation), position=violation.position)


# --------------------------------------------------------------------------- expressions

class _Broadcasting:
    """``logical_and``/``logical_or`` whose ``reduce`` broadcasts operands of different shapes
    (a lane predicate [lanes, 1] with an element predicate [lanes, n])."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def reduce(self, operands: Any) -> Any:
        result = operands[0]
        for operand in operands[1:]:
            result = self.fn(result, operand)
        return result


_NUMPY_FUNCTIONS = {
    "logical_and": _Broadcasting(np.logical_and),
    "logical_or": _Broadcasting(np.logical_or),
    "FloorDiv": lambda a, b: np.floor_divide(a, b),
    "Mod": lambda a, b: np.mod(a, b),
    "TruncDiv": lambda a, b: np.trunc(np.divide(a, b)).astype(np.int64),
    "TruncMod": lambda a, b: np.fmod(a, b),
    "BitXor": lambda a, b: np.bitwise_xor(np.asarray(a, np.int64), np.asarray(b, np.int64)),
    "BitAnd": lambda a, b: np.bitwise_and(np.asarray(a, np.int64), np.asarray(b, np.int64)),
    "BitOr": lambda a, b: np.bitwise_or(np.asarray(a, np.int64), np.asarray(b, np.int64)),
    "floor": np.floor,
}


class _Compiled:
    """A sympy expression compiled to a numpy function of named symbols."""

    def __init__(self, expr: Any) -> None:
        self.expr = expr
        if isinstance(expr, sympy.Basic):
            self.symbols = sorted(expr.free_symbols, key=lambda s: s.name)
            self.fn = sympy.lambdify(self.symbols, expr, modules=[_NUMPY_FUNCTIONS, "numpy"])
        else:
            self.symbols = []
            self.fn = None

    def __call__(self, env: dict[sympy.Symbol, Any]) -> Any:
        if self.fn is None:
            return self.expr
        try:
            args = [env[s] for s in self.symbols]
        except KeyError as err:
            raise ArgusError(f"interpreter: symbol {err.args[0]} has no value here (used outside its scope?)") from None
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.fn(*args)


class _ExprCache:
    def __init__(self) -> None:
        self.cache: dict[Any, _Compiled] = {}

    def get(self, expr: Any) -> _Compiled:
        key = expr if isinstance(expr, (sympy.Basic, int, float, bool)) else id(expr)
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self.cache[key] = _Compiled(expr)
        return compiled


# --------------------------------------------------------------------------- memory


def _is_float(dtype: Any) -> bool:
    return bool(getattr(dtype, "is_float", False))


@dataclass
class Memory:
    """One buffer's contents plus its shadow state."""

    buffer: N.Buffer
    values: np.ndarray
    written: np.ndarray
    tag_fields: np.ndarray  # int64 [size, MAX_TAG_FIELDS]
    tag_count: np.ndarray  # int64 [size]; -1 = untagged
    tag_names: np.ndarray  # object [size]
    # barrier-epoch shadow state that atomics (interp_mma) are checked against; every other
    # ordering question is answered by the vector clocks of argus.ir.happens_before
    last_writer: np.ndarray | None = None
    write_epoch: np.ndarray | None = None
    readers_epoch: np.ndarray | None = None
    reader: np.ndarray | None = None

    @staticmethod
    def create(buffer: N.Buffer, size: int, values: np.ndarray | None = None, per_thread: int = 0) -> Memory:
        shape = (per_thread, size) if per_thread else (size,)
        dtype = np.float64 if _is_float(buffer.dtype) else np.int64
        if values is None:
            vals = np.zeros(shape, dtype)
            written = np.zeros(shape, bool)
        else:
            vals = np.asarray(values, dtype).reshape(shape).copy()
            written = np.ones(shape, bool)
        mem = Memory(
            buffer, vals, written,
            np.zeros((*shape, MAX_TAG_FIELDS), np.int64),
            np.full(shape, _UNTAGGED, np.int64),
            np.full(shape, None, object),
        )
        if not per_thread:
            mem.last_writer = np.full(shape, -1, np.int64)
            mem.write_epoch = np.full(shape, -1, np.int64)
            mem.readers_epoch = np.full(shape, -1, np.int64)
            mem.reader = np.full(shape, -1, np.int64)
        return mem


@dataclass
class LaunchState:
    """What one launch needs: sizes, global memories, the grid."""

    sizes: dict[sympy.Symbol, int]
    globals: dict[str, Memory]
    grid: tuple[int, ...]
    global_writer_block: dict[str, np.ndarray] = field(default_factory=dict)
    tagged: set[int] = field(default_factory=set)
    tag_functions: dict[str, N.Tag] = field(default_factory=dict)  # global tensor -> its tag


# --------------------------------------------------------------------------- interpreter

HANDLERS: dict[type, Any] = {}
"""Op type -> ``handler(block_run, op, env, mask, lanes)`` for ops implemented in other modules
(asynchronous copies and barriers, MMA atoms, shuffles...).  A handler may return a generator
that yields :class:`Blocked` events (or ``None`` scheduling points); ``block_run`` offers
``_access``, ``_write``, ``_tags_of``, ``_index``, ``_eval``, ``_elements`` and the block state."""


def handles(op_type: type):
    """Decorator registering an interpreter handler for ``op_type``."""

    def register(fn):
        HANDLERS[op_type] = fn
        return fn

    return register


COPY_HANDLERS: dict[str, Any] = {}
"""Copy atom name -> handler (same signature as :data:`HANDLERS`) for copies that are not plain
synchronous element moves (``cp.async``, ``tma.load``, ``tma.store``...)."""

BLOCK_EXIT_HOOKS: list[Any] = []
REGISTER_ACCESS_HOOKS: list[Any] = []  # (run, op, mem, view, addr, ok, lanes, write): register ownership checks
"""``hook(block_run)`` called when every warp of a block finished (checks of pending async state)."""


CLUSTER_BARRIER = -2
"""The scheduler barrier id of the cluster barrier (no ``bar.sync`` uses it)."""


class Blocked:
    """A warp waits: at a barrier (``barrier_id``, ``participants``), or, when ``ready`` is given,
    until ``ready()`` returns true (collectives, waits on asynchronous state); a ``ready`` wait
    has no barrier semantics (no happens-before edge)."""

    def __init__(self, barrier_id: int, participants: int | None, lanes: np.ndarray, op: N.Op,
                 ready: Any = None) -> None:
        self.barrier_id = barrier_id
        self.participants = participants
        self.lanes = lanes
        self.op = op
        self.ready = ready


class Interpreter:
    """Runs a traced :class:`~argus.ir.nodes.Kernel` on numpy inputs.

    ``run(inputs, sizes)`` takes a dict from tensor parameter name to a numpy array (its
    flattened contents are the buffer; they are written back in place) and values for every
    index parameter and size symbol; it returns the global memories after the launch.
    ``blocks`` restricts execution to some blocks (counterexample replay; with clusters, the
    whole clusters that contain them run); ``stop_at`` stops when the given op has executed
    (its program point).

    The blocks of a cluster (``@kernel(cluster=...)``) run together: their warps interleave,
    they read and write each other's shared memory (distributed shared memory, views with a
    ``rank``), arrive on each other's mbarriers, receive TMA multicasts and synchronise at
    cluster barriers, all checked with one set of vector clocks.
    """

    def __init__(self, kernel: N.Kernel) -> None:
        from argus.ir import numerics

        self.kernel = kernel
        self.numerics = numerics
        self.exprs = _ExprCache()
        self.address_cache: dict[int, Any] = {}
        cx, cy, cz = (int(c) for c in kernel.launch.cluster)
        self.cluster_shape = (cx, cy, cz)
        self.cluster_size = cx * cy * cz
        self.dependent_launch = any(isinstance(op, N.Fence) and op.fence == "griddep.wait" for op in N.walk(kernel.body))
        self._global_access: dict[int, str | None] = {}

    def global_access(self, op: N.Op) -> str | None:
        """How ``op`` touches global memory (``"reads"``, ``"writes"``, both), or ``None``."""
        key = id(op)
        if key not in self._global_access:
            from argus.abstract_interp.launch_order import global_access

            self._global_access[key] = global_access(op)
        return self._global_access[key]

    def cluster_rank(self, block: tuple[int, ...]) -> int:
        """The cluster rank of ``block`` (x fastest, as ``%cluster_ctarank``)."""
        cx, cy, cz = self.cluster_shape
        return block[0] % cx + cx * (block[1] % cy + cy * (block[2] % cz))

    def clusters(self, grid: tuple[int, ...], blocks: list[tuple[int, ...]]) -> list[list[tuple[int, int, int]]]:
        """The clusters (their blocks by rank) that contain ``blocks``, in the order first met."""
        cx, cy, cz = self.cluster_shape
        if any(g % c for g, c in zip(grid, self.cluster_shape)):
            raise ArgusError(f"interpreter: the grid {grid} is not a whole number of clusters {self.cluster_shape}",
                             position=self.kernel.loc,
                             hint="make every grid dimension a multiple of the cluster's (round the grid up)")
        out: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}
        for block in blocks:
            origin = (block[0] - block[0] % cx, block[1] - block[1] % cy, block[2] - block[2] % cz)
            if origin not in out:
                out[origin] = [(origin[0] + x, origin[1] + y, origin[2] + z)
                               for z in range(cz) for y in range(cy) for x in range(cx)]
        return list(out.values())

    # ---------------------------------------------------------------- launch

    def _check_assumptions(self, inputs: dict[str, np.ndarray], env: dict, sizes: dict[str, int]) -> None:
        for a in self.kernel.assumptions:
            if any(t not in inputs for t in a.tensors):
                continue  # reported as a missing input below
            why = _assumption_violation(a, inputs, env)
            if why is not None:
                raise ArgusError(f"interpreter: declared assumption {a.text} {why} (sizes {sizes})",
                                 position=a.loc, hint="the kernel may only be run on inputs it declares")

    def run(self, inputs: dict[str, np.ndarray], sizes: dict[str, int] | None = None,
            *, blocks: list[tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
        sizes = dict(sizes or {})
        env_sizes: dict[sympy.Symbol, int] = {}
        for p in self.kernel.params:
            if p.kind == "index":
                if p.name not in sizes:
                    raise ArgusError(f"interpreter: index parameter {p.name} needs a value")
                env_sizes[p.symbol] = int(sizes[p.name])
        for p in self.kernel.params:
            if p.kind == "tensor":
                for s in symbolic.free_symbols(p.buffer.size):
                    if s not in env_sizes:
                        if s.name not in sizes:
                            raise ArgusError(f"interpreter: size {s.name} of tensor {p.name} needs a value")
                        env_sizes[s] = int(sizes[s.name])
        self._check_assumptions(inputs, env_sizes, sizes)
        memories: dict[str, Memory] = {}
        for p in self.kernel.params:
            if p.kind != "tensor":
                continue
            if p.name not in inputs:
                raise ArgusError(f"interpreter: tensor parameter {p.name} needs an array")
            size = int(symbolic.evaluate(p.buffer.size, env_sizes))
            array = np.asarray(inputs[p.name])
            if array.size != size:
                raise ArgusError(f"interpreter: tensor {p.name} has {array.size} elements, the kernel expects {size}")
            values = array.astype(np.float64 if _is_float(p.buffer.dtype) else np.int64).ravel()
            if _is_float(p.buffer.dtype):
                values = self.numerics.round_to(p.buffer.dtype, values)
            memories[p.name] = Memory.create(p.buffer, size, values)
        grid = tuple(int(symbolic.evaluate(g, env_sizes)) for g in self.kernel.launch.grid)
        grid = grid + (1,) * (3 - len(grid))
        state = LaunchState(env_sizes, memories, grid)
        for name, mem in memories.items():
            state.global_writer_block[name] = np.full(mem.values.shape, -1, np.int64)
        all_blocks = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
        chosen = [tuple(b) + (0,) * (3 - len(b)) for b in (blocks if blocks is not None else all_blocks)]
        # a block of a cluster only runs with its peers: a replay of one block runs its whole cluster
        for cluster in self.clusters(grid, chosen):
            _ClusterRun(self, state, cluster).run()
        out = {}
        for p in self.kernel.params:
            if p.kind == "tensor":
                mem = memories[p.name]
                out[p.name] = mem.values.reshape(np.shape(inputs[p.name])).copy()
        return out


def _plain_layout_offsets(layout: Any, grid: np.ndarray, sizes: dict) -> np.ndarray | None:
    """``layout(c)`` for the coordinates ``grid`` [modes, n] of a plain ``Layout``, vectorized:
    each top-level mode's index is split column-major over its (flattened) sub-shape.  ``None``
    for other layout objects (swizzled, composed), which are evaluated element by element."""
    from argus.layout_algebra import Layout
    from argus.layout_algebra.int_tuple import flatten

    if type(layout) is not Layout:
        return None
    shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    stride = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    out = np.zeros(grid.shape[1], np.int64)
    for d, (mode_shape, mode_stride) in enumerate(zip(shape, stride)):
        sub_shapes = flatten(mode_shape) if isinstance(mode_shape, tuple) else (mode_shape,)
        sub_strides = flatten(mode_stride) if isinstance(mode_stride, tuple) else (mode_stride,)
        index = grid[d].astype(np.int64)
        for i, (extent, step) in enumerate(zip(sub_shapes, sub_strides)):
            try:
                extent, step = symbolic.evaluate(extent, sizes), symbolic.evaluate(step, sizes)
            except ValueError:
                return None
            if not isinstance(extent, (int, np.integer)) or not isinstance(step, (int, np.integer)):
                return None
            digit = index % int(extent) if i < len(sub_shapes) - 1 else index
            out += digit * int(step)
            index = index // int(extent)
    return out


def _assumption_violation(a: N.Assumption, inputs: dict[str, np.ndarray], env: dict) -> str | None:
    """Why the inputs break a declared assumption, or None (what a launch checks too).

    Address facts (alignment, aliasing) concern device pointers and are checked by the runtime.
    """
    match a.kind:
        case "predicate":
            if isinstance(a.predicate, sympy.Basic) and a.predicate.free_symbols - set(env):
                return None
            holds = a.predicate if not isinstance(a.predicate, sympy.Basic) else a.predicate.xreplace(
                {s: sympy.Integer(v) for s, v in env.items() if isinstance(v, int)})
            return None if bool(holds) else "does not hold"
        case "ids_in_range":
            values = np.asarray(inputs[a.tensors[0]]).ravel()
            low, high = (int(symbolic.evaluate(b, env)) for b in a.bound)
            bad = np.flatnonzero((values < low) | (values >= high))
            return None if not bad.size else f"element {int(bad[0])} is {values[bad[0]]}, outside [{low}, {high})"
        case "monotone":
            values = np.asarray(inputs[a.tensors[0]]).ravel()
            bad = np.flatnonzero(np.diff(values) < 0)
            return None if not bad.size else f"element {int(bad[0]) + 1} ({values[bad[0] + 1]}) < element {int(bad[0])} ({values[bad[0]]})"
        case _:
            return None


def _truth(x: Any) -> bool:
    return bool(np.all(x))


class _BlockRun:
    """The execution of one block: its shared memory, register files and warps.

    In a cluster, ``rank`` is the block's cluster rank, ``base`` the first clock column of its
    threads in the cluster-wide happens-before state ``hb`` and ``cluster`` the
    :class:`_ClusterRun` that schedules it with its peers.
    """

    def __init__(self, interp: Interpreter, state: LaunchState, block: tuple[int, int, int], *,
                 hb: HappensBefore | None = None, rank: int = 0, cluster: _ClusterRun | None = None) -> None:
        self.interp = interp
        self.state = state
        self.block = block
        self.linear_block = block[0] + state.grid[0] * (block[1] + state.grid[1] * block[2])
        self.threads = interp.kernel.launch.threads
        self.memories: dict[str, Memory] = dict(state.globals)
        self.epoch = 0  # incremented at each completed block barrier
        self.rank = rank
        self.base = rank * self.threads
        self.cluster = cluster
        self.exited = False
        self.hb = hb if hb is not None else HappensBefore(self.threads, block)  # vector clocks, race shadow state
        self.size_key = tuple(sorted((s.name, v) for s, v in state.sizes.items()))
        self.base_env: dict[sympy.Symbol, Any] = dict(state.sizes)
        for sym, value in zip(interp.kernel.block_ids, block):
            self.base_env[sym] = value
        self.base_env[N.CLUSTER_RANK] = rank
        # a dependent launch (the kernel waits on the grid dependency): which threads have waited
        self.waited = np.zeros(self.threads, bool) if interp.dependent_launch else None

    # ---------------------------------------------------------------- scheduling

    def warps(self) -> list[Iterator[Any]]:
        """One generator per warp of the block."""
        generators = []
        for w in range((self.threads + WARP - 1) // WARP):
            lanes = np.arange(w * WARP, min((w + 1) * WARP, self.threads))
            env = dict(self.base_env)
            env[self.interp.kernel.thread_id] = lanes
            generators.append(self._region(self.interp.kernel.body, env, np.ones(len(lanes), bool), lanes))
        return generators

    def peer(self, rank: int, op: N.Op) -> _BlockRun:
        """The block of this block's cluster with cluster rank ``rank`` (distributed shared memory)."""
        runs = self.cluster.runs if self.cluster is not None else [self]
        size = self.interp.cluster_size
        if not 0 <= rank < size:
            raise InterpreterError(Violation(
                "out-of-bounds", f"cluster rank {rank} outside 0..{size - 1} (the cluster has {size} blocks)",
                block=self.block, position=op.loc, op=op.kind))
        target = runs[rank]
        if target.exited and target is not self:
            raise InterpreterError(Violation(
                "cluster", f"block {self.block} accesses the shared memory of block {target.block} (cluster rank "
                f"{rank}), which has already exited (a cluster barrier must keep every block alive while its peers "
                "use its shared memory)", block=self.block, thread=int(self._current_lanes[0])
                if getattr(self, "_current_lanes", None) is not None else None, position=op.loc, op=op.kind))
        return target

    def _launch_order(self, op: N.Op, mask: np.ndarray, lanes: np.ndarray) -> None:
        """A dependent launch: record the threads' grid-dependency waits, and fail on a global
        access by a thread that has not waited (the launch-order property)."""
        if isinstance(op, N.Fence):
            if op.fence == "griddep.wait":
                self.waited[lanes[mask]] = True
            return
        what = self.interp.global_access(op)
        if what is None:
            return
        early = mask & ~self.waited[lanes]
        if early.any():
            thread = int(lanes[early][0])
            raise InterpreterError(Violation(
                "launch-order", f"{op.kind} {what} global memory before thread {thread}'s grid_dependency_wait(): "
                "in a dependent launch the previous kernel may still be running", block=self.block, thread=thread,
                position=op.loc, op=op.kind))

    def rank_of(self, view: N.View, op: N.Op, env: dict, mask: np.ndarray, lanes: np.ndarray) -> _BlockRun:
        """The block whose memory ``view`` addresses for the active lanes (``view.rank``: a peer)."""
        if view.rank is None:
            return self
        ranks = np.broadcast_to(np.asarray(self._eval(view.rank, env), np.int64), lanes.shape)[mask]
        if not len(ranks):
            return self
        if (ranks != ranks[0]).any():
            raise ArgusError(f"interpreter: the lanes of one warp address the shared memory of different cluster ranks "
                             f"({sorted(set(ranks.tolist()))}) in one {op.kind}; the reference interpreter needs one "
                             "rank per warp and operation", position=op.loc)
        self._current_lanes = lanes
        return self.peer(int(ranks[0]), op)


    # ---------------------------------------------------------------- regions

    def _region(self, region: N.Region, env: dict, mask: np.ndarray, lanes: np.ndarray) -> Iterator[Any]:
        for op in region.ops:
            if not mask.any():
                return
            yield from self._op(op, env, mask, lanes)
            yield None  # a scheduling point: warps interleave op by op

    def _op(self, op: N.Op, env: dict, mask: np.ndarray, lanes: np.ndarray) -> Iterator[Any]:
        if op.elected is not None:  # a single-issuer op: only the elected thread executes it
            mask = mask & np.broadcast_to(np.asarray(self._eval(op.elected, env), bool), lanes.shape)
            if not mask.any():
                return
        if self.waited is not None:
            self._launch_order(op, mask, lanes)
        match op:
            case N.Alloc(buffer=buffer):
                self._alloc(buffer)
            case N.Copy() if op.atom in COPY_HANDLERS:
                result = COPY_HANDLERS[op.atom](self, op, env, mask, lanes)
                if result is not None:
                    yield from result
            case N.Copy():
                self._copy(op, env, mask, lanes)
            case N.Fill(dst=dst, value=value):
                self._fill(op, dst, value, env, mask, lanes)
            case N.Elementwise():
                self._elementwise(op, env, mask, lanes)
            case N.Convert():
                self._convert(op, env, mask, lanes)
            case N.Barrier(id=barrier_id, participants=participants):
                if not mask.all():
                    idle = lanes[~mask]
                    raise InterpreterError(Violation(
                        "barrier", f"barrier {barrier_id} reached under divergence: thread {int(idle[0])} "
                        "of the same warp is not here", block=self.block, thread=int(lanes[mask][0]),
                        other_thread=int(idle[0]), position=op.loc, op=op.kind))
                yield Blocked(barrier_id, participants, lanes, op)
            case N.For(var=var, start=start, stop=stop, step=step, body=body):
                lo = np.broadcast_to(self._eval(start, env), lanes.shape)
                hi = np.broadcast_to(self._eval(stop, env), lanes.shape)
                k = int(lo[mask].min()) if mask.any() else 0
                top = int(hi[mask].max()) if mask.any() else 0
                while k < top:
                    inner = mask & (k >= lo) & (k < hi) & ((k - lo) % step == 0)
                    if inner.any():
                        env[var] = k
                        yield from self._region(body, env, inner, lanes)
                    k += step
                env.pop(var, None)
            case N.If(cond=cond, then=then, orelse=orelse):
                taken = np.broadcast_to(np.asarray(self._eval(cond, env), bool), lanes.shape)
                if (mask & taken).any():
                    yield from self._region(then, env, mask & taken, lanes)
                if (mask & ~taken).any() and orelse.ops:
                    yield from self._region(orelse, env, mask & ~taken, lanes)
            case N.Tag():
                self._tag(op, env, mask, lanes)
            case N.AssertTag():
                self._assert_tag(op, env, mask, lanes)
            case N.AssertBankConflicts():
                pass  # a performance property: the verifier checks it, values are unaffected
            case N.ResetTags(view=view):
                mem, addr, ok = self._access(op, view, env, mask, lanes, write=False, check_init=False, track=False)
                mem.tag_count[self._index(mem, addr, ok)] = _UNTAGGED
            case N.ReadIndex(result=result, src=src):
                mem, addr, ok = self._access(op, src, env, mask, lanes, write=False)
                values = np.zeros(lanes.shape, np.int64)
                gathered = mem.values[self._index(mem, addr, ok)]
                values[ok[:, 0]] = gathered.astype(np.int64)
                env[result] = values
            case N.WarpRole(cond=cond, body=body):
                taken = np.broadcast_to(np.asarray(self._eval(cond, env), bool), lanes.shape)
                if (mask & taken).any():
                    yield from self._region(body, env, mask & taken, lanes)
            case _:
                handler = HANDLERS.get(type(op))
                if handler is None:
                    raise ArgusError(f"interpreter: operation {op.kind} is not executable yet", position=op.loc)
                result = handler(self, op, env, mask, lanes)
                if result is not None:
                    yield from result
        return
        yield  # pragma: no cover - makes this a generator

    # ---------------------------------------------------------------- helpers

    def _eval(self, expr: Any, env: dict) -> Any:
        if expr is None:
            return True
        if isinstance(expr, (int, float, bool, np.ndarray)):
            return expr
        if expr is sympy.true:
            return True
        if expr is sympy.false:
            return False
        return self.interp.exprs.get(expr)(env)

    def _alloc(self, buffer: N.Buffer) -> None:
        size = int(symbolic.evaluate(buffer.size, self.state.sizes))
        if buffer.name in self.memories:
            return  # every warp executes the Alloc; one buffer per block / per thread file
        per_thread = self.threads if buffer.space is N.MemorySpace.REGISTER else 0
        self.memories[buffer.name] = Memory.create(buffer, size, per_thread=per_thread)

    def _elements(self, view: N.View) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """Per-element coordinates of a view: an int array [rank, n] and the coordinate tuples."""
        key = (id(view.layout), self.size_key)
        cached = self.interp.address_cache.get(key)
        if cached is None:
            from argus.layout_algebra import Layout

            shape = view.layout.shape if isinstance(view.layout.shape, tuple) else (view.layout.shape,)
            extents = [int(symbolic.evaluate(Layout(s).size, self.state.sizes)) for s in shape]
            grid = np.indices(extents).reshape(len(extents), -1) if extents else np.zeros((0, 1), np.int64)
            coords = [tuple(int(v) for v in grid[:, i]) for i in range(grid.shape[1])]
            cached = self.interp.address_cache[key] = (grid, coords, view.layout)
        return cached[0], cached[1]

    def _layout_offsets(self, view: N.View) -> np.ndarray:
        """``layout(c)`` for every coordinate of the view (cached per layout and sizes)."""
        key = ("offsets", id(view.layout), self.size_key)
        cached = self.interp.address_cache.get(key)
        if cached is None:
            grid, coords = self._elements(view)
            offsets = _plain_layout_offsets(view.layout, grid, self.state.sizes)
            if offsets is None:
                values = []
                for c in coords:
                    value = view.layout(c if len(c) != 1 else c[0])
                    if not isinstance(value, (int, np.integer)):
                        value = symbolic.evaluate(value, self.state.sizes)
                    values.append(int(value))
                offsets = np.array(values, np.int64)
            cached = self.interp.address_cache[key] = (offsets, view.layout)
        return cached[0]

    def _addresses(self, view: N.View, env: dict, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Element addresses [lanes, n] and validity [lanes, n] of a view for every lane.

        address = swizzle(offset + layout(c)) (no swizzle: the identity).
        """
        view_env = self._view_env(view, env)
        offsets = self._layout_offsets(view)[None, :]
        base = np.asarray(self._eval(view.offset, view_env), np.int64)
        linear = np.broadcast_to(offsets + base, (len(lanes), offsets.shape[1]))
        addresses = np.asarray(view.swizzle(linear), np.int64) if view.swizzle is not None else linear.copy()
        valid = np.ones(addresses.shape, bool)
        if view.valid is not None:
            valid = np.broadcast_to(np.asarray(self._eval(view.valid, view_env), bool), addresses.shape).copy()
        return addresses, valid

    def _index(self, mem: Memory, addr: np.ndarray, ok: np.ndarray) -> Any:
        if mem.buffer.space is N.MemorySpace.REGISTER:
            rows = np.broadcast_to(self._current_lanes[:, None], addr.shape)
            return rows[ok], addr[ok]
        return addr[ok]

    def _access(self, op: N.Op, view: N.View, env: dict, mask: np.ndarray, lanes: np.ndarray, *,
                write: bool, pred: Any = None, check_init: bool = True,
                track: bool = True) -> tuple[Memory, np.ndarray, np.ndarray]:
        """Addresses and the active-element mask of an access, after bounds/race checks."""
        owner = self if view.rank is None else self.rank_of(view, op, env, mask, lanes)
        mem = owner.memories.get(view.buffer.name)
        if mem is None:
            raise ArgusError(f"interpreter: buffer %{view.buffer.name} used before its allocation", position=op.loc)
        self._current_lanes = lanes
        addr, valid = self._addresses(view, env, lanes)
        ok = valid & mask[:, None]
        if pred is not None:
            coord_env = {k: (v[:, None] if isinstance(v, np.ndarray) and v.ndim == 1 else v) for k, v in env.items()}
            grid, _ = self._elements(view)
            coord_env.update({sym: grid[d][None, :] for d, sym in enumerate(view.coord_symbols)})
            ok &= np.broadcast_to(np.asarray(self._eval(pred, coord_env), bool), ok.shape)
        size = mem.values.shape[-1]
        bad = ok & ((addr < 0) | (addr >= size))
        if bad.any():
            lane, element = np.argwhere(bad)[0]
            _, coords = self._elements(view)
            raise InterpreterError(Violation(
                "out-of-bounds",
                f"{'write to' if write else 'read of'} %{view.buffer.name}[{int(addr[lane, element])}] "
                f"outside 0..{size - 1}",
                block=self.block, thread=int(lanes[lane]), element=coords[element],
                position=op.loc, op=op.kind))
        if track:  # first: a read of in-flight async data is reported as such, not as uninitialized
            self._check_race(op, mem, view, addr, ok, lanes, write)
        if not write and check_init:
            idx = self._index(mem, addr, ok)
            initialized = mem.written[idx]
            if not np.all(initialized):
                where = np.argwhere(ok)[np.flatnonzero(~initialized)[0]]
                _, coords = self._elements(view)
                raise InterpreterError(Violation(
                    "uninitialized",
                    f"read of %{view.buffer.name}[{int(addr[where[0], where[1]])}] before any write",
                    block=self.block, thread=int(lanes[where[0]]), element=coords[where[1]],
                    position=op.loc, op=op.kind))
        return mem, addr, ok

    def _check_race(self, op: N.Op, mem: Memory, view: N.View, addr: np.ndarray, ok: np.ndarray,
                    lanes: np.ndarray, write: bool) -> None:
        space = mem.buffer.space
        if space is N.MemorySpace.REGISTER:
            for hook in REGISTER_ACCESS_HOOKS:
                hook(self, op, mem, view, addr, ok, lanes, write)
            return
        threads = np.broadcast_to(lanes[:, None], addr.shape)[ok]
        a = addr[ok]
        if space is N.MemorySpace.GLOBAL:
            if write:
                owners = self.state.global_writer_block[mem.buffer.name]
                prior = owners[a]
                clash = (prior >= 0) & (prior != self.linear_block)
                if clash.any():
                    i = int(np.flatnonzero(clash)[0])
                    raise InterpreterError(Violation(
                        "write-conflict",
                        f"%{mem.buffer.name}[{int(a[i])}] is written by block {self.block} and by block "
                        f"#{int(prior[i])} (blocks must write disjoint global memory)",
                        block=self.block, thread=int(threads[i]), position=op.loc, op=op.kind))
                owners[a] = self.linear_block
            # within a block, global memory is checked like shared memory
        self.hb.access(self, op, view, mem, addr, ok, lanes, write)
        epoch = self.epoch
        atomic = (mem.write_epoch[a] == epoch) & (mem.last_writer[a] <= -3) & (mem.last_writer[a] != -(threads + 10))
        if atomic.any():
            i = int(np.flatnonzero(atomic)[0])
            raise InterpreterError(Violation(
                "race", f"{'write' if write else 'read'} of %{mem.buffer.name}[{int(a[i])}] conflicts with an atomic "
                "of another thread with no barrier between them", block=self.block, thread=int(threads[i]),
                position=op.loc, op=op.kind))
        if write:
            mem.last_writer[a] = threads
            mem.write_epoch[a] = epoch
        else:
            other = (mem.readers_epoch[a] == epoch) & (mem.reader[a] != threads)
            mem.reader[a] = np.where(other, -2, threads)  # one reader per element and epoch, -2: several
            mem.readers_epoch[a] = epoch

    def _tags_of(self, mem: Memory, addr: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = self._index(mem, addr, ok)
        return mem.tag_fields[idx], mem.tag_count[idx], mem.tag_names[idx]

    def _write(self, mem: Memory, addr: np.ndarray, ok: np.ndarray, values: np.ndarray,
               tags: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> None:
        idx = self._index(mem, addr, ok)
        if _is_float(mem.buffer.dtype):
            values = self.interp.numerics.round_to(mem.buffer.dtype, np.asarray(values, np.float64))
        else:
            values = np.asarray(values).astype(np.int64)
        mem.values[idx] = values
        mem.written[idx] = True
        if tags is None:
            mem.tag_count[idx] = _UNTAGGED
            mem.tag_names[idx] = None
        else:
            mem.tag_fields[idx] = tags[0]
            mem.tag_count[idx] = tags[1]
            mem.tag_names[idx] = tags[2]

    # ---------------------------------------------------------------- data ops

    def _copy(self, op: N.Copy, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
        src_mem, src_addr, src_ok = self._access(op, op.src, env, mask, lanes, write=False, pred=op.pred)
        dst_mem, dst_addr, dst_ok = self._access(op, op.dst, env, mask, lanes, write=True, pred=op.pred)
        ok = src_ok & dst_ok
        values = src_mem.values[self._index(src_mem, src_addr, ok)]
        fields, counts, names = self._tags_of(src_mem, src_addr, ok)
        self._write(dst_mem, dst_addr, ok, values, (fields, counts, names))

    def _fill(self, op: N.Op, dst: N.View, value: Any, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
        mem, addr, ok = self._access(op, dst, env, mask, lanes, write=True)
        tags = None
        tail = getattr(op, "tail", None)
        if tail is not None and value == 0:  # the zero fill of the source's out-of-range elements
            fields, counts = self.would_be_tags(tail, env, addr.shape)
            tags = (fields[ok], counts[ok], np.full(int(ok.sum()), None, object))
        self._write(mem, addr, ok, np.full(int(ok.sum()), value), tags)

    def would_be_tags(self, src: N.View, env: dict, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Known-zero tag state ``(fields, counts)`` [lanes, n] for the elements of ``src`` (out of
        range): the source tensor's tag function at their logical coordinates, if it has one."""
        fields = np.zeros((*shape, MAX_TAG_FIELDS), np.int64)
        tag = self.state.tag_functions.get(src.buffer.name) if src.buffer.space is N.MemorySpace.GLOBAL else None
        if tag is None:
            return fields, np.full(shape, _KNOWN_ZERO, np.int64)
        field_env = self._logical_env(src, env, shape)
        for i, (_, expr) in enumerate(tag.fields):
            fields[..., i] = np.broadcast_to(np.asarray(self._eval(expr, field_env), np.int64), shape)
        return fields, np.full(shape, _KNOWN_ZERO - len(tag.fields), np.int64)

    def _operand(self, op: N.Op, src: Any, env: dict, mask: np.ndarray, lanes: np.ndarray, ok: np.ndarray):
        if isinstance(src, N.View):
            mem, addr, _ = self._access(op, src, env, mask, lanes, write=False)
            idx = self._index(mem, addr, ok)
            return mem.values[idx], self._tags_of(mem, addr, ok)
        return np.full(int(ok.sum()), src, np.float64), None

    def _elementwise(self, op: N.Elementwise, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
        dst_mem, dst_addr, ok = self._access(op, op.dst, env, mask, lanes, write=True)
        values, tags = [], []
        for src in op.srcs:
            v, t = self._operand(op, src, env, mask, lanes, ok)
            values.append(v)
            if t is not None:
                tags.append(t)
        result = _apply(self.interp.numerics, op.fn, op.dst.buffer.dtype, values)
        self._write(dst_mem, dst_addr, ok, result, _merge_tags(tags))

    def _convert(self, op: N.Convert, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
        dst_mem, dst_addr, ok = self._access(op, op.dst, env, mask, lanes, write=True)
        v, t = self._operand(op, op.src, env, mask, lanes, ok)
        result = _convert(self.interp.numerics, op.src.buffer.dtype, op.dst.buffer.dtype, v, op.rounding, op.satfinite)
        self._write(dst_mem, dst_addr, ok, result, t)

    # ---------------------------------------------------------------- tags

    def _view_env(self, view: N.View, env: dict) -> dict:
        """``env`` broadcast to [lanes, elements], with the view's coordinate symbols bound."""
        grid, _ = self._elements(view)
        out = {k: (v[:, None] if isinstance(v, np.ndarray) and v.ndim == 1 else v) for k, v in env.items()}
        out.update({sym: grid[d][None, :] for d, sym in enumerate(view.coord_symbols)})
        return out

    def _logical_env(self, view: N.View, env: dict, shape: tuple[int, ...]) -> dict:
        """An env binding COORDS to each element's coordinate in the view's logical tensor.

        Tag functions and tag predicates are written over those coordinates.
        """
        COORDS = N.COORDS
        view_env = self._view_env(view, env)
        coords = view.coords if view.coords is not None else view.coord_symbols
        logical = [np.broadcast_to(np.asarray(self._eval(c, view_env), np.int64), shape) for c in coords]
        out = {k: v for k, v in view_env.items() if k not in view.coord_symbols}
        for d, values in enumerate(logical):
            out[COORDS[d]] = values
        return out

    def _tag(self, op: N.Tag, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
        if op.view.buffer.space is N.MemorySpace.GLOBAL:
            # a declaration about the whole tensor: applied once per launch, by one thread
            if id(op) in self.state.tagged:
                return
            self.state.tagged.add(id(op))
            self.state.tag_functions[op.view.buffer.name] = op
            first = int(np.flatnonzero(mask)[0])
            mask, lanes = np.ones(1, bool), lanes[first:first + 1]
            env = {k: (v[first:first + 1] if isinstance(v, np.ndarray) and v.ndim == 1 else v) for k, v in env.items()}
        mem, addr, ok = self._access(op, op.view, env, mask, lanes, write=False, check_init=False, track=False)
        field_env = self._logical_env(op.view, env, addr.shape)
        fields = np.zeros((*addr.shape, MAX_TAG_FIELDS), np.int64)
        for i, (_, expr) in enumerate(op.fields):
            fields[..., i] = np.broadcast_to(np.asarray(self._eval(expr, field_env), np.int64), addr.shape)
        idx = self._index(mem, addr, ok)
        mem.tag_fields[idx] = fields[ok]
        mem.tag_count[idx] = len(op.fields)
        mem.tag_names[idx] = op.name

    def _assert_tag(self, op: N.AssertTag, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
        mem, addr, ok = self._access(op, op.view, env, mask, lanes, write=False, check_init=False, track=False)
        if mem.buffer.space is not N.MemorySpace.REGISTER:  # the tags of in-flight data are not there yet
            self.hb.check_in_flight(self, op, op.view, mem, addr, ok, lanes)
        fields, counts, _ = self._tags_of(mem, addr, ok)
        _, coords = self._elements(op.view)
        positions = np.argwhere(ok)

        def fail(i: int, message: str) -> InterpreterError:
            lane, element = positions[i]
            return InterpreterError(Violation(
                "tag", f"{message} {op.message}".strip(), block=self.block, thread=int(lanes[lane]),
                element=coords[element], position=op.loc, op=op.kind))

        # a known zero is checked with the tag its source coordinate would have had; one whose
        # source has no tag function (blank) satisfies any assertion that does not state it
        known_zero, counts = known_zero_tags(counts)

        def describe(i: int) -> str:
            tag = tuple(int(v) for v in fields[i][:max(int(counts[i]), 0)])
            return f"a known zero (standing for tag {tag})" if known_zero[i] else f"tag {tag}"

        if op.zero_symbol is not None and op.equal_to is None:  # the predicate states known zeros itself
            untagged = (counts == _UNTAGGED) & ~known_zero
            if untagged.any():
                raise fail(int(np.flatnonzero(untagged)[0]), f"assertion on untagged (⊥) data of %{op.view.buffer.name}")
            zero_env = self._logical_env(op.view, env, addr.shape)
            flags = np.zeros(addr.shape, np.int64)
            flags[ok] = known_zero
            zero_env[op.zero_symbol] = flags
            full_fields = np.zeros((*addr.shape, MAX_TAG_FIELDS), np.int64)
            full_fields[ok] = fields
            for name, sym in op.tag_symbols:
                zero_env[sym] = full_fields[..., int(name[1:])]
            holds = np.broadcast_to(np.asarray(self._eval(op.predicate, zero_env), bool), addr.shape)[ok]
            if not holds.all():
                i = int(np.flatnonzero(~holds)[0])
                raise fail(i, f"assert_tag failed: {describe(i)} of %{op.view.buffer.name}")
            return
        blank = known_zero & (counts == _UNTAGGED)
        if blank.any():
            keep = np.zeros(ok.shape, bool)
            keep[ok] = ~blank
            ok, fields, counts, known_zero = ok & keep, fields[~blank], counts[~blank], known_zero[~blank]
            positions = np.argwhere(ok)
        untagged = counts == _UNTAGGED
        if untagged.any():
            raise fail(int(np.flatnonzero(untagged)[0]), f"assertion on untagged (⊥) data of %{op.view.buffer.name}")
        if op.equal_to is not None:
            other_mem, other_addr, _ = self._access(op, op.equal_to, env, mask, lanes, write=False,
                                                    check_init=False, track=False)
            other_fields, other_counts, _ = self._tags_of(other_mem, other_addr, ok)
            other_zero, other_counts = known_zero_tags(other_counts)
            other_blank = other_zero & (other_counts == _UNTAGGED)
            differs = ((other_counts != counts) | np.any(other_fields != fields, axis=-1)) & ~other_blank
            if differs.any():
                i = int(np.flatnonzero(differs)[0])
                raise fail(i, f"tags differ: {tuple(int(v) for v in fields[i][:counts[i]])} vs "
                              f"{tuple(int(v) for v in other_fields[i][:max(int(other_counts[i]), 0)])}")
            return
        pred_env = self._logical_env(op.view, env, addr.shape)
        full_fields = np.zeros((*addr.shape, MAX_TAG_FIELDS), np.int64)
        full_fields[ok] = fields
        for name, sym in op.tag_symbols:
            pred_env[sym] = full_fields[..., int(name[1:])]
        holds = np.broadcast_to(np.asarray(self._eval(op.predicate, pred_env), bool), addr.shape)
        failed = (ok & ~holds)[ok]
        if failed.any():
            i = int(np.flatnonzero(failed)[0])
            raise fail(i, f"assert_tag failed: {describe(i)} of %{op.view.buffer.name}")


class _ClusterRun:
    """The blocks of one cluster, run together by one cooperative scheduler (a single block when
    the launch has no clusters).  Warps of every block interleave op by op; a warp blocked at a
    block barrier waits for its own block, at a cluster barrier for every thread of the cluster."""

    def __init__(self, interp: Interpreter, state: LaunchState, blocks: list[tuple[int, int, int]]) -> None:
        threads = interp.kernel.launch.threads
        hb = HappensBefore(threads, blocks[0], tuple(blocks)) if len(blocks) > 1 else None
        self.runs = [_BlockRun(interp, state, block, hb=hb, rank=r, cluster=self) for r, block in enumerate(blocks)]

    def run(self) -> None:
        warps: list[tuple[_BlockRun, int, Iterator[Any]]] = []
        for run in self.runs:
            warps += [(run, w, gen) for w, gen in enumerate(run.warps())]
        remaining = {id(run): sum(1 for w in warps if w[0] is run) for run in self.runs}
        blocked: dict[int, Blocked] = {}
        done: set[int] = set()
        while len(done) < len(warps):
            progressed = False
            for g, (run, _, gen) in enumerate(warps):
                if g in done or g in blocked:
                    continue
                try:
                    event = next(gen)
                except StopIteration:
                    done.add(g)
                    progressed = True
                    remaining[id(run)] -= 1
                    if not remaining[id(run)]:
                        self._exit(run)
                    continue
                if event is not None:
                    blocked[g] = event
                progressed = True
            for g in [g for g, b in blocked.items() if b.ready is not None and b.ready()]:
                del blocked[g]
                progressed = True
            if self._release(warps, blocked, done):
                progressed = True
            if not progressed and len(done) < len(warps):
                self._deadlock(warps, blocked, done)

    def _exit(self, run: _BlockRun) -> None:
        """Every warp of ``run`` finished: its exit checks, then the block's shared memory is gone."""
        for hook in BLOCK_EXIT_HOOKS:
            hook(run)
        if len(self.runs) > 1:
            self._check_peer_accesses(run)
        run.exited = True

    @staticmethod
    def _check_peer_accesses(run: _BlockRun) -> None:
        """A block may exit only when every access of a peer to its shared memory is ordered before
        the exit (happens-before; usually through a final cluster barrier): otherwise the peer may
        still read or write memory that no longer exists."""
        hb = run.hb
        mine = slice(run.base, run.base + run.threads)
        knows = hb.clock[mine].max(axis=0)  # what some thread of the exiting block has seen
        for name, mem in run.memories.items():
            if mem.buffer.space is not N.MemorySpace.SHARED:
                continue
            sh = hb.shadows.get(id(mem))
            if sh is None:
                continue
            w = sh.writer
            peer = (w >= 0) & (w < hb.threads) & ((w // run.threads) != run.rank)
            late = peer & (sh.write_clock > knows[np.clip(w, 0, None)])
            what = "writes"
            if not late.any() and sh.readers is not None:
                columns = [c for c, t in enumerate(sh.readers) if int(t) // run.threads != run.rank]
                for c in columns:
                    reads = sh.reads_of(c) > knows[int(sh.readers[c])]
                    if reads.any():
                        late, w, what = reads, np.full(len(w), int(sh.readers[c])), "reads"
                        break
            if late.any():
                i = int(np.flatnonzero(late)[0])
                raise hb.violation(
                    "cluster", f"block {run.block} exits while {hb.who(int(w[i]))} {what} its shared memory "
                    f"%{name}[{i}] with no cluster barrier (or other synchronisation) ordering that access before "
                    "the exit: the peer may use the memory after it is gone", op=_exit_op(run),
                    thread=int(w[i]))

    def _deadlock(self, warps: list, blocked: dict[int, Blocked], done: set[int]) -> None:
        waiting = sorted(blocked)
        first_run = warps[waiting[0]][0] if waiting else self.runs[0]
        local_waiting = [warps[g][1] for g in waiting if warps[g][0] is first_run]
        local_done = sorted(warps[g][1] for g in done if warps[g][0] is first_run)
        for g in waiting:  # a wait that can explain why it never completes (mbarriers)
            explain = getattr(blocked[g], "diagnose", None)
            if explain is not None:
                run = warps[g][0]
                raise InterpreterError(explain(run, [warps[h][1] for h in waiting if warps[h][0] is run],
                                               sorted(warps[h][1] for h in done if warps[h][0] is run)))
        first = blocked[waiting[0]] if waiting else None
        raise InterpreterError(Violation(
            "deadlock",
            f"warps {local_waiting} wait at barriers that can never complete"
            + (f" (warps {local_done} already finished)" if local_done else "")
            + (f"; blocks {sorted({warps[g][0].block for g in waiting})} of the cluster are blocked"
               if len(self.runs) > 1 else ""),
            block=first_run.block,
            thread=int(first.lanes[0]) if first is not None else None,
            position=first.op.loc if first is not None else None,
            op=first.op.kind if first is not None else None,
        ))

    def _release(self, warps: list, blocked: dict[int, Blocked], done: set[int]) -> bool:
        if not blocked:
            return False
        by_id: dict[tuple, list[int]] = {}
        for g, b in blocked.items():
            if b.ready is None:
                run = warps[g][0]
                key = ("cluster",) if b.barrier_id == CLUSTER_BARRIER else (run.rank, b.barrier_id)
                by_id.setdefault(key, []).append(g)
        released = False
        for key, gs in by_id.items():
            cluster_wide = key == ("cluster",)
            runs = self.runs if cluster_wide else [warps[gs[0]][0]]
            first = blocked[gs[0]]
            barrier_id = first.barrier_id
            block_threads = runs[0].threads
            expected = block_threads * len(runs) if cluster_wide else (first.participants or block_threads)
            for g in gs[1:]:
                if not cluster_wide and (blocked[g].participants or block_threads) != expected:
                    b = blocked[g]
                    raise InterpreterError(Violation(
                        "barrier", f"barrier {barrier_id} is reached with {b.participants or block_threads} declared "
                        f"participants here and {expected} by warp {warps[gs[0]][1]}", block=warps[g][0].block,
                        thread=int(b.lanes[0]), other_thread=int(first.lanes[0]), position=b.op.loc,
                        op=b.op.kind))
            arrived = sum(len(blocked[g].lanes) for g in gs)
            what = "the cluster barrier" if cluster_wide else f"barrier {barrier_id}"
            if arrived >= expected:
                if arrived > expected:
                    b = blocked[gs[-1]]
                    raise InterpreterError(Violation(
                        "barrier", f"{what} declares {expected} participants but {arrived} threads arrived",
                        block=warps[gs[-1]][0].block, thread=int(b.lanes[0]), position=b.op.loc, op=b.op.kind))
                hb = runs[0].hb
                hb.barrier(np.concatenate([blocked[g].lanes + warps[g][0].base for g in gs]))  # its participants only
                for g in gs:
                    del blocked[g]
                for run in runs:
                    run.epoch += 1
                released = True
                continue
            members = [g for g, (run, _, _) in enumerate(warps) if run in runs]
            finished = [g for g in members if g in done]
            if finished and all(g in done or g in blocked for g in members) and not any(
                    g in blocked and g not in gs for g in members):
                b = blocked[gs[0]]
                others = sorted({warps[g][0].block for g in finished})
                raise InterpreterError(Violation(
                    "barrier",
                    f"{what}: {arrived} of {expected} threads arrived; the others exited"
                    + (f" (blocks {others} have finished warps)" if cluster_wide else ""),
                    block=warps[gs[0]][0].block, thread=int(b.lanes[0]), position=b.op.loc, op=b.op.kind))
        return released


def _exit_op(run: _BlockRun) -> N.Op:
    """The op a block-exit violation is reported at: the kernel's last top-level op."""
    ops = run.interp.kernel.body.ops
    return ops[-1] if ops else N.Barrier(loc=run.interp.kernel.loc)


def _merge_tags(tags: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    """Elementwise rule: the result keeps a tag when every tagged operand carries the same one."""
    if not tags:
        return None
    fields, counts, names = tags[0]
    fields, counts = fields.copy(), counts.copy()
    for other_fields, other_counts, _ in tags[1:]:
        differ = (other_counts != counts) | np.any(other_fields != fields, axis=-1)
        counts[differ] = _UNTAGGED
    return fields, counts, names


def _apply(numerics: Any, fn: str, dtype: Any, values: list[np.ndarray]) -> np.ndarray:
    """``fn`` on exactly represented operands with the hardware's semantics (argus.ir.numerics)."""
    if not getattr(dtype, "is_float", False):
        ints = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
        if fn not in ints:
            raise ArgusError(f"interpreter: {fn} is not defined on integer type {dtype}")
        return ints[fn](*[np.asarray(v, np.int64) for v in values])
    with np.errstate(all="ignore"):
        match fn:
            case "add" | "sub" | "mul" | "div":
                return getattr(numerics, fn)(values[0], values[1], dtype)
            case "max":
                return numerics.maximum(values[0], values[1], dt=dtype)
            case "min":
                return numerics.minimum(values[0], values[1], dt=dtype)
            case "exp2":
                return numerics.exp2(values[0], dtype)
            case "fma":
                return numerics.fma(values[0], values[1], values[2], dtype)
            case "neg":
                return -np.asarray(values[0], np.float64)
            case "sqrt":
                return numerics.sqrt(values[0], dtype)
    raise ArgusError(f"interpreter: elementwise function {fn!r} is not defined")


def _convert(numerics: Any, src: Any, dst: Any, values: np.ndarray, rounding: str, satfinite: bool) -> np.ndarray:
    """PTX ``cvt`` semantics; ``rounding`` is ``rn``/``rz``/... (``rni``/``rzi`` toward ints)."""
    if src.is_float and not dst.is_float:
        rounding = {"rn": "rni", "rz": "rzi", "rm": "rmi", "rp": "rpi"}.get(rounding, rounding)
    return numerics.convert(values, src, dst, rounding=rounding, saturate=satfinite)


# handlers implemented in their own modules register themselves on import
from argus.ir import interp_async as _interp_async  # noqa: E402,F401
from argus.ir import interp_mma as _interp_mma  # noqa: E402,F401
