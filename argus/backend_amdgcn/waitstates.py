"""Wait-state hazards the gfx942 hardware does not check: ``s_nop`` insertion (after allocation).

Some dependencies between instructions are not interlocked: the program must put enough
*wait states* (issued instructions, or ``s_nop n`` = ``n + 1`` states) between producer and
consumer.  The rules argus's code can meet (CDNA3 ISA "Manually Inserted Wait States", with
LLVM's hazard recognizer for gfx940 as the reference):

=====================================================  ==========================================
producer → consumer                                    wait states
=====================================================  ==========================================
XDL MFMA (P passes) writes D → non-MFMA reads/writes D  P + 3 (11 for 32x32, 7 for 16x16)
XDL MFMA writes D → MFMA reads D as A/B or other C      P + 3
XDL MFMA writes D → same MFMA accumulating into D       0 (back-to-back accumulation)
XDL MFMA reads C → non-MFMA writes C                    3 / 7 / 15 for 4 / 8 / 16 passes
VALU writes a VGPR/AGPR → MFMA reads it                 2
VALU writes a VGPR → DPP reads it                       2
VALU writes an SGPR → vector memory reads it            5
VALU writes an SGPR or VCC → VALU reads it              2 (gfx940 "VDecCoExec")
transcendental VALU (exp, log, rcp, rsq, sqrt) → VALU   1 (gfx940 trans forwarding)
reads its result
VALU writes VCC → ``v_div_fmas`` reads it                4
SALU writes M0 → LDS-direct load / LDS op reads M0      1
vector store of more than 8 bytes → VALU writes data    1
=====================================================  ==========================================

The pass tracks pending requirements forward through the control flow (the largest one at a
join, iterated around loops) and inserts the fewest ``s_nop`` (at most 8 states each).
"""

from __future__ import annotations

from dataclasses import dataclass

from argus.backend_amdgcn.cfg import blocks
from argus.backend_amdgcn.isa import (
    Imm,
    Inst,
    InstClass,
    Item,
    RegRef,
    Special,
    VirtualReg,
    mfma_passes,
)
from argus.backend_amdgcn.waitcnt import physical_regs

__all__ = ["insert_wait_states", "required_wait_states"]

Phys = tuple[str, int]

MFMA_READ_C_WAR = {2: 1, 4: 3, 8: 7, 16: 15}
NOP_MAX = 8  # wait states of one s_nop 7


@dataclass(frozen=True)
class Pending:
    """``regs`` may not be accessed by a ``consumer`` for ``states`` more wait states.

    ``chain`` (MFMA results only): the MFMA opcode and result registers that may accumulate
    into them back to back.
    """

    regs: frozenset[Phys]
    consumer: str
    states: int
    chain: tuple[str, frozenset[Phys]] | None = None


def _regs(op: object, assignment: dict[VirtualReg, int]) -> frozenset[Phys]:
    if isinstance(op, RegRef):
        return frozenset(physical_regs(op, assignment))
    if op == "vcc":
        return frozenset({("vcc", 0)})
    if isinstance(op, Special):
        return frozenset({(op.name, 0)})
    return frozenset()


def _uses(inst: Inst, assignment) -> frozenset[Phys]:
    regs = set()
    for i, op in enumerate(inst.operands):
        if i not in inst.defs:
            regs |= _regs(op, assignment)
    regs |= {(name, 0) for name in inst.implicit_uses}
    return frozenset(regs)


def _defs(inst: Inst, assignment) -> frozenset[Phys]:
    regs = set()
    for i in inst.defs:
        regs |= _regs(inst.operands[i], assignment)
    regs |= {(name, 0) for name in inst.implicit_defs}
    return frozenset(regs)


def required_wait_states(pending: list[Pending], inst: Inst, assignment: dict[VirtualReg, int]) -> int:
    """Wait states ``inst`` needs after the producers recorded in ``pending``."""
    cls = inst.cls
    uses, defs = _uses(inst, assignment), _defs(inst, assignment)
    need = 0
    for p in pending:
        if p.states <= need:
            continue
        hit = False
        match p.consumer:
            case "nonmfma-read":
                hit = cls is not InstClass.MFMA and bool(p.regs & uses)
            case "nonmfma-write":
                hit = cls is not InstClass.MFMA and bool(p.regs & defs)
            case "mfma-read":
                if cls is InstClass.MFMA and p.regs & uses:
                    hit = True
                    if p.chain is not None:
                        opcode, dst = p.chain
                        src_c = _regs(inst.operands[3], assignment)
                        a_b = _regs(inst.operands[1], assignment) | _regs(inst.operands[2], assignment)
                        if inst.opcode == opcode and src_c == dst and defs == dst and not (a_b & dst):
                            hit = False
            case "dpp-read":
                hit = "_dpp" in inst.opcode and bool(p.regs & uses)
            case "vmem-sgpr-read":
                hit = cls in (InstClass.VMEM_LOAD, InstClass.VMEM_STORE, InstClass.VMEM_LDS) and bool(p.regs & uses)
            case "div-fmas":
                hit = inst.opcode.startswith("v_div_fmas") and bool(p.regs & uses)
            case "m0-read":
                hit = bool(p.regs & uses) and cls in (InstClass.VMEM_LDS, InstClass.DS_READ, InstClass.DS_WRITE)
            case "valu-write":
                hit = cls is InstClass.VALU and bool(p.regs & defs)
            case "valu-sgpr-read":
                hit = cls in (InstClass.VALU, InstClass.MFMA) and bool(p.regs & uses)
            case "trans-read":
                hit = cls in (InstClass.VALU, InstClass.MFMA) and not _is_trans(inst.opcode) and bool(p.regs & uses)
        if hit:
            need = p.states
    return need


