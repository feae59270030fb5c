"""The layout algebra: composition, complement, inverses, divides and products.

Every operation states its post-condition as an identity over the whole domain and checks its
preconditions (see :mod:`argus.layout_algebra.conditions` for what happens to those that cannot
be decided statically).  Notation: ``A(i)`` is the layout ``A`` at 1-D index ``i``; ``A∘B`` is
composition; ``(B, C)`` is :func:`make_layout`.

A *tiler* is a layout, an int (the compact layout ``n:1``), ``None`` (leave the mode alone) or a
tuple of tilers applied *by mode*: element ``k`` of the tuple acts on mode ``k`` of the layout,
and modes past the tuple are left alone.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Union

from argus import symbolic
from argus.layout_algebra.conditions import (
    Fact,
    LayoutError,
    decide_divides,
    decide_equal,
    decide_less_equal,
    exact_div,
    needs_static,
    require,
)
from argus.layout_algebra.int_tuple import (
    flatten,
    format_int_tuple,
    is_tuple,
    mul,
    prefix_product,
    product,
)
from argus.layout_algebra.layout import Layout, coalesce, make_layout

__all__ = [
    "Tiler",
    "blocked_product",
    "complement",
    "composition",
    "flat_divide",
    "flat_product",
    "left_inverse",
    "logical_divide",
    "logical_product",
    "raked_product",
    "right_inverse",
    "tiled_divide",
    "tiled_product",
    "zipped_divide",
    "zipped_product",
]

Tiler = Union[Layout, int, None, tuple]


def _as_layout(tiler: Any, operation: str) -> Layout:
    if isinstance(tiler, Layout):
        return tiler
    if symbolic.is_static(tiler) or hasattr(tiler, "free_symbols"):
        return Layout(tiler)
    raise LayoutError(f"{operation}: {tiler!r} is not a layout, an int or a tuple of those")


def _by_mode(operation: str, fn: Any, layout: Layout, tiler: tuple) -> Layout:
    if len(tiler) > layout.rank:
        raise LayoutError(
            f"{operation}: the by-mode tiler has {len(tiler)} modes but {layout} has rank "
            f"{layout.rank}",
            hint="give at most one tiler per mode of the layout",
        )
    modes = layout.modes
    return make_layout(*(fn(m, t) for m, t in zip(modes, tiler)), *modes[len(tiler) :])


def _quotient(x: Any, d: Any) -> Any:
    """``x / d`` when ``d | x`` is known, else ``x // d`` (equal once a side condition holds)."""
    if decide_divides(d, x) is True:
        return exact_div(x, d)
    return symbolic.floordiv(x, d)


def _require_nonnegative_strides(layout: Layout, operation: str) -> None:
    for d in flatten(layout.stride):
        sign = decide_less_equal(0, d)
        if sign is False:
            raise LayoutError(f"{operation}: {layout} has a negative stride {d}")
        if sign is None:
            raise needs_static(operation, f"sign of stride {d} of {layout}")


# --------------------------------------------------------------------------- composition


def composition(a: Layout, b: Tiler) -> Layout:
    """``R = A∘B``: the layout with ``R(i) == A(B(i))`` for every ``i < size(B)``.

    ``R`` has the shape structure of ``B`` (each leaf of ``B`` may become a tuple), so
    coordinates of ``B`` are coordinates of ``R``.  Where ``B(i) >= size(A)``, ``A`` continues
    its last mode (:meth:`Layout.extended`).

    Preconditions (``B``'s strides non-negative), for each leaf ``s:d`` of ``B`` walking the
    flattened modes of ``A``: *stride divisibility*, the remaining stride and the size of each
    mode it reaches divide one another; *shape divisibility*, a mode that ``B`` runs past
    divides the remaining size.  Across leaves: *no carry*, the leaves of ``B`` do not overlap
    (sorted by stride, ``size * stride`` of one is at most the next stride) except inside the
    last mode of ``A``.  Example: ``(6,2):(8,2) ∘ (4,3):(3,1) == ((2,2),3):((24,2),8)``.
    A tuple ``b`` composes by mode; ``None`` keeps the mode.
    """
    if b is None:
        return a
    if isinstance(b, tuple):
        return _by_mode("composition", composition, a, b)
    b = _as_layout(b, "composition")
    if is_tuple(b.shape):
        _require_no_carry(a, b)
        return make_layout(*(composition(a, mode) for mode in b.modes))
    return _compose_leaf(a, b.shape, b.stride)


