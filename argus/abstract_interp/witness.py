"""Witnesses: who wrote an address.  A write's address map, inverted without quantifiers.

A write site stores element ``c`` of its view, in thread ``tid``, in iteration ``k`` of the
loops around it, at ``offset(tid, k) + layout(c)`` (then swizzled).  To resolve a read of
address ``a`` to its writer the verifier needs the writer's instance *as a function of*
``a``, so that "some instance of this op wrote ``a``" is the quantifier-free
``write(witness(a)) == a ∧ witness(a) in range ∧ guard(witness(a))``.

:func:`invert_address` guesses that function.  The address expressions the DSL builds are
sums of ``coefficient * ((v // d) % m)`` over the instance variables ``v`` (tiles, thread
partitions and loop strides all come from layouts), so each variable is split into *digits*
at the breakpoints ``d`` and ``d*m`` its terms use, the digits become the modes of a layout
``digit sizes : digit strides``, and that layout is inverted by the layout algebra
(:func:`argus.layout_algebra.inverse.layout_inverse`); symbolic strides (global tensors with
run-time extents) are inverted by the same floor/modulo peeling, largest stride first.

The guess is never trusted: the verifier proves, as a VC of its own, that the witness of the
address written by any guarded instance is that instance (``witness(write(d)) == d``).  That
VC also fails when the write is not injective (two threads or two iterations writing one
address), which is what makes the resolution of reads exact.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic
from argus.layout_algebra import Layout, LayoutError
from argus.layout_algebra.inverse import layout_inverse

#: the symbol standing for the (unswizzled) address in witness expressions
TARGET = sympy.Symbol("__address", integer=True)


@dataclass(frozen=True)
class Variable:
    """An instance variable of a write: ``start + step * u`` for ``u`` in ``0 .. extent-1``."""

    symbol: sympy.Symbol
    extent: Any  # int or size expression
    start: Any = 0
    step: int = 1


class NotInvertible(Exception):
    """The address map has a shape the witness construction does not handle."""


def invert_address(address: Any, variables: list[Variable],
                   pinned: Mapping[sympy.Symbol, Any] | None = None) -> dict[sympy.Symbol, Any]:
    """Each variable as an expression of :data:`TARGET` (the address) and the other symbols.

    ``pinned`` variables have a known value (an equation of the write's guard) and are
    returned as given.  Raises :class:`NotInvertible` when no witness can be built.
    """
    pinned = dict(pinned or {})
    expr = _floor_divisions(symbolic.to_sympy(address))
    expr = sympy.expand(expr.xreplace(pinned)) if pinned else sympy.expand(expr)
    result: dict[sympy.Symbol, Any] = dict(pinned)
    digits_of: dict[sympy.Symbol, sympy.Symbol] = {}
    free = [v for v in variables if v.symbol not in pinned]
    for v in free:
        u = sympy.Symbol(f"__u_{v.symbol.name}", integer=True, nonnegative=True)
        digits_of[v.symbol] = u
        if v.start != 0 or v.step != 1:
            expr = sympy.expand(expr.xreplace({v.symbol: v.start + v.step * u}))
        else:
            expr = expr.xreplace({v.symbol: u})
    units = {digits_of[v.symbol]: v for v in free}
    expr = simplify_in_range(expr, {u: _unit_bounds(v) for u, v in units.items()})
    base, atoms = _atoms(expr, set(units))
    digits = _digits(atoms, units)
    values = _invert_digits(digits, TARGET - base)
    for v in free:
        u = digits_of[v.symbol]
        index = sum((value * d.weight for d, value in zip(digits, values) if d.unit == u), sympy.Integer(0))
        result[v.symbol] = v.start + v.step * index
    return result


def _unit_bounds(variable: Variable) -> tuple[int, int | None]:
    """The range of a variable's unit (``0 .. extent-1``; ``None``: unbounded above)."""
    extent = symbolic.static_value(variable.extent)
    return (0, extent - 1 if extent is not None else None)


def _variable_bounds(variable: Variable) -> tuple[int | None, int | None]:
    """The range of a variable's own values (``start + step * u``)."""
    start, extent = symbolic.static_value(variable.start), symbolic.static_value(variable.extent)
    if start is None or variable.step <= 0:
        return (None, None)
    return (start, start + variable.step * (extent - 1) if extent is not None else None)


def _interval(expr: Any, bounds: Mapping[sympy.Symbol, tuple[int, int | None]]) -> tuple[int | None, int | None]:
    """Integer bounds of ``expr`` over the units' ranges (``None``: unbounded on that side)."""
    if isinstance(expr, sympy.Integer):
        return (int(expr), int(expr))
    if isinstance(expr, sympy.Symbol):
        return bounds.get(expr, (None, None))
    if isinstance(expr, sympy.Add):
        lo, hi = 0, 0
        for arg in expr.args:
            a, b = _interval(arg, bounds)
            lo = None if lo is None or a is None else lo + a
            hi = None if hi is None or b is None else hi + b
        return (lo, hi)
    if isinstance(expr, sympy.Mul):
        coefficient, rest = expr.as_coeff_Mul()
        if isinstance(coefficient, sympy.Integer) and rest is not expr:
            a, b = _interval(rest, bounds)
            c = int(coefficient)
            ends = (None if a is None else a * c, None if b is None else b * c)
            return ends if c >= 0 else (ends[1], ends[0])
        return (None, None)
    if isinstance(expr, symbolic.FloorDiv) and isinstance(expr.args[1], sympy.Integer) and expr.args[1] > 0:
        a, b = _interval(expr.args[0], bounds)
        d = int(expr.args[1])
        return (None if a is None else a // d, None if b is None else b // d)
    if isinstance(expr, sympy.Mod) and isinstance(expr.args[1], sympy.Integer) and expr.args[1] > 0:
        a, b = _interval(expr.args[0], bounds)
        m = int(expr.args[1])
        if a is not None and b is not None and a // m == b // m:
            return (a % m, b % m)
        return (0, m - 1)
    return (None, None)


def simplify_in_range(expr: Any, bounds: Mapping[sympy.Symbol, tuple[int, int | None]]) -> Any:
    """``expr`` with every ``x % m`` and ``x // d`` whose argument stays inside one period over
    the units' ranges folded away (``x % m`` → ``x - q*m``, ``x // d`` → ``q``), innermost
    first.  Tiles of register fragments build such terms (``(8*v1 + lane//4) % 16`` with
    ``v1 < 2``); folded, they are sums of single-variable digits again."""
    def fold(e: Any) -> Any:
        if not isinstance(e, sympy.Basic) or not e.args:
            return e
        args = [fold(a) for a in e.args]
        e = e.func(*args) if any(a is not b for a, b in zip(args, e.args)) else e
        # ((x % m) // d) % n == (x // d) % n when d·n divides m: the inner modulo cuts no digit
        if isinstance(e, sympy.Mod) and isinstance(e.args[0], symbolic.FloorDiv):
            inner, d = e.args[0].args
            n = e.args[1]
            if (isinstance(inner, sympy.Mod) and all(isinstance(v, sympy.Integer) for v in (d, n, inner.args[1]))
                    and int(inner.args[1]) % (int(d) * int(n)) == 0):
                e = sympy.Mod(symbolic.FloorDiv(inner.args[0], d), n)
        if isinstance(e, (sympy.Mod, symbolic.FloorDiv)) and isinstance(e.args[1], sympy.Integer) and e.args[1] > 0:
            a, b = _interval(e.args[0], bounds)
            n = int(e.args[1])
            if a is not None and b is not None and a // n == b // n:
                q = a // n
                return sympy.expand(e.args[0] - q * n) if isinstance(e, sympy.Mod) else sympy.Integer(q)
        return e

    expr = _floor_divisions(sympy.sympify(expr))
    for _ in range(4):  # expanding can split a division again (``(32*c + x) // 32``)
        folded = sympy.expand(fold(expr))
        if folded == expr:
            break
        expr = folded
    return expr


def _floor_divisions(expr: Any) -> Any:
    """``floor(p / d)`` (what ``//`` on a sympy symbol builds) as ``FloorDiv(p, d)``."""
    def rewrite(arg: Any) -> Any:
        num, den = sympy.fraction(sympy.together(arg))
        if isinstance(den, sympy.Integer) and den > 0:
            return symbolic.FloorDiv(sympy.expand(num), den)
        return sympy.floor(arg)

    return expr.replace(lambda e: isinstance(e, sympy.floor), lambda e: rewrite(e.args[0]))


@dataclass(frozen=True)
class _Atom:
    unit: sympy.Symbol
    coefficient: Any
    lo: int  # value = (u // lo) % (hi // lo); hi None: no modulo
    hi: int | None


@dataclass(frozen=True)
class _Digit:
    unit: sympy.Symbol
    weight: int  # the digit's value counts ``weight`` units of u
    size: Any
    stride: Any


def _atoms(expr: sympy.Expr, units: set[sympy.Symbol]) -> tuple[Any, list[_Atom]]:
    base = sympy.Integer(0)
    atoms = []
    for term in sympy.Add.make_args(expr):
        if not term.free_symbols & units:
            base += term
            continue
        coefficient, factor = term.as_independent(*units, as_Add=False)
        atoms.append(_parse_atom(factor, coefficient, units))
    return base, atoms


def _static(x: Any) -> int:
    v = symbolic.static_value(x)
    if v is None or v <= 0:
        raise NotInvertible(f"{x} is not a positive constant")
    return v


def _parse_atom(factor: Any, coefficient: Any, units: set[sympy.Symbol]) -> _Atom:
    if factor in units:
        return _Atom(factor, coefficient, 1, None)
    if isinstance(factor, symbolic.FloorDiv):
        inner, d = factor.args
        d = _static(d)
        if inner in units:
            return _Atom(inner, coefficient, d, None)
        if isinstance(inner, sympy.Mod) and inner.args[0] in units:
            m = _static(inner.args[1])
            if m % d:
                raise NotInvertible(f"{factor}: the divisor does not divide the modulus")
            return _Atom(inner.args[0], coefficient, d, m)
    if isinstance(factor, sympy.Mod):
        inner, m = factor.args
        m = _static(m)
        if inner in units:
            return _Atom(inner, coefficient, 1, m)
        if isinstance(inner, symbolic.FloorDiv) and inner.args[0] in units:
            d = _static(inner.args[1])
            return _Atom(inner.args[0], coefficient, d, d * m)
    raise NotInvertible(f"address term {factor} is not a layout of one variable")


def _digits(atoms: list[_Atom], units: Mapping[sympy.Symbol, Variable],
            split: list[_Atom] | None = None) -> list[_Digit]:
    """The digits of every unit and their strides in ``atoms``; ``split``: the atoms whose
    breakpoints cut the units into digits (default: ``atoms`` themselves)."""
    digits = []
    for u, variable in units.items():
        mine = [a for a in atoms if a.unit == u]
        cuts = [a for a in (split if split is not None else atoms) if a.unit == u]
        points = sorted({1, *(a.lo for a in cuts), *(a.hi for a in cuts if a.hi is not None)})
        for a, b in itertools.pairwise(points):
            if b % a:
                raise NotInvertible(f"breakpoints {a} and {b} of {variable.symbol} do not nest")
        extent = variable.extent
        static_extent = symbolic.static_value(extent)
        bounds = [*list(itertools.pairwise(points)), (points[-1], None)]
        for lo, hi in bounds:
            if hi is not None:
                size: Any = hi // lo
                if static_extent is not None:
                    size = min(size, max(1, -(-static_extent // lo)))
            else:
                size = -(-static_extent // lo) if static_extent is not None else symbolic.ceil_div(extent, lo)
            if symbolic.static_value(size) == 1:
                continue  # a digit of one value is always 0
            stride = sum((a.coefficient * (lo // a.lo) for a in mine
                          if a.lo <= lo and (a.hi is None or (hi is not None and hi <= a.hi))),
                         sympy.Integer(0))
            digits.append(_Digit(u, lo, size, symbolic.normalize(sympy.expand(stride))))
    return digits


def _invert_digits(digits: list[_Digit], x: Any) -> list[Any]:
    if not digits:
        return []
    sizes = [symbolic.static_value(d.size) for d in digits]
    strides = [symbolic.static_value(d.stride) for d in digits]
    if all(s is not None for s in sizes) and all(d is not None for d in strides):
        try:
            inverse = layout_inverse(Layout(tuple(sizes), tuple(strides)))
        except LayoutError as err:
            raise NotInvertible(err.message) from None
        return [symbolic.to_sympy(c) for c in inverse.flat_coordinate(x)]
    return _peel(digits, x)


def _magnitude(stride: Any) -> float:
    """A numeric stand-in for ordering symbolic strides (sizes taken large)."""
    s = symbolic.to_sympy(stride)
    value = s.xreplace({v: 1 << 20 for v in s.free_symbols})
    return float(value)


def _peel(digits: list[_Digit], x: Any) -> list[Any]:
    """Mixed-radix peeling, largest stride first (symbolic strides)."""
    order = sorted(range(len(digits)), key=lambda i: _magnitude(digits[i].stride), reverse=True)
    values: list[Any] = [sympy.Integer(0)] * len(digits)
    rest = x
    for i in order:
        d = digits[i]
        if d.stride == 0:
            continue
        if _magnitude(d.stride) < 0:
            raise NotInvertible(f"negative stride {d.stride}")
        value = symbolic.floordiv(rest, d.stride)
        size = symbolic.static_value(d.size)
        if size is not None and i != order[0]:
            value = symbolic.mod(value, size)
        values[i] = symbolic.to_sympy(value)
        rest = sympy.expand(rest - values[i] * d.stride)
    return values


def linearize(coords: list[Any], variables: list[Variable],
              pinned: Mapping[sympy.Symbol, Any] | None = None) -> tuple[Any, tuple[int, ...]]:
    """One *virtual address* ``Σ_d coords[d] * S_d`` for a write stated in logical coordinates.

    Global tensors with run-time extents have symbolic strides; their logical coordinates do
    not.  The static strides ``S_d`` are chosen so that what the instance variables add to
    different dimensions never overlaps (each ``S_{d+1}`` exceeds the span of dimension
    ``d``); at most one dimension may have an unbounded span (a symbolic loop), and it gets
    the largest stride.  Inverting the virtual address with :func:`invert_address` then
    recovers the instance from a logical coordinate with static arithmetic only.
    """
    pinned = dict(pinned or {})
    spans = [_span(_floor_divisions(symbolic.to_sympy(c)).xreplace(pinned), variables) for c in coords]
    if sum(s is None for s in spans) > 1:
        raise NotInvertible("more than one dimension grows with a symbolic loop")
    order = sorted(range(len(coords)), key=lambda d: spans[d] is None)
    strides = [0] * len(coords)
    stride = 1
    for d in order:
        strides[d] = stride
        if spans[d] is not None:
            stride *= 1 << max(1, (spans[d] + 1)).bit_length()
    virtual = sum((symbolic.to_sympy(c) * s for c, s in zip(coords, strides)), sympy.Integer(0))
    return sympy.expand(virtual), tuple(strides)


def _span(expr: Any, variables: list[Variable]) -> int | None:
    """The largest value the instance variables add to ``expr`` (``None``: unbounded)."""
    units = {}
    for v in variables:
        u = sympy.Symbol(f"__u_{v.symbol.name}", integer=True, nonnegative=True)
        units[u] = v
        expr = expr.xreplace({v.symbol: v.start + v.step * u})
    expr = simplify_in_range(sympy.expand(expr), {u: _unit_bounds(v) for u, v in units.items()})
    _, atoms = _atoms(expr, set(units))
    total = 0
    for atom in atoms:
        coefficient = symbolic.static_value(atom.coefficient)
        if coefficient is None or coefficient < 0:
            return None
        if atom.hi is not None:
            top = atom.hi // atom.lo - 1
        else:
            extent = symbolic.static_value(units[atom.unit].extent)
            if extent is None:
                return None
            top = (extent - 1) // atom.lo
        total += coefficient * top
    return total


#: the symbols standing for the logical coordinate read, in witnesses of logical writes
COORD_TARGETS = tuple(sympy.Symbol(f"__coordinate{d}", integer=True) for d in range(8))


def invert_coordinates(coords: list[Any], variables: list[Variable],
                       pinned: Mapping[sympy.Symbol, Any] | None = None) -> dict[sympy.Symbol, Any]:
    """Each variable as an expression of the logical coordinate read (:data:`COORD_TARGETS`).

    Dimensions that share no variable are inverted one by one (a whole-tensor view gives
    ``c_d = coordinate_d``); dimensions that share variables (a thread index split into a
    row and a column part) are inverted together through :func:`linearize`.
    """
    pinned = dict(pinned or {})
    free = [v for v in variables if v.symbol not in pinned]
    bounds = {v.symbol: _variable_bounds(v) for v in free}
    exprs = [simplify_in_range(_floor_divisions(symbolic.to_sympy(c)).xreplace(pinned), bounds) for c in coords]
    uses = [{v.symbol for v in free if v.symbol in e.free_symbols} for e in exprs]
    groups: list[set[int]] = []
    for d in range(len(exprs)):
        merged = {d}
        for g in [g for g in groups if any(uses[d] & uses[e] for e in g)]:
            merged |= g
            groups.remove(g)
        groups.append(merged)
    result: dict[sympy.Symbol, Any] = dict(pinned)
    for group in groups:
        dims = sorted(group)
        mine = [v for v in free if any(v.symbol in uses[d] for d in dims)]
        if not mine:
            continue
        if len(dims) == 1:
            values = invert_address(exprs[dims[0]], mine)
            target = COORD_TARGETS[dims[0]]
        elif (separate := _invert_by_dimension([exprs[d] for d in dims], dims, mine)) is not None:
            result.update(separate)
            continue
        else:
            # each dimension's own offset (terms of no instance variable: block offsets) is
            # taken off before the dimensions are packed, so the packed address stays small
            symbols = {v.symbol for v in mine}
            bases = [sympy.Add(*(t for t in sympy.Add.make_args(sympy.expand(exprs[d]))
                                 if not t.free_symbols & symbols)) for d in dims]
            rests = [sympy.expand(exprs[d] - b) for d, b in zip(dims, bases)]
            virtual, strides = linearize(rests, mine)
            values = invert_address(virtual, mine)
            target = sum(((COORD_TARGETS[d] - b) * s for d, b, s in zip(dims, bases, strides)), sympy.Integer(0))
        for sym, value in values.items():
            result[sym] = sympy.sympify(value).xreplace({TARGET: target})
    for v in free:
        result.setdefault(v.symbol, v.start)  # a variable no coordinate depends on
    return result


def _invert_by_dimension(exprs: list[Any], dims: list[int], variables: list[Variable]) -> dict[sympy.Symbol, Any] | None:
    """Invert coordinates that share variables but not *digits*: each digit of each variable
    (a thread index split into a row part and a column part) feeds one dimension only, so
    each dimension is inverted on its own digits and the digits are reassembled.  ``None``
    when some digit feeds two dimensions (then the dimensions are packed together)."""
    units: dict[sympy.Symbol, Variable] = {}
    subst = {}
    for v in variables:
        u = sympy.Symbol(f"__u_{v.symbol.name}", integer=True, nonnegative=True)
        units[u] = v
        subst[v.symbol] = v.start + v.step * u if (v.start != 0 or v.step != 1) else u
    bounds = {u: _unit_bounds(v) for u, v in units.items()}
    parsed = []
    try:
        for e in exprs:
            e = simplify_in_range(sympy.expand(e.xreplace(subst)), bounds)
            parsed.append(_atoms(e, set(units)))
        every = [a for _, atoms in parsed for a in atoms]
        per_dim = [[d for d in _digits(atoms, units, every) if symbolic.static_value(d.stride) != 0]
                   for _, atoms in parsed]
    except NotInvertible:
        return None
    owners: dict[tuple[sympy.Symbol, int], int] = {}
    for i, digits in enumerate(per_dim):
        for d in digits:
            if owners.setdefault((d.unit, d.weight), i) != i:
                return None
    values: dict[sympy.Symbol, Any] = {}
    for i, ((base, _), digits) in enumerate(zip(parsed, per_dim)):
        try:
            got = _invert_digits(digits, COORD_TARGETS[dims[i]] - base)
        except NotInvertible:
            return None
        for d, value in zip(digits, got):
            values[d.unit] = values.get(d.unit, sympy.Integer(0)) + value * d.weight
    return {v.symbol: v.start + v.step * values.get(u, sympy.Integer(0)) for u, v in units.items()}
