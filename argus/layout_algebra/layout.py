"""The layout: a function from coordinates to integer offsets, ``shape:stride``.

A layout pairs a hierarchical shape with a congruent hierarchical stride.  Its value at a
natural coordinate ``c`` (one integer per leaf of the shape, ``0 <= c_k < s_k``) is the inner
product ``sum(c_k * d_k)``; a 1-D index ``i`` is first split column-major (left-most mode
fastest).  Example: ``(3,(2,3)):(3,(12,1))`` sends index 16 to coordinate ``(1,(1,2))`` and to
offset ``1*3 + 1*12 + 2*1 == 17``.

Leaves of shapes and strides are Python ints or sympy integer expressions (size symbols for
run-time extents).  Coordinates may also be foreign int-like terms: evaluation only uses ``+``,
``*`` and :mod:`argus.symbolic`'s floor division and modulo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic
from argus.layout_algebra.conditions import (
    Fact,
    LayoutError,
    decide_equal,
    decide_less_equal,
    needs_static,
    require,
)
from argus.layout_algebra.int_tuple import (
    IntTuple,
    add,
    as_int_tuple,
    congruent,
    crd2idx,
    format_int_tuple,
    idx2crd,
    is_tuple,
    mul,
    prefix_product,
    product,
)
from argus.layout_algebra.int_tuple import flatten as flatten_tuple

__all__ = [
    "Layout",
    "LayoutError",
    "coalesce",
    "cosize",
    "crd2idx",
    "depth",
    "filter",
    "flatten",
    "idx2crd",
    "make_layout",
    "rank",
    "size",
]


def _check_positive_sizes(shape: IntTuple) -> None:
    for s in flatten_tuple(shape):
        require(
            Fact.positive(s),
            "Layout",
            f"every size of shape {format_int_tuple(shape)} must be positive",
        )


def _contains_none(coord: Any) -> bool:
    if coord is None:
        return True
    return is_tuple(coord) and any(_contains_none(c) for c in coord)


def _depth_of(t: IntTuple) -> int:
    if is_tuple(t):
        return 1 + max((_depth_of(e) for e in t), default=0)
    return 0


@dataclass(frozen=True, init=False)
class Layout:
    """An immutable ``shape:stride`` layout.

    ``Layout(shape)`` takes compact column-major strides (``(4,(2,3))`` gets ``(1,(4,8))``).
    Shapes must be positive; strides may be any integers.  Equality is structural: two layouts
    that are the same function but differ in shape (``(2,2):(1,2)`` and ``4:1``) are not ``==``.
    """

    shape: IntTuple
    stride: IntTuple

    def __init__(self, shape: IntTuple, stride: IntTuple | None = None) -> None:
        shape = as_int_tuple(shape, "Layout shape")
        stride = prefix_product(shape) if stride is None else as_int_tuple(stride, "Layout stride")
        if not congruent(shape, stride):
            raise LayoutError(
                f"Layout: stride {format_int_tuple(stride)} is not congruent with shape "
                f"{format_int_tuple(shape)}",
                hint="give a stride with the same nesting and lengths as the shape",
            )
        _check_positive_sizes(shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)

    @classmethod
    def _derived(cls, shape: IntTuple, stride: IntTuple) -> Layout:
        """A layout computed by the algebra from valid layouts: normalized leaves, congruent
        trees, sizes positive by the operation's (checked or collected) preconditions."""
        layout = object.__new__(cls)
        object.__setattr__(layout, "shape", shape)
        object.__setattr__(layout, "stride", stride)
        return layout

    # ------------------------------------------------------------------ structure

    @property
    def size(self) -> Any:
        """Number of coordinates: the product of the shape."""
        return product(self.shape)

    @property
    def cosize(self) -> Any:
        """One past the largest offset: ``1 + sum((s - 1) * d)`` over modes with ``d >= 0``.

        For non-negative strides this is ``L(size - 1) + 1``.
        """
        result: Any = 1
        for s, d in zip(flatten_tuple(self.shape), flatten_tuple(self.stride)):
            sign = decide_less_equal(0, d)
            if sign is None:
                raise needs_static("cosize", f"sign of stride {d}")
            if sign:
                result = add(result, mul(s - 1, d))
        if isinstance(result, sympy.Expr):
            result = sympy.expand(result)
        return symbolic.normalize(result)

    @property
    def rank(self) -> int:
        """Number of top-level modes (1 for a leaf shape)."""
        return len(self.shape) if is_tuple(self.shape) else 1

    @property
    def depth(self) -> int:
        """Nesting depth of the shape: 0 for a leaf, 1 for a flat tuple, ..."""
        return _depth_of(self.shape)

    @property
    def modes(self) -> tuple[Layout, ...]:
        """The top-level modes as layouts (a leaf layout is its own single mode)."""
        if is_tuple(self.shape):
            return tuple(Layout._derived(s, d) for s, d in zip(self.shape, self.stride))
        return (self,)

    @property
    def is_static(self) -> bool:
        """True when every shape and stride leaf is a Python int."""
        return all(
            isinstance(x, int) for x in (*flatten_tuple(self.shape), *flatten_tuple(self.stride))
        )

    def __getitem__(self, mode: int) -> Layout:
        """Top-level mode ``mode`` (negative numbers count from the end)."""
        modes = self.modes
        if not -len(modes) <= mode < len(modes):
            raise LayoutError(f"Layout[{mode}]: {self} has rank {len(modes)}")
        return modes[mode]

    # ------------------------------------------------------------------ evaluation

    def __call__(self, *coord: Any) -> Any:
        """The offset of a 1-D index or a (natural, hierarchical or coarse) coordinate.

        ``L(i)`` splits ``i`` column-major; ``L(c0, c1)`` is ``L((c0, c1))``.  Static indices and
        coordinates out of range raise :class:`LayoutError`; symbolic ones are taken as in
        range (the verifier bounds its variables itself).  Post-condition:
        ``L(i) == L(idx2crd(i, L.shape))``.
        """
        c = coord[0] if len(coord) == 1 else tuple(coord)
        if _contains_none(c):
            raise LayoutError(
                f"Layout call: coordinate {format_int_tuple(c)} has a free mode (None)",
                hint="use L.slice(coord) to get the sub-layout and its offset",
            )
        return symbolic.normalize(crd2idx(c, self.shape, self.stride, operation="Layout call"))

    def extended(self, index: Any) -> Any:
        """``L(index)`` where an index past the size continues the last mode.

        This is how tilings that do not divide an extent address their partial last tile:
        ``Layout((4,3),(1,4)).extended(13) == 13``.
        """
        if symbolic.static_value(index) is not None and symbolic.static_value(index) < 0:
            raise LayoutError(f"Layout.extended: negative index {index}")
        return symbolic.normalize(
            crd2idx(index, self.shape, self.stride, operation="Layout.extended", check=False)
        )

    def idx2crd(self, index: Any) -> IntTuple:
        """The natural coordinate of 1-D ``index`` (column-major over the shape)."""
        return idx2crd(index, self.shape)

    def crd2idx(self, coord: IntTuple) -> Any:
        """The offset of ``coord``: the same as ``L(coord)``."""
        return self(coord)

    def slice(self, coord: IntTuple) -> tuple[Layout, Any]:
        """Fix the modes of ``coord`` given as integers and keep those given as ``None``.

        Returns ``(sub, offset)`` with ``L(c) == offset + sub(c restricted to the None modes)``.
        Example: ``(4,(2,3)):(1,(4,8))`` sliced at ``(None, (1, None))`` is
        ``((4,3):(1,8), 4)``.
        """
        shapes: list[IntTuple] = []
        strides: list[IntTuple] = []

        def walk(c: Any, s: IntTuple, d: IntTuple) -> Any:
            if c is None:
                shapes.append(s)
                strides.append(d)
                return 0
            if is_tuple(c):
                if not is_tuple(s) or len(c) != len(s):
                    raise LayoutError(
                        f"Layout.slice: coordinate {format_int_tuple(c)} does not match the rank "
                        f"of shape {format_int_tuple(s)}"
                    )
                offset: Any = 0
                for ci, si, di in zip(c, s, d):
                    offset = add(offset, walk(ci, si, di))
                return offset
            return crd2idx(c, s, d, operation="Layout.slice")

        offset = walk(coord, self.shape, self.stride)
        if not shapes:
            return Layout(1, 0), symbolic.normalize(offset)
        if len(shapes) == 1:
            return Layout._derived(shapes[0], strides[0]), symbolic.normalize(offset)
        return Layout._derived(tuple(shapes), tuple(strides)), symbolic.normalize(offset)

    # ------------------------------------------------------------------ transformations

    def flatten(self) -> Layout:
        """The same function with a flat shape (hierarchy removed)."""
        return flatten(self)

    def coalesce(self, profile: IntTuple | None = None) -> Layout:
        """See :func:`coalesce`."""
        return coalesce(self, profile)

    def filter(self, profile: IntTuple | None = None) -> Layout:
        """See :func:`filter`."""
        return filter(self, profile)

    def specialize(self, env: dict[Any, int]) -> Layout:
        """Replace size symbols by values (``{symbol or name: int}``)."""

        def subst(x: Any) -> Any:
            if isinstance(x, sympy.Expr) and x.free_symbols:
                binding = {
                    s: env[s] if s in env else env[s.name]
                    for s in x.free_symbols
                    if s in env or s.name in env
                }
                return symbolic.normalize(
                    x.xreplace({s: sympy.Integer(v) for s, v in binding.items()})
                )
            return x

        def walk(t: IntTuple) -> IntTuple:
            return tuple(walk(e) for e in t) if is_tuple(t) else subst(t)

        return Layout(walk(self.shape), walk(self.stride))

    # ------------------------------------------------------------------ notation

    def __str__(self) -> str:
        return f"{format_int_tuple(self.shape)}:{format_int_tuple(self.stride)}"

    __repr__ = __str__

    @staticmethod
    def parse(text: str) -> Layout:
        """Read CuTe notation: ``"(3,(2,3)):(3,(12,1))"``, ``"(4,2)"`` (compact), ``"(M,4):(1,M)"``.

        Leaves are integers, names (positive size symbols) and ``*``/``+``/``-`` of those.
        """
        return _Parser(text).layout()


