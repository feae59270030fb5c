"""Inverses for the verifier: from an address back to the coordinate that writes it.

The verifier resolves a shared-memory read to its writer with a quantifier-free witness: for a
write layout ``W`` (thread, value) -> address it needs a function ``W⁻¹`` built only from
``+ - * // %`` and swizzles, and a domain condition, such that

    ``domain(a)  <=>  a is in the image of W``   and   ``domain(a)  =>  W(W⁻¹(a)) == a``.

:func:`layout_inverse` inverts one injective layout; :func:`write_inverse` chains the inverses
of a write layout's parts: a swizzle is its own inverse, a composed layout
``outer ∘ (offset + inner)`` is inverted as ``inner⁻¹(outer⁻¹(a) - offset)``, and a TV layout
followed by a memory layout as ``tv⁻¹(memory⁻¹(a))``.  Everything evaluates on int-likes:
Python ints (a concrete function), sympy symbols, numpy arrays (all addresses at once) and
foreign terms such as the SMT layer's (a symbolic witness).

The domain is returned as equations ``(lhs, rhs)`` that must all hold (one per inverted layout:
``L(L⁻¹(x)) == x``); :meth:`WriteInverse.domain` folds them into one predicate, with the
equality and conjunction of the caller's term language when it is not int/sympy/numpy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic as sym
from argus.layout_algebra.int_tuple import crd2idx, flatten, unflatten
from argus.layout_algebra.layout import Layout, LayoutError
from argus.layout_algebra.swizzle import ComposedLayout, Swizzle, evaluate_all, evaluate_at

__all__ = [
    "LayoutInverse",
    "WriteInverse",
    "layout_inverse",
    "write_inverse",
]

Equation = tuple[Any, Any]


@dataclass(frozen=True)
class LayoutInverse:
    """The inverse of an injective static layout on its image.

    The non-trivial modes (size > 1, stride != 0), sorted by stride ``d_0 < d_1 < ...``, must
    not overlap: ``d_{i+1} >= s_i * d_i``.  Then every offset of the image has one coordinate,
    recovered from the largest stride down (``c_i = ((x - sum_{j>i} c_j d_j) // d_i) % s_i``, or
    ``(x // d_i) % s_i`` when each stride divides the next).  Modes of stride 0 get coordinate 0
    (the representative among the coordinates that write the same offset); size-1 modes get 0.
    Post-conditions: ``L(coordinate(L(c))) == L(c)`` for every coordinate ``c``, and for every
    ``x``: ``x`` is in the image of ``L`` iff ``L(coordinate(x)) == x``.  For an injective,
    nested layout ``index(x) == left_inverse(L)(x)`` on the image.
    """

    layout: Layout
    modes: tuple[tuple[int, int, int], ...]  # (flat position, size, stride), by stride
    nested: bool  # each stride divides the next: the compact floor/mod form applies

    def flat_coordinate(self, offset: Any) -> tuple[Any, ...]:
        """The coordinate of ``offset``, one int-like per leaf of the shape."""
        leaves: list[Any] = [0] * len(flatten(self.layout.shape))
        if self.nested:
            for position, size, stride in self.modes:
                leaves[position] = sym.mod(sym.floordiv(offset, stride), size)
            return tuple(leaves)
        rest = offset
        for position, size, stride in reversed(self.modes):
            c = sym.mod(sym.floordiv(rest, stride), size)
            leaves[position] = c
            rest = sym.normalize(rest - c * stride)
        return tuple(leaves)

    def coordinate(self, offset: Any) -> Any:
        """The natural (hierarchical) coordinate of ``offset``."""
        return unflatten(self.flat_coordinate(offset), self.layout.shape)

    def index(self, offset: Any) -> Any:
        """The 1-D (column-major) index of ``offset``'s coordinate."""
        return sym.normalize(crd2idx(self.coordinate(offset), self.layout.shape, check=False))

    def conditions(self, offset: Any) -> tuple[Equation, ...]:
        """``((L(coordinate(x)), x),)``: equal exactly when ``x`` is in the image."""
        return ((self.layout(self.coordinate(offset)), offset),)


def layout_inverse(layout: Layout) -> LayoutInverse:
    """The :class:`LayoutInverse` of a static layout whose non-trivial modes do not overlap.

    Raises :class:`LayoutError` for symbolic extents, negative strides, or overlapping modes
    (then no coordinate can be read off an offset with floor and modulo alone).
    """
    shape = flatten(layout.shape)
    stride = flatten(layout.stride)
    if not all(sym.static_value(x) is not None for x in (*shape, *stride)):
        raise LayoutError(
            f"layout_inverse: {layout} has symbolic extents or strides",
            hint="specialize the sizes first",
        )
    modes = []
    for position, (s, d) in enumerate(zip(shape, stride)):
        s, d = int(s), int(d)
        if s == 1 or d == 0:
            continue
        if d < 0:
            raise LayoutError(f"layout_inverse: {layout} has a negative stride {d}")
        modes.append((position, s, d))
    modes.sort(key=lambda mode: mode[2])
    nested = True
    for (_, s0, d0), (_, _, d1) in itertools.pairwise(modes):
        if d1 < s0 * d0:
            raise LayoutError(
                f"layout_inverse: modes {s0}:{d0} and stride {d1} of {layout} overlap",
                hint="only layouts whose sorted modes do not interleave have a floor/mod inverse",
            )
        nested = nested and d1 % (s0 * d0) == 0
    return LayoutInverse(layout, tuple(modes), nested)


# --------------------------------------------------------------------------- write layouts

Function = Layout | ComposedLayout | Swizzle


def _invert(function: Function, target: Any) -> tuple[Any, Any, list[Equation]]:
    """``(coordinate, 1-D index, equations)`` of ``target`` under ``function``."""
    if isinstance(function, Swizzle):
        value = function(target)
        return value, value, []
    if isinstance(function, ComposedLayout):
        _, outer_index, outer_eqs = _invert(function.outer, target)
        linear = outer_index
        if sym.static_value(function.offset) != 0:
            linear = sym.normalize(outer_index - function.offset)
        coordinate, index, inner_eqs = _invert(function.inner, linear)
        return coordinate, index, outer_eqs + inner_eqs
    if isinstance(function, Layout):
        inverse = layout_inverse(function)
        coordinate = inverse.coordinate(target)
        return coordinate, inverse.index(target), list(inverse.conditions(target))
    raise LayoutError(f"cannot invert {function!r}: not a Layout, ComposedLayout or Swizzle")


def _mode_indices(layout: Function, coordinate: Any) -> tuple[Any, ...]:
    """One 1-D index per top-level mode (e.g. ``(thread, value)``) of a natural coordinate."""
    if not isinstance(layout.shape, tuple):
        return (coordinate,)
    return tuple(
        sym.normalize(crd2idx(c, s, check=False)) for c, s in zip(coordinate, layout.shape)
    )


@dataclass(frozen=True)
class WriteInverse:
    """Address -> writer coordinate for ``address = memory(writer(coord))``.

    ``writer`` has the writers' domain (a TV layout: ``(thread, value)``); ``memory`` sends the
    writer's value (a 1-D tile index) to an address, or is ``None`` when the writer's values are
    addresses already.  Calling the inverse gives one 1-D index per top-level mode of the
    writer (``(thread, value)``); :meth:`coordinate` the natural coordinate.
    """

    writer: Function
    memory: Function | None = None

    def write(self, *coord: Any) -> Any:
        """The forward map: the address written at ``coord``."""
        value = self.writer(*coord)
        return value if self.memory is None else self.memory(value)

    def _resolve(self, address: Any) -> tuple[Any, list[Equation]]:
        equations: list[Equation] = []
        target = address
        if self.memory is not None:
            _, target, equations = _invert(self.memory, address)
        coordinate, _, writer_eqs = _invert(self.writer, target)
        return coordinate, equations + writer_eqs

    def coordinate(self, address: Any) -> Any:
        """The natural coordinate of the writer of ``address`` (meaningful on the domain)."""
        return self._resolve(address)[0]

    def __call__(self, address: Any) -> tuple[Any, ...]:
        """``(thread, value)`` (one 1-D index per top-level writer mode) of ``address``."""
        return _mode_indices(self.writer, self.coordinate(address))

    def conditions(self, address: Any) -> tuple[Equation, ...]:
        """Equations ``(lhs, rhs)``, all equal exactly when ``address`` is written."""
        return tuple(self._resolve(address)[1])

    def domain(
        self,
        address: Any,
        *,
        eq: Callable[[Any, Any], Any] | None = None,
        conj: Callable[[Sequence[Any]], Any] | None = None,
    ) -> Any:
        """The predicate "``address`` is written": a bool for ints, a sympy boolean for sympy,
        a boolean array for numpy arrays; pass ``eq`` and ``conj`` for other term languages
        (e.g. ``argus.smt.eq`` and ``lambda xs: argus.smt.and_(*xs)``).
        """
        terms = [(eq or _default_eq)(lhs, rhs) for lhs, rhs in self.conditions(address)]
        return (conj or _default_conj)(terms)

    def image(self) -> frozenset[int]:
        """All addresses written (static layouts)."""
        values = evaluate_all(self.writer)
        if self.memory is not None:
            values = evaluate_at(self.memory, values)
        return frozenset(int(v) for v in values)


def write_inverse(writer: Function, memory: Function | None = None) -> WriteInverse:
    """The inverse of the write layout ``memory ∘ writer`` (see :class:`WriteInverse`).

    Every layout in the chain must be invertible by :func:`layout_inverse` (static, modes that
    do not overlap); this is checked here, so a returned inverse is always usable.
    Example: the mma.sync accumulator TV layout written through a 128-byte-swizzled tile::

        inv = write_inverse(atom.c, ComposedLayout(Swizzle(3, 3, 3), 0, Layout((16, 8), (8, 1))))
        thread, value = inv(address)     # ints, sympy or SMT terms
    """
    for part in (writer, memory):
        _check_invertible(part)
    return WriteInverse(writer, memory)


def _check_invertible(function: Function | None) -> None:
    if function is None or isinstance(function, Swizzle):
        return
    if isinstance(function, ComposedLayout):
        _check_invertible(function.outer)
        _check_invertible(function.inner)
        return
    if isinstance(function, Layout):
        layout_inverse(function)
        return
    raise LayoutError(f"cannot invert {function!r}: not a Layout, ComposedLayout or Swizzle")


# --------------------------------------------------------------------------- predicates


def _default_eq(lhs: Any, rhs: Any) -> Any:
    if sym.static_value(lhs) is not None and sym.static_value(rhs) is not None:
        return sym.static_value(lhs) == sym.static_value(rhs)
    if isinstance(lhs, (int, sympy.Expr)) and isinstance(rhs, (int, sympy.Expr)):
        return sympy.Eq(sym.to_sympy(lhs), sym.to_sympy(rhs))
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    if np is not None and (isinstance(lhs, np.ndarray) or isinstance(rhs, np.ndarray)):
        return np.equal(lhs, rhs)
    raise LayoutError(
        f"WriteInverse.domain: no default equality for {type(lhs).__name__} terms",
        hint="pass eq= and conj= of your term language (e.g. argus.smt.eq, argus.smt.and_)",
    )


def _default_conj(terms: Sequence[Any]) -> Any:
    if all(isinstance(t, bool) for t in terms):
        return all(terms)
    if any(isinstance(t, sympy.Basic) for t in terms):
        return sympy.And(*terms)
    import numpy as np

    result = np.asarray(terms[0])
    for t in terms[1:]:
        result = np.logical_and(result, t)
    return result
