"""The 2-block cluster GEMM with TMA multicast against numpy on random inputs, and its planted
cluster bugs (unarmed multicast receiver, missing remote release, early exit) caught dynamically
with their place."""

import sys
from pathlib import Path

import numpy as np
import pytest
from example_inputs_support import bf16_gemm_inputs
from proof_support import source_line

from argus.ir import check, numerics
from argus.ir.interpreter import Interpreter, InterpreterError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm_cluster_multicast

KERNEL = gemm_cluster_multicast.gemm_cluster_multicast


def _line(text: str) -> int:
    return source_line(KERNEL, text)




def _run(shape, seed, **consts):
    m, n, k = shape
    inputs = bf16_gemm_inputs(seed, m, n, k)
    kernel = KERNEL.specialize(**consts)
    return inputs, Interpreter(kernel).run(inputs, {"M": m, "N": n, "K": k})["c"]


# M = 100: the cluster's second block has 36 rows (a partial tile); N = 72: a second column of
# clusters whose B rows are mostly out of range; K / 64 = 3 k-blocks through 2 stages (refills)
@pytest.mark.parametrize("shape", [(100, 72, 192), (128, 64, 128)])
def test_cluster_multicast_gemm_matches_numpy(shape):
    check.check(KERNEL.specialize())
    inputs, out = _run(shape, sum(shape))
    a, b = inputs["a"], inputs["b"]
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    reference = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T))


def _violation(bug, shape=(64, 64, 192)):
    with pytest.raises(InterpreterError) as err:
        _run(shape, 7, BUG=bug)
    return err.value.violation


def test_multicast_into_a_block_that_does_not_count_the_peer_half():
    v = _violation("unarmed-multicast")
    assert v.kind == "expect-tx" and "expect-tx" in v.message
    assert v.position.line in (_line("A.assert_tag(sb[s]"), _line("A.assert_tag(sa[s]"))


def test_refill_without_the_peer_release_races_with_the_peer_wgmma():
    v = _violation("no-remote-release")
    assert v.kind == "race" and "write-after-read" in v.message
    assert v.other_block is not None and v.other_block != v.block  # the reader is the peer's consumer
    assert v.position.line == _line("A.tma_load(b.tile((half, BK)")


def test_block_exits_before_the_peer_last_remote_arrive_is_ordered():
    v = _violation("early-exit", shape=(64, 64, 128))
    assert v.kind == "cluster" and "exits" in v.message and "arrive" in v.message
    assert v.position.line == _line("A.arrive(A.mapa(empty, peer)[s])")
