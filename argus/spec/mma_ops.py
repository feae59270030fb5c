"""Matrix and collective operations of the DSL: MMA atoms, their fragments, shuffles,
cross-lane reductions, broadcasting and atomics.

An MMA atom (``"mma.sync.m16n8k16.bf16"``, ``"wgmma.m64n128k16.bf16"``,
``"v_mfma_f32_32x32x8_bf16"``..., see :mod:`argus.ir.atoms`) is executed by a warp, a
warpgroup or a wavefront together.  Its register operands are per-thread *fragments*: a
thread's fragment of operand ``x`` holds the values ``v`` of the atom's TV layout
``tv_x(thread, v)``, in the order of the fragment's column-major coordinate index.  The
helpers build such fragments:

==========================================  ==================================================
``mma_fragment(atom, "c", (MI, NI))``       registers for MI×NI accumulator tiles:
                                            shape ``(MI, NI, *value_shape)``, zero-filled
``mma_partition(atom, "a", smem_tile)``     this thread's elements of an operand tile (a view
                                            of the tile, shaped like a fragment): ``load`` it
``mma(atom, a, b, acc)``                    ``acc += a·b`` through the atom; returns ``acc``
``retile(acc, atom, atom2, "a", dtype=..)`` accumulator fragments of one GEMM as the operand
                                            fragments of the next (flash attention)
``ldmatrix(smem_tile, trans=)``             a warp loads 1, 2 or 4 8x8 matrices of a shared
                                            tile into the lanes' fragments (``ldmatrix``)
``stmatrix(fragment, smem_tile, trans=)``   the inverse (``stmatrix``, sm_90)
==========================================  ==================================================

``ldmatrix`` of a 16 x 16 tile fills exactly the ``mma.sync.m16n8k16`` A fragment, and of an
8 x 16 tile (N x K) the B fragment, so ``mma(atom, ldmatrix(sa_tile), ldmatrix(sb_tile), acc)``
computes the same as loading ``mma_partition`` views (with one 16-byte access per matrix row).

``value_shape`` is the shape of the atom's value mode: for ``mma.sync.m16n8k16`` the
accumulator's is ``(2, 2)`` = (column pair, row half), so a row reduction of an accumulator
fragment ``(MI, NI, 2, 2)`` reduces modes 1 and 2 and then across the 4 lanes of a row
(``across_lanes=(1, 2)``).
"""

from __future__ import annotations

import builtins
from typing import Any

import sympy

from argus import symbolic
from argus.ir import nodes as N
from argus.ir.atoms import AtomError, MmaAtomSpec
from argus.ir.atoms import mma_atom as _lookup
from argus.layout_algebra import Layout
from argus.layout_algebra.int_tuple import flatten
from argus.spec import builder as B
from argus.spec import ops
from argus.spec.tensor import COORDS, Tensor, as_index

__all__ = [
    "atomic_add", "broadcast", "ldmatrix", "mma", "mma_atom", "mma_fragment", "mma_partition", "reduce",
    "retile", "shuffle", "stmatrix", "warp_reduce",
]

_OPERANDS = ("a", "b", "c")


def mma_atom(atom: str | MmaAtomSpec) -> MmaAtomSpec:
    """The registry entry of an MMA atom (an :class:`argus.ir.atoms.MmaAtomSpec`)."""
    try:
        return _lookup(atom)
    except AtomError as err:
        raise B.error(err.message, hint=err.hint) from None


def value_shape(atom: str | MmaAtomSpec, which: str) -> tuple[int, ...]:
    """The flat shape of the value mode of operand ``which``'s TV layout."""
    spec = mma_atom(atom)
    layout = spec.layouts.operand(which)
    if layout is None:
        raise B.error(f"{spec.name}: operand {which} is read from shared memory and has no register fragment",
                      hint="pass a shared-memory tile of shape " + str(spec.tile(which)) + " to mma() instead")
    shape = layout.shape[1]
    return tuple(int(s) for s in flatten(shape)) if isinstance(shape, tuple) else (int(shape),)


