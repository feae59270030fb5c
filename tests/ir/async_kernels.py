"""Kernels for the asynchrony tests: cp.async groups, mbarriers, TMA, pipelines; correct ones and
ones with planted bugs (selected by consts)."""

import sympy

import argus.spec as A

BM, BK = 64, 32


@A.kernel(threads=64)
def cp_async_rotate(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "64"), WAIT: A.const = True,
                    SYNC: A.const = True, COMMIT: A.const = True):
    """y[t] = x[(t + 1) % 64] through shared memory filled by cp.async."""
    s = A.shared(A.f32, (64,))
    t = A.thread_id()
    A.cp_async(x.tile((1,), (t,)), s.tile((1,), (t,)))
    if COMMIT:
        A.cp_async_commit()
    if WAIT:
        A.cp_async_wait(0)
    if SYNC:
        A.barrier()
    A.copy(s.tile((1,), ((t + 1) % 64,)), y.tile((1,), (t,)))


@A.kernel(threads=64)
def cp_async_zero_fill(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "64")):
    """y = x padded with zeros to 64 elements: the tail is zero-filled by cp.async (src-size 0)."""
    s = A.shared(A.f32, (64,))
    t = A.thread_id()
    A.cp_async(x.tile((1,), (t,)), s.tile((1,), (t,)))
    A.cp_async_commit()
    A.cp_async_wait(0)
    A.copy(s.tile((1,), (t,)), y.tile((1,), (t,)))


