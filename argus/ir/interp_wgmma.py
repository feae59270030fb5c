"""wgmma asynchrony in the reference interpreter.

A ``wgmma.mma_async`` computes its result when issued, but until the ``wgmma_wait`` that
completes its group (``wgmma_commit`` closes the group) it still *owns* its accumulator
registers and *reads* its shared-memory operands.  Rules enforced, per thread:

* reading or writing an accumulator element of an in-flight wgmma by anything but another wgmma
  (wgmmas chain on one accumulator in hardware order) is an ``async`` violation;
* writing a register A operand (``.rs`` atoms) of an in-flight wgmma is an ``async`` violation:
  the tensor cores may still read it (reading it is fine);
* writing a shared-memory operand of an in-flight wgmma (a TMA load refilling the stage, a store)
  is an ``async`` violation (the operand is a pending asynchronous read, as for a TMA store);
* a wgmma that names a handle (lowered as an asynchronous ``wgmma.mma_async`` without a fence
  of its own) whose accumulator or register A operand was written by ordinary code since the
  thread's last ``wgmma_fence`` is a ``fence`` violation (a wgmma without a handle is lowered
  with its own ``wgmma.fence``);
* a wgmma never committed and waited for is reported at block exit (``async``).

A wait completes a group for the waiting thread: its accumulator registers are released at
once, and the shared operands count as read by that thread at the wait (so a write of the
operand must be ordered after every reader's wait by happens-before: releasing a stage between
the commit and the wait is a ``race`` whatever the schedule); the operands stop being pending
asynchronous reads when every thread of the warpgroup has waited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argus.ir import nodes as N
from argus.ir.happens_before import AsyncRecord
from argus.ir.interpreter import REGISTER_ACCESS_HOOKS, InterpreterError, Violation


@dataclass
class _WgmmaBlock:
    regs: dict[str, np.ndarray] = field(default_factory=dict)  # buffer -> [threads, size] record (0 = free)
    a_regs: dict[str, np.ndarray] = field(default_factory=dict)  # register A operands: buffer -> the same
    dirty: dict[str, np.ndarray] = field(default_factory=dict)  # buffer -> [threads] written since wgmma_fence
    open: dict[int, list[int]] = field(default_factory=dict)  # thread -> records issued since its last commit
    committed: dict[int, list[list[int]]] = field(default_factory=dict)  # thread -> committed groups


def _state(run: Any) -> _WgmmaBlock:
    state = run.__dict__.get("_wgmma")
    if state is None:
        state = run.__dict__["_wgmma"] = _WgmmaBlock()
    return state


def _is_wgmma(op: N.Op) -> bool:
    return isinstance(op, N.Mma) and op.atom.startswith("wgmma")


def _fail(run: Any, op: N.Op, kind: str, message: str, view: N.View, lanes: np.ndarray, where: np.ndarray,
          other: int | None = None) -> InterpreterError:
    _, coords = run._elements(view)
    lane, element = (int(x) for x in where)
    return InterpreterError(Violation(kind, message, block=run.block, thread=int(lanes[lane]), other_thread=other,
                                      element=coords[element], position=op.loc, op=op.kind))


def check_register_access(run: Any, op: N.Op, mem: Any, view: N.View, addr: np.ndarray, ok: np.ndarray,
                          lanes: np.ndarray, write: bool) -> None:
    state = run.__dict__.get("_wgmma")
    name = mem.buffer.name
    if _is_wgmma(op):
        if state is None or write or op.handle is None:
            return
        dirty = state.dirty.get(name)
        if dirty is not None:
            bad = ok & dirty[lanes][:, None]
            if bad.any():
                raise _fail(run, op, "fence", f"{op.atom} reads %{name}, which this thread wrote since its last "
                            "wgmma_fence (wgmma.fence must order register writes before the wgmma that reads them)",
                            view, lanes, np.argwhere(bad)[0])
        return
    if state is None:
        state = _state(run)
    inflight = state.regs.get(name)
    if inflight is not None:
        rows = np.broadcast_to(lanes[:, None], addr.shape)
        owner = np.where(ok, inflight[rows, np.clip(addr, 0, inflight.shape[1] - 1)], 0)
        if owner.any():
            where = np.argwhere(owner)[0]
            rec = run.hb.records[int(owner[where[0], where[1]])]
            raise _fail(run, op, "async", f"{'write' if write else 'read'} of accumulator %{name}[{int(addr[tuple(where)])}] "
                        f"while the {rec.op.atom} issued at {rec.op.loc} is in flight (it completes with {rec.what})",
                        view, lanes, where, other=rec.thread)
    reading = state.a_regs.get(name)
    if write and reading is not None:
        rows = np.broadcast_to(lanes[:, None], addr.shape)
        owner = np.where(ok, reading[rows, np.clip(addr, 0, reading.shape[1] - 1)], 0)
        if owner.any():
            where = np.argwhere(owner)[0]
            rec = run.hb.records[int(owner[where[0], where[1]])]
            raise _fail(run, op, "async", f"write of %{name}[{int(addr[tuple(where)])}], the A operand of the "
                        f"{rec.op.atom} issued at {rec.op.loc}, while it is in flight (the tensor cores may still "
                        f"read it until {rec.what})", view, lanes, where, other=rec.thread)
    if write:
        dirty = state.dirty.setdefault(name, np.zeros(run.threads, bool))
        dirty[lanes[ok.any(axis=1)]] = True


REGISTER_ACCESS_HOOKS.append(check_register_access)


def fence(run: Any, threads: np.ndarray) -> None:
    """``wgmma.fence`` by ``threads``."""
    for dirty in _state(run).dirty.values():
        dirty[threads] = False


def issue(run: Any, op: N.Mma, spec: Any, parts: dict[int, dict], base: int) -> None:
    """The group's wgmma was issued (its result already written): put its operands in flight."""
    from argus.ir.interp_async import _state as async_state

    async_state(run)  # block-exit check of pending records
    state = _state(run)
    threads = set(range(base, base + spec.threads))
    shared = []
    for which in ("a", "b"):
        if spec.source(which) == "shared":
            tile = parts[max(parts)][which]
            shared.append((tile.mem, np.asarray(tile.addr, np.int64)))
    rec = AsyncRecord("wgmma", op, base, what=f"a wgmma_wait of the warpgroup of thread {base} after the commit "
                      "of its group", extra={"threads": threads, "shared": shared})
    rid = run.hb.record(rec, run)
    for mem, addr in shared:
        run.hb.shadow(mem).pending_read[addr] = rid
    for p in parts.values():
        frag = p["d"]
        regs = state.regs.setdefault(frag.mem.buffer.name, np.zeros(frag.mem.values.shape, np.int64))
        regs[frag.lanes[:, None], frag.addr] = rid
        if spec.source("a") != "shared":  # A in registers: read by the tensor cores until the wait
            frag = p["a"]
            regs = state.a_regs.setdefault(frag.mem.buffer.name, np.zeros(frag.mem.values.shape, np.int64))
            regs[frag.lanes[:, None], frag.addr] = rid
    for t in threads:
        state.open.setdefault(t, []).append(rid)


