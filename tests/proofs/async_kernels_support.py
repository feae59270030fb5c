"""Small kernels for the asynchrony mutants (each correct by default, one planted bug per const),
IR-level mutations of the Hopper examples, and a verification restricted to chosen properties
(the examples' other VCs — tags through MMAs — are not what these tests are about)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import sympy

import argus.spec as A
from argus.ir import nodes as N

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import gemm_tma_wgmma
import gemm_warp_specialized
from proof_support import source_line

ROWS, COLS = 64, 32


line_of = source_line  # the line of a kernel's source containing a text


# --------------------------------------------------------------------------- kernels


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, ROWS),))
def cp_async_pipeline(x: A.Global(A.f32, "M K"), y: A.Global(A.f32, "M 32"), WAIT_ALL_BUT: A.const = 1,
                      SECOND_BARRIER: A.const = True):
    """Double-buffered cp.async: thread t copies row t of k-tile kt + 1 while every thread reads
    its neighbour's row of k-tile kt.  ``WAIT_ALL_BUT=2`` leaves k-tile kt in flight (missing
    cp.async wait); ``SECOND_BARRIER=False`` refills a stage other threads still read."""
    n = x.shape[1] // COLS
    s = A.shared(A.f32, (2, ROWS, COLS))
    t = A.thread_id()
    m0 = A.block_id(0)
    acc = A.zeros((1, COLS), A.f32)
    A.cp_async(x.tile((ROWS, COLS), (m0, 0)).tile((1, COLS), (t, 0)), s[0].tile((1, COLS), (t, 0)))
    A.cp_async_commit()
    for kt in A.range(n):
        if kt + 1 < n:
            A.cp_async(x.tile((ROWS, COLS), (m0, kt + 1)).tile((1, COLS), (t, 0)),
                       s[(kt + 1) % 2].tile((1, COLS), (t, 0)))
        A.cp_async_commit()
        A.cp_async_wait(WAIT_ALL_BUT)
        A.barrier()
        acc = acc + A.load(s[kt % 2].tile((1, COLS), ((t + 1) % ROWS, 0)))
        if SECOND_BARRIER:
            A.barrier()
    A.store(acc, y.tile((ROWS, COLS), (m0, 0)).tile((1, COLS), (t, 0)))


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, ROWS),))
def first_tiles(x: A.Global(A.f32, "M K"), y: A.Global(A.f32, "M 32"), STAGES: A.const = 3,
                CLAMPED: A.const = True):
    """The sum of the first min(n, STAGES) k-tiles, one stage each through TMA; unclamped, the
    consumer waits for STAGES stages even when the trip count n is smaller (a deadlock)."""
    n = A.cdiv(x.shape[1], COLS)
    s = A.shared(A.f32, (STAGES, ROWS, COLS))
    full = A.mbarrier(1, stages=STAGES)
    A.mbarrier_init(full)
    t = A.thread_id()
    m0 = A.block_id(0)
    loaded = sympy.Min(n, STAGES)
    for kt in A.range(loaded):
        A.arrive_expect_tx(full[kt], A.transaction_bytes(s[kt]))
        A.tma_load(x.tile((ROWS, COLS), (m0, kt)), s[kt], full[kt])
    acc = A.zeros((1, COLS), A.f32)
    for kt in A.range(loaded if CLAMPED else STAGES):
        A.wait(full[kt], phase=0)
        acc = acc + A.load(s[kt].tile((1, COLS), (t, 0)))
    A.store(acc, y.tile((ROWS, COLS), (m0, 0)).tile((1, COLS), (t, 0)))


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, ROWS),))
def doubled_by_tma_store(x: A.Global(A.f32, "M 32"), y: A.Global(A.f32, "M 32"), FENCE: A.const = True):
    """y = 2 x: each thread doubles a row into shared memory; one TMA store writes the box.  Without
    ``fence.proxy.async`` the store (async proxy) may not see the threads' ordinary writes."""
    s = A.shared(A.f32, (ROWS, COLS))
    t = A.thread_id()
    v = A.load(x.tile((ROWS, COLS), (A.block_id(0), 0)).tile((1, COLS), (t, 0)))
    A.store(v * 2.0, s.tile((1, COLS), (t, 0)))
    if FENCE:
        A.fence_proxy_async()
    A.barrier()
    A.tma_store(s, y.tile((ROWS, COLS), (A.block_id(0), 0)))
    A.tma_store_commit()
    A.tma_store_wait(0)