def _require_no_carry(a: Layout, b: Layout) -> None:
    """``A(x + y) == A(x) + A(y)`` for the values ``x``, ``y`` of different leaves of ``B``.

    ``A∘B`` is built leaf by leaf, which is right only if adding the leaves' values never
    carries across a mode boundary of ``A``.  That holds when, sorted by stride, each leaf of
    ``B`` ends (``size * stride``) at or below the next leaf's stride, or lies in the last
    mode of ``A``, where ``A`` is linear.
    """
    leaves = [
        (s, d)
        for s, d in zip(flatten(b.shape), flatten(b.stride))
        if decide_equal(s, 1) is not True and decide_equal(d, 0) is not True
    ]
    if len(leaves) < 2:
        return
    linear_from = product(flatten(a.shape)[:-1])
    ordered = []
    while leaves:
        smallest = next(
            (
                m
                for m in range(len(leaves))
                if all(decide_less_equal(leaves[m][1], d) is True for _, d in leaves)
            ),
            None,
        )
        if smallest is None:
            raise needs_static("composition", f"order of the strides of {b}")
        ordered.append(leaves.pop(smallest))
    for (s, d), (_, next_d) in pairwise(ordered):
        if decide_divides(linear_from, d) is True:
            break
        require(
            Fact.less_equal(mul(s, d), next_d),
            "composition",
            f"the modes of {b} overlap (mode {s}:{d} runs into stride {next_d}) inside the "
            f"modes of {a}, so their offsets would carry from one mode of {a} into the next",
        )


def _compose_leaf(a: Layout, size: Any, stride: Any) -> Layout:
    if decide_equal(size, 1) is True:
        return Layout(1, 0)
    sign = decide_less_equal(0, stride)
    if sign is False:
        raise LayoutError(f"composition: the right operand {size}:{stride} has a negative stride")
    if sign is None:
        raise needs_static("composition", f"sign of stride {stride}")
    if decide_equal(stride, 0) is True:
        return Layout._derived(size, 0)

    shapes, strides = flatten(a.shape), flatten(a.stride)
    out: list[tuple[Any, Any]] = []
    rest_size, rest_stride = size, stride
    for k in range(len(shapes) - 1):
        s_k, d_k = shapes[k], strides[k]
        # stride division: either the whole mode lies below B's stride, or B steps inside it
        if decide_divides(s_k, rest_stride) is True:
            rest_stride = exact_div(rest_stride, s_k)
            continue
        if decide_divides(rest_stride, s_k) is not True:
            facts = (Fact.divides(s_k, rest_stride), Fact.divides(rest_stride, s_k))
            if any(f.decision is None for f in facts):
                raise needs_static(
                    "composition",
                    f"divisibility between stride {rest_stride} and size {s_k} (mode {k} of {a})",
                )
            raise LayoutError(
                f"composition: stride divisibility fails for {a} ∘ {size}:{stride}: the stride "
                f"{rest_stride} and the size {s_k} of mode {k} do not divide one another",
                hint="tile with a stride that divides, or is a multiple of, each mode's size",
            )
        reach = exact_div(s_k, rest_stride)  # how many steps of B fit in mode k
        step = mul(rest_stride, d_k)
        # shape modulo: B either ends inside mode k, or runs through it a whole number of times
        if decide_less_equal(rest_size, reach) is True or decide_divides(rest_size, reach) is True:
            out.append((rest_size, step))
            break
        if (
            decide_divides(reach, rest_size) is not True
            and decide_less_equal(rest_size, reach) is not False
        ):
            raise needs_static(
                "composition",
                f"comparison of size {rest_size} with {reach} (mode {k} of {a})",
            )
        require(
            Fact.divides(reach, rest_size),
            "composition",
            f"shape divisibility: {size}:{stride} runs past mode {k} of {a}, so the {reach} "
            f"steps that fit in the mode must divide the remaining size",
        )
        out.append((reach, step))
        rest_size = _quotient(rest_size, reach)
        rest_stride = 1
    else:
        out.append((rest_size, mul(rest_stride, strides[-1])))
    if len(out) == 1:
        return coalesce(Layout._derived(*out[0]))
    return coalesce(Layout._derived(tuple(s for s, _ in out), tuple(d for _, d in out)))


