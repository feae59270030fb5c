"""Asynchronous operations of the DSL: cp.async groups, mbarriers, TMA, fences, named and
cluster barriers, warp roles.

The concurrency contract is explicit in every call: who executes it (``scope``) and, for
single-issuer operations, which thread is elected to issue it; every asynchronous operation
names a handle in the IR, and every wait names the handle it completes.

========================================  ======================  ==============================
call                                      executed by             completes / is completed by
========================================  ======================  ==============================
``cp_async(src, dst)``                    every thread            the thread's open group
``cp_async_commit()``                     every thread            closes the group (a handle)
``cp_async_wait(pending)``                every thread            all but ``pending`` groups
``mbarrier(count, stages=S)``             (allocation)            —
``mbarrier_init(bars, ...)``              one elected thread      + ``fence.mbarrier_init``
``arrive(bar)``                           every thread            one arrival of the phase
``arrive_expect_tx(bar, bytes)``          one elected thread      arrival + declared bytes
``wait(bar, parity | phase=)``            every thread            returns when that phase is done
``tma_load(tile, smem, bar)``             one elected thread      bytes counted on ``bar``'s phase
``tma_store(smem, tile)``                 one elected thread      the thread's bulk group
``tma_store_commit / tma_store_wait``     the elected thread      bulk groups
``fence_proxy_async()``                   every thread            —
``wgmma_fence()``                         every thread            —
``wgmma_commit / wgmma_wait(pending)``    the warpgroup           the wgmmas since the last commit
``named_barrier(id, participants)``       ``participants``        —
``cluster_barrier()``                     every thread of the     —
                                          cluster
``grid_dependency_wait()``                every thread that       the previous kernel in the
                                          touches global memory   stream (programmatic launch)
``launch_dependents()``                   any thread              — (a scheduling hint)
``mapa(smem | bar, rank)``                (addressing)            —
``tma_load(..., multicast=mask)``         one elected thread      bytes on each receiver's ``bar``
``warp_role(name, warps=, registers=)``   the named warps         (a traced region)
========================================  ======================  ==============================

The default elected thread is the first thread of the innermost :func:`warp_role` (thread 0
outside any role); pass ``elected=`` (a thread index or a predicate) to choose another.

Memory-visibility rules (the asynchrony model of DESIGN.md, checked by the interpreter and the
verifier): cp.async data is visible to its issuer after its ``cp_async_wait`` and to other threads
after that wait and a barrier; TMA data is visible to a thread whose ``wait`` observed the phase
the copy completed with; ordinary shared-memory writes read by a TMA store need a
``fence_proxy_async()`` by their writers before the store is issued.

Clusters (``@kernel(cluster=(2, 1, 1))``): :func:`mapa` names a shared tensor or mbarrier of a
peer block (distributed shared memory); loads and stores through it and ``arrive`` on a peer's
mbarrier (a remote release) are ordinary operations of the executing thread; a wait observes
only the block's own mbarriers.  A multicast TMA load writes the box into every block of its
mask at the same shared-memory address and completes bytes on each receiver's mbarrier at the
same address, so every receiver's ``expect_tx`` must count them.  A peer's mbarrier may be used
only after its initialization is ordered before the use by a :func:`cluster_barrier`, and a block
may exit only when every peer access to its shared memory is ordered before the exit (a final
``cluster_barrier()``).

Programmatic dependent launch (sm_90): a kernel that calls :func:`grid_dependency_wait` is
launched so that it may start while the kernel before it in the stream is still running; the
wait returns once that kernel has completed and its writes are visible.  Everything before the
wait (barrier setup, register budgets, tensor-map prefetches) overlaps the previous kernel, so
no thread may read or write global memory before its own wait (the ``launch-order`` property).
:func:`launch_dependents` lets the next kernel start early; it orders nothing, since the next
kernel's own wait still waits for this one to complete.
"""

from __future__ import annotations

import builtins
import dataclasses
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sympy

from argus import symbolic
from argus.ir import dtypes as D
from argus.ir import nodes as N
from argus.ir.atoms import AsyncClass, AtomError, copy_atom
from argus.ir.interp_async import REGISTER_FILE
from argus.spec import builder as B
from argus.spec import ops
from argus.spec.tensor import Tensor, as_index

__all__ = [
    "AsyncGroup", "Mbarrier", "Stage", "arrive", "arrive_expect_tx", "cluster_barrier", "cp_async",
    "cp_async_commit", "cp_async_wait", "expect_tx", "fence_proxy_async", "grid_dependency_wait",
    "launch_dependents", "mapa", "mbarrier", "mbarrier_init", "named_barrier", "tma_load", "tma_store", "tma_store_commit", "tma_store_wait", "transaction_bytes",
    "wait", "warp_role", "wgmma_commit", "wgmma_fence", "wgmma_wait",
]

