"""Well-formedness of the IR: every symbol and buffer is used inside its scope, shapes and
element types of operands agree, and structural rules of the concurrency contract hold.

The checks are a table: one function per op kind, each returning problems, so adding an op
means adding one row.  ``check(kernel)`` raises :class:`IRError` listing every problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sympy

from argus import symbolic
from argus.errors import ArgusError
from argus.ir import nodes as N
from argus.ir.uniformity import Uniformity, analyze


class IRError(ArgusError):
    """The IR is malformed (a front-end or policy bug, or hand-built IR that is wrong)."""


@dataclass
class _Scope:
    symbols: set[sympy.Symbol] = field(default_factory=set)
    buffers: set[str] = field(default_factory=set)

    def child(self) -> _Scope:
        return _Scope(set(self.symbols), set(self.buffers))


def _shape(view: N.View) -> tuple[Any, ...]:
    shape = view.layout.shape if isinstance(view.layout.shape, tuple) else (view.layout.shape,)
    from argus.layout_algebra import Layout

    return tuple(symbolic.normalize(Layout(s).size) for s in shape)


def _view_problems(view: N.View, scope: _Scope, what: str) -> Iterator[str]:
    if view.buffer.space is not N.MemorySpace.GLOBAL and view.buffer.name not in scope.buffers:
        yield f"{what}: buffer %{view.buffer.name} is used outside the scope of its allocation"
    allowed = scope.symbols | set(view.coord_symbols)
    for part, expr in (("offset", view.offset), ("valid", view.valid)):
        if isinstance(expr, sympy.Basic):
            stray = expr.free_symbols - allowed
            if stray:
                yield f"{what}: {part} uses {', '.join(sorted(s.name for s in stray))} outside its scope"
    for c in view.coords or ():
        if isinstance(c, sympy.Basic) and c.free_symbols - allowed:
            stray = c.free_symbols - allowed
            yield f"{what}: coordinates use {', '.join(sorted(s.name for s in stray))} outside its scope"


def _expr_problems(expr: Any, scope: _Scope, what: str, extra: set[sympy.Symbol] = frozenset()) -> Iterator[str]:
    if isinstance(expr, sympy.Basic):
        stray = expr.free_symbols - scope.symbols - set(extra)
        if stray:
            yield f"{what} uses {', '.join(sorted(s.name for s in stray))} outside its scope"


def _same_shape(a: N.View, b: N.View, what: str) -> Iterator[str]:
    if _shape(a) != _shape(b):
        yield f"{what}: shapes differ ({_shape(a)} vs {_shape(b)})"


def _matrix_copy(op: N.Copy) -> Iterator[str]:
    """``ldmatrix``/``stmatrix``: a shared tile of the atom's matrices and a (2, matrices) fragment."""
    from argus.ir.atoms import AtomError, copy_atom

    try:
        matrix = copy_atom(op.atom).matrix
    except AtomError as err:
        yield f"copy: {err.message}"
        return
    load = matrix.direction == "load"
    tile, fragment = (op.src, op.dst) if load else (op.dst, op.src)
    if tile.buffer.space is not N.MemorySpace.SHARED or fragment.space is not N.MemorySpace.REGISTER:
        yield f"{op.atom}: moves between a shared tile and a register fragment"
    shape = _shape(tile)
    if len(shape) != 2 or any(not isinstance(s, int) or s % 8 for s in shape) or \
            shape[0] // 8 * (shape[1] // 8) != matrix.matrices:
        yield f"{op.atom}: the shared tile {shape} is not {matrix.matrices} 8x8 matrices"
    if _shape(fragment) != (2, matrix.matrices):
        yield f"{op.atom}: the fragment {_shape(fragment)} is not (2, {matrix.matrices})"
    if op.scope is not N.Scope.WARP:
        yield f"{op.atom}: a matrix copy is executed by a warp (scope warp), not {op.scope.value}"


def _copy(op: N.Copy, scope: _Scope) -> Iterator[str]:
    yield from _view_problems(op.src, scope, "copy source")
    yield from _view_problems(op.dst, scope, "copy destination")
    if op.atom.startswith(("ldmatrix", "stmatrix")):  # a warp's tile <-> each lane's fragment
        yield from _matrix_copy(op)
    else:
        yield from _same_shape(op.src, op.dst, "copy")
    if op.src.dtype != op.dst.dtype:
        yield f"copy: element types differ ({op.src.dtype} vs {op.dst.dtype}); use a convert"
    COORDS = N.COORDS
    yield from _expr_problems(op.pred, scope, "copy predicate", set(COORDS))
    if op.atom == "tma.load" and op.mbarrier is None:
        yield "tma.load without an mbarrier (outside range(..., pipeline=S) the copy must name one)"
    if op.mbarrier is not None:
        yield from _view_problems(op.mbarrier, scope, "copy mbarrier")


