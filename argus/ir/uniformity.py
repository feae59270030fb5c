"""The one uniformity (divergence) analysis of argus.

Every index symbol and expression is classified as

* ``BLOCK`` — the same value for every thread of a block (sizes, block ids, consts, loop
  counters of loops whose bounds are block-uniform and that run under block-uniform control),
* ``WARP`` — the same value within each warp (``tid // 32``, ``tid // 128``...),
* ``THREAD`` — may differ between the lanes of a warp.

:meth:`UniformityInfo.uniform_within` asks the same question for another group width (the
64-lane wavefront of gfx942, whose backend keeps such values in scalar registers).

Each op gets the uniformity of its *control context*: the least uniform guard among the
``If``/``For``/``WarpRole`` regions around it.  The verifier uses it (barriers and
collectives must run under uniform control), and both backends use it (elected threads,
SGPR vs VGPR on AMD, predicate registers on NVIDIA).  The rules are structural and
conservative: an expression is only called uniform when its form proves it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import sympy

from argus import symbolic
from argus.ir import nodes as N

WARP_SIZE = 32


class Uniformity(enum.IntEnum):
    """Ordered from most to least uniform (``max`` combines)."""

    BLOCK = 0
    WARP = 1
    THREAD = 2


def _warp_uniform_tid_use(expr: sympy.Basic, tid: sympy.Symbol, width: int = WARP_SIZE) -> bool:
    """True when every occurrence of ``tid`` sits in ``FloorDiv(tid + a, m)`` with ``width | m``
    and ``width | a`` (a uniform offset), so the value cannot change inside an aligned group of
    ``width`` threads (a warp for 32, a gfx942 wavefront for 64)."""
    if expr == tid:
        return False
    if isinstance(expr, symbolic.FloorDiv):
        numerator, divisor = expr.args
        m = symbolic.static_value(divisor)
        if m is not None and m > 0 and m % width == 0:
            rest = sympy.expand(numerator - tid)
            if not rest.has(tid) and symbolic.divides(width, rest) is True:
                return True
    if not expr.args:
        return True
    return all(_warp_uniform_tid_use(arg, tid, width) for arg in expr.args if arg.has(tid))


@dataclass
class UniformityInfo:
    """Result of the analysis on one kernel."""

    symbols: dict[sympy.Symbol, Uniformity] = field(default_factory=dict)
    control: dict[int, Uniformity] = field(default_factory=dict)  # id(op) -> context uniformity
    tid: sympy.Symbol | None = None

    def of(self, expr: Any) -> Uniformity:
        """Uniformity of an index expression or predicate."""
        if not isinstance(expr, sympy.Basic):
            return Uniformity.BLOCK
        level = Uniformity.BLOCK
        for s in expr.free_symbols:
            if s == self.tid:
                level = max(level, Uniformity.WARP if _warp_uniform_tid_use(expr, s) else Uniformity.THREAD)
            else:
                level = max(level, self.symbols.get(s, Uniformity.BLOCK))
        return level

    def context(self, op: N.Op) -> Uniformity:
        return self.control.get(id(op), Uniformity.BLOCK)

    def uniform_within(self, expr: Any, width: int) -> bool:
        """True when ``expr`` has one value in every aligned group of ``width`` consecutive
        thread ids (``width`` = 64: a gfx942 wavefront, where ``tid // 64`` qualifies but
        ``tid // 32`` does not).  Other symbols must be block-uniform, or warp-uniform when a
        group lies inside one warp (``32 % width == 0``)."""
        if not isinstance(expr, sympy.Basic):
            return True
        for s in expr.free_symbols:
            if s == self.tid:
                if not _warp_uniform_tid_use(expr, s, width):
                    return False
            else:
                level = self.symbols.get(s, Uniformity.BLOCK)
                if level is Uniformity.THREAD or (level is Uniformity.WARP and WARP_SIZE % width):
                    return False
        return True


def analyze(kernel: N.Kernel) -> UniformityInfo:
    info = UniformityInfo(tid=kernel.thread_id)
    info.symbols[kernel.thread_id] = Uniformity.THREAD
    _region(kernel.body, info, Uniformity.BLOCK)
    return info


def _view_uniformity(view: N.View, info: UniformityInfo) -> Uniformity:
    level = info.of(view.offset)
    if view.buffer.space is N.MemorySpace.REGISTER:
        level = Uniformity.THREAD  # registers are per thread by definition
    return level


def _region(region: N.Region, info: UniformityInfo, ctx: Uniformity) -> None:
    for op in region.ops:
        info.control[id(op)] = ctx
        match op:
            case N.For(var=var, start=start, stop=stop, body=body):
                bounds = max(info.of(start), info.of(stop))
                info.symbols[var] = max(ctx, bounds)
                _region(body, info, max(ctx, bounds))
            case N.If(cond=cond, then=then, orelse=orelse):
                inner = max(ctx, info.of(cond))
                _region(then, info, inner)
                _region(orelse, info, inner)
            case N.WarpRole(cond=cond, body=body):
                _region(body, info, max(ctx, info.of(cond)))
            case N.ReadIndex(result=result, src=src):
                info.symbols[result] = max(ctx, _view_uniformity(src, info))
            case _:
                pass
