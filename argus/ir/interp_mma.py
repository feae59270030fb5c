"""Reference semantics of the matrix and collective operations: ``Mma``, ``Shuffle``,
``Reduce`` (with a cross-lane tree) and ``Atomic``.

Collectives
-----------
An MMA atom, a shuffle and a cross-lane reduction are executed by a group of threads
together: a warp (32 threads), a warpgroup (4 warps, 128 threads) or an AMD wavefront (64
threads, two interpreter warps).  Every lane of the group must be active (a collective
under divergence is reported), and the group runs the op once all its warps have arrived:
each arriving warp contributes its operands (read at arrival, from its own registers), the
last one computes the result for the whole group and writes every participant's
registers, and the others wait (a wait with no barrier semantics: it orders nothing else).
A warp that never arrives shows as a deadlock at the collective.

MMA tags
--------
The tag of an operand element is a record of integers whose **last field is its k**:

* an A element (row ``m``, column ``k`` of the M×K tile) carries ``(row..., k)``,
* a B element (B is viewed N×K: row ``n``, column ``k``) carries ``(col..., k)``,

as written by ``tag(a, lambda i, k: (i, k))`` and ``tag(b, lambda j, k: (j, k))`` for an
M×K matrix ``a`` and an N×K matrix ``b``.  For every ``m, n, k`` whose A and B elements are
both tagged, the k fields must be equal; a difference is a ``tag`` violation naming the
block, the thread holding the A element, its fragment element and the MMA's program point.
Each result element ``D[m, n]`` carries ``A.row + B.col`` (the A fields before k followed by
the B fields before k, e.g. ``(i, j)``) when every A element of row ``m`` carries the same
row fields and every B element of row ``n`` the same col fields; otherwise it is untagged
(⊥).  The accumulator C follows the elementwise rule: a tagged C element that differs from
that record makes ``D`` untagged.

Reduction tags
--------------
A reduction's result element carries the tag fields (in their order) on which all the
elements it combined agree; if one of them is untagged, or none agree, it is untagged.
Reducing a row of ``(i, j)``-tagged scores over ``j`` gives ``(i,)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import sympy

from argus import symbolic
from argus.errors import ArgusError
from argus.ir import nodes as N
from argus.ir.atoms import mma_atom
from argus.ir.interpreter import (
    _KNOWN_ZERO,
    _UNTAGGED,
    MAX_TAG_FIELDS,
    REGISTER_ACCESS_HOOKS,
    WARP,
    Blocked,
    InterpreterError,
    Violation,
    _apply,
    _merge_tags,
    handles,
    known_zero_tags,
)

# --------------------------------------------------------------------------- collectives


def _fail(run: Any, op: N.Op, kind: str, message: str, thread: int | None = None,
          element: tuple[int, ...] | None = None, other: int | None = None) -> InterpreterError:
    return InterpreterError(Violation(kind, message, block=run.block, thread=thread, other_thread=other,
                                      element=element, position=op.loc, op=op.kind))


def _require_converged(run: Any, op: N.Op, mask: np.ndarray, lanes: np.ndarray, group_threads: int) -> None:
    if not mask.all():
        idle = lanes[~mask]
        raise _fail(run, op, "collective",
                    f"{op.kind} is executed by {group_threads} threads together, but thread {int(idle[0])} "
                    "of the group is not here (divergent control flow)",
                    thread=int(lanes[mask][0]), other=int(idle[0]))


def _collective(run: Any, op: N.Op, mask: np.ndarray, lanes: np.ndarray, group_threads: int,
                contribution: Any, finish: Any):
    """Run ``finish({warp: contribution})`` once every warp of this thread's group arrived.

    A generator: a warp that is not the last to arrive waits (``Blocked`` with ``ready``).
    """
    _require_converged(run, op, mask, lanes, group_threads)
    warp = int(lanes[0]) // WARP
    if group_threads <= WARP:
        finish({warp: contribution})
        return
    group = int(lanes[0]) // group_threads
    if (group + 1) * group_threads > run.threads:
        raise _fail(run, op, "collective",
                    f"{op.kind} needs a group of {group_threads} threads but the block has {run.threads}",
                    thread=int(lanes[0]))
    counts = run.__dict__.setdefault("_collective_counts", {})
    pending = run.__dict__.setdefault("_collective_pending", {})
    occurrence = counts.get((id(op), warp), 0)
    counts[(id(op), warp)] = occurrence + 1
    key = (id(op), group, occurrence)
    entry = pending.setdefault(key, {"parts": {}, "done": False})
    entry["parts"][warp] = contribution
    if len(entry["parts"]) == group_threads // WARP:
        del pending[key]
        finish(dict(sorted(entry["parts"].items())))
        entry["done"] = True
        return
    yield Blocked(-1, None, lanes, op, ready=lambda: entry["done"])


# --------------------------------------------------------------------------- fragments


def _value_order(run: Any, view: N.View) -> np.ndarray:
    """``order[v]`` = position (in the view's element enumeration) of fragment value ``v``.

    The value index of a fragment element is the column-major linear index of its coordinate
    in the view's shape (the CuTe convention of TV layouts' value modes).
    """
    key = ("value-order", id(view.layout), run.size_key)
    cached = run.interp.address_cache.get(key)
    if cached is None:
        grid, _ = run._elements(view)
        extents = grid.max(axis=1) + 1 if grid.size else np.zeros(0, np.int64)
        linear = np.zeros(grid.shape[1], np.int64)
        scale = 1
        for d in range(grid.shape[0]):
            linear += grid[d] * scale
            scale *= int(extents[d])
        order = np.empty_like(linear)
        order[linear] = np.arange(len(linear))
        cached = run.interp.address_cache[key] = (order, view.layout)
    return cached[0]


class _Fragment:
    """One warp's register fragment of a view: values, tags and addresses, in value order."""

    def __init__(self, run: Any, op: N.Op, view: N.View, env: dict, mask: np.ndarray, lanes: np.ndarray,
                 write: bool) -> None:
        mem, addr, ok = run._access(op, view, env, mask, lanes, write=write, check_init=not write)
        if not ok.all():
            raise _fail(run, op, "layout", f"fragment %{view.buffer.name} has invalid (masked) elements",
                        thread=int(lanes[0]))
        order = _value_order(run, view)
        self.mem, self.lanes, self.order, self.view = mem, lanes, order, view
        self.addr = addr[:, order]  # [lanes, values]
        if not write:
            rows = lanes[:, None]
            self.values = mem.values[rows, self.addr]
            self.fields = mem.tag_fields[rows, self.addr]
            self.counts = mem.tag_count[rows, self.addr]
            self.names = mem.tag_names[rows, self.addr]

    def write(self, run: Any, values: np.ndarray, fields: np.ndarray, counts: np.ndarray, names: np.ndarray) -> None:
        """Write ``[lanes, values]`` arrays (value order) into this fragment."""
        mem, rows = self.mem, self.lanes[:, None]
        dtype = mem.buffer.dtype
        if getattr(dtype, "is_float", False):
            values = run.interp.numerics.round_to(dtype, np.asarray(values, np.float64))
        mem.values[rows, self.addr] = values
        mem.written[rows, self.addr] = True
        mem.tag_fields[rows, self.addr] = fields
        mem.tag_count[rows, self.addr] = counts
        mem.tag_names[rows, self.addr] = names


