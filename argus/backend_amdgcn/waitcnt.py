"""``s_waitcnt`` insertion from outstanding-operation tracking (after register allocation).

Memory instructions of a wave complete asynchronously; the wave observes completion only
through two counters (gfx9): ``vmcnt`` counts vector-memory operations (loads, stores,
direct-to-LDS loads) and ``lgkmcnt`` counts LDS operations, cross-lane LDS instructions
(``ds_swizzle``, ``ds_bpermute``), scalar loads and messages.  ``s_waitcnt vmcnt(n)`` waits
until at most ``n`` vector-memory operations are outstanding.

The pass keeps, per counter, the queue of outstanding operations (oldest first) with the
registers each will write when it completes.  Before an instruction that reads or writes a
register a pending operation will write, it waits until that operation is done (a load into
a register a pending load of the same in-order counter writes needs no wait: they land in
issue order): with ``k`` newer operations in the same queue it emits ``vmcnt(k)`` (vector
memory returns in issue order, loads and stores alike), or ``lgkmcnt(k)`` with ``k`` the LDS
operations issued after it — scalar loads may return out of order: a pending ``s_load`` is not
counted among the newer operations, and waiting for one takes ``lgkmcnt(0)``.  A
direct-to-LDS load writes LDS, not registers: LDS reads and writes of the bytes it writes (the
instruction's ``lds`` region, in 64-byte granules; all of LDS when it has none) wait for it
through ``vmcnt`` — accesses of another shared buffer (the other stage of a double buffer)
do not.  Before ``s_barrier`` every LDS access and every vector-memory
operation completes (the barrier orders them for the other waves of the block).

Control flow: the queues at a block's entry are the join of its predecessors' exit queues,
aligned at their newest ends (an operation at the same distance from the newest in either
queue stands for both), iterated to a fixed point around loops; queues longer than the
counter's largest value merge their oldest entries (a wait for them is ``vmcnt(63)`` at
most, which is safe).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from argus.backend_amdgcn.cfg import blocks
from argus.backend_amdgcn.isa import (
    Counter,
    Inst,
    InstClass,
    Item,
    RegRef,
    VirtualReg,
    lds_granules,
)

__all__ = ["Wait", "insert_waitcnts", "parse_waitcnt", "physical_regs"]

Phys = tuple[str, int]  # ("v", 5), ("s", 0), ("a", 3), ("lds", k): the k-th 64-byte granule of LDS


@dataclass(frozen=True)
class Event:
    """Outstanding operations that occupy one slot of a counter's queue."""

    kinds: frozenset[InstClass]
    writes: frozenset[Phys]

    def merge(self, other: Event) -> Event:
        return Event(self.kinds | other.kinds, self.writes | other.writes)


Queue = tuple[Event, ...]
State = dict[Counter, Queue]


@dataclass(frozen=True)
class Wait:
    """Counts to wait for (``None``: do not wait on that counter)."""

    vm: int | None = None
    lgkm: int | None = None

    def text(self) -> str:
        parts = []
        if self.vm is not None:
            parts.append(f"vmcnt({self.vm})")
        if self.lgkm is not None:
            parts.append(f"lgkmcnt({self.lgkm})")
        return " ".join(parts)

    def count(self, counter: Counter) -> int | None:
        return self.vm if counter is Counter.VM else self.lgkm

    def inst(self) -> Inst:
        return Inst("s_waitcnt", (self.text(),))


def physical_regs(ref: RegRef, assignment: dict[VirtualReg, int]) -> list[Phys]:
    reg = ref.reg
    base = reg.fixed if reg.fixed is not None else assignment[reg]
    return [(reg.file.prefix, base + ref.offset + i) for i in range(ref.size)]


_COUNT = re.compile(r"(vmcnt|lgkmcnt|expcnt)\((\d+)\)")


def parse_waitcnt(text: str) -> Wait:
    """``"vmcnt(2) lgkmcnt(0)"`` -> ``Wait(2, 0)``; a bare ``0`` waits for everything."""
    text = text.strip()
    if re.fullmatch(r"0x0*|0", text):
        return Wait(0, 0)
    counts = {name: int(n) for name, n in _COUNT.findall(text)}
    return Wait(counts.get("vmcnt"), counts.get("lgkmcnt"))


def _event_of(inst: Inst, assignment: dict[VirtualReg, int]) -> tuple[Counter, Event] | None:
    cls = inst.cls
    counter = cls.counter
    if counter is None:
        return None
    writes: set[Phys] = set()
    if cls in (InstClass.VMEM_LOAD, InstClass.DS_READ, InstClass.DS_CROSSLANE, InstClass.SMEM):
        for ref in inst.reg_defs():
            writes.update(physical_regs(ref, assignment))
    if cls is InstClass.VMEM_LDS:
        writes.update(lds_granules(inst.lds))
    return counter, Event(frozenset({cls}), frozenset(writes))


_RETURNS = (InstClass.VMEM_LOAD, InstClass.DS_READ, InstClass.DS_CROSSLANE, InstClass.SMEM)


def _touched(inst: Inst, assignment: dict[VirtualReg, int]) -> tuple[set[Phys], set[Phys]]:
    """(registers the instruction reads or writes at issue, registers a load writes on return)."""
    now: set[Phys] = set()
    later: set[Phys] = set()
    returns = inst.cls in _RETURNS
    for i, op in enumerate(inst.operands):
        if isinstance(op, RegRef):
            (later if returns and i in inst.defs else now).update(physical_regs(op, assignment))
    if inst.cls in (InstClass.DS_READ, InstClass.DS_WRITE):
        now.update(lds_granules(inst.lds))
    if inst.cls is InstClass.VMEM_LDS:  # writes LDS when it completes, in order with the other vmcnt loads
        later.update(lds_granules(inst.lds))
    return now, later


