"""Tiles, thread partitions and thread-value layouts, with predicates for partial tiles.

Tiling an extent that the tile does not divide (a symbolic ``M``, or 100 rows in tiles of 64)
uses ceil-division: the last tile runs past the extent.  Every selection here therefore returns
a :class:`Tile`: the selected layout, its offset, and for each mode of the original layout the
map from the tile's coordinates back to the original coordinate.  ``tile.predicate(c)`` is then
exactly "element ``c`` of the tile lies inside the original extents", so kernels with tails need
no divisibility assumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic
from argus.layout_algebra.algebra import (
    complement,
    composition,
    logical_divide,
    raked_product,
    right_inverse,
    zipped_divide,
)
from argus.layout_algebra.conditions import LayoutError, decide_equal
from argus.layout_algebra.int_tuple import (
    add,
    crd2idx,
    flatten,
    format_int_tuple,
    idx2crd,
    is_tuple,
    mul,
    product_each,
    unflatten,
)
from argus.layout_algebra.layout import Layout, make_layout

__all__ = [
    "ModeCoordinate",
    "ThreadValueLayout",
    "Tile",
    "local_partition",
    "local_tile",
    "make_layout_tv",
]


@dataclass(frozen=True)
class ModeCoordinate:
    """Where one mode of the original layout is, as a function of a tile's coordinates.

    The original (1-D, column-major within the mode) coordinate is
    ``origin + sum(part(index of tile mode position) for position, part in parts)``; it is in
    range when it is below ``extent``.
    """

    extent: Any
    origin: Any
    parts: tuple[tuple[int, Layout], ...]
    exact: bool = False  # the tiling is known to cover the extent with no partial tile


def _mode(extent: Any, origin: Any, parts: list, tile_size: Any, tiles: Layout) -> ModeCoordinate:
    exact = decide_equal(mul(tile_size, tiles.size), extent) is True
    return ModeCoordinate(extent, symbolic.normalize(origin), tuple(parts), exact)


def _untiled(extent: Any, position: int) -> ModeCoordinate:
    return ModeCoordinate(extent, 0, ((position, Layout(extent)),), True)


@dataclass(frozen=True)
class Tile:
    """A selected part of a layout: ``offset + layout(c)`` is the original offset of ``c``.

    ``modes[k]`` maps the tile's coordinates to the coordinate of original mode ``k``, which
    gives :meth:`global_coord` and the bounds :meth:`predicate` of partial tiles.
    """

    layout: Layout
    offset: Any
    modes: tuple[ModeCoordinate, ...]

    def __call__(self, *coord: Any) -> Any:
        """The offset in the original layout: ``offset + layout(coord)``."""
        return symbolic.normalize(add(self.offset, self.layout(*coord)))

    def _mode_indices(self, coord: tuple) -> tuple:
        """The 1-D index of ``coord`` in each top-level mode of the tile's layout."""
        c = coord[0] if len(coord) == 1 else tuple(coord)
        shape = self.layout.shape
        positions = 1 + max((p for mode in self.modes for p, _ in mode.parts), default=0)
        if positions == 1:  # the whole layout is the tile's single mode
            return (crd2idx(c, shape, operation="Tile coordinate"),)
        if not is_tuple(c):
            c = idx2crd(c, shape)
        if len(c) != len(shape):
            raise LayoutError(
                f"Tile coordinate {format_int_tuple(c)} does not match the rank of {self.layout}"
            )
        return tuple(crd2idx(ci, si, operation="Tile coordinate") for ci, si in zip(c, shape))

    def global_coord(self, *coord: Any) -> tuple:
        """The coordinate in the original layout (one 1-D index per original mode)."""
        indices = self._mode_indices(coord)
        result = []
        for mode in self.modes:
            value = mode.origin
            for position, part in mode.parts:
                value = add(value, part.extended(indices[position]))
            result.append(symbolic.normalize(value))
        return tuple(result)

    def bounds(self, *coord: Any) -> tuple[tuple[Any, Any], ...]:
        """``(coordinate, extent)`` per original mode; in range iff each coordinate < extent."""
        return tuple(zip(self.global_coord(*coord), (m.extent for m in self.modes)))

    def predicate(self, *coord: Any) -> Any:
        """Is element ``coord`` inside the original extents?

        A Python bool when everything is static, else a sympy boolean.  For foreign terms use
        :meth:`bounds` and compare in the term language.
        """
        conditions = []
        for value, extent in self.bounds(*coord):
            if (
                symbolic.static_value(value) is not None
                and symbolic.static_value(extent) is not None
            ):
                if not symbolic.static_value(value) < symbolic.static_value(extent):
                    return False
                continue
            conditions.append(sympy.Lt(symbolic.to_sympy(value), symbolic.to_sympy(extent)))
        if not conditions:
            return True
        return sympy.And(*conditions)

    @property
    def needs_predicate(self) -> bool:
        """False only when every element of every tile is known to be in range."""
        return not all(mode.exact for mode in self.modes)


