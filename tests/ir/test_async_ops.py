"""TMA stores and the async proxy, named and cluster barriers, arrival counts, pending work at
exit: semantics on the reference interpreter, each check with a planted bug."""

import sys
from pathlib import Path

import numpy as np
import pytest

from argus.ir.interpreter import Interpreter

sys.path.insert(0, str(Path(__file__).parent))
import async_kernels as K
from test_async import _line, _randn, _violation


@pytest.mark.parametrize("m", [64, 100])
@pytest.mark.parametrize("read_only", [False, True])
def test_tma_store_writes_the_box_at_its_wait(m, read_only):
    x = _randn(np.random.default_rng(m), m, 32)
    y = np.full((m, 32), 3.0, np.float32)
    out = Interpreter(K.doubled_by_tma_store.specialize(READ_ONLY=read_only)).run({"x": x, "y": y}, {"M": m})
    np.testing.assert_array_equal(out["y"], 2 * x)


def test_tma_store_of_unfenced_shared_memory_is_caught():
    x = _randn(np.random.default_rng(1), 64, 32)
    v = _violation(K.doubled_by_tma_store, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, FENCE=False)
    assert v.kind == "proxy" and "fence.proxy.async" in v.message
    assert v.position.line == _line(K.doubled_by_tma_store, "A.tma_store(s,")
    assert v.thread == 0 and v.other_thread == 0 and v.element == (0, 0)


def test_overwriting_the_source_of_an_unfinished_tma_store_is_caught():
    x = _randn(np.random.default_rng(2), 64, 32)
    v = _violation(K.doubled_by_tma_store, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64},
                   OVERWRITE=True)
    assert v.kind == "async" and "may still be reading" in v.message
    assert v.position.line == _line(K.doubled_by_tma_store, "A.store(v, s.tile")


def test_exit_before_the_tma_store_read_its_source_is_caught():
    x = _randn(np.random.default_rng(3), 64, 32)
    v = _violation(K.doubled_by_tma_store, {"x": x, "y": np.zeros((64, 32), np.float32)}, {"M": 64}, WAIT=False)
    assert v.kind == "async" and "when the block exits" in v.message
    assert v.position.line == _line(K.doubled_by_tma_store, "A.tma_store(s,")


def test_named_barriers_order_only_their_participants():
    x = _randn(np.random.default_rng(4), 128)
    out = Interpreter(K.halves.specialize()).run({"x": x, "y": np.zeros(128, np.float32)})
    expected = np.concatenate([np.roll(x[:64], -1), np.roll(x[64:], -1)])
    np.testing.assert_array_equal(out["y"], expected)
    v = _violation(K.halves, {"x": x, "y": np.zeros(128, np.float32)}, CROSS=True)
    assert v.kind == "race" and v.thread == 127 and v.other_thread == 0
    assert v.position.line == _line(K.halves, "(t + 1) % 128 if CROSS")


def test_named_barrier_participants_must_match():
    x = _randn(np.random.default_rng(5), 128)
    v = _violation(K.halves, {"x": x, "y": np.zeros(128, np.float32)}, PARTICIPANTS=32)
    assert v.kind == "barrier" and "declares 32 participants but 64 threads arrived" in v.message
    assert v.position.line == _line(K.halves, "A.named_barrier(1, PARTICIPANTS)")


def test_arrival_counts():
    x = np.ones(64, np.float32)
    Interpreter(K.arrivals.specialize()).run({"x": x})
    v = _violation(K.arrivals, {"x": x}, ARRIVERS=32)  # 32 of 64 arrivals: phase 0 never completes
    assert v.kind == "deadlock" and "needs 64 arrivals; 32 arrived" in v.message
    v = _violation(K.arrivals, {"x": x}, ARRIVERS=32, WAIT=False)
    assert v.kind == "mbarrier" and "32 of 64 arrivals" in v.message and "exits" in v.message
    v = _violation(K.arrivals, {"x": x}, COUNT=16)  # a warp's 32 arrivals overflow a phase of 16
    assert v.kind == "mbarrier" and "needs only 16 more" in v.message
    assert v.position.line == _line(K.arrivals, "A.arrive(bar)")


def test_cluster_barrier_of_a_single_block_cluster_orders_like_a_barrier():
    x = _randn(np.random.default_rng(6), 64)
    out = Interpreter(K.cluster_rotate.specialize()).run({"x": x, "y": np.zeros(64, np.float32)})
    np.testing.assert_array_equal(out["y"], np.roll(x, -1))
    Interpreter(K.cluster_of_two.specialize()).run({"x": x})  # two blocks meet at the cluster barrier