class _SharedTile:
    """A shared-memory operand tile read by the whole group (its addresses must be uniform)."""

    def __init__(self, run: Any, op: N.Op, view: N.View, env: dict, lanes: np.ndarray) -> None:
        first = lanes[:1]
        env1 = {k: (v[:1] if isinstance(v, np.ndarray) and v.ndim == 1 and len(v) == len(lanes) else v)
                for k, v in env.items()}
        mem, addr, ok = run._access(op, view, env1, np.ones(1, bool), first, write=False)
        if not ok.all():
            raise _fail(run, op, "layout", f"shared operand %{view.buffer.name} has invalid elements",
                        thread=int(first[0]))
        hb = getattr(run, "hb", None)
        if hb is not None:  # wgmma reads shared memory through the async proxy
            hb.check_async_proxy_read(run, op, view, mem, addr, ok, first, reader=f"{op.atom} (async proxy)")
        grid, _ = run._elements(view)
        self.mem = mem
        self.addr = addr[0]
        self.coords = grid
        self.values = mem.values[self.addr]
        self.fields = mem.tag_fields[self.addr]
        self.counts = mem.tag_count[self.addr]
        self.names = mem.tag_names[self.addr]


@cache
def _tv_table(atom_name: str, which: str) -> tuple[np.ndarray, np.ndarray]:
    """``offsets[t, v]`` = tile offset of thread t's value v, and its inverse ``(t, v)`` per offset."""
    spec = mma_atom(atom_name)
    layout = spec.layouts.operand(which)
    threads, values = spec.threads, spec.values_per_thread(which)
    offsets = np.array([[int(layout(t, v)) for v in range(values)] for t in range(threads)], np.int64)
    inverse = np.empty((offsets.size, 2), np.int64)
    inverse[offsets.ravel()] = np.stack(np.divmod(np.arange(offsets.size), values), axis=1)
    return offsets, inverse


def _matrix(spec: Any, which: str, parts: dict[int, Any], attr: str) -> np.ndarray:
    """Operand ``which`` (tile shape ``(rows, cols)``) gathered from the warps' fragments.

    Returns an array of shape (rows, cols, ...) of the fragments' ``attr`` (values, tag fields...).
    """
    rows, cols = spec.tile(which)
    offsets, _ = _tv_table(spec.name, which)
    stacked = np.concatenate([getattr(parts[w], attr) for w in parts], axis=0)  # [threads, values, ...]
    flat = np.empty((rows * cols, *stacked.shape[2:]), stacked.dtype)
    flat[offsets.ravel()] = stacked.reshape(-1, *stacked.shape[2:])
    return flat.reshape(cols, rows, *stacked.shape[2:]).swapaxes(0, 1)


def _shared_matrix(spec: Any, which: str, tile: _SharedTile, attr: str) -> np.ndarray:
    rows, cols = spec.tile(which)
    data = getattr(tile, attr)
    out = np.empty((rows, cols, *data.shape[1:]), data.dtype)
    out[tile.coords[0], tile.coords[1]] = data
    return out


# --------------------------------------------------------------------------- MMA


@handles(N.Mma)
def run_mma(run: Any, op: N.Mma, env: dict, mask: np.ndarray, lanes: np.ndarray):
    spec = mma_atom(op.atom)
    _require_converged(run, op, mask, lanes, spec.threads)
    part: dict[str, Any] = {}
    for which, view in (("a", op.a), ("b", op.b)):
        if spec.source(which) == "shared":
            part[which] = _SharedTile(run, op, view, env, lanes)
        else:
            part[which] = _Fragment(run, op, view, env, mask, lanes, write=False)
    part["c"] = _Fragment(run, op, op.c, env, mask, lanes, write=False)
    part["d"] = _Fragment(run, op, op.d, env, mask, lanes, write=True)
    yield from _collective(run, op, mask, lanes, spec.threads, part,
                           lambda parts: _mma_group(run, op, spec, parts))


def _operand(spec: Any, which: str, parts: dict[int, dict], attr: str) -> np.ndarray:
    """Operand ``which`` of the group as a (rows, cols, ...) array of ``attr``."""
    if spec.source(which) == "shared":
        return _shared_matrix(spec, which, parts[max(parts)][which], attr)
    return _matrix(spec, which, {w: p[which] for w, p in parts.items()}, attr)


def _mma_group(run: Any, op: N.Mma, spec: Any, parts: dict[int, dict]) -> None:
    for which in ("a", "b"):
        if spec.source(which) != "shared":
            continue
        reference = parts[max(parts)][which].addr
        for w, p in parts.items():
            if not np.array_equal(p[which].addr, reference):
                raise _fail(run, op, "collective",
                            f"the shared-memory operand {which} of {spec.name} differs between the warps of the "
                            f"group (warp {w}): every warp must name the same tile", thread=w * WARP)
    a = _operand(spec, "a", parts, "values")
    b = _operand(spec, "b", parts, "values")
    c = _matrix(spec, "c", {w: p["c"] for w, p in parts.items()}, "values")
    numerics = run.interp.numerics
    d = numerics.mma(a, b.T, c, a_dtype=spec.a_dtype, b_dtype=spec.b_dtype, acc_dtype=spec.acc_dtype)
    fields, counts, names, a_keys = _mma_tags(run, op, spec, parts)
    offsets, _ = _tv_table(spec.name, "c")
    d_flat = np.asarray(d, np.float64).T.ravel()  # column-major tile offsets
    f_flat = fields.swapaxes(0, 1).reshape(-1, MAX_TAG_FIELDS)
    c_flat = counts.T.ravel()
    n_flat = names.T.ravel()
    base = _group_base(spec, parts)
    _accumulate(run, op, spec, parts, base, a_keys)
    for p in parts.values():
        frag = p["d"]
        threads = frag.lanes - base
        idx = offsets[threads]  # [lanes, values]
        frag.write(run, d_flat[idx], f_flat[idx], c_flat[idx], n_flat[idx])
    if spec.name.startswith("wgmma"):
        from argus.ir import interp_wgmma
        interp_wgmma.issue(run, op, spec, parts, base)


def _split_k(fields: np.ndarray, counts: np.ndarray, k_field: int):
    """Per element of an operand ([rows, K] of records): whether it has a k field, its k, and
    the other fields in order (compacted) with their number."""
    width = fields.shape[-1]
    kidx = counts + k_field if k_field < 0 else np.full_like(counts, k_field)
    has_k = (counts >= 1) & (kidx >= 0) & (kidx < counts)
    kval = np.take_along_axis(fields, np.clip(kidx, 0, width - 1)[..., None], axis=-1)[..., 0]
    j = np.arange(width)
    source = np.clip(np.where(j < kidx[..., None], j, j + 1), 0, width - 1)
    rest_count = np.where(has_k, counts - 1, 0)
    rest = np.where(j < rest_count[..., None], np.take_along_axis(fields, source, axis=-1), 0)
    return has_k, kval, rest, rest_count


