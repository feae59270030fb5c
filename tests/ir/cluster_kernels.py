"""Kernels for the cluster tests: distributed shared memory, remote mbarrier arrives, TMA
multicast and cluster barriers; correct ones and ones with planted bugs (selected by consts)."""

import argus.spec as A


@A.kernel(threads=64, cluster=(2, 1, 1), grid=lambda: (4,))
def dsmem_swap(x: A.Global(A.f32, "256"), y: A.Global(A.f32, "256"), FIRST_SYNC: A.const = True,
               LAST_SYNC: A.const = True, PEER_WRITE: A.const = False):
    """Each block of a pair puts its 64 values in shared memory; each reads its peer's copy through
    distributed shared memory: y = x with the halves of every 128 swapped."""
    s = A.shared(A.f32, (64,))
    t = A.thread_id()
    b = A.block_id(0)
    r = A.cluster_rank()
    A.copy(x.tile((1,), (b * 64 + t,)), s.tile((1,), (t,)))
    if PEER_WRITE:  # a planted race: also write the peer's element that the peer itself writes
        A.copy(x.tile((1,), (b * 64 + t,)), A.mapa(s, 1 - r).tile((1,), (t,)))
    if FIRST_SYNC:
        A.cluster_barrier()
    A.copy(A.mapa(s, 1 - r).tile((1,), (t,)), y.tile((1,), (b * 64 + t,)))
    if LAST_SYNC:
        A.cluster_barrier()  # the peer still reads this block's shared memory


@A.kernel(threads=64, cluster=(2, 1, 1), grid=lambda: (2,))
def remote_handoff(x: A.Global(A.f32, "128"), y: A.Global(A.f32, "128"), WAIT: A.const = True,
                   INIT_SYNC: A.const = True, ARRIVE_REMOTE: A.const = True, LAST_SYNC: A.const = True):
    """Block r writes its 64 values into block 1-r's shared memory and releases them with a remote
    arrive on that block's mbarrier; each block waits on its own mbarrier and stores what its peer
    sent: y = x with the two halves swapped.  Ends with a cluster barrier only when LAST_SYNC."""
    s = A.shared(A.f32, (64,))
    bar = A.mbarrier(64)
    t = A.thread_id()
    r = A.cluster_rank()
    A.mbarrier_init(bar, sync=False)
    if INIT_SYNC:
        A.cluster_barrier()  # the peer's init is ordered before this block's remote arrives
    A.copy(x.tile((1,), (r * 64 + t,)), A.mapa(s, 1 - r).tile((1,), (t,)))
    if ARRIVE_REMOTE:
        A.arrive(A.mapa(bar, 1 - r))
    else:
        A.arrive(bar)  # planted: releases this block's own barrier, not the peer's
    if WAIT:
        A.wait(bar, phase=0)
    A.copy(s.tile((1,), (t,)), y.tile((1,), (r * 64 + t,)))
    if LAST_SYNC:
        A.cluster_barrier()


@A.kernel(threads=64, cluster=(2, 1, 1), grid=lambda: (2,))
def multicast_halves(x: A.Global(A.f32, "16 16"), y: A.Global(A.f32, "32 16"), ARM_ALL: A.const = True,
                     MASK: A.const = 3, INIT_SYNC: A.const = True, LAST_SYNC: A.const = True):
    """Each block of the pair loads half of the rows of ``x`` by TMA and multicasts them to both:
    every block receives the whole 16 x 16 box (its own mbarrier counts both halves' bytes) and
    stores it to its 16 rows of ``y``."""
    s = A.shared(A.f32, (16, 16))
    bar = A.mbarrier(1)
    r = A.cluster_rank()
    t = A.thread_id()
    A.tag(x, lambda i, j: (i, j), "X")
    A.mbarrier_init(bar, sync=False)
    if INIT_SYNC:
        A.cluster_barrier()
    nbytes = A.transaction_bytes(s) if ARM_ALL else A.transaction_bytes(s.tile((8, 16), (0, 0)))
    A.arrive_expect_tx(bar, nbytes)
    A.tma_load(x.tile((8, 16), (r, 0)), s.tile((8, 16), (r, 0)), bar, multicast=MASK)
    A.wait(bar, phase=0)
    A.assert_tag(s, lambda i, j, tg: tg == (i, j), "every block holds the whole box")
    for i in A.range(4):
        A.copy(s.tile((1, 1), (i * 4 + t // 16, t % 16)), y.tile((1, 1), (r * 16 + i * 4 + t // 16, t % 16)))
    if LAST_SYNC:
        A.cluster_barrier()  # a peer's multicast into this block's memory is complete


@A.kernel(threads=64, cluster=(2, 1, 1), grid=lambda: (2,))
def cluster_barrier_in_one_block(x: A.Global(A.f32, "128"), ONLY_RANK0: A.const = True):
    """A cluster barrier that only block 0 reaches (planted: the peer exits)."""
    t = A.thread_id()
    s = A.shared(A.f32, (64,))
    A.copy(x.tile((1,), (A.block_id(0) * 64 + t,)), s.tile((1,), (t,)))
    if A.cluster_rank() < 1:
        A.cluster_barrier()


@A.kernel(threads=64, cluster=(2, 1, 1), grid=lambda: (3,))
def odd_grid(x: A.Global(A.f32, "64")):
    A.cluster_barrier()


@A.kernel(threads=32, cluster=(2, 1, 1), grid=lambda: (2,))
def mapa_misuse(x: A.Global(A.f32, "64"), WHAT: A.const = "rank"):
    """Uses of distributed shared memory that are rejected (selected by WHAT)."""
    s = A.shared(A.f32, (32,))
    bar = A.mbarrier(32)
    A.mbarrier_init(bar, sync=False)
    A.cluster_barrier()
    if WHAT == "rank":
        A.mapa(s, 2)
    elif WHAT == "global":
        A.mapa(x, 1)
    elif WHAT == "twice":
        A.mapa(A.mapa(s, 1), 0)
    elif WHAT == "peer-wait":
        A.arrive(bar)
        A.wait(A.mapa(bar, 1 - A.cluster_rank()), phase=0)
    A.cluster_barrier()
