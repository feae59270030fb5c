"""Kernels with declared assumptions about sizes and index tensors."""

import argus.spec as A


@A.kernel(threads=32, assume=lambda n, ids, E: [A.divisible(n, 4), A.ids_in_range(ids, 0, E), A.aligned(ids, 16)])
def gather_rows(ids: A.Global(A.i32, "n"), out: A.Global(A.i32, "n"), n: A.Index, E: A.Index):
    t = A.thread_id()
    if t < n:
        A.copy(ids.tile((1,), (t,)), out.tile((1,), (t,)))


@A.kernel(threads=32, assume=lambda offsets: [A.monotone(offsets)])
def segments(offsets: A.Global(A.i32, "S"), out: A.Global(A.i32, "S")):
    t = A.thread_id()
    if t < 8:
        A.copy(offsets.tile((1,), (t,)), out.tile((1,), (t,)))
