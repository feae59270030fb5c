"""Kernels for the MMA and collective tests: one atom tile, shuffles, reductions, re-tiling."""

import argus.spec as A
from argus.ir.atoms import mma_atom
from argus.layout_algebra import Swizzle


def one_tile(atom: str, *, WRONG_K: bool = False, MIXED_ROWS: bool = False, NO_FENCE: bool = False,
             EARLY_READ: bool = False, NO_WAIT: bool = False, REWRITE_A: bool = False):
    """D = A·Bᵀ + C for one atom tile, operands straight from global memory.

    A is M×K, B is N×K, C and D are M×N.  Tags: A (i, k), B (j, k); D must carry (i, j).
    ``WRONG_K`` pairs B's k-halves the wrong way round (a planted bug); ``MIXED_ROWS`` tags A so
    that a row of the A tile mixes source rows (the result has no row: untagged); ``NO_FENCE``
    omits the proxy fence between the ordinary shared-memory stores and the wgmma reading them;
    ``EARLY_READ`` stores a wgmma accumulator before the ``wgmma_wait`` that completes its group;
    ``NO_WAIT`` commits the wgmma but never waits for it (and stores nothing); ``REWRITE_A``
    (a ``.rs`` atom) overwrites the A registers before the ``wgmma_wait`` (the tensor cores may
    still be reading them).
    """
    spec = mma_atom(atom)
    m, n, k = spec.mnk
    ta, tb = spec.a_dtype, spec.b_dtype
    dims_a, dims_b, dims_c = f"{m} {k}", f"{n} {k}", f"{m} {n}"
    threads = spec.threads

    @A.kernel(threads=threads)
    def mma_one_tile(a: A.Global(ta, dims_a), b: A.Global(tb, dims_b), c: A.Global(A.f32, dims_c),
                     d: A.Global(A.f32, dims_c)):
        if MIXED_ROWS:
            A.tag(a, lambda i, kk: ((i + kk) % m, kk), "A")
        else:
            A.tag(a, lambda i, kk: (i, kk), "A")
        if WRONG_K:
            A.tag(b, lambda j, kk: (j, (kk + k // 2) % k), "B")
        else:
            A.tag(b, lambda j, kk: (j, kk), "B")
        A.tag(c, lambda i, j: (i, j), "C")
        if spec.a_source == "shared":
            sa = A.shared(ta, (m, k), swizzle=Swizzle(1, 3, 3))  # 32-byte rows: the 32B swizzle
            A.copy(a.tile((m, 1), (0, A.thread_id() % k)), sa.tile((m, 1), (0, A.thread_id() % k)),
                   pred=A.thread_id() < k)
            fa = sa
        else:
            fa = A.load(A.mma_partition(spec, "a", a))
        if spec.b_source == "shared":
            sb = A.shared(tb, (n, k), swizzle=Swizzle(1, 3, 3) if spec.family == "wgmma" else None)
            A.copy(b.tile((n, 1), (0, A.thread_id() % k)), sb.tile((n, 1), (0, A.thread_id() % k)),
                   pred=A.thread_id() < k)
            fb = sb
        else:
            fb = A.load(A.mma_partition(spec, "b", b))
        if (spec.a_source == "shared" or spec.b_source == "shared") and not NO_FENCE:
            A.fence_proxy_async()  # wgmma reads shared memory through the async proxy
        A.barrier()
        acc = A.load(A.mma_partition(spec, "c", c))
        A.mma(spec, fa, fb, acc)
        out = A.mma_partition(spec, "c", d)
        if spec.family == "wgmma":
            A.wgmma_commit()
            if NO_WAIT:
                return
            if REWRITE_A:
                A.store(A.zeros(fa.shape, ta), fa)
            if not EARLY_READ:
                A.wgmma_wait(0)
        A.store(acc, out)
        if spec.family == "wgmma" and EARLY_READ:
            A.wgmma_wait(0)
        A.assert_tag(out, lambda i, j, t: t == (i, j), "D[i, j] pairs row i of A with row j of B")

    return mma_one_tile


@A.kernel(threads=32)
def shuffles(x: A.Global(A.f32, "32 2"), y: A.Global(A.f32, "4 32 2"), SHIFT: A.const = 3):
    """y[0] = idx-shuffle from lane (l + SHIFT) % 32, y[1] = xor 5, y[2] = up 2, y[3] = down 7."""
    A.tag(x, lambda i, j: (i, j), "x")
    lane = A.lane_id()
    v = A.load(x.tile((1, 2), (lane, 0)))
    A.store(A.shuffle(v, (lane + SHIFT) % 32, "idx"), y[0].tile((1, 2), (lane, 0)))
    A.store(A.shuffle(v, 5, "xor"), y[1].tile((1, 2), (lane, 0)))
    A.store(A.shuffle(v, 2, "up"), y[2].tile((1, 2), (lane, 0)))
    A.store(A.shuffle(v, 7, "down"), y[3].tile((1, 2), (lane, 0)))
    A.assert_tag(y[0].tile((1, 2), (lane, 0)), lambda s, i, j, t: t == ((i + SHIFT) % 32, j))


@A.kernel(threads=64)
def lane_reductions(x: A.Global(A.f32, "64 4"), s: A.Global(A.f32, "64"), mx: A.Global(A.f32, "64")):
    """Per lane: the sum over the 4 lanes of a quad and 4 values; the max over the wavefront (64)."""
    A.tag(x, lambda i, j: (i // 4, i % 4, j), "x")
    t = A.thread_id()
    v = A.load(x.tile((1, 4), (t, 0)))
    quad = A.reduce(v, "add", across_lanes=(1, 2))
    A.assert_tag(quad, lambda e, tag: tag == (t // 4,), "a quad's sum keeps the quad index")
    A.store(quad, s.tile((1,), (t,)))
    A.store(A.reduce(v, "max", across_lanes=(32, 16, 8, 4, 2, 1)), mx.tile((1,), (t,)))


@A.kernel(threads=32, grid=lambda n: (A.cdiv(n, 32),))
def bucket_sums(w: A.Global(A.f32, "n"), h: A.Global(A.f32, "8"), n: A.Index):
    """h[b] += w[i] for every i with i % 8 == b, by atomics from every block."""
    i = A.block_id(0) * 32 + A.thread_id()
    A.atomic_add(h.tile((1,), (A.thread_id() % 8,)), A.load(w.tile((1,), (i,))), pred=i < n)


SYNC = "mma.sync.m16n8k16.bf16"


@A.kernel(threads=32)
def two_gemms_mma_sync(q: A.Global(A.bf16, "16 16"), k: A.Global(A.bf16, "16 16"), vt: A.Global(A.bf16, "8 16"),
                       o: A.Global(A.f32, "16 8")):
    """O = bf16(Q·Kᵀ)·V with the f32 accumulator of GEMM-1 re-tiled as GEMM-2's A (no data moves).

    Tags: q (i, d), k (j, d) → S (i, j); vt (e, j) → O (i, e).
    """
    A.tag(q, lambda i, d: (i, d), "q")
    A.tag(k, lambda j, d: (j, d), "k")
    A.tag(vt, lambda e, j: (e, j), "vt")
    fq = A.load(A.mma_partition(SYNC, "a", q))
    s = A.mma_fragment(SYNC, "c", (1, 2))
    for ni in A.range(2, unroll=True):
        A.mma(SYNC, fq, A.load(A.mma_partition(SYNC, "b", k.tile((8, 16), (ni, 0)))), s[0, ni])
    p = A.retile(s, SYNC, SYNC, "a", dtype=A.bf16)
    acc = A.mma_fragment(SYNC, "c")
    A.mma(SYNC, p[0, 0], A.load(A.mma_partition(SYNC, "b", vt)), acc)
    out = A.mma_partition(SYNC, "c", o)
    A.store(acc, out)
    A.assert_tag(out, lambda i, e, t: t == (i, e), "O[i, e] pairs S row i with V column e")


MFMA = "v_mfma_f32_32x32x8_bf16"


@A.kernel(threads=64)
def two_gemms_mfma(k: A.Global(A.bf16, "32 8"), q: A.Global(A.bf16, "32 8"), vt: A.Global(A.bf16, "32 32"),
                   ot: A.Global(A.f32, "32 32")):
    """Oᵀ = Vᵀ·Pᵀ on one wavefront, P = bf16(S), S = Q·Kᵀ: GEMM-1 computes Sᵀ = K·Qᵀ (C rows are
    keys), and that accumulator, transposed, is already GEMM-2's B operand (B is viewed N×K =
    queries × keys) in every lane's registers.

    Tags: k (j, d), q (i, d) → Sᵀ (j, i); as B, k is field 0 (j); vt (e, j) → Oᵀ (e, i).
    """
    A.tag(k, lambda j, d: (j, d), "k")
    A.tag(q, lambda i, d: (i, d), "q")
    A.tag(vt, lambda e, j: (e, j), "vt")
    st = A.mma_fragment(MFMA, "c")
    A.mma(MFMA, A.load(A.mma_partition(MFMA, "a", k)), A.load(A.mma_partition(MFMA, "b", q)), st)
    p = A.retile(st, MFMA, MFMA, "b", transpose=True, dtype=A.bf16)
    acc = A.mma_fragment(MFMA, "c")
    for ks in A.range(4, unroll=True):
        A.mma(MFMA, A.load(A.mma_partition(MFMA, "a", vt.tile((32, 8), (0, ks)))), p[0, ks], acc,
              k_fields=(-1, 0))
    out = A.mma_partition(MFMA, "c", ot)
    A.store(acc, out)
    A.assert_tag(out, lambda e, i, t: t == (e, i), "Oᵀ[e, i] pairs V column e with S row i")


@A.kernel(threads=32)
def accumulator_row_max(q: A.Global(A.bf16, "16 16"), k: A.Global(A.bf16, "16 16"), mx: A.Global(A.f32, "16"),
                        centered: A.Global(A.f32, "16 16")):
    """Row maxima of S = Q·Kᵀ in the mma.sync accumulator layout, and S minus its row maximum.

    The fragment (1, 2, 2, 2) is (tile row, tile column, column pair, row half): lane l holds
    rows l//4 and l//4 + 8, and the 4 lanes of a quad share them, so the row maximum reduces
    modes 1 and 2 locally and then across lanes with xor masks 1 and 2.
    """
    A.tag(q, lambda i, d: (i, d), "q")
    A.tag(k, lambda j, d: (j, d), "k")
    lane = A.lane_id()
    fq = A.load(A.mma_partition(SYNC, "a", q))
    s = A.mma_fragment(SYNC, "c", (1, 2))
    for ni in A.range(2, unroll=True):
        A.mma(SYNC, fq, A.load(A.mma_partition(SYNC, "b", k.tile((8, 16), (ni, 0)))), s[0, ni])
    rmax = A.reduce(s, "max", modes=(1, 2), across_lanes=(1, 2))  # shape (1, 2): (tile row, row half)
    A.assert_tag(rmax, lambda tm, half, t: t == (lane // 4 + 8 * half,), "the maximum of row r keeps tag (r,)")
    for half in A.range(2, unroll=True):
        A.store(rmax[0].tile((1,), (half,)), mx.tile((1,), (lane // 4 + 8 * half,)), pred=lane % 4 == 0)
    shifted = s - A.broadcast(rmax[0], (1, 2, 2, 2))  # (row half) is the last mode of s
    for ni in A.range(2, unroll=True):
        A.store(shifted[0, ni], A.mma_partition(SYNC, "c", centered.tile((16, 8), (0, ni))))


@A.kernel(threads=64)
def shared_counters(w: A.Global(A.f32, "64"), out: A.Global(A.f32, "4"), SYNC: A.const = True):
    """Four shared counters, each the atomic sum of 16 threads' weights, then copied out."""
    s = A.shared(A.f32, (4,))
    t = A.thread_id()
    A.store(A.full((1,), 0.0, A.f32), s.tile((1,), (t,)), pred=t < 4)
    A.barrier()
    A.atomic_add(s.tile((1,), (t % 4,)), A.load(w.tile((1,), (t,))))
    if SYNC:
        A.barrier()
    A.copy(s.tile((1,), (t,)), out.tile((1,), (t,)), pred=t < 4)


@A.kernel(threads=128)
def wave64_collectives(x: A.Global(A.f32, "128"), rev: A.Global(A.f32, "128"), total: A.Global(A.f32, "128")):
    """Per 64-lane wavefront: rev = x reversed inside the wavefront; total = the wavefront's sum."""
    A.tag(x, lambda i: (i // 64,), "wave")
    t = A.thread_id()
    v = A.load(x.tile((1,), (t,)))
    A.store(A.shuffle(v, 63 - t % 64, "idx", width=64), rev.tile((1,), (t,)))
    s = A.warp_reduce(v, "add", lanes=64)
    A.assert_tag(s, lambda e, tag: tag == (t // 64,), "a wavefront's sum stays in its wavefront")
    A.store(s, total.tile((1,), (t,)))


@A.kernel(threads=32)
def partial_k_mma_sync(a: A.Global(A.bf16, "16 K"), b: A.Global(A.bf16, "8 K"), c: A.Global(A.f32, "16 8"),
                       OTHER: A.const = 0, STATE_TAIL: A.const = "either"):
    """C = A · Bᵀ over K < 32 in two k-blocks of 16 read straight from global memory: the second
    k-block is partial, and ``load(..., other=0)`` fills its tail.  The filled elements carry a known
    zero (with ``OTHER`` 0), so their products contribute nothing to the tags: k-agreement holds and
    ``c[i, j]`` carries ``(i, j)``."""
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    K = a.shape[1]
    acc = A.mma_fragment(SYNC, "c")
    for kt in A.range(2, unroll=True):
        fa = A.load(A.mma_partition(SYNC, "a", a.tile((16, 16), (0, kt))), other=OTHER)
        fb = A.load(A.mma_partition(SYNC, "b", b.tile((8, 16), (0, kt))), other=OTHER)
        if STATE_TAIL == "either":  # fragment coordinates, then the tag: its k, or a known zero
            A.assert_tag(fa, lambda *ct: (ct[-1][1] < K) | ct[-1].known_zero, "k in range, or a known zero")
        elif STATE_TAIL == "zero":  # planted: only the tail is a known zero
            A.assert_tag(fa, lambda *ct: ct[-1].known_zero, "every element a known zero")
        A.mma(SYNC, fa, fb, acc)
    out = A.mma_partition(SYNC, "c", c)
    A.store(acc, out)
    A.assert_tag(out, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")


@A.kernel(threads=64)
def matrix_copies(x: A.Global(A.bf16, "16 16"), y: A.Global(A.bf16, "16 16"), TRANS: A.const = False,
                  ROWS: A.const = 16, COLS: A.const = 16, WARPS: A.const = 2, BARRIER: A.const = True,
                  DIVERGE: A.const = False, STRIDE: A.const = 16):
    """Warp w ldmatrix-loads the ROWS x COLS tile of ``x`` (staged in shared memory) and stmatrix-stores
    it into a second shared tile, which is copied to ``y``: y = x in the tile, with tags kept."""
    A.tag(x, lambda i, j: (i, j), "X")
    t = A.thread_id()
    s = A.shared(A.bf16, (16, STRIDE)).tile((16, 16), (0, 0))  # STRIDE 20: rows not 16-byte aligned
    d = A.shared(A.bf16, (16, 16))
    A.copy(x.tile((1, 4), (t // 4, t % 4)), s.tile((1, 4), (t // 4, t % 4)))
    A.barrier()
    if t < WARPS * 32:
        if DIVERGE:
            if t % 32 < 16:
                f = A.ldmatrix(s.tile((ROWS, COLS), (0, 0)), trans=TRANS)
        else:
            f = A.ldmatrix(s.tile((ROWS, COLS), (0, 0)), trans=TRANS)
            A.assert_tag(f, lambda e, m, tg: (tg[0] < ROWS) & (tg[1] < COLS), "the tile's elements")
            lane, blocks = A.lane_id(), ROWS // 8
            if TRANS:  # lane l, value e + 2m: row 2(l % 4) + e, column l / 4 of matrix m
                A.assert_tag(f, lambda e, m, tg: tg == (8 * (m % blocks) + 2 * (lane % 4) + e, 8 * (m // blocks) + lane // 4),
                             "the .trans fragment layout")
            else:  # row l / 4, column 2(l % 4) + e of matrix m
                A.assert_tag(f, lambda e, m, tg: tg == (8 * (m % blocks) + lane // 4, 8 * (m // blocks) + 2 * (lane % 4) + e),
                             "the ldmatrix fragment layout")
            if t < 32:
                A.stmatrix(f, d.tile((ROWS, COLS), (0, 0)), trans=TRANS)
    if BARRIER:
        A.barrier()
    A.copy(d.tile((1, 4), (t // 4, t % 4)), y.tile((1, 4), (t // 4, t % 4)), pred=(t < ROWS * 4) & (t % 4 < COLS // 4))


@A.kernel(threads=32)
def matrix_copy_misuse(x: A.Global(A.bf16, "16 16"), WHAT: A.const = "dtype"):
    """Matrix copies the front end rejects (selected by WHAT)."""
    if WHAT == "dtype":
        A.ldmatrix(A.shared(A.f32, (16, 16)))
    elif WHAT == "shape":
        A.ldmatrix(A.shared(A.bf16, (8, 24)))
    elif WHAT == "global":
        A.ldmatrix(x)
    elif WHAT == "fragment":
        A.stmatrix(A.zeros((2, 2), A.bf16), A.shared(A.bf16, (16, 16)))


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),))
def shifted_tail(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), OWN: A.const = False):
    """y[i] = x[i + 1]: the last element is the zero fill of x[n], a known zero standing for tag
    (n,).  OWN (planted) asserts that the last element of y carries its own coordinate."""
    A.tag(x, lambda i: (i,), "x")
    n = x.shape[0]
    i = A.block_id(0) * 64 + A.thread_id()
    v = A.load(x.tile((1,), (i + 1,)))
    out = y.tile((1,), (i,))
    A.store(v, out)
    if OWN:
        A.assert_tag(out, lambda j, t: (j < n - 1) | (t == (j,)), "y[n - 1] holds x[n - 1]")
    else:
        A.assert_tag(out, lambda j, t: t == (j + 1,), "y[j] holds x[j + 1] (a known zero for j = n - 1)")
