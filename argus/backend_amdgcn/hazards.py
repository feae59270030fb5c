"""A hazard checker over gfx942 assembly text, independent of the emitter's bookkeeping.

It reads the printed assembly (the ``.s`` file :func:`argus.backend_amdgcn.program.assembly`
writes, or any hand-written kernel) with its own instruction tables, written from the CDNA3
ISA — it shares no code with the emitter's classes, allocator or wait-count pass — and
reports every place where the program may observe a value it should not:

=================  =========================================================================
kind               what is reported
=================  =========================================================================
``waitcnt``        a register read or overwritten while a memory instruction that writes it
                   may still be outstanding (a second load into it too, unless both complete
                   in order on one counter): vector memory (``vmcnt``, in issue order), LDS and
                   cross-lane LDS (``lgkmcnt``, in order), scalar loads (``lgkmcnt``, out of
                   order: only ``lgkmcnt(0)`` completes them); an LDS access while a
                   direct-to-LDS load may be in flight
``barrier``        an LDS read after an LDS write (or an LDS write after an LDS read) with no
                   ``s_barrier`` between them on some path, and an ``s_barrier`` reached
                   while an LDS write or vector store may still be in flight (other waves
                   would pass the barrier before the data lands)
``overlap``        a register read as one program value while it may hold another: two values
                   live at once share a register (needs the ``vals=`` operand annotations the
                   emitter prints; hand-written code without them skips this check)
``waitstates``     an MFMA result read or overwritten by a non-MFMA instruction fewer than
                   ``passes + 3`` wait states after the MFMA (the hardware does not interlock)
                   ; a direct-to-LDS load less than one wait state after the SALU write of M0
``m0``             a direct-to-LDS load (``buffer_load_dword ... lds``) where M0, its LDS base,
                   may not have been written
``descriptor``     ``.amdhsa_accum_offset`` not a multiple of 4 in [4, 256], a VGPR used at or
                   above it, AGPRs beyond ``.amdhsa_next_free_vgpr``, SGPRs beyond
                   ``.amdhsa_next_free_sgpr``, metadata register counts that disagree
=================  =========================================================================

Control flow (labels, ``s_branch``, ``s_cbranch_*``, ``s_endpgm``) is followed with a
may-analysis iterated to a fixed point: a hazard on any path is reported.  The LDS rule is
workgroup-level: it treats every LDS access as possibly touching data of another wave (argus
never round-trips a wave's private data through LDS without a barrier).  Two LDS accesses
conflict when their regions overlap: an ``lds=start:end`` annotation in an instruction's
comment (the emitter prints the byte range of the IR shared buffer it addresses, in bounds by
the verifier's proof) confines it to those bytes, compared in 64-byte granules; an access
without one may touch all of LDS.  That is what lets a double buffer fill one stage while
the other is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Hazard", "check", "check_source"]


@dataclass(frozen=True)
class Hazard:
    kind: str
    line: int  # 1-based line of the assembly text
    instruction: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind}: {self.message}\n    {self.instruction}"


# --------------------------------------------------------------------------- parsing


@dataclass
class _Inst:
    line: int
    text: str
    mnemonic: str
    operands: list[str]
    modifiers: str
    values: list[tuple[int, int]] | None  # (value id, dword offset) per register operand
    lds: tuple[int, int] | None = None  # LDS byte range [start, end) an LDS access may touch

    @property
    def lds_cells(self) -> frozenset:
        """The 64-byte LDS granules the instruction may touch (all of LDS when unannotated)."""
        start, end = self.lds if self.lds is not None else (0, 65536)
        return frozenset(("lds", k) for k in range(start // 64, max(start + 1, end + 63) // 64))


@dataclass
class _Program:
    items: list  # _Inst or ("label", name)
    directives: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, int] = field(default_factory=dict)


_REG = re.compile(r"^-?(?P<f>[vsa])(?:(?P<i>\d+)|\[(?P<lo>\d+):(?P<hi>\d+)\])$")
_SPECIAL = {"vcc": [("vcc", 0), ("vcc", 1)], "exec": [("exec", 0), ("exec", 1)], "m0": [("m0", 0)],
            "vcc_lo": [("vcc", 0)], "vcc_hi": [("vcc", 1)], "scc": [("scc", 0)]}


def _registers(token: str) -> list[tuple[str, int]]:
    """The 32-bit registers an operand token names (``v[4:7]`` -> v4..v7)."""
    token = token.strip()
    if token in _SPECIAL:
        return _SPECIAL[token]
    m = _REG.match(token)
    if m is None:
        return []
    if m.group("i") is not None:
        return [(m.group("f"), int(m.group("i")))]
    return [(m.group("f"), i) for i in range(int(m.group("lo")), int(m.group("hi")) + 1)]


def _is_register(token: str) -> bool:
    return _REG.match(token.strip()) is not None


def _split_operands(rest: str) -> tuple[list[str], str]:
    """Operands (comma separated, brackets respected) and the trailing modifiers."""
    parts, depth, current = [], 0, ""
    for ch in rest:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    if not parts:
        return [], ""
    # the last operand may carry space-separated modifiers: "s[4:5] offset:16"
    last = parts[-1].split()
    modifiers = ""
    if len(last) > 1:
        parts[-1] = last[0]
        modifiers = " ".join(last[1:])
    return parts, modifiers


def parse(text: str) -> _Program:
    program = _Program([])
    in_metadata = False
    for number, raw in enumerate(text.splitlines(), start=1):
        code, _, comment = raw.partition(";")
        line = code.strip()
        if in_metadata:
            m = re.match(r"^\s*\.(vgpr_count|agpr_count|sgpr_count|group_segment_fixed_size):\s*(\d+)", raw)
            if m:
                program.metadata[m.group(1)] = int(m.group(2))
            if raw.strip() == ".end_amdgpu_metadata":
                in_metadata = False
            continue
        if not line:
            continue
        if line == ".amdgpu_metadata":
            in_metadata = True
            continue
        if line.startswith(".amdhsa_"):
            name, *value = line.split()
            if value and re.fullmatch(r"-?\d+", value[0]):
                program.directives[name] = int(value[0])
            continue
        if line.startswith("."):
            if line.endswith(":"):
                program.items.append(("label", line[:-1]))
            continue
        if line.endswith(":"):
            program.items.append(("label", line[:-1]))
            continue
        mnemonic, _, rest = line.partition(" ")
        operands, modifiers = _split_operands(rest)
        values = None
        m = re.search(r"vals=(\S*)", comment)
        if m:
            values = []
            for entry in filter(None, m.group(1).split(",")):
                ident, _, offset = entry.lstrip("%").partition("+")
                values.append((int(ident), int(offset or 0)))
        region = re.search(r"lds=(\d+):(\d+)", comment)
        lds = (int(region.group(1)), int(region.group(2))) if region else None
        program.items.append(_Inst(number, line, mnemonic, operands, modifiers, values, lds))
    return program


# --------------------------------------------------------------------------- ISA facts (own tables)

_SMEM = ("s_load_", "s_buffer_load_")
_NO_SCALAR_DEF = ("s_cmp", "s_bitcmp", "s_setprio", "s_nop", "s_waitcnt", "s_barrier", "s_branch", "s_cbranch",
                  "s_endpgm", "s_sleep", "s_sethalt", "s_trap", "s_sendmsg", "s_icache", "s_setvskip")
_VOP3B = ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_addc_co_u32", "v_subb_co_u32",
          "v_subbrev_co_u32", "v_mad_u64_u32", "v_mad_i64_i32", "v_div_scale_f32", "v_div_scale_f64")


@dataclass(frozen=True)
class _Facts:
    """What one instruction does, from the checker's own reading of the ISA."""

    defs: frozenset
    uses: frozenset
    counter: str | None = None  # "vm" | "lgkm"
    in_order: bool = True  # False: scalar memory (returns out of order)
    memory_defs: frozenset = frozenset()  # registers written when the operation completes
    lds_read: bool = False
    lds_write: bool = False
    lds_async_write: bool = False  # direct-to-LDS load (vmcnt)
    vector_store: bool = False
    mfma_passes: int = 0