# --------------------------------------------------------------------------- complement


def complement(a: Layout, cotarget: Any = None) -> Layout:
    """The layout ``R`` that fills the gaps of ``A`` up to ``cotarget`` (default ``cosize(A)``).

    Post-conditions, with ``F = filter(A)``:

    * disjoint: ``(F, R)`` is injective, so ``R(j) != A(i)`` unless both are 0;
    * ordered: ``R`` is strictly increasing, ``R(j) < R(j + 1)``;
    * bounded: ``(F, R)`` is a bijection onto ``[0, size(F) * size(R))`` and
      ``size(F) * size(R) >= cotarget`` (the last mode of ``R`` is ceil-divided, so it covers a
      cotarget that is not a multiple of what ``A`` spans).

    Precondition (``A`` is *complementable*): sorted by stride, the non-trivial modes of ``A``
    have strides that are multiples of the span ``size * stride`` of the previous mode.
    Example: complement w.r.t. 24 of ``4:2`` is ``(2,3):(1,8)``.
    """
    if cotarget is None:
        cotarget = a.cosize
    elif isinstance(cotarget, tuple):
        cotarget = product(cotarget)
    require(Fact.positive(cotarget), "complement", "the cotarget must be positive")
    _require_nonnegative_strides(a, "complement")

    modes = []
    for s, d in zip(flatten(a.shape), flatten(a.stride)):
        if decide_equal(s, 1) is True:
            continue
        zero = decide_equal(d, 0)
        if zero is None:
            raise needs_static("complement", f"whether stride {d} of {a} is 0")
        if not zero:
            modes.append((s, d))

    shapes: list[Any] = []
    strides: list[Any] = []
    current: Any = 1
    while modes:
        smallest = next(
            (
                m
                for m in range(len(modes))
                if all(decide_less_equal(modes[m][1], d) is True for _, d in modes)
            ),
            None,
        )
        if smallest is None:
            raise needs_static("complement", f"order of the strides {[d for _, d in modes]} of {a}")
        s, d = modes.pop(smallest)
        require(
            Fact.divides(current, d),
            "complement",
            f"{a} is not complementable: its stride {d} must be a multiple of {current}, the "
            f"span of its smaller modes (its modes overlap or interleave)",
        )
        shapes.append(_quotient(d, current))
        strides.append(current)
        current = mul(s, d)
    if decide_divides(current, cotarget) is True:
        shapes.append(exact_div(cotarget, current))
    else:
        shapes.append(symbolic.ceil_div(cotarget, current))
    strides.append(current)
    return coalesce(Layout._derived(tuple(shapes), tuple(strides)))


# --------------------------------------------------------------------------- inverses


def right_inverse(layout: Layout) -> Layout:
    """The largest compact ``R`` with ``L(R(i)) == i`` for every ``i < size(R)``.

    ``R`` follows the chain of modes of ``L`` with strides ``1, s0, s0*s1, ...``; its size is
    the length of the prefix ``[0, n)`` that ``L`` reaches through that chain (1 when ``L``
    never takes the value 1).  For a bijection onto ``[0, size(L))``, ``size(R) == size(L)``.
    Example: ``right_inverse((8,4):(4,1)) == (4,8):(8,1)``.
    """
    shapes = flatten(layout.shape)
    strides = flatten(layout.stride)
    domain_strides = flatten(prefix_product(layout.shape))
    remaining = [
        (s, d, r)
        for s, d, r in zip(shapes, strides, domain_strides)
        if decide_equal(s, 1) is not True
    ]
    out: list[tuple[Any, Any]] = []
    current: Any = 1
    while remaining:
        decisions = [decide_equal(d, current) for _, d, _ in remaining]
        if True in decisions:
            s, d, r = remaining.pop(decisions.index(True))
            out.append((s, r))
            current = mul(s, d)
            continue
        if None in decisions:
            raise needs_static("right_inverse", f"whether a stride of {layout} equals {current}")
        break
    if not out:
        return Layout(1, 0)
    return coalesce(Layout._derived(tuple(s for s, _ in out), tuple(r for _, r in out)))


