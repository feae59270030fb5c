"""The gfx942 (MI300X) GEMM: ``C = A · Bᵀ`` with ``v_mfma_f32_32x32x8_bf16``.

``A`` is ``M x K`` and ``B`` is ``N x K``, both bf16 and K-contiguous; ``C`` is ``M x N`` in f32
(fp32 accumulation).  The kernel is written in the DSL; :func:`gemm_gfx942` builds it for one
configuration:

* ``BM``, ``BN`` (multiples of 64): the block tile.  A block is four wavefronts (256 threads)
  in a 2 x 2 arrangement; wavefront ``(wm, wn)`` owns ``BM/64 x BN/64`` MFMA tiles of
  32 x 32, rows ``wm·BM/2 ..`` and columns ``wn·BN/2 ..`` of the block tile.
* ``BK`` (a multiple of 8): the k-block staged in LDS per step; each k-block is
  ``BK / 8`` MFMA k-steps.
* ``DIRECT``: how a k-block reaches LDS.  ``True``: direct-to-LDS buffer loads
  (``buffer_load_dword ... lds``, the ``buffer.load.lds`` atom): global memory goes to LDS
  without passing through VGPRs; thread ``t`` moves dwords ``t, t + 256, ...`` of the tile, so
  the 64 lanes of a wavefront write 256 consecutive bytes (the instruction's ``M0 + 4·lane``
  layout).  ``False``: buffer loads into VGPRs (``buffer.load``, 16 bytes per thread and
  chunk) issued before the k-block's MFMAs and written to LDS (``ds_write_b128``) after them,
  inside one branch arm (the last step, which prefetches nothing, has its own copy of the
  MFMAs), so that no register value crosses from one branch to another.

Pipeline (double-buffered LDS, one barrier per k-block).  The stages are two separate shared
buffers per operand, selected by the parity of the k-block; the k loop is unrolled twice so
that every access names its stage statically (the backend's wait-count pass and hazard checker
then see that filling one stage never touches the other).  Before the loop, k-block 0 is
issued into stage 0.  Step ``kt``: barrier (k-block ``kt`` has landed in stage ``kt % 2`` for
every wavefront — the backend waits for outstanding vector memory before ``s_barrier`` — and
every wavefront is done reading the other stage), issue k-block ``kt + 1`` into the other
stage, run the MFMAs on stage ``kt % 2`` while those loads are in flight.

Invariants (tags and assertions): ``a`` carries ``(i, k)``, ``b`` carries ``(j, k)``; after the
barrier, stage ``kt % 2`` holds k-block ``kt`` of both operands (asserted); every MFMA pairs A
and B elements of equal ``k`` (the MMA semantics); the accumulator element stored at
``c[i, j]`` carries ``(i, j)`` (asserted over the block tile, after a final barrier that
orders the wavefronts' stores before the assertion).

Shapes: ``M``, ``N``, ``K`` are multiples of ``BM``, ``BN``, ``BK``, and the kernel says so in its
tensor shapes rather than by assumption: ``a`` is ``MT x BM x KT x BK`` (the row-major ``M x K``
array, same bytes), ``b`` is ``NT x BN x KT x BK`` and ``c`` is ``MT x BM x NT x BN``, with
``MT = M / BM`` etc.  Block ``(bn, bm)`` of the ``NT x MT`` grid works on ``a[bm]``,
``b[bn]`` and ``c[bm, :, bn, :]``: every tile is whole, so no copy carries a bounds predicate.
One assumption: ``K = KT·BK <= 2^20`` (buffer instructions address a block's operand rows
with 32-bit lane offsets from a per-block resource base).  :func:`run_reference` runs the
kernel in the reference interpreter on ``M x K`` / ``N x K`` arrays.

Proved: every configuration with ``DIRECT=True``, the first also with ``DIRECT=False`` (records
in ``proofs/``, named by :func:`kernel_name`); the gate verifies the others where solvers exist
and refuses them elsewhere.  The backend tests emit every configuration without the gate.
"""

import functools
from typing import Any

import numpy as np

import argus.spec as A
from argus.errors import ArgusError

__all__ = ["ATOM", "CONFIGS", "THREADS", "GemmError", "gemm_gfx942", "kernel_name", "kernel_named", "run_reference"]

ATOM = "v_mfma_f32_32x32x8_bf16"
THREADS = 256  # four wavefronts of 64 lanes
MAX_K = 1 << 20  # keeps a block's per-lane buffer offsets (< BM·K·2 bytes) within 32 bits
CONFIGS = ({"BM": 64, "BN": 64, "BK": 32}, {"BM": 128, "BN": 128, "BK": 32}, {"BM": 128, "BN": 64, "BK": 64})
"""Block shapes the kernel is built and tested with (each with ``DIRECT`` True or False)."""


class GemmError(ArgusError):
    """A gfx942 GEMM configuration or shape argus does not build (with a hint)."""