# --------------------------------------------------------------------------- notation parser


class _Parser:
    _TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(.))")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        for number, name, other in self._TOKEN.findall(text):
            if number:
                self.tokens.append(("int", number))
            elif name:
                self.tokens.append(("name", name))
            elif other.strip():
                self.tokens.append(("op", other))
        self.pos = 0

    def error(self, what: str) -> LayoutError:
        return LayoutError(f"Layout.parse: {what} in {self.text!r}")

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise self.error("unexpected end")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def layout(self) -> Layout:
        shape = self.tree()
        stride = None
        if self.peek() == ":":
            self.take()
            stride = self.tree()
        if self.pos != len(self.tokens):
            raise self.error(f"unexpected {self.peek()!r}")
        return Layout(shape, stride)

    def tree(self) -> IntTuple:
        if self.peek() != "(":
            return self.sum()
        self.take()
        items: list[IntTuple] = []
        trailing_comma = False
        while self.peek() != ")":
            items.append(self.tree())
            trailing_comma = False
            if self.peek() == ",":
                self.take()
                trailing_comma = True
            elif self.peek() != ")":
                raise self.error(f"expected ',' or ')' but found {self.peek()!r}")
        self.take()
        if len(items) == 1 and not trailing_comma:
            return items[0]  # "(4)" is just 4
        return tuple(items)

    def sum(self) -> Any:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return symbolic.normalize(value)

    def term(self) -> Any:
        value = self.atom()
        while self.peek() == "*":
            self.take()
            value = value * self.atom()
        return value

    def atom(self) -> Any:
        kind, text = self.take()
        if text == "-":
            return -self.atom()
        if kind == "int":
            return int(text)
        if kind == "name":
            return symbolic.size_symbol(text)
        raise self.error(f"unexpected {text!r}")


