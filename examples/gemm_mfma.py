"""Tiled GEMM on gfx942 with ``v_mfma_f32_32x32x8_bf16`` and LDS staging: C = A · Bᵀ.

A is M x K, B is N x K (bf16, K-contiguous), C is M x N (f32).  A block of four wavefronts
(256 threads, 64 lanes each) owns a 64 x 64 tile of C; wavefront ``(wm, wn)`` owns one
32 x 32 MFMA tile.  Per k-block of 32, the block stages A and B in LDS (each thread moves 8
contiguous elements of each), meets at ``s_barrier`` (``A.barrier()``), and every wavefront
runs 4 MFMAs of k = 8, loading its operands with the atom's lane layout: lane ``l`` holds
row ``l % 32`` and ``k = 4 * (l // 32) .. + 3``.

Invariants (tags): ``a`` carries ``(i, k)``, ``b`` carries ``(j, k)``; the LDS tiles hold
k-block ``kt``; every MFMA pairs equal ``k``; ``c[i, j]`` carries ``(i, j)``.
``SWAP_KSTEPS`` feeds B k-steps in the wrong order (a planted bug the MFMA's k check reports).
``KBLOCK_BUG`` plants coverage bugs no tag sees: ``"skip"`` runs one k-block short (declaring
K >= 2·BK), ``"repeat"`` runs one iteration more that stages k-block 0 again.
"""

from sympy import Eq

import argus.spec as A

ATOM = "v_mfma_f32_32x32x8_bf16"


@A.kernel(threads=256, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda M, N, K, BM, BN, BK, KBLOCK_BUG: [Eq(M % BM, 0), Eq(N % BN, 0), Eq(K % BK, 0),
                                                          K >= (2 * BK if KBLOCK_BUG == "skip" else BK)])
def gemm_mfma(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
              BM: A.const = 64, BN: A.const = 64, BK: A.const = 32, SWAP_KSTEPS: A.const = False,
              KBLOCK_BUG: A.const = ""):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    t = A.thread_id()
    bm, bn = A.block_id(1), A.block_id(0)
    wave = t // 64
    wm, wn = wave // 2, wave % 2
    lds_a = A.shared(A.bf16, (BM, BK))
    lds_b = A.shared(A.bf16, (BN, BK))
    acc = A.mma_fragment(ATOM, "c")
    KT = a.shape[1] // BK
    for kt in A.range({"skip": KT - 1, "repeat": KT + 1}.get(KBLOCK_BUG, KT)):
        kblock = kt % KT if KBLOCK_BUG == "repeat" else kt  # "repeat": the extra iteration stages k-block 0
        A.copy(a.tile((BM, BK), (bm, kblock)).tile((1, 8), (t // 4, t % 4)), lds_a.tile((1, 8), (t // 4, t % 4)))
        A.copy(b.tile((BN, BK), (bn, kblock)).tile((1, 8), (t // 4, t % 4)), lds_b.tile((1, 8), (t // 4, t % 4)))
        A.barrier()
        A.assert_tag(lds_b, lambda j, k, tg, kt=kblock: tg == (bn * BN + j, kt * BK + k), "LDS holds k-block kt of B")
        for ks in A.range(BK // 8, unroll=True):
            kb = (ks + 1) % (BK // 8) if SWAP_KSTEPS else ks
            fa = A.load(A.mma_partition(ATOM, "a", lds_a.tile((32, 8), (wm, ks))))
            fb = A.load(A.mma_partition(ATOM, "b", lds_b.tile((32, 8), (wn, kb))))
            A.mma(ATOM, fa, fb, acc)
        A.barrier()
    out = c.tile((32, 32), (bm * (BM // 32) + wm, bn * (BN // 32) + wn))
    A.store(acc, A.mma_partition(ATOM, "c", out))
    A.assert_tag(c.tile((BM, BN), (bm, bn)), lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")