def _needed(state: State, inst: Inst, assignment: dict[VirtualReg, int]) -> Wait:
    """The weakest wait that completes every pending operation ``inst`` depends on."""
    counts: dict[Counter, int] = {}
    if inst.cls is InstClass.BARRIER:
        must = {Counter.VM: lambda e: True,
                Counter.LGKM: lambda e: bool(e.kinds & {InstClass.DS_READ, InstClass.DS_WRITE})}
    else:
        now, later = _touched(inst, assignment)
        ordered = inst.cls is not InstClass.SMEM

        def must_for(counter: Counter):
            # a load returning into a register a pending load also writes: only two in-order
            # operations of one counter are sure to land in issue order
            same = counter is inst.cls.counter and ordered

            def test(e: Event) -> bool:
                if e.writes & now:
                    return True
                return bool(e.writes & later) and not (same and InstClass.SMEM not in e.kinds)
            return test
        must = {c: must_for(c) for c in Counter}
    for counter, queue in state.items():
        needed = [i for i, e in enumerate(queue) if must[counter](e)]
        if not needed:
            continue
        newest = max(needed)
        if any(InstClass.SMEM in queue[i].kinds for i in needed):
            counts[counter] = 0  # scalar loads return out of order: only a zero count completes them
            continue
        # while the newest needed operation is outstanding, so is every in-order operation issued
        # after it; pending scalar loads (out of order) may already be done and do not count
        newer = sum(1 for e in queue[newest + 1:] if InstClass.SMEM not in e.kinds)
        counts[counter] = min(newer, counter.maximum)
    return Wait(counts.get(Counter.VM), counts.get(Counter.LGKM))


def _apply(state: State, wait: Wait) -> State:
    """The operations that may still be outstanding after ``wait``: an in-order operation with
    ``n`` or more in-order operations issued after it is complete once at most ``n`` are
    outstanding; a scalar load (out of order) only once none is."""
    out = dict(state)
    for counter in Counter:
        n = wait.count(counter)
        if n is not None:
            queue = out.get(counter, ())
            kept, newer = [], 0
            for e in reversed(queue):
                scalar = InstClass.SMEM in e.kinds
                if (n > 0 if scalar else newer < n):
                    kept.append(e)
                if not scalar:
                    newer += 1
            out[counter] = tuple(reversed(kept))
    return out


def _push(state: State, counter: Counter, event: Event) -> State:
    queue = (*state.get(counter, ()), event)
    if len(queue) > counter.maximum + 1:
        merged = queue[0].merge(queue[1])
        queue = (merged, *queue[2:])
    out = dict(state)
    out[counter] = queue
    return out


def _join(a: State | None, b: State) -> State:
    if a is None:
        return dict(b)
    out: State = {}
    for counter in Counter:
        qa, qb = a.get(counter, ()), b.get(counter, ())
        n = max(len(qa), len(qb))
        events = []
        for d in range(n - 1, -1, -1):  # distance from the newest end, oldest first
            ea = qa[len(qa) - 1 - d] if d < len(qa) else None
            eb = qb[len(qb) - 1 - d] if d < len(qb) else None
            events.append(ea.merge(eb) if ea and eb else (ea or eb))
        out[counter] = tuple(events)
    return out


def _step(state: State, inst: Inst, assignment: dict[VirtualReg, int]) -> tuple[State, Wait | None]:
    """State after ``inst`` and the wait inserted before it (None: none needed)."""
    if inst.opcode == "s_waitcnt":
        return _apply(state, parse_waitcnt(" ".join(str(o) for o in inst.operands))), None
    wait = _needed(state, inst, assignment)
    inserted = wait if (wait.vm is not None or wait.lgkm is not None) else None
    if inserted is not None:
        state = _apply(state, wait)
    event = _event_of(inst, assignment)
    if event is not None:
        state = _push(state, *event)
    return state, inserted


def insert_waitcnts(items: list[Item], assignment: dict[VirtualReg, int]) -> list[Item]:
    """``items`` with the ``s_waitcnt`` instructions the dependencies need (see the module docstring)."""
    cfg = blocks(items)
    entry: list[State | None] = [None] * len(cfg)
    if cfg:
        entry[0] = {c: () for c in Counter}
    work = [0] if cfg else []
    while work:
        b = work.pop(0)
        state = dict(entry[b])  # type: ignore[arg-type]
        for item in items[cfg[b].start:cfg[b].end]:
            if isinstance(item, Inst):
                state, _ = _step(state, item, assignment)
        for s in cfg[b].succs:
            joined = _join(entry[s], state)
            if joined != entry[s]:
                entry[s] = joined
                if s not in work:
                    work.append(s)
    out: list[Item] = []
    for b, block in enumerate(cfg):
        state = entry[b] if entry[b] is not None else {c: () for c in Counter}
        for item in items[block.start:block.end]:
            if isinstance(item, Inst):
                state, wait = _step(state, item, assignment)
                if wait is not None:
                    out.append(Inst("s_waitcnt", (wait.text(),), comment="before " + item.opcode))
            out.append(item)
    return out