def _check_which(which: str) -> None:
    if which not in _OPERANDS:
        raise B.error(f"operand {which!r} is not one of 'a', 'b', 'c'", hint="the accumulator is 'c'")


def mma_fragment(atom: str | MmaAtomSpec, which: str, tiles: tuple[int, ...] = (), *,
                 fill: float | None = None, dtype: Any = None) -> Tensor:
    """Registers for ``tiles`` fragments of operand ``which``: shape ``(*tiles, *value_shape)``.

    The element type is the atom's operand type (``dtype`` overrides it for staging).  The
    accumulator (``"c"``) is zero-filled unless ``fill`` says otherwise; ``a``/``b`` are
    uninitialized unless ``fill`` is given.
    """
    _check_which(which)
    spec = mma_atom(atom)
    tiles = (tiles,) if isinstance(tiles, int) else tuple(tiles)
    shape = tiles + value_shape(spec, which)
    t = ops.fragment(shape, dtype or spec.dtype(which))
    if fill is None and which == "c":
        fill = 0
    if fill is not None:
        builder = B.current()
        builder.emit(N.Fill(dst=t.view, value=fill, loc=builder.position()))
    return t


def _split_single_mode(t: Tensor) -> Tensor:
    """A one-mode tensor whose mode is hierarchical, as one flat mode per leaf (same elements).

    Post-condition: element ``(c0, c1, ...)`` of the result is element ``c0 + s0*c1 + ...`` of ``t``
    (column-major), so a fragment's value index is unchanged.
    """
    layout = t.layout
    shape = layout.shape[0] if isinstance(layout.shape, tuple) else layout.shape
    stride = layout.stride[0] if isinstance(layout.stride, tuple) else layout.stride
    shapes = flatten(shape) if isinstance(shape, tuple) else (shape,)
    strides = flatten(stride) if isinstance(stride, tuple) else (stride,)
    linear, scale = sympy.Integer(0), 1
    for d, s in enumerate(shapes):
        linear += COORDS[d] * scale
        scale *= int(s)
    substitution = {COORDS[0]: linear}
    coords = t.view.coords if t.view.coords is not None else (COORDS[0],)
    coords = tuple(symbolic.normalize(sympy.sympify(c).xreplace(substitution)) for c in coords)
    valid = t.view.valid
    if valid is not None:
        valid = valid.xreplace(substitution)
    view = N.View(t.view.buffer, Layout(tuple(shapes), tuple(strides)), t.view.offset, COORDS[:len(shapes)],
                  coords, valid, t.view.swizzle)
    return Tensor(view)


def mma_partition(atom: str | MmaAtomSpec, which: str, tile: Tensor, thread: Any = None) -> Tensor:
    """This thread's fragment of operand tile ``tile`` (a view: ``load`` or ``copy`` it).

    ``tile`` has the operand's tile shape: ``(M, K)`` for ``a``, ``(N, K)`` for ``b`` (B viewed
    N×K), ``(M, N)`` for ``c``.  ``thread`` is the thread's index in the atom's group; it
    defaults to ``thread_id() % atom_threads``.  The result has shape ``value_shape`` and its
    element ``v`` (column-major) is the tile element ``tv(thread, v)``.
    """
    _check_which(which)
    spec = mma_atom(atom)
    want = spec.tile(which)
    if tuple(symbolic.static_value(s) for s in tile.shape) != want:
        raise B.error(f"mma_partition: operand {which} of {spec.name} is a {want[0]}x{want[1]} tile, "
                      f"got shape {tile.shape}", hint=f"take tile.tile({want}, (i, j)) first")
    value_shape(spec, which)  # shared-memory operands have no partition
    if thread is None:
        thread = symbolic.mod(ops.thread_id(), spec.threads)
    part = tile.partition(spec.layouts.operand(which), thread)
    return _split_single_mode(part)


def _fragment_size(t: Tensor) -> int | None:
    return symbolic.static_value(t.size)


