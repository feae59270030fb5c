"""Small gfx942 kernels for the backend tests: fp8 MFMA, FNUZ conversion, buffer loads."""

import argus.spec as A

FP8_32 = "v_mfma_f32_32x32x16_fp8_fp8"
FP8_16 = "v_mfma_f32_16x16x32_fp8_fp8"
BF16_16 = "v_mfma_f32_16x16x16_bf16"


def mfma_tile(atom: str, in_type, m: int, n: int, k: int):
    """One wavefront multiplies a (m x k) by b (n x k)^T into c (m x n) with one MFMA."""

    @A.kernel(threads=64, grid=lambda: (1,))
    def mfma_tile(a: A.Global(in_type, f"{m} {k}"), b: A.Global(in_type, f"{n} {k}"),
                  c: A.Global(A.f32, f"{m} {n}")):
        fa = A.load(A.mma_partition(atom, "a", a.tile((m, k), (0, 0))))
        fb = A.load(A.mma_partition(atom, "b", b.tile((n, k), (0, 0))))
        acc = A.mma_fragment(atom, "c")
        A.mma(atom, fa, fb, acc)
        A.store(acc, A.mma_partition(atom, "c", c.tile((m, n), (0, 0))))

    return mfma_tile


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),))
def to_fp8(x: A.Global(A.f32, "n"), y: A.Global(A.e4m3fnuz, "n"), n: A.Index, SAT: A.const = False):
    mine = x.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    v = A.load(mine)
    q = A.convert(v, A.e4m3fnuz, satfinite=SAT)
    A.store(q, y.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 256),))
def buffer_copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index):
    r = A.fragment((4,), A.f32)
    src = x.tile((256,), (A.block_id(0),)).tile((4,), (A.thread_id(),))
    A.copy(src, r, atom="buffer.load")
    A.store(r, y.tile((256,), (A.block_id(0),)).tile((4,), (A.thread_id(),)))
