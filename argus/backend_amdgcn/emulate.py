"""An instruction-level emulator of the gfx942 (MI300X) subset argus emits, wave64.

What runs is the linked code object: :func:`emulate` disassembles the ``.hsaco`` with
``llvm-objdump`` (:mod:`argus.backend_amdgcn.emulate_decode`), reads the kernel descriptor
(LDS size, user SGPRs, enabled workgroup-id SGPRs) and the metadata note (kernel arguments),
writes the kernarg segment, and executes every workgroup of the grid.  Instruction semantics
are written from the CDNA3 ISA document; the emitter's tables are not consulted (only the list
of mnemonics, :data:`argus.backend_amdgcn.isa.EMITTED_MNEMONICS`, is shared, by the tests).

Model
-----
* A workgroup's waves share one LDS (the descriptor's size: an access past it reads 0 and is
  dropped, and is reported).  Waves run one at a time, each until ``s_barrier`` or
  ``s_endpgm``; a barrier releases when every wave that has not ended reached it.
* Per wave: 102 SGPRs plus VCC, M0, EXEC (at their gfx9 register numbers), SCC, 256 VGPRs and
  256 AGPRs of 64 lanes each, held as 32-bit words in numpy arrays (lanes vectorized).
* Initial state: ``s[0:1]`` the kernarg segment address, then the enabled workgroup ids;
  ``v0`` the packed work-item id (x in bits 0..9, y in 10..19, z in 20..29); EXEC the live
  lanes of the wave.
* Memory: one flat global address space of allocations separated by unmapped guard pages; an
  access outside every allocation is an error.  Buffer instructions check their resource's
  ``num_records`` per element (raw buffers, stride 0): out of range loads return 0, stores
  are dropped.
* Timing-free, hazard-aware: results are written when an instruction issues, but every
  vector-memory, scalar-memory and LDS operation stays *outstanding* in its wave until an
  ``s_waitcnt`` retires it (vmcnt in order; lgkmcnt in order for LDS, scalar loads in any
  order).  Reading or overwriting a register an outstanding load writes is a
  ``use-before-waitcnt`` finding; LDS accesses of different waves to one byte between two
  barriers (one of them a write) are an ``lds-race``; an ``s_barrier`` reached with LDS writes
  outstanding is ``barrier-lds-in-flight``; a VGPR read in lanes nothing wrote is
  ``undefined-register``; a dependency the hardware does not interlock (MFMA results, VALU
  results read by MFMA or DPP, transcendental results, VALU-written SGPRs and VCC,
  SALU-written M0) with fewer wait states than the ISA requires, counted on the executed
  path, is ``wait-states``.  Findings name the workgroup, wave, lane and
  instruction.

Not modelled: instruction timing, the MFMA SrcC write-after-read and store-data wait states
(left to the static checker :mod:`argus.backend_amdgcn.hazards`), caches and memory
ordering between workgroups (workgroups run one after another), scratch, traps, the
transcendental instructions' approximation error (``v_exp_f32``, ``v_log_f32``,
``v_rcp_f32``, ``v_rsq_f32``, ``v_sqrt_f32`` are computed correctly rounded; the hardware is
within 1 ulp), denormal flushing (the descriptor keeps denormals), and the MFMA's internal
accumulation order (see :mod:`argus.backend_amdgcn.emulate_mfma`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from argus.backend_amdgcn.emulate_decode import Instruction, Operand, program_of
from argus.backend_amdgcn.emulate_mfma import mfma_compute, mfma_shape
from argus.backend_amdgcn.emulate_numerics import (
    as_f32,
    as_u32,
    f32_to_fp8,
    fma_f32,
    fp8_table,
    round_f32,
)
from argus.errors import ArgusError

__all__ = [
    "Emulation",
    "EmulationError",
    "Finding",
    "GlobalMemory",
    "KernelImage",
    "emulate",
    "handled_ops",
    "run_program",
]

WAVE = 64
LANES = np.arange(WAVE)
M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1
VCC, M0, EXEC = 106, 124, 126
MAX_STEPS = 5_000_000  # per wave
LDS_LIMIT = 65536  # bytes of LDS one gfx942 workgroup may allocate (CDNA3: 64 KiB per CU)


class EmulationError(ArgusError):
    """The program cannot continue: an unknown instruction, a fault, a deadlock."""


@dataclass(frozen=True)
class Finding:
    """A hazard the emulator observed (the run continues)."""

    kind: str
    message: str
    workgroup: tuple[int, int, int]
    wave: int
    lane: int | None
    instruction: str
    producer: str | None = None

    def __str__(self) -> str:
        where = f"workgroup {self.workgroup} wave {self.wave}" + (f" lane {self.lane}" if self.lane is not None else "")
        text = f"{self.kind}: {where}: {self.instruction}: {self.message}"
        if self.producer:
            text += f" (produced by {self.producer})"
        return text


# --------------------------------------------------------------------------- global memory


class GlobalMemory:
    """A flat 64-bit address space of byte allocations with unmapped gaps between them."""

    BASE = 0x7F00_0000_0000
    GAP = 1 << 16

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.regions: list[tuple[int, int]] = []  # (start offset, size)
        self.size = 0
        self.data = np.zeros(0, np.uint8)
        self.valid = np.zeros(0, bool)
        # who stored each byte last: instruction index, workgroup (linear), wave, lane; -1: nobody
        self.writer = np.full((0, 4), -1, np.int64)

    def allocate(self, contents: bytes | np.ndarray) -> int:
        raw = np.frombuffer(bytes(contents), np.uint8) if not isinstance(contents, np.ndarray) else \
            np.ascontiguousarray(contents).view(np.uint8).ravel()
        start = self.size + self.GAP
        start = -(-start // 4096) * 4096
        self.regions.append((start, raw.size))
        end = start + max(raw.size, 1)
        data = np.zeros(end + self.GAP, np.uint8)
        data[: self.data.size] = self.data
        data[start: start + raw.size] = raw
        valid = np.zeros(end + self.GAP, bool)
        valid[: self.valid.size] = self.valid
        valid[start: start + raw.size] = True
        writer = np.full((end + self.GAP, 4), -1, np.int64)
        writer[: self.writer.shape[0]] = self.writer
        self.data, self.valid, self.writer, self.size = data, valid, writer, end
        return self.BASE + start

    def read_region(self, address: int, nbytes: int) -> np.ndarray:
        start = address - self.BASE
        return self.data[start: start + nbytes].copy()

    def _index(self, addresses: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        offs = addresses.astype(np.int64) - np.int64(self.BASE)
        idx = offs[:, None] + np.arange(nbytes)[None, :]
        ok = (idx >= 0) & (idx < self.valid.size)
        safe = np.where(ok, idx, 0)
        ok &= self.valid[safe]
        return safe, ok.all(axis=1)

    def load(self, addresses: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes [n, nbytes] at ``addresses`` and whether each access is mapped."""
        idx, ok = self._index(addresses, nbytes)
        return self.data[idx], ok

    def store(self, addresses: np.ndarray, data: np.ndarray, who: np.ndarray | None = None) -> np.ndarray:
        """Write ``data`` [n, nbytes]; ``who`` [n, 4] records the writer of each row's bytes."""
        idx, ok = self._index(addresses, data.shape[1])
        self.data[idx[ok]] = data[ok]
        if who is not None:
            self.writer[idx[ok]] = np.asarray(who)[ok][:, None, :]
        return ok

    def writer_of(self, address: int) -> tuple[int, int, int, int] | None:
        """(instruction index, workgroup, wave, lane) of the last store to the byte at ``address``."""
        row = self.writer[address - self.BASE]
        return None if row[0] < 0 else tuple(int(x) for x in row)


# --------------------------------------------------------------------------- program image


@dataclass
class KernelImage:
    """What the emulator needs from a code object: the program and the launch facts."""

    name: str
    program: list[Instruction]
    threads: int
    lds_bytes: int
    workgroup_ids: tuple[bool, bool, bool]
    user_sgprs: int
    kernarg_size: int
    arguments: list[dict]  # metadata entries (.name, .offset, .size, .value_kind)

    @staticmethod
    def from_hsaco(hsaco: bytes, kernel: str) -> KernelImage:
        from argus.backend_amdgcn.assemble import read_descriptor, read_metadata

        kd = read_descriptor(hsaco, kernel)
        meta = read_metadata(hsaco)
        entries = [k for k in meta.get("amdhsa.kernels", []) if k.get(".name") == kernel]
        if not entries:
            raise EmulationError(f"the code object's metadata has no kernel {kernel!r}")
        entry = entries[0]
        size = entry.get(".reqd_workgroup_size") or [entry[".max_flat_workgroup_size"], 1, 1]
        threads = int(np.prod(size))
        # the initial state the emulator sets up: s[0:1] = kernarg pointer (the only user SGPRs),
        # workgroup ids after it, 1-D work-item ids, no scratch
        if not kd.kernarg_segment_ptr or kd.user_sgpr_count != 2:
            raise EmulationError(f"{kernel}: the descriptor asks for {kd.user_sgpr_count} user SGPRs "
                                 f"(kernarg pointer: {kd.kernarg_segment_ptr}); the emulator sets up only the "
                                 "kernarg segment pointer in s[0:1]")
        if kd.group_segment_fixed_size > LDS_LIMIT:
            raise EmulationError(f"{kernel}: the descriptor asks for {kd.group_segment_fixed_size} bytes of LDS, more "
                                 f"than the {LDS_LIMIT} a gfx942 workgroup may allocate")
        if kd.private_segment_fixed_size:
            raise EmulationError(f"{kernel}: the kernel uses scratch memory, which the emulator does not model")
        if list(size)[1:] not in ([1, 1], [1], []):
            raise EmulationError(f"{kernel}: workgroup size {size}: only 1-D workgroups are modelled")
        return KernelImage(kernel, program_of(hsaco, kernel), threads, kd.group_segment_fixed_size,
                           kd.workgroup_id_enabled, kd.user_sgpr_count, kd.kernarg_size,
                           list(entry.get(".args") or []))


# --------------------------------------------------------------------------- wave state


@dataclass
class Pending:
    """An outstanding memory operation of one wave."""

    counter: str  # "vm" or "lgkm"
    kind: str  # "load", "store", "smem", "lds-read", "lds-write", "lds-dma"
    inst: Instruction
    regs: frozenset = frozenset()
    lanes: np.ndarray | None = None
    lds: np.ndarray | None = None  # LDS byte addresses it writes


@dataclass
class Wave:
    id: int
    s: list[int] = field(default_factory=lambda: [0] * 128)
    v: np.ndarray = field(default_factory=lambda: np.zeros((256, WAVE), np.uint32))
    a: np.ndarray = field(default_factory=lambda: np.zeros((256, WAVE), np.uint32))
    # which lanes of each VGPR (0..255) and AGPR (256..511) were written since the wave started
    defined: np.ndarray = field(default_factory=lambda: np.zeros((512, WAVE), bool))
    scc: int = 0
    pc: int = 0
    state: str = "run"  # run, barrier, done
    steps: int = 0
    pending: list[Pending] = field(default_factory=list)
    slots: int = 0  # wait states issued so far (s_nop N counts N + 1)
    waits: list = field(default_factory=list)  # WaitRequirement: dependencies not yet covered by wait states

    @property
    def exec(self) -> int:
        return self.s[EXEC] | (self.s[EXEC + 1] << 32)

    @exec.setter
    def exec(self, value: int) -> None:
        self.s[EXEC], self.s[EXEC + 1] = value & M32, (value >> 32) & M32

    def exec_mask(self) -> np.ndarray:
        return mask_array(self.exec)