def _check_by_mode_tiler(operation: str, layout: Layout, tiler: Any) -> tuple:
    if not isinstance(tiler, tuple):
        tiler = (tiler,)
    if len(tiler) > layout.rank:
        raise LayoutError(
            f"{operation}: tiler {format_int_tuple(tiler)} has more modes than {layout}"
        )
    for t in tiler:
        if t is None or isinstance(t, tuple):
            raise LayoutError(
                f"{operation}: each tiler mode must be an int or a layout, not {t!r}",
                hint="tile every mode (use the mode's full size to keep it whole)",
            )
    return tuple(t if isinstance(t, Layout) else Layout(t) for t in tiler)


def local_tile(layout: Layout, tiler: Any, coord: Any) -> Tile:
    """The tile at tile-coordinate ``coord`` of ``layout`` divided by mode by ``tiler``.

    ``tiler[k]`` (an int ``n`` meaning ``n:1``, or a layout ``B_k``) tiles mode ``k``, whose
    tiles are enumerated by ``C_k = complement(B_k, size(mode k))`` (ceil-divided).
    ``coord[k]`` picks a tile of mode ``k`` (int-like), or is ``None`` to keep all of them.

    Post-condition: the result's layout has modes ``(tile_0, ..., tile_r-1, kept rests...,
    untiled modes...)`` and ``tile(t_0, ..., r_k, ...) == layout`` at original mode coordinates
    ``B_k(t_k) + C_k(coord[k] or r_k)`` (the extended layout where a tile is partial);
    ``tile.predicate`` is true exactly where those coordinates are below the extents.
    Example: ``local_tile((M,N):(1,M), (128,64), (bm, bn))`` is ``(128,64):(1,M)`` at offset
    ``128*bm + 64*M*bn``.
    """
    tilers = _check_by_mode_tiler("local_tile", layout, tiler)
    if not isinstance(coord, tuple):
        coord = (coord,)
    if len(coord) != len(tilers):
        raise LayoutError(
            f"local_tile: tile coordinate {format_int_tuple(coord)} needs one entry per tiler "
            f"mode ({len(tilers)})"
        )
    modes = layout.modes
    tile_modes: list[Layout] = []
    rest_modes: list[Layout] = []
    offset: Any = 0
    plans = []
    for k, (mode, b) in enumerate(zip(modes, tilers)):
        c = complement(b, mode.size)
        divided = logical_divide(mode, b)
        tile_modes.append(divided[0])
        if coord[k] is None:
            rest_modes.append(divided[1])
            plans.append((b, c, 0, len(rest_modes) - 1))
        else:
            offset = add(offset, divided[1](coord[k]))
            plans.append((b, c, c(coord[k]), None))
    r = len(tilers)
    untiled = list(modes[r:])
    all_modes = tile_modes + rest_modes + untiled
    coordinates = []
    for k, (b, c, origin, rest_position) in enumerate(plans):
        parts = [(k, b)]
        if rest_position is not None:
            parts.append((r + rest_position, c))
        coordinates.append(_mode(modes[k].size, origin, parts, b.size, c))
    for j, mode in enumerate(untiled):
        coordinates.append(_untiled(mode.size, r + len(rest_modes) + j))
    result = all_modes[0] if len(all_modes) == 1 and layout.rank == 1 else make_layout(*all_modes)
    return Tile(result, symbolic.normalize(offset), tuple(coordinates))


