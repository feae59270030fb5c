"""The reference interpreter: examples match numpy; planted bugs are caught with their place."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from argus.ir.interpreter import Interpreter, InterpreterError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "examples"))
import interp_kernels as K  # noqa: E402
import vector_add as VA  # noqa: E402


def _line(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _randn(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float32)
    x[x == 0] = 1.0
    return x


@pytest.mark.parametrize("n", [1, 127, 128, 300])
def test_vector_add_matches_numpy(n):
    rng = np.random.default_rng(n)
    a, b = _randn(rng, n), _randn(rng, n)
    out = Interpreter(VA.vector_add.specialize()).run({"a": a, "b": b, "c": np.zeros(n, np.float32)}, {"n": n})
    np.testing.assert_array_equal(out["c"], (a + b).astype(np.float32))  # f32 add is exact RNE


def test_unpredicated_index_is_out_of_bounds_with_place():
    n = 100  # the second block's threads 36..63 index past the end
    k = K.raw_index_copy.specialize()
    with pytest.raises(InterpreterError) as err:
        Interpreter(k).run({"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32)}, {"n": n})
    v = err.value.violation
    assert v.kind == "out-of-bounds"
    assert v.block == (1, 0, 0) and v.thread == 36
    assert v.position.line == _line(K.raw_index_copy, "A.copy(x[i], v)")


def test_tiles_predicate_the_tail():
    n = 100
    x = _randn(np.random.default_rng(1), n)
    out = Interpreter(K.tiled_copy.specialize()).run({"x": x, "y": np.zeros(n, np.float32)}, {"n": n})
    np.testing.assert_array_equal(out["y"], x)


def test_missing_barrier_is_a_race():
    x = _randn(np.random.default_rng(2), 64)
    ok = Interpreter(K.rotate_through_shared.specialize()).run({"x": x, "y": np.zeros(64, np.float32)})
    np.testing.assert_array_equal(ok["y"], np.roll(x, -1))
    with pytest.raises(InterpreterError) as err:
        Interpreter(K.rotate_through_shared.specialize(SYNC=False)).run({"x": x, "y": np.zeros(64, np.float32)})
    v = err.value.violation
    assert v.kind == "race"
    assert v.position.line == _line(K.rotate_through_shared, "A.copy(s.tile((1,), ((t + 1) % 64,))")
    assert {v.thread, v.other_thread} & set(range(64)) and v.thread != v.other_thread


def test_barrier_skipped_by_a_warp_is_reported():
    with pytest.raises(InterpreterError) as err:
        Interpreter(K.warp_zero_barrier.specialize()).run({"x": np.ones(64, np.float32)})
    v = err.value.violation
    assert v.kind in ("barrier", "deadlock")
    assert v.position.line == _line(K.warp_zero_barrier, "A.barrier()")


def test_uninitialized_register_read():
    with pytest.raises(InterpreterError) as err:
        Interpreter(K.reads_uninitialized.specialize()).run({"x": np.ones(32, np.float32)})
    assert err.value.violation.kind == "uninitialized"


def test_transpose_tags_hold_and_a_wrong_transpose_is_caught():
    x = _randn(np.random.default_rng(3), 32, 32)
    out = Interpreter(K.transpose_tagged.specialize()).run({"x": x, "y": np.zeros((32, 32), np.float32)})
    np.testing.assert_array_equal(out["y"], x.T)
    with pytest.raises(InterpreterError) as err:
        Interpreter(K.transpose_tagged.specialize(WRONG=True)).run({"x": x, "y": np.zeros((32, 32), np.float32)})
    v = err.value.violation
    assert v.kind == "tag"
    assert v.position.line == _line(K.transpose_tagged, "A.assert_tag(out")
    assert v.element is not None and v.thread is not None
