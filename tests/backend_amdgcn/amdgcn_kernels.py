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


@A.kernel(threads=256, grid=lambda n: (A.cdiv(n, 256),))
def lds_direct_f32(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, REVERSED: A.const = False):
    """Each thread moves one f32 into LDS with a direct-to-LDS load, then reads another's."""
    s = A.shared(A.f32, (256,))
    t = A.thread_id()
    slot = 255 - t if REVERSED else t  # REVERSED: lane l would write 4*(63 - l): not M0 + 4*l
    A.copy(x.tile((256,), (A.block_id(0),)).tile((1,), (t,)), s.tile((1,), (slot,)), atom="buffer.load.lds")
    A.barrier()
    v = A.load(s.tile((1,), (255 - t,)))
    A.store(v, y.tile((256,), (A.block_id(0),)).tile((1,), (t,)))


@A.kernel(threads=128, grid=lambda: (1,))
def lds_direct_bf16(x: A.Global(A.bf16, "16 32"), y: A.Global(A.bf16, "16 32"), WIDTH: A.const = 2):
    """A 16 x 32 bf16 tile staged in LDS, two elements (one dword) per thread (WIDTH=4: two
    dwords per thread, which the direct-to-LDS load cannot do)."""
    s = A.shared(A.bf16, (16, 32))
    t = A.thread_id()
    per_row = 32 // WIDTH
    mine = (t // per_row, t % per_row)
    if WIDTH == 2 or t < 16 * per_row:
        A.copy(x.tile((1, WIDTH), mine), s.tile((1, WIDTH), mine), atom="buffer.load.lds")
    A.barrier()
    A.store(A.load(s.tile((1, 2), (t // 16, t % 16))), y.tile((1, 2), (t // 16, t % 16)))


@A.kernel(threads=256, grid=lambda: (1,))
def wave_uniform_ids(x: A.Global(A.f32, "256"), y: A.Global(A.f32, "256")):
    """Values uniform per 64-lane wavefront (``t // 64``) feed addresses and a branch."""
    t = A.thread_id()
    wave = t // 64
    v = A.load(x.tile((64,), ((wave + 1) % 4,)).tile((1,), (t % 64,)))
    if wave % 2 == 0:
        A.store(v, y.tile((64,), (wave,)).tile((1,), (t % 64,)))
    else:
        A.store(A.load(x.tile((1,), (t,))), y.tile((1,), (t,)))
