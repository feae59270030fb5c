"""Warp roles, register budgets and named barriers as VCs.

=================  =========================================================================
property           VC
=================  =========================================================================
``role``           per access of a register fragment inside a warp role: the fragment is not
                   the accumulator of an MMA of another role (a producer never touches the
                   consumers' accumulators) — the access is unreachable
``registers``      the ``setmaxnreg`` budgets of all warps add up to at most the register
                   file (65536 32-bit registers per SM), and every warp of a warpgroup sets
                   the same budget
``barrier``        per named barrier: the threads that reach it (per block and iteration)
                   are exactly its declared participant count, in whole warps
=================  =========================================================================

Counting threads is a sum over the block's threads (the launch size is a constant of the
specialization): each term is the site's path at that thread, so conditions on block ids,
sizes and loop counters stay symbolic.
"""

from __future__ import annotations

import weakref
from typing import Any

import sympy

from argus.abstract_interp.program import Site
from argus.ir import nodes as N
from argus.smt import terms as T

#: 32-bit registers of an SM (sm_90), the bound of the warps' ``setmaxnreg`` budgets
REGISTER_FILE = 65536
WARP = 32


_ISSUE_PATHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def issue_path(site: Site) -> Any:
    """The site's path, and for a single-issuer op the election of its issuing thread."""
    got = _ISSUE_PATHS.get(site)
    if got is None:
        elected = getattr(site.op, "elected", None)
        got = _ISSUE_PATHS[site] = site.path if elected is None else sympy.And(site.path, site.expr(elected))
    return got


def _path_at(a: Any, site: Site, values: dict, thread: int) -> T.Term:
    return a.encoder.term(issue_path(site), {**values, a.tid: T.int_const(thread)})


def _only_thread(a: Any, site: Site) -> bool:
    return sympy.sympify(issue_path(site)).free_symbols <= {a.tid}


def thread_sum(a: Any, site: Site, values: dict, per_thread: Any) -> T.Term:
    """``Σ_t [path(t)] · per_thread`` over the block's threads, at the other ``values``."""
    constant = 0
    symbolic_parts: dict[Any, int] = {}
    for t in range(a.encoder.threads):
        here = _path_at(a, site, values, t)
        if here is T.TRUE:
            constant += 1
        elif here is not T.FALSE:
            symbolic_parts[here] = symbolic_parts.get(here, 0) + 1
    parts = [T.ite(cond, n, 0) for cond, n in symbolic_parts.items()]
    total = T.add(constant, *parts) if parts else T.int_const(constant)
    return T.mul(total, per_thread) if per_thread != 1 else total


def executing_threads(a: Any, site: Site, values: dict) -> list[int] | None:
    """The threads whose path at ``site`` holds, when that does not depend on anything but the
    thread (``None`` otherwise)."""
    cache = a.__dict__.setdefault("_executing_threads", {})
    if _only_thread(a, site):
        if site.index not in cache:
            cache[site.index] = _executing(a, site, {})
        return cache[site.index]
    return _executing(a, site, values)


def _executing(a: Any, site: Site, values: dict) -> list[int] | None:
    out = []
    for t in range(a.encoder.threads):
        here = _path_at(a, site, values, t)
        if here is T.TRUE:
            out.append(t)
        elif here is not T.FALSE:
            return None
    return out


def role_of(site: Site) -> N.WarpRole | None:
    for cond in reversed(site.conditions):
        if cond.what == "role":
            return cond.op
    return None


_ROLE_THREADS: dict[tuple[Any, Any, int], tuple[int, int] | None] = {}


def role_threads(site: Site, tid: Any, threads: int) -> tuple[int, int] | None:
    """``(first, end)``: the threads of the block that run the warp roles around ``site``, when
    they are one contiguous range narrower than the block (``None`` otherwise).  A write's
    witness solves for a thread of that range: an address that depends on the thread only
    within its warpgroup (``tid % 128``) then names the role's thread, not one of another role."""
    roles = [c for c in site.conditions if c.what == "role"]
    if not roles:
        return None
    cond = sympy.And(*(c.expr for c in roles))
    key = (cond, tid, threads)
    if key not in _ROLE_THREADS:
        inside = [t for t in range(threads) if bool(cond.xreplace({tid: t}))]
        span = (inside[0], inside[-1] + 1) if inside else None
        ok = span is not None and len(inside) == span[1] - span[0] and span != (0, threads)
        _ROLE_THREADS[key] = span if ok else None
    return _ROLE_THREADS[key]


