"""Brute-force oracle and hypothesis strategies for the layout-algebra tests.

The oracle reads a layout's raw ``shape``/``stride`` trees and evaluates them with plain
integer arithmetic; it shares no code with ``argus.layout_algebra`` beyond the two attributes.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from argus.layout_algebra import Layout


def leaves(tree: Any) -> list:
    if isinstance(tree, tuple):
        return [leaf for child in tree for leaf in leaves(child)]
    return [tree]


def value(shape: Any, stride: Any, index: int) -> int:
    """Offset of 1-D ``index`` (column-major; the last leaf absorbs indices past the size)."""
    sizes, steps = leaves(shape), leaves(stride)
    total = 0
    for k, (s, d) in enumerate(zip(sizes, steps)):
        if k == len(sizes) - 1:
            total += index * d
        else:
            total += (index % s) * d
            index //= s
    return total


def at(layout: Layout, index: int) -> int:
    return value(layout.shape, layout.stride, index)


def at_coord(shape: Any, stride: Any, coord: Any) -> int:
    """Offset of a coordinate given as nested tuples whose leaves are 1-D indices of subtrees."""
    if isinstance(coord, tuple):
        assert isinstance(shape, tuple) and len(shape) == len(coord), (shape, coord)
        return sum(at_coord(s, d, c) for s, d, c in zip(shape, stride, coord))
    return value(shape, stride, coord)


def layout_at(layout: Layout, coord: Any) -> int:
    return at_coord(layout.shape, layout.stride, coord)


def size_of(tree: Any) -> int:
    return math.prod(leaves(tree))


def table(layout: Layout) -> list[int]:
    """The layout as the list of its offsets over its whole domain."""
    return [at(layout, i) for i in range(size_of(layout.shape))]


def same_function(a: Layout, b: Layout) -> bool:
    return size_of(a.shape) == size_of(b.shape) and table(a) == table(b)


def cosize_of(layout: Layout) -> int:
    return max(table(layout)) + 1


def mode_sizes(layout: Layout) -> list[int]:
    shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    return [size_of(s) for s in shape]


def mode_coords(sizes: list[int]):
    """All tuples of 1-D mode indices, first mode fastest."""
    if not sizes:
        yield ()
        return
    for rest in mode_coords(sizes[1:]):
        for first in range(sizes[0]):
            yield (first, *rest)


# --------------------------------------------------------------------------- strategies


@st.composite
def nest(draw: Any, items: list) -> Any:
    """Group a flat list of (size, stride) pairs into a random hierarchy; returns the tree."""
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    groups = []
    i = 0
    while i < len(items):
        width = draw(st.integers(1, len(items) - i))
        group = items[i : i + width]
        if width > 1 and draw(st.booleans()):
            groups.append(draw(nest(group)))
        elif width == 1:
            groups.append(group[0])
        else:
            groups.append(tuple(group))
        i += width
    return tuple(groups)


def split_pairs(tree: Any) -> tuple[Any, Any]:
    """A tree of (size, stride) pairs -> (shape tree, stride tree)."""
    if isinstance(tree, list):
        return tree[0], tree[1]
    if isinstance(tree, tuple) and tree and isinstance(tree[0], (tuple, list)):
        parts = [split_pairs(t) for t in tree]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    if isinstance(tree, tuple) and not tree:
        return (), ()
    raise AssertionError(tree)


def pairs_to_layout(draw: Any, pairs: list[tuple[int, int]], flat: bool = False) -> Layout:
    items = [[s, d] for s, d in pairs]  # lists mark leaves inside the tree of tuples
    tree = tuple(items) if flat else draw(nest(items))
    shape, stride = split_pairs(tree)
    return Layout(shape, stride)


@st.composite
def sizes_list(draw: Any, max_modes: int = 4, max_size: int = 1024, max_leaf: int = 8) -> list:
    count = draw(st.integers(1, max_modes))
    sizes: list[int] = []
    for _ in range(count):
        budget = max_size // math.prod(sizes) if sizes else max_size
        if budget < 1:
            break
        sizes.append(draw(st.integers(1, min(max_leaf, budget))))
    return sizes


@st.composite
def layouts(draw: Any, max_modes: int = 4, max_stride: int = 40, max_size: int = 1024) -> Layout:
    """Any layout: random hierarchy, sizes and non-negative strides."""
    sizes = draw(sizes_list(max_modes=max_modes, max_size=max_size))
    strides = [draw(st.integers(0, max_stride)) for _ in sizes]
    return pairs_to_layout(draw, list(zip(sizes, strides)))


@st.composite
def complementable_layouts(
    draw: Any, allow_trivial: bool = True, max_size: int = 256, max_gap: int = 3
) -> Layout:
    """Injective layouts whose sorted strides each divide into the next span (permuted, nested),
    optionally with stride-0 and size-1 modes mixed in."""
    sizes = [s for s in draw(sizes_list(max_size=max_size, max_leaf=6)) if s > 1] or [2]
    pairs = []
    stride = draw(st.integers(1, max_gap))
    for s in sizes:
        pairs.append((s, stride))
        stride = stride * s * draw(st.integers(1, max_gap))
    if allow_trivial:
        for _ in range(draw(st.integers(0, 2))):
            if draw(st.booleans()):
                pairs.append((1, draw(st.integers(0, 9))))
            else:
                pairs.append((draw(st.integers(2, 3)), 0))
    pairs = draw(st.permutations(pairs))
    return pairs_to_layout(draw, list(pairs))


def prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def admissible_pairs(draw: Any) -> tuple[Layout, Layout]:
    """``(A, B)`` such that ``A∘B`` satisfies the divisibility conditions.

    ``B`` picks disjoint runs of consecutive prime factors of ``A``'s flattened shape with
    their column-major strides (plus stride-0, size-1 and past-the-end modes, which may
    overlap each other), so its strides and sizes always divide the modes of ``A`` it meets.
    """
    a = draw(layouts(max_size=512))
    primes = [p for s in leaves(a.shape) for p in prime_factors(s)]
    prefix = [1]
    for p in primes:
        prefix.append(prefix[-1] * p)
    pairs = []
    position = 0  # runs of primes must not overlap (no carries between B's modes)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            pairs.append((draw(st.integers(1, 3)), 0))
        elif kind == 1 or position >= len(primes):
            pairs.append((draw(st.integers(2, 3)), prefix[-1] * draw(st.integers(1, 2))))
        else:
            start = draw(st.integers(position, len(primes) - 1))
            stop = draw(st.integers(start + 1, min(len(primes), start + 3)))
            pairs.append((math.prod(primes[start:stop]), prefix[start]))
            position = stop
    pairs = draw(st.permutations(pairs))
    b = pairs_to_layout(draw, pairs)
    return a, b
