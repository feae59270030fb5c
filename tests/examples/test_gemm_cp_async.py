"""The double-buffered cp.async GEMM example: exact result on fresh random inputs, and its
planted pipeline bugs (a wait that completes too little, a missing stage-release barrier)."""

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from argus.ir import numerics
from argus.ir.interpreter import Interpreter, InterpreterError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm_cp_async

KERNEL = gemm_cp_async.gemm_cp_async
M, N, K = 64, 128, 96


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(KERNEL.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    a = numerics.round_to("bf16", rng.standard_normal((M, K))).astype(np.float32)
    b = numerics.round_to("bf16", rng.standard_normal((N, K))).astype(np.float32)
    a[a == 0], b[b == 0] = 0.5, 0.5
    return {"a": a, "b": b, "c": np.zeros((M, N), np.float32)}


def test_double_buffered_gemm_matches_numpy():
    inputs = _inputs(31)
    out = Interpreter(KERNEL.specialize()).run(inputs, {"M": M, "N": N, "K": K})["c"]
    a, b = inputs["a"], inputs["b"]
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    reference = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T))


@pytest.mark.parametrize("bug, kind, line", [
    ({"WAIT_ALL_BUT": 2}, "async", "fa = A.load(A.mma_partition(ATOM, \"a\", sa[stage]"),
    ({"NO_SECOND_BARRIER": True}, "race", "A.cp_async(a.tile((BM, BK), (bm, issued))"),
])
def test_pipeline_bugs_are_caught_with_their_place(bug, kind, line):
    with pytest.raises(InterpreterError) as err:
        Interpreter(KERNEL.specialize(**bug)).run(_inputs(32), {"M": M, "N": N, "K": K})
    v = err.value.violation
    assert v.kind == kind
    assert v.block == (0, 0, 0) and v.thread is not None and v.element is not None
    assert v.position.line == _line(line)
