"""Tensors of the DSL: a memory space, an element type and a layout over a buffer.

A :class:`Tensor` is a trace-time handle on an IR :class:`~argus.ir.nodes.View`.  Tiles,
slices and per-thread partitions are computed with the layout algebra while tracing: they
emit no operation, they only make a new view.  Every view remembers, per element, the
coordinate of the logical tensor it came from (``coords``) and whether the element exists
(``valid``, for partial tiles at the edges of a symbolic extent), so tags, predicates and
bounds checks are all stated in the user's coordinates.

Coordinates of a view are one 1-D index per top-level mode, written with the canonical
symbols :data:`COORDS` (``c0``, ``c1``, ...).
"""

from __future__ import annotations

from typing import Any

import sympy

from argus import symbolic
from argus.ir import nodes as N
from argus.layout_algebra import Layout
from argus.spec import builder as B

COORDS = N.COORDS


def _and(*preds: Any) -> Any:
    parts = [p for p in preds if p is not None and p is not True and p is not sympy.true]
    if not parts:
        return None
    result = sympy.And(*parts)
    return None if result is sympy.true else result


def _substitute(expr: Any, mapping: dict[sympy.Symbol, Any]) -> Any:
    if expr is None or not isinstance(expr, sympy.Basic) or not mapping:
        return expr
    return symbolic.normalize(expr.xreplace({k: symbolic.to_sympy(v) for k, v in mapping.items()}))


def _mode_layout(layout: Layout, d: int) -> Layout:
    shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    stride = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    return Layout(shape[d], stride[d])


def _modes(layout: Layout) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    stride = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    return shape, stride


def as_index(value: Any, what: str) -> Any:
    """An index expression from an int, a sympy integer expression, or a 0-d index tensor."""
    value = getattr(value, "argus_index", value)  # a pipeline stage handle indexes by its slot
    if isinstance(value, bool):
        raise B.error(f"{what}: a bool is not an index")
    if isinstance(value, int):
        return value
    if isinstance(value, sympy.Expr) and (value.is_integer or value.is_integer is None):
        return symbolic.normalize(value)
    raise B.error(
        f"{what}: expected an integer index expression, got {type(value).__name__}",
        hint="indices are built from thread_id(), block_id(), loop counters and sizes",
    )