def mma(atom: str | MmaAtomSpec, a: Tensor, b: Tensor, acc: Tensor, *,
        k_fields: tuple[int, int] | None = None) -> Tensor:
    """``acc = a·b + acc`` through ``atom``, executed by the atom's whole warp / warpgroup /
    wavefront together; returns ``acc`` (updated in place).

    Register operands are this thread's fragments (``mma_fragment`` / ``mma_partition``):
    register tensors of the operand's element type with the atom's number of values per
    thread.  wgmma reads B — and A in the ``.ss`` form — from shared memory: pass the
    ``(M, K)`` / ``(N, K)`` shared tile.  The reference semantics is exact (fp32
    accumulation); tags: A and B elements must agree on ``k`` (their last tag field) and each
    result element gets ``A.row + B.col`` (see :mod:`argus.ir.interp_mma`).  ``k_fields =
    (i, j)`` names tag field ``i`` of A and ``j`` of B as k instead (e.g. ``(-1, 0)`` when B is a
    transposed accumulator tagged ``(k, col)``).
    """
    spec = mma_atom(atom)
    builder = B.current()
    if builder.threads % spec.threads:
        raise B.error(f"{spec.name} is executed by {spec.threads} threads together ({spec.scope.value}); "
                      f"the kernel has {builder.threads} threads", hint=f"use a multiple of {spec.threads} threads")
    for which, t in (("a", a), ("b", b), ("c", acc)):
        _check_operand(spec, which, t)
    if k_fields is not None:
        if not (isinstance(k_fields, tuple) and len(k_fields) == 2 and all(isinstance(f, int) for f in k_fields)):
            raise B.error(f"mma: k_fields={k_fields!r} must be a pair of tag field indices (A's, B's)",
                          hint="e.g. k_fields=(-1, 0): the last field of A's tags, the first of B's")
        k_fields = None if k_fields == (-1, -1) else k_fields
    builder.emit(N.Mma(atom=spec.name, a=a.view, b=b.view, c=acc.view, d=acc.view, k_fields=k_fields,
                       scope=spec.scope.ir_scope, loc=builder.position()))
    return acc


def _check_operand(spec: MmaAtomSpec, which: str, t: Any) -> None:
    role = {"a": "A", "b": "B", "c": "the accumulator"}[which]
    if not isinstance(t, Tensor):
        raise B.error(f"{spec.name}: {role} must be a tensor, got {type(t).__name__}")
    want_type = spec.dtype(which)
    if t.dtype != want_type:
        hint = f"convert it with .to(A.{want_type.name})" if which != "c" else f"use an {want_type.name} accumulator"
        raise B.error(f"{spec.name}: {role} has element type {t.dtype}, the atom takes {want_type}", hint=hint)
    if spec.source(which) == "shared":
        if t.space is not N.MemorySpace.SHARED:
            raise B.error(f"{spec.name}: {role} is read from shared memory, got a {t.space.value} tensor",
                          hint=f"stage it in A.shared(...) and pass the {spec.tile(which)} tile" +
                          (" (or use the .rs form for A in registers)" if which == "a" else ""))
        shape = tuple(symbolic.static_value(s) for s in t.shape)
        if shape != spec.tile(which):
            raise B.error(f"{spec.name}: {role} must be a {spec.tile(which)} shared tile, got shape {t.shape}",
                          hint="A is M x K, B is N x K (an MN-major operand is a .T or permute() view of "
                          "K x 64 shared boxes)")
        _check_descriptor(spec, role, t)
        return
    if t.space is not N.MemorySpace.REGISTER:
        raise B.error(f"{spec.name}: {role} must be this thread's register fragment, got a {t.space.value} tensor",
                      hint=f"load A.mma_partition(atom, {which!r}, tile) into registers first")
    want = spec.values_per_thread(which)
    if _fragment_size(t) != want:
        raise B.error(f"{spec.name}: {role} fragment has {t.size} values per thread, the atom needs {want}",
                      hint=f"make it with A.mma_fragment(atom, {which!r}) (shape {value_shape(spec, which)})")
    if t.view.valid is not None:
        raise B.error(f"{spec.name}: {role} fragment has partial (predicated) elements",
                      hint="fill the fragment completely (load with other=0)")