@A.kernel(threads=128, grid=lambda M: (A.cdiv(M, 64),))
def tma_rows(x: A.Global(A.f32, "M 32"), y: A.Global(A.f32, "M 32"), EXTRA: A.const = 0, PHASE: A.const = 0,
             FENCE: A.const = True, INIT: A.const = True):
    """y = x, one 64 x 32 box per block through one mbarrier phase."""
    A.tag(x, lambda i, j: (i, j), "x")
    s = A.shared(A.f32, (64, 32))
    bar = A.mbarrier(1)
    if INIT:
        if FENCE:
            A.mbarrier_init(bar)
        else:
            A.mbarrier_init(bar, sync=False)
    A.arrive_expect_tx(bar, A.transaction_bytes(s) + EXTRA)
    A.tma_load(x.tile((64, 32), (A.block_id(0), 0)), s, bar)
    A.wait(bar, phase=PHASE)
    t = A.thread_id()
    mine = s.tile((1, 16), (t % 64, t // 64))
    if A.block_id(0) * 64 + t % 64 < x.shape[0]:
        A.assert_tag(mine, lambda i, j, tg: tg == (A.block_id(0) * 64 + i, j), "the box holds x's rows")
    A.copy(mine, y.tile((64, 32), (A.block_id(0), 0)).tile((1, 16), (t % 64, t // 64)))


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, BM),))
def tile_sums(x: A.Global(A.f32, "M K"), out: A.Global(A.f32, "M 32"), STAGES: A.const = 3, UNROLL: A.const = 0):
    """out[m, j] = sum over k-tiles kt of x[m, kt*BK + j] (zero past K), accumulated in order.

    The k-tiles stream through a STAGES-deep TMA pipeline made by the policy; each thread sums
    one row of every stage.  Invariant: a full stage holds block kt of x.
    """
    A.tag(x, lambda i, k: (i, k), "x")
    n = A.cdiv(x.shape[1], BK)
    sx = A.shared(A.f32, (STAGES, BM, BK))
    t = A.thread_id()
    m0 = A.block_id(0)
    acc = A.zeros((1, BK), A.f32)
    for kt, st in A.range(n, pipeline=STAGES, unroll=UNROLL or None):
        A.tma_load(x.tile((BM, BK), (m0, kt)), sx[st])
        if (m0 + 1) * BM <= x.shape[0] and (kt + 1) * BK <= x.shape[1]:
            A.assert_tag(sx[st], lambda s, i, k, tg: tg == (m0 * BM + i, kt * BK + k), "stage st holds block kt")  # noqa: B023 (traced once)
        acc = acc + A.load(sx[st].tile((1, BK), (t, 0)))
    A.store(acc, out.tile((BM, BK), (m0, 0)).tile((1, BK), (t, 0)))


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, BM),))
def tile_sums_cp_async(x: A.Global(A.f32, "M K"), out: A.Global(A.f32, "M 32"), STAGES: A.const = 3):
    """tile_sums with a cp.async pipeline: thread t copies (and sums) row t of every k-tile."""
    A.tag(x, lambda i, k: (i, k), "x")
    n = A.cdiv(x.shape[1], BK)
    sx = A.shared(A.f32, (STAGES, BM, BK))
    t = A.thread_id()
    m0 = A.block_id(0)
    acc = A.zeros((1, BK), A.f32)
    for kt, st in A.range(n, pipeline=STAGES):
        row = (t + 1) % BM  # each thread copies the row its neighbour sums: the data crosses threads
        A.cp_async(x.tile((BM, BK), (m0, kt)).tile((1, BK), (row, 0)), sx[st].tile((1, BK), (row, 0)))
        acc = acc + A.load(sx[st].tile((1, BK), (t, 0)))
    A.store(acc, out.tile((BM, BK), (m0, 0)).tile((1, BK), (t, 0)))


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, BM),))
def tile_sums_by_hand(x: A.Global(A.f32, "M K"), out: A.Global(A.f32, "M 32"), STAGES: A.const = 3,
                      BUG: A.const = ""):
    """tile_sums with the pipeline written by hand: the policy's output, op for op.

    ``BUG`` plants one defect: ``"parity"`` waits for the full barrier with the wrong parity,
    ``"no-full-wait"`` reads a stage without waiting for it, ``"lagging-phase"`` waits for the
    previous round's phase, ``"no-empty-wait"`` refills a stage without waiting for its release,
    ``"expect-tx-small"`` / ``"expect-tx-large"`` declare too few / too many bytes,
    ``"unclamped-drain"`` drains S-1 stages even when the trip count is smaller,
    ``"expect-unguarded"`` declares the prologue's bytes even for stages a short loop never loads.
    """
    A.tag(x, lambda i, k: (i, k), "x")
    n = A.cdiv(x.shape[1], BK)
    sx = A.shared(A.f32, (STAGES, BM, BK))
    t = A.thread_id()
    m0 = A.block_id(0)
    acc = A.zeros((1, BK), A.f32)
    full = A.mbarrier(1, stages=STAGES)
    empty = A.mbarrier(BM, stages=STAGES)
    A.mbarrier_init(full, empty)
    nbytes = BM * BK * 4 + (-4 if BUG == "expect-tx-small" else 4 if BUG == "expect-tx-large" else 0)
    for p in range(STAGES - 1):
        if BUG == "expect-unguarded":
            A.arrive_expect_tx(full[p], nbytes)
        if p < n:
            if BUG != "expect-unguarded":
                A.arrive_expect_tx(full[p], nbytes)
            A.tma_load(x.tile((BM, BK), (m0, p)), sx[p], full[p])
    for kt in A.range(n - (STAGES - 1)):
        j = kt + STAGES - 1
        if BUG != "no-empty-wait":
            A.wait(empty[j % STAGES], phase=j // STAGES - 1, elected=0)
        A.arrive_expect_tx(full[j % STAGES], nbytes)
        A.tma_load(x.tile((BM, BK), (m0, j)), sx[j % STAGES], full[j % STAGES])
        if BUG == "parity":
            A.wait(full[kt % STAGES], parity=(kt // STAGES + 1) % 2)
        elif BUG == "lagging-phase":
            A.wait(full[kt % STAGES], phase=kt // STAGES - 1)
        elif BUG != "no-full-wait":
            A.wait(full[kt % STAGES], phase=kt // STAGES)
        if (m0 + 1) * BM <= x.shape[0] and (kt + 1) * BK <= x.shape[1]:
            A.assert_tag(sx[kt % STAGES], lambda s, i, k, tg: tg == (m0 * BM + i, kt * BK + k), "stage st holds block kt")  # noqa: B023 (traced once)
        A.copy(acc + A.load(sx[kt % STAGES].tile((1, BK), (t, 0))), acc, atom="reg")
        A.arrive(empty[kt % STAGES])
    drain_from = n - (STAGES - 1) if BUG == "unclamped-drain" else sympy.Max(n - (STAGES - 1), 0)
    for kt in A.range(drain_from, n):
        A.wait(full[kt % STAGES], phase=kt // STAGES)
        if (m0 + 1) * BM <= x.shape[0] and (kt + 1) * BK <= x.shape[1]:
            A.assert_tag(sx[kt % STAGES], lambda s, i, k, tg: tg == (m0 * BM + i, kt * BK + k), "stage st holds block kt")  # noqa: B023 (traced once)
        A.copy(acc + A.load(sx[kt % STAGES].tile((1, BK), (t, 0))), acc, atom="reg")
        A.arrive(empty[kt % STAGES])
    A.store(acc, out.tile((BM, BK), (m0, 0)).tile((1, BK), (t, 0)))


@A.kernel(threads=64, grid=lambda M: (A.cdiv(M, 64),))
def doubled_by_tma_store(x: A.Global(A.f32, "M 32"), y: A.Global(A.f32, "M 32"), FENCE: A.const = True,
                         WAIT: A.const = True, READ_ONLY: A.const = False, OVERWRITE: A.const = False):
    """y = 2 x: each thread doubles a row into shared memory, one TMA store writes the block's box
    (rows past M are not written)."""
    s = A.shared(A.f32, (64, 32))
    t = A.thread_id()
    v = A.load(x.tile((64, 32), (A.block_id(0), 0)).tile((1, 32), (t, 0)))
    A.store(v * 2.0, s.tile((1, 32), (t, 0)))
    if FENCE:
        A.fence_proxy_async()
    A.barrier()
    A.tma_store(s, y.tile((64, 32), (A.block_id(0), 0)))
    A.tma_store_commit()
    if OVERWRITE:
        A.store(v, s.tile((1, 32), (t, 0)))
    if WAIT:
        A.tma_store_wait(0, read=READ_ONLY)


@A.kernel(threads=128)
def halves(x: A.Global(A.f32, "128"), y: A.Global(A.f32, "128"), CROSS: A.const = False,
           PARTICIPANTS: A.const = 64):
    """Each half of the block rotates its 64 elements through shared memory, synchronised by its
    own named barrier; ``CROSS`` makes the second half read the first half's data (a race: the
    two named barriers do not order the halves)."""
    s = A.shared(A.f32, (128,))
    t = A.thread_id()
    A.copy(x.tile((1,), (t,)), s.tile((1,), (t,)))
    if A.warp_id() < 2:
        A.named_barrier(1, PARTICIPANTS)
        A.copy(s.tile((1,), ((t + 1) % 64,)), y.tile((1,), (t,)))
    else:
        A.named_barrier(2, 64)
        A.copy(s.tile((1,), ((t + 1) % 128 if CROSS else 64 + (t + 1) % 64,)), y.tile((1,), (t,)))


@A.kernel(threads=64)
def arrivals(x: A.Global(A.f32, "64"), COUNT: A.const = 64, ARRIVERS: A.const = 64, WAIT: A.const = True):
    """Threads below ARRIVERS arrive on an mbarrier of COUNT arrivals; everyone waits for phase 0."""
    bar = A.mbarrier(COUNT)
    A.mbarrier_init(bar)
    if A.thread_id() < ARRIVERS:
        A.arrive(bar)
    if WAIT:
        A.wait(bar, phase=0)


@A.kernel(threads=64, cluster=(1, 1, 1))
def cluster_rotate(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "64")):
    """A cluster of one block: the cluster barrier orders like a block barrier."""
    s = A.shared(A.f32, (64,))
    t = A.thread_id()
    A.copy(x.tile((1,), (t,)), s.tile((1,), (t,)))
    A.cluster_barrier()
    A.copy(s.tile((1,), ((t + 1) % 64,)), y.tile((1,), (t,)))


@A.kernel(threads=64, cluster=(2, 1, 1), grid=lambda: (2,))
def cluster_of_two(x: A.Global(A.f32, "64")):
    A.cluster_barrier()


@A.kernel(threads=128, grid=lambda M: (A.cdiv(M, BM),))
def tile_sums_in_a_role(x: A.Global(A.f32, "M K"), out: A.Global(A.f32, "M 32"), STAGES: A.const = 3):
    """tile_sums run by the last two warps only: the policy's barriers count the role's threads."""
    n = A.cdiv(x.shape[1], BK)
    sx = A.shared(A.f32, (STAGES, BM, BK))
    m0 = A.block_id(0)
    with A.warp_role("summers", warps=(2, 3)):
        t = A.thread_id() - 64
        acc = A.zeros((1, BK), A.f32)
        for kt, st in A.range(n, pipeline=STAGES):
            A.tma_load(x.tile((BM, BK), (m0, kt)), sx[st])
            acc = acc + A.load(sx[st].tile((1, BK), (t, 0)))
        A.store(acc, out.tile((BM, BK), (m0, 0)).tile((1, BK), (t, 0)))


@A.kernel(threads=64)
def tile_sums_from(x: A.Global(A.f32, "64 K"), out: A.Global(A.f32, "64 32"), STAGES: A.const = 3,
                   FIRST: A.const = 1):
    """The sum of k-tiles FIRST .. n-1 (a pipelined loop that does not start at 0)."""
    n = A.cdiv(x.shape[1], BK)
    sx = A.shared(A.f32, (STAGES, BM, BK))
    t = A.thread_id()
    acc = A.zeros((1, BK), A.f32)
    for kt, st in A.range(FIRST, n, pipeline=STAGES):
        A.tma_load(x.tile((BM, BK), (0, kt)), sx[st])
        acc = acc + A.load(sx[st].tile((1, BK), (t, 0)))
    A.store(acc, out.tile((1, BK), (t, 0)))
