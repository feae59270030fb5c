"""Hierarchical integer tuples: the shapes, strides and coordinates of layouts.

An *int-tuple* is an int-like leaf (Python int, sympy integer expression, or, for coordinates
only, a foreign term) or a tuple of int-tuples.  Arithmetic on leaves goes through
:mod:`argus.symbolic` so every function here works for all three families.

Coordinates are column-major: the left-most mode varies fastest, as in CuTe.
"""

from __future__ import annotations

import numbers
from typing import Any

import sympy

from argus import symbolic
from argus.layout_algebra.conditions import LayoutError, decide_divides, decide_equal, exact_div

__all__ = [
    "IntTuple",
    "add",
    "as_int_tuple",
    "compatible",
    "congruent",
    "crd2idx",
    "flatten",
    "format_int_tuple",
    "idx2crd",
    "inner_product",
    "is_tuple",
    "mul",
    "prefix_product",
    "product",
    "product_each",
    "shape_div",
    "unflatten",
]

IntTuple = Any  # int-like | tuple[IntTuple, ...]


def is_tuple(x: Any) -> bool:
    """True for a (possibly empty) tuple: an inner node of an int-tuple."""
    return isinstance(x, tuple)


def _as_leaf(x: Any, what: str) -> Any:
    if isinstance(x, bool):
        raise LayoutError(f"{what}: a bool is not an integer ({x!r})")
    if isinstance(x, sympy.Expr):
        if x.is_integer is False:
            raise LayoutError(f"{what}: {x} is not an integer expression")
        return symbolic.normalize(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    raise LayoutError(f"{what}: {x!r} is not an int or a sympy integer expression")


def as_int_tuple(x: Any, what: str = "int-tuple") -> IntTuple:
    """Normalize ``x``: lists become tuples, numpy and sympy integer literals become ints."""
    if isinstance(x, (tuple, list)):
        return tuple(as_int_tuple(e, what) for e in x)
    return _as_leaf(x, what)


# --------------------------------------------------------------------------- leaf arithmetic


def add(a: Any, b: Any) -> Any:
    """``a + b``, skipping literal zeros (keeps expressions and recorded terms small)."""
    if symbolic.static_value(a) == 0:
        return b
    if symbolic.static_value(b) == 0:
        return a
    return symbolic.normalize(a + b)


def mul(a: Any, b: Any) -> Any:
    """``a * b``, folding literal zeros and ones."""
    av, bv = symbolic.static_value(a), symbolic.static_value(b)
    if av == 0 or bv == 0:
        return 0
    if av == 1:
        return b
    if bv == 1:
        return a
    if bv is not None and av is None:
        return symbolic.normalize(a * bv)  # the coordinate (possibly a foreign term) goes left
    return symbolic.normalize(a * b)


# --------------------------------------------------------------------------- structure


def flatten(t: IntTuple) -> tuple:
    """The leaves of ``t`` in order (a leaf gives a 1-tuple)."""
    if is_tuple(t):
        return tuple(leaf for e in t for leaf in flatten(e))
    return (t,)


def unflatten(flat: tuple, profile: IntTuple) -> IntTuple:
    """Arrange the leaves ``flat`` in the tree structure of ``profile`` (inverse of flatten)."""
    leaves = iter(flat)

    def build(p: IntTuple) -> IntTuple:
        if is_tuple(p):
            return tuple(build(e) for e in p)
        return next(leaves)

    result = build(profile)
    if next(leaves, None) is not None:
        raise LayoutError("unflatten: more leaves than the profile has")
    return result


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree structure (same nesting and lengths, leaves anywhere)."""
    if is_tuple(a) and is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not is_tuple(a) and not is_tuple(b)


def product(t: IntTuple) -> Any:
    """Product of all leaves (1 for the empty tuple)."""
    result: Any = 1
    for leaf in flatten(t):
        result = mul(result, leaf)
    return result


def product_each(t: IntTuple) -> tuple:
    """Product of each top-level mode."""
    if is_tuple(t):
        return tuple(product(e) for e in t)
    return (t,)


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """Shape ``a`` is compatible with shape ``b``: every coordinate of ``a`` is one of ``b``.

    True when the sizes agree and, wherever ``a`` is a tuple, ``b`` is a tuple of the same
    length whose modes are compatible in turn (``a`` may be coarser than ``b``).
    """
    if is_tuple(a):
        return is_tuple(b) and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))
    return decide_equal(a, product(b)) is True


def prefix_product(t: IntTuple, init: Any = 1) -> IntTuple:
    """Exclusive prefix products, congruent with ``t``: the compact column-major strides."""
    if is_tuple(t):
        out = []
        running = init
        for e in t:
            out.append(prefix_product(e, running))
            running = mul(running, product(e))
        return tuple(out)
    return init


def inner_product(a: IntTuple, b: IntTuple) -> Any:
    """Sum of products of corresponding leaves of congruent ``a`` and ``b``."""
    result: Any = 0
    for x, y in zip(flatten(a), flatten(b)):
        result = add(result, mul(x, y))
    return result


def shape_div(a: IntTuple, b: Any) -> IntTuple:
    """Divide shape ``a`` by ``b`` from the left: ``(6, 4) / 12 == (1, 2)``, ``4 / 8 == 1``.

    Each mode either absorbs ``b`` (``b`` divides it) or is absorbed by it (it divides ``b``);
    anything else raises :class:`LayoutError`.
    """
    if is_tuple(a):
        out = []
        for e in a:
            out.append(shape_div(e, b))
            b = shape_div(b, product(e))
        return tuple(out)
    if decide_divides(b, a) is True:
        return exact_div(a, b)
    if decide_divides(a, b) is True:
        return 1
    raise LayoutError(f"shape_div: neither of {a} and {b} divides the other")


# --------------------------------------------------------------------------- coordinates


def _check_leaf(c: Any, s: Any, operation: str) -> None:
    cv, sv = symbolic.static_value(c), symbolic.static_value(s)
    if cv is not None and (cv < 0 or (sv is not None and cv >= sv)):
        raise LayoutError(f"{operation}: coordinate {cv} is out of range [0, {s})")


def idx2crd(index: Any, shape: IntTuple, *, extend: bool = True) -> IntTuple:
    """The natural (column-major) coordinate of a 1-D ``index`` in ``shape``.

    Post-condition: ``crd2idx(idx2crd(i, S), S) == i`` for ``0 <= i < product(S)``.  With
    ``extend`` (the default) the last mode takes the whole quotient, so indices past the size
    continue the last mode instead of wrapping (the CuTe convention).
    """
    if is_tuple(index):
        if not is_tuple(shape) or len(index) != len(shape):
            raise LayoutError(f"idx2crd: coordinate {index} does not match shape {shape}")
        return tuple(idx2crd(i, s, extend=extend) for i, s in zip(index, shape))
    if not is_tuple(shape):
        return index
    out = []
    for k, s in enumerate(shape):
        last = k == len(shape) - 1
        if last and extend:
            out.append(idx2crd(index, s, extend=extend))
        else:
            out.append(idx2crd(symbolic.mod(index, product(s)), s, extend=extend))
            if not last:
                index = symbolic.floordiv(index, product(s))
    return tuple(out)


def crd2idx(
    coord: IntTuple,
    shape: IntTuple,
    stride: IntTuple | None = None,
    *,
    operation: str = "crd2idx",
    check: bool = True,
) -> Any:
    """The index of ``coord`` under ``shape:stride`` (compact column-major strides by default).

    ``coord`` may be hierarchical, natural, or coarser than the shape: an int given for a tuple
    mode is split column-major over that mode.  With ``check``, static coordinates outside their
    mode raise :class:`LayoutError`; a coarse int for the whole (top-level) domain may run past
    the size only when ``check`` is off (the last mode is then extended).
    """
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(coord):
        if not is_tuple(shape) or len(coord) != len(shape):
            raise LayoutError(
                f"{operation}: coordinate {format_int_tuple(coord)} does not match the rank of "
                f"shape {format_int_tuple(shape)}"
            )
        result: Any = 0
        for c, s, d in zip(coord, shape, stride):
            result = add(result, crd2idx(c, s, d, operation=operation, check=check))
        return result
    if check:
        _check_leaf(coord, product(shape), operation)
    if not is_tuple(shape):
        return mul(coord, stride)
    result = 0
    for k, (s, d) in enumerate(zip(shape, stride)):
        if k == len(shape) - 1:
            c = coord
        else:
            size_k = product(s)
            c = symbolic.mod(coord, size_k)
            coord = symbolic.floordiv(coord, size_k)
        result = add(result, crd2idx(c, s, d, operation=operation, check=False))
    return result


# --------------------------------------------------------------------------- notation


def _format_leaf(x: Any) -> str:
    if x is None:
        return "_"
    return str(x).replace(" ", "")


def format_int_tuple(t: IntTuple) -> str:
    """CuTe notation: ``(3,(2,3))``; a 1-tuple prints as ``(4,)``."""
    if is_tuple(t):
        if len(t) == 1:
            return f"({format_int_tuple(t[0])},)"
        return "(" + ",".join(format_int_tuple(e) for e in t) + ")"
    return _format_leaf(t)
