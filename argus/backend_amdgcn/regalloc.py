"""Register allocation for SGPRs, VGPRs and AGPRs: live intervals and linear scan, no spilling.

**Liveness.**  Each virtual register gets one interval over the body's positions, from its
first definition (or the kernel entry, for fixed registers) to its last use.  A loop (a
backward branch from position ``j`` to a label at ``i``) extends every interval that
crosses its boundary, or that is used before it is defined inside it (a loop-carried value),
to cover ``[i, j]`` whole — values of one iteration stay valid in the next.  The emitter's
code is structured (if-regions and loops only), so intervals over program order are exact
enough and always safe: lanes switched off by ``exec`` keep their old register contents,
and an interval never ends inside a region that may still read it.

**Assignment.**  Intervals are taken in order of their start; each gets the lowest free
physical range of its size and alignment in its file (a physical register is free for an
interval once every interval it held ended strictly before the new one starts, so an
instruction never writes a register it still reads).  Fixed registers (kernel arguments'
pointer, work-item ids) keep their index.

**Budgets.**  Exceeding a budget is an error, never a spill: :class:`RegisterBudgetError`
names the program point of greatest pressure in that file and the values live there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from argus.backend_amdgcn.cfg import loops
from argus.backend_amdgcn.isa import Inst, Item, Label, RegFile, VirtualReg
from argus.errors import ArgusError

__all__ = ["Allocation", "Budget", "Interval", "RegisterBudgetError", "allocate", "budget_for", "intervals"]

#: gfx942: addressable SGPRs for allocation (s0..s101 minus VCC/flat-scratch/xnack reserve)
SGPR_LIMIT = 100
#: gfx942: architected VGPRs and AGPRs per wave, and the unified file per SIMD lane
VGPR_FILE = 512
VGPR_LIMIT = 256
AGPR_LIMIT = 256
VGPR_GRANULE = 8
WAVE = 64
SIMDS_PER_CU = 4


class RegisterBudgetError(ArgusError):
    """The kernel needs more registers of one file than one wavefront may hold."""


@dataclass(frozen=True)
class Budget:
    """Per-wave register limits for a block size: ``vgpr + agpr`` share the unified file."""

    sgpr: int
    vgpr: int
    agpr: int
    unified: int
    waves_per_block: int

    def describe(self) -> str:
        return (f"{self.waves_per_block} wave(s) of 64 per block: at most {self.vgpr} VGPRs, {self.agpr} AGPRs, "
                f"{self.unified} VGPR+AGPR together, {self.sgpr} SGPRs per wave")


def budget_for(threads: int) -> Budget:
    """The register budget of one wave of a block of ``threads`` work-items on gfx942.

    A block's waves are spread over the CU's four SIMDs; each SIMD lane holds 512 VGPRs
    (architected and accumulation together), so ``ceil(waves / 4)`` waves share one file.
    """
    waves = max(1, math.ceil(threads / WAVE))
    per_simd = math.ceil(waves / SIMDS_PER_CU)
    unified = (VGPR_FILE // per_simd) // VGPR_GRANULE * VGPR_GRANULE
    return Budget(SGPR_LIMIT, min(VGPR_LIMIT, unified), min(AGPR_LIMIT, unified), unified, waves)


@dataclass
class Interval:
    reg: VirtualReg
    start: int
    end: int

    def overlaps(self, position: int) -> bool:
        return self.start <= position <= self.end


def intervals(items: list[Item]) -> dict[VirtualReg, Interval]:
    """The live interval of every virtual register of the body (see the module docstring)."""
    defs: dict[VirtualReg, list[int]] = {}
    uses: dict[VirtualReg, list[int]] = {}
    for pos, item in enumerate(items):
        if not isinstance(item, Inst):
            continue
        for ref in item.reg_defs():
            defs.setdefault(ref.reg, []).append(pos)
        for ref in item.reg_uses():
            uses.setdefault(ref.reg, []).append(pos)
    out: dict[VirtualReg, Interval] = {}
    for reg in {*defs, *uses}:
        d, u = defs.get(reg, []), uses.get(reg, [])
        if reg.fixed is not None:
            start = -1
        elif not d:
            raise ValueError(f"{reg!r} is read at position {min(u)} but never written")
        else:
            start = min(d)
            if u and min(u) < start:
                # a use before every def in program order: only legal inside a loop
                start = min(u)
        out[reg] = Interval(reg, start, max([*d, *u]))
    loop_list = loops(items)
    changed = True
    while changed:
        changed = False
        for head, back in loop_list:
            for reg, iv in out.items():
                crosses = (iv.start < head <= iv.end) or (iv.start <= back < iv.end)
                inside = head <= iv.start and iv.end <= back
                carried = inside and _used_before_defined(reg, defs, uses, head, back)
                if (crosses or carried) and (iv.start > head or iv.end < back):
                    iv.start, iv.end = min(iv.start, head), max(iv.end, back)
                    changed = True
    return out


def _used_before_defined(reg: VirtualReg, defs: dict, uses: dict, head: int, back: int) -> bool:
    d = [p for p in defs.get(reg, []) if head <= p <= back]
    u = [p for p in uses.get(reg, []) if head <= p <= back]
    return bool(u) and (not d or min(u) <= min(d))


@dataclass
class Allocation:
    """Physical base index of every virtual register and the counts for the descriptor."""

    assignment: dict[VirtualReg, int]
    counts: dict[RegFile, int] = field(default_factory=dict)  # next free register of each file
    pressure: dict[RegFile, int] = field(default_factory=dict)

    def count(self, file: RegFile) -> int:
        return self.counts.get(file, 0)

    @property
    def accum_offset(self) -> int:
        """First AGPR in the unified file: the VGPR count rounded up to 4 (at least 4)."""
        return max(4, -(-self.count(RegFile.VGPR) // 4) * 4)


def _limit(file: RegFile, budget: Budget) -> int:
    return {RegFile.SGPR: budget.sgpr, RegFile.VGPR: budget.vgpr, RegFile.AGPR: budget.agpr}[file]


def allocate(items: list[Item], budget: Budget, *, kernel: str = "kernel") -> Allocation:
    """Assign every virtual register of ``items`` (see the module docstring)."""
    ivs = intervals(items)
    assignment: dict[VirtualReg, int] = {}
    counts: dict[RegFile, int] = {}
    busy: dict[RegFile, list[int]] = {f: [-2] * (_limit(f, budget) + 64) for f in RegFile}
    for iv in sorted(ivs.values(), key=lambda iv: (iv.start, iv.reg.fixed is None, -iv.reg.size, iv.reg.id)):
        reg = iv.reg
        table = busy[reg.file]
        if reg.fixed is not None:
            base = reg.fixed
        else:
            base = _first_fit(table, reg, iv.start, _limit(reg.file, budget))
            if base is None:
                raise _budget_error(items, ivs, reg.file, budget, kernel)
        for r in range(base, base + reg.size):
            table[r] = max(table[r], iv.end)
        assignment[reg] = base
        counts[reg.file] = max(counts.get(reg.file, 0), base + reg.size)
    allocation = Allocation(assignment, counts, {f: _max_pressure(items, ivs, f)[0] for f in RegFile})
    agprs = allocation.count(RegFile.AGPR)
    if agprs and allocation.accum_offset + agprs > budget.unified:
        raise _budget_error(items, ivs, RegFile.AGPR, budget, kernel,
                            extra=f"{allocation.accum_offset} VGPRs (accum_offset) + {agprs} AGPRs exceed the "
                                  f"unified file of {budget.unified}")
    return allocation


def _first_fit(table: list[int], reg: VirtualReg, start: int, limit: int) -> int | None:
    align = max(1, reg.align)
    for base in range(0, limit - reg.size + 1, align):
        if all(table[r] < start for r in range(base, base + reg.size)):
            return base
    return None


def _max_pressure(items: list[Item], ivs: dict[VirtualReg, Interval], file: RegFile) -> tuple[int, int]:
    """(registers, position) of the point where the most registers of ``file`` are live."""
    delta: dict[int, int] = {}
    for iv in ivs.values():
        if iv.reg.file is file:
            delta[iv.start] = delta.get(iv.start, 0) + iv.reg.size
            delta[iv.end + 1] = delta.get(iv.end + 1, 0) - iv.reg.size
    best, where, running = 0, 0, 0
    for pos in sorted(delta):
        running += delta[pos]
        if running > best:
            best, where = running, pos
    return best, where


def _budget_error(items: list[Item], ivs: dict[VirtualReg, Interval], file: RegFile, budget: Budget,
                  kernel: str, extra: str = "") -> RegisterBudgetError:
    need, where = _max_pressure(items, ivs, file)
    live = sorted((iv for iv in ivs.values() if iv.reg.file is file and iv.overlaps(where)),
                  key=lambda iv: (-iv.reg.size, iv.reg.id))
    item = items[where] if 0 <= where < len(items) else None
    at = ""
    if isinstance(item, Inst):
        at = f" at `{item.opcode}`" + (f" ({item.comment})" if item.comment else "")
    elif isinstance(item, Label):
        at = f" at {item.name}"
    shown = "; ".join(f"{iv.reg.name} ({iv.reg.size})" for iv in live[:24])
    more = f"; and {len(live) - 24} more" if len(live) > 24 else ""
    names = {RegFile.SGPR: "SGPRs", RegFile.VGPR: "VGPRs", RegFile.AGPR: "AGPRs"}
    message = (f"{kernel}: {need} {names[file]} live{at}, more than one wave may hold "
               f"({budget.describe()}){': ' + extra if extra else ''}. Live there: {shown}{more}")
    return RegisterBudgetError(message, hint="use fewer threads per block, smaller tiles per thread, or keep the "
                                             "MFMA accumulators in AGPRs (acc='agpr')")