# --------------------------------------------------------------------------- functions


def make_layout(*layouts: Layout | int) -> Layout:
    """Concatenate layouts as the modes of a new layout: ``make_layout(A, B)(a, b) == A(a) + B(b)``.

    Integers stand for compact 1-D layouts.
    """
    modes = [layout if isinstance(layout, Layout) else Layout(layout) for layout in layouts]
    return Layout._derived(tuple(m.shape for m in modes), tuple(m.stride for m in modes))


def size(x: Layout | IntTuple) -> Any:
    """Size of a layout's domain, or the product of a shape."""
    return x.size if isinstance(x, Layout) else product(as_int_tuple(x))


def cosize(layout: Layout) -> Any:
    """Size of a layout's codomain (one past its largest offset)."""
    return layout.cosize


def rank(x: Layout | IntTuple) -> int:
    """Number of top-level modes."""
    if isinstance(x, Layout):
        return x.rank
    return len(x) if is_tuple(x) else 1


def depth(x: Layout | IntTuple) -> int:
    """Nesting depth (0 for a leaf)."""
    if isinstance(x, Layout):
        return x.depth
    return _depth_of(as_int_tuple(x))


def flatten(x: Layout | IntTuple) -> Layout | tuple:
    """Remove the hierarchy: a layout with a flat shape (same function), or a tuple's leaves."""
    if not isinstance(x, Layout):
        return flatten_tuple(x)
    if not is_tuple(x.shape):
        return x
    return Layout._derived(flatten_tuple(x.shape), flatten_tuple(x.stride))


