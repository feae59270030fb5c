"""A shipped buggy kernel: the transpose of ``examples/transpose_swizzled.py`` without the
barrier between the shared-memory writes and the transposed reads.

A warp reads a column of the shared tile that three other warps write: with no barrier in
between, the read races with those writes.  ``argus verify`` refutes the race VC and prints
the counterexample (block, the two threads, the element, both program points), replayed on
the reference interpreter.
"""

import argus.spec as A
from argus.layout_algebra import Swizzle

TILE = 32


@A.kernel(threads=128, grid=lambda M, N: (A.cdiv(N, 32), A.cdiv(M, 32)))
def transpose_race(x: A.Global(A.f32, "M N"), y: A.Global(A.f32, "N M")):
    tile_row, tile_col = A.block_id(1), A.block_id(0)
    s = A.shared(A.f32, (TILE, TILE), swizzle=Swizzle(5, 0, 5))
    lane, warp = A.lane_id(), A.warp_id()
    src = x.tile((TILE, TILE), (tile_row, tile_col))
    for r in A.range(8, unroll=True):
        A.copy(src.tile((1, 1), (warp + 4 * r, lane)), s.tile((1, 1), (warp + 4 * r, lane)))
    # planted bug: the barrier that orders these writes before the reads below is missing
    dst = y.tile((TILE, TILE), (tile_col, tile_row))
    for r in A.range(8, unroll=True):
        A.copy(s.tile((1, 1), (lane, warp + 4 * r)), dst.tile((1, 1), (warp + 4 * r, lane)))
