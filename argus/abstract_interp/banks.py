"""Property ``bank-conflicts``: how many passes a warp's shared-memory access takes.

Shared memory has 32 banks of 4-byte words (LDS on CDNA3 the same); one instruction of a warp
is served in phases of ``128 / access_bytes`` lanes, and within a phase every bank serves one
distinct word per pass (lanes reading the same word share it).  The *degree* of an access is
the worst number of passes (:func:`argus.layout_algebra.swizzle.bank_conflict_degree`); 1 is
conflict-free.

* **Reported** for every shared-memory access: the degree is measured on the kernel's own
  address expressions for every warp of the block and every element position (one element per
  instruction), at block 0, full tiles and the first iterations of the loops around the
  access; the VC (proved structurally: it states a measurement, not a claim) carries the
  degree in its message, its reason and its roles, so ``argus verify --json`` lists it per
  access.
* **Checked** where the kernel asserts a bound (``A.assert_bank_conflicts(view, max_degree)``,
  IR :class:`~argus.ir.nodes.AssertBankConflicts`): a solver VC over ``max_degree + 1``
  lanes of one phase of a warp, active at the same element position, that would need
  pairwise distinct words of one bank; its negation is a conflict of a higher degree, with
  the lanes named.  It holds for every block, iteration and size, not only where measured.
"""

from __future__ import annotations

import itertools
from typing import Any

from argus import symbolic
from argus.abstract_interp.encoding import EncodingError, Instance, view_extents
from argus.ir import nodes as N
from argus.layout_algebra.swizzle import LDS_BANK_BYTES, LDS_BANKS, bank_conflict_degree
from argus.smt import terms as T
from argus.smt.evaluate import EvaluationError, evaluate

WARP = 32
#: first iterations of each symbolic loop at which degrees are measured
MEASURED_ITERATIONS = 2
#: the value of every size while measuring (tile predicates hold: the access at full tiles)
FULL_TILES = 1 << 12
#: lane evaluations one access may take (larger fragments are measured at sampled elements)
MEASURE_BUDGET = 1 << 14


def bank_conflicts(b: Any, site: Any) -> None:
    """The degree of every shared-memory access of ``site`` (reported), and the asserted bound
    of an :class:`~argus.ir.nodes.AssertBankConflicts` (checked)."""
    a = b.analysis
    op = site.op
    if isinstance(op, getattr(N, "AssertBankConflicts", ())):
        _asserted(b, site, op)
        return
    for acc in a.accesses.get(site.index, []):
        if acc.buffer.space is not N.MemorySpace.SHARED or acc.kind not in ("read", "write"):
            continue
        degree, where = measure(a, site, acc)
        what = f"%{acc.buffer.name} ({acc.role})"
        if degree is None:
            message = f"bank conflicts of {what}: not measured ({where})"
        else:
            message = f"bank conflicts of {what}: degree {degree} per warp" + (
                " (conflict-free)" if degree == 1 else f", worst {where}")
        b.add("bank-conflicts", site, [], T.TRUE, message,
              {"access": acc, "degree": degree, "buffer": acc.buffer.name},
              structural=f"measured (no bound asserted here): {message}")