def _accumulators(a: Any) -> dict[str, N.WarpRole | None]:
    """Register buffers used as MMA accumulators, with the role of the MMA."""
    got = a.__dict__.get("_accumulators")
    if got is None:
        got = {}
        for site in a.program.sites:
            if isinstance(site.op, N.Mma):
                for view in (site.op.c, site.op.d):
                    if view.space is N.MemorySpace.REGISTER:
                        got.setdefault(view.buffer.name, role_of(site))
        a.__dict__["_accumulators"] = got
    return got


def _role_accumulators(b: Any, site: Site) -> None:
    a = b.analysis
    mine = role_of(site)
    if mine is None:
        return
    owners = _accumulators(a)
    for acc in a.accesses.get(site.index, []):
        if acc.kind not in ("read", "write") or acc.buffer.space is not N.MemorySpace.REGISTER:
            continue
        owner = owners.get(acc.buffer.name, mine)
        if owner is None or owner is mine:
            continue
        inst, hyps = a.fresh(site, view=acc.view)
        roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
                 "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops},
                 "buffer": acc.buffer.name}
        b.add("role", site, hyps, T.not_(a.active(inst, acc)),
              f"the {mine.name!r} role does not touch %{acc.buffer.name}, the accumulator of the "
              f"{owner.name!r} role's MMAs", roles)


def _register_budget(b: Any, site: Site) -> None:
    a = b.analysis
    if not isinstance(site.op, N.SetMaxNReg):
        return
    sites = [s for s in a.program.sites if isinstance(s.op, N.SetMaxNReg)]
    if site is not sites[0]:
        return
    inst, hyps = a.fresh(site)
    hyps.append(a.value(inst, issue_path(site)))
    budget: dict[int, set[int]] = {}
    for s in sites:
        threads = executing_threads(a, s, dict(inst.values))
        if threads is None:
            b.unknown("registers", s, f"the warps that execute setmaxnreg at {s.op.loc} depend on more than "
                      "the thread")
            return
        for t in threads:
            budget.setdefault(t // WARP, set()).add(s.op.registers)
    warps = (a.encoder.threads + WARP - 1) // WARP
    problems = []
    for w, regs in budget.items():
        group = range(w - w % 4, min(w - w % 4 + 4, warps))
        if len(regs) > 1 or any(budget.get(g) != regs for g in group):
            problems.append(f"warp {w} and its warpgroup set different budgets")
    used = sum(max(regs) * WARP for regs in budget.values())
    if used > REGISTER_FILE:
        problems.append(f"the budgets add up to {used} registers, more than the {REGISTER_FILE} of the register file")
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {}, "registers": used}
    b.add("registers", site, hyps, T.FALSE if problems else T.TRUE,
          "the warps' setmaxnreg budgets fit the register file and agree within each warpgroup"
          + (f" ({'; '.join(problems)})" if problems else ""), roles,
          structural=None if problems else f"{used} of {REGISTER_FILE} registers")


def named_barrier(b: Any, site: Site) -> None:
    """A named barrier is reached by exactly its declared participants."""
    a = b.analysis
    op: N.Barrier = site.op
    participants = op.participants if op.participants is not None else a.encoder.threads
    inst, hyps = a.fresh(site)
    values = dict(inst.values)
    reached = thread_sum(a, site, values, 1)
    roles = {"thread": inst.values[a.tid], "block": tuple(inst.values[s] for s in a.block_ids),
             "iteration": {lp.var.name: inst.values[lp.var] for lp in site.loops}, "reached": reached}
    goal = T.eq(reached, participants) if participants % WARP == 0 else T.FALSE
    b.add("barrier", site, [*hyps, a.value(inst, issue_path(site))], goal,
          f"named barrier {op.id} is reached by exactly its {participants} participants (whole warps)", roles)


MAKERS = (_role_accumulators, _register_budget)
