"""Assembling and linking gfx942 code objects with LLVM, and reading them back.

:func:`assemble` runs ``llvm-mc`` (``-triple=amdgcn-amd-amdhsa -mcpu=gfx942``) and
``ld.lld -shared`` (the tools :func:`argus.toolchain.find_amdgpu_tools` finds) and returns
the HSA code object (``.hsaco``) bytes.  :func:`read_metadata` returns the code object's
``NT_AMDGPU_METADATA`` note as ``llvm-readobj --notes`` prints it, parsed;
:func:`disassemble` the instructions of one kernel as ``llvm-objdump`` prints them;
:func:`read_descriptor` decodes the 64-byte kernel descriptor (``NAME.kd``) from the ELF.
"""

from __future__ import annotations

import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus.errors import ArgusError, ToolchainError
from argus.toolchain import INSTALL_AMD_TOOLS, AmdgpuTools, find_amdgpu_tools

__all__ = ["AssemblerError", "Descriptor", "Disassembled", "assemble", "disassemble", "read_descriptor", "read_metadata", "tools"]


class AssemblerError(ArgusError):
    """LLVM rejected the emitted assembly (an internal error of the emitter)."""


def tools() -> AmdgpuTools:
    found = find_amdgpu_tools()
    if found is None:
        raise ToolchainError("no LLVM with gfx942 support (llvm-mc and ld.lld) was found",
                             hint=f"install it: {INSTALL_AMD_TOOLS}, or set ARGUS_LLVM_BIN")
    return found


def _run(cmd: list[str], input_text: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, input=input_text, check=False, timeout=120)


