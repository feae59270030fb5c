"""Compiler policies: transformations of the traced IR, applied before anything checks it.

A policy turns a loop the author annotated into the code an expert would write by hand; the
verifier then proves the *transformed* program (DESIGN.md: "policies are transformations,
checked after they apply").  Every op a policy inserts carries ``inserted_by`` = the position of
the annotated ``range`` line, so a counterexample in inserted code points back to it.

``pipeline=S`` (software pipelining)
------------------------------------
The traced body of ``for k, st in range(a, n, pipeline=S)`` is split into its *producers* (the
asynchronous copies of iteration ``k`` into stage ``st``: TMA loads, or cp.async copies) and its
*consumers* (everything else).  With ``i = k - a`` the iteration number, stage ``i % S`` and phase
``i // S``, the loop becomes::

    prologue   for p in 0 .. S-2:   if a + p < n: issue the copies of iteration a + p
    steady     for k in a .. n-S:   issue the copies of iteration k + S - 1;  consume iteration k
    epilogue   for k in max(n-S+1, a) .. n-1:                                 consume iteration k

so each stage's copies are issued S-1 iterations ahead, and a trip count below S issues nothing
past the end (the prologue is guarded).  Synchronisation depends on the copies:

* **TMA**: a *full* and an *empty* mbarrier per stage (count 1, and the number of consumer
  threads), initialized by the producer's elected thread (+ ``fence.mbarrier_init`` and a barrier).
  Issuing iteration j: the elected thread waits for phase ``j // S - 1`` of ``empty[j % S]`` (the
  consumers released the stage; the first round passes on the initial phase), declares the
  copies' bytes with ``arrive.expect_tx`` on ``full[j % S]`` and issues them on it.  Consuming
  iteration k: every consumer waits for phase ``k // S`` of ``full[k % S]``, runs the consumers,
  then arrives on ``empty[k % S]``.
* **cp.async**: the copies of one iteration form one group (committed even when guarded off,
  and empty groups in the epilogue keep the count uniform).  Consuming iteration k starts with
  ``cp_async_wait(S - 2)`` and a barrier of the consumer threads, which also orders the previous
  iteration's reads before the refill of its stage.

``unroll=u``
------------
``for k in range(a, n)`` becomes ``u`` substituted copies of the body per iteration of a loop over
``(n - a) // u`` blocks, plus a remainder loop (unrolled too when its trip count is a constant).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import sympy

from argus import symbolic
from argus.errors import ArgusError
from argus.ir import dtypes as D
from argus.ir import nodes as N
from argus.ir.transform import Names, substitute
from argus.layout_algebra import Layout

TMA = "tma.load"
CP_ASYNC = ("cp.async", "cp.async.4", "cp.async.8", "cp.async.16")


class PolicyError(ArgusError):
    """A loop annotated with a policy that the policy cannot transform."""


def apply_policies(kernel: N.Kernel) -> N.Kernel:
    """``kernel`` with every ``pipeline=`` and ``unroll=`` loop transformed (idempotent)."""
    if not any(isinstance(op, N.For) and (op.pipeline is not None or _unroll_factor(op) is not None)
               for op in N.walk(kernel.body)):
        return kernel
    policy = _Policies(kernel)
    body = policy.region(kernel.body, ())
    return dataclasses.replace(kernel, body=body)


def _unroll_factor(loop: N.For) -> int | None:
    if loop.unroll is True:
        return -1
    if isinstance(loop.unroll, int) and not isinstance(loop.unroll, bool) and loop.unroll >= 2:
        return loop.unroll
    return None


# --------------------------------------------------------------------------- helpers


def _barrier_array(name: str, stages: int) -> N.Buffer:
    """An array of ``stages`` mbarriers (what ``argus.spec.mbarrier(count, stages=S)`` allocates)."""
    return N.Buffer(name, N.MemorySpace.SHARED, D.U64, stages, Layout((stages,), (1,)))


def _element(buffer: N.Buffer, index: Any) -> N.View:
    """The view of mbarrier ``index`` of ``buffer`` (as ``tensor[index]`` makes it)."""
    index = symbolic.normalize(index)
    return N.View(buffer, Layout(1, 0), index, N.COORDS[:1], (index,), None, None)


def _phase_handle(buffer: N.Buffer, index: Any) -> N.Handle:
    return N.Handle(f"{buffer.name}[{symbolic.normalize(index)}].phase", N.HandleKind.MBARRIER_PHASE)


def _static_bytes(view: N.View) -> int:
    size = symbolic.static_value(view.layout.size)
    if size is None:
        raise PolicyError(f"a pipelined copy into %{view.buffer.name} has a non-constant size")
    return size * view.buffer.dtype.bits // 8


def _participants(conds: tuple[Any, ...], kernel: N.Kernel) -> int:
    """How many threads of a block satisfy every condition (which may only depend on the thread id)."""
    tid = kernel.thread_id
    holds = np.ones(kernel.launch.threads, bool)
    for cond in conds:
        if cond is None or cond is sympy.true:
            continue
        stray = cond.free_symbols - {tid}
        if stray:
            raise PolicyError(f"a pipelined loop under the condition {cond}, which depends on "
                              f"{', '.join(sorted(s.name for s in stray))}: the policy needs to know which threads "
                              "consume the stages", hint="pipeline loops that all threads (or a warp role) execute")
        for t in np.flatnonzero(holds):
            holds[t] = bool(cond.xreplace({tid: sympy.Integer(int(t))}))
    return int(holds.sum())


def _used_barrier_ids(kernel: N.Kernel) -> set[int]:
    return {op.id for op in N.walk(kernel.body) if isinstance(op, N.Barrier)}


# --------------------------------------------------------------------------- the transformation


class _Policies:
    def __init__(self, kernel: N.Kernel) -> None:
        self.kernel = kernel
        self.names = Names(kernel)
        self.barrier_ids = _used_barrier_ids(kernel)

    def region(self, region: N.Region, conds: tuple[Any, ...]) -> N.Region:
        out: list[N.Op] = []
        for op in region.ops:
            match op:
                case N.For(body=body):
                    op = dataclasses.replace(op, body=self.region(body, conds))
                    if op.pipeline is not None:
                        out.extend(self.pipeline(op, conds))
                    elif _unroll_factor(op) is not None:
                        out.extend(self.unroll(op))
                    else:
                        out.append(op)
                case N.If(cond=cond, then=then, orelse=orelse):
                    out.append(dataclasses.replace(op, then=self.region(then, (*conds, cond)),
                                                   orelse=self.region(orelse, (*conds, sympy.Not(cond)))))
                case N.WarpRole(cond=cond, body=body):
                    out.append(dataclasses.replace(op, body=self.region(body, (*conds, cond))))
                case _:
                    out.append(op)
        return N.Region(tuple(out))

    # ---------------------------------------------------------------- pipelining

    def _split(self, loop: N.For) -> tuple[list[N.Copy], list[N.Op], str]:
        producers = [op for op in loop.body.ops if isinstance(op, N.Copy) and (op.atom == TMA or op.atom in CP_ASYNC)]
        consumers = [op for op in loop.body.ops if op not in producers]
        where = loop.loc
        if not producers:
            raise PolicyError("range(..., pipeline=S) has no asynchronous copy to pipeline in its body",
                              position=where, hint="issue the stage's tma_load / cp_async copies in the loop body")
        for op in consumers:
            for inner in N.walk(N.Region((op,))):
                if isinstance(inner, N.Copy) and (inner.atom == TMA or inner.atom in CP_ASYNC):
                    raise PolicyError("a pipelined copy is nested in a branch or loop of the pipelined body",
                                      position=inner.loc, hint="issue the stage's copies at the top of the loop body")
        kinds = {TMA if op.atom == TMA else "cp.async" for op in producers}
        if len(kinds) > 1:
            raise PolicyError("a pipelined loop mixes TMA loads and cp.async copies", position=where)
        defined = {op.result for op in consumers for op in N.walk(N.Region((op,))) if isinstance(op, N.ReadIndex)}
        for op in producers:
            used = set().union(*(e.free_symbols for e in _expressions(op)))
            if used & defined:
                raise PolicyError("a pipelined copy depends on a value the loop body computes", position=op.loc,
                                  hint="stage copies may only depend on the loop counter and values defined before the loop")
        return producers, consumers, kinds.pop()

    def pipeline(self, loop: N.For, conds: tuple[Any, ...]) -> list[N.Op]:
        stages = loop.pipeline
        if loop.step != 1:
            raise PolicyError(f"range(..., pipeline={stages}) with step {loop.step}: pipelined loops step by 1",
                              position=loop.loc)
        producers, consumers, kind = self._split(loop)
        participants = _participants(conds, self.kernel)
        if kind == TMA:
            return self._pipeline_tma(loop, producers, consumers, participants)
        return self._pipeline_cp_async(loop, producers, consumers, participants)

    def _sync(self, participants: int, ins: dict) -> N.Barrier:
        if participants == self.kernel.launch.threads:
            return N.Barrier(scope=N.Scope.BLOCK, **ins)
        free = [i for i in range(15, 0, -1) if i not in self.barrier_ids]
        if not free:
            raise PolicyError("no named barrier id is left for the pipeline's barrier", position=ins["loc"])
        self.barrier_ids.add(free[0])
        return N.Barrier(id=free[0], participants=participants, scope=N.Scope.BLOCK, **ins)

    def _bounds(self, loop: N.For, stages: int) -> tuple[Any, Any, Any]:
        """(start, end of the steady state, end): the steady state is [start, n - (S - 1))."""
        start, stop = loop.start, loop.stop
        steady_end = symbolic.normalize(stop - (stages - 1))
        epilogue_start = sympy.Max(symbolic.to_sympy(steady_end), symbolic.to_sympy(start))
        value = symbolic.static_value(epilogue_start) if not epilogue_start.free_symbols else None
        return start, steady_end, value if value is not None else epilogue_start

    def _body(self, ops: list[N.Op], var: sympy.Symbol, value: Any) -> list[N.Op]:
        return substitute(ops, {var: value}, self.names)

    def _prologue_guard(self, iteration: Any, stop: Any, ops: list[N.Op], ins: dict) -> list[N.Op]:
        cond = sympy.Lt(symbolic.to_sympy(iteration), symbolic.to_sympy(stop))
        if cond is sympy.true:
            return ops
        if cond is sympy.false:
            return []
        return [N.If(cond=cond, then=N.Region(tuple(ops)), **ins)]

    def _pipeline_tma(self, loop: N.For, producers: list[N.Copy], consumers: list[N.Op],
                      participants: int) -> list[N.Op]:
        stages, var, loc = loop.pipeline, loop.var, loop.loc
        ins = {"loc": loc, "inserted_by": loc}
        elected = {op.elected for op in producers}
        if len(elected) != 1 or None in elected:
            raise PolicyError("the TMA copies of a pipelined loop must be issued by one elected thread",
                              position=loop.loc)
        issuer = elected.pop()
        for op in producers:
            if op.mbarrier is not None:
                raise PolicyError("a TMA copy inside range(..., pipeline=S) names an mbarrier; the policy "
                                  "allocates them", position=op.loc, hint="leave the mbarrier argument out")
        nbytes = sum(_static_bytes(op.dst) for op in producers)
        full = _barrier_array(self.names.fresh("full"), stages)
        empty = _barrier_array(self.names.fresh("empty"), stages)
        start, steady_end, epilogue_start = self._bounds(loop, stages)

        def slot(iteration: Any) -> Any:
            return symbolic.mod(symbolic.normalize(iteration - start), stages)

        def rnd(iteration: Any) -> Any:
            return symbolic.floordiv(symbolic.normalize(iteration - start), stages)

        def issue(iteration: Any, wait_empty: bool) -> list[N.Op]:
            s = slot(iteration)
            ops: list[N.Op] = []
            if wait_empty:
                phase = symbolic.normalize(rnd(iteration) - 1)
                ops.append(N.MbarrierWait(bar=_element(empty, s), parity=symbolic.mod(phase, 2), phase=phase,
                                          handle=_phase_handle(empty, s), elected=issuer, **ins))
            ops.append(N.MbarrierArrive(bar=_element(full, s), expect_tx=nbytes, count=1, elected=issuer, **ins))
            for op in self._body(producers, var, iteration):
                ops.append(dataclasses.replace(op, mbarrier=_element(full, s), handle=_phase_handle(full, s)))
            return ops

        def consume(iteration: sympy.Symbol) -> list[N.Op]:
            s, phase = slot(iteration), rnd(iteration)
            return [N.MbarrierWait(bar=_element(full, s), parity=symbolic.mod(phase, 2), phase=phase,
                                   handle=_phase_handle(full, s), **ins),
                    *self._body(consumers, var, iteration),
                    N.MbarrierArrive(bar=_element(empty, s), count=1, **ins)]

        out: list[N.Op] = [N.Alloc(buffer=full, scope=N.Scope.BLOCK, **ins),
                           N.Alloc(buffer=empty, scope=N.Scope.BLOCK, **ins)]
        for bar, count in ((full, 1), (empty, participants)):
            for s in range(stages):
                out.append(N.MbarrierInit(bar=_element(bar, s), count=count, elected=issuer, **ins))
        out.append(N.Fence(fence="mbarrier_init", elected=issuer, **ins))
        out.append(self._sync(participants, ins))
        for p in range(stages - 1):
            iteration = symbolic.normalize(start + p)
            out.extend(self._prologue_guard(iteration, loop.stop, issue(iteration, False), ins))
        k = self.names.symbol(var.name + "_")
        ahead = symbolic.normalize(k + stages - 1)
        out.append(N.For(var=k, start=start, stop=steady_end, step=1,
                         body=N.Region((*issue(ahead, True), *consume(k))), unroll=loop.unroll, **ins))
        k = self.names.symbol(var.name + "_")
        out.append(N.For(var=k, start=epilogue_start, stop=loop.stop, step=1, body=N.Region(tuple(consume(k))), **ins))
        return out

    def _pipeline_cp_async(self, loop: N.For, producers: list[N.Copy], consumers: list[N.Op],
                           participants: int) -> list[N.Op]:
        stages, var, loc = loop.pipeline, loop.var, loop.loc
        ins = {"loc": loc, "inserted_by": loc}
        if stages < 2:
            raise PolicyError("a cp.async pipeline needs at least 2 stages", position=loc,
                              hint="use pipeline=2 or more (or a plain loop)")
        handles = {op.handle for op in producers}
        if len(handles) != 1:
            raise PolicyError("the cp.async copies of a pipelined loop belong to different groups", position=loc,
                              hint="do not commit inside a pipelined loop: the policy commits one group per stage")
        for op in consumers:
            for inner in N.walk(N.Region((op,))):
                if isinstance(inner, (N.AsyncCommit, N.AsyncWait)) and N.HandleKind.CP_ASYNC_GROUP in (
                        getattr(getattr(inner, "handle", None), "kind", None), getattr(inner, "group", None)):
                    raise PolicyError("a pipelined cp.async loop commits or waits itself; the policy does that",
                                      position=inner.loc)
        group = handles.pop()
        start, steady_end, epilogue_start = self._bounds(loop, stages)

        def commit() -> N.AsyncCommit:
            return N.AsyncCommit(handle=group, **ins)

        def wait() -> list[N.Op]:
            return [N.AsyncWait(group=N.HandleKind.CP_ASYNC_GROUP, pending=stages - 2, handles=(group,), **ins),
                    self._sync(participants, ins)]

        out: list[N.Op] = []
        for p in range(stages - 1):
            iteration = symbolic.normalize(start + p)
            out.extend(self._prologue_guard(iteration, loop.stop, self._body(producers, var, iteration), ins))
            out.append(commit())
        k = self.names.symbol(var.name + "_")
        ahead = symbolic.normalize(k + stages - 1)
        out.append(N.For(var=k, start=start, stop=steady_end, step=1, unroll=loop.unroll, **ins, body=N.Region((
            *wait(), *self._body(producers, var, ahead), commit(), *self._body(consumers, var, k)))))
        k = self.names.symbol(var.name + "_")
        out.append(N.For(var=k, start=epilogue_start, stop=loop.stop, step=1, **ins, body=N.Region((
            *wait(), commit(), *self._body(consumers, var, k)))))
        return out

    # ---------------------------------------------------------------- unrolling

    def unroll(self, loop: N.For) -> list[N.Op]:
        factor = _unroll_factor(loop)
        start, stop, step = loop.start, loop.stop, loop.step
        trip = symbolic.ceil_div(symbolic.normalize(stop - start), step)
        ins = {"loc": loop.loc, "inserted_by": loop.loc}
        static_trip = symbolic.static_value(trip)
        if factor == -1:
            if static_trip is None:
                raise PolicyError("unroll=True needs constant loop bounds", position=loop.loc,
                                  hint="use unroll=k to unroll k times with a remainder loop")
            factor = max(static_trip, 1)
        if static_trip is not None and static_trip <= 0:
            return []
        blocks = symbolic.floordiv(trip, factor)
        body = list(loop.body.ops)
        out: list[N.Op] = []
        ko = self.names.symbol(loop.var.name + "_")
        copies: list[N.Op] = []
        for u in range(factor):
            copies += self._body(body, loop.var, symbolic.normalize(start + (ko * factor + u) * step))
        if symbolic.static_value(blocks) != 0:
            if symbolic.static_value(blocks) == 1:
                copies = substitute(copies, {ko: 0})
                out.extend(copies)
            else:
                out.append(N.For(var=ko, start=0, stop=blocks, step=1, body=N.Region(tuple(copies)), **ins))
        rest_start = symbolic.normalize(start + blocks * factor * step)
        rest = symbolic.static_value(symbolic.normalize(trip - blocks * factor))
        if rest is not None:
            for r in range(rest):
                out += self._body(body, loop.var, symbolic.normalize(rest_start + r * step))
        else:
            kr = self.names.symbol(loop.var.name + "_")
            out.append(N.For(var=kr, start=rest_start, stop=stop, step=step,
                             body=N.Region(tuple(self._body(body, loop.var, kr))), **ins))
        return out


def _expressions(op: N.Op) -> list[sympy.Basic]:
    """Every sympy expression among an op's fields and views."""
    found: list[sympy.Basic] = []

    def visit(value: Any) -> None:
        if isinstance(value, sympy.Basic):
            found.append(value)
        elif isinstance(value, N.View):
            visit((value.offset, value.coords, value.valid))
        elif isinstance(value, tuple):
            for v in value:
                visit(v)

    for f in dataclasses.fields(op):
        visit(getattr(op, f.name))
    return found
