"""Warp-specialized Hopper GEMM: a TMA producer warpgroup feeds two wgmma consumer warpgroups
through full/empty mbarriers (C = A · Bᵀ).

384 threads in three warpgroups.  Warpgroup 0 is the producer (``setmaxnreg`` 40): its first
thread waits until a stage is released (phase ``kt // STAGES - 1`` of ``empty[s]``; the first
round passes on the initial phase), declares the stage's bytes on ``full[s]`` and issues the two
TMA loads.  Warpgroups 1 and 2 are the consumers (``setmaxnreg`` 232), each computing 64 rows of
the 128 x 64 block tile with ``wgmma.m64n64k16``: they wait for phase ``kt // STAGES`` of
``full[s]``, multiply, and release the stage by arriving on ``empty[s]`` (256 arrivals per
phase).  The pipeline is written by hand here; ``gemm_tma_wgmma.py`` lets the policy write it.

Invariants (tags): ``a`` carries ``(i, k)``, ``b`` carries ``(j, k)``; when its wait returns, stage
``s`` holds k-block ``kt``; every wgmma pairs equal ``k``; ``c[i, j]`` carries ``(i, j)``.

Planted bugs (``BUG``): ``"no-empty-wait"`` refills a stage the consumers may still read,
``"early-release"`` releases a stage before the MMAs that read it,
``"release-before-retire"`` releases it after the wgmma commit but before the ``wgmma_wait``
that retires them, ``"parity"`` waits on the
full barrier with the wrong parity, ``"expect-tx"`` declares the bytes of A's box only.
"""

from sympy import Eq

import argus.spec as A
from argus.layout_algebra.hopper import SwizzleMode

ATOM = "wgmma.m64n64k16.bf16"
SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)


@A.kernel(threads=384, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda K, BK: [Eq(K % BK, 0), K >= BK])
def gemm_ws(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
            BM: A.const = 128, BN: A.const = 64, BK: A.const = 64, STAGES: A.const = 3, BUG: A.const = ""):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    bm, bn = A.block_id(1), A.block_id(0)
    sa = A.shared(A.bf16, (STAGES, BM, BK), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (STAGES, BN, BK), swizzle=SWIZZLE_128B)
    full = A.mbarrier(1, stages=STAGES)
    empty = A.mbarrier(256, stages=STAGES)
    A.mbarrier_init(full, empty)
    n = a.shape[1] // BK
    with A.warp_role("producer", warps=range(0, 4), registers=40):
        for kt in A.range(n):
            s = kt % STAGES
            if BUG != "no-empty-wait":
                A.wait(empty[s], phase=kt // STAGES - 1, elected=0)
            nbytes = A.transaction_bytes(sa[s]) + (0 if BUG == "expect-tx" else A.transaction_bytes(sb[s]))
            A.arrive_expect_tx(full[s], nbytes)
            A.tma_load(a.tile((BM, BK), (bm, kt)), sa[s], full[s])
            A.tma_load(b.tile((BN, BK), (bn, kt)), sb[s], full[s])
    with A.warp_role("consumer", warps=range(4, 12), registers=232):
        wg = A.warpgroup_id() - 1  # this consumer's 64 rows of the block tile
        acc = A.mma_fragment(ATOM, "c")
        for kt in A.range(n):
            s = kt % STAGES
            if BUG == "parity":
                A.wait(full[s], parity=(kt // STAGES + 1) % 2)
            else:
                A.wait(full[s], phase=kt // STAGES)
            if (bm + 1) * BM <= a.shape[0]:
                A.assert_tag(sa[s], lambda _s, i, k, tg, kt=kt: tg == (bm * BM + i, kt * BK + k), "stage holds k-block kt")
            if BUG == "early-release":
                A.arrive(empty[s])
            for ks in A.range(BK // 16, unroll=True):
                A.mma(ATOM, sa[s].tile((64, 16), (wg, ks)), sb[s].tile((BN, 16), (0, ks)), acc)
            A.wgmma_commit()
            if BUG == "release-before-retire":
                A.arrive(empty[s])  # the wgmmas of this stage may still be reading it
            A.wgmma_wait(0)  # the stage's wgmmas retired: it may be released
            if BUG not in ("early-release", "release-before-retire"):
                A.arrive(empty[s])
        mine = A.mma_partition(ATOM, "c", c.tile((BM, BN), (bm, bn)).tile((64, BN), (wg, 0)))
        A.store(acc, mine)
        A.assert_tag(mine, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")