def assemble(source: str, *, keep: str | Path | None = None) -> bytes:
    """The linked code object of ``source`` (assembly text); ``keep``: also write it there."""
    t = tools()
    with tempfile.TemporaryDirectory(prefix="argus-gfx942-") as tmp:
        obj, hsaco = Path(tmp) / "kernel.o", Path(tmp) / "kernel.hsaco"
        result = _run([str(t.llvm_mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx942", "-filetype=obj",
                       "-o", str(obj), "-"], source)
        if result.returncode != 0:
            raise AssemblerError(f"llvm-mc rejected the emitted gfx942 assembly:\n{_excerpt(result.stderr, source)}",
                                 hint="this is a bug of the AMDGCN emitter; please report the kernel")
        result = _run([str(t.ld_lld), "-shared", str(obj), "-o", str(hsaco)])
        if result.returncode != 0:
            raise AssemblerError(f"ld.lld failed: {result.stderr.strip()[:2000]}")
        data = hsaco.read_bytes()
    if keep is not None:
        Path(keep).write_bytes(data)
    return data


def _excerpt(stderr: str, source: str) -> str:
    lines = stderr.strip().splitlines()
    return "\n".join(lines[:30])


def _with_file(data: bytes, fn):
    with tempfile.TemporaryDirectory(prefix="argus-gfx942-") as tmp:
        path = Path(tmp) / "kernel.hsaco"
        path.write_bytes(data)
        return fn(path)


def read_metadata(hsaco: bytes) -> dict[str, Any]:
    """The AMDGPU metadata note of a code object, parsed from ``llvm-readobj --notes``."""
    t = tools()
    if t.readobj is None:
        raise ToolchainError("llvm-readobj not found next to llvm-mc", hint=INSTALL_AMD_TOOLS)
    out = _with_file(hsaco, lambda p: _run([str(t.readobj), "--notes", str(p)]))
    if out.returncode != 0:
        raise AssemblerError(f"llvm-readobj failed: {out.stderr.strip()[:500]}")
    text = out.stdout
    start = text.find("AMDGPU Metadata: ---")
    if start < 0:
        raise AssemblerError("the code object has no AMDGPU metadata note")
    body = text[start + len("AMDGPU Metadata: "):]
    end = body.find("\n...")
    yaml_text = body[:end] if end >= 0 else body
    return parse_yaml(yaml_text)


@dataclass(frozen=True)
class Disassembled:
    """One instruction as ``llvm-objdump`` prints it: byte ``offset`` from the kernel's start,
    ``text``, and for a branch the byte offset of its ``target``."""

    offset: int
    text: str
    target: int | None = None


_LINE = re.compile(r"^\s*(?P<text>\S.*?)\s*//\s*(?P<addr>[0-9A-Fa-f]+):[^<]*(?:<(?P<sym>[^>+]+)(?:\+0x(?P<off>[0-9a-f]+))?>)?\s*$")


def disassemble(hsaco: bytes, kernel: str) -> list[Disassembled]:
    """The instructions of ``kernel`` as ``llvm-objdump -d --mcpu=gfx942`` prints them."""
    t = tools()
    if t.objdump is None:
        raise ToolchainError("llvm-objdump not found next to llvm-mc", hint=INSTALL_AMD_TOOLS)
    out = _with_file(hsaco, lambda p: _run([str(t.objdump), "-d", "--mcpu=gfx942", str(p)]))
    if out.returncode != 0:
        raise AssemblerError(f"llvm-objdump failed: {out.stderr.strip()[:500]}")
    found: list[Disassembled] = []
    start: int | None = None
    inside = False
    for line in out.stdout.splitlines():
        header = re.match(r"^([0-9a-f]+) <(.+)>:$", line.strip())
        if header:
            inside = header.group(2) == kernel
            start = int(header.group(1), 16) if inside else start
            continue
        if not inside:
            continue
        m = _LINE.match(line)
        if m is None or start is None:
            continue
        target = None
        if m.group("sym") == kernel:
            target = int(m.group("off") or "0", 16)
        found.append(Disassembled(int(m.group("addr"), 16) - start, m.group("text"), target))
    return found


# --------------------------------------------------------------------------- kernel descriptor


@dataclass(frozen=True)
class Descriptor:
    """Fields of a gfx90a+ kernel descriptor (AMDGPUUsage, "Kernel Descriptor")."""

    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    vgpr_granules: int  # COMPUTE_PGM_RSRC1.GRANULATED_WORKITEM_VGPR_COUNT
    sgpr_granules: int  # COMPUTE_PGM_RSRC1.GRANULATED_WAVEFRONT_SGPR_COUNT
    accum_offset: int  # (COMPUTE_PGM_RSRC3.ACCUM_OFFSET + 1) * 4
    user_sgpr_count: int
    workgroup_id_enabled: tuple[bool, bool, bool]
    workitem_id_dims: int
    kernarg_segment_ptr: bool

    @property
    def max_vgprs(self) -> int:
        """Registers the descriptor reserves per lane (VGPR + AGPR; granule of 8 on gfx90a+)."""
        return (self.vgpr_granules + 1) * 8


def read_descriptor(hsaco: bytes, kernel: str) -> Descriptor:
    """Decode ``kernel.kd`` from the code object's symbol table and sections (ELF64 LE)."""
    raw = _symbol_bytes(hsaco, f"{kernel}.kd", 64)
    group, private, kernarg = struct.unpack_from("<III", raw, 0)
    rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", raw, 44)
    props = struct.unpack_from("<H", raw, 56)[0]
    return Descriptor(
        group_segment_fixed_size=group, private_segment_fixed_size=private, kernarg_size=kernarg,
        vgpr_granules=rsrc1 & 0x3F, sgpr_granules=(rsrc1 >> 6) & 0xF,
        accum_offset=((rsrc3 & 0x3F) + 1) * 4,
        user_sgpr_count=(rsrc2 >> 1) & 0x1F,
        workgroup_id_enabled=(bool(rsrc2 >> 7 & 1), bool(rsrc2 >> 8 & 1), bool(rsrc2 >> 9 & 1)),
        workitem_id_dims=((rsrc2 >> 11) & 3) + 1,
        kernarg_segment_ptr=bool(props >> 3 & 1),
    )


def _symbol_bytes(elf: bytes, name: str, size: int) -> bytes:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise AssemblerError("not an ELF64 code object")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    for sh in sections:
        if sh[1] in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            strtab = sections[sh[6]]
            for off in range(sh[4], sh[4] + sh[5], sh[9]):
                st_name, _info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", elf, off)
                start = strtab[4] + st_name
                sym = elf[start:elf.index(b"\0", start)].decode()
                if sym == name:
                    target = sections[shndx]
                    file_off = target[4] + (value - target[3])
                    return elf[file_off:file_off + size]
    raise AssemblerError(f"symbol {name} not found in the code object")


# --------------------------------------------------------------------------- YAML subset


def parse_yaml(text: str) -> Any:
    """Parse the block-style YAML subset that ``llvm-readobj`` prints for AMDGPU metadata:
    mappings, ``- `` sequences, plain scalars, ``!str`` tags and flow lists ``[1, 2]``."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and line.strip() != "---"]
    value, _ = _block(lines, 0, 0)
    return value


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.startswith("!str "):
        return text[5:].strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_scalar(x) for x in inner.split(",")] if inner else []
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text, 16)
    return text.strip("'\"")


def _block(lines: list[str], i: int, indent: int) -> tuple[Any, int]:
    if i >= len(lines):
        return None, i
    if lines[i].lstrip().startswith("- ") and _indent(lines[i]) == indent:
        items = []
        while i < len(lines) and _indent(lines[i]) == indent and lines[i].lstrip().startswith("- "):
            body = lines[i][indent + 2:]
            sub_indent = indent + 2
            if ":" in body and not body.lstrip().startswith("["):
                lines[i] = " " * sub_indent + body
                value, i = _block(lines, i, sub_indent)
            else:
                value, i = _scalar(body), i + 1
            items.append(value)
        return items, i
    mapping: dict[str, Any] = {}
    while i < len(lines) and _indent(lines[i]) == indent and not lines[i].lstrip().startswith("- "):
        key, _, rest = lines[i].strip().partition(":")
        i += 1
        if rest.strip():
            mapping[key] = _scalar(rest)
        elif i < len(lines) and (_indent(lines[i]) > indent or
                                 (_indent(lines[i]) == indent and lines[i].lstrip().startswith("- "))):
            mapping[key], i = _block(lines, i, _indent(lines[i]))
        else:
            mapping[key] = None
    return mapping, i
