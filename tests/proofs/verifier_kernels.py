"""Kernels for the verifier tests: correct ones and mutations that each plant one bug."""

import dataclasses

import sympy

import argus.spec as A
from argus.layout_algebra import Swizzle
from argus.spec.tensor import Tensor


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),), assume=lambda n: [n >= 1])
def tagged_copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, SHIFT: A.const = 0):
    """y[i] = x[i + SHIFT]; SHIFT=1 is an off-by-one tile offset (the tag assertion catches it)."""
    A.tag(x, lambda i: (i,), "x")
    i = A.block_id(0) * 64 + A.thread_id()
    v = A.load(x.tile((1,), (i + SHIFT,)))
    out = y.tile((1,), (i,))
    A.store(v, out)
    A.assert_tag(out, lambda j, t: t == (j,), "y[j] holds x[j]")


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),), assume=lambda n: [n >= 1])
def tail_store(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, PREDICATED: A.const = True):
    """The load is predicated by its tile; PREDICATED=False stores through a raw index (no tail predicate)."""
    i = A.block_id(0) * 64 + A.thread_id()
    v = A.load(x.tile((1,), (i,)))
    if PREDICATED:
        A.store(v, y.tile((1,), (i,)))
    else:
        A.copy(v, y[i])


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),), assume=lambda n: [n >= 1])
def block_tiles(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, OVERLAP: A.const = False):
    """Each block copies its tile; OVERLAP=True makes every block write tile 0 (blocks overlap)."""
    b = 0 if OVERLAP else A.block_id(0)
    v = A.load(x.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
    A.store(v, y.tile((64,), (b,)).tile((1,), (A.thread_id(),)))


@A.kernel(threads=64)
def divergent_barrier(x: A.Global(A.f32, "64"), DIVERGENT: A.const = True):
    """A barrier under a condition that splits warp 0 (DIVERGENT) or that every thread takes."""
    limit = 16 if DIVERGENT else 64
    if A.thread_id() < limit:
        A.barrier()


@A.kernel(threads=32)
def transpose_shared(x: A.Global(A.f32, "32 32"), y: A.Global(A.f32, "32 32"), BARRIER: A.const = True):
    """y = x^T through shared memory, one column per thread; BARRIER=False drops the barrier."""
    A.tag(x, lambda i, j: (i, j), "x")
    s = A.shared(A.f32, (32, 32))
    t = A.thread_id()
    for r in A.range(32, unroll=True):
        A.copy(x.tile((1, 1), (r, t)), s.tile((1, 1), (r, t)))
    if BARRIER:
        A.barrier()
    for r in A.range(32, unroll=True):
        A.copy(s.tile((1, 1), (t, r)), y.tile((1, 1), (r, t)))
    A.barrier()
    A.assert_tag(y.tile((1, 32), (t, 0)), lambda i, j, tg: tg == (j, i), "y[i, j] holds x[j, i]")


@A.kernel(threads=64, grid=lambda: (4,), assume=lambda n: [n >= 1])
def grid_stride_copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, STRIDE: A.const = 256):
    """A grid-stride loop over tiles of 64 (a symbolic loop); STRIDE=192 makes the tiles of
    different iterations and blocks overlap."""
    A.tag(x, lambda i: (i,), "x")
    for k in A.range(A.cdiv(n, 256)):
        i = k * STRIDE + A.block_id(0) * 64 + A.thread_id()
        v = A.load(x.tile((1,), (i,)))
        out = y.tile((1,), (i,))
        A.store(v, out)
        A.assert_tag(out, lambda j, t: t == (j,), "y[j] holds x[j]")


@A.kernel(threads=64, assume=lambda n: [sympy.Eq(n % 64, 0)])
def shared_loop(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, SECOND_BARRIER: A.const = True):
    """Stage tiles through shared memory in a symbolic loop (n a multiple of 64): write, barrier,
    read a neighbour's element, barrier.  Without the second barrier the next iteration's write
    races the read."""
    A.tag(x, lambda i: (i,), "x")
    s = A.shared(A.f32, (64,))
    t = A.thread_id()
    for k in A.range(A.cdiv(n, 64)):
        A.copy(x.tile((1,), (k * 64 + t,)), s.tile((1,), (t,)))
        A.barrier()
        A.copy(s.tile((1,), ((t + 1) % 64,)), y.tile((1,), (k * 64 + t,)))
        if SECOND_BARRIER:
            A.barrier()


