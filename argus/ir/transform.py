"""Rewriting IR: substituting index expressions and cloning regions with fresh names.

Policies (:mod:`argus.ir.policies`) duplicate a traced loop body for a prologue, a steady state
and an epilogue, or unroll it; each copy binds the loop counter to a different expression and
must define its own symbols and buffers.  :class:`Renamer` does both, generically over the
fields of the op dataclasses:

* every sympy expression (offsets, predicates, bounds, tag fields...) is ``xreplace``-d with the
  symbol mapping;
* every view and buffer reference follows the buffer mapping;
* with ``fresh`` names, the symbols (``For`` counters, ``ReadIndex`` results) and buffers
  (``Alloc``) a cloned region defines are renamed, so copies never define a name twice.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from typing import Any

import sympy

from argus import symbolic
from argus.ir import nodes as N


class Names:
    """Fresh names for one kernel: none collides with a buffer or symbol already in it."""

    def __init__(self, kernel: N.Kernel | None = None) -> None:
        self.used: set[str] = set()
        self._count = itertools.count()
        if kernel is not None:
            self.used |= {p.name for p in kernel.params}
            for op in N.walk(kernel.body):
                for value in _leaves(op):
                    if isinstance(value, N.Buffer):
                        self.used.add(value.name)
                    elif isinstance(value, sympy.Basic):
                        self.used |= {s.name for s in value.free_symbols}
                    elif isinstance(value, N.Handle):
                        self.used.add(value.name)

    def fresh(self, prefix: str) -> str:
        while True:
            name = f"{prefix}{next(self._count)}"
            if name not in self.used:
                self.used.add(name)
                return name

    def symbol(self, prefix: str) -> sympy.Symbol:
        return sympy.Symbol(self.fresh(prefix), integer=True)


def _leaves(value: Any) -> Iterable[Any]:
    """Every buffer, expression and handle inside an op's fields (not descending into regions)."""
    if isinstance(value, N.Op):
        for f in dataclasses.fields(value):
            yield from _leaves(getattr(value, f.name))
    elif isinstance(value, N.View):
        yield value.buffer
        yield from _leaves((value.offset, value.coords, value.valid))
    elif isinstance(value, tuple):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, (N.Buffer, sympy.Basic, N.Handle)):
        yield value


class Renamer:
    """Maps expressions, views, ops and regions through a symbol and a buffer mapping.

    ``names`` (a :class:`Names`) makes :meth:`region` give every symbol and buffer the cloned
    region defines a fresh name; without it definitions keep their names.
    """

    def __init__(self, symbols: dict[sympy.Symbol, Any] | None = None,
                 buffers: dict[str, N.Buffer] | None = None, names: Names | None = None) -> None:
        self.symbols = {k: symbolic.to_sympy(v) for k, v in (symbols or {}).items()}
        self.buffers = dict(buffers or {})
        self.names = names

    def child(self) -> Renamer:
        return Renamer(self.symbols, self.buffers, self.names)

    def expr(self, e: Any) -> Any:
        if isinstance(e, sympy.Basic) and self.symbols and e.free_symbols & self.symbols.keys():
            out = e.xreplace(self.symbols)
            return symbolic.normalize(out) if isinstance(out, sympy.Expr) else out
        return e

    def buffer(self, b: N.Buffer) -> N.Buffer:
        return self.buffers.get(b.name, b)

    def view(self, v: N.View) -> N.View:
        return dataclasses.replace(
            v, buffer=self.buffer(v.buffer), offset=self.expr(v.offset),
            coords=None if v.coords is None else tuple(self.expr(c) for c in v.coords), valid=self.expr(v.valid))

    def value(self, value: Any) -> Any:
        match value:
            case N.View():
                return self.view(value)
            case N.Buffer():
                return self.buffer(value)
            case N.Region():
                return self.region(value)
            case tuple():
                return tuple(self.value(v) for v in value)
            case sympy.Basic():
                return self.expr(value)
            case _:
                return value

    def op(self, op: N.Op) -> N.Op:
        """``op`` with every field mapped (definitions in nested regions renamed when fresh)."""
        if self.names is not None:
            match op:
                case N.Alloc(buffer=buffer):
                    new = dataclasses.replace(buffer, name=self.names.fresh(buffer.name + "_"))
                    self.buffers[buffer.name] = new
                case N.ReadIndex(result=result):
                    self.symbols[result] = self.names.symbol(result.name + "_")
                case N.For(var=var):
                    inner = self.child()
                    inner.symbols[var] = self.names.symbol(var.name + "_")
                    return dataclasses.replace(op, var=inner.symbols[var], start=self.expr(op.start),
                                               stop=self.expr(op.stop), body=inner.region(op.body),
                                               elected=self.expr(op.elected))
        changes = {}
        for f in dataclasses.fields(op):
            if f.name in ("loc", "inserted_by", "scope"):
                continue
            old = getattr(op, f.name)
            if isinstance(old, N.Region):
                new = self.child().region(old)
            elif f.name == "result" and isinstance(op, N.ReadIndex):
                new = self.symbols.get(old, old)
            else:
                new = self.value(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(op, **changes) if changes else op

    def region(self, region: N.Region) -> N.Region:
        return N.Region(tuple(self.op(op) for op in region.ops))

    def ops(self, ops: Iterable[N.Op]) -> list[N.Op]:
        return [self.op(op) for op in ops]


def substitute(ops: Iterable[N.Op], mapping: dict[sympy.Symbol, Any], names: Names | None = None) -> list[N.Op]:
    """``ops`` with the symbols of ``mapping`` replaced (and, with ``names``, fresh definitions)."""
    return Renamer(mapping, names=names).ops(ops)