@lru_cache(maxsize=4096)
def mask_array(value: int) -> np.ndarray:
    """The lanes of a 64-bit mask as a read-only bool array (cached: EXEC values repeat)."""
    out = ((np.uint64(value & M64) >> LANES.astype(np.uint64)) & np.uint64(1)).astype(bool)
    out.flags.writeable = False
    return out


def mask_int(lanes: np.ndarray) -> int:
    return int(np.sum(np.left_shift(np.uint64(1), LANES[lanes].astype(np.uint64)), dtype=np.uint64)) if lanes.any() else 0


# --------------------------------------------------------------------------- results


@dataclass
class Emulation:
    """The outcome of one launch: the findings and how much ran."""

    image: KernelImage
    findings: list[Finding]
    instructions: int
    workgroups: int
    grid: tuple[int, int, int] = (1, 1, 1)
    # per buffer argument (by name): the last store to each element, [elements, 4] of
    # (instruction index, workgroup (linear, x fastest), wave, lane), -1 where nothing stored
    writers: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def writer(self, buffer: str, element: int) -> str | None:
        """Which instruction, workgroup, wave and lane last stored element ``element`` of ``buffer``."""
        rows = self.writers.get(buffer)
        if rows is None or rows[element][0] < 0:
            return None
        inst, linear, wave, lane = (int(x) for x in rows[element])
        gx, gy, _ = self.grid
        wg = (linear % gx, (linear // gx) % gy, linear // (gx * gy))
        return f"workgroup {wg} wave {wave} lane {lane}: {self.image.program[inst]}"


# --------------------------------------------------------------------------- the machine


HANDLERS: dict[str, Any] = {}


def _handler(*names: str):
    def register(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn
    return register


def handled_ops() -> frozenset[str]:
    """Every base mnemonic (no ``_e32``/``_e64``/``_dpp`` suffix) the emulator executes."""
    return frozenset(HANDLERS) | frozenset(_mfma_names())


def _mfma_names() -> list[str]:
    out = [f"v_mfma_f32_{s}_{t}" for s in ("32x32x8", "16x16x16") for t in ("bf16", "f16")]
    out += [f"v_mfma_f32_{s}_{a}_{b}" for s in ("32x32x16", "16x16x32") for a in ("fp8", "bf8") for b in ("fp8", "bf8")]
    return out


class Machine:
    """Runs one kernel image over a grid, workgroup after workgroup."""

    def __init__(self, image: KernelImage, memory: GlobalMemory, kernarg: int) -> None:
        self.image = image
        self.program = image.program
        self.memory = memory
        self.kernarg = kernarg
        self.findings: list[Finding] = []
        self._seen: set[tuple] = set()
        self.executed = 0
        self.wg = (0, 0, 0)
        self.wg_linear = 0
        for inst in self.program:
            _prepare(inst)

    # ------------------------------------------------------------ findings
    def report(self, kind: str, wave: Wave, inst: Instruction, message: str, lane: int | None = None,
               producer: Instruction | None = None) -> None:
        key = (kind, inst.index, producer.index if producer else None)
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(Finding(kind, message, self.wg, wave.id, lane, str(inst),
                                     str(producer) if producer else None))

    def fault(self, wave: Wave, inst: Instruction, message: str, lane: int | None = None) -> EmulationError:
        where = f"workgroup {self.wg} wave {wave.id}" + (f" lane {lane}" if lane is not None else "")
        return EmulationError(f"gfx942 emulator: {where}: {inst}: {message}")

    # ------------------------------------------------------------ a workgroup
    def run_workgroup(self, wg: tuple[int, int, int], linear: int = 0) -> None:
        self.wg = wg
        self.wg_linear = linear
        img = self.image
        self.lds = np.zeros(img.lds_bytes, np.uint8)
        nbytes = max(img.lds_bytes, 1)
        self.lds_writer = np.full(nbytes, -1, np.int16)
        self.lds_write_epoch = np.full(nbytes, -1, np.int64)
        self.lds_readers = np.zeros(nbytes, np.uint64)
        self.lds_read_epoch = np.full(nbytes, -1, np.int64)
        self.epoch = 0
        nwaves = -(-img.threads // WAVE)
        waves = []
        for w in range(nwaves):
            wave = Wave(w)
            wave.s[0], wave.s[1] = self.kernarg & M32, self.kernarg >> 32
            sreg = img.user_sgprs
            for dim in range(3):
                if img.workgroup_ids[dim]:
                    wave.s[sreg] = wg[dim]
                    sreg += 1
            tid = w * WAVE + LANES
            live = tid < img.threads
            wave.v[0] = np.where(live, tid, 0).astype(np.uint32)  # 1-D workgroups: x only
            wave.defined[0] = True
            wave.exec = mask_int(live)
            waves.append(wave)
        while True:
            for wave in waves:
                if wave.state == "run":
                    self.run_wave(wave)
            live_waves = [w for w in waves if w.state != "done"]
            if not live_waves:
                break
            if all(w.state == "barrier" for w in live_waves):
                self.epoch += 1
                for w in live_waves:
                    w.state = "run"
                    w.pc += 1
            else:  # pragma: no cover - run_wave only returns at a barrier or the end
                raise EmulationError("gfx942 emulator: scheduler stalled")
        self.lds = None

    def run_wave(self, wave: Wave) -> None:
        program = self.program
        while wave.state == "run":
            if wave.pc >= len(program):
                raise EmulationError(f"gfx942 emulator: workgroup {self.wg} wave {wave.id} ran past the end of "
                                     "the program without s_endpgm")
            inst = program[wave.pc]
            wave.steps += 1
            if wave.steps > MAX_STEPS:
                raise self.fault(wave, inst, f"more than {MAX_STEPS} instructions: the kernel does not terminate")
            if wave.pending:
                self.check_registers(wave, inst)
            if inst.vreads:
                self.check_defined(wave, inst)
            if wave.waits:
                self.check_wait_states(wave, inst)
            wave.slots += inst.slots
            handler = inst.handler
            if handler is None:
                raise self.fault(wave, inst, f"{inst.op} is not an instruction the emulator knows")
            if inst.unsupported:
                raise self.fault(wave, inst, inst.unsupported)
            next_pc = handler(self, wave, inst)
            _record_wait_states(wave, inst)
            self.executed += 1
            if wave.state == "run":
                wave.pc = wave.pc + 1 if next_pc is None else next_pc

    # ------------------------------------------------------------ hazards
    def check_registers(self, wave: Wave, inst: Instruction) -> None:
        touched = inst.reads | inst.writes
        if not touched:
            return
        exec_lanes = wave.exec_mask()
        for p in reversed(wave.pending):
            if not p.regs or not (p.regs & touched):
                continue
            reg = sorted(p.regs & touched)[0]
            how = "reads" if reg in inst.reads else "overwrites"
            lane = None
            if p.lanes is not None:
                both = p.lanes & exec_lanes if reg[0] != "s" else p.lanes
                lanes = np.flatnonzero(both) if both.any() else np.flatnonzero(p.lanes)
                lane = int(lanes[0]) if lanes.size else None
            self.report("use-before-waitcnt", wave, inst,
                        f"{how} {reg[0]}{reg[1]} before the s_waitcnt that completes its load", lane, p.inst)

    def check_wait_states(self, wave: Wave, inst: Instruction) -> None:
        """Dependencies the hardware does not interlock need wait states (issued instructions,
        ``s_nop N`` = N + 1) between producer and consumer, counted on the executed path."""
        keep = []
        for req in wave.waits:
            gap = wave.slots - req.slot
            if gap >= req.needed:
                continue
            keep.append(req)
            hit = req.consumer(inst)
            if hit is None or not (req.regs & hit):
                continue
            reg = sorted(req.regs & hit)[0]
            name = "m0" if reg == ("s", M0) else "vcc" if reg[0] == "s" and reg[1] in (VCC, VCC + 1) else \
                f"{reg[0]}{reg[1]}"
            self.report("wait-states", wave, inst,
                        f"{req.what}: {name} is used {gap} wait state(s) after {req.producer.op} wrote it; "
                        f"the ISA requires {req.needed}", 0, req.producer)
        wave.waits = keep

    def check_defined(self, wave: Wave, inst: Instruction) -> None:
        lanes = wave.exec_mask() if mfma_shape(inst.op) is None else np.ones(WAVE, bool)
        for row in inst.vreads:
            missing = lanes & ~wave.defined[row]
            if missing.any():
                name = f"v{row}" if row < 256 else f"a{row - 256}"
                self.report("undefined-register", wave, inst,
                            f"reads {name}, which no instruction of this wave has written", int(np.flatnonzero(missing)[0]))
                return

    def retire(self, wave: Wave, vm: int | None, lgkm: int | None) -> None:
        if vm is not None:
            vms = [p for p in wave.pending if p.counter == "vm"]
            done = vms[: max(0, len(vms) - vm)]
            for p in done:
                wave.pending.remove(p)
        if lgkm is not None:
            lg = [p for p in wave.pending if p.counter == "lgkm"]
            smem = [p for p in lg if p.kind == "smem"]
            lds = [p for p in lg if p.kind != "smem"]
            # LDS operations complete in order, scalar loads in any order: what is certainly done
            certain_lds = max(0, len(lg) - lgkm - len(smem))
            done = lds[:certain_lds] + (smem if lgkm == 0 else [])
            for p in done:
                wave.pending.remove(p)

    def lds_access(self, wave: Wave, inst: Instruction, addresses: np.ndarray, nbytes: int, write: bool,
                   lanes: np.ndarray) -> np.ndarray:
        """Bounds and race checks of an LDS access; returns which lanes are in range."""
        size = self.image.lds_bytes
        addr = addresses.astype(np.int64)
        inside = (addr >= 0) & (addr + nbytes <= size)
        bad = lanes & ~inside
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            self.report("lds-out-of-range", wave, inst,
                        f"LDS bytes {int(addr[lane])}..{int(addr[lane]) + nbytes - 1} are outside the workgroup's "
                        f"{size} bytes (reads give 0, writes are dropped)", lane)
        ok = lanes & inside
        if not ok.any():
            return ok
        idx = (addr[ok][:, None] + np.arange(nbytes)[None, :]).ravel()
        for p in wave.pending:
            if p.kind == "lds-dma" and p.lds is not None and p.inst is not inst:
                hit = np.isin(idx, p.lds)
                if hit.any():
                    lane = int(np.flatnonzero(ok)[int(np.flatnonzero(hit)[0]) // nbytes])
                    self.report("use-before-waitcnt", wave, inst,
                                f"{'writes' if write else 'reads'} LDS bytes that an outstanding direct-to-LDS load "
                                "of this wave writes (no s_waitcnt vmcnt completes it first)", lane, p.inst)
        me = np.uint64(1) << np.uint64(wave.id)
        if write:
            conflict_w = (self.lds_write_epoch[idx] == self.epoch) & (self.lds_writer[idx] != wave.id)
            others = self.lds_readers[idx] & ~me
            conflict_r = (self.lds_read_epoch[idx] == self.epoch) & (others != 0)
            if conflict_w.any() or conflict_r.any():
                which = np.flatnonzero(conflict_w | conflict_r)[0]
                other = int(self.lds_writer[idx[which]]) if conflict_w[which] else \
                    int(np.log2(float(others[which] & (~others[which] + np.uint64(1)))))
                self._race(wave, inst, ok, nbytes, which, other, "writes", int(idx[which]))
            self.lds_writer[idx] = wave.id
            self.lds_write_epoch[idx] = self.epoch
        else:
            conflict = (self.lds_write_epoch[idx] == self.epoch) & (self.lds_writer[idx] != wave.id)
            if conflict.any():
                which = np.flatnonzero(conflict)[0]
                self._race(wave, inst, ok, nbytes, which, int(self.lds_writer[idx[which]]), "reads", int(idx[which]))
            fresh = self.lds_read_epoch[idx] != self.epoch
            self.lds_readers[idx] = np.where(fresh, me, self.lds_readers[idx] | me)
            self.lds_read_epoch[idx] = self.epoch
        return ok

    def _race(self, wave: Wave, inst: Instruction, ok: np.ndarray, nbytes: int, which: int, other: int,
              verb: str, byte: int) -> None:
        lane = int(np.flatnonzero(ok)[which // nbytes])
        self.report("lds-race", wave, inst,
                    f"{verb} LDS byte {byte} that wave {other} accessed since the last s_barrier "
                    "(no barrier orders the two accesses)", lane)


# --------------------------------------------------------------------------- wait states
# CDNA3 ISA, "Manually Inserted Wait States" (the dependencies argus code can have; the
# hardware does not interlock them).


@dataclass
class WaitRequirement:
    regs: frozenset
    slot: int  # the wave's wait-state count right after the producer issued
    needed: int
    producer: Instruction
    what: str
    consumer: Any  # instruction -> the registers of ``regs`` kind it uses that way, or None


def _is_mfma(inst: Instruction) -> bool:
    return inst.op.startswith("v_mfma_")


def _is_valu(inst: Instruction) -> bool:
    return inst.op.startswith("v_") and not _is_mfma(inst)


_TRANS = {"v_exp_f32", "v_log_f32", "v_rcp_f32", "v_rsq_f32", "v_sqrt_f32"}


def _non_mfma_touch(inst: Instruction):
    return None if _is_mfma(inst) else inst.reads | inst.writes


def _other_mfma_reader(producer: Instruction):
    chain = frozenset(producer.operands[0].regs())

    def reads(inst: Instruction):
        if not _is_mfma(inst):
            return None
        a, b, c = inst.operands[1:4]
        used = frozenset(a.regs()) | frozenset(b.regs())
        if c.is_reg and not (frozenset(c.regs()) == chain and inst.op == producer.op):
            used |= frozenset(c.regs())  # accumulating into the same D back to back is interlocked
        return used
    return reads


def _mfma_reader(inst: Instruction):
    return inst.reads if _is_mfma(inst) else None


def _dpp_reader(inst: Instruction):
    return frozenset(inst.operands[1].regs()) if inst.dpp and len(inst.operands) > 1 else None


def _valu_reader(inst: Instruction):
    return inst.reads if _is_valu(inst) else None


def _vmem_reader(inst: Instruction):
    return inst.reads if inst.op.startswith(("global_", "buffer_")) else None


def _div_fmas_reader(inst: Instruction):
    return inst.reads if inst.op == "v_div_fmas_f32" else None


def _m0_reader(inst: Instruction):
    if inst.op.startswith("ds_") or (inst.op.startswith("buffer_") and "lds" in inst.modifiers):
        return frozenset({("s", M0)})
    return None


def _record_wait_states(w: Wave, inst: Instruction) -> None:
    """The requirements an instruction that just issued puts on later ones (MFMA results are
    recorded by the MFMA handler)."""
    if _is_valu(inst):
        vregs = frozenset(r for r in inst.writes if r[0] in ("v", "a"))
        sregs = frozenset(r for r in inst.writes if r[0] == "s")
        if vregs:
            w.waits.append(WaitRequirement(vregs, w.slots, 2, inst, "VALU result read by an MFMA", _mfma_reader))
            w.waits.append(WaitRequirement(vregs, w.slots, 2, inst, "VALU result read through DPP", _dpp_reader))
            if inst.op in _TRANS:
                w.waits.append(WaitRequirement(vregs, w.slots, 1, inst, "transcendental result read by a VALU",
                                               _valu_reader))
        if sregs:
            w.waits.append(WaitRequirement(sregs, w.slots, 2, inst, "VALU-written SGPR read by a VALU",
                                           _valu_reader))
            w.waits.append(WaitRequirement(sregs, w.slots, 5, inst, "VALU-written SGPR read by vector memory",
                                           _vmem_reader))
            vcc = sregs & {("s", VCC), ("s", VCC + 1)}
            if vcc:
                w.waits.append(WaitRequirement(frozenset(vcc), w.slots, 4, inst, "VALU-written VCC read by "
                                               "v_div_fmas", _div_fmas_reader))
    elif inst.op.startswith("s_") and ("s", M0) in inst.writes:
        w.waits.append(WaitRequirement(frozenset({("s", M0)}), w.slots, 1, inst, "SALU-written M0 read by an LDS "
                                       "operation", _m0_reader))


# --------------------------------------------------------------------------- operand roles

_NO_DEFS = ("s_cmp_", "s_branch", "s_cbranch_", "s_waitcnt", "s_barrier", "s_nop", "s_endpgm", "s_setprio",
            "global_store", "buffer_store", "ds_write", "s_sleep")


def _ndefs(inst: Instruction) -> int:
    op = inst.op
    if op.startswith(_NO_DEFS):
        return 0
    if op.startswith(("global_atomic", "buffer_atomic")):
        return 1 if ("sc0" in inst.modifiers or "glc" in inst.modifiers) else 0
    if op.startswith("v_cmp_") and inst.encoding != "e64":
        return 1 if _vcc_first(inst) else 0
    if op in ("v_div_scale_f32", "v_mad_u64_u32"):
        return 2
    return 1


_CACHE_BITS = {"sc0", "sc1", "nt", "glc", "slc"}
_DPP_CONTROLS = {"quad_perm", "row_shl", "row_shr", "row_ror", "row_mirror", "row_half_mirror", "row_bcast",
                 "wave_shl", "wave_shr", "wave_rol", "wave_ror", "row_mask", "bank_mask", "bound_ctrl"}


def _allowed_modifiers(inst: Instruction) -> set[str]:
    """The modifiers whose meaning the emulator implements for this instruction; any other one
    is refused at execution (never silently ignored)."""
    op = inst.op
    if op.startswith(("global_", "buffer_")):
        return {"offset", "offen", "lds"} | _CACHE_BITS
    if op.startswith("ds_"):
        return {"offset"}
    if op.startswith("v_mfma_"):
        return {"cbsz", "abid", "blgp"}
    if op == "s_waitcnt":
        return {"vmcnt", "expcnt", "lgkmcnt", "simm16"}
    if op in _VALU_F32:
        return {"clamp", "mul", "div"} | (_DPP_CONTROLS if inst.dpp else set())
    if op in ("v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32"):
        return {"clamp", "op_sel"}
    if op in ("v_cvt_f32_fp8", "v_cvt_f32_bf8"):
        return {"op_sel", "src0_sel"}
    if op in _VALU_INT or op in _VALU_SIGNED:
        return _DPP_CONTROLS if inst.dpp else set()
    return set()


def _unsupported(inst: Instruction) -> str | None:
    if inst.dpp and not (inst.op in _VALU_F32 or inst.op in _VALU_INT or inst.op in _VALU_SIGNED):
        return f"the DPP form of {inst.op} is not modelled"
    if inst.sdwa and inst.op not in ("v_cvt_f32_fp8", "v_cvt_f32_bf8"):
        return f"the SDWA form of {inst.op} is not modelled"
    extra = sorted(set(inst.modifiers) - _allowed_modifiers(inst))
    if extra:
        return f"modifier {extra[0]} of {inst.op} is not modelled"
    if any(o.abs or o.neg for o in inst.operands) and not (
            inst.op in _VALU_F32 or inst.op.startswith(("v_cmp_", "v_div_", "v_cndmask", "v_cvt_"))):
        return f"source modifiers (neg/abs) of {inst.op} are not modelled"
    return None


def _vcc_first(inst: Instruction) -> bool:
    """VOPC in the 32-bit encoding writes VCC; llvm-objdump prints it as the first operand."""
    first = inst.operands[0] if inst.operands else None
    return first is not None and first.kind == "s" and first.index == VCC and first.count == 2


def _prepare(inst: Instruction) -> None:
    handler = HANDLERS.get(inst.op)
    if handler is None and mfma_shape(inst.op) is not None:
        handler = _mfma
    inst.handler = handler  # type: ignore[attr-defined]
    inst.unsupported = _unsupported(inst) if handler is not None else None  # type: ignore[attr-defined]
    n = _ndefs(inst)
    writes: set = set()
    reads: set = set()
    for i, op in enumerate(inst.operands):
        (writes if i < n else reads).update(op.regs())
    if inst.op.startswith("v_cmp_") and inst.encoding != "e64":
        writes |= {("s", VCC), ("s", VCC + 1)}
    if inst.op == "v_div_fmas_f32" or (inst.op == "v_cndmask_b32" and inst.encoding != "e64"):
        reads |= {("s", VCC), ("s", VCC + 1)}
    inst.reads = frozenset(reads)  # type: ignore[attr-defined]
    inst.slots = (int(inst.operands[0].value) + 1 if inst.operands else 1) if inst.op == "s_nop" else 1  # type: ignore[attr-defined]
    inst.vreads = tuple(sorted(i + (256 if f == "a" else 0) for f, i in reads if f in ("v", "a")))  # type: ignore[attr-defined]
    inst.writes = frozenset(writes)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- operand access


def _float_bits(value: float, width: int) -> int:
    if width == 64:
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    return struct.unpack("<I", struct.pack("<f", value))[0]


def sread(m: Machine, w: Wave, op: Operand, width: int = 32) -> int:
    """A scalar operand as an unsigned integer of ``width`` bits."""
    if op.kind == "s":
        if width == 64:
            return w.s[op.index] | (w.s[op.index + 1] << 32)
        return w.s[op.index]
    if op.kind == "imm":
        return op.value & (M64 if width == 64 else M32)
    if op.kind == "fimm":
        return _float_bits(op.value, width)
    if op.kind == "scc":
        return w.scc
    raise EmulationError(f"gfx942 emulator: {op} is not a scalar operand")


def swrite(w: Wave, op: Operand, value: int, width: int = 32) -> None:
    if op.kind != "s":
        raise EmulationError(f"gfx942 emulator: cannot write scalar result to {op}")
    w.s[op.index] = value & M32
    if width == 64:
        w.s[op.index + 1] = (value >> 32) & M32


def vread(m: Machine, w: Wave, op: Operand, width: int = 32) -> np.ndarray:
    """A VALU source as [64] uint32 (or uint64 for ``width`` 64)."""
    if op.kind in ("v", "a"):
        regs = w.v if op.kind == "v" else w.a
        if width == 64:
            return regs[op.index].astype(np.uint64) | (regs[op.index + 1].astype(np.uint64) << np.uint64(32))
        return regs[op.index]
    value = sread(m, w, op, width)
    return np.full(WAVE, value, np.uint64 if width == 64 else np.uint32)


def vwrite(w: Wave, op: Operand, value: np.ndarray, lanes: np.ndarray, width: int = 32) -> None:
    if op.kind not in ("v", "a"):
        raise EmulationError(f"gfx942 emulator: cannot write a vector result to {op}")
    regs = w.v if op.kind == "v" else w.a
    base = op.index + (256 if op.kind == "a" else 0)
    w.defined[base: base + (2 if width == 64 else 1)] |= lanes
    if width == 64:
        value = np.asarray(value, np.uint64)
        regs[op.index][lanes] = (value & np.uint64(M32)).astype(np.uint32)[lanes]
        regs[op.index + 1][lanes] = (value >> np.uint64(32)).astype(np.uint32)[lanes]
    else:
        regs[op.index][lanes] = np.asarray(value, np.uint32)[lanes]


def _regfile(w: Wave, op: Operand) -> np.ndarray:
    """The VGPR or AGPR file a memory instruction's data operand names."""
    if op.kind == "v":
        return w.v
    if op.kind == "a":
        return w.a
    raise EmulationError(f"gfx942 emulator: {op} is not a vector register")


def fread(m: Machine, w: Wave, op: Operand) -> np.ndarray:
    """A VALU source as float32 with its abs/neg modifiers applied."""
    bits = vread(m, w, op).astype(np.uint32)
    if op.abs:
        bits = bits & np.uint32(0x7FFFFFFF)
    if op.neg and op.kind != "fimm":
        bits = bits ^ np.uint32(0x80000000)
    return as_f32(bits)


# --------------------------------------------------------------------------- scalar ALU


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _salu2(fn):
    def run(m: Machine, w: Wave, inst: Instruction) -> None:
        d, a, b = inst.operands
        result, scc = fn(sread(m, w, a), sread(m, w, b), w.scc)
        swrite(w, d, result)
        if scc is not None:
            w.scc = int(scc)
    return run


_SALU32 = {
    "s_add_u32": lambda a, b, c: ((a + b) & M32, (a + b) >> 32),
    "s_addc_u32": lambda a, b, c: ((a + b + c) & M32, (a + b + c) >> 32),
    "s_sub_u32": lambda a, b, c: ((a - b) & M32, b > a),
    "s_subb_u32": lambda a, b, c: ((a - b - c) & M32, b + c > a),
    "s_add_i32": lambda a, b, c: ((a + b) & M32, not -2**31 <= _s32(a) + _s32(b) < 2**31),
    "s_sub_i32": lambda a, b, c: ((a - b) & M32, not -2**31 <= _s32(a) - _s32(b) < 2**31),
    "s_mul_i32": lambda a, b, c: ((_s32(a) * _s32(b)) & M32, None),
    "s_mul_hi_u32": lambda a, b, c: ((a * b) >> 32, None),
    "s_lshl_b32": lambda a, b, c: ((a << (b & 31)) & M32, ((a << (b & 31)) & M32) != 0),
    "s_lshr_b32": lambda a, b, c: (a >> (b & 31), (a >> (b & 31)) != 0),
    "s_ashr_i32": lambda a, b, c: ((_s32(a) >> (b & 31)) & M32, (_s32(a) >> (b & 31)) != 0),
    "s_and_b32": lambda a, b, c: (a & b, (a & b) != 0),
    "s_or_b32": lambda a, b, c: (a | b, (a | b) != 0),
    "s_xor_b32": lambda a, b, c: (a ^ b, (a ^ b) != 0),
    "s_min_i32": lambda a, b, c: (a if _s32(a) < _s32(b) else b, _s32(a) < _s32(b)),
    "s_max_i32": lambda a, b, c: (a if _s32(a) > _s32(b) else b, _s32(a) > _s32(b)),
    "s_min_u32": lambda a, b, c: (min(a, b), a < b),
    "s_max_u32": lambda a, b, c: (max(a, b), a > b),
    "s_cselect_b32": lambda a, b, c: (a if c else b, None),
}
for _name, _fn in _SALU32.items():
    HANDLERS[_name] = _salu2(_fn)


def _salu64(fn):
    def run(m: Machine, w: Wave, inst: Instruction) -> None:
        d, a, b = inst.operands
        width_b = 32 if inst.op.startswith(("s_lshl_b64", "s_lshr_b64", "s_ashr_i64")) else 64
        result, scc = fn(sread(m, w, a, 64), sread(m, w, b, width_b), w.scc)
        swrite(w, d, result & M64, 64)
        if scc is not None:
            w.scc = int(scc)
    return run


_SALU64 = {
    "s_lshl_b64": lambda a, b, c: ((a << (b & 63)) & M64, ((a << (b & 63)) & M64) != 0),
    "s_lshr_b64": lambda a, b, c: (a >> (b & 63), (a >> (b & 63)) != 0),
    "s_and_b64": lambda a, b, c: (a & b, (a & b) != 0),
    "s_or_b64": lambda a, b, c: (a | b, (a | b) != 0),
    "s_xor_b64": lambda a, b, c: (a ^ b, (a ^ b) != 0),
    "s_andn2_b64": lambda a, b, c: (a & ~b & M64, (a & ~b & M64) != 0),
    "s_orn2_b64": lambda a, b, c: ((a | ~b) & M64, ((a | ~b) & M64) != 0),
    "s_cselect_b64": lambda a, b, c: (a if c else b, None),
}
for _name, _fn in _SALU64.items():
    HANDLERS[_name] = _salu64(_fn)


@_handler("s_mov_b32")
def _s_mov_b32(m: Machine, w: Wave, inst: Instruction) -> None:
    swrite(w, inst.operands[0], sread(m, w, inst.operands[1]))


@_handler("s_mov_b64")
def _s_mov_b64(m: Machine, w: Wave, inst: Instruction) -> None:
    swrite(w, inst.operands[0], sread(m, w, inst.operands[1], 64), 64)


@_handler("s_not_b64")
def _s_not_b64(m: Machine, w: Wave, inst: Instruction) -> None:
    r = ~sread(m, w, inst.operands[1], 64) & M64
    swrite(w, inst.operands[0], r, 64)
    w.scc = int(r != 0)


@_handler("s_not_b32")
def _s_not_b32(m: Machine, w: Wave, inst: Instruction) -> None:
    r = ~sread(m, w, inst.operands[1]) & M32
    swrite(w, inst.operands[0], r)
    w.scc = int(r != 0)


@_handler("s_and_saveexec_b64", "s_or_saveexec_b64")
def _s_saveexec(m: Machine, w: Wave, inst: Instruction) -> None:
    src = sread(m, w, inst.operands[1], 64)
    old = w.exec
    new = (src & old) if inst.op == "s_and_saveexec_b64" else (src | old)
    swrite(w, inst.operands[0], old, 64)
    w.exec = new
    w.scc = int(new != 0)


_SCMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
         "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


def _s_cmp(m: Machine, w: Wave, inst: Instruction) -> None:
    rel, kind = inst.op.split("_")[2:4]
    width = 64 if kind.endswith("64") else 32
    a, b = (sread(m, w, o, width) for o in inst.operands)
    if kind.startswith("i"):
        a, b = _s32(a), _s32(b)
    w.scc = int(_SCMP[rel](a, b))


for _rel in _SCMP:
    for _kind in ("i32", "u32"):
        HANDLERS[f"s_cmp_{_rel}_{_kind}"] = _s_cmp
HANDLERS["s_cmp_eq_u64"] = HANDLERS["s_cmp_lg_u64"] = _s_cmp


# --------------------------------------------------------------------------- control


@_handler("s_branch")
def _s_branch(m: Machine, w: Wave, inst: Instruction) -> int:
    return inst.target


def _cbranch(cond):
    def run(m: Machine, w: Wave, inst: Instruction) -> int | None:
        return inst.target if cond(w) else None
    return run


HANDLERS["s_cbranch_scc0"] = _cbranch(lambda w: w.scc == 0)
HANDLERS["s_cbranch_scc1"] = _cbranch(lambda w: w.scc == 1)
HANDLERS["s_cbranch_execz"] = _cbranch(lambda w: w.exec == 0)
HANDLERS["s_cbranch_execnz"] = _cbranch(lambda w: w.exec != 0)
HANDLERS["s_cbranch_vccz"] = _cbranch(lambda w: (w.s[VCC] | w.s[VCC + 1]) == 0)
HANDLERS["s_cbranch_vccnz"] = _cbranch(lambda w: (w.s[VCC] | w.s[VCC + 1]) != 0)


@_handler("s_nop", "s_setprio", "s_sleep")
def _s_nop(m: Machine, w: Wave, inst: Instruction) -> None:
    return None


@_handler("s_endpgm")
def _s_endpgm(m: Machine, w: Wave, inst: Instruction) -> None:
    w.state = "done"


@_handler("s_barrier")
def _s_barrier(m: Machine, w: Wave, inst: Instruction) -> None:
    for p in w.pending:
        if p.kind in ("lds-write", "lds-dma"):
            lane = int(np.flatnonzero(p.lanes)[0]) if p.lanes is not None and p.lanes.any() else None
            m.report("barrier-lds-in-flight", w, inst,
                     "s_barrier reached while an LDS write of this wave is outstanding (no s_waitcnt "
                     f"{'lgkmcnt' if p.counter == 'lgkm' else 'vmcnt'} before the barrier): other waves may "
                     "read the old contents", lane, p.inst)
    w.state = "barrier"


def _waitcnt_fields(inst: Instruction) -> tuple[int | None, int | None]:
    mods = inst.modifiers
    if "simm16" in mods:
        raw = int(mods["simm16"], 0)
        vm = (raw & 0xF) | ((raw >> 14) & 0x3) << 4
        lgkm = (raw >> 8) & 0xF
        return (None if vm == 63 else vm), (None if lgkm == 15 else lgkm)
    vm = int(mods["vmcnt"]) if "vmcnt" in mods else None
    lgkm = int(mods["lgkmcnt"]) if "lgkmcnt" in mods else None
    return vm, lgkm


@_handler("s_waitcnt")
def _s_waitcnt(m: Machine, w: Wave, inst: Instruction) -> None:
    vm, lgkm = _waitcnt_fields(inst)
    m.retire(w, vm, lgkm)


# --------------------------------------------------------------------------- scalar memory


@_handler("s_load_dword", "s_load_dwordx2", "s_load_dwordx4", "s_load_dwordx8")
def _s_load(m: Machine, w: Wave, inst: Instruction) -> None:
    d, base, off = inst.operands
    count = {"s_load_dword": 1}.get(inst.op) or int(inst.op.rsplit("x", 1)[1])
    address = (sread(m, w, base, 64) & ~3) + sread(m, w, off)
    raw, ok = m.memory.load(np.array([address], np.uint64), 4 * count)
    if not ok[0]:
        raise m.fault(w, inst, f"scalar load from unmapped address {address:#x}")
    words = raw[0].view("<u4")
    for i in range(count):
        w.s[d.index + i] = int(words[i])
    w.pending.append(Pending("lgkm", "smem", inst, frozenset(d.regs())))


# --------------------------------------------------------------------------- vector ALU


def _valu_int(fn, nsrc: int, signed: bool = False):
    def run(m: Machine, w: Wave, inst: Instruction) -> None:
        lanes = _dpp_lanes(m, w, inst)
        srcs = [vread(m, w, o) for o in inst.operands[1: 1 + nsrc]]
        if inst.dpp:
            srcs[0] = _dpp_source(m, w, inst, srcs[0])
        if signed:
            srcs = [s.view(np.int32) for s in srcs]
        with np.errstate(all="ignore"):
            result = np.asarray(fn(*srcs)).astype(np.int64).astype(np.uint32) if signed else \
                np.asarray(fn(*srcs), np.uint64).astype(np.uint32)
        vwrite(w, inst.operands[0], result, lanes)
    return run


U64 = np.uint64
_SH = np.uint32(31)


def _u(x):
    return x.astype(np.uint64)


_VALU_INT = {
    "v_add_u32": (lambda a, b: _u(a) + _u(b), 2),
    "v_sub_u32": (lambda a, b: _u(a) - _u(b) + U64(1 << 32), 2),
    "v_subrev_u32": (lambda a, b: _u(b) - _u(a) + U64(1 << 32), 2),
    "v_mul_lo_u32": (lambda a, b: _u(a) * _u(b), 2),
    "v_mul_hi_u32": (lambda a, b: (_u(a) * _u(b)) >> U64(32), 2),
    "v_lshlrev_b32": (lambda a, b: _u(b) << _u(a & _SH), 2),
    "v_lshrrev_b32": (lambda a, b: _u(b) >> _u(a & _SH), 2),
    "v_lshl_add_u32": (lambda a, b, c: (_u(a) << _u(b & _SH)) + _u(c), 3),
    "v_add3_u32": (lambda a, b, c: _u(a) + _u(b) + _u(c), 3),
    "v_lshl_or_b32": (lambda a, b, c: (_u(a) << _u(b & _SH)) | _u(c), 3),
    "v_and_b32": (lambda a, b: a & b, 2),
    "v_or_b32": (lambda a, b: a | b, 2),
    "v_xor_b32": (lambda a, b: a ^ b, 2),
    "v_not_b32": (lambda a: ~a, 1),
    "v_bfe_u32": (lambda a, b, c: (_u(a) >> _u(b & _SH)) & ((U64(1) << _u(c & _SH)) - U64(1)), 3),
    "v_bfi_b32": (lambda a, b, c: (a & b) | (~a & c), 3),
    "v_min_u32": (lambda a, b: np.minimum(a, b), 2),
    "v_max_u32": (lambda a, b: np.maximum(a, b), 2),
    "v_mov_b32": (lambda a: a, 1),
}
for _name, (_fn, _n) in _VALU_INT.items():
    HANDLERS[_name] = _valu_int(_fn, _n)

_VALU_SIGNED = {
    "v_ashrrev_i32": (lambda a, b: b.astype(np.int64) >> (a & 31).astype(np.int64), 2),
    "v_min_i32": (lambda a, b: np.minimum(a, b), 2),
    "v_max_i32": (lambda a, b: np.maximum(a, b), 2),
}
for _name, (_fn, _n) in _VALU_SIGNED.items():
    HANDLERS[_name] = _valu_int(_fn, _n, signed=True)


def _fmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # IEEE mode maxNum: a NaN operand yields the other operand; +0 is larger than -0
    r = np.fmax(a, b)
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), np.float32(-0.0), np.float32(0.0)), r)


def _fmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.fmin(a, b)
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) | np.signbit(b), np.float32(-0.0), np.float32(0.0)), r)


def _med3(a, b, c):
    nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
    med = _fmax(_fmin(a, b), _fmin(_fmax(a, b), c))
    return np.where(nan, _fmin(_fmin(a, b), c), med)


def _via64(fn):
    def run(x):
        with np.errstate(all="ignore"):
            return round_f32(fn(x.astype(np.float64)))
    return run


_VALU_F32 = {
    "v_add_f32": (lambda a, b: a + b, 2),
    "v_sub_f32": (lambda a, b: a - b, 2),
    "v_subrev_f32": (lambda a, b: b - a, 2),
    "v_mul_f32": (lambda a, b: a * b, 2),
    "v_max_f32": (_fmax, 2),
    "v_min_f32": (_fmin, 2),
    "v_fma_f32": (fma_f32, 3),
    "v_med3_f32": (_med3, 3),
    "v_exp_f32": (_via64(np.exp2), 1),
    "v_log_f32": (_via64(np.log2), 1),
    "v_rcp_f32": (_via64(lambda x: 1.0 / x), 1),
    "v_rsq_f32": (_via64(lambda x: 1.0 / np.sqrt(x)), 1),
    "v_sqrt_f32": (_via64(np.sqrt), 1),
    "v_rndne_f32": (lambda a: np.rint(a), 1),
    "v_trunc_f32": (lambda a: np.trunc(a), 1),
    "v_floor_f32": (lambda a: np.floor(a), 1),
}


def _valu_f32(fn, nsrc: int):
    def run(m: Machine, w: Wave, inst: Instruction) -> None:
        lanes = _dpp_lanes(m, w, inst)
        srcs = [fread(m, w, o) for o in inst.operands[1: 1 + nsrc]]
        if inst.dpp:
            srcs[0] = as_f32(_dpp_source(m, w, inst, as_u32(srcs[0])))
        with np.errstate(all="ignore"):
            result = np.asarray(fn(*srcs), np.float32)
            result = _output_modifiers(inst, result)
        vwrite(w, inst.operands[0], as_u32(result), lanes)
    return run


def _output_modifiers(inst: Instruction, r: np.ndarray) -> np.ndarray:
    mods = inst.modifiers
    if "mul" in mods:
        r = (r * np.float32(int(mods["mul"]))).astype(np.float32)
    if "div" in mods:
        r = (r / np.float32(int(mods["div"]))).astype(np.float32)
    if "clamp" in mods:
        r = np.where(np.isnan(r), np.float32(0), np.clip(r, np.float32(0), np.float32(1))).astype(np.float32)
    return r


for _name, (_fn, _n) in _VALU_F32.items():
    HANDLERS[_name] = _valu_f32(_fn, _n)


@_handler("v_cndmask_b32")
def _v_cndmask(m: Machine, w: Wave, inst: Instruction) -> None:
    d, a, b = inst.operands[:3]
    select = sread(m, w, inst.operands[3], 64) if len(inst.operands) > 3 else \
        w.s[VCC] | (w.s[VCC + 1] << 32)
    fa, fb = vread(m, w, a), vread(m, w, b)
    if a.abs or a.neg:
        fa = as_u32(fread(m, w, a))
    if b.abs or b.neg:
        fb = as_u32(fread(m, w, b))
    vwrite(w, d, np.where(mask_array(select), fb, fa), w.exec_mask())


@_handler("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32")
def _v_mbcnt(m: Machine, w: Wave, inst: Instruction) -> None:
    d, a, b = inst.operands
    mask = vread(m, w, a).astype(np.uint64)
    if inst.op == "v_mbcnt_lo_u32_b32":
        below = np.where(LANES >= 32, U64(M32), (U64(1) << np.minimum(LANES, 31).astype(np.uint64)) - U64(1))
    else:
        below = np.where(LANES < 32, U64(0), (U64(1) << (np.maximum(LANES, 32) - 32).astype(np.uint64)) - U64(1))
    bits = mask & below
    count = np.array([bin(int(x)).count("1") for x in bits], np.uint64)
    vwrite(w, d, (count + vread(m, w, b).astype(np.uint64)).astype(np.uint32), w.exec_mask())


@_handler("v_lshl_add_u64")
def _v_lshl_add_u64(m: Machine, w: Wave, inst: Instruction) -> None:
    d, a, b, c = inst.operands
    shift = vread(m, w, b).astype(np.uint64) & U64(7)
    result = (vread(m, w, a, 64) << shift) + vread(m, w, c, 64)
    vwrite(w, d, result, w.exec_mask(), 64)


@_handler("v_mad_u64_u32")
def _v_mad_u64_u32(m: Machine, w: Wave, inst: Instruction) -> None:
    d, sd, a, b, c = inst.operands
    lanes = w.exec_mask()
    wide = [int(x) * int(y) + int(z) for x, y, z in zip(vread(m, w, a), vread(m, w, b), vread(m, w, c, 64))]
    result = np.array([x & M64 for x in wide], np.uint64)
    carry = np.array([x >> 64 for x in wide], bool)
    vwrite(w, d, result, lanes, 64)
    if sd.kind == "s":
        swrite(w, sd, mask_int(carry & lanes), 64)


@_handler("v_readfirstlane_b32")
def _v_readfirstlane(m: Machine, w: Wave, inst: Instruction) -> None:
    # the value of the lowest lane enabled in EXEC (lane 0 when EXEC is zero)
    lanes = np.flatnonzero(w.exec_mask())
    lane = int(lanes[0]) if lanes.size else 0
    swrite(w, inst.operands[0], int(vread(m, w, inst.operands[1])[lane]))


@_handler("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32")
def _v_accvgpr(m: Machine, w: Wave, inst: Instruction) -> None:
    d, s = inst.operands
    vwrite(w, d, vread(m, w, s), w.exec_mask())


# -- comparisons


def _v_cmp(m: Machine, w: Wave, inst: Instruction) -> None:
    parts = inst.op.split("_")  # v, cmp, rel, type
    rel, kind = parts[2], parts[3]
    srcs = inst.operands[1:] if inst.encoding == "e64" or _vcc_first(inst) else inst.operands
    if kind == "f32":
        a, b = (fread(m, w, o) for o in srcs[:2])
        with np.errstate(invalid="ignore"):
            result = {"u": np.isnan(a) | np.isnan(b), "o": ~(np.isnan(a) | np.isnan(b)), "eq": a == b,
                      "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "lg": (a < b) | (a > b),
                      "neq": ~(a == b), "nlt": ~(a < b), "nle": ~(a <= b), "ngt": ~(a > b), "nge": ~(a >= b)}[rel]
    else:
        a, b = (vread(m, w, o) for o in srcs[:2])
        if kind.startswith("i"):
            a, b = a.view(np.int32), b.view(np.int32)
        result = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[rel]
    bits = mask_int(np.asarray(result) & w.exec_mask())
    if inst.encoding == "e64":
        swrite(w, inst.operands[0], bits, 64)
    else:
        w.s[VCC], w.s[VCC + 1] = bits & M32, bits >> 32


for _rel in ("u", "o", "eq", "lt", "le", "gt", "ge", "lg", "neq", "nlt", "nle", "ngt", "nge"):
    HANDLERS[f"v_cmp_{_rel}_f32"] = _v_cmp
for _rel in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _kind in ("i32", "u32"):
        HANDLERS[f"v_cmp_{_rel}_{_kind}"] = _v_cmp


# -- division helpers (V_DIV_SCALE_F32, V_DIV_FMAS_F32, V_DIV_FIXUP_F32)


def _exponent(x: np.ndarray) -> np.ndarray:
    return ((as_u32(x) >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)


def _is_denorm(x: np.ndarray) -> np.ndarray:
    return (_exponent(x) == 0) & (x != 0)


@_handler("v_div_scale_f32")
def _v_div_scale(m: Machine, w: Wave, inst: Instruction) -> None:
    d, sd, s0, s1, s2 = inst.operands
    a, b, c = (fread(m, w, o) for o in (s0, s1, s2))
    lanes = w.exec_mask()
    with np.errstate(all="ignore"):
        a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
        out = a64.copy()
        vcc = np.zeros(WAVE, bool)
        done = np.zeros(WAVE, bool)
        quotient = (c64 / b64).astype(np.float32)
        inv = 1.0 / b64

        def case(cond, value=None, flag=False):
            nonlocal out, vcc, done
            sel = cond & ~done
            if value is not None:
                out = np.where(sel, value, out)
            vcc = np.where(sel & flag, True, vcc) if flag else vcc
            done |= sel

        case((c64 == 0) | (b64 == 0), np.nan)
        case(_exponent(c) - _exponent(b) >= 96, np.where(a64 == b64, np.ldexp(a64, 64), a64), True)
        case(_is_denorm(b), np.ldexp(a64, 64))
        tiny_inv = (np.abs(inv) < 2.0 ** -1022) & (inv != 0)
        case(tiny_inv & _is_denorm(quotient), np.where(a64 == b64, np.ldexp(a64, 64), a64), True)
        case(tiny_inv, np.ldexp(a64, -64))
        case(_is_denorm(quotient), np.where(a64 == c64, np.ldexp(a64, 64), a64), True)
        case(_exponent(c) <= 23, np.ldexp(a64, 64))
    vwrite(w, d, as_u32(round_f32(out)), lanes)
    swrite(w, sd, mask_int(vcc & lanes), 64)


@_handler("v_div_fmas_f32")
def _v_div_fmas(m: Machine, w: Wave, inst: Instruction) -> None:
    d, s0, s1, s2 = inst.operands
    a, b, c = (fread(m, w, o) for o in (s0, s1, s2))
    r = fma_f32(a, b, c)
    vcc = mask_array(w.s[VCC] | (w.s[VCC + 1] << 32))
    with np.errstate(all="ignore"):
        scale = np.where(_exponent(c) >= 127, 2.0 ** 64, 2.0 ** -64)
        scaled = round_f32(r.astype(np.float64) * scale)
    vwrite(w, d, as_u32(np.where(vcc, scaled, r)), w.exec_mask())


@_handler("v_div_fixup_f32")
def _v_div_fixup(m: Machine, w: Wave, inst: Instruction) -> None:
    d, s0, s1, s2 = inst.operands
    q, den, num = (fread(m, w, o) for o in (s0, s1, s2))
    negative = np.signbit(den) ^ np.signbit(num)
    signed = lambda mag: np.where(negative, -np.float32(mag), np.float32(mag)).astype(np.float32)  # noqa: E731
    out = np.where(negative, -np.abs(q), np.abs(q)).astype(np.float32)
    with np.errstate(all="ignore"):
        inf_den, inf_num = np.isinf(den), np.isinf(num)
        # the ISA's order, last assignment wins here: quotient NaN from an overflowing
        # refinement -> signed overflow (infinity); exponent gap below -150 -> signed underflow (0)
        out = np.where(np.isnan(q), signed(np.inf), out)
        out = np.where(_exponent(num) - _exponent(den) < -150, signed(0.0), out)
        out = np.where((den == 0) | inf_num, signed(np.inf), out)
        out = np.where(inf_den | (num == 0), signed(0.0), out)
        out = np.where(((den == 0) & (num == 0)) | (inf_den & inf_num), np.float32(np.nan), out)
        out = np.where(np.isnan(den), den, out)
        out = np.where(np.isnan(num), num, out)
    vwrite(w, d, as_u32(out.astype(np.float32)), w.exec_mask())


# -- conversions


@_handler("v_cvt_f32_i32")
def _v_cvt_f32_i32(m: Machine, w: Wave, inst: Instruction) -> None:
    x = vread(m, w, inst.operands[1]).view(np.int32)
    vwrite(w, inst.operands[0], as_u32(x.astype(np.float32)), _dpp_lanes(m, w, inst))


@_handler("v_cvt_i32_f32")
def _v_cvt_i32_f32(m: Machine, w: Wave, inst: Instruction) -> None:
    x = fread(m, w, inst.operands[1]).astype(np.float64)
    with np.errstate(invalid="ignore"):
        r = np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x)), -2.0**31, 2.0**31 - 1)).astype(np.int64)
    vwrite(w, inst.operands[0], r.astype(np.int32).view(np.uint32), w.exec_mask())