NAMED_BARRIERS = 16  # bar.sync ids 0..15 (0 is the block barrier)
L2_PRIORITIES = ("evict_first", "evict_last")  # tma_load(l2=...): createpolicy's L2 eviction priorities


# --------------------------------------------------------------------------- trace state


@dataclass
class _Role:
    name: str
    warps: tuple[int, ...]
    registers: int | None


@dataclass
class _AsyncTrace:
    """Per-kernel trace state of the asynchronous operations."""

    open_group: N.Handle | None = None
    committed: list[N.Handle] = field(default_factory=list)
    open_bulk: N.Handle | None = None
    bulk_committed: list[N.Handle] = field(default_factory=list)
    wgmma_committed: list[N.Handle] = field(default_factory=list)
    roles: list[_Role] = field(default_factory=list)
    budgets: dict[int, tuple[str, int]] = field(default_factory=dict)  # warp -> (role, registers)


def _trace() -> _AsyncTrace:
    builder = B.current()
    state = builder.__dict__.get("_argus_async")
    if state is None:
        state = builder.__dict__["_argus_async"] = _AsyncTrace()
    return state


def _emit(op: N.Op) -> N.Op:
    return B.current().emit(op)


def _position() -> Any:
    return B.current().position()


def _elected(elected: Any) -> Any:
    """The predicate electing the issuing thread: a thread index, a predicate, or the default
    (the first thread of the innermost warp role, thread 0 outside roles)."""
    tid = N.THREAD_ID
    if elected is None:
        roles = _trace().roles
        first = roles[-1].warps[0] * 32 if roles else 0
        return sympy.Eq(tid, first)
    if isinstance(elected, bool):
        raise B.error("elected= takes a thread index or a predicate over thread_id(), not a bool")
    if isinstance(elected, int) or (isinstance(elected, sympy.Expr) and not isinstance(elected, sympy.logic.boolalg.Boolean)):
        return sympy.Eq(tid, as_index(elected, "elected thread"))
    if isinstance(elected, sympy.Basic):
        return elected
    raise B.error(f"elected={elected!r}: give a thread index or a predicate over thread_id()")


def _static_shape(t: Tensor, what: str) -> tuple[int, ...]:
    shape = tuple(symbolic.static_value(s) for s in t.shape)
    if any(s is None for s in shape):
        raise B.error(f"{what}: the tile shape {t.shape} must be static")
    return shape


def _require(t: Any, space: N.MemorySpace, what: str) -> None:
    if not isinstance(t, Tensor):
        raise B.error(f"{what}: expected a tensor, got {type(t).__name__}")
    if t.space is not space:
        raise B.error(f"{what}: expected a {space.value} tensor, got a {t.space.value} one")


def _same(src: Tensor, dst: Tensor, what: str) -> None:
    if src.shape != dst.shape:
        raise B.error(f"{what}: shapes differ: {src.shape} vs {dst.shape}",
                      hint="tile both tensors to the same shape")
    if src.dtype != dst.dtype:
        raise B.error(f"{what}: element types differ ({src.dtype} vs {dst.dtype}); async copies do not convert")


# --------------------------------------------------------------------------- stages


@dataclass(frozen=True)
class Stage:
    """The stage handle of a pipelined loop iteration: ``for k, st in range(n, pipeline=S)``.

    ``st.index`` = ``i % S`` (the buffer slot; ``sa[st]`` indexes with it), ``st.round`` =
    ``i // S`` (how often the slot was reused) and ``st.parity`` = ``round % 2`` (the parity of the
    mbarrier phase that delivers the slot), for the iteration number ``i`` (from 0).
    """

    iteration: Any
    stages: int

    @property
    def index(self) -> Any:
        return symbolic.mod(self.iteration, self.stages)

    @property
    def round(self) -> Any:
        return symbolic.floordiv(self.iteration, self.stages)

    @property
    def parity(self) -> Any:
        return symbolic.mod(self.round, 2)

    @property
    def argus_index(self) -> Any:
        """Used when a stage indexes a tensor (``smem[st]``)."""
        return self.index


# --------------------------------------------------------------------------- cp.async


@dataclass(frozen=True)
class AsyncGroup:
    """A committed group of asynchronous copies (cp.async or TMA stores): an IR handle."""

    handle: N.Handle


