"""Happens-before for the reference interpreter: vector clocks and per-element shadow state.

Every thread of a block carries a vector clock (one component per thread, plus one per
*asynchronous agent*: the copy engine behind an mbarrier, which writes the data of TMA loads).
An access ``x`` by thread ``u`` is ordered after an earlier access ``y`` by thread ``w`` at ``w``'s
local time ``s`` exactly when ``clock[u][w] >= s``.  Clocks only move at synchronisation:

==============================  ===========================================================
block / named barrier           the participants' clocks are joined (each gets the maximum)
mbarrier arrive                 the arriving thread's clock joins the phase's release clock
mbarrier phase completion       the phase's release clock gets the agent's new time; the
                                TMA data of that phase is written by the agent at that time
mbarrier wait                   the waiter joins the release clock of the phase it observed
cp.async wait_group             the issuing thread writes its completed copies' data at its
                                own current time (others see it after a later barrier)
==============================  ===========================================================

After each release (barrier, arrive) a thread's own component advances, so a later write by it
is not ordered before threads that synchronised with it earlier.

The blocks of a cluster run together and share one set of clocks: the clock column of thread
``t`` of the block with cluster rank ``r`` is ``r * threads + t`` (callers pass block-local thread
ids with the run's ``base``).  Cluster-wide edges come from the cluster barrier (all threads of
the cluster join), remote mbarrier arrives (the arriving peer thread joins the phase's release
clock) and multicast copies (written by the copy engine of each destination block's mbarrier).
Distributed-shared-memory accesses are checked against the shadow state of the peer's buffer, so
a race between blocks is found exactly like one inside a block.

Shadow state per buffer element: the last writer and its time, the time of the last read by each
thread (reads are cleared by an ordered write), the pending asynchronous operation that will write
(or is reading) the element, and for shared memory whether the last generic-proxy write has been
made visible to the async proxy by a ``fence.proxy.async`` of its writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argus.ir import nodes as N


@dataclass(eq=False)
class AsyncRecord:
    """One issued asynchronous operation whose effect on memory is still pending.

    ``what`` says what completes it (``"group !g0"``, ``"phase 2 of mbarrier %full[1]"``...).
    """

    kind: str  # "cp.async", "tma.load", "tma.store"
    op: N.Op
    thread: int  # the issuing thread (block-local id)
    what: str = ""
    barrier: Any = None  # the mbarrier state a TMA load completes with
    phase: int | None = None  # the phase of ``barrier`` it joined
    declared_phase: int | None = None  # the issuer's latest expect-tx phase on ``barrier`` at issue
    done: bool = False
    payload: Any = None  # what the handler needs to complete it
    extra: dict = field(default_factory=dict)
    id: int = 0  # index in HappensBefore.records
    column: int = -1  # the issuing thread's clock column (cluster-wide id)
    target: Any = None  # the block run whose memory the operation writes (multicast: one record per block)


@dataclass
class Shadow:
    """Happens-before shadow state of one buffer within one block."""

    writer: np.ndarray  # int64 [size]: clock column of the last writer, -1 = none (launch input)
    write_clock: np.ndarray  # int64 [size]
    write_record: np.ndarray  # int64 [size]: async record that delivered the data (0 = none)
    pending_write: np.ndarray  # int64 [size]: async record that will write the element (0 = none)
    pending_read: np.ndarray  # int64 [size]: async record still reading the element (0 = none)
    unfenced: np.ndarray | None  # bool [size]: shared memory written by the generic proxy, not fenced
    read_clock: np.ndarray | None = None  # int64 [rows, readers]: time of each reader's last read
    readers: np.ndarray | None = None  # int64 [readers]: the thread of each read_clock column
    column: np.ndarray | None = None  # int64 [threads]: each thread's read_clock column, -1 = none yet
    memory: Any = None  # the interpreter memory this shadows
    row: np.ndarray | None = None  # int64 [size]: each element's read_clock row, -1 = never read

    # ``read_clock`` has a row per element some thread of this block read, not per element of the
    # buffer: a block reads a few tiles of a large global tensor, and a dense [size, readers]
    # table per block made the interpreter quadratic in the tensor size.

    def read_rows(self, a: np.ndarray, create: bool = False) -> np.ndarray:
        """Rows of elements ``a`` in ``read_clock`` (-1 where never read, unless ``create``)."""
        if self.row is None:
            self.row = np.full(len(self.writer), -1, np.int64)
        rows = self.row[a]
        if create and (rows < 0).any():
            new = np.unique(a[rows < 0])
            start = 0 if self.read_clock is None else len(self.read_clock)
            self.row[new] = np.arange(start, start + len(new))
            width = 0 if self.readers is None else len(self.readers)
            added = np.zeros((len(new), width), np.int64)
            self.read_clock = added if self.read_clock is None else np.concatenate([self.read_clock, added], axis=0)
            rows = self.row[a]
        return rows

    def reads_at(self, a: np.ndarray) -> np.ndarray:
        """[len(a), readers]: each reader's last read time of elements ``a`` (0 = none)."""
        rows = self.read_rows(a)
        out = np.zeros((len(a), len(self.readers)), np.int64)
        hit = rows >= 0
        out[hit] = self.read_clock[rows[hit]]
        return out

    def clear_reads(self, a: np.ndarray) -> None:
        if self.read_clock is None:
            return
        rows = self.read_rows(a)
        self.read_clock[rows[rows >= 0]] = 0

    def reads_of(self, column: int) -> np.ndarray:
        """[size]: reader ``column``'s last read time of every element (0 = none)."""
        out = np.zeros(len(self.writer), np.int64)
        if self.read_clock is not None:
            hit = np.flatnonzero(self.row >= 0)
            out[hit] = self.read_clock[self.row[hit], column]
        return out

    def reader_columns(self, threads: np.ndarray, block_threads: int) -> np.ndarray:
        """Columns of ``threads`` in ``read_clock`` (a column is added for a thread's first read:
        buffers read by few threads, such as a TMA issuer's global source, stay small)."""
        if self.column is None:
            self.column = np.full(block_threads, -1, np.int64)
        new = np.unique(threads[self.column[threads] < 0])
        if len(new):
            self.column[new] = np.arange(len(new)) + (0 if self.readers is None else len(self.readers))
            rows = 0 if self.read_clock is None else len(self.read_clock)
            added = np.zeros((rows, len(new)), np.int64)
            self.read_clock = added if self.read_clock is None else np.concatenate([self.read_clock, added], axis=1)
            self.readers = new if self.readers is None else np.concatenate([self.readers, new])
        return self.column[threads]

    @staticmethod
    def create(size: int, shared: bool) -> Shadow:
        return Shadow(np.full(size, -1, np.int64), np.zeros(size, np.int64), np.zeros(size, np.int64),
                      np.zeros(size, np.int64), np.zeros(size, np.int64),
                      np.zeros(size, bool) if shared else None)


