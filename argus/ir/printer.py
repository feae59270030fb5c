"""A readable, stable text form of the IR (golden tests compare it; the kernel hash hashes it).

Example::

    kernel vector_add(a: global f32[n] ..., b: ..., c: ..., n: index)
        threads=128 grid=(ceil(n/128),)  consts: BLOCK=128
      assume n >= 1                                   # examples/vector_add.py:12
      copy.sync %a[128*bid_x + tid] -> %r0[0] if 128*bid_x + tid < n   # examples/vector_add.py:15
"""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any

import sympy

from argus.ir import nodes as N


def expr(e: Any) -> str:
    """An index expression or predicate as text (deterministic)."""
    if e is None:
        return "true"
    if isinstance(e, bool):
        return "true" if e else "false"
    if isinstance(e, sympy.Basic):
        return sympy.sstr(e, order="lex")
    return str(e)


def view(v: N.View) -> str:
    name = v.buffer.name if v.rank is None else f"{v.buffer.name}@rank({expr(v.rank)})"
    text = f"%{name}[{expr(v.offset)} + {v.layout}]"
    if v.swizzle is not None:
        text = f"%{name}[{v.swizzle}({expr(v.offset)} + {v.layout})]"
    if v.valid is not None:
        text += f"{{valid: {expr(v.valid)}}}"
    return text


def _position(op: N.Op, root: str | None) -> str:
    def rel(pos):
        if pos is None:
            return None
        file = pos.file
        if root and file.startswith(root):
            file = os.path.relpath(file, root)
        else:
            file = os.path.basename(file)
        return f"{file}:{pos.line}"

    where = rel(op.loc)
    if op.inserted_by is not None:
        where = f"{where or '?'} (inserted by {rel(op.inserted_by)})"
    return f"  # {where}" if where else ""


def _operand(value: Any) -> str:
    match value:
        case N.View():
            return view(value)
        case N.Buffer():
            return f"%{value.name}"
        case N.Handle():
            return repr(value)
        case N.Region():
            return "{...}"
        case sympy.Basic():
            return expr(value)
        case tuple():
            return "(" + ", ".join(_operand(v) for v in value) + ")"
        case _:
            return repr(value) if isinstance(value, str) else str(value)


_SKIP = {"loc", "inserted_by", "scope", "elected"}


def op_line(op: N.Op) -> str:
    """The one-line head of an op (regions printed separately)."""
    parts = []
    for f in fields(op):
        if f.name in _SKIP:
            continue
        value = getattr(op, f.name)
        if isinstance(value, N.Region) or value is None or value == ():
            continue
        parts.append(f"{f.name}={_operand(value)}")
    head = op.kind.lower()
    if op.scope is not N.Scope.THREAD:
        head += f"@{op.scope.value}"
    if op.elected is not None:
        head += f"[elect {expr(op.elected)}]"
    return f"{head} " + " ".join(parts)


def print_region(region: N.Region, indent: int = 1, root: str | None = None) -> list[str]:
    lines: list[str] = []
    pad = "  " * indent
    for op in region.ops:
        lines.append(pad + op_line(op) + _position(op, root))
        match op:
            case N.If(then=then, orelse=orelse):
                lines += print_region(then, indent + 1, root)
                if orelse.ops:
                    lines.append(pad + "else")
                    lines += print_region(orelse, indent + 1, root)
                lines.append(pad + "end")
            case N.For(body=body) | N.WarpRole(body=body):
                lines += print_region(body, indent + 1, root)
                lines.append(pad + "end")
    return lines


def print_kernel(kernel: N.Kernel, root: str | None = None) -> str:
    """The kernel as text; ``root`` makes source paths relative (stable across checkouts)."""
    params = []
    for p in kernel.params:
        if p.kind == "tensor" and p.buffer is not None:
            b = p.buffer
            params.append(f"{p.name}: {b.space.value} {b.dtype}[{b.layout}]")
        elif p.kind == "index":
            params.append(f"{p.name}: index")
        else:
            params.append(f"{p.name}: {p.dtype}")
    launch = kernel.launch
    head = [
        f"kernel {kernel.name}({', '.join(params)})",
        f"    threads={launch.threads} grid=({', '.join(expr(g) for g in launch.grid)})"
        + (f" cluster={launch.cluster}" if launch.cluster != (1, 1, 1) else "")
        + (f"  consts: {', '.join(f'{k}={v}' for k, v in kernel.consts)}" if kernel.consts else ""),
    ]
    for a in kernel.assumptions:
        head.append(f"  assume {expr(a.predicate) if a.kind == 'predicate' else a.text}")
    return "\n".join(head + print_region(kernel.body, 1, root)) + "\n"
