"""The matrix and collective examples against numpy on fresh random inputs, and their
planted bugs caught by the reference interpreter with block, thread, element and line."""

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from argus.errors import ArgusError
from argus.ir import check, numerics
from argus.ir.interpreter import Interpreter, InterpreterError
from argus.layout_algebra import bank_conflict_degree

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm_mfma
import gemm_mma_sync
import row_softmax
import transpose_swizzled


def _line(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _randn(rng, shape, dtype="f32"):
    x = numerics.round_to(dtype, rng.standard_normal(shape)).astype(np.float32)
    x[x == 0] = 0.5
    return x


# --------------------------------------------------------------------------- transpose


@pytest.mark.parametrize("m, n", [(40, 70), (32, 64)])
def test_swizzled_transpose_matches_numpy(m, n):
    x = _randn(np.random.default_rng(m * n), (m, n))
    out = Interpreter(transpose_swizzled.transpose.specialize()).run(
        {"x": x, "y": np.zeros((n, m), np.float32)}, {"M": m, "N": n})
    np.testing.assert_array_equal(out["y"], x.T)


def test_the_swizzle_makes_the_column_read_conflict_free():
    """A warp reads column ``r`` of the tile: lane l reads s[l, r] (4-byte elements)."""
    swizzle = transpose_swizzled.SWIZZLE
    for r in range(32):
        plain = [4 * (lane * 32 + r) for lane in range(32)]
        swizzled = [4 * swizzle(lane * 32 + r) for lane in range(32)]
        assert bank_conflict_degree(plain, 4) == 32
        assert bank_conflict_degree(swizzled, 4) == 1


# --------------------------------------------------------------------------- softmax


def test_row_softmax_matches_numpy():
    rows = 13  # a partial last block of 8 rows
    x = _randn(np.random.default_rng(21), (rows, 64)) * 4
    out = Interpreter(row_softmax.row_softmax.specialize()).run(
        {"x": x, "y": np.zeros((rows, 64), np.float32)}, {"R": rows})["y"]
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-9)


def test_reduction_across_rows_is_caught_by_the_row_tags():
    x = _randn(np.random.default_rng(22), (8, 64))
    kernel = row_softmax.row_softmax
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize(MIX_ROWS=True)).run({"x": x, "y": np.zeros((8, 64), np.float32)}, {"R": 8})
    v = err.value.violation
    assert v.kind == "tag" and "untagged" in v.message
    assert v.block == (0, 0, 0) and v.thread == 0 and v.element == (0, 0)
    assert v.position.line == _line(kernel, 'A.assert_tag(out, lambda i, j, t: t == (i,)')


# --------------------------------------------------------------------------- GEMMs


GEMMS = [(gemm_mma_sync.gemm, (128, 64, 96), "WRONG_KBLOCK", "A.mma(ATOM, fa, fb, acc[mi, ni])"),
         (gemm_mfma.gemm_mfma, (64, 128, 64), "SWAP_KSTEPS", "A.mma(ATOM, fa, fb, acc)")]


@pytest.mark.parametrize("kernel, shape, bug, mma_line", GEMMS, ids=["mma.sync", "mfma"])
def test_gemm_matches_numpy_exactly_and_within_tolerance(kernel, shape, bug, mma_line):
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a, b = _randn(rng, (m, k), "bf16"), _randn(rng, (n, k), "bf16")
    out = Interpreter(kernel.specialize()).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)},
                                               {"M": m, "N": n, "K": k})["c"]
    # the k-blocks are accumulated in order: the same chain of fused multiply-adds as one MMA over K
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    reference = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T))


@pytest.mark.parametrize("kernel, shape, bug, mma_line", GEMMS, ids=["mma.sync", "mfma"])
def test_gemm_wrong_k_pairing_is_reported_at_the_mma(kernel, shape, bug, mma_line):
    m, n, k = shape
    rng = np.random.default_rng(3)
    a, b = _randn(rng, (m, k), "bf16"), _randn(rng, (n, k), "bf16")
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize(**{bug: True})).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)},
                                                          {"M": m, "N": n, "K": k})
    v = err.value.violation
    assert v.kind == "tag" and "disagree on k" in v.message
    assert v.block == (0, 0, 0) and v.thread == 0 and v.element is not None
    assert v.position.line == _line(kernel, mma_line)


def test_gemm_shape_outside_its_declared_assumptions_is_refused():
    a, b = np.ones((60, 32), np.float32), np.ones((64, 32), np.float32)
    with pytest.raises(ArgusError, match="assumption"):
        Interpreter(gemm_mma_sync.gemm.specialize()).run({"a": a, "b": b, "c": np.zeros((60, 64), np.float32)},
                                                         {"M": 60, "N": 64, "K": 32})


def test_ldmatrix_variant_of_the_mma_sync_gemm_matches_numpy_exactly():
    m, n, k = 64, 128, 64
    rng = np.random.default_rng(m + n + k + 1)
    a, b = _randn(rng, (m, k), "bf16"), _randn(rng, (n, k), "bf16")
    kernel = gemm_mma_sync.gemm.specialize(LDMATRIX=True)
    check.check(kernel)
    out = Interpreter(kernel).run(
        {"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))


def test_ldmatrix_variant_reports_a_wrong_k_pairing_at_the_mma():
    m, n, k = 64, 64, 64
    rng = np.random.default_rng(4)
    a, b = _randn(rng, (m, k), "bf16"), _randn(rng, (n, k), "bf16")
    with pytest.raises(InterpreterError) as err:
        Interpreter(gemm_mma_sync.gemm.specialize(LDMATRIX=True, WRONG_KBLOCK=True)).run(
            {"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})
    v = err.value.violation
    assert v.kind == "tag" and "disagree on k" in v.message
    assert v.position.line == _line(gemm_mma_sync.gemm, "A.mma(ATOM, fa, fb, acc[mi, ni])")
