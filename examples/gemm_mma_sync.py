"""Tiled GEMM with ``mma.sync.m16n8k16`` (bf16 in, f32 accumulate): C = A · Bᵀ.

A is M x K, B is N x K (both K-contiguous), C is M x N in f32.  A block of four warps owns a
64 x 64 tile of C; warp ``(wm, wn)`` owns 32 x 32 of it: 2 x 4 atom tiles of 16 x 8.  For each
k-block of 32, the block stages the A and B tiles in shared memory (each thread copies 16
contiguous elements of each), waits at a barrier, and every warp multiplies two k-steps of 16:
it loads its A and B fragments with the atom's TV layouts (``mma_partition``) and issues
2 x 4 MMAs per k-step.

Invariants (tags):

* ``a`` carries ``(i, k)`` and ``b`` carries ``(j, k)``;
* after the barrier the shared tiles hold k-block ``kt``: ``sa[i, k]`` carries
  ``(m0 + i, kt * BK + k)`` and ``sb[j, k]`` carries ``(n0 + j, kt * BK + k)``;
* every MMA pairs A and B elements of the same ``k`` (checked by the atom), and each output
  ``c[i, j]`` carries ``(i, j)``.

``LDMATRIX`` loads the fragments with ``ldmatrix`` (one warp-wide instruction per 16 x 16 A tile
and per 8 x 16 B tile, each lane addressing one 16-byte matrix row) instead of per-thread loads of
the ``mma_partition`` views: the fragments, and so C, are the same.

``WRONG_KBLOCK`` stages B from the next k-block: the MMA's k check reports the block, thread,
fragment element and line.  ``KBLOCK_BUG`` plants coverage bugs no tag sees (each C element
still pairs row i of A with row j of B): ``"skip"`` runs one k-block short (declaring K >= 2·BK,
so the loop still runs), ``"repeat"`` runs one iteration more that stages k-block 0 again; the
coverage property reports the k never reached, or the k reached twice.  Sizes must be multiples of the tile (declared, checked at launch).
``gemm_cp_async.py`` is the same kernel with double-buffered cp.async staging.
"""

from sympy import Eq

import argus.spec as A

ATOM = "mma.sync.m16n8k16.bf16"


@A.kernel(threads=128, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda M, N, K, BM, BN, BK, KBLOCK_BUG: [Eq(M % BM, 0), Eq(N % BN, 0), Eq(K % BK, 0),
                                                          K >= (2 * BK if KBLOCK_BUG == "skip" else BK)])
def gemm(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
         BM: A.const = 64, BN: A.const = 64, BK: A.const = 32, WRONG_KBLOCK: A.const = False,
         LDMATRIX: A.const = False, KBLOCK_BUG: A.const = ""):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    t = A.thread_id()
    bm, bn = A.block_id(1), A.block_id(0)
    wm, wn = A.warp_id() // 2, A.warp_id() % 2
    sa = A.shared(A.bf16, (BM, BK))
    sb = A.shared(A.bf16, (BN, BK))
    acc = A.mma_fragment(ATOM, "c", (2, 4))
    KT = a.shape[1] // BK
    for kt in A.range({"skip": KT - 1, "repeat": KT + 1}.get(KBLOCK_BUG, KT)):
        kblock = kt % KT if KBLOCK_BUG == "repeat" else kt  # "repeat": the extra iteration stages k-block 0
        kb = (kblock + 1) % KT if WRONG_KBLOCK else kblock
        A.copy(a.tile((BM, BK), (bm, kblock)).tile((1, 16), (t // 2, t % 2)), sa.tile((1, 16), (t // 2, t % 2)))
        A.copy(b.tile((BN, BK), (bn, kb)).tile((1, 16), (t // 2, t % 2)), sb.tile((1, 16), (t // 2, t % 2)))
        A.barrier()
        A.assert_tag(sa, lambda i, k, tg, kt=kblock: tg == (bm * BM + i, kt * BK + k), "sa holds k-block kt of A")
        for ks in A.range(BK // 16, unroll=True):
            for mi in A.range(2, unroll=True):
                if LDMATRIX:
                    fa = A.ldmatrix(sa.tile((16, 16), (wm * 2 + mi, ks)))
                else:
                    fa = A.load(A.mma_partition(ATOM, "a", sa.tile((16, 16), (wm * 2 + mi, ks))))
                for ni in A.range(4, unroll=True):
                    if LDMATRIX:
                        fb = A.ldmatrix(sb.tile((8, 16), (wn * 4 + ni, ks)))
                    else:
                        fb = A.load(A.mma_partition(ATOM, "b", sb.tile((8, 16), (wn * 4 + ni, ks))))
                    A.mma(ATOM, fa, fb, acc[mi, ni])
        A.barrier()
    for mi in A.range(2, unroll=True):
        for ni in A.range(4, unroll=True):
            out = c.tile((16, 8), (bm * (BM // 16) + wm * 2 + mi, bn * (BN // 8) + wn * 4 + ni))
            A.store(acc[mi, ni], A.mma_partition(ATOM, "c", out))
    A.assert_tag(c.tile((BM, BN), (bm, bn)), lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")