@_handler("v_cvt_f16_f32")
def _v_cvt_f16_f32(m: Machine, w: Wave, inst: Instruction) -> None:
    with np.errstate(all="ignore"):
        half = fread(m, w, inst.operands[1]).astype(np.float16).view(np.uint16).astype(np.uint32)
    vwrite(w, inst.operands[0], half, w.exec_mask())


@_handler("v_cvt_f32_f16")
def _v_cvt_f32_f16(m: Machine, w: Wave, inst: Instruction) -> None:
    bits = vread(m, w, inst.operands[1]) & np.uint32(0xFFFF)
    vwrite(w, inst.operands[0], as_u32(bits.astype(np.uint16).view(np.float16).astype(np.float32)), w.exec_mask())


def _byte_select(inst: Instruction) -> int:
    sel = inst.modifiers.get("src0_sel", "")
    if sel.startswith("BYTE_"):
        return int(sel[5:])
    if sel == "WORD_1":
        return 2
    if "op_sel" in inst.modifiers:
        bits = [int(x) for x in inst.modifiers["op_sel"].strip("[]").split(",")]
        return bits[0] + 2 * (bits[1] if len(bits) > 1 else 0)
    return 0


@_handler("v_cvt_f32_fp8", "v_cvt_f32_bf8")
def _v_cvt_f32_fp8(m: Machine, w: Wave, inst: Instruction) -> None:
    kind = "fp8" if inst.op.endswith("fp8") else "bf8"
    byte = _byte_select(inst)
    codes = (vread(m, w, inst.operands[1]) >> np.uint32(8 * byte)) & np.uint32(0xFF)
    vwrite(w, inst.operands[0], as_u32(fp8_table(kind)[codes.astype(np.int64)]), w.exec_mask())