def _mma_tags(run: Any, op: N.Mma, spec: Any, parts: dict[int, dict]):
    """Result tags (fields [M, N, F], counts [M, N], names [M, N]) after the k-agreement check,
    and A's split ``(tagged, k)`` ([M, K]) for the coverage keys."""
    fa = _operand(spec, "a", parts, "fields")
    ca = _operand(spec, "a", parts, "counts")
    fb = _operand(spec, "b", parts, "fields")
    cb = _operand(spec, "b", parts, "counts")
    M, Nn = ca.shape[0], cb.shape[0]
    a_field, b_field = op.k_fields if op.k_fields is not None else (-1, -1)
    tagged_a, ka, ra, nra = _split_k(fa, ca, a_field)
    tagged_b, kb, rb, nrb = _split_k(fb, cb, b_field)
    both = tagged_a[:, None, :] & tagged_b[None, :, :]
    clash = both & (ka[:, None, :] != kb[None, :, :])  # [M, N, K]
    if clash.any():
        mi, ni, ki = (int(x) for x in np.argwhere(clash)[0])
        thread, element = _holder(run, spec, "a", parts, mi, ki)
        ta = tuple(int(v) for v in fa[mi, ki, :ca[mi, ki]])
        tb = tuple(int(v) for v in fb[ni, ki, :cb[ni, ki]])
        which = "the last tag field is k" if op.k_fields is None else f"k is tag field {a_field} of A, {b_field} of B"
        raise _fail(run, op, "tag",
                    f"{spec.name}: operands disagree on k: A[{mi}, {ki}] carries tag {ta} (k = {int(ka[mi, ki])}) "
                    f"but B[{ni}, {ki}] carries tag {tb} (k = {int(kb[ni, ki])}); {which}",
                    thread=thread, element=element)
    # row fields of A (all but k) must be the same along k; likewise col fields of B.  Known zeros
    # (zero fill of out-of-range elements) contribute nothing to the product: they are skipped.
    zero_a, zero_b = ca <= _KNOWN_ZERO, cb <= _KNOWN_ZERO  # with or without the tag they stand for

    def consistent(tagged, zero, rest, nrest):
        ref = np.argmax(tagged, axis=1)  # first tagged element of each row
        take = np.arange(len(ref))
        rest_ref, n_ref = rest[take, ref], nrest[take, ref]
        same = (nrest == n_ref[:, None]) & (rest == rest_ref[:, None, :]).all(axis=-1)
        good = tagged.any(axis=1) & ((tagged & same) | zero).all(axis=1)
        return good, rest_ref, n_ref

    row_ok, ra0, nrow = consistent(tagged_a, zero_a, ra, nra)
    col_ok, rb0, ncol = consistent(tagged_b, zero_b, rb, nrb)
    total = nrow[:, None] + ncol[None, :]
    ok = row_ok[:, None] & col_ok[None, :] & (total <= MAX_TAG_FIELDS)
    # record of D[m, n]: A's row fields, then B's col fields
    position = np.arange(MAX_TAG_FIELDS)[None, None, :]
    first = nrow[:, None, None]
    from_b = np.take_along_axis(np.broadcast_to(rb0[None, :, :], (M, Nn, MAX_TAG_FIELDS)),
                                np.broadcast_to(np.clip(position - first, 0, MAX_TAG_FIELDS - 1),
                                                (M, Nn, MAX_TAG_FIELDS)), axis=2)
    fields = np.where(position < first, ra0[:, None, :], np.where(position < total[..., None], from_b, 0))
    fields = np.where(ok[..., None], fields, 0)
    counts = np.where(ok, total, _UNTAGGED)
    # accumulator rule: a tagged C element must agree, else the result is untagged; where every
    # product term has a known-zero factor, D is C (tag included: a known-zero C stays one)
    fc = _matrix(spec, "c", {w: p["c"] for w, p in parts.items()}, "fields")
    cc = _matrix(spec, "c", {w: p["c"] for w, p in parts.items()}, "counts")
    differs = (cc >= 0) & ((cc != counts) | (fc != fields).any(axis=-1))
    counts[differs] = _UNTAGGED
    silent = ~((~zero_a)[:, None, :] & (~zero_b)[None, :, :]).any(axis=2)  # [M, N]: product exactly zero
    counts = np.where(silent, cc, counts)
    fields = np.where(silent[..., None], fc, fields)
    names = np.full((M, Nn), "mma", object)
    return fields, counts, names, (tagged_a, ka, fa, ca, a_field)