def _open_group(state: _AsyncTrace) -> N.Handle:
    if state.open_group is None:
        state.open_group = N.Handle(B.current().fresh("g"), N.HandleKind.CP_ASYNC_GROUP)
    return state.open_group


def cp_async(src: Tensor, dst: Tensor, *, pred: Any = None, atom: str = "cp.async") -> None:
    """Asynchronously copy a global tile into shared memory (per thread).

    The copy joins the thread's open group; :func:`cp_async_commit` closes the group and
    :func:`cp_async_wait` completes it.  Elements outside ``src`` (a partial tile) and elements
    where ``pred`` is false are written with zero (``src_size = 0``); elements outside ``dst``
    are not written.  Reading ``dst`` before the wait is an error; other threads may read it
    only after the issuer's wait and a barrier.
    """
    _require(src, N.MemorySpace.GLOBAL, "cp_async source")
    _require(dst, N.MemorySpace.SHARED, "cp_async destination")
    _same(src, dst, "cp_async")
    try:
        spec = copy_atom(atom)
    except AtomError as err:
        raise B.error(err.message, hint=err.hint) from None
    if spec.async_class is not AsyncClass.CP_ASYNC_GROUP:
        raise B.error(f"cp_async: atom {atom!r} is not a cp.async atom", hint='use "cp.async" or "cp.async.16"')
    size = symbolic.static_value(src.size)
    if size is not None and (size * src.dtype.bits // 8) % min(spec.access_bytes):
        raise B.error(f"cp_async: {size} elements of {src.dtype} are not a whole number of "
                      f"{min(spec.access_bytes)}-byte accesses", hint=f"{atom} moves {spec.access_bytes} bytes")
    fill = ops._mask(pred, src.view.valid)
    _emit(N.Copy(src=src.view, dst=dst.view, atom=spec.name, pred=fill, handle=_open_group(_trace()),
                 loc=_position(), scope=N.Scope.THREAD))


def cp_async_commit() -> AsyncGroup:
    """Close the thread's open cp.async group (even an empty one) and return its handle."""
    state = _trace()
    handle = _open_group(state)
    _emit(N.AsyncCommit(handle=handle, loc=_position(), scope=N.Scope.THREAD))
    state.committed.append(handle)
    state.open_group = None
    return AsyncGroup(handle)


def cp_async_wait(pending: int = 0) -> None:
    """Wait until at most ``pending`` of this thread's committed cp.async groups are incomplete."""
    if not isinstance(pending, int) or pending < 0:
        raise B.error(f"cp_async_wait({pending!r}): the number of pending groups must be a non-negative int")
    state = _trace()
    completes = tuple(state.committed[: len(state.committed) - pending]) if pending else tuple(state.committed)
    _emit(N.AsyncWait(group=N.HandleKind.CP_ASYNC_GROUP, pending=pending, handles=completes, loc=_position(),
                      scope=N.Scope.THREAD))


# --------------------------------------------------------------------------- mbarriers


class Mbarrier:
    """An mbarrier in shared memory, or an array of them (``bars[s]`` selects one).

    ``count`` is the number of arrivals that complete a phase (set by :func:`mbarrier_init`).
    """

    def __init__(self, tensor: Tensor, count: int, stages: int | None, index: Any = None) -> None:
        self.tensor = tensor
        self.count = count
        self.stages = stages
        self.index = index

    def __repr__(self) -> str:
        where = f"[{self.index}]" if self.index is not None else ""
        return f"Mbarrier(%{self.tensor.view.buffer.name}{where}, count={self.count})"

    def __len__(self) -> int:
        return self.stages or 1

    def __getitem__(self, index: Any) -> Mbarrier:
        if self.index is not None:
            raise B.error(f"{self!r} is a single mbarrier; it cannot be indexed again")
        index = as_index(index, "mbarrier index")
        return Mbarrier(self.tensor, self.count, self.stages, index)

    @property
    def single(self) -> Mbarrier:
        if self.index is not None:
            return self
        if self.stages is not None:
            raise B.error(f"an array of {self.stages} mbarriers is used where one is expected",
                          hint="select one with bars[stage]")
        return self[0]

    @property
    def view(self) -> N.View:
        single = self.single
        return single.tensor[single.index].view

    @property
    def phase_handle(self) -> N.Handle:
        single = self.single
        return N.Handle(f"{single.tensor.view.buffer.name}[{symbolic.normalize(single.index)}].phase",
                        N.HandleKind.MBARRIER_PHASE)


def _bar(bar: Any, what: str) -> Mbarrier:
    if not isinstance(bar, Mbarrier):
        raise B.error(f"{what}: expected an mbarrier (argus.spec.mbarrier(...)), got {type(bar).__name__}")
    return bar.single


def mbarrier(count: int, *, stages: int | None = None) -> Mbarrier:
    """Allocate an mbarrier (``stages=None``) or an array of ``stages`` mbarriers in shared memory.

    A phase completes after ``count`` arrivals (and once its declared transaction bytes arrived).
    Initialize with :func:`mbarrier_init` before any use.
    """
    if not isinstance(count, int) or not 1 <= count < 2 ** 20:
        raise B.error(f"mbarrier({count!r}): the arrival count must be an int in 1 .. 2**20 - 1")
    if stages is not None and (not isinstance(stages, int) or stages < 1):
        raise B.error(f"mbarrier(stages={stages!r}): must be a positive int")
    tensor = ops.shared(D.U64, (stages or 1,))
    return Mbarrier(tensor, count, stages)


def mbarrier_init(*bars: Mbarrier, elected: Any = None, sync: bool = True) -> None:
    """Initialize mbarriers (every element of each array) by one elected thread, then
    ``fence.mbarrier_init`` by that thread; ``sync`` adds the block barrier that makes the
    initialization visible to every thread before its first use."""
    who = _elected(elected)
    loc = _position()
    for bar in bars:
        if not isinstance(bar, Mbarrier):
            raise B.error(f"mbarrier_init: expected mbarriers, got {type(bar).__name__}")
        indices = [bar.index] if bar.index is not None else builtins.range(len(bar))
        for i in indices:
            _emit(N.MbarrierInit(bar=bar.tensor[i].view, count=bar.count, loc=loc, scope=N.Scope.THREAD, elected=who))
    _emit(N.Fence(fence="mbarrier_init", loc=loc, scope=N.Scope.THREAD, elected=who))
    if sync:
        if _trace().roles:
            raise B.error("mbarrier_init inside a warp role cannot synchronise the whole block",
                          hint="initialize the mbarriers before the warp roles, or pass sync=False and "
                               "synchronise the warps that use them yourself")
        _emit(N.Barrier(loc=loc, scope=N.Scope.BLOCK))


def arrive(bar: Mbarrier, *, count: int = 1, elected: Any = None) -> None:
    """Every executing thread arrives on ``bar`` (``count`` arrivals each); with ``elected``, only
    that thread arrives.  The arrival releases what the thread did before it to the waiters of
    the phase."""
    b = _bar(bar, "arrive")
    _emit(N.MbarrierArrive(bar=b.view, count=count, loc=_position(), scope=N.Scope.THREAD,
                           elected=None if elected is None else _elected(elected)))


def arrive_expect_tx(bar: Mbarrier, nbytes: Any, *, elected: Any = None) -> None:
    """The elected thread declares ``nbytes`` transaction bytes for the current phase of ``bar``
    and arrives once (``mbarrier.arrive.expect_tx``)."""
    b = _bar(bar, "arrive_expect_tx")
    _emit(N.MbarrierArrive(bar=b.view, expect_tx=as_index(nbytes, "expect-tx bytes"), count=1, loc=_position(),
                           scope=N.Scope.THREAD, elected=_elected(elected)))


def expect_tx(bar: Mbarrier, nbytes: Any, *, elected: Any = None) -> None:
    """The elected thread declares ``nbytes`` transaction bytes without arriving."""
    b = _bar(bar, "expect_tx")
    _emit(N.MbarrierArrive(bar=b.view, expect_tx=as_index(nbytes, "expect-tx bytes"), count=0, loc=_position(),
                           scope=N.Scope.THREAD, elected=_elected(elected)))


def wait(bar: Mbarrier, parity: Any = None, *, phase: Any = None, elected: Any = None) -> None:
    """Block until the phase of ``bar`` with ``parity`` has completed (``try_wait.parity`` loop).

    Give ``phase=`` (the phase number meant, e.g. ``k // STAGES``) or a :class:`Stage` instead of
    a parity, and the interpreter and verifier also check that the waiter is at most one phase
    behind (a parity cannot tell older phases apart).  ``elected`` restricts the wait to one thread.
    """
    b = _bar(bar, "wait")
    if isinstance(parity, Stage):
        phase, parity = parity.round, None
    if phase is not None:
        phase = as_index(phase, "mbarrier phase")
        implied = symbolic.mod(phase, 2)
        if parity is not None and symbolic.static_value(symbolic.to_sympy(parity) - implied) not in (None, 0):
            raise B.error(f"wait: parity {parity} contradicts phase {phase}")
        parity = implied
    if parity is None:
        raise B.error("wait: give the parity of the phase to wait for (or phase=...)",
                      hint="in a pipelined loop: wait(full[st], st) or parity (k // STAGES) % 2")
    parity = as_index(parity, "mbarrier parity")
    _emit(N.MbarrierWait(bar=b.view, parity=parity, phase=phase, handle=b.phase_handle, loc=_position(),
                         scope=N.Scope.THREAD, elected=None if elected is None else _elected(elected)))


# --------------------------------------------------------------------------- TMA


def transaction_bytes(tile: Tensor) -> int:
    """Bytes a TMA copy of ``tile`` delivers: the whole box, out-of-range (zero-filled) parts included."""
    from argus.layout_algebra.hopper import tma_transaction_bytes

    shape = _static_shape(tile, "transaction_bytes")
    return tma_transaction_bytes(tuple(reversed(shape)), tile.dtype.bits // 8)


def _check_tma_box(smem: Tensor, what: str) -> None:
    """The shared-memory side of a TMA copy must be the dense box layout (in one Hopper swizzle
    mode), aligned as the mode requires."""
    from argus.layout_algebra import LayoutError
    from argus.layout_algebra.hopper import SwizzleMode, tma_box_smem_layout, tma_smem_alignment

    shape = _static_shape(smem, what)
    e = smem.dtype.bits // 8
    layout = smem.layout
    strides = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    expected, running = [], 1
    for extent in reversed(shape):
        expected.append(running)
        running *= extent
    expected.reverse()
    if any(isinstance(s, tuple) for s in strides) or any(
            n > 1 and symbolic.static_value(s) != x for n, s, x in zip(shape, strides, expected)):
        raise B.error(f"{what}: the shared-memory tile {layout} is not the dense box a TMA copy writes",
                      hint="use a row-major shared tile (A.shared(dtype, (..., rows, cols))[stage])")
    mode = SwizzleMode.INTERLEAVE
    if smem.view.swizzle is not None:
        matches = [m for m in SwizzleMode if m is not SwizzleMode.INTERLEAVE
                   and m.element_swizzle(e) == smem.view.swizzle]
        if not matches:
            raise B.error(f"{what}: the shared tile's swizzle {smem.view.swizzle} is not a TMA swizzle mode",
                          hint="use the 32B, 64B or 128B Hopper swizzle (layout_algebra.hopper.SwizzleMode)")
        mode = matches[0]
    try:
        tma_box_smem_layout(tuple(reversed(shape)), e, mode)
    except LayoutError as err:
        raise B.error(f"{what}: {err.message}", hint=err.hint) from None
    alignment = tma_smem_alignment(mode)
    offset = symbolic.to_sympy(smem.view.offset) * e
    terms = sympy.Add.make_args(sympy.expand(offset))
    if any(int(t.as_coeff_Mul()[0]) % alignment for t in terms if t.as_coeff_Mul()[0].is_Integer):
        raise B.error(f"{what}: the shared tile starts at byte offset {offset}, not a multiple of {alignment}",
                      hint=f"a TMA destination in mode {mode.name} must be {alignment}-byte aligned")


def tma_load(src: Tensor, dst: Tensor, bar: Mbarrier | None = None, *, multicast: Any = None,
             elected: Any = None, l2: str | None = None) -> int:
    """The elected thread copies the global tile ``src`` (a box) into the shared tile ``dst``.

    The copy delivers the full box: parts outside the tensor arrive as zeros (a known-zero fact)
    and count toward the bytes, which are added to the transactions of ``bar``'s current phase;
    the data lands when that phase completes.  Inside ``range(..., pipeline=S)`` leave ``bar``
    out: the pipelining policy allocates the barriers.  ``multicast``: a mask of the cluster's
    blocks that receive the tile too.  ``l2``: the L2 eviction priority of the box's lines,
    ``"evict_first"`` (data read once: a streamed operand) or ``"evict_last"`` (data many blocks
    read again); a hint to the cache, no part of what the copy does, so the verifier ignores it.
    Returns the transaction bytes (for ``arrive_expect_tx``).
    """
    _require(src, N.MemorySpace.GLOBAL, "tma_load source")
    if l2 is not None and l2 not in L2_PRIORITIES:
        raise B.error(f"tma_load: l2={l2!r} is not an L2 eviction priority", hint=f"use one of {L2_PRIORITIES}")
    _require(dst, N.MemorySpace.SHARED, "tma_load destination")
    _same(src, dst, "tma_load")
    _check_tma_box(dst, "tma_load")
    handle, view = None, None
    if bar is not None:
        b = _bar(bar, "tma_load")
        handle, view = b.phase_handle, b.view
    if multicast is not None:
        if bar is None:
            raise B.error("tma_load(multicast=...): give the mbarrier explicitly (each receiving block's mbarrier at "
                          "the same address receives the bytes)")
        cluster = getattr(B.current(), "cluster", (1, 1, 1))
        size = int(cluster[0]) * int(cluster[1]) * int(cluster[2])
        multicast = as_index(multicast, "multicast mask")
        static = symbolic.static_value(multicast)
        if static is not None and not 0 < static < 2 ** size:
            raise B.error(f"tma_load: multicast mask {static:#b} names blocks outside the cluster of {size} "
                          f"(bits 0..{size - 1})", hint="declare the cluster shape with @kernel(cluster=(x, y, z))")
    _emit(N.Copy(src=src.view, dst=dst.view, atom="tma.load", pred=src.view.valid, handle=handle, mbarrier=view,
                 multicast=multicast, loc=_position(), scope=N.Scope.THREAD, elected=_elected(elected), l2=l2))
    return transaction_bytes(dst)


def _open_bulk(state: _AsyncTrace) -> N.Handle:
    if state.open_bulk is None:
        state.open_bulk = N.Handle(B.current().fresh("s"), N.HandleKind.TMA_STORE_GROUP)
    return state.open_bulk


def tma_store(src: Tensor, dst: Tensor, *, elected: Any = None) -> None:
    """The elected thread stores the shared tile ``src`` into the global tile ``dst`` (a box;
    elements outside the tensor are not written).  Ordinary writes of ``src`` need a
    :func:`fence_proxy_async` by their writers and a barrier before this call; ``src`` may be
    overwritten only after :func:`tma_store_wait` (``read=True`` suffices)."""
    _require(src, N.MemorySpace.SHARED, "tma_store source")
    _require(dst, N.MemorySpace.GLOBAL, "tma_store destination")
    _same(src, dst, "tma_store")
    _check_tma_box(src, "tma_store")
    _emit(N.Copy(src=src.view, dst=dst.view, atom="tma.store", pred=dst.view.valid, handle=_open_bulk(_trace()),
                 loc=_position(), scope=N.Scope.THREAD, elected=_elected(elected)))


def tma_store_commit(*, elected: Any = None) -> AsyncGroup:
    """Close the elected thread's open TMA-store (bulk) group and return its handle."""
    state = _trace()
    handle = _open_bulk(state)
    _emit(N.AsyncCommit(handle=handle, loc=_position(), scope=N.Scope.THREAD, elected=_elected(elected)))
    state.bulk_committed.append(handle)
    state.open_bulk = None
    return AsyncGroup(handle)


def tma_store_wait(pending: int = 0, *, read: bool = False, elected: Any = None) -> None:
    """Wait until at most ``pending`` TMA-store groups are incomplete; ``read=True`` waits only
    until their shared-memory sources were read (the sources may then be overwritten)."""
    if not isinstance(pending, int) or pending < 0:
        raise B.error(f"tma_store_wait({pending!r}): the number of pending groups must be a non-negative int")
    state = _trace()
    done = state.bulk_committed[: len(state.bulk_committed) - pending] if pending else state.bulk_committed
    _emit(N.AsyncWait(group=N.HandleKind.TMA_STORE_GROUP, pending=pending, handles=tuple(done), read=read,
                      loc=_position(), scope=N.Scope.THREAD, elected=_elected(elected)))


# --------------------------------------------------------------------------- wgmma groups


def wgmma_fence() -> None:
    """``wgmma.fence``: order this thread's earlier register writes (an accumulator filled or
    changed by ordinary code) before the wgmma that reads them; required before a wgmma whose
    accumulator or register A operand was written other than by wgmma since the last fence."""
    _emit(N.Fence(fence="wgmma", loc=_position(), scope=N.Scope.THREAD))


def wgmma_commit() -> AsyncGroup:
    """``wgmma.commit_group``: close the warpgroup's wgmmas issued since the last commit as a group."""
    state = _trace()
    handle = N.Handle(B.current().fresh("w"), N.HandleKind.WGMMA_GROUP)
    _emit(N.AsyncCommit(handle=handle, loc=_position(), scope=N.Scope.THREAD))
    state.wgmma_committed.append(handle)
    return AsyncGroup(handle)


def wgmma_wait(pending: int = 0) -> None:
    """``wgmma.wait_group(pending)``: wait until at most ``pending`` wgmma groups are incomplete.
    Until then a wgmma owns its accumulator registers and reads its shared-memory operands."""
    if not isinstance(pending, int) or pending < 0:
        raise B.error(f"wgmma_wait({pending!r}): the number of pending groups must be a non-negative int")
    state = _trace()
    done = state.wgmma_committed[: len(state.wgmma_committed) - pending] if pending else state.wgmma_committed
    _emit(N.AsyncWait(group=N.HandleKind.WGMMA_GROUP, pending=pending, handles=tuple(done), loc=_position(),
                      scope=N.Scope.THREAD))


# --------------------------------------------------------------------------- fences and barriers


def fence_proxy_async() -> None:
    """``fence.proxy.async``: this thread's earlier ordinary shared-memory writes become visible to
    the async proxy (TMA stores, wgmma) once a barrier orders them before its use."""
    _emit(N.Fence(fence="proxy.async", loc=_position(), scope=N.Scope.THREAD))


def named_barrier(barrier_id: int, participants: int) -> None:
    """``bar.sync id, participants``: exactly ``participants`` threads (whole warps) synchronise."""
    builder = B.current()
    if not isinstance(barrier_id, int) or not 1 <= barrier_id < NAMED_BARRIERS:
        raise B.error(f"named_barrier({barrier_id!r}, ...): ids are 1 .. {NAMED_BARRIERS - 1} (0 is the block barrier)")
    if not isinstance(participants, int) or participants <= 0 or participants % 32 or participants > builder.threads:
        raise B.error(f"named_barrier: {participants!r} participants: must be a positive multiple of 32, at most "
                      f"the block's {builder.threads} threads")
    _emit(N.Barrier(id=barrier_id, participants=participants, loc=_position(), scope=N.Scope.BLOCK))


def grid_dependency_wait() -> None:
    """``griddepcontrol.wait``: this thread waits until the kernels this launch depends on (the
    previous kernel of the stream) have completed and their memory operations are visible.

    A kernel that calls it is launched with programmatic stream serialization, so it may start
    before the previous kernel ends: every thread must call it before its first access of global
    memory (the verifier proves that each global access is preceded by the thread's wait on every
    path).  Without a dependent launch (older GPUs, gfx942) it is a no-op."""
    _emit(N.Fence(fence="griddep.wait", loc=_position(), scope=N.Scope.THREAD))


def launch_dependents() -> None:
    """``griddepcontrol.launch_dependents``: once every block has called it (or exited), the next
    kernel of the stream, if launched as a dependent, may start its blocks.  A hint only: it
    orders no memory, since that kernel's :func:`grid_dependency_wait` waits for this one to
    complete."""
    _emit(N.Fence(fence="griddep.launch", loc=_position(), scope=N.Scope.THREAD))


def cluster_barrier() -> None:
    """``barrier.cluster.arrive`` + ``wait``: every thread of every block of the cluster synchronises."""
    _emit(N.ClusterBarrier(loc=_position(), scope=N.Scope.CLUSTER))


def mapa(x: Any, rank: Any) -> Any:
    """The shared tensor or mbarrier ``x`` as it exists in the block of cluster rank ``rank``
    (distributed shared memory, PTX ``mapa``): every block of a cluster allocates the same shared
    buffers, and the result addresses the peer's copy.  Reads and writes through it are ordinary
    accesses of the executing thread (checked for races against the peer's threads); ``arrive`` on
    a peer's mbarrier is a remote release.  ``rank`` may be ``cluster_rank()`` itself."""
    builder = B.current()
    cluster = getattr(builder, "cluster", (1, 1, 1))
    size = int(cluster[0]) * int(cluster[1]) * int(cluster[2])
    rank = as_index(rank, "mapa rank")
    static = symbolic.static_value(rank)
    if static is not None and not 0 <= static < size:
        raise B.error(f"mapa: cluster rank {static} outside 0..{size - 1} (the kernel's cluster is {tuple(cluster)})",
                      hint="declare the cluster shape with @kernel(cluster=(x, y, z))")
    if isinstance(x, Mbarrier):
        if x.tensor.view.rank is not None:
            raise B.error("mapa: the mbarrier already names a peer block's mbarrier")
        peer = Tensor(dataclasses.replace(x.tensor.view, rank=rank))
        return Mbarrier(peer, x.count, x.stages, x.index)
    if not isinstance(x, Tensor):
        raise B.error(f"mapa: expected a shared tensor or an mbarrier, got {type(x).__name__}")
    if x.view.rank is not None:
        raise B.error("mapa: the tensor already names a peer block's shared memory")
    if x.space is not N.MemorySpace.SHARED:
        raise B.error(f"mapa: only shared memory is distributed across a cluster, not {x.space.value} memory")
    return Tensor(dataclasses.replace(x.view, rank=rank))


# --------------------------------------------------------------------------- warp roles


def _launch_registers(threads: int) -> int:
    """Registers per thread every warp holds at launch when none are set (multiple of 8, <= 255)."""
    return min(255, REGISTER_FILE // threads) // 8 * 8


def warp_role(name: str, *, warps: Any, registers: int | None = None) -> Iterator[None]:
    """A traced region that only the warps ``warps`` execute (a producer or consumer role)::

        with A.warp_role("producer", warps=range(0, 4), registers=40):
            ...

    (``for _ in A.warp_role(...):`` is the same).  ``warps``: a warp index, a range or a sequence of warp indices.  ``registers``: the role's
    per-thread register budget, set by ``setmaxnreg`` at the start of the role (whole
    warpgroups only, 24 .. 256 in steps of 8); the budgets of all roles must fit the register file.
    """
    builder = B.current()
    loc = builder.position()
    state = _trace()
    total = builder.threads // 32
    if isinstance(warps, int):
        warps = (warps,)
    try:
        chosen = tuple(sorted(set(int(w) for w in warps)))
    except TypeError:
        raise B.error(f"warp_role({name!r}): warps= takes a warp index, a range or a sequence of ints") from None
    if not chosen or chosen[0] < 0 or chosen[-1] >= total:
        raise B.error(f"warp_role({name!r}): warps {chosen} are not among the block's {total} warps")
    if state.roles and not set(chosen) <= set(state.roles[-1].warps):
        raise B.error(f"warp_role({name!r}): warps {chosen} are not part of the enclosing role "
                      f"{state.roles[-1].name!r} (warps {state.roles[-1].warps})")
    warp = symbolic.floordiv(N.THREAD_ID, 32)  # warp-uniform by construction (uniformity analysis)
    runs: list[tuple[int, int]] = []
    for w in chosen:
        if runs and runs[-1][1] == w:
            runs[-1] = (runs[-1][0], w + 1)
        else:
            runs.append((w, w + 1))
    cond = sympy.Or(*(sympy.And(warp >= lo, warp < hi) if hi - lo < total else sympy.true for lo, hi in runs))
    if registers is not None:
        _check_registers(name, chosen, registers, builder.threads, state)
    caller = sys._getframe(1)
    before = ops._snapshot(caller)
    builder.open_region(loc, f"warp role {name!r}")
    if registers is not None:
        builder.emit(N.SetMaxNReg(registers=registers, increase=registers > _launch_registers(builder.threads),
                                  loc=loc, scope=N.Scope.WARPGROUP))
    state.roles.append(_Role(name, chosen, registers))
    try:
        yield None
    finally:
        state.roles.pop()
    defined = frozenset(op.var if isinstance(op, N.For) else op.result
                        for op in N.walk(N.Region(tuple(builder.frames[-1].ops)))
                        if isinstance(op, (N.For, N.ReadIndex)))  # names the role binds for itself
    ops._carry(before, ops._snapshot(sys._getframe(1)), f"warp role {name!r}", defined)
    body = builder.close_region()
    builder.emit(N.WarpRole(name=name, cond=cond, body=body, registers=registers, loc=loc, scope=N.Scope.WARP))


ops.TRACED_REGIONS.add(warp_role.__code__)


def _check_registers(name: str, warps: tuple[int, ...], registers: int, threads: int, state: _AsyncTrace) -> None:
    if not isinstance(registers, int) or registers % 8 or not 24 <= registers <= 256:
        raise B.error(f"warp_role({name!r}): registers={registers!r} must be a multiple of 8 in 24 .. 256 (setmaxnreg)")
    groups = {w // 4 for w in warps}
    if any({4 * g + i for i in builtins.range(4)} - set(warps) for g in groups):
        raise B.error(f"warp_role({name!r}): setmaxnreg applies to whole warpgroups; warps {warps} split a warpgroup",
                      hint="give the role 4 consecutive warps starting at a multiple of 4 (or no registers=)")
    for w in warps:
        state.budgets[w] = (name, registers)
    default = _launch_registers(threads)
    used = sum(state.budgets.get(w, ("", default))[1] * 32 for w in builtins.range(threads // 32))
    if used > REGISTER_FILE:
        detail = ", ".join(f"warp {w}: {r}" for w, (_, r) in sorted(state.budgets.items()))
        raise B.error(f"warp_role({name!r}): the register budgets need {used} registers, the register file has "
                      f"{REGISTER_FILE} ({detail}; {default} for warps without a role)",
                      hint="lower the producer's budget (e.g. 40) so the consumers can grow")
