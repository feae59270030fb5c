"""Equality of IR up to renaming.

Two programs are equivalent when they have the same ops in the same order, with equal fields,
after a consistent renaming of what each program names for itself: loop counters and
``ReadIndex`` results (bound where they are defined), allocated buffers and async handles (a
bijection fixed at first use).  Symbols neither program binds (sizes, thread and block ids)
must be the same.  Source positions are ignored.  This is how a policy's output is compared with
the pipeline an expert writes by hand.

Index expressions are compared structurally after renaming, then by value on sampled integer
assignments of their free symbols (``k // 3`` traced by Python's ``//`` prints as
``floor(k/3)``, by the policy as ``FloorDiv(k, 3)``: equal functions, different trees).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

import sympy

from argus.ir import nodes as N

_IGNORED = {"loc", "inserted_by"}
_SAMPLES = 24


@dataclass(frozen=True)
class Difference:
    """Where two programs first differ (``path`` walks from the root region) and how."""

    path: str
    left: str
    right: str

    def __str__(self) -> str:
        return f"{self.path}: {self.left}  vs  {self.right}"


class _Mismatch(Exception):
    def __init__(self, path: str, left: Any, right: Any) -> None:
        self.difference = Difference(path, _short(left), _short(right))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 160 else text[:157] + "..."


class _Comparer:
    def __init__(self) -> None:
        self.symbols: dict[sympy.Symbol, sympy.Symbol] = {}
        self.buffers: dict[str, str] = {}
        self.buffers_back: dict[str, str] = {}
        self.handles: dict[str, str] = {}
        self.handles_back: dict[str, str] = {}
        self.rng = random.Random(0)

    # ---------------------------------------------------------------- names

    def _bijection(self, forward: dict[str, str], back: dict[str, str], a: str, b: str, path: str, what: str) -> None:
        if forward.setdefault(a, b) != b or back.setdefault(b, a) != a:
            raise _Mismatch(path, f"{what} {a} (paired with {forward[a]})", f"{what} {b} (paired with {back[b]})")

    def buffer(self, a: N.Buffer, b: N.Buffer, path: str) -> None:
        self._bijection(self.buffers, self.buffers_back, a.name, b.name, path, "buffer")
        for name in ("space", "dtype", "size", "layout", "alignment", "param_index"):
            self.value(getattr(a, name), getattr(b, name), f"{path}.{name}")

    def bind(self, a: sympy.Symbol, b: sympy.Symbol) -> None:
        self.symbols[a] = b

    # ---------------------------------------------------------------- values

    def expr(self, a: Any, b: Any, path: str) -> None:
        ea = a.xreplace(self.symbols) if isinstance(a, sympy.Basic) else a
        if ea == b:
            return
        sa = sympy.sympify(ea)
        sb = sympy.sympify(b)
        free = sorted(sa.free_symbols | sb.free_symbols, key=lambda s: s.name)
        for _ in range(_SAMPLES):
            env = {s: sympy.Integer(self.rng.randint(0, 40)) for s in free}
            try:
                va, vb = sa.xreplace(env), sb.xreplace(env)
                va = va.doit() if hasattr(va, "doit") else va
                vb = vb.doit() if hasattr(vb, "doit") else vb
                same = bool(sympy.simplify(sympy.Eq(va, vb))) if not (va.is_Boolean or vb.is_Boolean) else bool(va) == bool(vb)
            except (TypeError, ValueError, ZeroDivisionError):
                same = False
            if not same:
                raise _Mismatch(path, ea, b)

    def view(self, a: N.View, b: N.View, path: str) -> None:
        self.buffer(a.buffer, b.buffer, f"{path}.buffer")
        self.value(a.layout, b.layout, f"{path}.layout")
        self.value(a.swizzle, b.swizzle, f"{path}.swizzle")
        if a.coord_symbols != b.coord_symbols:
            raise _Mismatch(f"{path}.coord_symbols", a.coord_symbols, b.coord_symbols)
        self.expr(a.offset, b.offset, f"{path}.offset")
        self.value(a.coords, b.coords, f"{path}.coords")
        self.value(a.valid, b.valid, f"{path}.valid")

    def value(self, a: Any, b: Any, path: str) -> None:
        match a:
            case N.View():
                if not isinstance(b, N.View):
                    raise _Mismatch(path, a, b)
                self.view(a, b, path)
            case N.Buffer():
                if not isinstance(b, N.Buffer):
                    raise _Mismatch(path, a, b)
                self.buffer(a, b, path)
            case N.Handle():
                if not isinstance(b, N.Handle) or a.kind is not b.kind:
                    raise _Mismatch(path, a, b)
                self._bijection(self.handles, self.handles_back, a.name, b.name, path, "handle")
            case N.Region():
                if not isinstance(b, N.Region):
                    raise _Mismatch(path, a, b)
                self.region(a, b, path)
            case tuple():
                if not isinstance(b, tuple) or len(a) != len(b):
                    raise _Mismatch(path, a, b)
                for i, (x, y) in enumerate(zip(a, b)):
                    self.value(x, y, f"{path}[{i}]")
            case sympy.Basic():
                self.expr(a, b, path)
            case _:
                if isinstance(b, sympy.Basic):
                    self.expr(sympy.sympify(a), b, path)
                elif a != b or type(a) is not type(b):
                    raise _Mismatch(path, a, b)

    # ---------------------------------------------------------------- ops

    def op(self, a: N.Op, b: N.Op, path: str) -> None:
        if type(a) is not type(b):
            raise _Mismatch(path, a.kind, b.kind)
        match a:
            case N.For():
                self.expr(a.start, b.start, f"{path}.start")
                self.expr(a.stop, b.stop, f"{path}.stop")
                self.bind(a.var, b.var)
            case N.ReadIndex():
                self.view(a.src, b.src, f"{path}.src")
                self.bind(a.result, b.result)
        for f in dataclasses.fields(a):
            if f.name in _IGNORED or (isinstance(a, N.For) and f.name in ("var", "start", "stop")) \
                    or (isinstance(a, N.ReadIndex) and f.name in ("result", "src")):
                continue
            self.value(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")

    def region(self, a: N.Region, b: N.Region, path: str) -> None:
        for i, (x, y) in enumerate(zip(a.ops, b.ops)):
            self.op(x, y, f"{path}[{i}]:{x.kind}")
        if len(a.ops) != len(b.ops):
            i = min(len(a.ops), len(b.ops))
            extra_a = a.ops[i].kind if i < len(a.ops) else "(end)"
            extra_b = b.ops[i].kind if i < len(b.ops) else "(end)"
            raise _Mismatch(f"{path}[{i}]", extra_a, extra_b)


def difference(a: N.Region | N.Kernel, b: N.Region | N.Kernel) -> Difference | None:
    """The first difference between two programs up to renaming, or ``None`` if equivalent.

    For kernels the launch configurations are compared too (names, consts and assumptions are not).
    """
    comparer = _Comparer()
    try:
        if isinstance(a, N.Kernel) and isinstance(b, N.Kernel):
            comparer.value(a.launch.threads, b.launch.threads, "launch.threads")
            comparer.value(a.launch.cluster, b.launch.cluster, "launch.cluster")
            comparer.value(tuple(a.launch.grid), tuple(b.launch.grid), "launch.grid")
            comparer.region(a.body, b.body, "body")
        else:
            comparer.region(a, b, "body")
    except _Mismatch as mismatch:
        return mismatch.difference
    return None


def equivalent(a: N.Region | N.Kernel, b: N.Region | N.Kernel) -> bool:
    """``a`` and ``b`` are the same program up to renaming (see :func:`difference`)."""
    return difference(a, b) is None
