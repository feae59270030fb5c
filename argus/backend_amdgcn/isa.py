"""The gfx942 machine-code model the emitter builds: registers, operands, instructions.

A kernel body is a list of :class:`Inst` and :class:`Label` items in program order.  Registers
are :class:`VirtualReg` values (a register file, a size in dwords, an alignment and a name
that says which program value it holds) referenced through :class:`RegRef` (a dword range of
one register).  The register allocator maps every virtual register to a physical base
index; :func:`render` then prints the assembly.  A few registers are *fixed* (the kernarg
pointer in ``s[0:1]``, the work-item ids in ``v0``): they are virtual registers whose
``fixed`` index the allocator keeps.

Each instruction states which of its operands it writes (``defs``) and which special
registers it reads or writes implicitly (``exec``, ``vcc``, ``scc``, ``m0``).  Its *class*
(:func:`inst_class`) says which hardware counter tracks it (``vmcnt`` for vector memory,
``lgkmcnt`` for LDS, scalar memory and messages) — the facts the wait-count insertion and the
wait-state pass need.  The hazard checker (:mod:`argus.backend_amdgcn.hazards`) does *not*
use these tables: it reads the printed assembly with its own.
"""

from __future__ import annotations

import enum
import itertools
import re
from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "EMITTED_MNEMONICS",
    "Counter",
    "Imm",
    "Inst",
    "InstClass",
    "Label",
    "RegFile",
    "RegRef",
    "Special",
    "VirtualReg",
    "inst_class",
    "mfma_passes",
    "render_operand",
]


class RegFile(enum.Enum):
    """A register file of one wavefront."""

    SGPR = "s"  # scalar: one 32-bit value per wave
    VGPR = "v"  # vector: one 32-bit value per lane
    AGPR = "a"  # accumulation registers (MFMA C/D), one per lane

    @property
    def prefix(self) -> str:
        return self.value


_ids = itertools.count()


@dataclass(frozen=True, eq=False)
class VirtualReg:
    """A program value held in ``size`` consecutive registers of ``file``.

    Identity is the object.  ``name`` says what it holds (an IR buffer and element range, an
    address, a predicate) so that allocation errors can name it; ``align`` is the alignment
    of its first register (tuples of 64-bit operands are even-aligned on gfx942, scalar
    quads such as buffer resources 4-aligned); ``fixed`` pins it to a physical index.
    """

    file: RegFile
    size: int
    name: str
    align: int = 1
    fixed: int | None = None
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"%{self.file.prefix}{self.id}<{self.name}>"

    def __getitem__(self, index: int | slice) -> RegRef:
        """``reg[i]`` is dword ``i``; ``reg[i:j]`` dwords ``i .. j-1``."""
        if isinstance(index, slice):
            start, stop, _ = index.indices(self.size)
            return RegRef(self, start, stop - start)
        if not 0 <= index < self.size:
            raise IndexError(f"dword {index} of a {self.size}-dword register")
        return RegRef(self, index, 1)

    @property
    def all(self) -> RegRef:
        return RegRef(self, 0, self.size)


@dataclass(frozen=True)
class RegRef:
    """Dwords ``offset .. offset+size-1`` of a virtual register (``neg``: a negated source, ``-v3``)."""

    reg: VirtualReg
    offset: int = 0
    size: int = 1
    neg: bool = False

    def __post_init__(self) -> None:
        if self.offset < 0 or self.size < 1 or self.offset + self.size > self.reg.size:
            raise ValueError(f"dwords {self.offset}..{self.offset + self.size - 1} of {self.reg!r}")

    @property
    def file(self) -> RegFile:
        return self.reg.file

    def negated(self) -> RegRef:
        return RegRef(self.reg, self.offset, self.size, not self.neg)