def left_inverse(layout: Layout) -> Layout:
    """An ``R`` with ``R(L(i)) == i`` for every ``i < size(L)``.

    Preconditions: ``L`` is injective and complementable (see :func:`complement`).  ``R`` is
    defined on ``[0, cosize(L))`` and sends offsets outside the image of ``L`` somewhere in
    the domain of ``L``'s complement.  Example: ``left_inverse(4:2) == (2,4):(4,1)``.
    """
    for s, d in zip(flatten(layout.shape), flatten(layout.stride)):
        if decide_equal(d, 0) is True and decide_equal(s, 1) is not True:
            raise LayoutError(
                f"left_inverse: {layout} is not injective (mode {s}:{d} repeats offsets)"
            )
    result = right_inverse(make_layout(layout, complement(layout)))
    if decide_less_equal(layout.cosize, result.size) is False:
        raise LayoutError(f"left_inverse: {layout} is not injective")
    return result


# --------------------------------------------------------------------------- divides


def logical_divide(a: Layout, tiler: Tiler) -> Layout:
    """``A ⊘ B = A∘(B, complement(B, size(A)))``: mode 0 walks a tile, mode 1 the tiles.

    Post-condition: ``R(j, k) == A(B(j) + C(k))`` with ``C = complement(B, size(A))``
    (``A`` extended past its size when ``B`` does not divide it, see :meth:`Layout.extended`);
    in particular mode 0 of ``R`` is ``A∘B``.  A tuple tiler divides by mode.
    Example: ``(4,2,3):(2,1,8) ⊘ 4:2 == ((2,2),(2,3)):((4,1),(2,8))``.
    """
    if tiler is None:
        return a
    if isinstance(tiler, tuple):
        return _by_mode("logical_divide", logical_divide, a, tiler)
    b = _as_layout(tiler, "logical_divide")
    return composition(a, make_layout(b, complement(b, a.size)))


def _unzip(split: Any, a: Layout, tiler: Tiler) -> Layout:
    """Apply ``split`` (a rank-2 result) by mode and gather the mode-0s and the mode-1s."""
    if tiler is None:
        return make_layout(Layout(1, 0), a)
    if isinstance(tiler, tuple):
        if len(tiler) > a.rank:
            raise LayoutError(
                f"the by-mode tiler {format_int_tuple(tiler)} has more modes than {a}"
            )
        parts = [_unzip(split, mode, t) for mode, t in zip(a.modes, tiler)]
        return make_layout(
            make_layout(*(p[0] for p in parts)),
            make_layout(*(p[1] for p in parts), *a.modes[len(tiler) :]),
        )
    return split(a, tiler)


def zipped_divide(a: Layout, tiler: Tiler) -> Layout:
    """``((tile modes...), (rest modes...))``: :func:`logical_divide` with the modes regrouped.

    Post-condition for a tuple tiler of rank r:
    ``R((t0, ..., t_r-1), (k0, ..., k_r-1, a_r, ...)) == D((t0, k0), ..., (t_r-1, k_r-1), a_r, ...)``
    with ``D = logical_divide(A, tiler)``; for a layout tiler ``R == D``.
    """
    return _unzip(logical_divide, a, tiler)


def tiled_divide(a: Layout, tiler: Tiler) -> Layout:
    """``((tile modes...), rest0, rest1, ...)``: :func:`zipped_divide` with the rest unpacked."""
    zipped = zipped_divide(a, tiler)
    return make_layout(zipped[0], *zipped[1].modes)