def _thread_coordinate(thread_layout: Layout, thread: Any, operation: str) -> tuple:
    """Per top-level mode of ``thread_layout``, the 1-D coordinate whose value is ``thread``."""
    inverse = right_inverse(thread_layout)
    if decide_equal(inverse.size, thread_layout.size) is not True:
        raise LayoutError(
            f"{operation}: thread layout {thread_layout} is not a bijection onto "
            f"[0, {thread_layout.size})",
            hint="use a compact thread layout (every thread index appears exactly once)",
        )
    index, count = symbolic.static_value(thread), symbolic.static_value(thread_layout.size)
    if index is not None and (index < 0 or (count is not None and index >= count)):
        raise LayoutError(f"{operation}: thread {thread} is out of range [0, {thread_layout.size})")
    leaves = []
    for s, d in zip(flatten(thread_layout.shape), flatten(thread_layout.stride)):
        if decide_equal(s, 1) is True:
            leaves.append(0)
        else:
            leaves.append(symbolic.mod(symbolic.floordiv(thread, d), s))
    natural = unflatten(tuple(leaves), thread_layout.shape)
    if not is_tuple(thread_layout.shape):
        return (natural,)
    return tuple(
        symbolic.normalize(crd2idx(c, s, check=False)) for c, s in zip(natural, thread_layout.shape)
    )


def local_partition(layout: Layout, thread_layout: Layout, thread: Any) -> Tile:
    """The elements of ``layout`` that thread ``thread`` owns when ``thread_layout`` is tiled over it.

    ``thread_layout`` (a bijection onto ``[0, T)``) tiles ``layout`` by mode with tile extents
    ``product_each(shape(thread_layout))``; the thread at coordinate ``c`` of the thread layout
    (``thread_layout(c) == thread``) takes element ``c_k`` of every tile along each mode.

    Post-condition: the result's layout has one mode per tile mode ``k`` (the tiles,
    ``C_k = complement(T_k:1, size(mode k))``) followed by the untiled modes, and
    ``tile(r_0, r_1, ...) == layout`` at original coordinates ``c_k + C_k(r_k)``;
    ``tile.predicate`` marks the elements past the extents of partial tiles.
    Example: ``local_partition((8,8), (2,4):(4,1), 5)`` is ``(4,2):(2,32)`` at offset ``9``.
    """
    extents = product_each(thread_layout.shape)
    if thread_layout.rank > layout.rank:
        raise LayoutError(
            f"local_partition: thread layout {thread_layout} has more modes than {layout}"
        )
    c_thread = _thread_coordinate(thread_layout, thread, "local_partition")
    modes = layout.modes
    rests: list[Layout] = []
    coordinates = []
    offset: Any = 0
    for k, (mode, t) in enumerate(zip(modes, extents)):
        divided = logical_divide(mode, Layout(t))
        offset = add(offset, divided[0](c_thread[k]))
        rests.append(divided[1])
        tiles = complement(Layout(t), mode.size)
        coordinates.append(_mode(mode.size, c_thread[k], [(k, tiles)], t, tiles))
    r = len(extents)
    for j, mode in enumerate(modes[r:]):
        rests.append(mode)
        coordinates.append(_untiled(mode.size, r + j))
    result = rests[0] if layout.rank == 1 else make_layout(*rests)
    return Tile(result, symbolic.normalize(offset), tuple(coordinates))


# --------------------------------------------------------------------------- thread-value layouts