@dataclass(frozen=True)
class Special:
    """A special register operand: ``exec``, ``vcc``, ``m0``, ``scc`` (and their halves)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Imm:
    """An immediate (inline constant or literal); floats print as IEEE hex literals when needed."""

    value: int | float

    def __str__(self) -> str:
        return _format_imm(self.value)


@dataclass(frozen=True)
class LabelRef:
    name: str

    def __str__(self) -> str:
        return self.name


Operand = Union[RegRef, Special, Imm, LabelRef, str]


@dataclass(frozen=True)
class Label:
    """A branch target (``.LBB3:``)."""

    name: str


@dataclass(frozen=True)
class Inst:
    """One machine instruction.

    ``operands`` print in order; ``defs`` are the indices of the operands it writes (the
    others are read).  ``modifiers`` is the text after the operands (``offen offset:16``).
    ``implicit_defs``/``implicit_uses`` name special registers (``exec``, ``vcc``, ``scc``,
    ``m0``) and, for LDS ordering, ``"lds"`` (an instruction that writes or reads LDS).
    ``lds``: the byte range ``[start, end)`` of the LDS arena an LDS access may touch (the IR
    shared buffer it addresses, whose accesses the verifier proves in bounds); None: anywhere.
    """

    opcode: str
    operands: tuple[Operand, ...] = ()
    defs: tuple[int, ...] = ()
    modifiers: str = ""
    implicit_defs: tuple[str, ...] = ()
    implicit_uses: tuple[str, ...] = ()
    comment: str = ""
    lds: tuple[int, int] | None = None

    def reg_defs(self) -> list[RegRef]:
        return [op for i, op in enumerate(self.operands) if i in self.defs and isinstance(op, RegRef)]

    def reg_uses(self) -> list[RegRef]:
        return [op for i, op in enumerate(self.operands) if i not in self.defs and isinstance(op, RegRef)]

    @property
    def cls(self) -> InstClass:
        return inst_class(self.opcode, self.modifiers)


Item = Union[Inst, Label]


# --------------------------------------------------------------------------- classes


class Counter(enum.Enum):
    """The s_waitcnt counters of gfx9 (export is unused by compute kernels)."""

    VM = "vmcnt"  # vector memory: loads, stores, atomics, direct-to-LDS loads
    LGKM = "lgkmcnt"  # LDS, GDS, scalar memory (SMEM), messages

    @property
    def maximum(self) -> int:
        """The largest count the s_waitcnt field encodes on gfx9."""
        return 63 if self is Counter.VM else 15


class InstClass(enum.Enum):
    SALU = "salu"
    SMEM = "smem"  # scalar loads: lgkmcnt, may return out of order
    VALU = "valu"
    MFMA = "mfma"
    VMEM_LOAD = "vmem.load"  # global/buffer loads into VGPRs: vmcnt
    VMEM_STORE = "vmem.store"  # global/buffer stores: vmcnt (gfx9 has no separate store counter)
    VMEM_LDS = "vmem.lds"  # buffer_load ... lds: vmcnt, writes LDS
    DS_READ = "ds.read"  # LDS reads into VGPRs: lgkmcnt, in order with other LDS ops
    DS_WRITE = "ds.write"  # LDS writes: lgkmcnt
    DS_CROSSLANE = "ds.crosslane"  # ds_swizzle / ds_bpermute / ds_permute: lgkmcnt, no LDS memory
    BRANCH = "branch"
    BARRIER = "barrier"
    WAITCNT = "waitcnt"
    NOP = "nop"
    CONTROL = "control"  # s_setprio, s_endpgm, s_sleep ...

    @property
    def counter(self) -> Counter | None:
        if self.value.startswith("vmem"):
            return Counter.VM
        if self in (InstClass.SMEM, InstClass.DS_READ, InstClass.DS_WRITE, InstClass.DS_CROSSLANE):
            return Counter.LGKM
        return None


_SOPP_CONTROL = ("s_setprio", "s_endpgm", "s_sleep", "s_sethalt", "s_icache_inv", "s_sendmsg",
                 "s_trap", "s_ttracedata", "s_incperflevel", "s_decperflevel", "s_setkill")


def inst_class(opcode: str, modifiers: str = "") -> InstClass:
    """The class of an instruction (the emitter's table; the hazard checker keeps its own)."""
    op = opcode
    if op.startswith("v_mfma_"):
        return InstClass.MFMA
    if op.startswith(("v_", "V_")):
        return InstClass.VALU
    if op.startswith(("s_load_", "s_buffer_load_", "s_store_", "s_dcache")):
        return InstClass.SMEM
    if op == "s_waitcnt":
        return InstClass.WAITCNT
    if op == "s_barrier":
        return InstClass.BARRIER
    if op == "s_nop":
        return InstClass.NOP
    if op.startswith(("s_branch", "s_cbranch_")):
        return InstClass.BRANCH
    if op.startswith(_SOPP_CONTROL):
        return InstClass.CONTROL
    if op.startswith("s_"):
        return InstClass.SALU
    if op.startswith(("global_load", "buffer_load", "flat_load")):
        return InstClass.VMEM_LDS if "lds" in modifiers.split() else InstClass.VMEM_LOAD
    if op.startswith(("global_store", "buffer_store", "flat_store", "global_atomic", "buffer_atomic")):
        return InstClass.VMEM_STORE
    if op.startswith(("ds_swizzle", "ds_bpermute", "ds_permute")):
        return InstClass.DS_CROSSLANE
    if op.startswith(("ds_read", "ds_load")):
        return InstClass.DS_READ
    if op.startswith(("ds_write", "ds_store", "ds_add", "ds_max", "ds_min")):
        return InstClass.DS_WRITE
    raise ValueError(f"opcode {opcode!r} has no class in the gfx942 table")


_MFMA_SHAPE = re.compile(r"v_mfma_f32_(\d+)x(\d+)x(\d+)_")


def mfma_passes(opcode: str) -> int:
    """Issue passes of a gfx942 XDL MFMA: 8 for 32x32 shapes, 4 for 16x16 (their latency in
    cycles / 4, which sets the wait states before a non-MFMA consumer)."""
    match = _MFMA_SHAPE.match(opcode)
    if match is None:
        raise ValueError(f"{opcode!r} is not an MFMA")
    return {32: 8, 16: 4}[int(match.group(1))]


LDS_GRANULE = 64  # bytes: the unit in which LDS regions are compared (rounded outwards)
LDS_BYTES = 65536


def lds_granules(region: tuple[int, int] | None) -> frozenset[tuple[str, int]]:
    """``("lds", k)`` for every 64-byte granule of an LDS byte range (None: all of LDS)."""
    start, end = region if region is not None else (0, LDS_BYTES)
    return frozenset(("lds", k) for k in range(start // LDS_GRANULE, max(start + 1, end + LDS_GRANULE - 1)
                                                // LDS_GRANULE))


# --------------------------------------------------------------------------- the emitted subset


def _emitted_mnemonics() -> frozenset[str]:
    from argus.ir.atoms import atom_names, mma_atom

    widths = ("dword", "dwordx2", "dwordx3", "dwordx4")
    names = {
        # scalar ALU, control, scalar memory
        "s_add_i32", "s_add_u32", "s_addc_u32", "s_sub_i32", "s_sub_u32", "s_subb_u32", "s_mul_i32",
        "s_mul_hi_u32", "s_lshl_b32", "s_lshl_b64", "s_lshr_b32", "s_ashr_i32", "s_and_b32", "s_or_b32",
        "s_xor_b32", "s_min_i32", "s_max_i32", "s_and_b64", "s_or_b64", "s_not_b64", "s_andn2_b64",
        "s_and_saveexec_b64", "s_mov_b32", "s_mov_b64", "s_cselect_b32", "s_cselect_b64", "s_cmp_lg_u32",
        "s_cmp_lg_u64", "s_branch", "s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_execz", "s_barrier",
        "s_setprio", "s_waitcnt", "s_nop", "s_endpgm", "s_load_dword", "s_load_dwordx2",
        # vector ALU
        "v_mov_b32", "v_add_u32", "v_sub_u32", "v_mul_lo_u32", "v_mul_hi_u32", "v_lshlrev_b32", "v_lshrrev_b32",
        "v_ashrrev_i32", "v_lshl_add_u32", "v_lshl_add_u64", "v_mad_u64_u32", "v_add3_u32", "v_and_b32",
        "v_or_b32", "v_xor_b32", "v_bfe_u32", "v_bfi_b32", "v_min_i32", "v_max_i32", "v_min_u32", "v_max_u32",
        "v_cndmask_b32_e64", "v_readfirstlane_b32", "v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32", "v_add_f32", "v_sub_f32", "v_mul_f32",
        "v_fma_f32", "v_max_f32", "v_min_f32", "v_med3_f32", "v_exp_f32", "v_log_f32", "v_rcp_f32", "v_rsq_f32",
        "v_sqrt_f32", "v_rndne_f32", "v_div_scale_f32", "v_div_fmas_f32", "v_div_fixup_f32", "v_cvt_f16_f32",
        "v_cvt_f32_f16", "v_cvt_f32_i32", "v_cvt_i32_f32", "v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32",
        "v_cvt_f32_fp8", "v_cvt_f32_bf8", "v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32",
        "v_max_f32_dpp", "v_min_f32_dpp", "v_add_f32_dpp", "v_max_i32_dpp", "v_min_i32_dpp", "v_add_u32_dpp",
        "v_cmp_u_f32_e64", "v_cmp_ge_f32_e64", "v_cmp_gt_f32_e64", "v_cmp_eq_u32_e64",
        # LDS and cross-lane
        "ds_read_u8", "ds_read_u16", "ds_swizzle_b32", "ds_bpermute_b32",
        # global and buffer memory
        "global_load_ubyte", "global_load_ushort", "buffer_load_ubyte", "buffer_load_ushort",
        "global_atomic_add", "global_atomic_add_f32", "global_atomic_swap", "global_atomic_smax",
        "global_atomic_smin", "global_atomic_umax", "global_atomic_umin",
    }
    names |= {f"ds_read_b{b}" for b in (32, 64, 96, 128)} | {f"ds_write_b{b}" for b in (8, 16, 32, 64, 96, 128)}
    names |= {f"{p}_{w}" for p in ("global_load", "global_store", "buffer_load") for w in widths}
    names |= {"global_store_byte", "global_store_short"}
    names |= {f"v_cmp_{r}_i32_e64" for r in ("lt", "le", "gt", "ge", "eq", "ne")}
    names |= {f"s_cmp_{r}_i32" for r in ("lt", "le", "gt", "ge", "eq", "lg")}
    names |= {mma_atom(n).lowering.mnemonic for n in atom_names("mma") if mma_atom(n).family == "mfma"}
    return frozenset(names)


EMITTED_MNEMONICS: frozenset[str] = _emitted_mnemonics()
"""Every mnemonic the gfx942 emitter can produce (selection refuses to emit any other): the one
list an instruction-level emulator shares with the emitter."""


# --------------------------------------------------------------------------- printing


def _format_imm(value: int | float) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        if -16 <= value <= 64:
            return str(value)
        return hex(value & 0xFFFFFFFF) if value < 0 else hex(value)
    import struct

    inline = {0.5: "0.5", -0.5: "-0.5", 1.0: "1.0", -1.0: "-1.0", 2.0: "2.0", -2.0: "-2.0",
              4.0: "4.0", -4.0: "-4.0", 0.0: "0"}
    if value in inline:
        return inline[value]
    return hex(struct.unpack("<I", struct.pack("<f", value))[0])


def physical_name(file: RegFile, index: int, size: int) -> str:
    """``v5``, ``v[4:7]``, ``s[0:1]``, ``a[0:15]``."""
    if size == 1:
        return f"{file.prefix}{index}"
    return f"{file.prefix}[{index}:{index + size - 1}]"


def render_operand(op: Operand, assignment: dict[VirtualReg, int] | None) -> str:
    if isinstance(op, RegRef):
        reg = op.reg
        base = reg.fixed if reg.fixed is not None else (assignment or {}).get(reg)
        sign = "-" if op.neg else ""
        if base is None:
            return sign + f"%{reg.file.prefix}{reg.id}" + (f"[{op.offset}:{op.offset + op.size - 1}]"
                                                           if (op.offset, op.size) != (0, reg.size) else "")
        return sign + physical_name(reg.file, base + op.offset, op.size)
    return str(op)


def render_inst(inst: Inst, assignment: dict[VirtualReg, int] | None = None) -> str:
    text = inst.opcode
    if inst.operands:
        text += " " + ", ".join(render_operand(op, assignment) for op in inst.operands)
    if inst.modifiers:
        text += " " + inst.modifiers
    return text


def value_annotation(inst: Inst) -> str:
    """``vals=%12,%7+1``: the program value (virtual register id, plus the first dword's offset)
    each register operand holds, in operand order.  The hazard checker reads it to tell which
    value a register is meant to hold (register overlap); the hardware ignores comments."""
    refs = [op for op in inst.operands if isinstance(op, RegRef)]
    return "vals=" + ",".join(f"%{r.reg.id}" + (f"+{r.offset}" if r.offset else "") for r in refs)


def render(items: list[Item], assignment: dict[VirtualReg, int] | None = None, *,
           comments: bool = True) -> str:
    """The assembly text of a body (one instruction or label per line); ``comments`` adds the
    source position and the value annotation of each instruction."""
    lines = []
    for item in items:
        if isinstance(item, Label):
            lines.append(f"{item.name}:")
            continue
        line = "  " + render_inst(item, assignment)
        if comments:
            region = f"lds={item.lds[0]}:{item.lds[1]}" if item.lds is not None else ""
            note = " ".join(x for x in (value_annotation(item) if any(isinstance(o, RegRef) for o in item.operands)
                                        else "", region, f"@ {item.comment}" if item.comment else "") if x)
            if note:
                line = f"{line:<64} ; {note}"
        lines.append(line)
    return "\n".join(lines) + "\n"
