"""The ``launch-order`` property: a dependent launch touches global memory only after its wait.

A kernel that calls ``grid_dependency_wait()`` is launched with programmatic stream
serialization (:mod:`argus.runtime.launch`): its blocks may start while the previous kernel of
the stream is still running, and only the wait (``griddepcontrol.wait``) orders the thread
after that kernel's completion and the visibility of its writes.  A global read before the wait
may see stale inputs; a global write before it may race with the previous kernel's reads or
writes of the same memory.  The wait is per thread, so every thread must pass its own.

===================  =====================================================================
property             VC (only for kernels with a ``grid_dependency_wait``)
===================  =====================================================================
``launch-order``     per op that reads or writes global memory (ordinary accesses, TMA
                     loads and stores, atomics): ``path(op) → ⋁ path(w)`` over the waits
                     ``w`` that precede the op in every thread's program order — waits
                     earlier in the program and inside no loop the op is not inside (an
                     enclosing symbolic loop shared with the op is taken at the op's
                     iteration)
===================  =====================================================================

A wait inside a loop that the access is not inside is not counted (it may run zero times): such
a VC is an over-approximation, and a model of it is a violation only when the reference
interpreter reproduces it, else the verdict is ``unknown``.  A wait whose path is true at the
top level discharges every later access structurally (the
usual form: all threads wait once at entry).  ``launch_dependents()`` orders nothing and has no
VC.  Kernels without a wait are launched fully serialized and have no launch-order VCs.
"""

from __future__ import annotations

from typing import Any

import sympy

from argus.abstract_interp import memory as M
from argus.abstract_interp.program import Site
from argus.abstract_interp.roles import issue_path
from argus.ir import nodes as N
from argus.smt import terms as T

PROPERTY = "launch-order"


def _waits(a: Any) -> list[Site]:
    return a.program.grid_waits


def global_access(op: N.Op) -> str | None:
    """``"reads"``, ``"writes"`` or ``"reads and writes"`` when ``op`` touches global memory."""
    try:
        found = M.accesses(op)
    except M.Unsupported:
        return None
    kinds = sorted({acc.kind for acc in found
                    if acc.kind in ("read", "write") and acc.buffer.space is N.MemorySpace.GLOBAL})
    if not kinds:
        return None
    return " and ".join(k + "s" for k in kinds)


def _precedes(wait: Site, site: Site) -> bool:
    """Every instance of ``site`` comes after the instance of ``wait`` of the same thread and the
    same iterations of the loops they share, when that instance's path holds."""
    return wait.index <= site.index and tuple(wait.loops) == tuple(site.loops[: len(wait.loops)])


def launch_order(b: Any, site: Site) -> None:
    """The launch-order VC of one site (a site maker of :mod:`~argus.abstract_interp.properties`)."""
    a = b.analysis
    waits = _waits(a)
    if not waits:
        return
    what = global_access(site.op)
    if what is None:
        return
    before = [w for w in waits if _precedes(w, site)]
    message = f"{site.op.kind} {what} global memory only after the thread's grid_dependency_wait()"
    inst, hyps = a.fresh(site)
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops}}
    for w in before:
        if sympy.sympify(issue_path(w)) is sympy.true:
            b.add(PROPERTY, site, hyps, T.TRUE, message, roles,
                  structural=f"every thread waits at {w.op.loc} before it")
            return
    hyps.append(a.value(inst, issue_path(site)))
    goal = T.or_(*(a.value(inst, issue_path(w)) for w in before)) if before else T.FALSE
    # a wait in a loop the access is not inside may or may not have run: not counted, so a
    # model is a violation only if the interpreter reproduces it
    uncounted = [w for w in waits if w.index <= site.index and not _precedes(w, site)]
    approximations = tuple(f"the wait at {w.op.loc} inside a loop is not counted" for w in uncounted)
    b.add(PROPERTY, site, hyps, goal, message + ("" if before else " (no wait precedes it)"), roles,
          deps=(frozenset(), approximations))
