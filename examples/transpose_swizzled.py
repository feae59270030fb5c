"""Matrix transpose through a swizzled shared-memory tile: y = xᵀ for any M x N.

A block moves one 32x32 tile.  Each thread reads eight elements of a tile column-strip of x
(coalesced: a warp reads one row), writes them to shared memory, and after the barrier reads
the transposed elements back (a warp reads one *column* of the tile) and writes y.  Without
a swizzle that column read hits one bank 32 times; ``Swizzle(5, 0, 5)`` xors the row into the
column bits of every element address, so the 32 elements of a column lie in 32 banks.

Invariants (tags): ``x`` is tagged with its coordinate ``(i, j)``; after the barrier every
shared element ``s[r, c]`` holds ``x[row0 + r, col0 + c]``; finally ``y[i, j]`` holds
``x[j, i]``.  Partial tiles at the edges are predicated, no divisibility is assumed.
"""

import argus.spec as A
from argus.layout_algebra import Swizzle

TILE = 32
SWIZZLE = Swizzle(5, 0, 5)  # element units: row bits 5..9 xor-ed into column bits 0..4


@A.kernel(threads=128, grid=lambda M, N: (A.cdiv(N, 32), A.cdiv(M, 32)))
def transpose(x: A.Global(A.f32, "M N"), y: A.Global(A.f32, "N M"), SWIZZLED: A.const = True):
    A.tag(x, lambda i, j: (i, j), "x")
    tile_row, tile_col = A.block_id(1), A.block_id(0)
    s = A.shared(A.f32, (TILE, TILE), swizzle=SWIZZLE if SWIZZLED else None)
    lane, warp = A.lane_id(), A.warp_id()
    src = x.tile((TILE, TILE), (tile_row, tile_col))
    for r in A.range(8, unroll=True):  # warp w moves rows w, w+4, ..., one element per lane
        A.copy(src.tile((1, 1), (warp + 4 * r, lane)), s.tile((1, 1), (warp + 4 * r, lane)))
    A.barrier()
    M, N = x.shape
    if tile_row * TILE + warp < M and tile_col * TILE + lane < N:  # elements of x that exist
        A.assert_tag(s.tile((1, 1), (warp, lane)),
                     lambda i, j, t: t == (tile_row * TILE + warp, tile_col * TILE + lane),
                     "the shared tile holds the x tile")
    dst = y.tile((TILE, TILE), (tile_col, tile_row))
    for r in A.range(8, unroll=True):  # dst row warp + 4r, column lane  <-  s[lane, warp + 4r]
        A.copy(s.tile((1, 1), (lane, warp + 4 * r)), dst.tile((1, 1), (warp + 4 * r, lane)))
    A.assert_tag(dst, lambda i, j, t: t == (j, i), "y[i, j] holds x[j, i]")