@A.kernel(threads=128)
def halves(x: A.Global(A.f32, "128"), y: A.Global(A.f32, "128"), PARTICIPANTS: A.const = 64):
    """Each half of the block rotates its 64 elements through shared memory behind its own named
    barrier; ``PARTICIPANTS`` other than 64 leaves the first barrier unbalanced."""
    s = A.shared(A.f32, (128,))
    t = A.thread_id()
    A.copy(x.tile((1,), (t,)), s.tile((1,), (t,)))
    if A.warp_id() < 2:
        A.named_barrier(1, PARTICIPANTS)
        A.copy(s.tile((1,), ((t + 1) % 64,)), y.tile((1,), (t,)))
    else:
        A.named_barrier(2, 64)
        A.copy(s.tile((1,), (64 + (t + 1) % 64,)), y.tile((1,), (t,)))


# --------------------------------------------------------------------------- IR mutations


def _replace_ops(region: N.Region, fn) -> N.Region:
    out = []
    for op in region.ops:
        for f in dataclasses.fields(op):
            value = getattr(op, f.name)
            if isinstance(value, N.Region):
                op = dataclasses.replace(op, **{f.name: _replace_ops(value, fn)})
        out.extend(fn(op))
    return N.Region(tuple(out))


def _with_body(kernel: N.Kernel, body: N.Region) -> N.Kernel:
    return dataclasses.replace(kernel, body=body)


def descriptor_mismatch(kernel: N.Kernel, swizzle) -> N.Kernel:
    """The wgmma operands read their shared buffers through ``swizzle`` (a descriptor mode other
    than the TMA boxes' that filled them)."""

    def fn(op):
        if isinstance(op, N.Mma):
            return [dataclasses.replace(op, a=dataclasses.replace(op.a, swizzle=swizzle),
                                        b=dataclasses.replace(op.b, swizzle=swizzle))]
        return [op]

    return _with_body(kernel, _replace_ops(kernel.body, fn))


def producer_writes_accumulator(kernel: N.Kernel) -> N.Kernel:
    """The producer role also zero-fills the consumers' accumulator fragment."""
    fill = next(op for op in N.walk(kernel.body) if isinstance(op, N.Fill))

    def fn(op):
        if isinstance(op, N.WarpRole) and op.name == "producer":
            ops = list(op.body.ops)
            return [dataclasses.replace(op, body=N.Region((ops[0], fill, *ops[1:])))]
        return [op]

    return _with_body(kernel, _replace_ops(kernel.body, fn))


def wgmma_wait_pending(kernel: N.Kernel, pending: int) -> N.Kernel:
    """Every ``wgmma_wait`` leaves ``pending`` groups in flight (the last MMAs still own the
    accumulator when it is stored)."""

    def fn(op):
        if isinstance(op, N.AsyncWait) and op.group is N.HandleKind.WGMMA_GROUP:
            return [dataclasses.replace(op, pending=pending)]
        return [op]

    return _with_body(kernel, _replace_ops(kernel.body, fn))


WS = gemm_warp_specialized.gemm_ws
TMA_WGMMA = gemm_tma_wgmma.gemm_tma_wgmma


# --------------------------------------------------------------------------- verification


def verify_properties(kernel: N.Kernel, properties: set[str]):
    """Discharge the kernel's VCs of ``properties`` only, judged and explained (minimized
    counterexamples, replayed on the interpreter) as ``verify_kernel`` does."""
    from argus.abstract_interp import asynchrony
    from argus.abstract_interp import properties as P
    from argus.abstract_interp.analysis import Analysis

    analysis = Analysis(kernel)
    builder = P._Builder(analysis)  # only the site makers of the asynchrony model (and barriers)
    for site in analysis.program.sites:
        if site.index not in analysis.unsupported:
            asynchrony.properties(builder, site)
            if isinstance(site.op, N.Barrier):
                P._barrier(builder, site)
    return discharge(kernel, analysis, [vc for vc in builder.vcs if vc.property in properties])


def discharge(kernel: N.Kernel, analysis, vcs) -> list:
    """``vcs`` of ``analysis`` discharged with z3, judged and explained as ``verify_kernel``
    does (minimized counterexamples, replayed on the interpreter)."""
    from argus.proofs import verify as V
    from argus.proofs.provers import LocalProver

    prover = LocalProver("z3")
    results, pending = [], {}
    try:
        for vc in vcs:
            result = V._discharge(vc, prover, None, None, kernel)
            V._judge(result, {}, pending)
            results.append(result)
        for (_, _, trusted), group in pending.items():
            V._explain(group, trusted, analysis, kernel, True, True, prover)
    finally:
        prover.close()
    return results