def measure(a: Any, site: Any, acc: Any) -> tuple[int | None, str]:
    """``(degree, where)``: the worst degree of the access over the warps of block 0, its
    element positions and the first iterations of its loops; ``(None, why)`` when the
    addresses depend on sizes or cannot be evaluated."""
    view = acc.view
    op = site.op
    if op.elected is not None or (isinstance(op, N.Copy) and _bulk(op.atom)):
        return None, "a bulk copy issued by one thread, not a warp's access"
    extents = [symbolic.static_value(e) for e in view_extents(view)]
    if any(e is None for e in extents):
        return None, "the view's extents depend on sizes"
    inst, _ = a.fresh(site, "#bank", view=view)
    try:
        address = a.address(inst, view)
        active = a.active(inst, acc)
    except (EncodingError, T.TermError) as err:
        return None, f"cannot encode the address: {err.message}"
    sizes = {v.name for v in a.encoder.sizes.values()}
    if sizes & set(T.variables(address)):
        return None, "the addresses depend on sizes"
    itemsize = view.buffer.dtype.itemsize
    loops = []
    for lp in site.loops:
        start = symbolic.static_value(lp.start)
        if start is None:
            return None, f"the loop at {lp.op.loc} starts at a run-time value"
        loops.append([start + lp.step * k for k in range(MEASURED_ITERATIONS)])
    worst, where = 0, ""
    threads = a.encoder.threads
    positions = list(itertools.product(*(range(e) for e in extents)))
    budget = max(1, MEASURE_BUDGET // max(1, threads * max(1, len(list(itertools.product(*loops))))))
    sampled = len(positions) > budget
    if sampled:  # large fragments: evenly spaced element positions
        positions = positions[:: -(-len(positions) // budget)]
    block = {v.name: 0 for s, v in inst.values.items() if s in a.block_ids}
    block.update(dict.fromkeys(sizes, FULL_TILES))  # predicates of partial tiles: measured on full ones
    for iteration in itertools.product(*loops):
        env = dict(block)
        env.update({inst.values[lp.var].name: k for lp, k in zip(site.loops, iteration)})
        for coords in positions:
            env.update({inst.values[s].name: c for s, c in zip(a._coord_symbols(view), coords)})
            for warp in range(-(-threads // WARP)):
                lanes = []
                for tid in range(warp * WARP, min(threads, (warp + 1) * WARP)):
                    env[inst.values[a.tid].name] = tid
                    try:
                        if evaluate(active, env):
                            lanes.append(int(evaluate(address, env)) * itemsize)
                    except EvaluationError as err:
                        return None, f"cannot evaluate the address: {err}"
                if not lanes:
                    continue
                degree = bank_conflict_degree(lanes, max(itemsize, 1))
                if degree > worst:
                    its = ", ".join(f"{lp.var}={k}" for lp, k in zip(site.loops, iteration))
                    worst, where = degree, f"warp {warp}, element {coords}" + (f", iteration {its}" if its else "")
    if sampled:
        where += f" (measured at {len(positions)} evenly spaced element positions)"
    return (worst or 1), where


def _bulk(atom: str) -> bool:
    """A copy atom without per-thread accesses (TMA, bulk copies)."""
    try:
        from argus.ir.atoms import copy_atom

        spec = copy_atom(atom)
    except Exception:  # unknown atoms are reported by the op table
        return True
    return spec.elected or (not spec.access_bytes and atom != "reg")


def _asserted(b: Any, site: Any, op: Any) -> None:
    a = b.analysis
    view, bound = op.view, int(op.max_degree)
    if view.buffer.space is not N.MemorySpace.SHARED:
        b.unknown("bank-conflicts", site, f"assert_bank_conflicts at {op.loc}: %{view.buffer.name} is not "
                  "shared memory")
        return
    itemsize = view.buffer.dtype.itemsize
    access_bytes = max(itemsize, 1)
    words = max(1, access_bytes // LDS_BANK_BYTES)
    phase = max(1, (LDS_BANKS * LDS_BANK_BYTES) // access_bytes)
    first, hyps = a.fresh(site, view=view)
    tid = first.values[a.tid]
    group = T.add(T.mul(WARP, T.floordiv(tid, WARP)), T.mul(phase, T.floordiv(T.floormod(tid, WARP), phase)))
    lanes, chosen, parts = [], [], []
    for i in range(bound + 1):
        if i == 0:
            inst = first
        else:
            lane = T.int_var(f"lane#{i}", 0, min(phase, WARP) - 1)
            inst = Instance(site, {**first.values, a.tid: T.add(group, lane)})
            hyps.append(T.lt(inst.values[a.tid], a.encoder.threads))
        hyps.append(T.and_(a.path(inst), *([a.value(inst, view.valid)] if view.valid is not None else [])))
        j = T.int_var(f"word#{i}", 0, words - 1)
        word = T.add(T.floordiv(T.mul(a.address(inst, view), itemsize), LDS_BANK_BYTES), j)
        lanes.append(inst.values[a.tid])
        chosen.append(word)
    for x, y in itertools.combinations(chosen, 2):
        parts += [T.ne(x, y), T.eq(T.floormod(x, LDS_BANKS), T.floormod(y, LDS_BANKS))]
    roles = {"thread": tid, "block": tuple(first.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: first.values[lp.var] for lp in site.loops},
             "element": tuple(first.values[s] for s in a._coord_symbols(view)), "view": view,
             "lanes": lanes, "words": chosen, "max_degree": bound}
    b.add("bank-conflicts", site, hyps, T.not_(T.and_(*parts)),
          f"accesses of %{view.buffer.name} take at most {bound} pass{'es' if bound != 1 else ''} per warp "
          "(no bank serves more distinct words)", roles)