def _facts(inst: _Inst) -> _Facts:
    op, ops = inst.mnemonic, inst.operands
    regs = [_registers(o) for o in ops]
    flat = lambda idx: frozenset(r for i in idx for r in regs[i]) if idx else frozenset()  # noqa: E731
    every = range(len(ops))
    if op.startswith(_SMEM):
        return _Facts(frozenset(), flat(every[1:]), "lgkm", False, flat([0]))
    if op.startswith(("global_load", "buffer_load", "flat_load")):
        lds = "lds" in inst.modifiers.split()
        if lds:
            return _Facts(frozenset(), flat(every), "vm", lds_async_write=True)
        return _Facts(frozenset(), flat(every[1:]), "vm", True, flat([0]))
    if op.startswith(("global_store", "buffer_store", "flat_store", "global_atomic", "buffer_atomic")):
        return _Facts(frozenset(), flat(every), "vm", vector_store=True)
    if op.startswith(("ds_swizzle", "ds_bpermute", "ds_permute")):
        return _Facts(frozenset(), flat(every[1:]), "lgkm", True, flat([0]))
    if op.startswith(("ds_read", "ds_load")):
        return _Facts(frozenset(), flat(every[1:]), "lgkm", True, flat([0]), lds_read=True)
    if op.startswith(("ds_write", "ds_store")):
        return _Facts(frozenset(), flat(every), "lgkm", True, lds_write=True)
    if op.startswith("v_mfma_"):
        m = re.match(r"v_mfma_f32_(\d+)x", op)
        passes = 8 if m and m.group(1) == "32" else 4
        return _Facts(flat([0]), flat(every[1:]), mfma_passes=passes)
    if op.startswith("v_"):
        if op.startswith("v_cmpx"):
            return _Facts(frozenset(_SPECIAL["exec"]), flat(every))
        defs = [0, 1] if op.startswith(_VOP3B) else [0]
        uses = flat([i for i in every if i not in defs])
        if op in ("v_cndmask_b32", "v_cndmask_b32_e32", "v_addc_co_u32_e32") or op.startswith("v_div_fmas"):
            uses |= frozenset(_SPECIAL["vcc"]) if op.endswith("_e32") or op.startswith("v_div_fmas") else frozenset()
        return _Facts(flat(defs), uses)
    if op.startswith("s_"):
        if op.startswith(_NO_SCALAR_DEF):
            return _Facts(frozenset(), flat(every))
        return _Facts(flat([0]), flat(every[1:]))
    return _Facts(frozenset(), flat(every))