class HappensBefore:
    """Vector clocks of the threads of a block, or of every block of a cluster (and of async
    agents), and the shadow state of their memories.

    ``threads`` is the number of threads of one block; ``blocks`` the cluster's blocks by rank
    (one block when the launch has no clusters).  Thread ids passed in are clock columns
    (``base + t``); violations are reported with the block and block-local thread.
    """

    def __init__(self, threads: int, block: tuple[int, ...], blocks: tuple[tuple[int, ...], ...] | None = None) -> None:
        self.block_threads = threads
        self.blocks = tuple(blocks) if blocks else (block,)
        threads = threads * len(self.blocks)
        self.threads = threads
        self.block = block
        self.clock = np.zeros((threads, threads), np.int64)
        np.fill_diagonal(self.clock, 1)
        self.agent_names: list[str] = []
        self.agent_time: list[int] = []
        self.shadows: dict[int, Shadow] = {}
        self.records: list[AsyncRecord | None] = [None]  # id 0 means "none"

    def violation(self, kind: str, message: str, *, op: N.Op, thread: int | None = None,
                  other_thread: int | None = None, **where: Any) -> Exception:
        """The interpreter error for a failed check (block, thread(s), element, program point);
        ``thread`` and ``other_thread`` are clock columns."""
        from argus.ir.interpreter import InterpreterError, Violation

        block, other_block = self.block, None
        if thread is not None:
            block, thread = self.locate(thread)
        if other_thread is not None:
            where_other, other_thread = self.locate(other_thread)
            other_block = where_other if where_other != block else None
        return InterpreterError(Violation(kind, message, block=block, thread=thread, other_thread=other_thread,
                                          other_block=other_block, position=op.loc, op=op.kind, **where))

    # ---------------------------------------------------------------- cluster-wide thread ids

    @property
    def clustered(self) -> bool:
        return len(self.blocks) > 1

    def locate(self, column: int) -> tuple[tuple[int, ...], int]:
        """(block, block-local thread) of a thread's clock column."""
        column = int(column)
        if column >= self.threads:
            return self.block, column
        return self.blocks[column // self.block_threads], column % self.block_threads

    def who(self, column: int) -> str:
        """``thread t`` (``thread t of block b`` in a cluster) for a clock column."""
        if int(column) >= self.threads:
            return f"the {self.agent_names[int(column) - self.threads]}"
        block, thread = self.locate(column)
        return f"thread {thread} of block {block}" if self.clustered else f"thread {thread}"

    def now(self, column: int) -> int:
        """A thread's own current time."""
        return int(self.clock[column, column])

    # ---------------------------------------------------------------- clocks

    @property
    def width(self) -> int:
        return self.clock.shape[1]

    def new_agent(self, name: str) -> int:
        """A new asynchronous agent (a clock column no thread owns); returns its column."""
        self.clock = np.pad(self.clock, ((0, 0), (0, 1)))
        self.agent_names.append(name)
        self.agent_time.append(0)
        return self.width - 1

    def tick(self, agent: int) -> int:
        """Advance ``agent``'s time; returns the new time."""
        i = agent - self.threads
        self.agent_time[i] += 1
        return self.agent_time[i]

    def _widen(self, vector: np.ndarray) -> np.ndarray:
        if len(vector) < self.width:
            vector = np.pad(vector, (0, self.width - len(vector)))
        return vector

    def zero(self) -> np.ndarray:
        return np.zeros(self.width, np.int64)

    def release(self, threads: np.ndarray) -> np.ndarray:
        """The join of ``threads``' clocks (what a later acquire learns); their own times advance."""
        joined = self.clock[threads].max(axis=0)
        self.clock[threads, threads] += 1
        return joined

    def acquire(self, threads: np.ndarray, vector: np.ndarray) -> None:
        self.clock[threads] = np.maximum(self.clock[threads], self._widen(vector)[None, :])

    def barrier(self, threads: np.ndarray) -> None:
        """``threads`` synchronise: each learns everything any of them knew."""
        threads = np.asarray(threads, np.int64)
        self.clock[threads] = self.clock[threads].max(axis=0)[None, :]
        self.clock[threads, threads] += 1

    # ---------------------------------------------------------------- shadow state

    def shadow(self, mem: Any) -> Shadow:
        key = id(mem)  # one shadow per memory: each block of a cluster has its own shared buffers
        sh = self.shadows.get(key)
        if sh is None:
            sh = self.shadows[key] = Shadow.create(mem.values.shape[-1], mem.buffer.space is N.MemorySpace.SHARED)
            sh.memory = mem  # keeps the memory (and so its id) alive as long as its shadow
        return sh

    def record(self, rec: AsyncRecord, run: Any = None) -> int:
        """Register ``rec`` (issued by thread ``rec.thread`` of ``run``); returns its id."""
        rec.id = len(self.records)
        if rec.column < 0:
            rec.column = rec.thread + (run.base if run is not None else 0)
        if rec.target is None:
            rec.target = run
        self.records.append(rec)
        return rec.id

    def pending_records(self) -> list[AsyncRecord]:
        return [r for r in self.records[1:] if r is not None and not r.done]

    # ---------------------------------------------------------------- checks

    def access(self, run: Any, op: N.Op, view: N.View, mem: Any, addr: np.ndarray, ok: np.ndarray,
               lanes: np.ndarray, write: bool) -> None:
        """Check and record an ordinary (synchronous) access by ``lanes`` to ``addr[ok]``."""
        sh = self.shadow(mem)
        threads, a, where = self._flat(addr, ok, lanes, run)
        if not len(a):
            return
        self._check_pending(run, op, view, mem, sh, a, threads, where, write)
        self._check_ordered(run, op, view, mem, sh, a, threads, where, write)
        if write:
            self._check_duplicates(run, op, mem, a, threads)
            self._record_write(sh, a, threads, self.clock[threads, threads])
        else:
            self._record_read(sh, a, threads)

    def check_in_flight(self, run: Any, op: N.Op, view: N.View, mem: Any, addr: np.ndarray, ok: np.ndarray,
                        lanes: np.ndarray) -> None:
        """A look at ``addr[ok]`` that is not an access (a tag assertion): only data still in flight
        is an error (its value and tags are not there yet)."""
        threads, a, where = self._flat(addr, ok, lanes, run)
        if len(a):
            self._check_pending(run, op, view, mem, self.shadow(mem), a, threads, where, False)

    def async_write_issue(self, run: Any, op: N.Op, view: N.View, mem: Any, addr: np.ndarray, ok: np.ndarray,
                          lanes: np.ndarray, record: int) -> None:
        """An asynchronous write is issued: it must be ordered like a write by its issuers now, and
        the elements are in flight (any access before completion is a violation)."""
        sh = self.shadow(mem)
        threads, a, where = self._flat(addr, ok, lanes, run)
        if not len(a):
            return
        self._check_pending(run, op, view, mem, sh, a, threads, where, True)
        self._check_ordered(run, op, view, mem, sh, a, threads, where, True)
        self._check_duplicates(run, op, mem, a, threads)
        sh.pending_write[a] = record

    def async_read_issue(self, run: Any, op: N.Op, view: N.View, mem: Any, addr: np.ndarray, ok: np.ndarray,
                         lanes: np.ndarray, record: int) -> None:
        """An asynchronous read (TMA store source) is issued: checked and recorded as a read now;
        the elements may not be written until the read completes."""
        self.access(run, op, view, mem, addr, ok, lanes, write=False)
        sh = self.shadow(mem)
        _, a, _ = self._flat(addr, ok, lanes, run)
        sh.pending_read[a] = record

    def land(self, mem: Any, a: np.ndarray, writer: int, time: int, record: int) -> None:
        """The pending write ``record`` to elements ``a`` completes: ``writer`` wrote them at ``time``."""
        sh = self.shadow(mem)
        mine = sh.pending_write[a] == record
        a = a[mine]
        sh.pending_write[a] = 0
        sh.writer[a] = writer
        sh.write_clock[a] = time
        sh.write_record[a] = record
        sh.clear_reads(a)
        if sh.unfenced is not None:
            sh.unfenced[a] = False

    def finish_read(self, mem: Any, a: np.ndarray, record: int) -> None:
        sh = self.shadow(mem)
        a = a[sh.pending_read[a] == record]
        sh.pending_read[a] = 0

    def proxy_fence(self, threads: np.ndarray) -> None:
        """``fence.proxy.async`` by ``threads``: their generic writes become visible to the async proxy."""
        for sh in self.shadows.values():
            if sh.unfenced is not None:
                sh.unfenced &= ~np.isin(sh.writer, threads)

    def check_async_proxy_read(self, run: Any, op: N.Op, view: N.View, mem: Any, addr: np.ndarray,
                               ok: np.ndarray, lanes: np.ndarray, reader: str) -> None:
        """A TMA store / wgmma reads shared memory through the async proxy: every element written by
        an ordinary store must have been fenced (``fence.proxy.async``) by its writer."""
        sh = self.shadow(mem)
        if sh.unfenced is None:
            return
        threads, a, where = self._flat(addr, ok, lanes, run)
        bad = sh.unfenced[a]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise self.violation(
                "proxy", f"{reader} reads %{mem.buffer.name}[{int(a[i])}] written by {self.who(int(sh.writer[a[i]]))} "
                "through ordinary stores with no fence.proxy.async between the write and this read",
                thread=int(threads[i]), other_thread=int(sh.writer[a[i]]), element=self._element(run, view, where, i),
                op=op)

    # ---------------------------------------------------------------- internals

    @staticmethod
    def _flat(addr: np.ndarray, ok: np.ndarray, lanes: np.ndarray, run: Any = None):
        base = getattr(run, "base", 0)
        threads = np.broadcast_to(np.asarray(lanes, np.int64)[:, None] + base, addr.shape)[ok]
        where = np.argwhere(ok)
        return threads, addr[ok].astype(np.int64), where

    @staticmethod
    def _element(run: Any, view: N.View, where: np.ndarray, i: int):
        _, coords = run._elements(view)
        return coords[int(where[i][1])]

    def describe_writer(self, sh: Shadow, element: int) -> str:
        w = int(sh.writer[element])
        if w < self.threads:
            return self.who(w)
        rec = self.records[int(sh.write_record[element])]
        origin = f", issued by {self.who(rec.column)} at {rec.op.loc}" if rec is not None else ""
        return f"{self.who(w)}{origin}"

    def _check_pending(self, run: Any, op: N.Op, view: N.View, mem: Any, sh: Shadow, a: np.ndarray,
                       threads: np.ndarray, where: np.ndarray, write: bool) -> None:
        pending = sh.pending_write[a]
        if pending.any():
            i = int(np.flatnonzero(pending)[0])
            rec = self.records[int(pending[i])]
            kind, reason = classify_in_flight(self, rec, int(threads[i]))
            raise self.violation(
                kind, f"{'write' if write else 'read'} of %{mem.buffer.name}[{int(a[i])}] while the {rec.kind} issued by "
                f"{self.who(rec.column)} at {rec.op.loc} is in flight (it completes with {rec.what}){reason}",
                thread=int(threads[i]), other_thread=rec.column, element=self._element(run, view, where, i), op=op)
        if write:
            reading = sh.pending_read[a]
            if reading.any():
                i = int(np.flatnonzero(reading)[0])
                rec = self.records[int(reading[i])]
                raise self.violation(
                    "async", f"write of %{mem.buffer.name}[{int(a[i])}] while the {rec.kind} issued by "
                    f"{self.who(rec.column)} at {rec.op.loc} may still be reading it (it completes with {rec.what})",
                    thread=int(threads[i]), other_thread=rec.column, element=self._element(run, view, where, i), op=op)

    def _check_ordered(self, run: Any, op: N.Op, view: N.View, mem: Any, sh: Shadow, a: np.ndarray,
                       threads: np.ndarray, where: np.ndarray, write: bool) -> None:
        if write:  # write-after-read first: it names the reader a refill overtakes
            self._check_after_reads(run, op, view, mem, sh, a, threads, where)
        w = sh.writer[a]
        has = w >= 0
        known = self.clock[threads, np.where(has, w, 0)]
        unordered = has & (w != threads) & (sh.write_clock[a] > known)
        if unordered.any():
            i = int(np.flatnonzero(unordered)[0])
            writer = int(w[i])
            kind, reason = "race", " (no barrier, mbarrier wait or group wait between them)"
            rec = self.records[int(sh.write_record[a[i]])] if writer >= self.threads else None
            if rec is not None:
                kind, reason = classify_unobserved(rec, int(threads[i]), self)
            raise self.violation(
                kind, f"{'write' if write else 'read'} of %{mem.buffer.name}[{int(a[i])}] is not ordered after its "
                f"write by {self.describe_writer(sh, int(a[i]))}{reason}",
                thread=int(threads[i]), other_thread=writer if writer < self.threads else rec.column if rec else None,
                element=self._element(run, view, where, i), op=op)

    def _check_after_reads(self, run: Any, op: N.Op, view: N.View, mem: Any, sh: Shadow, a: np.ndarray,
                           threads: np.ndarray, where: np.ndarray) -> None:
        if sh.read_clock is not None:
            reads = sh.reads_at(a)  # [n, readers]
            unordered = (reads > self.clock[threads[:, None], sh.readers[None, :]]) & (sh.readers[None, :] != threads[:, None])
            if unordered.any():
                i, column = (int(x) for x in np.argwhere(unordered)[0])
                reader = int(sh.readers[column])
                raise self.violation(
                    "race", f"write of %{mem.buffer.name}[{int(a[i])}] is not ordered after its read by "
                    f"{self.who(reader)} (write-after-read: no barrier or mbarrier release/wait between them)",
                    thread=int(threads[i]), other_thread=reader, element=self._element(run, view, where, i), op=op)

    def _check_duplicates(self, run: Any, op: N.Op, mem: Any, a: np.ndarray, threads: np.ndarray) -> None:
        uniq, counts = np.unique(a, return_counts=True)
        if (counts > 1).any():
            for dup in uniq[counts > 1]:
                ts = np.unique(threads[a == dup])
                if len(ts) > 1:
                    raise self.violation(
                        "race", f"{self.who(int(ts[0]))} and {self.who(int(ts[1]))} write %{mem.buffer.name}[{int(dup)}] "
                        "in the same operation", thread=int(ts[0]), other_thread=int(ts[1]), op=op)

    def _record_write(self, sh: Shadow, a: np.ndarray, threads: np.ndarray, times: np.ndarray) -> None:
        sh.writer[a] = threads
        sh.write_clock[a] = times
        sh.write_record[a] = 0
        sh.clear_reads(a)
        if sh.unfenced is not None:
            sh.unfenced[a] = True

    def _record_read(self, sh: Shadow, a: np.ndarray, threads: np.ndarray) -> None:
        columns = sh.reader_columns(threads, self.threads)
        rows = sh.read_rows(a, create=True)
        sh.read_clock[rows, columns] = self.clock[threads, threads]


def classify_in_flight(hb: HappensBefore, rec: AsyncRecord, thread: int) -> tuple[str, str]:
    """Why an in-flight element was accessed: ``(violation kind, explanation)``.

    A TMA load completes with a phase of its mbarrier.  If the accessing thread observed the
    phase just before it, its wait used the wrong parity (``"parity"``); if the copy joined a
    later phase than the one its issuer declared bytes for, that phase completed before the copy
    delivered: the expect-tx count is too small (``"expect-tx"``).  Otherwise the wait is missing
    or comes later (``"async"``).
    """
    bar = rec.barrier
    if rec.kind == "tma.load" and bar is not None:
        if rec.extra.get("multicast_from") is not None and rec.phase is not None and (
                rec.declared_phase is None or rec.declared_phase < rec.phase):
            armed = (f"its last expect-tx covered phase {rec.declared_phase}" if rec.declared_phase is not None
                     else "it never declared transaction bytes")
            return "expect-tx", (f"; a multicast from {rec.extra['multicast_from']} into this block joined phase "
                                 f"{rec.phase} of {bar.name}, but the destination barrier was not armed for its bytes "
                                 f"({armed}): each receiving block's expect-tx must count the multicast bytes")
        if rec.declared_phase is not None and rec.phase is not None and rec.declared_phase < rec.phase:
            declared = bar.declared_history.get(rec.declared_phase)
            return "expect-tx", (f"; its issuer declared {declared} transaction bytes for phase {rec.declared_phase}, "
                                 f"which completed before this copy delivered, so the copy joined phase {rec.phase}: "
                                 "the expect-tx byte count is smaller than the bytes of the phase's copies")
        observed = bar.observed_phase(thread)
        if observed is not None and rec.phase is not None and observed < rec.phase:
            return "parity", (f"; {hb.who(thread)}'s last wait on {bar.name} returned for phase {observed}, "
                              f"not phase {rec.phase} that delivers this data (wrong mbarrier parity or phase)")
    if rec.kind == "cp.async" and not rec.extra.get("committed", True):
        return "async", "; the copy was never committed, and wait_group completes committed groups only"
    return "async", ""


def classify_unobserved(rec: AsyncRecord, thread: int, hb: HappensBefore | None = None) -> tuple[str, str]:
    """Why a thread (a clock column) accessed TMA data without having observed the phase that delivered it."""
    who = hb.who(thread) if hb is not None else f"thread {thread}"
    bar = rec.barrier
    observed = bar.observed_phase(thread) if bar is not None else None
    if observed is not None and rec.phase is not None and observed < rec.phase:
        return "parity", (f": {who}'s last wait on {bar.name} returned for phase {observed}, not phase "
                          f"{rec.phase} that delivered this data (wrong mbarrier parity or phase)")
    name = bar.name if bar is not None else "its mbarrier"
    return "race", f": {who} did not wait for phase {rec.phase} of {name}, which delivered it"
