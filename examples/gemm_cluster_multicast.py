"""Hopper GEMM on a cluster of two blocks: the shared operand arrives by TMA multicast (C = A · Bᵀ).

The two blocks of a cluster compute vertically adjacent 64 x 64 tiles of C (cluster rank ``r`` =
``block_id(0) % 2`` takes rows ``block_id(0) * 64 ..``) and so read the same 64 rows of B.  Each
block loads only half of B's box (its rank's 32 rows) and *multicasts* it: one TMA issue writes
the half into the same stage of both blocks' shared memory and completes its bytes on each
block's own ``full`` mbarrier.  A is loaded by each block for itself.

256 threads per block: warpgroup 0 is the producer (its first thread waits until the stage is free,
declares the bytes of A's box plus *both* halves of B's box on ``full[s]`` and issues the two
loads); warpgroup 1 is the consumer (``wgmma.m64n64k16``, both operands from shared memory).  A
stage may be refilled only when the consumers of *both* blocks are done with it, since the refill
writes into both: each consumer thread arrives on its own ``empty[s]`` and, remotely, on the peer's
(``A.mapa(empty, peer)``), so each ``empty[s]`` phase collects 256 arrivals, 128 per block.  The
mbarriers of both blocks are initialized before a cluster barrier (a peer's multicast or remote
arrive may follow at once), and the kernel ends with a cluster barrier so that no block exits
while its peer may still signal its mbarriers.  K is a multiple of BK (declared); partial tiles of
M and N arrive zero-filled (known zeros) and are not stored.  The grid rounds the row tiles up to
an even number: a block whose rows lie past M only feeds B to its peer.

Invariants (tags): ``a`` carries ``(i, k)``, ``b`` carries ``(j, k)``; when its wait returns, stage
``s`` of either block holds k-block ``kt`` of A's rows of that block and of the cluster's B rows
(half of them written by the peer's multicast); every wgmma pairs equal ``k``; ``c[i, j]`` carries
``(i, j)``.

Planted bugs (``BUG``): ``"unarmed-multicast"`` declares only the bytes this block loads itself
(the peer's multicast half is not counted on the receiving barrier), ``"no-remote-release"``
releases a stage to its own producer only (the peer refills a stage this block may still read),
``"early-exit"`` leaves out the final cluster barrier (a block exits while its peer's last
remote arrives on its mbarriers are not ordered before the exit).
"""

from sympy import Eq

import argus.spec as A
from argus.layout_algebra.hopper import SwizzleMode

ATOM = "wgmma.m64n64k16.bf16"
SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)


@A.kernel(threads=256, cluster=(2, 1, 1),
          grid=lambda M, N, BM, BN: (2 * A.cdiv(M, 2 * BM), A.cdiv(N, BN)),
          assume=lambda K, BK: [Eq(K % BK, 0), K >= BK])
def gemm_cluster_multicast(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
                           BM: A.const = 64, BN: A.const = 64, BK: A.const = 64, STAGES: A.const = 2,
                           BUG: A.const = ""):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    bm, bn = A.block_id(0), A.block_id(1)
    rank = A.cluster_rank()
    peer = 1 - rank
    half = BN // 2
    sa = A.shared(A.bf16, (STAGES, BM, BK), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (STAGES, BN, BK), swizzle=SWIZZLE_128B)
    full = A.mbarrier(1, stages=STAGES)
    empty = A.mbarrier(128 if BUG == "no-remote-release" else 256, stages=STAGES)
    A.mbarrier_init(full, empty, sync=False)
    A.cluster_barrier()  # both blocks' mbarriers are initialized before any multicast or remote arrive
    n = a.shape[1] // BK
    with A.warp_role("producer", warps=range(0, 4), registers=40):
        for kt in A.range(n):
            s = kt % STAGES
            A.wait(empty[s], phase=kt // STAGES - 1, elected=0)  # both blocks released the stage
            mine = A.transaction_bytes(sb[s].tile((half, BK), (rank, 0)))
            nbytes = A.transaction_bytes(sa[s]) + (mine if BUG == "unarmed-multicast" else A.transaction_bytes(sb[s]))
            A.arrive_expect_tx(full[s], nbytes)
            A.tma_load(a.tile((BM, BK), (bm, kt)), sa[s], full[s])
            A.tma_load(b.tile((half, BK), (2 * bn + rank, kt)), sb[s].tile((half, BK), (rank, 0)), full[s],
                       multicast=0b11)
    with A.warp_role("consumer", warps=range(4, 8), registers=232):
        acc = A.mma_fragment(ATOM, "c")
        for kt in A.range(n):
            s = kt % STAGES
            A.wait(full[s], phase=kt // STAGES)
            if (bm + 1) * BM <= a.shape[0]:
                A.assert_tag(sa[s], lambda _s, i, k, tg, kt=kt: tg == (bm * BM + i, kt * BK + k),
                             "stage holds k-block kt of this block's rows of A")
            if (bn + 1) * BN <= b.shape[0]:
                A.assert_tag(sb[s], lambda _s, j, k, tg, kt=kt: tg == (bn * BN + j, kt * BK + k),
                             "stage holds k-block kt of the cluster's rows of B (half by the peer's multicast)")
            for ks in A.range(BK // 16, unroll=True):
                A.mma(ATOM, sa[s].tile((BM, 16), (0, ks)), sb[s].tile((BN, 16), (0, ks)), acc)
            A.wgmma_commit()
            A.wgmma_wait(0)  # the stage's wgmmas retired: it may be released
            A.arrive(empty[s])
            if BUG != "no-remote-release":
                A.arrive(A.mapa(empty, peer)[s])  # the peer's producer also refills this block's stage
        out = A.mma_partition(ATOM, "c", c.tile((BM, BN), (bm, bn)))
        A.store(acc, out)
        A.assert_tag(out, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")
    if BUG != "early-exit":
        A.cluster_barrier()  # no block exits while its peer may still arrive on its mbarriers
