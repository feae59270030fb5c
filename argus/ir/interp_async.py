"""Reference semantics of the asynchronous operations: cp.async groups, mbarriers, TMA loads and
stores, fences, cluster barriers, register budgets.

The asynchrony model (DESIGN.md), executed:

* **cp.async** (per thread): a copy reads its source when issued and joins the thread's open
  group; ``commit`` closes the group; ``wait(n)`` completes all but the ``n`` most recent
  committed groups of the thread, and only then is the data written — by the issuing thread, at
  its current time, so other threads see it only after a later barrier.  Until then the
  destination elements are *in flight*: any access to them is a violation.
* **mbarriers**: state = completed phases, arrivals still missing, pending transaction bytes
  (declared by ``expect_tx`` minus delivered by copies).  A phase completes when both reach zero;
  the arrivers' clocks, joined, are released to every thread whose ``wait`` observes that phase.
* **TMA loads** read the global box when issued (out-of-range elements as zero), subtract their
  bytes from the barrier's current phase and land when that phase completes, written by the
  barrier's copy engine (an agent of the happens-before clocks): only threads that observed the
  phase may read them.
* **TMA stores** read shared memory when issued (the elements must be fenced toward the async
  proxy and may not be overwritten until a ``wait_group.read``) and write global memory at the
  thread's ``wait_group``.

Dynamic checks (each an :class:`~argus.ir.interpreter.InterpreterError` with block, thread,
element and program point): access to in-flight data (``async``; ``parity`` when the reader's
wait observed the phase before the data's; ``expect-tx`` when the copy's phase completed before
it delivered), an mbarrier used before its init / ``fence.mbarrier_init`` (``mbarrier``), arrivals
beyond the count or a phase left half-arrived at exit (``mbarrier``), delivered bytes beyond the
declared ones or declared bytes that never arrive (``expect-tx``), a waiter more than one phase
behind or ahead (``parity``), deadlocks explained by the state of the barrier waited on, TMA stores
of unfenced shared memory (``proxy``), and asynchronous work still pending at exit (``async``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argus.errors import ArgusError
from argus.ir import interp_wgmma
from argus.ir import nodes as N
from argus.ir.happens_before import AsyncRecord
from argus.ir.interpreter import (
    _KNOWN_ZERO,
    BLOCK_EXIT_HOOKS,
    CLUSTER_BARRIER,
    COPY_HANDLERS,
    MAX_TAG_FIELDS,
    WARP,
    Blocked,
    InterpreterError,
    Violation,
    handles,
)

CLUSTER_BARRIER_ID = CLUSTER_BARRIER  # the scheduler barrier id of barrier.cluster
REGISTER_FILE = 65536  # 32-bit registers of an SM (sm_90): the bound of all warps' setmaxnreg budgets


# --------------------------------------------------------------------------- state


@dataclass
class MbarrierState:
    """One initialized mbarrier of a block."""

    name: str
    count: int
    init_thread: int  # block-local id of the initializing thread
    init_op: N.Op
    agent: int  # the clock column of the copy engine that writes this barrier's TMA data
    release: np.ndarray  # joined clocks of this phase's arrivers
    fenced_at: int | None = None  # the init thread's time at its fence.mbarrier_init
    completed: int = 0
    pending: int = 0  # arrivals still missing in the current phase
    tx: int = 0  # declared minus delivered transaction bytes of the current phase
    declared: int = 0
    delivered: int = 0
    copies: list[int] = field(default_factory=list)  # async records landing with this phase
    history: dict[int, np.ndarray] = field(default_factory=dict)  # phase -> release clock
    declared_history: dict[int, int] = field(default_factory=dict)
    observed: dict[int, int] = field(default_factory=dict)  # thread (clock column) -> latest phase it observed
    last_declared: dict[int, int] = field(default_factory=dict)  # column -> phase of its latest expect_tx
    last_arrive: N.Op | None = None
    init_column: int = -1  # clock column of the initializing thread
    remote: dict[int, tuple[int, N.Op]] = field(default_factory=dict)  # peer column -> (time, op) of its last arrive

    def observed_phase(self, thread: int) -> int | None:
        return self.observed.get(thread)

    def armed_phase(self) -> int | None:
        """The latest phase for which any thread declared transaction bytes (armed it)."""
        if self.declared:
            return self.completed
        armed = [p for p, d in self.declared_history.items() if d]
        return max(armed) if armed else None

    def describe(self) -> str:
        text = (f"{self.name}: {self.completed} phase(s) completed; phase {self.completed} has "
                f"{self.count - self.pending} of {self.count} arrivals")
        if self.declared or self.delivered:
            text += f", {self.declared} transaction bytes declared and {self.delivered} delivered"
        return text


@dataclass
class _AsyncBlock:
    """Asynchronous state of one block run."""

    bars: dict[tuple[str, int], MbarrierState] = field(default_factory=dict)
    open_groups: dict[int, list[int]] = field(default_factory=dict)  # thread -> cp.async records
    groups: dict[int, list[list[int]]] = field(default_factory=dict)  # thread -> committed groups
    open_bulk: dict[int, list[int]] = field(default_factory=dict)  # thread -> TMA store records
    bulk: dict[int, list[list[int]]] = field(default_factory=dict)
    registers: dict[int, tuple[int, N.Op]] = field(default_factory=dict)  # warp -> setmaxnreg
    waiting: list[Any] = field(default_factory=list)  # MbarrierBlocked events not yet resumed


def _state(run: Any) -> _AsyncBlock:
    state = run.__dict__.get("_async")
    if state is None:
        state = run.__dict__["_async"] = _AsyncBlock()
    return state


def _fail(run: Any, op: N.Op, kind: str, message: str, *, thread: int | None = None,
          other: int | None = None, element: tuple[int, ...] | None = None) -> InterpreterError:
    return InterpreterError(Violation(kind, message, block=run.block, thread=thread, other_thread=other,
                                      element=element, position=op.loc, op=op.kind))


def _threads(mask: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    return np.asarray(lanes, np.int64)[mask]


def _single_lane(mask: np.ndarray, i: int) -> np.ndarray:
    one = np.zeros_like(mask)
    one[i] = True
    return one


# --------------------------------------------------------------------------- mbarriers


def _bar_addresses(run: Any, op: N.Op, view: N.View, env: dict, lanes: np.ndarray, owner: Any = None) -> np.ndarray:
    owner = owner if owner is not None else run
    if view.buffer.name not in owner.memories:
        raise ArgusError(f"interpreter: mbarrier %{view.buffer.name} used before its allocation"
                         + (f" in block {owner.block}" if owner is not run else ""), position=op.loc)
    addr, _ = run._addresses(view, env, lanes)
    size = owner.memories[view.buffer.name].values.shape[-1]
    if ((addr < 0) | (addr >= size)).any():
        lane = int(np.argwhere((addr < 0) | (addr >= size))[0][0])
        raise _fail(run, op, "out-of-bounds", f"mbarrier %{view.buffer.name}[{int(addr[lane, 0])}] outside 0..{size - 1}",
                    thread=int(lanes[lane]))
    return addr[:, 0]


def _bars(run: Any, op: N.Op, view: N.View, env: dict, mask: np.ndarray, lanes: np.ndarray, *,
          async_proxy: bool = False, owner: Any = None) -> list[tuple[MbarrierState, np.ndarray]]:
    """The initialized mbarriers the active lanes name, with the lanes naming each (local ids).

    ``view.rank`` (or ``owner``) names a peer block of the cluster whose mbarrier it is.  Every use
    must come after the initialization *and* its ``fence.mbarrier_init``, ordered by
    happens-before (a barrier after the fence; a cluster barrier for a peer) for threads other
    than the initializing one; a use by the async proxy (a TMA copy completing on it) needs the
    fence in any case.
    """
    if owner is None:
        owner = run.rank_of(view, op, env, mask, lanes)
    state = _state(owner)
    addr = _bar_addresses(run, op, view, env, lanes, owner)
    where = f" of block {owner.block}" if owner is not run else ""
    out = []
    for a in np.unique(addr[mask]):
        sel = mask & (addr == a)
        threads = _threads(sel, lanes)
        bar = state.bars.get((view.buffer.name, int(a)))
        if bar is None:
            raise _fail(run, op, "mbarrier", f"mbarrier %{view.buffer.name}[{int(a)}]{where} is used before "
                        "mbarrier_init" + (" (a peer's mbarrier_init must be ordered before this use by a cluster "
                                           "barrier)" if owner is not run else ""), thread=int(threads[0]))
        if async_proxy and bar.fenced_at is None:
            raise _fail(run, op, "mbarrier",
                        f"a TMA copy completes on {bar.name} before its initialization was fenced "
                        "(fence.mbarrier_init makes the init visible to the async proxy)",
                        thread=int(threads[0]), other=bar.init_thread)
        columns = threads + run.base
        others = columns[columns != bar.init_column]
        unseen = others if bar.fenced_at is None else others[run.hb.clock[others, bar.init_column] < bar.fenced_at]
        if len(unseen):
            sync = "a cluster barrier" if owner is not run else "a barrier"
            raise run.hb.violation(
                "mbarrier", f"{run.hb.who(int(unseen[0]))} uses {bar.name} initialized by "
                f"{run.hb.who(bar.init_column)} at {bar.init_op.loc} without fence.mbarrier_init and {sync} "
                "between the init and this use", op=op, thread=int(unseen[0]), other_thread=bar.init_column)
        out.append((bar, threads))
    return out


@handles(N.MbarrierInit)
def run_mbarrier_init(run: Any, op: N.MbarrierInit, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    state = _state(run)
    addr = _bar_addresses(run, op, op.bar, env, lanes)
    for a in np.unique(addr[mask]):
        threads = _threads(mask & (addr == a), lanes)
        if len(threads) > 1:
            raise _fail(run, op, "mbarrier", f"threads {int(threads[0])} and {int(threads[1])} both initialize "
                        f"%{op.bar.buffer.name}[{int(a)}] (mbarrier_init is a single-issuer operation)",
                        thread=int(threads[0]), other=int(threads[1]))
        key = (op.bar.buffer.name, int(a))
        old = state.bars.get(key)
        if old is not None and (old.copies or old.pending != old.count):
            raise _fail(run, op, "mbarrier", f"{old.name} is initialized again while its phase {old.completed} is "
                        "in progress", thread=int(threads[0]))
        name = f"%{op.bar.buffer.name}[{int(a)}]"
        if op.bar.rank is not None:
            raise ArgusError("interpreter: mbarrier_init of a peer block's mbarrier (each block initializes its own)",
                             position=op.loc)
        if run.hb.clustered:
            name += f" of block {run.block}"
        agent = old.agent if old is not None else run.hb.new_agent(f"copy engine of mbarrier {name}")
        state.bars[key] = MbarrierState(name, int(op.count), int(threads[0]), op, agent, run.hb.zero(),
                                        pending=int(op.count), init_column=int(threads[0]) + run.base)


def _complete(run: Any, bar: MbarrierState) -> None:
    """Complete the current phase if its arrivals and transaction bytes are all in."""
    if bar.pending or bar.tx:
        return
    hb = run.hb
    time = hb.tick(bar.agent)
    release = hb._widen(bar.release).copy()
    release[bar.agent] = max(release[bar.agent], time)
    for rid in bar.copies:
        _land(run, rid, bar.agent, time)
    bar.history[bar.completed] = release
    bar.declared_history[bar.completed] = bar.declared
    bar.completed += 1
    bar.pending, bar.tx, bar.declared, bar.delivered = bar.count, 0, 0, 0
    bar.release = hb.zero()
    bar.copies = []


@handles(N.MbarrierArrive)
def run_mbarrier_arrive(run: Any, op: N.MbarrierArrive, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    nbytes = np.broadcast_to(np.asarray(run._eval(op.expect_tx, env), np.int64), lanes.shape)
    owner = run.rank_of(op.bar, op, env, mask, lanes)
    for bar, threads in _bars(run, op, op.bar, env, mask, lanes, owner=owner):
        arrivals = int(op.count) * len(threads)
        declared = int(nbytes[np.isin(lanes, threads)].sum())
        columns = threads + run.base
        if arrivals and arrivals > bar.pending:
            extra = "" if bar.pending else f" (all arrived; it waits for {bar.tx} transaction bytes)"
            raise _fail(run, op, "mbarrier",
                        f"{arrivals} arrival(s) on {bar.name} but phase {bar.completed} needs only {bar.pending} more"
                        f"{extra}: arrivals per phase must equal the init count {bar.count}", thread=int(threads[-1]))
        if declared:
            bar.tx += declared
            bar.declared += declared
            for t in columns:
                bar.last_declared[int(t)] = bar.completed
        if arrivals:
            if owner is not run:  # a remote arrive: the peer must not exit before it (checked at exit)
                for c in columns:
                    bar.remote[int(c)] = (run.hb.now(int(c)), op)
            bar.release = np.maximum(run.hb._widen(bar.release), run.hb.release(columns))
            bar.pending -= arrivals
            bar.last_arrive = op
        if bar.pending == 0 and bar.tx < 0:
            raise _fail(run, op, "expect-tx",
                        f"phase {bar.completed} of {bar.name}: its copies delivered {bar.delivered} bytes but only "
                        f"{bar.declared} were declared (expect-tx)", thread=int(threads[0]))
        _complete(run, bar)


class MbarrierBlocked(Blocked):
    """A warp waiting for a phase of an mbarrier (no barrier semantics: its edge is the phase's
    release clock, acquired when it resumes)."""

    def __init__(self, lanes: np.ndarray, op: N.MbarrierWait, bar: MbarrierState, target: int, parity: int) -> None:
        super().__init__(-1, None, lanes, op, ready=lambda: bar.completed > target)
        self.bar = bar
        self.target = target
        self.parity = parity

    def suspicion(self) -> int:
        """How likely this wait is the cause of a deadlock: missing transaction bytes first, then a
        parity-only wait that skipped a completed phase, then any other."""
        if self.bar.pending == 0 and self.bar.tx > 0:
            return 2
        return 1 if self.op.phase is None and self.bar.completed > 0 else 0

    def diagnose(self, run: Any, waiting: list[int], done: list[int]) -> Violation:
        """The deadlock explained by the most suspicious blocked mbarrier wait."""
        candidates = [w for w in _state(run).waiting if not w.bar.completed > w.target] or [self]
        return max(candidates, key=lambda w: w.suspicion())._explain(run, waiting, done)

    def _explain(self, run: Any, waiting: list[int], done: list[int]) -> Violation:
        bar, thread = self.bar, int(self.lanes[0])
        where = f"(warps {waiting} are blocked" + (f", warps {done} finished)" if done else ")")
        if bar.pending == 0 and bar.tx > 0:
            return Violation("expect-tx",
                             f"thread {thread} waits for phase {self.target} of {bar.name}, which never completes: all "
                             f"{bar.count} arrivals are in, but {bar.tx} of the {bar.declared} declared transaction bytes "
                             f"never arrive (the copies delivered {bar.delivered}): the expect-tx count differs from the "
                             f"bytes of the phase's copies {where}",
                             block=run.block, thread=thread, position=self.op.loc, op=self.op.kind)
        hint = ""
        if self.op.phase is None and bar.completed > 0:
            hint = (f"; the latest completed phase {bar.completed - 1} has parity {(bar.completed - 1) % 2}: if the "
                    f"thread meant that phase, parity {self.parity} is wrong")
        return Violation("deadlock",
                         f"thread {thread} waits (parity {self.parity}) for phase {self.target} of {bar.name}, which "
                         f"needs {bar.count} arrivals; {bar.count - bar.pending} arrived"
                         + (f" and {bar.tx} transaction bytes are pending" if bar.tx > 0 else "")
                         + f"; no running warp can arrive {where}{hint}",
                         block=run.block, thread=thread, position=self.op.loc, op=self.op.kind)


@handles(N.MbarrierWait)
def run_mbarrier_wait(run: Any, op: N.MbarrierWait, env: dict, mask: np.ndarray, lanes: np.ndarray):
    parity = np.broadcast_to(np.asarray(run._eval(op.parity, env), np.int64), lanes.shape) % 2
    phase = None
    if op.phase is not None:
        phase = np.broadcast_to(np.asarray(run._eval(op.phase, env), np.int64), lanes.shape)
    if op.bar.rank is not None and run.rank_of(op.bar, op, env, mask, lanes) is not run:
        raise _fail(run, op, "mbarrier", "wait on the mbarrier of a peer block: mbarrier.try_wait only observes "
                    "the block's own mbarriers (the peer must signal one of this block's)",
                    thread=int(lanes[mask][0]))
    for bar, threads in _bars(run, op, op.bar, env, mask, lanes):
        sel = np.isin(lanes, threads)
        if len(set(parity[sel].tolist())) > 1 or (phase is not None and len(set(phase[sel].tolist())) > 1):
            raise _fail(run, op, "mbarrier", f"the threads of one warp wait for different phases of {bar.name}",
                        thread=int(threads[0]))
        p = int(parity[sel][0])
        latest = bar.completed - 1  # -1: the initial state counts as a completed phase of parity 1
        if phase is not None:
            target = int(phase[sel][0])
            if target % 2 != p:
                raise _fail(run, op, "parity", f"wait on {bar.name}: parity {p} is not the parity of phase {target}",
                            thread=int(threads[0]))
            if target < latest:
                raise _fail(run, op, "parity",
                            f"thread {int(threads[0])} waits for phase {target} of {bar.name}, but phase {latest} "
                            f"completed too: a parity wait cannot see phase {target} any more (it would wait for "
                            f"phase {target + 2}): the waiter lags more than one phase", thread=int(threads[0]))
            if target > latest + 1:
                raise _fail(run, op, "parity",
                            f"thread {int(threads[0])} waits for phase {target} of {bar.name}, but only phases up to "
                            f"{latest} completed: a parity wait returns at once for phase {target - 2} (stale data): "
                            "the waiter is more than one phase ahead", thread=int(threads[0]))
        else:
            target = latest if (latest % 2) == p else latest + 1
        if bar.completed <= target:
            event = MbarrierBlocked(threads, op, bar, target, p)
            _state(run).waiting.append(event)
            yield event
            _state(run).waiting.remove(event)
            if bar.completed - 1 != target:
                raise _fail(run, op, "parity",
                            f"thread {int(threads[0])} waited for phase {target} of {bar.name}, but phases up to "
                            f"{bar.completed - 1} completed before it resumed: it lags more than one phase",
                            thread=int(threads[0]))
        run.hb.acquire(threads + run.base, bar.history.get(target, run.hb.zero()))
        for t in threads + run.base:
            bar.observed[int(t)] = target


# --------------------------------------------------------------------------- landing data


def _land(run: Any, rid: int, writer: int, time: int) -> None:
    """Write the data of async record ``rid``: ``writer`` (a thread or an agent) wrote it at ``time``."""
    rec = run.hb.records[rid]
    mem, a, values, fields, counts, names = rec.payload
    sh = run.hb.shadow(mem)
    mine = sh.pending_write[a] == rid
    a, values = a[mine], values[mine]
    mem.values[a] = values
    mem.written[a] = True
    mem.tag_fields[a] = fields[mine]
    mem.tag_count[a] = counts[mine]
    mem.tag_names[a] = names[mine]
    if mem.buffer.space is N.MemorySpace.GLOBAL:
        _claim_global(run, rec.op, mem, a, rec.thread)
    run.hb.land(mem, a, writer, time, rid)
    rec.done = True


def _claim_global(run: Any, op: N.Op, mem: Any, a: np.ndarray, thread: int) -> None:
    owners = run.state.global_writer_block[mem.buffer.name]
    prior = owners[a]
    clash = (prior >= 0) & (prior != run.linear_block)
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        raise _fail(run, op, "write-conflict", f"%{mem.buffer.name}[{int(a[i])}] is written by block {run.block} and by "
                    f"block #{int(prior[i])} (blocks must write disjoint global memory)", thread=thread)
    owners[a] = run.linear_block


def _gather(run: Any, mem: Any, addr: np.ndarray, ok: np.ndarray, view: N.View | None = None,
            env: dict | None = None):
    """Values and tags of ``addr`` where ``ok`` (known zeros elsewhere: the zero fill of
    out-of-range and predicated-off elements of the source ``view``, with the tags its tag
    function gives them), shape [lanes, n]."""
    values = np.zeros(addr.shape, mem.values.dtype)
    if view is not None and not ok.all():
        fields, counts = run.would_be_tags(view, env, addr.shape)
    else:
        fields = np.zeros((*addr.shape, MAX_TAG_FIELDS), np.int64)
        counts = np.full(addr.shape, _KNOWN_ZERO, np.int64)
    names = np.full(addr.shape, None, object)
    idx = run._index(mem, addr, ok)
    values[ok] = mem.values[idx]
    fields[ok] = mem.tag_fields[idx]
    counts[ok] = mem.tag_count[idx]
    names[ok] = mem.tag_names[idx]
    return values, fields, counts, names


def _payload(mem: Any, addr: np.ndarray, ok: np.ndarray, data: tuple, lane: int) -> tuple:
    row = ok[lane]
    return (mem, addr[lane, row].astype(np.int64), *(d[lane, row] for d in data))


# --------------------------------------------------------------------------- cp.async


def run_cp_async(run: Any, op: N.Copy, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    """Issue: read the source now (predicated-off and out-of-range elements are zero), put the
    destination in flight, and add the copy to each thread's open group."""
    state = _state(run)
    src_mem, src_addr, src_ok = run._access(op, op.src, env, mask, lanes, write=False, pred=op.pred)
    dst_mem, dst_addr, dst_ok = run._access(op, op.dst, env, mask, lanes, write=True, track=False)
    data = _gather(run, src_mem, src_addr, src_ok & dst_ok, op.src, env)
    for i in np.flatnonzero(mask):
        t = int(lanes[i])
        if not dst_ok[i].any():
            continue
        rec = AsyncRecord("cp.async", op, t, what=f"a cp_async_wait of thread {t} after the commit of group {op.handle}",
                          payload=_payload(dst_mem, dst_addr, dst_ok, data, i), extra={"committed": False})
        rid = run.hb.record(rec, run)
        one = _single_lane(mask, i)
        run.hb.async_write_issue(run, op, op.dst, dst_mem, dst_addr, dst_ok & one[:, None], lanes, rid)
        state.open_groups.setdefault(t, []).append(rid)