@A.kernel(threads=64, assume=lambda n: [sympy.Eq(n % 64, 0)])
def double_buffered(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, WRONG_STAGE: A.const = False):
    """Two shared stages alternating by iteration: stage k % 2 is rewritten every other
    iteration; a read resolves to the latest iteration that wrote its stage.  ``WRONG_STAGE``
    reads the other stage (not yet written in the first iteration)."""
    s = A.shared(A.f32, (2, 64))
    t = A.thread_id()
    A.tag(x, lambda i: (i,), "x")
    for k in A.range(A.cdiv(n, 64)):
        A.copy(x.tile((1,), (k * 64 + t,)), s[k % 2].tile((1,), (t,)))
        A.barrier()
        stage = (k + 1) % 2 if WRONG_STAGE else k % 2
        A.assert_tag(s[stage], lambda st, i, tg, k=k: tg == (k * 64 + i,), "the stage holds block k")
        A.copy(s[stage].tile((1,), ((t + 1) % 64,)), y.tile((1,), (k * 64 + t,)))


@A.kernel(threads=32)
def async_copy(x: A.Global(A.f32, "32"), y: A.Global(A.f32, "32")):
    """A cp.async copy: outside the synchronous subset the verifier handles."""
    s = A.shared(A.f32, (32,))
    A.copy(x.tile((1,), (A.thread_id(),)), s.tile((1,), (A.thread_id(),)), atom="cp.async.4")
    A.barrier()
    A.copy(s.tile((1,), (A.thread_id(),)), y.tile((1,), (A.thread_id(),)))


@A.kernel(threads=32)
def uneven_barriers(x: A.Global(A.f32, "n"), n: A.Index):
    """A loop whose iterations pass different numbers of barriers: outside what the verifier
    models (its epochs would not be closed forms of the counter)."""
    for k in A.range(n):
        if k % 2 == 0:
            A.barrier()


@A.kernel(threads=32)
def swizzled_stage(x: A.Global(A.f32, "32 32"), y: A.Global(A.f32, "32 32"), MISMATCH: A.const = False):
    """Stage a tile through swizzled shared memory; MISMATCH reads it back through a view that
    forgets the swizzle (store/load swizzle mismatch)."""
    A.tag(x, lambda i, j: (i, j), "x")
    s = A.shared(A.f32, (32, 32), swizzle=Swizzle(5, 0, 5))
    back = Tensor(dataclasses.replace(s.view, swizzle=None)) if MISMATCH else s
    t = A.thread_id()
    for r in A.range(32, unroll=True):
        A.copy(x.tile((1, 1), (r, t)), s.tile((1, 1), (r, t)))
    A.barrier()
    for r in A.range(32, unroll=True):
        A.copy(back.tile((1, 1), (r, t)), y.tile((1, 1), (r, t)))
    A.barrier()
    A.assert_tag(y.tile((1, 32), (t, 0)), lambda i, j, tg: tg == (i, j), "y[i, j] holds x[i, j]")


@A.kernel(threads=32)
def row_sum(x: A.Global(A.f32, "32 n"), y: A.Global(A.f32, "32"), n: A.Index, TAGGED: A.const = False):
    """y[t] = sum of row t of x, accumulated in a register across a symbolic loop."""
    A.tag(x, lambda i, k: (i,), "row")
    acc = A.zeros((1,), A.f32)
    for k in A.range(n):
        acc = acc + A.load(x[A.thread_id()].tile((1,), (k,)))
    out = y.tile((1,), (A.thread_id(),))
    A.store(acc, out)
    if TAGGED:
        A.assert_tag(out, lambda i, t: t == (i,), "y[i] sums row i")