@_handler("v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32")
def _v_cvt_pk_fp8(m: Machine, w: Wave, inst: Instruction) -> None:
    kind = "fp8" if "fp8" in inst.op else "bf8"
    d, a, b = inst.operands
    saturate = "clamp" in inst.modifiers
    lo = f32_to_fp8(fread(m, w, a), kind, saturate=saturate)
    hi = f32_to_fp8(fread(m, w, b), kind, saturate=saturate)
    word = lo | (hi << np.uint32(8))
    op_sel = [int(x) for x in inst.modifiers.get("op_sel", "[0,0,0]").strip("[]").split(",")]
    old = vread(m, w, d).copy()
    if len(op_sel) > 2 and op_sel[2]:
        result = (old & np.uint32(0xFFFF)) | (word << np.uint32(16))
    else:
        result = (old & np.uint32(0xFFFF0000)) | word
    vwrite(w, d, result, w.exec_mask())


# -- DPP


def _dpp_select(inst: Instruction) -> np.ndarray:
    """The source lane of every lane (-1: no valid source) for the instruction's DPP control."""
    mods = inst.modifiers
    row_base = LANES - LANES % 16
    pos = LANES % 16
    if "quad_perm" in mods:
        perm = [int(x) for x in mods["quad_perm"].strip("[]").split(",")]
        return LANES - LANES % 4 + np.array(perm)[LANES % 4]
    for name in ("row_shl", "row_shr", "row_ror"):
        if name in mods:
            n = int(mods[name])
            if name == "row_shl":
                src = pos + n
                return np.where(src < 16, row_base + src, -1)
            if name == "row_shr":
                src = pos - n
                return np.where(src >= 0, row_base + src, -1)
            return row_base + (pos - n) % 16  # row_ror: rotate the row right by n lanes
    if "row_mirror" in mods:
        return row_base + 15 - pos
    if "row_half_mirror" in mods:
        return LANES - LANES % 8 + 7 - LANES % 8
    if "wave_shl" in mods:
        return np.where(LANES + 1 < WAVE, LANES + 1, -1)
    if "wave_shr" in mods:
        return np.where(LANES >= 1, LANES - 1, -1)
    if "wave_rol" in mods:
        return (LANES + 1) % WAVE
    if "wave_ror" in mods:
        return (LANES - 1) % WAVE
    if "row_bcast" in mods:
        n = int(mods["row_bcast"])
        row = LANES // 16
        if n == 15:
            return np.where(row >= 1, 16 * row - 1, -1)
        return np.where(row >= 2, 31, -1)
    raise EmulationError(f"gfx942 emulator: {inst}: DPP control not supported")


