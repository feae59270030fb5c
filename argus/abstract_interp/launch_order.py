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
                     ``w`` earlier in the program (an enclosing symbolic loop shared with
                     the op taken at the op's iteration; a loop of the wait's own at its
                     first iteration)
===================  =====================================================================

A wait inside a loop that the access is not inside counts through the loop's first iteration:
its path there, the loop's range included (the loop runs at least once).  A wait after the
access inside a loop around both is not counted for the loop's later iterations.  Both are
sufficient, not necessary, so such a VC is marked as an approximation: a model of it is a
violation only when the reference interpreter reproduces it, else the verdict is ``unknown``.

A wait whose path is true at the top level discharges every later access structurally (the
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


def _in_own_loops(wait: Site, site: Site) -> tuple | None:
    """The symbolic loops around ``wait`` that ``site`` is not inside (``()``: none; ``None``:
    the wait does not come before the site in the program).  The wait precedes every instance
    of the site of the same thread and the same iterations of the loops they share; its own
    loops end before the site."""
    if wait.index > site.index:
        return None
    shared = 0
    while shared < min(len(wait.loops), len(site.loops)) and wait.loops[shared] is site.loops[shared]:
        shared += 1
    return tuple(wait.loops[shared:])


def launch_order(b: Any, site: Site) -> None:
    """The launch-order VC of one site (a site maker of :mod:`~argus.abstract_interp.properties`)."""
    a = b.analysis
    waits = a.program.grid_waits
    if not waits:
        return
    what = global_access(site.op)
    if what is None:
        return
    before = [(w, own) for w in waits if (own := _in_own_loops(w, site)) is not None]
    message = f"{site.op.kind} {what} global memory only after the thread's grid_dependency_wait()"
    inst, hyps = a.fresh(site)
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops}}
    for w, own in before:
        if not own and sympy.sympify(issue_path(w)) is sympy.true:
            b.add(PROPERTY, site, hyps, T.TRUE, message, roles,
                  structural=f"every thread waits at {w.op.loc} before it")
            return
    hyps.append(a.value(inst, issue_path(site)))
    # a wait inside loops of its own counts through their first iteration: its path there (the
    # loops' range conditions included: the loop runs at least once) — a sufficient condition,
    # so such a VC is an approximation and a model of it a violation only if the interpreter
    # reproduces it
    options = [a.value(inst, sympy.sympify(issue_path(w)).xreplace({lp.var: lp.start for lp in own}))
               for w, own in before]
    goal = T.or_(*options) if options else T.FALSE
    approximations = tuple(f"the wait at {w.op.loc} is counted through the first iteration of its loop"
                           for w, own in before if own)
    approximations += tuple(f"the wait at {w.op.loc}, later in a loop around the access, is not counted"
                            for w in waits if w.index > site.index and w.loops and site.loops
                            and w.loops[0] is site.loops[0])
    b.add(PROPERTY, site, hyps, goal, message + ("" if before else " (no wait precedes it)"), roles,
          deps=(frozenset(), approximations))