@dataclass(frozen=True)
class ThreadValueLayout:
    """``layout``: (thread, value) -> column-major index in a tile of extents ``tiler``.

    ``tile_coord(t, v)`` is the natural coordinate in the tile.  :meth:`apply` distributes any
    layout the tile is tiled over; :meth:`partition` gives one thread's elements.
    """

    layout: Layout
    tiler: tuple

    @property
    def threads(self) -> Any:
        """Number of threads (size of the thread mode)."""
        return self.layout[0].size

    @property
    def values(self) -> Any:
        """Number of values per thread (size of the value mode)."""
        return self.layout[1].size

    def __call__(self, thread: Any, value: Any) -> Any:
        """Column-major index in the tile of value ``value`` of thread ``thread``."""
        return self.layout(thread, value)

    def tile_coord(self, thread: Any, value: Any) -> tuple:
        """Natural coordinate in the tile of value ``value`` of thread ``thread``."""
        return idx2crd(self.layout(thread, value), self.tiler)

    def apply(self, layout: Layout) -> Layout:
        """``((thread, value), rest...)`` -> offsets of ``layout`` tiled by ``tiler``.

        Post-condition: ``R((t, v), r) == Z(tile_index(t, v), r)`` with
        ``Z = zipped_divide(layout, tiler)``.
        """
        zipped = zipped_divide(layout, self.tiler)
        return make_layout(composition(zipped[0], self.layout), zipped[1])

    def partition(self, layout: Layout, thread: Any) -> Tile:
        """Thread ``thread``'s elements of ``layout``: modes ``(value, rest_0, rest_1, ...)``.

        Post-condition: ``tile(v, r_0, ...) == layout`` at original coordinates
        ``tile_coord(thread, v)[k] + C_k(r_k)`` (tiles enumerated by ``C_k``), with
        ``tile.predicate`` for partial tiles.
        """
        if len(self.tiler) > layout.rank:
            raise LayoutError(
                f"ThreadValueLayout.partition: tiler {format_int_tuple(self.tiler)} has more "
                f"modes than {layout}"
            )
        distributed = self.apply(layout)
        values, offset = distributed[0].slice((thread, None))
        rest = distributed[1]
        modes = layout.modes
        r = len(self.tiler)
        coordinates = []
        for k, mode in enumerate(modes):
            if k >= r:
                coordinates.append(_untiled(mode.size, 1 + k))
                continue
            selector = Layout(self.tiler, tuple(1 if j == k else 0 for j in range(r)))
            within, origin = composition(selector, self.layout).slice((thread, None))
            tiles = complement(Layout(self.tiler[k]), mode.size)
            coordinates.append(
                _mode(mode.size, origin, [(0, within), (1 + k, tiles)], self.tiler[k], tiles)
            )
        result = make_layout(values, *rest.modes)
        return Tile(result, symbolic.normalize(offset), tuple(coordinates))


def make_layout_tv(thread_layout: Layout, value_layout: Layout) -> ThreadValueLayout:
    """Threads arranged by ``thread_layout``, each owning a ``value_layout`` block.

    The tile is ``raked_product(thread_layout, value_layout)`` (tile mode ``k`` is
    ``(value_k, thread_k)``: the block of a thread is contiguous along each mode); its extents
    are the tiler.  Post-condition, with ``T = size(thread_layout)``, ``V = size(value_layout)``
    and both layouts bijections onto ``[0, T)`` and ``[0, V)``: the value ``value_layout(v)``
    of thread ``thread_layout(t)`` sits at tile coordinate
    ``(v_k + shape(value)_k * t_k)_k`` (``t``, ``v`` natural coordinates), and the result is a
    bijection from ``(T, V)`` onto the tile.  Example: threads ``(32,8):(8,1)`` with values
    ``(4,1)`` give a ``(128,8)`` tile in which thread 1 owns rows 0-3 of column 1.
    """
    for name, layout in (("thread", thread_layout), ("value", value_layout)):
        if decide_equal(right_inverse(layout).size, layout.size) is not True:
            raise LayoutError(
                f"make_layout_tv: the {name} layout {layout} is not a bijection onto "
                f"[0, {layout.size})",
                hint="thread ids and value ids must each appear exactly once",
            )
    tile = raked_product(thread_layout, value_layout)
    tiler = product_each(tile.shape)
    inverse = right_inverse(tile)
    if decide_equal(inverse.size, tile.size) is not True:
        raise LayoutError(
            f"make_layout_tv: threads {thread_layout} and values {value_layout} do not cover "
            f"their tile {format_int_tuple(tiler)} one to one",
            hint="use compact thread and value layouts (bijections onto [0, size))",
        )
    tv = composition(inverse, Layout((thread_layout.size, value_layout.size)))
    return ThreadValueLayout(tv, tuple(tiler))