def _dpp_valid(m: Machine, w: Wave, inst: Instruction) -> tuple[np.ndarray, np.ndarray]:
    src = _dpp_select(inst)
    exec_lanes = w.exec_mask()
    valid = (src >= 0) & exec_lanes[np.clip(src, 0, WAVE - 1)]
    return np.clip(src, 0, WAVE - 1), valid


def _bound_zero(inst: Instruction) -> bool:
    # llvm prints the BOUND_CTRL field set as bound_ctrl:1 (older syntax bound_ctrl:0)
    return "bound_ctrl" in inst.modifiers


def _dpp_source(m: Machine, w: Wave, inst: Instruction, src0: np.ndarray) -> np.ndarray:
    src, valid = _dpp_valid(m, w, inst)
    out = src0[src]
    return np.where(valid, out, np.zeros_like(out))


def _dpp_lanes(m: Machine, w: Wave, inst: Instruction) -> np.ndarray:
    """Lanes an instruction writes: EXEC, and for DPP its row and bank masks and the lanes whose
    source is invalid (unless bound_ctrl makes them read 0)."""
    lanes = w.exec_mask()
    if not inst.dpp:
        return lanes
    row_mask = int(inst.modifiers.get("row_mask", "0xf"), 0)
    bank_mask = int(inst.modifiers.get("bank_mask", "0xf"), 0)
    lanes = lanes & (((row_mask >> (LANES // 16)) & 1) == 1) & (((bank_mask >> ((LANES // 4) % 4)) & 1) == 1)
    if not _bound_zero(inst):
        lanes = lanes & _dpp_valid(m, w, inst)[1]
    return lanes


# --------------------------------------------------------------------------- MFMA


def _mfma(m: Machine, w: Wave, inst: Instruction) -> None:
    shape = mfma_shape(inst.op)
    d, a, b, c = inst.operands[:4]
    for key in ("cbsz", "abid", "blgp"):
        if int(inst.modifiers.get(key, "0"), 0):
            raise m.fault(w, inst, f"{key} broadcast is not modelled")
    if d.count != shape.acc_regs or a.count != 2 or b.count != 2:
        raise m.fault(w, inst, "operand sizes do not match the MFMA shape")
    if w.exec != M64:
        raise m.fault(w, inst, "MFMA executed with some lanes disabled in EXEC (the ISA requires all 64)")

    def words(op: Operand, count: int) -> np.ndarray:
        regs = w.v if op.kind == "v" else w.a
        return regs[op.index: op.index + count].copy()

    if c.kind in ("imm", "fimm"):
        cw = np.full((shape.acc_regs, WAVE), sread(m, w, c), np.uint32)
    else:
        cw = words(c, shape.acc_regs)
    out = mfma_compute(shape, words(a, 2), words(b, 2), cw)
    regs = w.v if d.kind == "v" else w.a
    regs[d.index: d.index + shape.acc_regs] = out
    base = d.index + (256 if d.kind == "a" else 0)
    w.defined[base: base + shape.acc_regs] = True
    latency = (8 if shape.m == 32 else 4) + 3  # XDL passes + 3
    dest = frozenset(d.regs())
    w.waits.append(WaitRequirement(dest, w.slots, latency, inst, "MFMA result read or overwritten by a non-MFMA",
                                   _non_mfma_touch))
    w.waits.append(WaitRequirement(dest, w.slots, latency, inst, "MFMA result read by another MFMA",
                                   _other_mfma_reader(inst)))


# --------------------------------------------------------------------------- LDS


def _ds_width(op: str) -> int:
    """Bytes a ds_read/ds_write moves (sub-dword reads zero-extend)."""
    suffix = op.rsplit("_", 1)[1]
    return {"b8": 1, "u8": 1, "b16": 2, "u16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}[suffix]


def _lds_gather(m: Machine, addr: np.ndarray, ok: np.ndarray, nbytes: int) -> np.ndarray:
    out = np.zeros((WAVE, nbytes), np.uint8)
    if ok.any():
        idx = addr[ok].astype(np.int64)[:, None] + np.arange(nbytes)[None, :]
        out[ok] = m.lds[idx]
    return out


def _bytes_to_words(raw: np.ndarray, nbytes: int) -> np.ndarray:
    """[64, nbytes] -> [ceil(nbytes/4), 64] zero-extended dwords."""
    pad = -(-nbytes // 4) * 4
    full = np.zeros((raw.shape[0], pad), np.uint8)
    full[:, :nbytes] = raw
    return full.view("<u4").T.copy()


def _words_to_bytes(words: np.ndarray, nbytes: int) -> np.ndarray:
    """[n, 64] dwords -> [64, nbytes] little-endian bytes."""
    return np.ascontiguousarray(words.T.astype("<u4")).view(np.uint8)[:, :nbytes]


def _ds_offset(inst: Instruction) -> int:
    return int(inst.modifiers.get("offset", "0"), 0)


@_handler("ds_read_b32", "ds_read_b64", "ds_read_b96", "ds_read_b128", "ds_read_u8", "ds_read_u16")
def _ds_read(m: Machine, w: Wave, inst: Instruction) -> None:
    d, vaddr = inst.operands
    nbytes = _ds_width(inst.op)
    lanes = w.exec_mask()
    addr = (vread(m, w, vaddr).astype(np.int64) + _ds_offset(inst)) & M32  # 32-bit address arithmetic
    ok = m.lds_access(w, inst, addr, nbytes, False, lanes)
    words = _bytes_to_words(_lds_gather(m, addr, ok, nbytes), nbytes)
    for i in range(words.shape[0]):
        _regfile(w, d)[d.index + i][lanes] = words[i][lanes]
        w.defined[d.index + i + (256 if d.kind == "a" else 0)] |= lanes
    w.pending.append(Pending("lgkm", "lds-read", inst, frozenset(d.regs()), lanes))


@_handler("ds_write_b8", "ds_write_b16", "ds_write_b32", "ds_write_b64", "ds_write_b96", "ds_write_b128")
def _ds_write(m: Machine, w: Wave, inst: Instruction) -> None:
    vaddr, data = inst.operands
    nbytes = _ds_width(inst.op)
    lanes = w.exec_mask()
    addr = (vread(m, w, vaddr).astype(np.int64) + _ds_offset(inst)) & M32  # 32-bit address arithmetic
    ok = m.lds_access(w, inst, addr, nbytes, True, lanes)
    words = _regfile(w, data)[data.index: data.index + max(1, data.count)]
    raw = _words_to_bytes(words, nbytes)
    if ok.any():
        idx = addr[ok][:, None] + np.arange(nbytes)[None, :]
        m.lds[idx] = raw[ok]
    w.pending.append(Pending("lgkm", "lds-write", inst, frozenset(), lanes))


def _swizzle_offset(text: str) -> int:
    if not text.startswith("swizzle("):
        return int(text, 0)
    body = text[len("swizzle("):-1]
    mode, *args = [x.strip() for x in body.split(",")]
    if mode == "SWAP":
        return int(args[0]) << 10 | 0x1F
    if mode == "REVERSE":
        return (int(args[0]) - 1) << 10 | 0x1F
    if mode == "BROADCAST":
        size, lane = int(args[0]), int(args[1])
        return lane << 5 | (0x1F & ~(size - 1))
    if mode == "BITMASK_PERM":
        pattern = args[0].strip('"')
        and_mask = or_mask = xor_mask = 0
        for i, ch in enumerate(reversed(pattern)):
            bit = 1 << i
            if ch == "p":
                and_mask |= bit
            elif ch == "i":
                and_mask |= bit
                xor_mask |= bit
            elif ch == "1":
                or_mask |= bit
        return xor_mask << 10 | or_mask << 5 | and_mask
    if mode == "QUAD_PERM":
        sel = [int(x) for x in args]
        return 0x8000 | sel[0] | sel[1] << 2 | sel[2] << 4 | sel[3] << 6
    raise EmulationError(f"gfx942 emulator: ds_swizzle mode {mode} is not known")


@_handler("ds_swizzle_b32")
def _ds_swizzle(m: Machine, w: Wave, inst: Instruction) -> None:
    d, src = inst.operands
    offset = _swizzle_offset(inst.modifiers.get("offset", "0"))
    if offset & 0x8000:
        sel = np.array([(offset >> (2 * i)) & 3 for i in range(4)])
        source = LANES - LANES % 4 + sel[LANES % 4]
    else:
        and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
        source = (LANES & ~31) | (((LANES & and_mask) | or_mask) ^ xor_mask)
    lanes = w.exec_mask()
    values = vread(m, w, src)[source]
    values = np.where(lanes[source], values, np.uint32(0))  # a disabled source lane gives 0
    vwrite(w, d, values, lanes)
    w.pending.append(Pending("lgkm", "lds-read", inst, frozenset(d.regs()), lanes))


@_handler("ds_bpermute_b32", "ds_permute_b32")
def _ds_permute(m: Machine, w: Wave, inst: Instruction) -> None:
    d, addr, data = inst.operands
    lanes = w.exec_mask()
    index = ((vread(m, w, addr).astype(np.int64) + _ds_offset(inst)) >> 2) % WAVE
    values = vread(m, w, data)
    if inst.op == "ds_bpermute_b32":
        out = np.where(lanes[index], values[index], np.uint32(0))
        vwrite(w, d, out, lanes)
    else:
        out = np.zeros(WAVE, np.uint32)
        for lane in np.flatnonzero(lanes):
            out[index[lane]] = values[lane]
        vwrite(w, d, out, lanes)
    w.pending.append(Pending("lgkm", "lds-read", inst, frozenset(d.regs()), lanes))


# --------------------------------------------------------------------------- global and buffer memory


_WIDTHS = {"ubyte": 1, "sbyte": 1, "ushort": 2, "sshort": 2, "byte": 1, "short": 2, "dword": 4,
           "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}


def _mem_width(op: str) -> int:
    return _WIDTHS[op.rsplit("_", 1)[1]]


def _global_addresses(m: Machine, w: Wave, inst: Instruction, vaddr: Operand, saddr: Operand) -> np.ndarray:
    offset = int(inst.modifiers.get("offset", "0"), 0)
    if saddr.kind == "off":
        base = vread(m, w, vaddr, 64)
    else:
        base = np.uint64(sread(m, w, saddr, 64)) + vread(m, w, vaddr).astype(np.uint64)
    return (base.astype(np.int64) + offset).astype(np.uint64)


def _fault_lanes(m: Machine, w: Wave, inst: Instruction, ok: np.ndarray, lanes: np.ndarray,
                 addresses: np.ndarray) -> None:
    bad = lanes & ~ok
    if bad.any():
        lane = int(np.flatnonzero(bad)[0])
        raise m.fault(w, inst, f"memory access to unmapped address {int(addresses[lane]):#x}", lane)


@_handler(*[f"global_load_{s}" for s in ("ubyte", "ushort", "sbyte", "sshort", "dword", "dwordx2", "dwordx3",
                                         "dwordx4")])
def _global_load(m: Machine, w: Wave, inst: Instruction) -> None:
    d, vaddr, saddr = inst.operands
    nbytes = _mem_width(inst.op)
    lanes = w.exec_mask()
    addresses = _global_addresses(m, w, inst, vaddr, saddr)
    raw = np.zeros((WAVE, nbytes), np.uint8)
    if lanes.any():
        data, ok = m.memory.load(addresses[lanes], nbytes)
        full_ok = np.ones(WAVE, bool)
        full_ok[lanes] = ok
        _fault_lanes(m, w, inst, full_ok, lanes, addresses)
        raw[lanes] = data
    words = _bytes_to_words(raw, nbytes)
    if inst.op.endswith(("sbyte", "sshort")):
        bits = 8 * nbytes
        words[0] = ((words[0].astype(np.int64) ^ (1 << (bits - 1))) - (1 << (bits - 1))).astype(np.uint32)
    for i in range(words.shape[0]):
        _regfile(w, d)[d.index + i][lanes] = words[i][lanes]
        w.defined[d.index + i + (256 if d.kind == "a" else 0)] |= lanes
    w.pending.append(Pending("vm", "load", inst, frozenset(d.regs()), lanes))


@_handler(*[f"global_store_{s}" for s in ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4")])
def _global_store(m: Machine, w: Wave, inst: Instruction) -> None:
    vaddr, data, saddr = inst.operands
    nbytes = _mem_width(inst.op)
    lanes = w.exec_mask()
    addresses = _global_addresses(m, w, inst, vaddr, saddr)
    raw = _words_to_bytes(_regfile(w, data)[data.index: data.index + data.count], nbytes)
    if lanes.any():
        who = np.stack([np.full(WAVE, inst.index), np.full(WAVE, m.wg_linear), np.full(WAVE, w.id), LANES], axis=1)
        ok = m.memory.store(addresses[lanes], raw[lanes], who[lanes])
        full_ok = np.ones(WAVE, bool)
        full_ok[lanes] = ok
        _fault_lanes(m, w, inst, full_ok, lanes, addresses)
    w.pending.append(Pending("vm", "store", inst, frozenset(), lanes))


def _atomic_op(op: str, old: int, value: int) -> int:
    s = _s32
    match op:
        case "add":
            return (old + value) & M32
        case "add_f32":
            return int(as_u32(np.array([np.float32(as_f32(np.array([old], np.uint32))[0]) +
                                        np.float32(as_f32(np.array([value], np.uint32))[0])], np.float32))[0])
        case "swap":
            return value
        case "smax":
            return old if s(old) >= s(value) else value
        case "smin":
            return old if s(old) <= s(value) else value
        case "umax":
            return max(old, value)
        case "umin":
            return min(old, value)
    raise EmulationError(f"gfx942 emulator: atomic {op} is not known")


@_handler(*[f"global_atomic_{s}" for s in ("add", "add_f32", "swap", "smax", "smin", "umax", "umin")])
def _global_atomic(m: Machine, w: Wave, inst: Instruction) -> None:
    returns = _ndefs(inst) == 1
    ops = inst.operands[1:] if returns else inst.operands
    vaddr, data, saddr = ops
    kind = inst.op[len("global_atomic_"):]
    lanes = w.exec_mask()
    addresses = _global_addresses(m, w, inst, vaddr, saddr)
    values = vread(m, w, data)
    old_values = np.zeros(WAVE, np.uint32)
    for lane in np.flatnonzero(lanes):  # lanes in order: each sees the previous ones' updates
        raw, ok = m.memory.load(addresses[lane: lane + 1], 4)
        if not ok[0]:
            raise m.fault(w, inst, f"atomic on unmapped address {int(addresses[lane]):#x}", int(lane))
        old = int(raw[0].view("<u4")[0])
        old_values[lane] = old
        new = _atomic_op(kind, old, int(values[lane]))
        m.memory.store(addresses[lane: lane + 1], np.frombuffer(struct.pack("<I", new), np.uint8)[None, :],
                       np.array([[inst.index, m.wg_linear, w.id, lane]]))
    if returns:
        vwrite(w, inst.operands[0], old_values, lanes)
    w.pending.append(Pending("vm", "load" if returns else "store", inst,
                             frozenset(inst.operands[0].regs()) if returns else frozenset(), lanes))


def _buffer_offsets(m: Machine, w: Wave, inst: Instruction, vaddr: Operand, soffset: Operand):
    mods = inst.modifiers
    if "idxen" in mods:
        raise EmulationError(f"gfx942 emulator: {inst}: indexed (idxen) buffer access is not modelled")
    voff = vread(m, w, vaddr).astype(np.int64) if "offen" in mods else np.zeros(WAVE, np.int64)
    inst_off = int(mods.get("offset", "0"), 0)
    return voff + inst_off, sread(m, w, soffset)


def _resource(m: Machine, w: Wave, rsrc: Operand) -> tuple[int, int, int]:
    words = [w.s[rsrc.index + i] for i in range(4)]
    base = words[0] | ((words[1] & 0xFFFF) << 32)
    stride = (words[1] >> 16) & 0x3FFF
    return base, stride, words[2]


@_handler(*[f"buffer_load_{s}" for s in ("ubyte", "ushort", "sbyte", "sshort", "dword", "dwordx2", "dwordx3",
                                         "dwordx4")])
def _buffer_load(m: Machine, w: Wave, inst: Instruction) -> None:
    lds = "lds" in inst.modifiers
    if lds:
        vaddr, rsrc, soffset = inst.operands
        d = None
    else:
        d, vaddr, rsrc, soffset = inst.operands
    nbytes = _mem_width(inst.op)
    base, stride, num_records = _resource(m, w, rsrc)
    if stride:
        raise m.fault(w, inst, "structured buffers (stride != 0) are not modelled")
    lanes = w.exec_mask()
    offsets, soff = _buffer_offsets(m, w, inst, vaddr, soffset)
    # raw buffer range check per dword (sub-dword: the element): offset + size <= num_records
    elem = min(nbytes, 4)
    pieces = max(1, nbytes // 4)
    raw = np.zeros((WAVE, nbytes), np.uint8)
    for piece in range(pieces):
        off = offsets + piece * 4
        inside = lanes & (off >= 0) & (off + elem <= num_records)
        if inside.any():
            addresses = (np.int64(base) + np.int64(soff) + off[inside]).astype(np.uint64)
            data, ok = m.memory.load(addresses, elem)
            if not ok.all():
                lane = int(np.flatnonzero(inside)[np.flatnonzero(~ok)[0]])
                raise m.fault(w, inst, f"buffer load inside num_records from unmapped address "
                                       f"{int(base + soff + off[lane]):#x}", lane)
            raw[inside, piece * 4: piece * 4 + elem] = data
    words = _bytes_to_words(raw, nbytes)
    if lds:
        if nbytes != 4:
            raise m.fault(w, inst, "direct-to-LDS loads of other widths than a dword are not modelled")
        # LDS_ADDR = M0[15:0] (the wave's LDS byte offset) + instruction offset + 4 * lane
        lds_addr = (w.s[M0] & 0xFFFF) + int(inst.modifiers.get("offset", "0"), 0) + 4 * LANES
        lds_addr = lds_addr.astype(np.int64)
        ok = m.lds_access(w, inst, lds_addr, 4, True, lanes)
        if ok.any():
            idx = lds_addr[ok][:, None] + np.arange(4)[None, :]
            m.lds[idx] = _words_to_bytes(words[:1], 4)[ok]
        dma_bytes = (lds_addr[ok][:, None] + np.arange(4)[None, :]).ravel()
        w.pending.append(Pending("vm", "lds-dma", inst, frozenset(), lanes, dma_bytes))
        return
    for i in range(words.shape[0]):
        _regfile(w, d)[d.index + i][lanes] = words[i][lanes]
        w.defined[d.index + i + (256 if d.kind == "a" else 0)] |= lanes
    w.pending.append(Pending("vm", "load", inst, frozenset(d.regs()), lanes))


@_handler(*[f"buffer_store_{s}" for s in ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4")])
def _buffer_store(m: Machine, w: Wave, inst: Instruction) -> None:
    data, vaddr, rsrc, soffset = inst.operands
    nbytes = _mem_width(inst.op)
    base, stride, num_records = _resource(m, w, rsrc)
    if stride:
        raise m.fault(w, inst, "structured buffers (stride != 0) are not modelled")
    lanes = w.exec_mask()
    offsets, soff = _buffer_offsets(m, w, inst, vaddr, soffset)
    raw = _words_to_bytes(_regfile(w, data)[data.index: data.index + data.count], nbytes)
    elem = min(nbytes, 4)
    who = np.stack([np.full(WAVE, inst.index), np.full(WAVE, m.wg_linear), np.full(WAVE, w.id), LANES], axis=1)
    for piece in range(max(1, nbytes // 4)):  # out-of-range elements are dropped
        off = offsets + piece * 4
        inside = lanes & (off >= 0) & (off + elem <= num_records)
        if inside.any():
            addresses = (np.int64(base) + np.int64(soff) + off[inside]).astype(np.uint64)
            ok = m.memory.store(addresses, raw[inside, piece * 4: piece * 4 + elem], who[inside])
            if not ok.all():
                lane = int(np.flatnonzero(inside)[np.flatnonzero(~ok)[0]])
                raise m.fault(w, inst, f"buffer store inside num_records to unmapped address "
                                       f"{int(base + soff + off[lane]):#x}", lane)
    w.pending.append(Pending("vm", "store", inst, frozenset(), lanes))


# --------------------------------------------------------------------------- launching


def run_program(image: KernelImage, memory: GlobalMemory, kernarg: int, grid: Sequence[int]) -> Emulation:
    """Run every workgroup of ``grid`` (x fastest) of ``image`` against ``memory``."""
    machine = Machine(image, memory, kernarg)
    g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
    count = 0
    for z in range(g[2]):
        for y in range(g[1]):
            for x in range(g[0]):
                machine.run_workgroup((x, y, z), count)
                count += 1
    return Emulation(image, machine.findings, machine.executed, count, g)


def emulate(hsaco: bytes, kernel: str, args: Sequence[Any], grid: Sequence[int]) -> Emulation:
    """Launch ``kernel`` of the code object ``hsaco`` on ``grid`` workgroups.

    ``args`` follow the metadata's argument list: a numpy array for a ``global_buffer``
    argument (its bytes are the buffer; the contents after the launch are written back into
    the array), a Python int or float for a ``by_value`` argument (4 bytes: int32 or float32;
    8 bytes: int64 or float64).
    """
    image = KernelImage.from_hsaco(hsaco, kernel)
    return launch(image, args, grid)


def launch(image: KernelImage, args: Sequence[Any], grid: Sequence[int]) -> Emulation:
    if len(args) != len(image.arguments):
        names = ", ".join(str(a.get(".name")) for a in image.arguments)
        raise EmulationError(f"{image.name} takes {len(image.arguments)} arguments ({names}), got {len(args)}")
    memory = GlobalMemory()
    kernarg = bytearray(max(image.kernarg_size, 8))
    outputs = []
    for meta, value in zip(image.arguments, args):
        offset, size, kind = int(meta[".offset"]), int(meta[".size"]), meta[".value_kind"]
        if kind == "global_buffer":
            if not isinstance(value, np.ndarray):
                raise EmulationError(f"argument {meta['.name']} is a buffer: pass a numpy array")
            address = memory.allocate(value)
            kernarg[offset: offset + 8] = struct.pack("<Q", address)
            outputs.append((str(meta[".name"]), value, address))
        elif kind == "by_value":
            if isinstance(value, float) or isinstance(value, np.floating):
                packed = struct.pack("<f" if size == 4 else "<d", float(value))
            else:
                packed = int(value).to_bytes(size, "little", signed=int(value) < 0)
            kernarg[offset: offset + size] = packed
        else:
            raise EmulationError(f"argument kind {kind} of {meta['.name']} is not modelled")
    address = memory.allocate(bytes(kernarg))
    result = run_program(image, memory, address, grid)
    for name, array, base in outputs:
        flat = array.reshape(-1).view(np.uint8)
        flat[:] = memory.read_region(base, flat.size)
        start = base - memory.BASE
        result.writers[name] = memory.writer[start: start + flat.size: max(1, array.itemsize)].copy()
    return result

