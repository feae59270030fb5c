"""Small kernels used by the front-end tests (kept in a module so their source is readable)."""

import argus.spec as A


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),))
def branchy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), SCALE: A.const = 2):
    t = x.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    v = A.load(t)
    if A.thread_id() < 32:
        v = v * SCALE
    else:
        v = v + 1.0
    if SCALE > 1:  # static: decided while tracing
        v = v + 0.5
    A.store(v, y.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))


@A.kernel(threads=32)
def summing(x: A.Global(A.f32, "K 32"), out: A.Global(A.f32, "32"), K: A.const = 4):
    acc = A.zeros((1,), A.f32)
    for k in A.range(K):
        acc = acc + A.load(x.tile((1, 1), (k, A.thread_id()))[0])
    A.store(acc, out.tile((1,), (A.thread_id(),)))


@A.kernel(threads=32)
def carried_integer(x: A.Global(A.f32, "n")):
    phase = 0
    for _k in A.range(4):
        phase = 1 - phase
    A.store(A.zeros((1,), A.f32), x.tile((1,), (phase,)))


@A.kernel(threads=32)
def uses_while(x: A.Global(A.f32, "n")):
    while True:
        pass


@A.kernel(threads=32)
def divergent_barrier(x: A.Global(A.f32, "n")):
    if A.thread_id() < 16:
        A.barrier()


@A.kernel(threads=64)
def warp_uniform_barrier(x: A.Global(A.f32, "n")):
    if A.warp_id() == 0:
        A.barrier()


@A.kernel(threads=32)
def shape_mismatch(x: A.Global(A.f32, "n")):
    a = A.zeros((2,), A.f32)
    b = A.zeros((4,), A.f32)
    c = a + b  # noqa: F841