def commit(run: Any, threads: np.ndarray) -> None:
    state = _state(run)
    for t in threads:
        state.committed.setdefault(int(t), []).append(state.open.pop(int(t), []))


def wait(run: Any, threads: np.ndarray, pending: int) -> None:
    state = _state(run)
    retired: dict[int, list[int]] = {}
    for t in threads:
        t = int(t)
        groups = state.committed.get(t, [])
        while len(groups) > pending:
            for rid in groups.pop(0):
                retired.setdefault(rid, []).append(t)
    for rid, ts in retired.items():
        _retire(run, state, rid, np.asarray(ts, np.int64))


def _retire(run: Any, state: _WgmmaBlock, rid: int, threads: np.ndarray) -> None:
    """The wgmma ``rid`` is complete for ``threads`` (their wait returned): its accumulator is
    theirs again, and its shared operands count as read by each of them *now*, so a later write
    must be ordered after these waits (a stage released before them races with its refill)."""
    for regs in (*state.regs.values(), *state.a_regs.values()):
        rows = regs[threads]
        rows[rows == rid] = 0
        regs[threads] = rows
    hb = run.hb
    rec = hb.records[rid]
    for mem, addr in rec.extra["shared"]:
        hb._record_read(hb.shadow(mem), np.tile(addr, len(threads)), np.repeat(threads + run.base, len(addr)))
    rec.extra["threads"].difference_update(int(t) for t in threads)
    if not rec.extra["threads"]:
        for mem, addr in rec.extra["shared"]:
            hb.finish_read(mem, addr, rid)
        rec.done = True