def _by_mode(fn: Any, layout: Layout, profile: tuple, operation: str) -> Layout:
    if len(profile) > layout.rank:
        raise LayoutError(
            f"{operation}: profile {format_int_tuple(profile)} has more modes than {layout}"
        )
    modes = layout.modes
    return make_layout(*(fn(m, p) for m, p in zip(modes, profile)), *modes[len(profile) :])


def coalesce(layout: Layout, profile: IntTuple | None = None) -> Layout:
    """The same function with the fewest modes: drop size-1 modes, merge ``s0:d0, s1:s0*d0``.

    Post-condition: ``coalesce(L)(i) == L(i)`` for every ``i < size(L)``, and
    ``size(coalesce(L)) == size(L)``.  With a tuple ``profile`` each top-level mode ``k`` is
    coalesced by ``profile[k]`` separately (``None`` or an int leaf: the whole mode), keeping the
    modes past the profile; the result then has ``rank(L)`` modes.  Example:
    ``coalesce((2,(1,6)):(1,(6,2))) == 12:1``.
    """
    if is_tuple(profile):
        return _by_mode(coalesce, layout, profile, "coalesce")
    shapes: list[Any] = []
    strides: list[Any] = []
    for s, d in zip(flatten_tuple(layout.shape), flatten_tuple(layout.stride)):
        if decide_equal(s, 1) is True:
            continue
        if shapes and decide_equal(mul(shapes[-1], strides[-1]), d) is True:
            shapes[-1] = mul(shapes[-1], s)
            continue
        shapes.append(s)
        strides.append(d)
    if not shapes:
        return Layout(1, 0)
    if len(shapes) == 1:
        return Layout._derived(shapes[0], strides[0])
    return Layout._derived(tuple(shapes), tuple(strides))


def filter(layout: Layout, profile: IntTuple | None = None) -> Layout:
    """Drop the stride-0 and size-1 modes, then coalesce.

    Post-condition: ``filter(L)`` is ``L`` restricted to the coordinates that are 0 in every
    stride-0 mode (it is not the same function as ``L``, whose domain is larger), so both have
    the same image: ``{filter(L)(i)} == {L(i)}``.  By-mode with a tuple ``profile`` as in
    :func:`coalesce`.
    """
    if is_tuple(profile):
        return _by_mode(filter, layout, profile, "filter")
    kept = [
        (s, d)
        for s, d in zip(flatten_tuple(layout.shape), flatten_tuple(layout.stride))
        if decide_equal(s, 1) is not True and decide_equal(d, 0) is not True
    ]
    if not kept:
        return Layout(1, 0)
    return coalesce(Layout._derived(tuple(s for s, _ in kept), tuple(d for _, d in kept)))