for _name in ("cp.async", "cp.async.4", "cp.async.8", "cp.async.16"):
    COPY_HANDLERS[_name] = run_cp_async


@handles(N.AsyncCommit)
def run_async_commit(run: Any, op: N.AsyncCommit, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    state = _state(run)
    kind = op.handle.kind
    if kind is N.HandleKind.WGMMA_GROUP:
        interp_wgmma.commit(run, _threads(mask, lanes))
        return
    opened, committed = ((state.open_groups, state.groups) if kind is N.HandleKind.CP_ASYNC_GROUP
                         else (state.open_bulk, state.bulk))
    for t in _threads(mask, lanes):
        group = opened.pop(int(t), [])
        for rid in group:
            run.hb.records[rid].extra["committed"] = True
        committed.setdefault(int(t), []).append(group)


@handles(N.AsyncWait)
def run_async_wait(run: Any, op: N.AsyncWait, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    state = _state(run)
    if op.group is N.HandleKind.WGMMA_GROUP:
        interp_wgmma.wait(run, _threads(mask, lanes), op.pending)
        return
    hb = run.hb
    for t in _threads(mask, lanes):
        t = int(t)
        if op.group is N.HandleKind.CP_ASYNC_GROUP:
            groups = state.groups.get(t, [])
            while len(groups) > op.pending:
                for rid in groups.pop(0):
                    _land(run, rid, t + run.base, hb.now(t + run.base))
        elif op.group is N.HandleKind.TMA_STORE_GROUP:
            groups = state.bulk.get(t, [])
            for group in groups[: max(len(groups) - op.pending, 0)]:
                for rid in group:
                    rec = hb.records[rid]
                    src_mem, src_addr = rec.extra["source"]
                    hb.finish_read(src_mem, src_addr, rid)
                    if not op.read and not rec.done:
                        _land(run, rid, t + run.base, hb.now(t + run.base))
            if not op.read:
                del groups[: max(len(groups) - op.pending, 0)]


# --------------------------------------------------------------------------- TMA


def _multicast_targets(run: Any, op: N.Copy, env: dict, lane: int, lanes: np.ndarray) -> list[Any]:
    """The blocks a TMA load delivers to: the issuing block, or every block of the ``multicast``
    mask (bit r = cluster rank r)."""
    if op.multicast is None:
        return [run]
    value = np.asarray(run._eval(op.multicast, env), np.int64)
    mask_bits = int(np.broadcast_to(value, lanes.shape)[lane])
    size = run.interp.cluster_size
    if mask_bits <= 0 or mask_bits >> size:
        raise _fail(run, op, "cluster", f"multicast mask {mask_bits:#b} names blocks outside the cluster of {size} "
                    f"(bits 0..{size - 1}) or none", thread=int(lanes[lane]))
    return [run.peer(r, op) for r in range(size) if mask_bits >> r & 1]


def run_tma_load(run: Any, op: N.Copy, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    """Issue: read the global box now (out-of-range parts as zero), put the shared destination in
    flight, and count the box's bytes on the current phase of the mbarrier; the data lands when
    that phase completes.  A multicast load does this in every block of its mask: the box lands
    at the same shared-memory address in each, and each block's mbarrier at the barrier's
    address receives the bytes (complete_tx on the receiver's barrier)."""
    if op.mbarrier is None:
        raise ArgusError("interpreter: a tma.load without an mbarrier (inside range(..., pipeline=S) the "
                         "pipelining policy supplies it; was the policy applied?)", position=op.loc)
    for i in np.flatnonzero(mask):
        one = _single_lane(mask, i)
        t = int(lanes[i])
        src_mem, src_addr, src_ok = run._access(op, op.src, env, one, lanes, write=False, pred=op.pred)
        data = None
        for target in _multicast_targets(run, op, env, int(i), lanes):
            dst_mem = target.memories.get(op.dst.buffer.name)
            if dst_mem is None:
                raise _fail(run, op, "cluster", f"multicast into block {target.block} before it allocated "
                            f"%{op.dst.buffer.name}", thread=t)
            dst_addr, dst_valid = run._addresses(op.dst, env, lanes)
            dst_ok = dst_valid & one[:, None]
            size = dst_mem.values.shape[-1]
            if not dst_ok[i].all() or ((dst_addr[i] < 0) | (dst_addr[i] >= size)).any():
                raise _fail(run, op, "out-of-bounds", "a TMA box must land entirely inside its shared-memory tile",
                            thread=t)
            if data is None:
                data = _gather(run, src_mem, src_addr, src_ok, op.src, env)
            ((bar, _),) = _bars(run, op, op.mbarrier, env, one, lanes, async_proxy=True, owner=target)
            remote = target is not run
            declared = bar.armed_phase() if remote else bar.last_declared.get(t + run.base)
            rec = AsyncRecord("tma.load", op, t, what=f"phase {bar.completed} of mbarrier {bar.name}", barrier=bar,
                              phase=bar.completed, declared_phase=declared,
                              payload=_payload(dst_mem, dst_addr, dst_ok, data, i), target=target)
            if op.multicast is not None and remote:
                rec.extra["multicast_from"] = f"block {run.block}"
            rid = run.hb.record(rec, run)
            run.hb.async_write_issue(run, op, op.dst, dst_mem, dst_addr, dst_ok, lanes, rid)
            nbytes = int(dst_ok[i].sum()) * (dst_mem.buffer.dtype.bits // 8)
            bar.copies.append(rid)
            bar.tx -= nbytes
            bar.delivered += nbytes
            if bar.pending == 0 and bar.tx < 0:
                origin = f" (a multicast from block {run.block})" if remote else ""
                raise _fail(run, op, "expect-tx",
                            f"this copy{origin} delivers {nbytes} bytes to phase {bar.completed} of {bar.name}, whose "
                            f"arrivals are complete: its copies deliver {bar.delivered} bytes but only {bar.declared} "
                            "were declared (expect-tx)" + (": the receiving block's barrier was not armed for the "
                                                           "multicast bytes" if remote else ""), thread=t)
            _complete(run, bar)


def run_tma_store(run: Any, op: N.Copy, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    """Issue: read the shared tile now (it must be fenced toward the async proxy), keep it
    reserved until the group's read completes, and write the global box at the group's wait."""
    state = _state(run)
    for i in np.flatnonzero(mask):
        one = _single_lane(mask, i)
        t = int(lanes[i])
        src_mem, src_addr, src_ok = run._access(op, op.src, env, one, lanes, write=False, track=False)
        dst_mem, dst_addr, dst_ok = run._access(op, op.dst, env, one, lanes, write=True, pred=op.pred, track=False)
        run.hb.check_async_proxy_read(run, op, op.src, src_mem, src_addr, src_ok, lanes, "a TMA store")
        data = _gather(run, src_mem, src_addr, src_ok & dst_ok)
        rec = AsyncRecord("tma.store", op, t, what=f"a tma_store_wait of thread {t} after the commit of {op.handle}",
                          payload=_payload(dst_mem, dst_addr, dst_ok, data, i),
                          extra={"source": (src_mem, src_addr[i, src_ok[i]].astype(np.int64))})
        rid = run.hb.record(rec, run)
        run.hb.async_read_issue(run, op, op.src, src_mem, src_addr, src_ok, lanes, rid)
        run.hb.async_write_issue(run, op, op.dst, dst_mem, dst_addr, dst_ok, lanes, rid)
        state.open_bulk.setdefault(t, []).append(rid)


COPY_HANDLERS["tma.load"] = run_tma_load
COPY_HANDLERS["tma.store"] = run_tma_store


# --------------------------------------------------------------------------- fences, cluster, registers


@handles(N.Fence)
def run_fence(run: Any, op: N.Fence, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    threads = _threads(mask, lanes)
    if op.fence == "proxy.async":
        run.hb.proxy_fence(threads + run.base)
    elif op.fence == "mbarrier_init":
        for bar in _state(run).bars.values():
            if bar.init_thread in threads and bar.fenced_at is None:
                bar.fenced_at = run.hb.now(bar.init_column)
    elif op.fence == "wgmma":
        interp_wgmma.fence(run, threads)
    # other fences (acq_rel, sc) order nothing the interpreter tracks beyond program order


@handles(N.ClusterBarrier)
def run_cluster_barrier(run: Any, op: N.ClusterBarrier, env: dict, mask: np.ndarray, lanes: np.ndarray):
    if not mask.all():
        idle = lanes[~mask]
        raise _fail(run, op, "barrier", f"cluster barrier reached under divergence: thread {int(idle[0])} of the same "
                    "warp is not here", thread=int(lanes[mask][0]), other=int(idle[0]))
    yield Blocked(CLUSTER_BARRIER, None, lanes, op)


@handles(N.SetMaxNReg)
def run_setmaxnreg(run: Any, op: N.SetMaxNReg, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    if not mask.all():
        raise _fail(run, op, "collective", "setmaxnreg under divergence: every thread of the warpgroup must execute it",
                    thread=int(lanes[mask][0]))
    _state(run).registers[int(lanes[0]) // WARP] = (int(op.registers), op)


# --------------------------------------------------------------------------- exit


def _at_exit(run: Any) -> None:
    """What must hold when every warp of a block has finished."""
    state = run.__dict__.get("_async")
    if state is None:
        return
    hb = run.hb
    for rec in hb.pending_records():
        if rec.target is not None and rec.target is not run:
            continue  # another block's (a peer of the cluster): checked when that block exits
        if rec.kind == "tma.store":
            src_mem, src_addr = rec.extra["source"]
            if (hb.shadow(src_mem).pending_read[src_addr] != 0).any():
                raise _fail(run, rec.op, "async", f"the TMA store issued by thread {rec.thread} may still be reading "
                            "shared memory when the block exits (no tma_store_wait completes its group)",
                            thread=rec.thread)
            _land(run, rec.id, rec.column, hb.now(rec.column))
            continue
        extra = f" ({rec.barrier.describe()})" if rec.barrier is not None else ""
        raise _fail(run, rec.op, "async", f"the {rec.kind} issued by thread {rec.thread} is still in flight when the "
                    f"block exits: nothing completes it (it completes with {rec.what}){extra}", thread=rec.thread)
    knows = hb.clock[run.base:run.base + run.threads].max(axis=0)
    for bar in state.bars.values():
        for column, (time, op) in bar.remote.items():
            if knows[column] < time:
                raise hb.violation("cluster", f"block {run.block} exits while the arrive of {hb.who(column)} on "
                                   f"{bar.name} at {op.loc} is not ordered before the exit (no cluster barrier after "
                                   "it): the peer may signal an mbarrier that no longer exists", op=op, thread=column)
        op = bar.last_arrive or bar.init_op
        if bar.pending == 0 and bar.tx > 0:
            raise _fail(run, op, "expect-tx", f"the block exits with phase {bar.completed} of {bar.name} incomplete: "
                        f"all {bar.count} arrivals are in, but {bar.tx} of the {bar.declared} declared transaction "
                        f"bytes never arrive (the copies delivered {bar.delivered})", thread=bar.init_thread)
        if bar.pending != bar.count or bar.tx:
            raise _fail(run, op, "mbarrier", f"the block exits in the middle of phase {bar.completed} of {bar.name}: "
                        f"{bar.count - bar.pending} of {bar.count} arrivals"
                        + (f", {bar.tx} transaction bytes pending" if bar.tx else "")
                        + " (arrivals per phase must equal the init count)", thread=bar.init_thread)
    _check_registers(run, state)


def _check_registers(run: Any, state: _AsyncBlock) -> None:
    if not state.registers:
        return
    warps = (run.threads + WARP - 1) // WARP
    for w, (regs, op) in state.registers.items():
        group = [g for g in range(w - w % 4, min(w - w % 4 + 4, warps))]
        for g in group:
            other = state.registers.get(g)
            if other is None or other[0] != regs:
                raise _fail(run, op, "collective", f"setmaxnreg {regs} in warp {w} but warp {g} of the same warpgroup "
                            f"{'does not execute it' if other is None else f'sets {other[0]}'}", thread=w * WARP)
    used = sum(regs * WARP for regs, _ in state.registers.values())
    if used > REGISTER_FILE:
        regs, op = next(iter(state.registers.values()))
        raise _fail(run, op, "collective", f"the warps' register budgets add up to {used} registers, more than the "
                    f"{REGISTER_FILE} of the register file", thread=0)


BLOCK_EXIT_HOOKS.append(_at_exit)