def _elementwise(op: N.Elementwise, scope: _Scope) -> Iterator[str]:
    yield from _view_problems(op.dst, scope, f"{op.fn} destination")
    for src in op.srcs:
        if isinstance(src, N.View):
            yield from _view_problems(src, scope, f"{op.fn} operand")
            yield from _same_shape(src, op.dst, op.fn)
            if src.dtype != op.dst.dtype:
                yield f"{op.fn}: operand type {src.dtype} differs from result type {op.dst.dtype}"


def _views_of(*names: str) -> Callable[[Any, _Scope], Iterator[str]]:
    def check(op: Any, scope: _Scope) -> Iterator[str]:
        for name in names:
            view = getattr(op, name)
            if view is not None:
                yield from _view_problems(view, scope, f"{op.kind.lower()} {name}")

    return check


_RULES: dict[type, Callable[[Any, _Scope], Iterator[str]]] = {
    N.Copy: _copy,
    N.Elementwise: _elementwise,
    N.Convert: _views_of("dst", "src"),
    N.Fill: _views_of("dst"),
    N.Mma: _views_of("a", "b", "c", "d"),
    N.Reduce: _views_of("dst", "src"),
    N.Shuffle: _views_of("dst", "src"),
    N.Atomic: _views_of("dst", "src"),
    N.Tag: _views_of("view"),
    N.AssertTag: _views_of("view", "equal_to"),
    N.AssertBankConflicts: _views_of("view"),
    N.ResetTags: _views_of("view"),
    N.MbarrierInit: _views_of("bar"),
    N.MbarrierArrive: _views_of("bar"),
    N.MbarrierWait: _views_of("bar"),
    N.ReadIndex: _views_of("src"),
}


def problems(kernel: N.Kernel) -> list[str]:
    """Every well-formedness problem of ``kernel`` as ``file:line: message``."""
    found: list[str] = []
    scope = _Scope(symbols={kernel.thread_id, *kernel.block_ids, N.CLUSTER_RANK})
    for p in kernel.params:
        if p.symbol is not None:
            scope.symbols.add(p.symbol)
        if p.buffer is not None:
            scope.symbols |= symbolic.free_symbols(p.buffer.size)
    uniformity = analyze(kernel)
    _region(kernel.body, scope, found, uniformity)
    return found


def _where(op: N.Op) -> str:
    return f"{op.loc}: " if op.loc else ""


def _region(region: N.Region, scope: _Scope, found: list[str], uniformity: Any) -> None:
    for op in region.ops:
        rule = _RULES.get(type(op))
        if rule is not None:
            found.extend(_where(op) + p for p in rule(op, scope))
        match op:
            case N.Alloc(buffer=buffer):
                if buffer.name in scope.buffers:
                    found.append(f"{_where(op)}buffer %{buffer.name} allocated twice")
                scope.buffers.add(buffer.name)
            case N.ReadIndex(result=result):
                if result in scope.symbols:
                    found.append(f"{_where(op)}symbol {result} defined twice")
                scope.symbols.add(result)
            case N.For(var=var, start=start, stop=stop, body=body):
                found.extend(_where(op) + p for p in _expr_problems(start, scope, "loop start"))
                found.extend(_where(op) + p for p in _expr_problems(stop, scope, "loop stop"))
                inner = scope.child()
                inner.symbols.add(var)
                _region(body, inner, found, uniformity)
            case N.If(cond=cond, then=then, orelse=orelse):
                found.extend(_where(op) + p for p in _expr_problems(cond, scope, "if condition"))
                _region(then, scope.child(), found, uniformity)
                _region(orelse, scope.child(), found, uniformity)
            case N.WarpRole(cond=cond, body=body):
                found.extend(_where(op) + p for p in _expr_problems(cond, scope, "warp role condition"))
                _region(body, scope.child(), found, uniformity)
            case N.Barrier():
                if uniformity.context(op) is Uniformity.THREAD:
                    found.append(f"{_where(op)}barrier under a condition that differs between threads "
                                 "of a warp (divergent barrier)")
            case N.Mma() | N.Shuffle() | N.Reduce(across_lanes=(_, *_)):
                if uniformity.context(op) is Uniformity.THREAD:
                    found.append(f"{_where(op)}{op.kind.lower()} is executed by its threads together, under a "
                                 "condition that differs between threads of a warp (divergent collective)")
            case _:
                pass


def check(kernel: N.Kernel) -> None:
    """Raise :class:`IRError` if ``kernel`` is malformed."""
    found = problems(kernel)
    if found:
        raise IRError(
            f"kernel {kernel.name} is malformed:\n  " + "\n  ".join(found),
            position=kernel.loc,
        )