# --------------------------------------------------------------------------- control flow


def _blocks(items: list) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Basic blocks (item ranges) and successors."""
    starts = {0}
    for i, item in enumerate(items):
        if isinstance(item, tuple):
            starts.add(i)
        elif item.mnemonic.startswith(("s_branch", "s_cbranch")) or item.mnemonic == "s_endpgm":
            starts.add(i + 1)
    ordered = sorted(s for s in starts if s < len(items))
    ranges = list(zip(ordered, [*ordered[1:], len(items)]))
    label_block = {items[s][1]: b for b, (s, _) in enumerate(ranges) if isinstance(items[s], tuple)}
    succs: list[list[int]] = []
    for b, (s, e) in enumerate(ranges):
        last = items[e - 1] if e > s else None
        out: list[int] = []
        if isinstance(last, _Inst) and last.mnemonic.startswith(("s_branch", "s_cbranch")):
            target = last.operands[0] if last.operands else ""
            if target in label_block:
                out.append(label_block[target])
        ends = isinstance(last, _Inst) and last.mnemonic in ("s_branch", "s_endpgm")
        if not ends and b + 1 < len(ranges):
            out.append(b + 1)
        succs.append(out)
    return ranges, succs


def _dataflow(items: list, init, transfer, join) -> None:
    """Forward may-analysis to a fixed point; ``transfer(state, inst, report)`` runs once more
    per instruction with ``report=True`` on the final states."""
    ranges, succs = _blocks(items)
    if not ranges:
        return
    entry: list = [None] * len(ranges)
    entry[0] = init()
    work = [0]
    rounds = 0
    while work:
        rounds += 1
        if rounds > 10000:
            raise RuntimeError("hazard analysis did not converge")
        b = work.pop(0)
        state = entry[b]
        for item in items[ranges[b][0]:ranges[b][1]]:
            if isinstance(item, _Inst):
                state = transfer(state, item, False)
        for s in succs[b]:
            joined = state if entry[s] is None else join(entry[s], state)
            if joined != entry[s]:
                entry[s] = joined
                if s not in work:
                    work.append(s)
    for b, (s, e) in enumerate(ranges):
        state = entry[b]
        if state is None:
            continue
        for item in items[s:e]:
            if isinstance(item, _Inst):
                state = transfer(state, item, True)


# --------------------------------------------------------------------------- the checks


def _parse_wait(inst: _Inst) -> dict[str, int]:
    text = " ".join(inst.operands) + " " + inst.modifiers
    if re.fullmatch(r"\s*0\s*", text):
        return {"vm": 0, "lgkm": 0}
    out = {}
    for name, n in re.findall(r"(vmcnt|lgkmcnt)\((\d+)\)", text):
        out["vm" if name == "vmcnt" else "lgkm"] = int(n)
    return out


def _check_waitcnt(program: _Program, hazards: list[Hazard]) -> None:
    # state: frozenset of (line, counter, in_order, regs, newer) pending operations
    def transfer(state, inst: _Inst, report: bool):
        facts = _facts(inst)
        pending = set(state)
        if inst.mnemonic == "s_waitcnt":
            wait = _parse_wait(inst)
            for p in list(pending):
                line, counter, in_order, regs, newer = p
                if counter in wait and ((in_order and newer >= wait[counter]) or wait[counter] == 0):
                    pending.discard(p)
            return frozenset(pending)
        touched = facts.defs | facts.uses
        if facts.lds_read or facts.lds_write:
            touched = touched | inst.lds_cells
        # what the operation writes when it completes (a direct-to-LDS load: its LDS bytes)
        returns = facts.memory_defs | (inst.lds_cells if facts.lds_async_write else frozenset())
        if report:
            for line, counter, in_order, regs, _ in sorted(pending, key=lambda p: p[0]):
                clash = regs & touched
                if not clash and regs & returns and not (
                        counter == facts.counter and in_order and facts.in_order):
                    clash = regs & returns  # two returns into one register may land out of order
                if clash:
                    reg = sorted(clash)[0]
                    what = "LDS" if reg[0] == "lds" else f"{reg[0]}{reg[1]}"
                    hazards.append(Hazard("waitcnt", inst.line, inst.text,
                                          f"{what} is used while the memory operation at line {line} that writes it "
                                          f"may still be outstanding (no s_waitcnt {counter}cnt covers it)"))
        if facts.counter is not None:
            bumped = set()
            for p in pending:
                line, counter, in_order, regs, newer = p
                if counter == facts.counter and facts.in_order:
                    p = (line, counter, in_order, regs, min(newer + 1, 64))
                bumped.add(p)
            pending = bumped
            writes = facts.memory_defs | (inst.lds_cells if facts.lds_async_write else frozenset())
            pending = {p for p in pending if p[0] != inst.line}
            pending.add((inst.line, facts.counter, facts.in_order, frozenset(writes), 0))
        return frozenset(pending)

    def join(a, b):
        merged: dict = {}
        for line, counter, in_order, regs, newer in (*a, *b):
            key = (line, counter, in_order, regs)
            merged[key] = min(newer, merged.get(key, 64))
        return frozenset((*k, n) for k, n in merged.items())

    _dataflow(program.items, frozenset, transfer, join)


def _check_barriers(program: _Program, hazards: list[Hazard]) -> None:
    # state: (lines of LDS writes since the last barrier, lines of LDS reads since it,
    #         lines of LDS writes / vector stores possibly in flight)
    def transfer(state, inst: _Inst, report: bool):
        writes, reads, flight = state
        facts = _facts(inst)
        if inst.mnemonic == "s_waitcnt":
            wait = _parse_wait(inst)
            flight = frozenset(f for f in flight if not (f[1] in wait and wait[f[1]] == 0))
            return (writes, reads, flight)
        if inst.mnemonic == "s_barrier":
            if report and flight:
                line, counter = sorted(flight)[0]
                hazards.append(Hazard("barrier", inst.line, inst.text,
                                      f"s_barrier while the memory write at line {line} may be in flight "
                                      f"(no s_waitcnt {counter}cnt(0) before the barrier)"))
            return (frozenset(), frozenset(), flight)
        cells = inst.lds_cells
        if facts.lds_read and report:
            clash = [line for line, where in writes if where & cells]
            if clash:
                hazards.append(Hazard("barrier", inst.line, inst.text,
                                      f"LDS read after the LDS write at line {min(clash)} with no s_barrier between "
                                      "them on some path (another wave's data may not be there yet)"))
        if (facts.lds_write or facts.lds_async_write) and report:
            clash = [line for line, where in reads if where & cells]
            if clash:
                hazards.append(Hazard("barrier", inst.line, inst.text,
                                      f"LDS write after the LDS read at line {min(clash)} with no s_barrier between "
                                      "them on some path (another wave may still read the old data)"))
        if facts.lds_write or facts.lds_async_write:
            writes = writes | {(inst.line, cells)}
            flight = flight | {(inst.line, facts.counter)}
        if facts.lds_read:
            reads = reads | {(inst.line, cells)}
        if facts.vector_store:
            flight = flight | {(inst.line, "vm")}
        return (writes, reads, flight)

    def join(a, b):
        return (a[0] | b[0], a[1] | b[1], a[2] | b[2])

    _dataflow(program.items, lambda: (frozenset(), frozenset(), frozenset()), transfer, join)


def _check_overlap(program: _Program, hazards: list[Hazard]) -> None:
    insts = [i for i in program.items if isinstance(i, _Inst)]
    if not insts or all(i.values is None for i in insts):
        return
    defined: set[int] = set()
    operand_values: dict[int, list] = {}
    for inst in insts:
        facts = _facts(inst)
        reg_ops = [o for o in inst.operands if _is_register(o)]
        if inst.values is None or len(inst.values) != len(reg_ops):
            continue
        per: list = []
        for token, (ident, offset) in zip(reg_ops, inst.values):
            regs = _registers(token)
            dwords = [(r, (ident, offset + k)) for k, r in enumerate(regs)]
            written = bool(set(regs) & (facts.defs | facts.memory_defs))
            per.append((token, dwords, written))
            if written:
                defined.add(ident)
        operand_values[inst.line] = per

    # state: frozenset of (register, (value id, dword)) pairs a register may hold
    def transfer(state, inst: _Inst, report: bool):
        per = operand_values.get(inst.line)
        if per is None:
            return state
        holds: dict = {}
        for reg, val in state:
            holds.setdefault(reg, set()).add(val)
        for _token, dwords, written in per:
            if written:
                continue
            for reg, want in dwords:
                if want[0] not in defined:
                    continue  # an input of the kernel (kernarg address, ids): not defined here
                have = holds.get(reg, set())
                others = {v for v in have if v != want}
                if report and (others or not have):
                    detail = (f"may hold %{sorted(others)[0][0]} (dword {sorted(others)[0][1]})" if others
                              else "was never written with it on some path")
                    hazards.append(Hazard("overlap", inst.line, inst.text,
                                          f"{reg[0]}{reg[1]} is read as %{want[0]} (dword {want[1]}) but {detail}: "
                                          "two values live at once share this register"))
        for _token, dwords, written in per:
            if written:
                for reg, val in dwords:
                    holds[reg] = {val}
        return frozenset((r, v) for r, vals in holds.items() for v in vals)

    _dataflow(program.items, frozenset, transfer, lambda a, b: a | b)


def _check_wait_states(program: _Program, hazards: list[Hazard]) -> None:
    # state: frozenset of (mfma line, registers, wait states still needed)
    def transfer(state, inst: _Inst, report: bool):
        facts = _facts(inst)
        if inst.mnemonic == "s_nop":
            n = int(inst.operands[0], 0) + 1 if inst.operands else 1
            return frozenset((line, regs, need - n) for line, regs, need in state if need - n > 0)
        if not facts.mfma_passes and report:
            for line, regs, need in sorted(state):
                clash = regs & (facts.defs | facts.uses)
                if clash:
                    reg = sorted(clash)[0]
                    hazards.append(Hazard("waitstates", inst.line, inst.text,
                                          f"{reg[0]}{reg[1]} is accessed {need} wait state(s) too early after "
                                          f"the MFMA at line {line} that writes it"))
        out = {(line, regs, need - 1) for line, regs, need in state if need - 1 > 0}
        if facts.mfma_passes:
            out.add((inst.line, facts.defs, facts.mfma_passes + 3))
        return frozenset(out)

    def join(a, b):
        best: dict = {}
        for line, regs, need in (*a, *b):
            best[(line, regs)] = max(need, best.get((line, regs), 0))
        return frozenset((*k, v) for k, v in best.items())

    _dataflow(program.items, frozenset, transfer, join)


def _writes_m0(inst: _Inst) -> bool:
    return inst.mnemonic.startswith("s_") and bool(inst.operands) and inst.operands[0] == "m0" \
        and not inst.mnemonic.startswith(_NO_SCALAR_DEF)


def _check_m0(program: _Program, hazards: list[Hazard]) -> None:
    """A direct-to-LDS load takes its LDS base from M0: M0 must have been written on every path,
    by a scalar instruction at least one wait state earlier (the CDNA3 "SALU writes M0 → LDS DMA"
    rule)."""
    # state: (M0 may be unwritten, line of the last M0 write, wait states still needed after it)
    def transfer(state, inst: _Inst, report: bool):
        unset, line, need = state
        if inst.mnemonic == "s_nop":
            n = int(inst.operands[0], 0) + 1 if inst.operands else 1
            return (unset, line, max(0, need - n))
        if _facts(inst).lds_async_write and report:
            if unset:
                hazards.append(Hazard("m0", inst.line, inst.text,
                                      "direct-to-LDS load with M0 (its LDS base) not written on some path"))
            elif need:
                hazards.append(Hazard("waitstates", inst.line, inst.text,
                                      f"direct-to-LDS load {need} wait state(s) too early after the M0 write at "
                                      f"line {line}"))
        if _writes_m0(inst):
            return (False, inst.line, 1)
        return (unset, line, max(0, need - 1))

    def join(a, b):
        return (a[0] or b[0], max(a[1], b[1]), max(a[2], b[2]))

    _dataflow(program.items, lambda: (True, 0, 0), transfer, join)


def _check_descriptor(program: _Program, hazards: list[Hazard]) -> None:
    d = program.directives
    if ".amdhsa_next_free_vgpr" not in d:
        return
    top = {"v": 0, "a": 0, "s": 0}
    for item in program.items:
        if isinstance(item, _Inst):
            for token in item.operands:
                for f, i in _registers(token):
                    if f in top:
                        top[f] = max(top[f], i + 1)
    offset = d.get(".amdhsa_accum_offset")
    where = 0
    text = "kernel descriptor"
    if offset is not None and (offset % 4 or not 4 <= offset <= 256):
        hazards.append(Hazard("descriptor", where, text, f".amdhsa_accum_offset {offset} is not a multiple of 4 "
                                                         "in [4, 256]"))
    if offset is not None and top["v"] > offset:
        hazards.append(Hazard("descriptor", where, text, f"v{top['v'] - 1} is used but .amdhsa_accum_offset is "
                                                         f"{offset}: the AGPRs start below it"))
    if top["a"]:
        base = offset if offset is not None else 0
        if base + top["a"] > d[".amdhsa_next_free_vgpr"]:
            hazards.append(Hazard("descriptor", where, text,
                                  f"a{top['a'] - 1} is used: accum_offset {base} + {top['a']} AGPRs exceed "
                                  f".amdhsa_next_free_vgpr {d['.amdhsa_next_free_vgpr']}"))
    elif top["v"] > d[".amdhsa_next_free_vgpr"]:
        hazards.append(Hazard("descriptor", where, text, f"v{top['v'] - 1} is used but .amdhsa_next_free_vgpr is "
                                                         f"{d['.amdhsa_next_free_vgpr']}"))
    if ".amdhsa_next_free_sgpr" in d and top["s"] > d[".amdhsa_next_free_sgpr"]:
        hazards.append(Hazard("descriptor", where, text, f"s{top['s'] - 1} is used but .amdhsa_next_free_sgpr is "
                                                         f"{d['.amdhsa_next_free_sgpr']}"))
    meta = program.metadata
    if "vgpr_count" in meta and meta["vgpr_count"] != d[".amdhsa_next_free_vgpr"]:
        hazards.append(Hazard("descriptor", where, text, f"metadata .vgpr_count {meta['vgpr_count']} differs from "
                                                         f".amdhsa_next_free_vgpr {d['.amdhsa_next_free_vgpr']}"))
    if "agpr_count" in meta and meta["agpr_count"] < top["a"]:
        hazards.append(Hazard("descriptor", where, text, f"metadata .agpr_count {meta['agpr_count']} but "
                                                         f"{top['a']} AGPRs are used"))
    if "group_segment_fixed_size" in meta and ".amdhsa_group_segment_fixed_size" in d \
            and meta["group_segment_fixed_size"] != d[".amdhsa_group_segment_fixed_size"]:
        hazards.append(Hazard("descriptor", where, text, "metadata and descriptor disagree on the LDS size"))


CHECKS = {"waitcnt": _check_waitcnt, "barrier": _check_barriers, "overlap": _check_overlap,
          "waitstates": _check_wait_states, "m0": _check_m0, "descriptor": _check_descriptor}


def check_source(text: str, checks: tuple[str, ...] = tuple(CHECKS)) -> list[Hazard]:
    """Every hazard of one kernel's assembly text (see the module docstring), by line."""
    program = parse(text)
    hazards: list[Hazard] = []
    for name in checks:
        CHECKS[name](program, hazards)
    unique = {(h.kind, h.line, h.message): h for h in hazards}
    return sorted(unique.values(), key=lambda h: (h.line, h.kind))


def check(text: str) -> list[Hazard]:
    """:func:`check_source` with every check."""
    return check_source(text)
