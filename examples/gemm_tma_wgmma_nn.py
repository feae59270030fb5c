"""Hopper GEMM with B row-major (C = A · B, B given K x N): wgmma reads B MN-major.

The structure is that of ``gemm_tma_wgmma.py`` (one warpgroup, a ``BM x BN`` tile of C, TMA
loads through a ``range(..., pipeline=STAGES)`` mbarrier ring, ``wgmma`` from 128B-swizzled
shared memory); what differs is the B operand.  ``b`` is ``K x N`` with N contiguous (what
``torch.matmul(a, b)`` takes), so a stage of B is ``BN / 64`` TMA boxes of ``BK x 64``: the 128B
swizzle allows at most 64 16-bit elements (128 bytes) along a box's contiguous dimension.  Each
box lands as ``BK`` rows of 64 N-contiguous elements, the MN-major swizzle atom of wgmma (8
K-rows of 128 bytes, atoms of 8 rows one after the other along K).  The wgmma operand is the
``BN x 16`` view of one K step across the boxes,
``sb[st].tile((BN // 64, 16, 64), (0, ks, 0)).permute((2, 0), 1)`` — element ``(n, k)`` is
``sb[st, n // 64, 16 ks + k, n % 64]`` — which the descriptor describes as MN-major (the
instruction's transpose bit for B): leading byte offset = the distance of two boxes,
stride byte offset = 8 K-rows (1024 bytes).

Invariants (tags): ``a`` carries ``(i, k)``, ``b[k, j]`` carries ``(j, k)`` (k last, as every
MMA operand); when its wait returns, stage ``st`` holds k-block ``kt`` of both operands (the
box ``q`` of B columns ``64 q ..``); every wgmma pairs equal ``k``; ``c[i, j]`` carries
``(i, j)``.  Partial tiles of M and N arrive zero-filled from TMA and are not stored; K is a
multiple of BK and N of 8 (the 16-byte row pitch TMA needs), both declared.
"""

from sympy import Eq

import argus.spec as A
from argus.layout_algebra.hopper import SwizzleMode

SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)  # on bf16 element offsets
BOX = 64  # 16-bit elements in one 128-byte swizzle row: the widest TMA box of the 128B mode


@A.kernel(threads=128, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda K, N, BK: [Eq(K % BK, 0), K >= BK, Eq(N % 8, 0)])
def gemm_tma_wgmma_nn(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "K N"), c: A.Global(A.f32, "M N"),
                      BM: A.const = 64, BN: A.const = 128, BK: A.const = 64, STAGES: A.const = 3):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda k, j: (j, k), "B")
    bm, bn = A.block_id(1), A.block_id(0)
    sa = A.shared(A.bf16, (STAGES, BM, BK), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (STAGES, BN // BOX, BK, BOX), swizzle=SWIZZLE_128B)  # BN / 64 boxes of BK x 64
    atom = f"wgmma.m64n{BN}k16.bf16"  # one wgmma covers the BN columns
    acc = A.mma_fragment(atom, "c")
    for kt, st in A.range(a.shape[1] // BK, pipeline=STAGES):
        A.tma_load(a.tile((BM, BK), (bm, kt)), sa[st])
        for q in A.range(BN // BOX, unroll=True):
            A.tma_load(b.tile((BK, BOX), (kt, bn * (BN // BOX) + q)), sb[st, q])
        if (bm + 1) * BM <= a.shape[0]:
            A.assert_tag(sa[st], lambda s, i, k, tg, kt=kt: tg == (bm * BM + i, kt * BK + k), "stage holds k-block kt")
        if (bn + 1) * BN <= b.shape[1]:
            A.assert_tag(sb[st], lambda s, q, k, j, tg, kt=kt: tg == (bn * BN + q * BOX + j, kt * BK + k),
                         "stage holds k-block kt")
        for ks in A.range(BK // 16, unroll=True):
            b_step = sb[st].tile((BN // BOX, 16, BOX), (0, ks, 0)).permute((2, 0), 1)  # BN x 16, N-contiguous
            A.mma(atom, sa[st].tile((BM, 16), (0, ks)), b_step, acc)
        A.wgmma_commit()
        A.wgmma_wait(0)  # the stage's wgmmas retired before the policy releases the stage
    mine = A.mma_partition(atom, "c", c.tile((BM, BN), (bm, bn)))
    A.store(acc, mine)
    A.assert_tag(mine, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · column j of B")
