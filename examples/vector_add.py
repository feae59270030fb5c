"""Vector add with a tail: c[i] = a[i] + b[i] for any n (no divisibility assumed).

Invariant: the value written to c[i] was computed from a[i] and b[i] (tags carry the source
index; the elementwise rule keeps it because both operands agree).
"""

import argus.spec as A


@A.kernel(threads=128, grid=lambda n, BLOCK: (A.cdiv(n, BLOCK),), assume=lambda n: [n >= 1])
def vector_add(
    a: A.Global(A.f32, "n"),
    b: A.Global(A.f32, "n"),
    c: A.Global(A.f32, "n"),
    n: A.Index,
    BLOCK: A.const = 128,
):
    A.tag(a, lambda i: (i,), "a")
    A.tag(b, lambda i: (i,), "b")
    i = A.block_id(0) * BLOCK + A.thread_id()
    mine = a.tile((BLOCK,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    x = A.load(mine)
    y = A.load(b.tile((BLOCK,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
    s = x + y
    if i < n:  # past the end, x and y are fill values and carry no tag
        A.assert_tag(s, lambda j, t: t == (i,), "sum pairs a[i] with b[i]")
    out = c.tile((BLOCK,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    A.store(s, out)
    A.assert_tag(out, lambda j, t: t == (j,), "c[j] holds the sum for index j")
