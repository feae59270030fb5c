"""Property ``alignment``: a vector access of ``w`` bytes starts at a multiple of ``w``.

A copy through an atom of one fixed access width (``cp.async.16``, ``cp.async.8``, the 4-byte
direct-to-LDS load...) moves each thread's elements ``w`` bytes at a time: the elements of
the view, in enumeration order (row-major over its modes), in chunks of ``k = w / itemsize``.
For every active element that starts a chunk (its linear index a multiple of ``k``), at a
fresh thread, block, iteration and element::

    base ≡ 0 (mod A)  ⟹  (base + itemsize · address) ≡ 0 (mod w)

where ``address`` is the element index in its buffer (swizzle applied) and ``base`` the
buffer's byte address, of which only its alignment ``A`` is known: the arena's alignment
for shared memory; for a global tensor the alignment the launch checks (the buffer's, 16
bytes by default) or a larger one the signature declares with ``A.aligned(t, n)`` — the
declared assumptions are the hypotheses.  Copies whose atom picks its width per access
(``sync``: the lowering proves each vector's alignment before it widens) need no VC.

The reference interpreter does not model addresses in bytes, so a refutation is reported
with its model (block, thread, element, the byte offset) and is not replayed.
"""

from __future__ import annotations

from typing import Any

from argus import symbolic
from argus.abstract_interp.encoding import view_extents
from argus.ir import nodes as N
from argus.ir.atoms import copy_atom
from argus.smt import terms as T


def fixed_width(atom: str) -> int | None:
    """The one access width (bytes) of a copy atom, or ``None``."""
    try:
        widths = copy_atom(atom).access_bytes
    except Exception:  # an atom the registry does not know: the copy is reported unsupported elsewhere
        return None
    return widths[0] if len(widths) == 1 else None


def base_alignment(kernel: N.Kernel, buffer: N.Buffer) -> int:
    """Bytes the buffer's base address is known to be a multiple of."""
    known = buffer.alignment
    if buffer.space is N.MemorySpace.GLOBAL:
        for assumption in kernel.assumptions:
            if assumption.kind == "aligned" and assumption.tensors and assumption.tensors[0] == buffer.name:
                known = max(known, int(assumption.bound[0]))
    return known


def alignment(b: Any, site: Any) -> None:
    """One VC per vector-accessed view of a fixed-width copy."""
    op = site.op
    if not isinstance(op, N.Copy):
        return
    width = fixed_width(op.atom)
    if width is None:
        return
    a = b.analysis
    for acc in a.accesses.get(site.index, []):
        view = acc.view
        if acc.kind not in ("read", "write") or view.space not in (N.MemorySpace.GLOBAL, N.MemorySpace.SHARED):
            continue
        itemsize = view.buffer.dtype.itemsize
        if itemsize >= width:
            continue
        per_access = width // itemsize
        extents = [symbolic.static_value(e) for e in view_extents(view)]
        if any(e is None for e in extents):
            b.unknown("alignment", site, f"{op.atom} at {op.loc}: the extents of %{view.buffer.name} depend on sizes")
            continue
        inst, hyps = a.fresh(site, view=view)
        linear: Any = T.int_const(0)
        for s, extent in zip(a._coord_symbols(view), extents):
            linear = T.add(T.mul(linear, extent), inst.values[s])
        known = base_alignment(a.kernel, view.buffer)
        base = T.int_var(f"addr_{view.buffer.name}", 0, None)
        offset = T.mul(a.address(inst, view), itemsize)
        hyps = [*hyps, a.active(inst, acc), T.eq(T.floormod(linear, per_access), 0),
                T.eq(T.floormod(base, known), 0)]
        roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
                 "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops},
                 "element": tuple(inst.values[s] for s in a._coord_symbols(view)), "view": view,
                 "byte_offset": offset, "base_alignment": known, "access": acc}
        hint = "" if known % width == 0 else f"; the base of %{view.buffer.name} is only known {known}-byte aligned"
        b.add("alignment", site, hyps, T.eq(T.floormod(T.add(base, offset), width), 0),
              f"each {width}-byte access of %{view.buffer.name} ({acc.role}) by {op.atom} is {width}-byte "
              f"aligned{hint}", roles)