def _check_descriptor(spec: MmaAtomSpec, role: str, t: Tensor) -> None:
    """A shared-memory operand must be a layout some wgmma descriptor describes (canonical
    K-major or MN-major, with the buffer's swizzle); its alignment is the verifier's to prove."""
    from argus.layout_algebra import ComposedLayout, LayoutError, wgmma_descriptor

    offset = symbolic.static_value(t.view.offset)
    layout = t.layout
    if t.view.swizzle is not None:
        layout = ComposedLayout(t.view.swizzle, offset if offset is not None else 0, layout)
    try:
        wgmma_descriptor(layout, t.dtype.itemsize, units="elements")
    except LayoutError as err:
        raise B.error(f"{spec.name}: {role} in shared memory has no wgmma descriptor: {err.message}",
                      hint="allocate the tile with the Hopper swizzle of its row length, e.g. "
                      "A.shared(A.bf16, (64, 64), swizzle=Swizzle(3, 3, 3)) for 128-byte rows, "
                      "Swizzle(1, 3, 3) for 32-byte rows") from None


# --------------------------------------------------------------------------- re-tiling


def retile(x: Tensor, src_atom: str | MmaAtomSpec, dst_atom: str | MmaAtomSpec, which: str = "a", *,
           transpose: bool = False, dtype: Any = None) -> Tensor:
    """Accumulator fragments of ``src_atom`` as operand ``which`` fragments of ``dst_atom``.

    ``x`` holds accumulator tiles of ``src_atom`` covering a matrix P: shape
    ``(TM, TN, *value_shape)`` (or ``(TN, ...)`` for TM = 1, or one tile); tile ``(i, j)``
    covers rows ``i*M..`` and columns ``j*N..`` of P.  The operand matrix is P (``which="a"``:
    M×K; ``"b"``: N×K) or P transposed.  The result has shape ``(TR, TC, *value_shape)`` of
    ``dst_atom``'s operand tiles over that matrix, converted to ``dtype`` (default: the
    operand type).  No data moves between threads: every thread must already hold the
    elements of its new fragment (as with mma.sync, wgmma and MFMA accumulators reused as
    the next GEMM's A, or for MFMA as B of the transposed product); otherwise this is an error.
    """
    import numpy as np

    src, dst = mma_atom(src_atom), mma_atom(dst_atom)
    if which not in ("a", "b"):
        raise B.error(f"retile: the target operand must be 'a' or 'b', got {which!r}")
    if src.threads != dst.threads:
        raise B.error(f"retile: {src.name} runs on {src.threads} threads and {dst.name} on {dst.threads}")
    sv, dv = value_shape(src, "c"), value_shape(dst, which)
    vc = src.values_per_thread("c")
    shape = tuple(symbolic.static_value(s) for s in x.shape)
    lead = shape[:len(shape) - len(sv)] if shape[len(shape) - len(sv):] == sv else None
    if lead is None or len(lead) > 2 or x.space is not N.MemorySpace.REGISTER:
        raise B.error(f"retile: expected register accumulator fragments of shape (TM, TN, *{sv}), got {x.shape}",
                      hint="make them with A.mma_fragment(src_atom, 'c', (TM, TN))")
    tm, tn = (1, 1) if not lead else ((1, lead[0]) if len(lead) == 1 else lead)
    (ms, ns) = src.tile("c")
    rows, cols = (tm * ms, tn * ns) if not transpose else (tn * ns, tm * ms)
    dr, dc = dst.tile(which)
    if rows % dr or cols % dc:
        raise B.error(f"retile: the {rows}x{cols} operand matrix is not a whole number of {dr}x{dc} tiles of {dst.name}")
    tr, tc = rows // dr, cols // dc
    # value tables of both atoms
    src_tv = np.array([[int(src.layouts.c(t, v)) for v in range(vc)] for t in range(src.threads)])
    owner = np.empty((ms * ns, 2), np.int64)
    owner[src_tv.ravel()] = np.stack(np.divmod(np.arange(src_tv.size), vc), axis=1)
    vd = dst.values_per_thread(which)
    dst_layout = dst.layouts.operand(which)
    out_shape = (tr, tc, *dv)
    total = tr * tc * vd
    table = np.empty(total, np.int64)  # result element (column-major) -> x element (column-major)
    for t in range(dst.threads):
        for i in range(tr):
            for j in range(tc):
                for u in range(vd):
                    off = int(dst_layout(t, u))
                    r, c = i * dr + off % dr, j * dc + off // dr
                    p, q = (r, c) if not transpose else (c, r)
                    holder, v = owner[(p % ms) + ms * (q % ns)]
                    if holder != t:
                        raise B.error(
                            f"retile: element ({r}, {c}) of thread {t}'s {dst.name} operand {which} is held by "
                            f"thread {int(holder)} in the {src.name} accumulator",
                            hint="the layouts differ: exchange data through shared memory or shuffles "
                            + ("(or try transpose=True)" if not transpose else ""))
                    e = i + tr * (j + tc * u)
                    src_index = (p // ms) + tm * ((q // ns) + tn * int(v))
                    if t == 0:
                        table[e] = src_index
                    elif table[e] != src_index:
                        raise B.error(f"retile: the register permutation from {src.name} to {dst.name} differs "
                                      "between threads", hint="exchange data through shared memory")
    out = ops.fragment(out_shape, dtype or dst.dtype(which))
    xflat = _flat_register_offsets(x, len(lead), tm, tn, sv)
    _emit_gather(out, x, xflat[table], total)
    return out


def _flat_register_offsets(x: Tensor, nlead: int, tm: int, tn: int, vshape: tuple[int, ...]) -> Any:
    """Register offset (relative to x's offset) of the accumulator element with column-major
    index ``i + TM * (j + TN * v)`` (tile ``(i, j)``, value ``v``)."""
    import numpy as np

    values = 1
    for s in vshape:
        values *= s
    offsets = np.empty(tm * tn * values, np.int64)
    for index in builtins.range(len(offsets)):
        i, j, v = index % tm, (index // tm) % tn, index // (tm * tn)
        value_coord = []
        for s in vshape:
            value_coord.append(v % s)
            v //= s
        lead = () if nlead == 0 else ((j,) if nlead == 1 else (i, j))
        offsets[index] = int(symbolic.static_value(x.layout((*lead, *value_coord))))
    return offsets


def _emit_gather(out: Tensor, x: Tensor, offsets: Any, total: int) -> None:
    """``out[e] = x.buffer[x.offset + offsets[e]]`` (converting), for column-major ``e``.

    Emitted as one op over a view whose layout reproduces ``offsets`` when it is affine in
    the mixed-radix digits of ``e``, else one op per element.
    """
    builder = B.current()
    factors = _prime_factors(total)
    strides, scale = [], 1
    for f in factors:
        strides.append(int(offsets[scale] - offsets[0]) if scale < total else 0)
        scale *= f
    import numpy as np

    index = np.arange(total)
    predicted = np.full(total, int(offsets[0]))
    rem = index.copy()
    for f, s in zip(factors, strides):
        predicted += (rem % f) * s
        rem //= f
    if np.array_equal(predicted, offsets):
        shape, src_strides, dst_strides = _coalesce(factors, strides)
        if len(shape) <= len(COORDS):
            src_view = N.View(x.view.buffer, Layout(shape, src_strides), symbolic.normalize(x.view.offset + int(offsets[0])),
                              COORDS[:len(shape)], None, None, None)
            dst_view = N.View(out.view.buffer, Layout(shape, dst_strides), out.view.offset, COORDS[:len(shape)],
                              None, None, None)
            builder.emit(ops._convert_or_copy(src_view, dst_view, builder.position()))
            return
    for e in range(total):
        src_view = N.View(x.view.buffer, Layout((1,), (0,)), symbolic.normalize(x.view.offset + int(offsets[e])),
                          COORDS[:1], None, None, None)
        dst_view = N.View(out.view.buffer, Layout((1,), (0,)), out.view.offset + e, COORDS[:1], None, None, None)
        builder.emit(ops._convert_or_copy(src_view, dst_view, builder.position()))


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out or [1]


def _coalesce(factors: list[int], strides: list[int]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Merge consecutive digit modes that are contiguous in the source (and always in the destination)."""
    shape, src, dst = [factors[0]], [strides[0]], [1]
    scale = factors[0]
    for f, s in zip(factors[1:], strides[1:]):
        if s == src[-1] * shape[-1]:
            shape[-1] *= f
        else:
            shape.append(f)
            src.append(s)
            dst.append(scale)
        scale *= f
    return tuple(shape), tuple(src), tuple(dst)


# --------------------------------------------------------------------------- collectives


def shuffle(x: Tensor, lane: Any, mode: str = "idx", *, width: int = 32) -> Tensor:
    """Warp shuffle: each lane receives ``x`` of a source lane (every lane must be active).

    ``mode``: ``"idx"`` (source ``lane % width`` of the lane's segment), ``"xor"`` (``lane_id ^
    lane``), ``"up"`` (``lane_id - lane``), ``"down"`` (``lane_id + lane``); a source outside the
    lane's ``width``-lane segment gives the lane its own value (PTX ``shfl.sync``).  ``width``
    64 is an AMD wavefront.  Tags travel with the data.
    """
    if mode not in ("idx", "xor", "up", "down"):
        raise B.error(f"shuffle: mode {mode!r} is not idx, xor, up or down")
    if width not in (1, 2, 4, 8, 16, 32, 64):
        raise B.error(f"shuffle: width {width} is not a power of two up to 64")
    if x.space is not N.MemorySpace.REGISTER:
        raise B.error("shuffle: the value must be a register tensor", hint="load it first")
    builder = B.current()
    dst = ops.fragment(tuple(symbolic.static_value(s) for s in x.shape), x.dtype)
    builder.emit(N.Shuffle(mode=mode, dst=dst.view, src=x.view, lane=as_index(lane, "shuffle lane"), width=width,
                           scope=N.Scope.WARP, loc=builder.position()))
    return dst


_REDUCTIONS = ("add", "max", "min")


def reduce(x: Tensor, fn: str, modes: Any = None, *, across_lanes: tuple[int, ...] = ()) -> Tensor:
    """Reduce register tensor ``x`` with ``fn`` (``"add"``, ``"max"``, ``"min"``) over ``modes``
    (default: all), then combine across lanes with an xor butterfly over ``across_lanes``
    (xor masks, powers of two: ``(1, 2)`` combines the 4 lanes that differ in their two low
    bits, as the lanes holding one row of an mma.sync accumulator).

    Local elements are combined in increasing element order, then the masks in the given
    order: ``v = fn(v, shfl_xor(v, m))``; every lane of a butterfly group ends with the same
    value.  The result has ``x``'s shape without ``modes`` (``(1,)`` when all are reduced).
    Tags: the fields on which all combined elements agree (see :mod:`argus.ir.interp_mma`).
    """
    if fn not in _REDUCTIONS:
        raise B.error(f"reduce: {fn!r} is not one of {', '.join(_REDUCTIONS)}")
    if x.space is not N.MemorySpace.REGISTER:
        raise B.error("reduce: the value must be a register tensor", hint="load it first")
    shape = tuple(symbolic.static_value(s) for s in x.shape)
    if modes is None:
        modes = tuple(builtins.range(len(shape)))
    modes = tuple(sorted({modes} if isinstance(modes, int) else set(modes)))
    if any(not 0 <= m < len(shape) for m in modes):
        raise B.error(f"reduce: modes {modes} out of range for a tensor of rank {len(shape)}")
    masks = tuple(across_lanes)
    for m in masks:
        if not isinstance(m, int) or m <= 0 or m & (m - 1) or m >= 64:
            raise B.error(f"reduce: across_lanes entry {m!r} is not a power-of-two xor mask below 64",
                          hint="(1, 2) combines lanes 4i..4i+3; (16, 8, 4, 2, 1) the whole warp")
    kept = tuple(s for d, s in enumerate(shape) if d not in modes) or (1,)
    dst = ops.fragment(kept, x.dtype)
    builder = B.current()
    builder.emit(N.Reduce(fn=fn, dst=dst.view, src=x.view, modes=modes, across_lanes=masks,
                          scope=N.Scope.WARP if masks else N.Scope.THREAD, loc=builder.position()))
    return dst


def warp_reduce(x: Tensor, fn: str, *, lanes: int = 32) -> Tensor:
    """All elements of ``x`` over ``lanes`` consecutive lanes (a power of two, up to 64)."""
    if lanes not in (1, 2, 4, 8, 16, 32, 64):
        raise B.error(f"warp_reduce: lanes={lanes} is not a power of two up to 64")
    masks = tuple(1 << b for b in reversed(builtins.range(lanes.bit_length() - 1)))
    return reduce(x, fn, across_lanes=masks)


def broadcast(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``x`` seen with ``shape`` (numpy rules: trailing modes align; modes of extent 1 or missing
    repeat).  A view, no data moves; read it, do not write it."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    src_shape = tuple(symbolic.static_value(s) for s in x.shape)
    lead = len(shape) - len(src_shape)
    if lead < 0:
        raise B.error(f"broadcast: cannot broadcast shape {src_shape} to {shape}")
    layout = x.layout
    strides_src = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    strides, substitution = [], {}
    for d, extent in enumerate(shape):
        if d < lead:
            strides.append(0)
            continue
        s = src_shape[d - lead]
        if s == extent:
            strides.append(strides_src[d - lead])
            substitution[COORDS[d - lead]] = COORDS[d]
        elif s == 1:
            strides.append(0)
            substitution[COORDS[d - lead]] = 0
        else:
            raise B.error(f"broadcast: mode {d - lead} of extent {s} cannot become {extent}")
    coords = x.view.coords if x.view.coords is not None else COORDS[:len(src_shape)]
    coords = tuple(symbolic.normalize(sympy.sympify(c).xreplace(substitution)) for c in coords)
    valid = x.view.valid.xreplace(substitution) if x.view.valid is not None else None
    return Tensor(N.View(x.view.buffer, Layout(tuple(shape), tuple(strides)), x.view.offset, COORDS[:len(shape)],
                         coords, valid, x.view.swizzle))


def atomic_add(dst: Tensor, value: Tensor, *, pred: Any = None) -> None:
    """``dst += value`` elementwise, atomically (global or shared ``dst``); elements invalid in
    ``dst`` (partial tiles) or masked by ``pred`` are skipped.  Atomics commute: concurrent
    atomics of other threads and blocks on the same elements are not races."""
    if dst.space not in (N.MemorySpace.GLOBAL, N.MemorySpace.SHARED):
        raise B.error("atomic_add: the destination must be global or shared memory")
    if tuple(dst.shape) != tuple(value.shape):
        raise B.error(f"atomic_add: shapes differ: {dst.shape} vs {value.shape}")
    if value.dtype != dst.dtype:
        value = value.to(dst.dtype)
    builder = B.current()
    builder.emit(N.Atomic(fn="add", dst=dst.view, src=value.view, pred=ops._mask(pred, dst.view.valid),
                          loc=builder.position()))


# --------------------------------------------------------------------------- ldmatrix / stmatrix


def _matrix_atom(t: Any, direction: str, trans: bool, what: str) -> tuple[str, int]:
    """The matrix copy atom for the shared tile ``t`` (``rows x columns``, both multiples of 8)."""
    if not isinstance(t, Tensor):
        raise B.error(f"{what}: expected a shared-memory tile, got {type(t).__name__}")
    if t.space is not N.MemorySpace.SHARED:
        raise B.error(f"{what}: the tile must be in the block's shared memory, got a {t.space.value} tensor")
    if t.dtype.bits != 16:
        raise B.error(f"{what}: {what} moves 16-bit elements, the tile holds {t.dtype}",
                      hint="use a bf16 or f16 tile")
    shape = tuple(symbolic.static_value(s) for s in t.shape)
    matrices = shape[0] // 8 * (shape[1] // 8) if len(shape) == 2 and None not in shape else None
    if (len(shape) != 2 or None in shape or shape[0] % 8 or shape[1] % 8 or matrices not in (1, 2, 4)):
        raise B.error(f"{what}: the tile must be rows x columns with both multiples of 8 and 1, 2 or 4 8x8 "
                      f"matrices in all, got shape {t.shape}", hint="e.g. a 16 x 16 tile for the mma.sync A operand")
    # a tile whose position is symbolic carries a validity predicate: every element must be valid
    # when it executes (the interpreter checks it, the verifier proves it); a matrix moves whole
    stride = t.layout.stride[1] if isinstance(t.layout.stride, tuple) else None
    if isinstance(stride, tuple) or symbolic.static_value(stride) != 1:
        raise B.error(f"{what}: the tile's rows must be contiguous (column stride 1), got layout {t.layout}",
                      hint="each 8-element row of a matrix is one 16-byte access" +
                      (": use trans=True on the row-major tile instead of a transposed view" if not trans else ""))
    op = "ldmatrix" if direction == "load" else "stmatrix"
    return f"{op}.m8n8.x{matrices}{'.trans' if trans else ''}.b16", matrices


def ldmatrix(src: Tensor, *, trans: bool = False) -> Tensor:
    """A warp loads the shared tile ``src`` (``rows x columns`` 16-bit elements, 1, 2 or 4 8x8
    matrices) into its lanes' registers (``ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].b16``).

    Matrix ``m`` is the 8x8 block at block row ``m % (rows / 8)``, block column ``m // (rows / 8)``;
    the result is a fragment of shape ``(2, matrices)``: lane ``l`` holds, in value ``e + 2 m``,
    row ``l / 4``, column ``2 (l % 4) + e`` of matrix ``m`` (with ``trans``: row ``2 (l % 4) + e``,
    column ``l / 4``).  Every lane of the warp must execute it (warp scope), with the same tile;
    each matrix row must be 16 contiguous, 16-byte aligned bytes (the interpreter checks it, the
    verifier proves it)."""
    atom, matrices = _matrix_atom(src, "load", trans, "ldmatrix")
    dst = ops.fragment((2, matrices), src.dtype)
    builder = B.current()
    builder.emit(N.Copy(src=src.view, dst=dst.view, atom=atom, loc=builder.position(), scope=N.Scope.WARP))
    return dst


def stmatrix(value: Tensor, dst: Tensor, *, trans: bool = False) -> None:
    """A warp stores its lanes' fragments ``value`` (shape ``(2, matrices)``, the layout
    :func:`ldmatrix` loads) into the shared tile ``dst`` (``stmatrix...m8n8.x{1,2,4}[.trans].b16``,
    sm_90).  Every lane of the warp must execute it."""
    atom, matrices = _matrix_atom(dst, "store", trans, "stmatrix")
    if not isinstance(value, Tensor) or value.space is not N.MemorySpace.REGISTER:
        raise B.error("stmatrix: the value must be this thread's register fragment")
    if value.dtype != dst.dtype:
        value = value.to(dst.dtype)
    if _fragment_size(value) != 2 * matrices:
        raise B.error(f"stmatrix: the fragment has {value.size} values per thread, {atom} stores {2 * matrices}",
                      hint=f"a fragment of shape (2, {matrices})")
    builder = B.current()
    builder.emit(N.Copy(src=value.view, dst=dst.view, atom=atom, loc=builder.position(), scope=N.Scope.WARP))