def _direct_fill(src: Any, dst: Any, t: Any) -> None:
    """Every thread moves the dwords ``t, t + 256, ...`` of the ``rows x BK`` tile straight into
    LDS: in each chunk the 64 lanes of a wavefront write 256 consecutive bytes."""
    rows, bk = src.shape
    per_row = bk // 2  # dwords (two bf16) in a row
    for chunk in range(rows * per_row // THREADS):
        d = chunk * THREADS + t
        mine = (d // per_row, d % per_row)
        A.copy(src.tile((1, 2), mine), dst.tile((1, 2), mine), atom="buffer.load.lds")


def _load_chunks(src: Any, t: Any) -> list[tuple[Any, tuple[Any, Any]]]:
    """Buffer loads of 8 contiguous bf16 (16 bytes) per thread and chunk into registers."""
    rows, bk = src.shape
    per_row = bk // 8
    chunks = []
    for chunk in range(rows * per_row // THREADS):
        d = chunk * THREADS + t
        mine = (d // per_row, d % per_row)
        regs = A.fragment((1, 8), A.bf16)
        A.copy(src.tile((1, 8), mine), regs, atom="buffer.load")
        chunks.append((regs, mine))
    return chunks


def _store_chunks(chunks: list[tuple[Any, tuple[Any, Any]]], dst: Any) -> None:
    for regs, mine in chunks:
        A.store(regs, dst.tile((1, 8), mine))


def _fill(a_src: Any, b_src: Any, sa: Any, sb: Any, t: Any, direct: bool) -> list:
    """Issue one k-block; returns the register chunks still to be written to LDS (``DIRECT=False``)."""
    if direct:
        _direct_fill(a_src, sa, t)
        _direct_fill(b_src, sb, t)
        return []
    return [(_load_chunks(a_src, t), sa), (_load_chunks(b_src, t), sb)]


def _mfmas(sa: Any, sb: Any, acc: Any, wm: Any, wn: Any, tm: int, tn: int, bk: int) -> None:
    """The wavefront's ``tm x tn`` MFMA tiles over one k-block staged in ``sa``/``sb``."""
    for ks in range(bk // 8):
        fa = [A.load(A.mma_partition(ATOM, "a", sa.tile((32, 8), (wm * tm + mi, ks)))) for mi in range(tm)]
        fb = [A.load(A.mma_partition(ATOM, "b", sb.tile((32, 8), (wn * tn + ni, ks)))) for ni in range(tn)]
        for mi in range(tm):
            for ni in range(tn):
                A.mma(ATOM, fa[mi], fb[ni], acc[mi][ni])


@functools.cache
def gemm_gfx942(BM: int = 64, BN: int = 64, BK: int = 32, DIRECT: bool = True) -> Any:
    """The kernel for one block shape and staging (see the module docstring)."""
    if BM % 64 or BN % 64 or BM <= 0 or BN <= 0:
        raise GemmError(f"gemm_gfx942: BM={BM}, BN={BN}", hint="the block tile is 2 x 2 wavefronts of 32 x 32 "
                        "MFMA tiles: BM and BN must be positive multiples of 64")
    chunk = 512 if DIRECT else 2048  # elements one pass of 256 threads moves (2 or 8 bf16 each)
    if BK % 8 or BK <= 0 or (BM * BK) % chunk or (BN * BK) % chunk:
        raise GemmError(f"gemm_gfx942: BK={BK} with BM={BM}, BN={BN}, DIRECT={DIRECT}",
                        hint=f"BK must be a multiple of 8 and BM·BK, BN·BK multiples of {chunk}")
    TM, TN = BM // 64, BN // 64

    def gemm_gfx942(a: A.Global(A.bf16, f"MT {BM} KT {BK}"), b: A.Global(A.bf16, f"NT {BN} KT {BK}"),
                    c: A.Global(A.f32, f"MT {BM} NT {BN}")):
        A.tag(a, lambda mt, r, kt, k: (mt * BM + r, kt * BK + k), "A")
        A.tag(b, lambda nt, r, kt, k: (nt * BN + r, kt * BK + k), "B")
        t = A.thread_id()
        bm, bn = A.block_id(1), A.block_id(0)
        wave = t // 64  # one value per wavefront: the backend keeps it in an SGPR
        wm, wn = wave // 2, wave % 2
        stage_a = (A.shared(A.bf16, (BM, BK)), A.shared(A.bf16, (BM, BK)))
        stage_b = (A.shared(A.bf16, (BN, BK)), A.shared(A.bf16, (BN, BK)))
        # one accumulator per MFMA tile: each is one contiguous run of 16 registers (a tiled
        # fragment would interleave the tiles' values, which an MFMA cannot address)
        acc = [[A.mma_fragment(ATOM, "c") for _ in range(TN)] for _ in range(TM)]
        KT = a.shape[2]
        pending = _fill(a[bm, :, 0, :], b[bn, :, 0, :], stage_a[0], stage_b[0], t, DIRECT)
        for chunks, dst in pending:
            _store_chunks(chunks, dst)
        for kp in A.range((KT + 1) // 2):
            for half in (0, 1):  # traced twice: stage `half` holds the even / odd k-blocks
                kt = 2 * kp + half
                if kt < KT:
                    A.barrier()
                    A.assert_tag(stage_a[half], lambda i, k, tg, kt=kt: tg == (bm * BM + i, kt * BK + k),
                                 "stage kt % 2 holds k-block kt of A")
                    A.assert_tag(stage_b[half], lambda j, k, tg, kt=kt: tg == (bn * BN + j, kt * BK + k),
                                 "stage kt % 2 holds k-block kt of B")
                    if DIRECT:
                        if kt + 1 < KT:
                            _fill(a[bm, :, kt + 1, :], b[bn, :, kt + 1, :], stage_a[1 - half], stage_b[1 - half],
                                  t, DIRECT)
                        _mfmas(stage_a[half], stage_b[half], acc, wm, wn, TM, TN, BK)
                    elif kt + 1 < KT:
                        # the prefetched registers are loaded and stored inside one branch arm
                        # (the MFMAs are traced in both arms)
                        pending = _fill(a[bm, :, kt + 1, :], b[bn, :, kt + 1, :], stage_a[1 - half],
                                        stage_b[1 - half], t, DIRECT)
                        _mfmas(stage_a[half], stage_b[half], acc, wm, wn, TM, TN, BK)
                        for chunks, dst in pending:
                            _store_chunks(chunks, dst)
                    else:
                        _mfmas(stage_a[half], stage_b[half], acc, wm, wn, TM, TN, BK)
        tile = c[bm, :, bn, :]
        for mi in range(TM):
            for ni in range(TN):
                A.store(acc[mi][ni], A.mma_partition(ATOM, "c", tile.tile((32, 32), (wm * TM + mi, wn * TN + ni))))
        A.barrier()  # the block's tile is complete: every wavefront stored its part
        A.assert_tag(tile, lambda mt, i, nt, j, tg: tg == (mt * BM + i, nt * BN + j),
                     "c[i, j] = row i of A · row j of B")

    gemm_gfx942.__name__ = gemm_gfx942.__qualname__ = kernel_name(BM, BN, BK, DIRECT)
    return A.kernel(threads=THREADS, grid=lambda MT, NT: (NT, MT),
                    assume=lambda KT: [KT >= 1, KT <= MAX_K // BK])(gemm_gfx942)


def kernel_name(BM: int, BN: int, BK: int, DIRECT: bool) -> str:
    """The kernel's name for one configuration (``gemm_gfx942_64x64x32_lds``; ``_vgpr`` for the
    staging through registers): proof records and code objects are told apart by it."""
    return f"gemm_gfx942_{BM}x{BN}x{BK}_{'lds' if DIRECT else 'vgpr'}"


def kernel_named(name: str) -> Any:
    """The kernel of the configuration that :func:`kernel_name` calls ``name``."""
    import re

    found = re.fullmatch(r"gemm_gfx942_(\d+)x(\d+)x(\d+)_(lds|vgpr)", name)
    if found is None:
        raise GemmError(f"no gfx942 GEMM kernel is called {name!r}", hint="names are gemm_gfx942_<BM>x<BN>x<BK>_lds|vgpr")
    bm, bn, bk, staging = found.groups()
    return gemm_gfx942(BM=int(bm), BN=int(bn), BK=int(bk), DIRECT=staging == "lds")


def run_reference(a: np.ndarray, b: np.ndarray, config: dict[str, Any] | None = None) -> np.ndarray:
    """``a @ b.T`` computed by the reference interpreter running the kernel (bf16 inputs
    rounded, f32 accumulation): the twin's semantics at small shapes, on the host."""
    from argus.ir.interpreter import Interpreter

    config = dict(config or {})
    kernel = gemm_gfx942(**config).specialize()
    bm, bn, bk = config.get("BM", 64), config.get("BN", 64), config.get("BK", 32)
    (m, k), (n, _) = a.shape, b.shape
    if m % bm or n % bn or k % bk or b.shape[1] != k:
        raise GemmError(f"gemm_gfx942: shapes {a.shape} x {b.shape}ᵀ", hint=f"M, N, K must be multiples of "
                        f"BM={bm}, BN={bn}, BK={bk}")
    inputs = {"a": a.reshape(m // bm, bm, k // bk, bk), "b": b.reshape(n // bn, bn, k // bk, bk),
              "c": np.zeros((m // bm, bm, n // bn, bn), np.float32)}
    out = Interpreter(kernel).run(inputs, {"MT": m // bm, "NT": n // bn, "KT": k // bk})
    return out["c"].reshape(m, n)