def _produced(inst: Inst, assignment: dict[VirtualReg, int]) -> list[Pending]:
    cls = inst.cls
    out: list[Pending] = []
    defs = _defs(inst, assignment)
    if cls is InstClass.MFMA:
        passes = mfma_passes(inst.opcode)
        dst = _regs(inst.operands[0], assignment)
        src_c = _regs(inst.operands[3], assignment)
        out += [Pending(dst, "nonmfma-read", passes + 3), Pending(dst, "nonmfma-write", passes + 3),
                Pending(dst, "mfma-read", passes + 3, (inst.opcode, dst))]
        if src_c:
            out.append(Pending(src_c, "nonmfma-write", MFMA_READ_C_WAR[passes]))
    elif cls is InstClass.VALU:
        vector = frozenset(r for r in defs if r[0] in ("v", "a"))
        scalar = frozenset(r for r in defs if r[0] == "s")
        if vector:
            out += [Pending(vector, "mfma-read", 2), Pending(vector, "dpp-read", 2)]
        if scalar:
            out.append(Pending(scalar, "vmem-sgpr-read", 5))
            out.append(Pending(scalar, "valu-sgpr-read", 2))
        if ("vcc", 0) in defs:
            out.append(Pending(frozenset({("vcc", 0)}), "div-fmas", 4))
            out.append(Pending(frozenset({("vcc", 0)}), "valu-sgpr-read", 2))
        if vector and _is_trans(inst.opcode):
            out.append(Pending(vector, "trans-read", 1))
    elif cls is InstClass.SALU and ("m0", 0) in defs:
        out.append(Pending(frozenset({("m0", 0)}), "m0-read", 1))
    elif cls is InstClass.VMEM_STORE:
        data = store_data(inst)
        if data is not None and data.size > 2:
            out.append(Pending(_regs(data, assignment), "valu-write", 1))
    return out


_TRANS = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")


def _is_trans(opcode: str) -> bool:
    return opcode.startswith(_TRANS)


def store_data(inst: Inst) -> RegRef | None:
    """The data operand of a vector-memory store (``buffer_store`` lists it first,
    ``global_store`` second)."""
    index = 0 if inst.opcode.startswith("buffer_") else 1
    op = inst.operands[index] if len(inst.operands) > index else None
    return op if isinstance(op, RegRef) else None


def _advance(pending: list[Pending], states: int) -> list[Pending]:
    return [Pending(p.regs, p.consumer, p.states - states, p.chain) for p in pending if p.states > states]


def _join(a: list[Pending] | None, b: list[Pending]) -> list[Pending]:
    if a is None:
        return list(b)
    best: dict[tuple, Pending] = {}
    for p in [*a, *b]:
        key = (p.regs, p.consumer, p.chain)
        if key not in best or best[key].states < p.states:
            best[key] = p
    return sorted(best.values(), key=lambda p: (p.consumer, sorted(p.regs), -p.states))


def _step(pending: list[Pending], inst: Inst, assignment) -> tuple[list[Pending], int]:
    if inst.opcode == "s_nop":
        count = inst.operands[0].value if isinstance(inst.operands[0], Imm) else int(str(inst.operands[0]))
        return _advance(pending, int(count) + 1), 0
    need = required_wait_states(pending, inst, assignment)
    pending = _advance(pending, need + 1)
    return pending + _produced(inst, assignment), need


def insert_wait_states(items: list[Item], assignment: dict[VirtualReg, int]) -> list[Item]:
    """``items`` with the ``s_nop`` instructions the table above requires."""
    cfg = blocks(items)
    entry: list[list[Pending] | None] = [None] * len(cfg)
    if cfg:
        entry[0] = []
    work = [0] if cfg else []
    while work:
        b = work.pop(0)
        pending = list(entry[b] or [])
        for item in items[cfg[b].start:cfg[b].end]:
            if isinstance(item, Inst):
                pending, _ = _step(pending, item, assignment)
        for s in cfg[b].succs:
            joined = _join(entry[s], pending)
            if entry[s] is None or set(joined) != set(entry[s]):
                entry[s] = joined
                if s not in work:
                    work.append(s)
    out: list[Item] = []
    for b, block in enumerate(cfg):
        pending = list(entry[b] or [])
        for item in items[block.start:block.end]:
            if isinstance(item, Inst):
                pending, need = _step(pending, item, assignment)
                while need > 0:
                    chunk = min(need, NOP_MAX)
                    out.append(Inst("s_nop", (Imm(chunk - 1),), comment=f"wait states before {item.opcode}"))
                    need -= chunk
            out.append(item)
    return out
