"""Double-buffered GEMM: cp.async staging overlapped with ``mma.sync.m16n8k16`` (C = A · Bᵀ).

The same block and warp tiling as ``gemm_mma_sync.py`` (64 x 64 block tile, four warps of
32 x 32, bf16 in, f32 accumulate), with two shared-memory stages.  Before the loop the block
issues k-block 0 into stage 0; iteration ``kt`` issues k-block ``kt + 1`` into the other stage,
commits it as a group, waits until only that newest group is pending (``cp_async_wait(1)``:
k-block ``kt`` has landed), meets at a barrier (the other threads' copies are visible), runs the
MMAs on stage ``kt % 2``, and meets again before the next iteration overwrites that stage.

Invariants (tags): ``a`` carries ``(i, k)``, ``b`` carries ``(j, k)``; after the wait and the
barrier stage ``kt % 2`` holds k-block ``kt`` of both operands; every MMA pairs equal ``k``; each
``c[i, j]`` carries ``(i, j)``.  Planted bugs: ``WAIT_ALL_BUT=2`` waits too little (the read of
the stage races the copy still in flight); ``NO_SECOND_BARRIER`` lets the next copy overwrite the
stage other warps still read (a write-after-read race); ``KBLOCK_BUG`` plants coverage bugs no
tag sees: ``"skip"`` runs one k-block short (declaring K >= 2·BK), ``"repeat"`` runs one
iteration more, into which k-block 0 is issued again.
"""

from sympy import Eq

import argus.spec as A

ATOM = "mma.sync.m16n8k16.bf16"


@A.kernel(threads=128, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda M, N, K, BM, BN, BK, KBLOCK_BUG: [Eq(M % BM, 0), Eq(N % BN, 0), Eq(K % BK, 0),
                                                          K >= (2 * BK if KBLOCK_BUG == "skip" else BK)])
def gemm_cp_async(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
                  BM: A.const = 64, BN: A.const = 64, BK: A.const = 32,
                  WAIT_ALL_BUT: A.const = 1, NO_SECOND_BARRIER: A.const = False, KBLOCK_BUG: A.const = ""):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    t = A.thread_id()
    bm, bn = A.block_id(1), A.block_id(0)
    wm, wn = A.warp_id() // 2, A.warp_id() % 2
    sa = A.shared(A.bf16, (2, BM, BK))
    sb = A.shared(A.bf16, (2, BN, BK))
    acc = A.mma_fragment(ATOM, "c", (2, 4))
    KT = a.shape[1] // BK
    trips = {"skip": KT - 1, "repeat": KT + 1}.get(KBLOCK_BUG, KT)
    mine = (t // 2, t % 2)  # each thread moves 16 contiguous elements (two 16-byte cp.async)
    A.cp_async(a.tile((BM, BK), (bm, 0)).tile((1, 16), mine), sa[0].tile((1, 16), mine), atom="cp.async.16")
    A.cp_async(b.tile((BN, BK), (bn, 0)).tile((1, 16), mine), sb[0].tile((1, 16), mine), atom="cp.async.16")
    A.cp_async_commit()
    for kt in A.range(trips):
        stage, following = kt % 2, (kt + 1) % 2
        issued = (kt + 1) % KT if KBLOCK_BUG == "repeat" else kt + 1  # "repeat": k-block 0 once more
        if kt + 1 < trips:
            A.cp_async(a.tile((BM, BK), (bm, issued)).tile((1, 16), mine), sa[following].tile((1, 16), mine),
                       atom="cp.async.16")
            A.cp_async(b.tile((BN, BK), (bn, issued)).tile((1, 16), mine), sb[following].tile((1, 16), mine),
                       atom="cp.async.16")
        A.cp_async_commit()
        A.cp_async_wait(WAIT_ALL_BUT)
        A.barrier()
        for ks in A.range(BK // 16, unroll=True):
            for mi in A.range(2, unroll=True):
                fa = A.load(A.mma_partition(ATOM, "a", sa[stage].tile((16, 16), (wm * 2 + mi, ks))))
                for ni in A.range(4, unroll=True):
                    fb = A.load(A.mma_partition(ATOM, "b", sb[stage].tile((8, 16), (wn * 4 + ni, ks))))
                    A.mma(ATOM, fa, fb, acc[mi, ni])
        kblock = kt % KT if KBLOCK_BUG == "repeat" else kt
        A.assert_tag(sb[stage], lambda s, j, k, tg, kt=kblock: tg == (bn * BN + j, kt * BK + k), "stage holds k-block kt")
        if not NO_SECOND_BARRIER:
            A.barrier()
    for mi in A.range(2, unroll=True):
        for ni in A.range(4, unroll=True):
            out = c.tile((16, 8), (bm * (BM // 16) + wm * 2 + mi, bn * (BN // 8) + wn * 4 + ni))
            A.store(acc[mi, ni], A.mma_partition(ATOM, "c", out))
    A.assert_tag(c.tile((BM, BN), (bm, bn)), lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")