def _group_base(spec: Any, parts: dict[int, Any]) -> int:
    """First thread of the group that executes the atom."""
    return (min(parts) * WARP // spec.threads) * spec.threads


def _holder(run: Any, spec: Any, which: str, parts: dict[int, dict], row: int, col: int):
    """(thread, fragment element) holding element (row, col) of operand ``which``."""
    rows, _ = spec.tile(which)
    if spec.source(which) == "shared":
        return max(parts) * WARP, (row, col)
    _, inverse = _tv_table(spec.name, which)
    t, v = (int(x) for x in inverse[row + rows * col])
    thread = _group_base(spec, parts) + t
    frag = parts[thread // WARP][which]
    _, coords = run._elements(frag.view)
    return thread, coords[int(frag.order[v])]


# --------------------------------------------------------------------------- shuffles


@handles(N.Shuffle)
def run_shuffle(run: Any, op: N.Shuffle, env: dict, mask: np.ndarray, lanes: np.ndarray):
    width = op.width
    if width <= 0 or width & (width - 1) or width > 64:
        raise ArgusError(f"shuffle width {width} is not a power of two up to 64", position=op.loc)
    _require_converged(run, op, mask, lanes, max(width, WARP))
    src_mem, src_addr, _ = run._access(op, op.src, env, mask, lanes, write=False)
    rows = lanes[:, None]
    part = {
        "values": src_mem.values[rows, src_addr], "fields": src_mem.tag_fields[rows, src_addr],
        "counts": src_mem.tag_count[rows, src_addr], "names": src_mem.tag_names[rows, src_addr],
        "lane": np.broadcast_to(np.asarray(run._eval(op.lane, env), np.int64), lanes.shape).copy(),
        "dst": _Fragment(run, op, op.dst, env, mask, lanes, write=True),
        "order": _value_order(run, op.src),
    }
    yield from _collective(run, op, mask, lanes, max(width, WARP), part, lambda parts: _shuffle_group(op, parts, run))


def _shuffle_source(mode: str, lane: np.ndarray, operand: np.ndarray, width: int) -> np.ndarray:
    """Source lane of each lane (PTX ``shfl.sync`` with a full member mask and ``width``-lane segments):
    a source outside the lane's segment (``up``/``down``/``xor``) returns the lane's own value."""
    start = lane - lane % width
    match mode:
        case "idx":
            return start + operand % width
        case "xor":
            source = lane ^ operand
        case "up":
            source = lane - operand
        case "down":
            source = lane + operand
        case _:
            raise ArgusError(f"shuffle mode {mode!r} is not idx, xor, up or down")
    inside = (source >= start) & (source < start + width)
    return np.where(inside, source, lane)


def _shuffle_group(op: N.Shuffle, parts: dict[int, dict], run: Any) -> None:
    warps = sorted(parts)
    cat = {k: np.concatenate([parts[w][k] for w in warps], axis=0) for k in ("values", "fields", "counts", "names", "lane")}
    lane = np.arange(len(cat["lane"]))
    source = _shuffle_source(op.mode, lane, cat["lane"], op.width)
    order = parts[warps[0]]["order"]
    start = 0
    for w in warps:
        frag = parts[w]["dst"]
        n = len(frag.lanes)
        src = source[start:start + n]
        start += n
        frag.write(run, cat["values"][src][:, order], cat["fields"][src][:, order],
                   cat["counts"][src][:, order], cat["names"][src][:, order])


# --------------------------------------------------------------------------- reductions


def _reduce_plan(run: Any, op: N.Reduce) -> np.ndarray:
    """``groups[e, r]``: the src element positions combined into dst element position ``e``,
    in increasing src position order."""
    key = ("reduce", id(op.src.layout), id(op.dst.layout), op.modes, run.size_key)
    cached = run.interp.address_cache.get(key)
    if cached is None:
        src_grid, _ = run._elements(op.src)
        dst_grid, _ = run._elements(op.dst)
        kept = [d for d in range(src_grid.shape[0]) if d not in op.modes]
        dst_extents = dst_grid.max(axis=1) + 1 if dst_grid.size else np.zeros(0, np.int64)
        if len(kept) != dst_grid.shape[0] and not (not kept and dst_grid.shape[1] == 1):
            raise ArgusError("reduce: the destination's rank is not the source's minus the reduced modes",
                             position=op.loc)
        target = np.zeros(src_grid.shape[1], np.int64)
        for d, src_d in enumerate(kept):
            target = target * int(dst_extents[d]) + src_grid[src_d]
        order = np.argsort(target, kind="stable")
        count = dst_grid.shape[1]
        groups = order.reshape(count, -1)
        cached = run.interp.address_cache[key] = (groups, op)
    return cached[0]


@handles(N.Reduce)
def run_reduce(run: Any, op: N.Reduce, env: dict, mask: np.ndarray, lanes: np.ndarray):
    if op.across_lanes:
        _require_converged(run, op, mask, lanes, WARP)
    elif not mask.all():  # a thread-local reduction: run it on the active lanes only
        env = {k: (v[mask] if isinstance(v, np.ndarray) and v.ndim == 1 and len(v) == len(lanes) else v)
               for k, v in env.items()}
        lanes, mask = lanes[mask], np.ones(int(mask.sum()), bool)
    src_mem, src_addr, ok = run._access(op, op.src, env, mask, lanes, write=False)
    if not ok.all():
        raise _fail(run, op, "layout", "reduce: the source has invalid (masked) elements", thread=int(lanes[0]))
    rows = lanes[:, None]
    groups = _reduce_plan(run, op)
    values = src_mem.values[rows, src_addr]
    dtype = op.src.buffer.dtype
    numerics = run.interp.numerics
    acc = values[:, groups[:, 0]]
    for r in range(1, groups.shape[1]):
        acc = _apply(numerics, op.fn, dtype, [acc, values[:, groups[:, r]]])
    part = {
        "values": np.asarray(acc), "fields": src_mem.tag_fields[rows, src_addr][:, groups],
        "counts": src_mem.tag_count[rows, src_addr][:, groups], "names": src_mem.tag_names[rows, src_addr][:, groups[:, 0]],
        "dst": _Fragment(run, op, op.dst, env, mask, lanes, write=True), "dst_order": _value_order(run, op.dst),
    }
    masks = tuple(int(m) for m in op.across_lanes)
    for m in masks:
        if m <= 0 or m & (m - 1) or m >= 64:
            raise ArgusError(f"reduce: across_lanes entry {m} is not a power-of-two xor mask below 64",
                             position=op.loc)
    if not masks:
        _reduce_group(run, op, masks, {int(lanes[0]) // WARP: part})
        return
    yield from _collective(run, op, mask, lanes, max(2 * max(masks), WARP), part,
                           lambda parts: _reduce_group(run, op, masks, parts))


def _reduce_group(run: Any, op: N.Reduce, masks: tuple[int, ...], parts: dict[int, dict]) -> None:
    warps = sorted(parts)
    values = np.concatenate([parts[w]["values"] for w in warps], axis=0)  # [L, E]
    fields = np.concatenate([parts[w]["fields"] for w in warps], axis=0)  # [L, E, R, F]
    counts = np.concatenate([parts[w]["counts"] for w in warps], axis=0)  # [L, E, R]
    names = np.concatenate([parts[w]["names"] for w in warps], axis=0)  # [L, E]
    lane = np.arange(values.shape[0])
    dtype = op.src.buffer.dtype
    for m in masks:  # butterfly: every lane ends with the same value
        values = _apply(run.interp.numerics, op.fn, dtype, [values, values[lane ^ m]])
    partners = [lane]
    for m in masks:
        partners = partners + [p ^ m for p in partners]
    if len(partners) > 1:
        fields = np.concatenate([fields[p] for p in partners], axis=2)
        counts = np.concatenate([counts[p] for p in partners], axis=2)
    out_fields, out_counts = _common_fields(fields, counts)
    start = 0
    for w in warps:
        frag = parts[w]["dst"]
        n = len(frag.lanes)
        sl = slice(start, start + n)
        start += n
        order = parts[w]["dst_order"]
        frag.write(run, values[sl][:, order], out_fields[sl][:, order], out_counts[sl][:, order], names[sl][:, order])


def _common_fields(fields: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per [lane, element]: the tag fields on which all combined elements (axis 2) agree, compacted."""
    tagged = (counts != _UNTAGGED).all(axis=2)
    count = counts[:, :, 0]
    present = np.arange(MAX_TAG_FIELDS)[None, None, :] < count[..., None]
    same_count = (counts == counts[:, :, :1]).all(axis=2)
    agree = (fields == fields[:, :, :1, :]).all(axis=2) & present & same_count[..., None]
    first = fields[:, :, 0, :]
    order = np.argsort(~agree, axis=-1, kind="stable")
    compact = np.take_along_axis(first, order, axis=-1)
    n = agree.sum(axis=-1)
    compact = np.where(np.arange(MAX_TAG_FIELDS)[None, None, :] < n[..., None], compact, 0)
    out_counts = np.where(tagged & (n > 0), n, _UNTAGGED)
    return compact, out_counts


# --------------------------------------------------------------------------- atomics


@handles(N.Atomic)
def run_atomic(run: Any, op: N.Atomic, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    """Read-modify-write of every element, lanes in increasing order (elements of one lane in
    order).  Atomics commute: two atomics on one element never race, and atomics of different
    blocks on global memory are not write conflicts; an atomic and a plain access of another
    thread with no barrier between them race (in either order)."""
    if op.fn not in ("add", "max", "min"):
        raise ArgusError(f"interpreter: atomic {op.fn!r} is not executable yet", position=op.loc)
    dst_mem, dst_addr, ok = run._access(op, op.dst, env, mask, lanes, write=False, pred=op.pred,
                                        check_init=False, track=False)
    src_mem, src_addr, _ = run._access(op, op.src, env, mask, lanes, write=False)
    src_idx = run._index(src_mem, src_addr, ok)
    values = src_mem.values[src_idx]
    src_tags = (src_mem.tag_fields[src_idx], src_mem.tag_count[src_idx], src_mem.tag_names[src_idx])
    addr = dst_addr[ok]
    _atomic_races(run, op, dst_mem, addr, np.broadcast_to(lanes[:, None], ok.shape)[ok])
    dtype = dst_mem.buffer.dtype
    numerics = run.interp.numerics
    pending = np.arange(len(addr))
    while len(pending):
        _, first = np.unique(addr[pending], return_index=True)
        now = pending[np.sort(first)]
        a = addr[now]
        old_tags = (dst_mem.tag_fields[a], dst_mem.tag_count[a], dst_mem.tag_names[a])
        merged = _merge_tags([old_tags, tuple(t[now] for t in src_tags)])
        was_written = dst_mem.written[a]
        new = _apply(numerics, op.fn, dtype, [dst_mem.values[a], values[now]])
        new = np.where(was_written, new, np.nan)
        if not was_written.all():
            i = int(np.flatnonzero(~was_written)[0])
            raise _fail(run, op, "uninitialized", f"atomic {op.fn} on %{op.dst.buffer.name}[{int(a[i])}] "
                        "before any write")
        dst_mem.values[a] = new
        dst_mem.tag_fields[a], dst_mem.tag_count[a], dst_mem.tag_names[a] = merged
        pending = np.setdiff1d(pending, now, assume_unique=True)


_SEVERAL_ATOMIC_WRITERS = -3  # last_writer of an element written by atomics of several threads


def _atomic_writer(threads: np.ndarray) -> np.ndarray:
    """The race shadow's ``last_writer`` of an atomic by ``threads``: ``-(thread + 10)``, a value no
    plain access matches, so a plain access of any thread in the same epoch is a race."""
    return -(threads + 10)


def _atomic_races(run: Any, op: N.Atomic, mem: Any, addr: np.ndarray, threads: np.ndarray) -> None:
    """Race checks of an atomic against plain accesses of the current barrier epoch; then record
    it as an atomic write (of its thread, or of several threads)."""
    if mem.last_writer is None:
        return
    epoch = run.epoch
    writer, reader = mem.last_writer[addr], mem.reader[addr]
    this_epoch = mem.write_epoch[addr] == epoch
    plain_write = this_epoch & (writer >= 0) & (writer != threads)
    plain_read = (mem.readers_epoch[addr] == epoch) & (reader != -1) & (reader != threads)
    for clash, other, what in ((plain_write, writer, "a write"), (plain_read, reader, "a read")):
        if clash.any():
            i = int(np.flatnonzero(clash)[0])
            raise _fail(run, op, "race", f"atomic {op.fn} on %{mem.buffer.name}[{int(addr[i])}] conflicts with "
                        f"{what} by another thread with no barrier between them", thread=int(threads[i]),
                        other=int(other[i]) if other[i] >= 0 else None)
    mine = _atomic_writer(threads)
    others = this_epoch & (writer <= _SEVERAL_ATOMIC_WRITERS) & (writer != mine)
    mem.last_writer[addr] = np.where(others, _SEVERAL_ATOMIC_WRITERS, mine)
    unique, counts = np.unique(addr, return_counts=True)
    for a in unique[counts > 1]:  # several lanes of this op on one element
        if len(set(threads[addr == a].tolist())) > 1:
            mem.last_writer[a] = _SEVERAL_ATOMIC_WRITERS
    mem.write_epoch[addr] = epoch


# --------------------------------------------------------------------------- ldmatrix / stmatrix


@cache
def _matrix_table(atom_name: str, rows: int, columns: int) -> np.ndarray:
    """``index[l, v]``: the element (C-order index in a ``rows x columns`` shared tile) that lane
    ``l``'s fragment value ``v`` holds.  The tile is the atom's 8x8 matrices in column-major order
    of 8x8 blocks (matrix ``m`` = block row ``m % (rows / 8)``, block column ``m // (rows / 8)``);
    inside a matrix, ``row`` is the 16-byte memory row one lane addresses and ``column`` the
    element within it (``.trans`` changes which lane receives which element, not the memory)."""
    from argus.ir.atoms import copy_atom

    matrix = copy_atom(atom_name).matrix
    values = matrix.values_per_thread
    blocks = rows // 8
    index = np.empty((WARP, values), np.int64)
    for lane in range(WARP):
        for v in range(values):
            offset = int(matrix.fragment(lane, v))
            row, column, m = offset % 8, (offset // 8) % 8, offset // 64
            index[lane, v] = (8 * (m % blocks) + row) * columns + 8 * (m // blocks) + column
    return index


def run_matrix_copy(run: Any, op: N.Copy, env: dict, mask: np.ndarray, lanes: np.ndarray) -> None:
    """``ldmatrix`` / ``stmatrix``: one warp moves 1, 2 or 4 8x8 matrices of 16-bit elements
    between a shared tile (the same for every lane) and the lanes' register fragments, in the
    atom's fragment layout.  Every lane of a full warp takes part; each matrix row must be 16
    contiguous, 16-byte aligned bytes.  Element ``e`` of the tile is read (or written) by the lane
    whose fragment holds it, so races and orderings are checked per lane."""
    from argus.ir.atoms import copy_atom

    spec = copy_atom(op.atom)
    _require_converged(run, op, mask, lanes, WARP)
    if len(lanes) != WARP or int(lanes[0]) % WARP:
        raise _fail(run, op, "collective", f"{op.atom} is executed by a whole warp of 32 threads; warp of thread "
                    f"{int(lanes[0])} has {len(lanes)}", thread=int(lanes[0]))
    load = spec.matrix.direction == "load"
    smem, regs = (op.src, op.dst) if load else (op.dst, op.src)
    grid, coords = run._elements(smem)
    rows, columns = (int(e) + 1 for e in grid.max(axis=1))
    owner = run if smem.rank is None else run.rank_of(smem, op, env, mask, lanes)
    mem = owner.memories.get(smem.buffer.name)
    if mem is None:
        raise ArgusError(f"interpreter: buffer %{smem.buffer.name} used before its allocation", position=op.loc)
    addr, valid = run._addresses(smem, env, lanes)
    if not valid.all():
        lane, element = np.argwhere(~valid)[0]
        raise _fail(run, op, "layout", f"{op.atom}: the shared tile %{smem.buffer.name} has invalid elements "
                    "(a matrix copy moves whole 8x8 matrices)", thread=int(lanes[lane]), element=coords[element])
    differs = (addr != addr[:1]).any(axis=1)
    if differs.any():
        lane = int(np.flatnonzero(differs)[0])
        raise _fail(run, op, "collective", f"{op.atom}: lanes {int(lanes[0])} and {int(lanes[lane])} name different "
                    "shared tiles (the warp moves one tile together)", thread=int(lanes[lane]), other=int(lanes[0]))
    chunks = addr[0].reshape(rows, columns // 8, 8)
    bad = (np.diff(chunks, axis=2) != 1).any(axis=2) | (chunks[..., 0] % 8 != 0)
    if bad.any():
        r, c = (int(x) for x in np.argwhere(bad)[0])
        raise _fail(run, op, "layout", f"{op.atom}: row {r}, columns {8 * c}..{8 * c + 7} of the shared tile are not 16 "
                    "contiguous, 16-byte aligned bytes (each matrix row is one 16-byte access)",
                    thread=int(lanes[0]), element=(r, 8 * c))
    size = mem.values.shape[-1]
    if ((addr < 0) | (addr >= size)).any():
        lane, element = np.argwhere((addr < 0) | (addr >= size))[0]
        raise _fail(run, op, "out-of-bounds", f"{op.atom}: %{smem.buffer.name}[{int(addr[lane, element])}] outside "
                    f"0..{size - 1}", thread=int(lanes[lane]), element=coords[element])
    index = _matrix_table(op.atom, rows, columns)
    mine = np.zeros(addr.shape, bool)
    mine[np.arange(WARP)[:, None], index] = True  # the lane whose fragment holds the element
    run._current_lanes = lanes
    run._check_race(op, mem, smem, addr, mine, lanes, not load)
    reg_mem, reg_addr, _ = run._access(op, regs, env, mask, lanes, write=load)
    reg_addr = reg_addr[:, _value_order(run, regs)]  # [lanes, values]
    rows_of = np.arange(WARP)[:, None]
    if load:
        shared = addr[rows_of, index]  # [lanes, values]
        if not mem.written[shared].all():
            lane, v = np.argwhere(~mem.written[shared])[0]
            raise _fail(run, op, "uninitialized", f"{op.atom} reads %{smem.buffer.name}[{int(shared[lane, v])}] before "
                        "any write", thread=int(lanes[lane]), element=coords[int(index[lane, v])])
        tags = (mem.tag_fields[shared].reshape(-1, MAX_TAG_FIELDS), mem.tag_count[shared].ravel(),
                mem.tag_names[shared].ravel())
        run._current_lanes = lanes
        run._write(reg_mem, reg_addr, np.ones(reg_addr.shape, bool), mem.values[shared].ravel(), tags)
        return
    held = (lanes[:, None], reg_addr)
    order = np.argsort(index, axis=1)  # the lane's elements in increasing element index: addr[mine] order
    pick = (rows_of, order)
    run._write(mem, addr, mine, reg_mem.values[held][pick].ravel(),
               (reg_mem.tag_fields[held][pick].reshape(-1, MAX_TAG_FIELDS), reg_mem.tag_count[held][pick].ravel(),
                reg_mem.tag_names[held][pick].ravel()))


def _register_matrix_copies() -> None:
    from argus.ir.atoms import atom_names
    from argus.ir.interpreter import COPY_HANDLERS

    for name in atom_names("copy"):
        if name.startswith(("ldmatrix", "stmatrix")):
            COPY_HANDLERS[name] = run_matrix_copy


_register_matrix_copies()


# --------------------------------------------------------------------------- coverage


@dataclass(frozen=True)
class ReductionDomain:
    """The k values an MMA's reduction must cover exactly once: ``offset + 0 .. extent - 1``,
    the range of the k field of the tag of the global tensor its A operand is copied from
    (``tag(a, lambda i, k: (i, k))`` on an M×K tensor: k ranges over ``0 .. K - 1``)."""

    tensor: str  # the tagged global tensor
    field: int  # index of k in its tag record
    dim: int  # the logical dimension k is the coordinate of
    offset: Any  # k = coordinate + offset (sympy, free of coordinates)
    extent: Any  # the extent of that dimension (sympy over size symbols)

    def bounds(self, sizes: dict) -> tuple[int, int]:
        """``(lo, hi)``: the domain is ``lo .. hi - 1`` at the given sizes."""
        lo = int(symbolic.evaluate(self.offset, sizes))
        return lo, lo + int(symbolic.evaluate(self.extent, sizes))

    def describe(self) -> str:
        return f"the k field of the tag of %{self.tensor} over its dimension {self.dim}"


_MOVES = (N.Copy, N.Convert, N.Shuffle)  # ops that move data (and its tag) without computing
_DOMAINS: dict[int, tuple[N.Kernel, dict[int, ReductionDomain | None]]] = {}


def reduction_domain(kernel: N.Kernel, op: N.Mma) -> ReductionDomain | None:
    """The reduction domain of ``op`` (see :class:`ReductionDomain`), or ``None`` where it
    cannot be derived unambiguously from the kernel's tags: the A operand is computed (not
    only moved) from its sources, it comes from several tensors with different domains, or
    its k field is not a coordinate plus a constant.  Then only duplicates are checked.

    Derived from the IR alone (the interpreter and the verifier agree on it): the A buffer's
    writers are followed back through copies, conversions and shuffles (fills carry no tag and
    are skipped) to global tensors, each with one ``tag``."""
    entry = _DOMAINS.get(id(kernel))
    if entry is None or entry[0] is not kernel:
        entry = _DOMAINS[id(kernel)] = (kernel, {})
    table = entry[1]
    if id(op) not in table:
        table[id(op)] = _derive_domain(kernel, op)
    return table[id(op)]


def _derive_domain(kernel: N.Kernel, op: N.Mma) -> ReductionDomain | None:
    from argus.layout_algebra import Layout

    writers: dict[str, list[N.Op]] = {}
    tags: dict[str, list[N.Tag]] = {}
    for o in N.walk(kernel.body):
        if isinstance(o, N.Tag):
            if o.view.buffer.space is N.MemorySpace.GLOBAL:
                tags.setdefault(o.view.buffer.name, []).append(o)
            continue
        dst = o.d if isinstance(o, N.Mma) else getattr(o, "dst", None)
        if isinstance(dst, N.View):
            writers.setdefault(dst.buffer.name, []).append(o)
    sources, seen, stack = set(), set(), [op.a.buffer]
    while stack:
        buffer = stack.pop()
        if buffer.name in seen:
            continue
        seen.add(buffer.name)
        if buffer.space is N.MemorySpace.GLOBAL:
            sources.add(buffer.name)
            continue
        for w in writers.get(buffer.name, []):
            if isinstance(w, N.Fill):
                continue
            if not isinstance(w, _MOVES):
                return None
            stack.append(w.src.buffer)
    k_field = op.k_fields[0] if op.k_fields is not None else -1
    found = set()
    for name in sources:
        declared = tags.get(name, [])
        if len(declared) != 1 or declared[0].view.coords is not None:
            return None
        tag = declared[0]
        index = len(tag.fields) + k_field if k_field < 0 else k_field
        if not 0 <= index < len(tag.fields):
            return None
        expr = sympy.sympify(tag.fields[index][1])
        coords = [c for c in N.COORDS if c in expr.free_symbols]
        if len(coords) != 1:
            return None
        dim = N.COORDS.index(coords[0])
        offset = sympy.expand(expr - coords[0])
        shape = tag.view.layout.shape if isinstance(tag.view.layout.shape, tuple) else (tag.view.layout.shape,)
        if offset.free_symbols & set(N.COORDS) or dim >= len(shape):
            return None
        found.add(ReductionDomain(name, index, dim, offset, sympy.sympify(Layout(shape[dim]).size)))
    if len({(d.offset, d.extent) for d in found}) != 1:
        return None
    return min(found, key=lambda d: d.tensor)


class _Coverage:
    """Per register element of one buffer (``[threads, size]``): whether it holds a partial
    sum of an MMA chain (``chained``) and the set of reduction keys that reached it, a bitset
    over ``lo .. lo + 64 * words - 1`` (grown as keys arrive when no domain is known)."""

    def __init__(self, threads: int, size: int, lo: int, hi: int, domain: tuple[int, int] | None,
                 label: str | None) -> None:
        self.lo = lo
        self.words = max(1, -(-(hi - lo) // 64))
        self.bits = np.zeros((threads, size, self.words), np.uint64)
        self.chained = np.zeros((threads, size), bool)
        self.domain, self.label = domain, label
        if domain is not None:
            self.full = _bit_range(lo, self.words, domain[0], domain[1])

    def grow(self, kmin: int, kmax: int) -> None:
        lo = min(self.lo, kmin - kmin % 64)
        hi = max(self.lo + 64 * self.words, kmax + 1)
        words = -(-(hi - lo) // 64)
        if lo == self.lo and words == self.words:
            return
        bits = np.zeros((*self.bits.shape[:2], words), np.uint64)
        shift = (self.lo - lo) // 64
        bits[..., shift:shift + self.words] = self.bits
        self.bits, self.lo, self.words = bits, lo, words


def _bit_range(base: int, words: int, lo: int, hi: int) -> np.ndarray:
    """The bitset (``words`` words from key ``base``) of keys ``lo .. hi - 1``."""
    keys = np.arange(lo, hi) - base
    out = np.zeros(words, np.uint64)
    np.bitwise_or.at(out, keys >> 6, np.left_shift(np.uint64(1), (keys & 63).astype(np.uint64)))
    return out


def _ranges(keys: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0..2, 5"``."""
    parts, start = [], None
    for i, k in enumerate(keys):
        if start is None:
            start = k
        if i + 1 == len(keys) or keys[i + 1] != k + 1:
            parts.append(f"{start}" if start == k else f"{start}..{k}")
            start = None
    return ", ".join(parts)


def _coverage_of(run: Any, mem: Any, create: tuple | None = None) -> _Coverage | None:
    table = run.__dict__.setdefault("_coverage", {})
    cov = table.get(mem.buffer.name)
    if cov is None and create is not None:
        lo, hi, domain, label = create
        cov = table[mem.buffer.name] = _Coverage(mem.values.shape[0], mem.values.shape[1], lo, hi, domain, label)
    return cov


def _accumulate(run: Any, op: N.Mma, spec: Any, parts: dict[int, dict], base: int,
                a_keys: tuple[np.ndarray, np.ndarray]) -> None:
    """Each D element's reduction keys: those of C (when C holds a partial sum) plus the k of
    every tagged A element of its row (``a_keys``: A's tag split as the k check split it).  An
    untagged element adds no key (the key it misses is reported where the sum leaves the
    chain); a known zero adds the k of the tag it stands for when that k lies in the domain (a
    row past M multiplies the zero padding of that k) and nothing otherwise (a k past K, or no
    domain to tell).  A key twice or a key outside the domain is a ``coverage`` violation at
    this MMA."""
    tagged, ka, fa, ca, a_field = a_keys  # [M, K]
    domain = reduction_domain(run.interp.kernel, op)
    bounds = domain.bounds(run.state.sizes) if domain is not None else None
    if bounds is not None:  # a known zero standing for an element of the domain (a row past M) is that k, exactly
        zero, stands_for = known_zero_tags(ca)
        has, zk, _, _ = _split_k(fa, np.where(zero, stands_for, _UNTAGGED), a_field)
        padding = zero & has & (zk >= bounds[0]) & (zk < bounds[1])
        tagged, ka = tagged | padding, np.where(padding, zk, ka)
    offsets, _ = _tv_table(spec.name, "c")
    rows, _ = spec.tile("c")
    if bounds is not None:
        outside = tagged & ((ka < bounds[0]) | (ka >= bounds[1]))
        if outside.any():
            m, k = (int(x) for x in np.argwhere(outside)[0])
            frag, lane, v = _row_holder(parts, offsets, base, rows, m)
            raise _coverage_fail(run, op, frag, lane, v,
                                 f"{spec.name}: k = {int(ka[m, k])} lies outside the reduction domain "
                                 f"{bounds[0]}..{bounds[1] - 1} ({domain.describe()})")
        span = bounds
    else:
        span = (int(ka[tagged].min()), int(ka[tagged].max()) + 1) if tagged.any() else (0, 1)
    first = next(iter(parts.values()))
    cov = _coverage_of(run, first["d"].mem, (*span, bounds, domain.describe() if domain else None))
    src = _coverage_of(run, first["c"].mem)
    if cov.domain is None and tagged.any():
        cov.grow(span[0], span[1] - 1)
        if src is not None and src is not cov:
            src.grow(cov.lo, cov.lo + 64 * cov.words - 1)
            cov.grow(src.lo, src.lo + 64 * src.words - 1)
    if src is not None and (src.lo, src.words) != (cov.lo, cov.words):
        src = None  # partial sums of another reduction: C starts no chain here
    # the keys of each row of A as a bitset, once for the whole group
    off = np.where(tagged, ka - cov.lo, 0)
    bit = np.left_shift(np.uint64(1), (off & 63).astype(np.uint64))
    onehot = ((off >> 6)[..., None] == np.arange(cov.words)) & tagged[..., None]  # [M, K, W]
    row_bits = np.bitwise_or.reduce(np.where(onehot, bit[..., None], np.uint64(0)), axis=1)  # [M, W]
    repeated = np.bitwise_count(row_bits).sum(axis=-1) < tagged.sum(axis=1)  # one k twice in a row of A
    if repeated.any():
        m = int(np.flatnonzero(repeated)[0])
        keys = ka[m][tagged[m]].tolist()
        again = next(k for k in keys if keys.count(k) > 1)
        frag, lane, v = _row_holder(parts, offsets, base, rows, m)
        raise _coverage_fail(run, op, frag, lane, v,
                             f"{spec.name}: k = {again} is the k of two elements of row {m} of A (one product "
                             "counted twice)")
    for p in parts.values():
        frag, acc = p["d"], p["c"]
        rows_of = frag.lanes[:, None]
        m = offsets[frag.lanes - base] % rows  # [lanes, values]: the D element's row
        new = row_bits[m]  # [lanes, values, W]
        if src is not None:
            held = src.chained[rows_of, acc.addr]
            old = np.where(held[..., None], src.bits[rows_of, acc.addr], np.uint64(0))
            twice = (old & new).any(axis=-1)
            if twice.any():
                lane, v = (int(x) for x in np.argwhere(twice)[0])
                again = min(_keys(cov, old[lane, v] & new[lane, v]))
                raise _coverage_fail(run, op, frag, lane, v,
                                     f"{spec.name}: k = {again} reaches this accumulator element a second time "
                                     "since it was last set (a k-block or k-step counted twice)")
            new = old | new
        cov.bits[rows_of, frag.addr] = new
        cov.chained[rows_of, frag.addr] = True


def _row_holder(parts: dict[int, dict], offsets: np.ndarray, base: int, rows: int, m: int):
    """(fragment, lane, value) of the first D element of row ``m`` (where a row's violation is shown)."""
    for p in parts.values():
        frag = p["d"]
        hit = np.argwhere(offsets[frag.lanes - base] % rows == m)
        if len(hit):
            return frag, int(hit[0][0]), int(hit[0][1])
    raise AssertionError(f"no thread holds row {m} of D")


def _coverage_fail(run: Any, op: N.Op, frag: Any, lane: int, v: int, message: str) -> InterpreterError:
    _, coords = run._elements(frag.view)
    return _fail(run, op, "coverage", message, thread=int(frag.lanes[lane]), element=coords[int(frag.order[v])])


def carries_keys(op: N.Op) -> bool:
    """A register-to-register copy, conversion or elementwise op: the partial sums it reads
    stay in the chain (a rescaling ``o = o * alpha`` covers the same k as ``o``)."""
    if isinstance(op, N.Elementwise):
        return op.dst.buffer.space is N.MemorySpace.REGISTER
    return isinstance(op, (N.Copy, N.Convert)) and op.src.buffer.space is N.MemorySpace.REGISTER \
        and op.dst.buffer.space is N.MemorySpace.REGISTER


def check_coverage_access(run: Any, op: N.Op, mem: Any, view: N.View, addr: np.ndarray, ok: np.ndarray,
                          lanes: np.ndarray, write: bool) -> None:
    """Non-MMA accesses of accumulators.  A register-to-register copy, conversion or
    elementwise op carries the keys of the partial sums it reads to its destination (an
    elementwise op of two partial sums takes the union; a key in both is a violation); any
    other write ends the chain (the element's keys are forgotten); any other read — a store,
    a reduction, a shuffle, an MMA's A or B operand — is where the sum leaves the chain: its
    keys must be the whole reduction domain."""
    if isinstance(op, N.Mma) and (view is op.c or view is op.d):
        return  # the accumulator of an MMA: :func:`_accumulate` handles it
    table = run.__dict__.get("_coverage")
    if not table:
        return
    rows = np.broadcast_to(lanes[:, None], addr.shape)
    if carries_keys(op):
        moves = run.__dict__.setdefault("_coverage_moves", {})
        entry = moves.get(id(op))
        if entry is None:
            sources = sum(isinstance(s, N.View) for s in op.srcs) if isinstance(op, N.Elementwise) else 1
            entry = moves[id(op)] = {"dst": None, "srcs": [], "left": sources}
        if write:
            entry["dst"] = (mem, addr, ok, rows)
        else:
            entry["srcs"].append((mem, addr, ok, rows))
            entry["left"] -= 1
        if entry["dst"] is not None and entry["left"] <= 0:
            del moves[id(op)]
            _carry(run, op, table, entry)
        return
    cov = table.get(mem.buffer.name)
    if cov is None:
        return
    t, a = rows[ok], addr[ok]
    if write:
        cov.chained[t, a] = False
        cov.bits[t, a] = 0
        return
    if cov.domain is None:
        return
    incomplete = cov.chained[t, a] & ~(cov.bits[t, a] == cov.full).all(axis=-1)
    if not incomplete.any():
        return
    i = int(np.flatnonzero(incomplete)[0])
    missing = [k for k in range(*cov.domain) if k not in _keys(cov, cov.bits[t[i], a[i]])]
    lane, element = np.argwhere(ok)[i]
    _, coords = run._elements(view)
    raise _fail(run, op, "coverage",
                f"%{mem.buffer.name} leaves its MMA chain with k {_ranges(missing)} never reached (the reduction "
                f"covers {cov.domain[0]}..{cov.domain[1] - 1}, {cov.label})",
                thread=int(lanes[lane]), element=coords[element])


def _keys(cov: _Coverage, words: np.ndarray) -> set[int]:
    return {cov.lo + 64 * w + b for w in range(cov.words) for b in range(64) if int(words[w]) >> b & 1}


def _carry(run: Any, op: N.Op, table: dict, entry: dict) -> None:
    """The destination elements of a register move or elementwise op take the keys of the
    partial sums among its sources (their union)."""
    dmem, daddr, dok, drows = entry["dst"]
    sources = [(table[m.buffer.name], a, k, r) for m, a, k, r in entry["srcs"] if m.buffer.name in table]
    dcov = table.get(dmem.buffer.name)
    if not sources:
        if dcov is not None:
            dcov.chained[drows[dok], daddr[dok]] = False
        return
    first = sources[0][0]
    if dcov is None:
        dcov = table[dmem.buffer.name] = _Coverage(dmem.values.shape[0], dmem.values.shape[1], first.lo,
                                                   first.lo + 64 * first.words, first.domain, first.label)
    for scov, *_ in sources:
        if (scov.lo, scov.words) != (dcov.lo, dcov.words):
            if scov.domain is not None or dcov.domain is not None:  # two reductions: not one chain
                dcov.chained[drows[dok], daddr[dok]] = False
                return
            scov.grow(dcov.lo, dcov.lo + 64 * dcov.words - 1)
            dcov.grow(scov.lo, scov.lo + 64 * scov.words - 1)
    bits = np.zeros((*dok.shape, dcov.words), np.uint64)
    chained = np.zeros(dok.shape, bool)
    for scov, saddr, sok, srows in sources:
        at = (srows, np.where(sok, saddr, 0))
        held = sok & dok & scov.chained[at]
        mine = np.where(held[..., None], scov.bits[at], np.uint64(0))
        twice = held & ((bits & mine) != 0).any(axis=-1)
        if twice.any():
            lane, element = (int(x) for x in np.argwhere(twice)[0])
            again = sorted(_keys(dcov, bits[lane, element] & mine[lane, element]))
            _, coords = run._elements(op.dst)
            raise _fail(run, op, "coverage",
                        f"{op.kind} combines partial sums that both hold k {_ranges(again)} (a reduction slice counted "
                        "twice)", thread=int(drows[lane, element]), element=coords[element])
        bits |= mine
        chained |= held
    dcov.bits[drows[dok], daddr[dok]] = bits[dok]
    dcov.chained[drows[dok], daddr[dok]] = chained[dok]


REGISTER_ACCESS_HOOKS.append(check_coverage_access)