def flat_divide(a: Layout, tiler: Tiler) -> Layout:
    """``(tile0, tile1, ..., rest0, rest1, ...)``: :func:`zipped_divide` with both unpacked."""
    zipped = zipped_divide(a, tiler)
    return make_layout(*zipped[0].modes, *zipped[1].modes)


# --------------------------------------------------------------------------- products


def logical_product(a: Layout, tiler: Tiler) -> Layout:
    """``A ⊗ B = (A, complement(A, size(A)*cosize(B))∘B)``: ``A`` repeated as ``B`` says.

    Post-condition: ``R(i, j) == A(i) + C(B(j))`` with
    ``C = complement(A, size(A) * cosize(B))``.  A tuple tiler multiplies by mode.
    Example: ``(2,2):(4,1) ⊗ 6:1 == ((2,2),(2,3)):((4,1),(2,8))``.
    """
    if tiler is None:
        return a
    if isinstance(tiler, tuple):
        return _by_mode("logical_product", logical_product, a, tiler)
    b = _as_layout(tiler, "logical_product")
    return make_layout(a, composition(complement(a, mul(a.size, b.cosize)), b))


def zipped_product(a: Layout, tiler: Tiler) -> Layout:
    """``((block modes...), (repeat modes...))``: :func:`logical_product` regrouped."""
    return _unzip(logical_product, a, tiler)


def tiled_product(a: Layout, tiler: Tiler) -> Layout:
    """``((block modes...), repeat0, repeat1, ...)``."""
    zipped = zipped_product(a, tiler)
    return make_layout(zipped[0], *zipped[1].modes)


def flat_product(a: Layout, tiler: Tiler) -> Layout:
    """``(block0, block1, ..., repeat0, repeat1, ...)``."""
    zipped = zipped_product(a, tiler)
    return make_layout(*zipped[0].modes, *zipped[1].modes)


def _pad(layout: Layout, rank: int) -> Layout:
    if layout.rank >= rank:
        return layout
    return make_layout(*layout.modes, *([Layout(1, 0)] * (rank - layout.rank)))


def _rank_wise_product(a: Layout, b: Layout, operation: str) -> tuple[Layout, Layout, int]:
    if not isinstance(a, Layout) or not isinstance(b, Layout):
        raise LayoutError(f"{operation}: both operands must be layouts")
    r = max(a.rank, b.rank)
    result = logical_product(_pad(a, r), _pad(b, r))
    return result[0], result[1], r


def blocked_product(a: Layout, b: Layout) -> Layout:
    """Mode ``k`` is ``(A_k, B_k)``: a ``B``-shaped arrangement of whole ``A`` blocks.

    Post-condition, with ``P = logical_product(A, B)`` (both padded to the same rank with
    ``1:0`` modes): ``R((a0, b0), (a1, b1), ...) == P((a0, a1, ...), (b0, b1, ...))``.  Two
    rank-1 layouts give a rank-1 result whose mode is ``(A, B)``.  Example: ``blocked_product((2,2):(1,2), (3,4):(1,3))`` has mode
    0 of size 2*3 whose first 2 coordinates stay in one block.
    """
    first, second, _ = _rank_wise_product(a, b, "blocked_product")
    return make_layout(*(make_layout(x, y) for x, y in zip(first.modes, second.modes)))


def raked_product(a: Layout, b: Layout) -> Layout:
    """Mode ``k`` is ``(B_k, A_k)``: the elements of each ``A`` block spread across the tiling.

    Post-condition, with ``P = logical_product(A, B)`` padded as in :func:`blocked_product`:
    ``R((b0, a0), (b1, a1), ...) == P((a0, a1, ...), (b0, b1, ...))``.  Two rank-1 layouts give
    a rank-1 result whose mode is ``(B, A)``.
    """
    first, second, _ = _rank_wise_product(a, b, "raked_product")
    return make_layout(*(make_layout(y, x) for x, y in zip(first.modes, second.modes)))
