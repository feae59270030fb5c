"""Kernels for the interpreter tests: correct ones and ones with planted bugs."""

import argus.spec as A


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),))
def tiled_copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n")):
    i = A.block_id(0) * 64 + A.thread_id()
    v = A.load(x.tile((1,), (i,)))  # tiles predicate the partial last block
    A.store(v, y.tile((1,), (i,)))


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),))
def raw_index_copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n")):
    i = A.block_id(0) * 64 + A.thread_id()
    v = A.fragment((1,), A.f32)
    A.copy(x[i], v)  # planted bug: indexing is not bounds-predicated
    A.copy(v, y[i])


@A.kernel(threads=64)
def rotate_through_shared(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "64"), SYNC: A.const = True):
    s = A.shared(A.f32, (64,))
    t = A.thread_id()
    A.copy(x.tile((1,), (t,)), s.tile((1,), (t,)))
    if SYNC:
        A.barrier()
    A.copy(s.tile((1,), ((t + 1) % 64,)), y.tile((1,), (t,)))


@A.kernel(threads=64)
def warp_zero_barrier(x: A.Global(A.f32, "64")):
    if A.warp_id() == 0:
        A.barrier()


@A.kernel(threads=32)
def reads_uninitialized(x: A.Global(A.f32, "32")):
    r = A.fragment((2,), A.f32)
    A.store(r.tile((1,), (1,)), x.tile((1,), (A.thread_id(),)))


@A.kernel(threads=32)
def transpose_tagged(x: A.Global(A.f32, "32 32"), y: A.Global(A.f32, "32 32"), WRONG: A.const = False):
    """y = x^T through shared memory, one column per thread; y[i, j] must hold x[j, i]."""
    A.tag(x, lambda i, j: (i, j), "x")
    s = A.shared(A.f32, (32, 32))
    t = A.thread_id()
    for r in A.range(32, unroll=True):
        A.copy(x.tile((1, 1), (r, t)), s.tile((1, 1), (r, t)))
    A.barrier()
    for r in A.range(32, unroll=True):
        src = s.tile((1, 1), (t, r)) if not WRONG else s.tile((1, 1), (r, t))
        A.copy(src, y.tile((1, 1), (r, t)))
    A.barrier()
    out = y.tile((1, 32), (t, 0))
    A.assert_tag(out, lambda i, j, tg: tg == (j, i), "y[i, j] holds x[j, i]")
