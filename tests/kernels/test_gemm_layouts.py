"""argus.kernels.gemm with row- and column-major operands: A as M x K or K x M, B as N x K or
K x N (``a_major`` / ``b_major``), in the reference interpreter against numpy at small odd shapes,
and assembled by ptxas at the benchmark's specialization with the wgmma transpose bits set."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "proofs"))
from async_kernels_support import discharge  # tests/proofs (put on the path above)

from argus.abstract_interp import generate_vcs
from argus.backend_ptx import emit_ptx
from argus.backend_ptx.assemble import build_cubin, disassemble
from argus.errors import ArgusError
from argus.ir import check, numerics
from argus.ir.interpreter import Interpreter
from argus.kernels.gemm import GemmConfig, GemmError, gemm_kernel
from argus.spec.kernel import kernel_hash
from argus.toolchain import find_ptxas

LAYOUTS = [("k", "k"), ("k", "n"), ("m", "k"), ("m", "n")]


def _operands(seed: int, m: int, n: int, k: int, a_major: str, b_major: str, dtype: str = "bf16"):
    """A (m x k) and B (n x k) as values, and the arrays the kernel takes for the layouts."""
    rng = np.random.default_rng(seed)
    a = numerics.round_to(dtype, rng.standard_normal((m, k))).astype(np.float32)
    b = numerics.round_to(dtype, rng.standard_normal((n, k))).astype(np.float32)
    a[a == 0], b[b == 0] = 0.5, 0.5  # never zeros: a dropped product shows
    stored_a = a if a_major == "k" else np.ascontiguousarray(a.T)
    stored_b = b if b_major == "k" else np.ascontiguousarray(b.T)
    return a, b, stored_a, stored_b


def _run(kernel, stored_a, stored_b, m: int, n: int, k: int, **extra) -> np.ndarray:
    inputs = {"a": stored_a, "b": stored_b, "c": np.zeros((m, n), np.float32), **extra}
    return Interpreter(kernel).run(inputs, {"M": m, "N": n, "K": k})["c"]


# M, N, K off the 128 x BN x 64 tiles; K a multiple of 8 only where an operand is K-contiguous
# (its row pitch), M where A is K x M; 3 tiles on 2 persistent blocks, a 2-stage ring refilled
@pytest.mark.parametrize("a_major, b_major, shape", [("k", "k", (200, 136, 72)), ("k", "n", (130, 72, 136)),
                                                     ("m", "k", (136, 200, 40)), ("m", "n", (200, 72, 75))])
def test_every_operand_layout_matches_numpy(a_major, b_major, shape):
    m, n, k = shape
    a, b, stored_a, stored_b = _operands(sum(shape), m, n, k, a_major, b_major)
    kernel = gemm_kernel(out_dtype="f32", a_major=a_major, b_major=b_major).specialize(BN=64, STAGES=2, SMS=2)
    check.check(kernel)
    out = _run(kernel, stored_a, stored_b, m, n, k)
    # k-blocks accumulate in order: the chain of one MMA over all of K (zero-filled tail included)
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    reference = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T))


def test_row_major_b_in_two_boxes_with_the_tma_epilogue_and_fp16():
    # BN = 128: each stage of B is two 64-column boxes, read as one N-major 128 x 16 operand;
    # A column-major too, C through the TMA-store epilogue
    m, n, k = 136, 200, 48
    a, b, stored_a, stored_b = _operands(9, m, n, k, "m", "n", "f16")
    kernel = gemm_kernel("f16", "f16", a_major="m", b_major="n").specialize(BN=128, STAGES=2, SMS=2, EPILOGUE="tma")
    out = _run(kernel, stored_a, stored_b, m, n, k)
    np.testing.assert_array_equal(out, numerics.round_to("f16", numerics.mma(a, b.T, None, a_dtype="f16")))


def test_bias_relu_epilogue_with_a_row_major_b():
    m, n, k = 70, 136, 24
    a, b, stored_a, stored_b = _operands(5, m, n, k, "k", "n")
    bias = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    kernel = gemm_kernel("bf16", "bf16", True, "relu", b_major="n").specialize(BN=64, STAGES=2, SMS=2)
    out = _run(kernel, stored_a, stored_b, m, n, k, bias=bias)
    acc = numerics.mma(a, b.T, None, a_dtype="bf16")
    np.testing.assert_array_equal(out, numerics.round_to("bf16", np.maximum((acc + bias).astype(np.float32), 0)))


def test_cluster_pairs_multicast_halves_of_a_row_major_b():
    # CLUSTER = 2: each block of a pair loads one of B's two 64-column boxes into both blocks
    m, n, k = 264, 200, 56
    a, b, stored_a, stored_b = _operands(13, m, n, k, "m", "n")
    kernel = gemm_kernel(out_dtype="f32", a_major="m", b_major="n").specialize(BN=128, STAGES=2, SMS=2, GROUP_M=2,
                                                                               CLUSTER=2)
    check.check(kernel)
    out = _run(kernel, stored_a, stored_b, m, n, k)
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))


def test_layouts_are_distinct_kernels_with_their_own_parameters():
    kernels = {layout: gemm_kernel(a_major=layout[0], b_major=layout[1]) for layout in LAYOUTS}
    assert kernels[("k", "k")].name == "gemm_bf16_bf16"  # the K-major kernel keeps its name
    assert len({k.name for k in kernels.values()}) == 4
    for (a_major, b_major), kernel in kernels.items():
        params = {p.name: p for p in kernel.specialize(BN=64, SMS=2).params}
        dims = [str(d) for d in params["a"].buffer.layout.shape] + [str(d) for d in params["b"].buffer.layout.shape]
        assert dims == (["M", "K"] if a_major == "k" else ["K", "M"]) + (["N", "K"] if b_major == "k" else ["K", "N"])


def test_a_column_major_a_declares_its_row_pitch():
    m, n, k = 130, 72, 40  # M = 130: the rows of a K x M A are 260 bytes apart, not a multiple of 16
    _, _, stored_a, stored_b = _operands(1, m, n, k, "m", "k")
    kernel = gemm_kernel(out_dtype="f32", a_major="m").specialize(BN=64, STAGES=2, SMS=2)
    with pytest.raises(ArgusError, match=r"Eq\(Mod\(M, 8\), 0\)"):
        _run(kernel, stored_a, stored_b, m, n, k)


def test_unsupported_layouts_are_refused_with_a_hint():
    with pytest.raises(GemmError, match="a_major='n'") as err:
        gemm_kernel(a_major="n")
    assert "'k' or 'm'" in err.value.hint
    with pytest.raises(GemmError, match="b_major='m'"):
        gemm_kernel(b_major="m")
    with pytest.raises(GemmError, match="boxes of 64 columns"):
        gemm_kernel(b_major="n").specialize(BN=96, SMS=2)
    with pytest.raises(GemmError, match="half of them from each block") as err:
        gemm_kernel(b_major="n").specialize(BN=192, SMS=2, CLUSTER=2)
    assert "multiple of 128" in err.value.hint


#: the properties of the synchronisation model and of memory races (as in tests/proofs/test_gemm_kernel_proof.py)
SYNC = {"async", "mbarrier", "expect-tx", "phase", "proxy", "descriptor", "role", "registers", "barrier", "wgmma",
        "race", "write-conflict"}


@pytest.mark.parametrize("a_major, b_major", LAYOUTS[1:])
def test_the_synchronisation_of_every_layout_is_proved(a_major, b_major):
    # a stage of several boxes (BM / 64 = 2 for A, BN / 64 = 2 for B): one expect-tx for all of
    # them, the descriptors of the permuted views, the ring across tiles
    kernel = gemm_kernel(a_major=a_major, b_major=b_major).specialize(BN=128, STAGES=2, GROUP_M=2, SMS=2,
                                                                      RELEASE="threads")
    analysis, vcs = generate_vcs(kernel)
    results = discharge(kernel, analysis, [vc for vc in vcs if vc.property in SYNC])
    assert {"descriptor", "expect-tx", "async"} <= {r.vc.property for r in results}
    assert all(r.verdict == "proved" for r in results), [(r.vc.id, r.verdict, r.reason) for r in results
                                                         if r.verdict != "proved"]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
@pytest.mark.parametrize("a_major, b_major", LAYOUTS)
def test_benchmark_specialization_assembles_with_the_transpose_bits(a_major, b_major, tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    kernel = gemm_kernel(a_major=a_major, b_major=b_major).specialize(**GemmConfig().consts(), SMS=132)
    ptx = emit_ptx(kernel, "sm_90a")
    issues = [line for line in ptx.text.splitlines() if "wgmma.mma_async" in line]
    trans = f", {int(a_major == 'm')}, {int(b_major == 'n')};"
    assert issues and all(line.rstrip().endswith(trans) for line in issues)  # imm-trans-a, imm-trans-b
    assert ptx.dynamic_shared_bytes <= 227 * 1024
    cubin = build_cubin(ptx, kernel_hash(kernel))
    assert "0 bytes spill stores" in cubin.log and "warning" not in cubin.log.lower(), cubin.log
    try:
        sass = disassemble(cubin.image)
    except Exception as err:  # no disassembler: assembling is the test
        pytest.skip(f"no SASS disassembler: {err}")
    assert sass.count("HGMMA.64x256x16.F32.BF16") == 4  # BK / 16 per k-block, one loop
    boxes = 1 + (1 if a_major == "k" else 2) + (1 if b_major == "k" else 4)  # C's store box, A's, B's
    assert len(re.findall(r"UTMALDG\.2D", sass)) == boxes - 1
