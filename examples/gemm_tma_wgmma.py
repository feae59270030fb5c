"""Hopper GEMM: TMA loads through an mbarrier pipeline, wgmma from shared memory (C = A · Bᵀ).

One warpgroup (128 threads) computes a 64 x 64 tile of C with ``wgmma.m64n64k16`` reading both
operands from shared memory.  The k-blocks (BK = 64 bf16 = one 128-byte swizzle row) stream
through ``STAGES`` shared-memory stages, written by TMA in the 128B swizzle mode the wgmma
descriptors read.  The loop is written plainly — issue the stage's two TMA loads, multiply — and
``range(..., pipeline=STAGES)`` makes the pipeline: full/empty mbarriers per stage, loads issued
STAGES-1 k-blocks ahead by thread 0, each stage released after its MMAs.  Partial tiles of M and
N arrive zero-filled from TMA and are not stored; K is a multiple of BK (declared).

Invariants (tags): ``a`` carries ``(i, k)``, ``b`` carries ``(j, k)``; when its wait returns, stage
``st`` holds k-block ``kt`` of both operands; every wgmma pairs equal ``k``; ``c[i, j]`` carries
``(i, j)``.
"""

from sympy import Eq

import argus.spec as A
from argus.layout_algebra.hopper import SwizzleMode

ATOM = "wgmma.m64n64k16.bf16"
SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)  # on bf16 element offsets


@A.kernel(threads=128, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda K, BK: [Eq(K % BK, 0), K >= BK])
def gemm_tma_wgmma(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
                   BM: A.const = 64, BN: A.const = 64, BK: A.const = 64, STAGES: A.const = 3):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    bm, bn = A.block_id(1), A.block_id(0)
    sa = A.shared(A.bf16, (STAGES, BM, BK), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (STAGES, BN, BK), swizzle=SWIZZLE_128B)
    acc = A.mma_fragment(ATOM, "c")
    for kt, st in A.range(a.shape[1] // BK, pipeline=STAGES):
        A.tma_load(a.tile((BM, BK), (bm, kt)), sa[st])
        A.tma_load(b.tile((BN, BK), (bn, kt)), sb[st])
        if (bm + 1) * BM <= a.shape[0]:
            A.assert_tag(sa[st], lambda s, i, k, tg, kt=kt: tg == (bm * BM + i, kt * BK + k), "stage holds k-block kt")
        if (bn + 1) * BN <= b.shape[0]:
            A.assert_tag(sb[st], lambda s, j, k, tg, kt=kt: tg == (bn * BN + j, kt * BK + k), "stage holds k-block kt")
        for ks in A.range(BK // 16, unroll=True):
            A.mma(ATOM, sa[st].tile((BM, 16), (0, ks)), sb[st].tile((BN, 16), (0, ks)), acc)
        A.wgmma_commit()
        A.wgmma_wait(0)  # the stage's wgmmas retired before the policy releases the stage
    mine = A.mma_partition(ATOM, "c", c.tile((BM, BN), (bm, bn)))
    A.store(acc, mine)
    A.assert_tag(mine, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")
