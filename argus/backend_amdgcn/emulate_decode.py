"""The instruction stream the gfx942 emulator executes: the disassembly of a linked code object.

:func:`program_of` reads a kernel out of an ``.hsaco`` with ``llvm-objdump --mcpu=gfx942``
(:func:`argus.backend_amdgcn.assemble.disassemble`) and parses every line into an
:class:`Instruction`: the mnemonic without its encoding suffix (``v_add_u32_e32`` executes as
``v_add_u32``; ``_dpp`` becomes a DPP lane selection), the operands (register ranges,
special registers, inline constants and literals, ``-``/``|x|`` source modifiers) and the
modifiers (``offset:16``, ``quad_perm:[1,0,3,2]``, ``vmcnt(0)``, ``offen``...).  Branch
targets are resolved from byte offsets to instruction indices.  So what the emulator runs is
what the code object holds, not the text the emitter printed.

:func:`parse_listing` accepts plain text in the same syntax (one instruction a line, labels
``name:``), for hand-written test programs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from argus.errors import ArgusError

__all__ = ["DecodeError", "Instruction", "Operand", "base_mnemonic", "parse_instruction", "parse_listing",
           "program_of"]

# gfx9 scalar register numbers of the special registers the emulator models
SPECIAL_SGPR = {"vcc_lo": 106, "vcc_hi": 107, "m0": 124, "exec_lo": 126, "exec_hi": 127}
SPECIAL_PAIR = {"vcc": 106, "exec": 126}


class DecodeError(ArgusError):
    """A line of the disassembly the emulator cannot parse."""


@dataclass(frozen=True)
class Operand:
    """One operand.  ``kind``: ``"s"``, ``"v"``, ``"a"`` (a register range ``index`` ..
    ``index + count - 1``), ``"scc"``, ``"imm"`` (an integer), ``"fimm"`` (a float inline
    constant), ``"off"`` (no register).  ``neg``/``abs`` are VOP3 source modifiers."""

    kind: str
    index: int = 0
    count: int = 1
    value: Any = None
    neg: bool = False
    abs: bool = False
    text: str = ""

    @property
    def is_reg(self) -> bool:
        return self.kind in ("s", "v", "a")

    def regs(self) -> list[tuple[str, int]]:
        return [(self.kind, self.index + i) for i in range(self.count)] if self.is_reg else []

    def __str__(self) -> str:
        return self.text


@dataclass
class Instruction:
    """One decoded instruction: ``op`` is the mnemonic without ``_e32``/``_e64``/``_dpp``/``_sdwa``."""

    index: int
    offset: int
    text: str
    mnemonic: str
    op: str
    operands: list[Operand]
    modifiers: dict[str, str] = field(default_factory=dict)
    dpp: bool = False
    sdwa: bool = False
    encoding: str = ""
    target: int | None = None  # instruction index of a branch target

    def __str__(self) -> str:
        return f"{self.offset:#06x}: {self.text}"


_SUFFIXES = ("_e32", "_e64", "_dpp", "_sdwa")


def base_mnemonic(mnemonic: str) -> tuple[str, str]:
    """``("v_add_u32", "e32")`` for ``v_add_u32_e32``; the suffix is ``""`` when there is none."""
    for suffix in _SUFFIXES:
        if mnemonic.endswith(suffix):
            return mnemonic[: -len(suffix)], suffix[1:]
    return mnemonic, ""


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and parentheses."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


_REG = re.compile(r"^([sva])(\d+)$")
_RANGE = re.compile(r"^([sva])\[(\d+):(\d+)\]$")
_FLOAT = re.compile(r"^-?\d+\.\d*(e[-+]?\d+)?$")


def _operand(text: str) -> Operand:
    raw = text
    neg = absolute = False
    if text.startswith("-") and not re.match(r"^-\d", text):
        neg, text = True, text[1:]
    if text.startswith("neg(") and text.endswith(")"):
        neg, text = True, text[4:-1]
    if text.startswith("|") and text.endswith("|"):
        absolute, text = True, text[1:-1]
    if text.startswith("abs(") and text.endswith(")"):
        absolute, text = True, text[4:-1]
    if m := _REG.match(text):
        return Operand(m.group(1), int(m.group(2)), 1, neg=neg, abs=absolute, text=raw)
    if m := _RANGE.match(text):
        lo, hi = int(m.group(2)), int(m.group(3))
        return Operand(m.group(1), lo, hi - lo + 1, neg=neg, abs=absolute, text=raw)
    if text in SPECIAL_SGPR:
        return Operand("s", SPECIAL_SGPR[text], 1, neg=neg, abs=absolute, text=raw)
    if text in SPECIAL_PAIR:
        return Operand("s", SPECIAL_PAIR[text], 2, neg=neg, abs=absolute, text=raw)
    if text == "scc":
        return Operand("scc", text=raw)
    if text == "off":
        return Operand("off", text=raw)
    if re.fullmatch(r"-?0x[0-9a-fA-F]+", text):
        return Operand("imm", value=int(text, 16), neg=neg, abs=absolute, text=raw)
    if re.fullmatch(r"-?\d+", text):
        return Operand("imm", value=int(text), neg=neg, abs=absolute, text=raw)
    if _FLOAT.match(text):
        return Operand("fimm", value=float(text), neg=neg, abs=absolute, text=raw)
    raise DecodeError(f"operand {raw!r} is not a gfx942 operand the emulator knows")


_NO_OPERANDS = {"s_endpgm", "s_barrier", "s_waitcnt", "s_nop", "s_setprio", "s_branch", "s_sleep",
                "s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_execz", "s_cbranch_execnz",
                "s_cbranch_vccz", "s_cbranch_vccnz"}


def parse_instruction(text: str, index: int = 0, offset: int = 0) -> Instruction:
    """One instruction line (``llvm-objdump`` syntax, without the trailing ``// address`` comment)."""
    text = text.strip()
    mnemonic, _, rest = text.partition(" ")
    op, encoding = base_mnemonic(mnemonic)
    rest = rest.strip()
    operands: list[Operand] = []
    modifiers: dict[str, str] = {}
    if op in _NO_OPERANDS:
        # SOPP: the immediate (or the waitcnt fields) is kept as modifiers / one operand
        if op == "s_waitcnt":
            for m in re.finditer(r"(vmcnt|expcnt|lgkmcnt)\((\d+)\)", rest):
                modifiers[m.group(1)] = m.group(2)
            if rest and not modifiers:
                modifiers["simm16"] = rest.split()[0]
        elif rest:
            operands.append(_operand(rest.split()[0]))
        return Instruction(index, offset, text, mnemonic, op, operands, modifiers, encoding=encoding)
    parts = _split_top(rest) if rest else []
    if parts:
        # the last part carries the space-separated modifiers after the last operand
        last = _split_words(parts[-1])
        parts[-1] = last[0]
        words = last[1:]
        if parts[-1] and ((":" in parts[-1] and not _RANGE.match(parts[-1])) or parts[-1] in _FLAG_WORDS):
            words.insert(0, parts[-1])
            parts = parts[:-1]
        for word in words:
            name, sep, value = word.partition(":")
            modifiers[name] = value if sep else ""
    try:
        operands = [_operand(p) for p in parts if p]
    except DecodeError as err:
        raise DecodeError(f"{err.message} in {text!r}") from None
    return Instruction(index, offset, text, mnemonic, op, operands, modifiers,
                       dpp=encoding == "dpp", sdwa=encoding == "sdwa", encoding=encoding)


_FLAG_WORDS = {"offen", "idxen", "glc", "slc", "sc0", "sc1", "nt", "lds", "clamp", "gds"}


def _split_words(text: str) -> list[str]:
    """Split at spaces outside brackets and parentheses (``quad_perm:[1, 0, 3, 2]``)."""
    words, depth, current = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch.isspace() and depth == 0:
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    return words or [""]


def program_of(hsaco: bytes, kernel: str) -> list[Instruction]:
    """The decoded instructions of ``kernel`` in the linked code object ``hsaco``."""
    from argus.backend_amdgcn.assemble import disassemble

    listing = disassemble(hsaco, kernel)
    if not listing:
        raise DecodeError(f"the code object has no instructions for kernel {kernel!r}")
    by_offset = {d.offset: i for i, d in enumerate(listing)}
    program = []
    for i, d in enumerate(listing):
        inst = parse_instruction(d.text, i, d.offset)
        if d.target is not None:
            if d.target not in by_offset:
                raise DecodeError(f"{inst}: the branch target {d.target:#x} is not an instruction")
            inst.target = by_offset[d.target]
            inst.operands = []
        program.append(inst)
    # instructions after the final s_endpgm (padding) are never reached; keep them for offsets
    return program


def parse_listing(text: str) -> list[Instruction]:
    """Hand-written programs: one instruction a line, ``label:`` lines, ``;`` comments; a
    branch names its label (``s_cbranch_scc1 .Lloop``).  Offsets are instruction indices x 4."""
    lines, labels = [], {}
    for raw in text.splitlines():
        line = raw.split(";")[0].strip()
        if not line:
            continue
        if line.endswith(":"):
            labels[line[:-1]] = len(lines)
            continue
        lines.append(line)
    program = []
    for i, line in enumerate(lines):
        mnemonic, _, rest = line.partition(" ")
        target = None
        if mnemonic.startswith(("s_branch", "s_cbranch_")):
            name = rest.strip()
            if name not in labels:
                raise DecodeError(f"branch to an unknown label {name!r}")
            target, line = labels[name], mnemonic
        inst = parse_instruction(line, i, 4 * i)
        inst.target = target
        program.append(inst)
    return program
