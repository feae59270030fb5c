"""Kernels of the coverage tests (interpreter and verifier): one warp, ``mma.sync.m16n8k16``,
C = A · Bᵀ over a symbolic K, with planted coverage bugs no tag sees."""

from sympy import Eq

import argus.spec as A

ATOM = "mma.sync.m16n8k16.bf16"


@A.kernel(threads=32, assume=lambda K: [Eq(K % 32, 0), K >= 32])
def k_loop(a: A.Global(A.bf16, "16 K"), b: A.Global(A.bf16, "8 K"), c: A.Global(A.f32, "16 8"),
           STEPS: A.const = "once", COMPUTED_A: A.const = False, RESCALE: A.const = False,
           RESET: A.const = False):
    """c = a · bᵀ by one warp, a k-step of 16 per iteration.  ``STEPS``: "once" (correct),
    "half" (the second half of K is skipped), "twice" (K is covered twice); ``COMPUTED_A``:
    A is scaled by 1 before the MMA (computed, so the domain is not derived); ``RESCALE``:
    ``acc = acc * 1`` after each MMA (the partial sum is carried through the rescaling);
    ``RESET``: ``acc`` starts again from zero at every iteration."""
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    acc = A.mma_fragment(ATOM, "c")
    KT = a.shape[1] // 16
    for kt in A.range({"once": KT, "half": KT // 2, "twice": 2 * KT}[STEPS]):
        kb = kt % KT if STEPS == "twice" else kt
        if RESET:
            acc = A.mma_fragment(ATOM, "c")
        fa = A.load(A.mma_partition(ATOM, "a", a.tile((16, 16), (0, kb))))
        if COMPUTED_A:
            fa = fa * 1.0
        fb = A.load(A.mma_partition(ATOM, "b", b.tile((8, 16), (0, kb))))
        A.mma(ATOM, fa, fb, acc)
        if RESCALE:
            acc = acc * 1.0
    A.store(acc, A.mma_partition(ATOM, "c", c))
    A.assert_tag(c, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")


@A.kernel(threads=32, assume=lambda K: [Eq(K % 32, 0), K >= 32])
def split_k(a: A.Global(A.bf16, "16 K"), b: A.Global(A.bf16, "8 K"), c: A.Global(A.f32, "16 8"),
            OVERLAP: A.const = False):
    """Two partial sums over the halves of K, added before the store; ``OVERLAP`` makes the
    second one cover the first half again."""
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    low, high = A.mma_fragment(ATOM, "c"), A.mma_fragment(ATOM, "c")
    half = a.shape[1] // 32
    for kt in A.range(half):
        fa = A.load(A.mma_partition(ATOM, "a", a.tile((16, 16), (0, kt))))
        fb = A.load(A.mma_partition(ATOM, "b", b.tile((8, 16), (0, kt))))
        A.mma(ATOM, fa, fb, low)
    for kt in A.range(half):
        kb = kt if OVERLAP else kt + half
        fa = A.load(A.mma_partition(ATOM, "a", a.tile((16, 16), (0, kb))))
        fb = A.load(A.mma_partition(ATOM, "b", b.tile((8, 16), (0, kb))))
        A.mma(ATOM, fa, fb, high)
    A.store(low + high, A.mma_partition(ATOM, "c", c))


@A.kernel(threads=32, assume=lambda K: [Eq(K % 16, 0), K >= 16])
def partial_rows(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "8 K"), c: A.Global(A.f32, "M 8"),
                 STEPS: A.const = "once"):
    """c = a · bᵀ for M < 16: the A tile's rows past M are zero-filled (known zeros), and the
    whole 16-row accumulator leaves the chain through shared memory before the rows in range
    are copied out.  ``STEPS="half"`` skips the second half of K."""
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    acc = A.mma_fragment(ATOM, "c")
    staged = A.shared(A.f32, (16, 8))
    KT = a.shape[1] // 16
    for kt in A.range(KT // 2 if STEPS == "half" else KT):
        fa = A.load(A.mma_partition(ATOM, "a", a.tile((16, 16), (0, kt))))
        fb = A.load(A.mma_partition(ATOM, "b", b.tile((8, 16), (0, kt))))
        A.mma(ATOM, fa, fb, acc)
    A.store(acc, A.mma_partition(ATOM, "c", staged))
    A.barrier()
    lane = A.lane_id()
    A.copy(staged.tile((1, 8), (lane % 16, 0)), c.tile((16, 8), (0, 0)).tile((1, 8), (lane % 16, 0)),
           pred=lane < 16)
