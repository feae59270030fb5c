"""The asynchrony model on the reference interpreter: cp.async groups, mbarriers, TMA, pipelines.

Correct kernels match numpy on fresh random inputs; every planted bug is caught with its block,
thread, element and program point.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from argus.ir.interpreter import Interpreter, InterpreterError

sys.path.insert(0, str(Path(__file__).parent))
import async_kernels as K


def _line(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _randn(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float32)
    x[x == 0] = 1.0
    return x


def _violation(kernel, inputs, sizes=None, **consts):
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize(**consts)).run(inputs, sizes or {})
    return err.value.violation


def _tile_sums_reference(x: np.ndarray, bk: int = K.BK) -> np.ndarray:
    """Sum of the k-tiles of x (zero-padded), in tile order, in float32 — the kernels' order."""
    m, k = x.shape
    n = -(-k // bk)
    padded = np.zeros((m, n * bk), np.float32)
    padded[:, :k] = x
    acc = np.zeros((m, bk), np.float32)
    for j in range(n):
        acc = (acc + padded[:, j * bk:(j + 1) * bk]).astype(np.float32)
    return acc


# --------------------------------------------------------------------------- cp.async


def test_cp_async_data_is_visible_after_wait_and_barrier():
    x = _randn(np.random.default_rng(0), 64)
    out = Interpreter(K.cp_async_rotate.specialize()).run({"x": x, "y": np.zeros(64, np.float32)})
    np.testing.assert_array_equal(out["y"], np.roll(x, -1))


def test_cp_async_read_before_its_wait_is_caught():
    x = _randn(np.random.default_rng(1), 64)
    v = _violation(K.cp_async_rotate, {"x": x, "y": np.zeros(64, np.float32)}, WAIT=False)
    assert v.kind == "async" and "in flight" in v.message
    assert v.position.line == _line(K.cp_async_rotate, "A.copy(s.tile((1,), ((t + 1)")
    assert v.block == (0, 0, 0) and v.thread == 0 and v.other_thread == 1 and v.element == (0,)


def test_cp_async_data_of_another_thread_needs_a_barrier_after_the_wait():
    x = _randn(np.random.default_rng(2), 64)
    v = _violation(K.cp_async_rotate, {"x": x, "y": np.zeros(64, np.float32)}, SYNC=False)
    assert v.kind == "race" and v.thread == 0 and v.other_thread == 1
    assert v.position.line == _line(K.cp_async_rotate, "A.copy(s.tile((1,), ((t + 1)")


def test_uncommitted_cp_async_is_not_completed_by_wait_group():
    x = _randn(np.random.default_rng(3), 64)
    v = _violation(K.cp_async_rotate, {"x": x, "y": np.zeros(64, np.float32)}, COMMIT=False)
    assert v.kind == "async" and "never committed" in v.message


@pytest.mark.parametrize("n", [1, 40, 64])
def test_cp_async_zero_fills_past_the_source(n):
    x = _randn(np.random.default_rng(n), n)
    out = Interpreter(K.cp_async_zero_fill.specialize()).run({"x": x, "y": np.full(64, 7, np.float32)}, {"n": n})
    np.testing.assert_array_equal(out["y"], np.concatenate([x, np.zeros(64 - n, np.float32)]))


# --------------------------------------------------------------------------- TMA + mbarrier


@pytest.mark.parametrize("m", [64, 100])
def test_tma_box_lands_with_the_phase(m):
    x = _randn(np.random.default_rng(m), m, 32)
    out = Interpreter(K.tma_rows.specialize()).run({"x": x, "y": np.zeros((m, 32), np.float32)}, {"M": m})
    np.testing.assert_array_equal(out["y"], x)


def test_expect_tx_too_large_deadlocks_and_says_why():
    x = _randn(np.random.default_rng(4), 64, 32)
    v = _violation(K.tma_rows, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, EXTRA=4)
    assert v.kind == "expect-tx" and "4 of the 8196 declared transaction bytes never arrive" in v.message
    assert v.position.line == _line(K.tma_rows, "A.wait(bar, phase=PHASE)") and v.thread == 0


def test_expect_tx_too_small_is_caught_at_the_copy():
    x = _randn(np.random.default_rng(5), 64, 32)
    v = _violation(K.tma_rows, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, EXTRA=-128)
    assert v.kind == "expect-tx" and "8064 were declared" in v.message
    assert v.position.line == _line(K.tma_rows, "A.tma_load(x.tile")


def test_waiting_for_a_phase_nobody_completes_is_a_deadlock():
    x = _randn(np.random.default_rng(6), 64, 32)
    v = _violation(K.tma_rows, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, PHASE=1)
    assert v.kind == "deadlock" and "phase 1" in v.message
    assert v.position.line == _line(K.tma_rows, "A.wait(bar, phase=PHASE)")


def test_mbarrier_use_before_init_and_without_fence():
    x = _randn(np.random.default_rng(7), 64, 32)
    v = _violation(K.tma_rows, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, INIT=False)
    assert v.kind == "mbarrier" and "before mbarrier_init" in v.message
    v = _violation(K.tma_rows, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, FENCE=False)
    assert v.kind == "mbarrier" and "without fence.mbarrier_init and a barrier" in v.message
    assert v.position.line == _line(K.tma_rows, "A.wait(bar, phase=PHASE)") and v.thread == 1
