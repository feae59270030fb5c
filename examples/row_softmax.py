"""Row softmax with warp reductions: y[i, :] = softmax(x[i, :]) for rows of 64 floats.

Sixteen lanes share a row (each holds 4 consecutive elements), so a warp handles two rows and
a block of four warps eight.  The row maximum and the row sum are a thread-local reduction of
the 4 values followed by an xor butterfly over the 16 lanes of the row (masks 8, 4, 2, 1);
``exp`` is ``exp2`` of ``(x - max) * log2(e)``.

Invariant (tags): elements are tagged with their row only.  A reduction keeps the fields on
which everything it combined agrees, and math keeps a tag when its operands agree, so
``y[i, j]`` carries ``(i,)`` exactly when every value it depends on came from row ``i``: a
butterfly that crossed into the other row of the warp (``MIX_ROWS``, mask 16) leaves the
result untagged and the final assertion fails at the store's block, thread and element.
"""

import argus.spec as A

COLS = 64
LOG2E = 1.4426950408889634


@A.kernel(threads=128, grid=lambda R: (A.cdiv(R, 8),))
def row_softmax(x: A.Global(A.f32, "R 64"), y: A.Global(A.f32, "R 64"), MIX_ROWS: A.const = False):
    A.tag(x, lambda i, j: (i,), "row")
    row = A.block_id(0) * 8 + A.thread_id() // 16
    part = A.lane_id() % 16  # this lane's 4 columns: 4*part .. 4*part+3
    masks = (16, 8, 4, 2, 1) if MIX_ROWS else (8, 4, 2, 1)
    v = A.load(x.tile((1, 4), (row, part)))
    m = A.reduce(v, "max", across_lanes=masks)
    e = A.exp2((v - A.broadcast(m, (1, 4))) * LOG2E)
    total = A.reduce(e, "add", across_lanes=masks)
    out = y.tile((1, 4), (row, part))
    A.store(e / A.broadcast(total, (1, 4)), out)
    A.assert_tag(out, lambda i, j, t: t == (i,), "y[i, j] depends on row i only")