class Tensor:
    """A view of a buffer: ``buffer[offset + layout(c)]`` for coordinates ``c``."""

    __array_priority__ = 1000  # keep numpy from broadcasting over us

    def __init__(self, view: N.View) -> None:
        self.view = view

    # ---------------------------------------------------------------- structure

    @property
    def layout(self) -> Layout:
        return self.view.layout

    @property
    def dtype(self) -> Any:
        return self.view.buffer.dtype

    @property
    def space(self) -> N.MemorySpace:
        """``dsmem`` for a peer block's shared memory (:func:`argus.spec.mapa`)."""
        return self.view.space

    @property
    def shape(self) -> tuple[Any, ...]:
        """Extent of each top-level mode."""
        shape, _ = _modes(self.layout)
        return tuple(symbolic.normalize(Layout(s).size) for s in shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> Any:
        return self.layout.size

    def __repr__(self) -> str:
        return f"Tensor({self.space.value} {self.dtype} %{self.view.buffer.name}[{self.view.offset} + {self.layout}])"

    def __bool__(self) -> bool:
        raise B.error(
            "a tensor has no truth value",
            hint="use argus.spec.select(...) or compare element tensors explicitly",
        )

    # ---------------------------------------------------------------- views

    def _derive(self, layout: Layout, offset: Any, coords: tuple[Any, ...] | None, valid: Any) -> Tensor:
        return Tensor(
            N.View(
                buffer=self.view.buffer,
                layout=layout,
                offset=symbolic.normalize(offset),
                coord_symbols=COORDS[: len(_modes(layout)[0])],
                coords=coords,
                valid=valid,
                swizzle=self.view.swizzle,
                rank=self.view.rank,
            )
        )

    def _logical_coords(self) -> tuple[Any, ...]:
        if self.view.coords is not None:
            return self.view.coords
        return COORDS[: self.rank]

    def tile(self, tile_shape: tuple[Any, ...], tile_coord: tuple[Any, ...]) -> Tensor:
        """The tile number ``tile_coord`` of shape ``tile_shape`` (one entry per mode).

        Tile ``t`` of mode ``d`` covers coordinates ``t*T_d .. t*T_d + T_d - 1``.  Elements past
        the end of a mode (a partial tile) are invalid: the result's validity predicate is
        ``t*T_d + c_d < extent_d`` for each mode whose extent the tile size does not divide
        statically — never an assumed divisibility.
        """
        tile_shape = tuple(tile_shape) if isinstance(tile_shape, (tuple, list)) else (tile_shape,)
        tile_coord = tuple(tile_coord) if isinstance(tile_coord, (tuple, list)) else (tile_coord,)
        if len(tile_shape) != self.rank or len(tile_coord) != self.rank:
            raise B.error(
                f"tile: tensor has {self.rank} modes but the tile shape has {len(tile_shape)} "
                f"and the tile coordinate {len(tile_coord)}",
                hint="give one tile size and one tile index per mode",
            )
        _shape, stride = _modes(self.layout)
        new_shape, new_stride, offset = [], [], self.view.offset
        substitution: dict[sympy.Symbol, Any] = {}
        bounds = []
        for d, (extent, t_size, t_idx) in enumerate(zip(self.shape, tile_shape, tile_coord)):
            t_size = as_index(t_size, "tile size")
            t_idx = as_index(t_idx, "tile index")
            if symbolic.static_value(t_size) is None or symbolic.static_value(t_size) <= 0:
                raise B.error(f"tile: tile size of mode {d} must be a positive constant, got {t_size}")
            if isinstance(stride[d], tuple):
                raise B.error(f"tile: mode {d} is hierarchical; tile a flat tensor instead")
            start = t_idx * t_size
            offset = offset + start * stride[d]
            substitution[COORDS[d]] = start + COORDS[d]
            new_shape.append(t_size)
            new_stride.append(stride[d])
            first, ext = symbolic.static_value(start), symbolic.static_value(extent)
            if not (first is not None and ext is not None and first + t_size <= ext):
                bounds.append(sympy.Lt(start + COORDS[d], extent))
        coords = tuple(_substitute(c, substitution) for c in self._logical_coords())
        valid = _and(_substitute(self.view.valid, substitution), *bounds)
        return self._derive(Layout(tuple(new_shape), tuple(new_stride)), offset, coords, valid)

    def __getitem__(self, key: Any) -> Tensor:
        """Fix some modes at an index (ints or index expressions); ``:`` keeps a mode."""
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > self.rank:
            raise B.error(f"index: tensor has {self.rank} modes, got {len(key)} indices")
        key = key + (slice(None),) * (self.rank - len(key))
        shape, stride = _modes(self.layout)
        kept_shape, kept_stride, offset = [], [], self.view.offset
        substitution: dict[sympy.Symbol, Any] = {}
        bounds = []
        for d, k in enumerate(key):
            if isinstance(k, slice):
                if k != slice(None):
                    raise B.error("index: only ':' slices are supported; use tile() for ranges")
                substitution[COORDS[d]] = COORDS[len(kept_shape)]
                kept_shape.append(shape[d])
                kept_stride.append(stride[d])
                continue
            idx = as_index(k, "index")
            offset = offset + _mode_layout(self.layout, d)(idx)
            substitution[COORDS[d]] = idx
            iv, ev = symbolic.static_value(idx), symbolic.static_value(self.shape[d])
            if iv is not None and ev is not None and not 0 <= iv < ev:
                raise B.error(f"index: {iv} is out of range for mode {d} of extent {ev}")
        coords = tuple(_substitute(c, substitution) for c in self._logical_coords())
        valid = _and(_substitute(self.view.valid, substitution), *bounds)
        layout = Layout(tuple(kept_shape), tuple(kept_stride)) if kept_shape else Layout(1, 0)
        return self._derive(layout, offset, coords, valid)

    def permute(self, *modes: Any) -> Tensor:
        """The same elements with the modes reordered or grouped (a view; no data moves).

        Entry ``j`` names the mode of this tensor that becomes mode ``j``, or a tuple of modes
        that become mode ``j`` together, the first one fastest (column-major, the CuTe order);
        every mode is named exactly once.  Post-condition: for ``t = x.permute(*modes)``,
        element ``c`` of ``t`` is element ``x_c`` of ``x`` where mode ``d`` of ``x`` named
        alone at position ``j`` takes ``x_c[d] = c[j]``, and the modes ``(d0, d1, ...)`` of a
        group at position ``j`` take the digits of ``c[j]`` in the radix of their extents
        (``x_c[d0] = c[j] % e0``, ``x_c[d1] = (c[j] // e0) % e1``, ...):

        ==================================  ===============  ===================================
        ``x`` (shape)                       ``permute``      element ``c`` of the result
        ==================================  ===============  ===================================
        ``(K, N)``                          ``(1, 0)``       ``x[c1, c0]`` (shape ``(N, K)``)
        ``(C, K, 64)``                      ``((2, 0), 1)``  ``x[c0 // 64, c1, c0 % 64]``
                                                             (shape ``(64 C, K)``)
        ==================================  ===============  ===================================

        The second row is how an MN-major wgmma operand is written: ``C`` TMA boxes of
        ``K x 64`` (64 MN-contiguous elements each) seen as one ``MN x K`` tile.
        """
        rank = self.rank
        entries = [tuple(m) if isinstance(m, (tuple, list)) else (m,) for m in modes]
        named = [d for group in entries for d in group]
        if any(not isinstance(d, int) or isinstance(d, bool) for d in named) \
                or sorted(named) != list(range(rank)) or any(not group for group in entries):
            raise B.error(f"permute: {modes!r} must name each of the {rank} modes 0..{rank - 1} exactly once",
                          hint="e.g. x.permute(1, 0) swaps the two modes of a matrix; a tuple groups modes")
        shape, stride = _modes(self.layout)
        extents = self.shape
        new_shape, new_stride = [], []
        substitution: dict[sympy.Symbol, Any] = {}
        for j, group in enumerate(entries):
            if len(group) == 1:
                (d,) = group
                new_shape.append(shape[d])
                new_stride.append(stride[d])
                substitution[COORDS[d]] = COORDS[j]
                continue
            scale = 1
            for position, d in enumerate(group):
                extent = symbolic.static_value(extents[d])
                if extent is None:
                    raise B.error(f"permute: mode {d} of a group has the symbolic extent {extents[d]}",
                                  hint="group modes of constant extent (tiles of shared memory or registers)")
                digit = COORDS[j] if scale == 1 else symbolic.floordiv(COORDS[j], scale)
                substitution[COORDS[d]] = digit if position == len(group) - 1 else symbolic.mod(digit, extent)
                scale *= extent
            new_shape.append(tuple(shape[d] for d in group))
            new_stride.append(tuple(stride[d] for d in group))
        coords = tuple(_substitute(c, substitution) for c in self._logical_coords())
        valid = _substitute(self.view.valid, substitution)
        return self._derive(Layout(tuple(new_shape), tuple(new_stride)), self.view.offset, coords, valid)

    @property
    def T(self) -> Tensor:  # the numpy / torch name
        """The transpose of a two-mode tensor (``permute(1, 0)``)."""
        if self.rank != 2:
            raise B.error(f"T: the tensor has {self.rank} modes; transpose a matrix",
                          hint="use permute(...) to reorder the modes of other tensors")
        return self.permute(1, 0)

    def partition(self, tv: Any, thread: Any) -> Tensor:
        """Thread ``thread``'s elements of this tile under a thread-value layout.

        ``tv`` maps ``(thread, value)`` to the column-major index of an element in this tile
        (the CuTe convention of the atoms in :mod:`argus.layout_algebra.atoms`).  The result has
        one mode, the values of that thread, in the order of ``tv``'s value mode; its
        coordinates and validity are those of the tile elements it selects.

        Post-condition: element ``v`` of the result is element ``idx2crd(tv(thread, v), shape)``
        of this tile.
        """
        from argus.layout_algebra import LayoutError, composition, idx2crd

        tv_layout = getattr(tv, "layout", tv)
        if not isinstance(tv_layout, Layout) or len(_modes(tv_layout)[0]) != 2:
            raise B.error("partition: expects a (thread, value) layout with two modes")
        tile_size = self.layout.size
        if symbolic.static_value(tv_layout.cosize) is not None and symbolic.static_value(tile_size) is not None \
                and tv_layout.cosize > tile_size:
            raise B.error(f"partition: the thread-value layout covers {tv_layout.cosize} elements, "
                          f"the tile has only {tile_size}")
        try:
            per_element = composition(self.layout, tv_layout)
        except LayoutError as err:
            raise B.error(f"partition: this tile's layout cannot be composed with the thread-value "
                          f"layout: {err.message}", hint="partition a compact tile (e.g. a shared or register tile)") from None
        thread = as_index(thread, "partition thread")
        thread_part, value_part = per_element[0], per_element[1]
        offset = self.view.offset + thread_part(thread)
        index = tv_layout(thread, 0) + Layout(tv_layout.shape[1], tv_layout.stride[1])(COORDS[0])
        tile_coord = idx2crd(index, self.shape)
        tile_coord = tile_coord if isinstance(tile_coord, tuple) else (tile_coord,)
        substitution = {COORDS[d]: c for d, c in enumerate(tile_coord)}
        coords = tuple(_substitute(c, substitution) for c in self._logical_coords())
        valid = _substitute(self.view.valid, substitution)
        layout = Layout((value_part.shape,), (value_part.stride,))
        return self._derive(layout, offset, coords, valid)

    # ---------------------------------------------------------------- register math

    def _binary(self, other: Any, fn: str, reverse: bool = False) -> Tensor:
        from argus.spec import ops

        return ops.elementwise(fn, other, self) if reverse else ops.elementwise(fn, self, other)

    def __add__(self, other: Any) -> Tensor:
        return self._binary(other, "add")

    def __radd__(self, other: Any) -> Tensor:
        return self._binary(other, "add", reverse=True)

    def __sub__(self, other: Any) -> Tensor:
        return self._binary(other, "sub")

    def __rsub__(self, other: Any) -> Tensor:
        return self._binary(other, "sub", reverse=True)

    def __mul__(self, other: Any) -> Tensor:
        return self._binary(other, "mul")

    def __rmul__(self, other: Any) -> Tensor:
        return self._binary(other, "mul", reverse=True)

    def __truediv__(self, other: Any) -> Tensor:
        return self._binary(other, "div")

    def __rtruediv__(self, other: Any) -> Tensor:
        return self._binary(other, "div", reverse=True)

    def __neg__(self) -> Tensor:
        return self._binary(-1, "mul")

    def to(self, dtype: Any) -> Tensor:
        """A register copy of this tensor converted to ``dtype`` (round to nearest even)."""
        from argus.spec import ops

        return ops.convert(self, dtype)
