"""Clusters on the reference interpreter: blocks of a cluster run together, distributed shared
memory, remote mbarrier arrives, TMA multicast, cluster barriers; each check with a planted bug."""

import sys
from pathlib import Path

import numpy as np
import pytest

from argus.errors import ArgusError
from argus.ir.interpreter import Interpreter
from argus.ir.printer import print_kernel

sys.path.insert(0, str(Path(__file__).parent))
import cluster_kernels as C
from test_async import _line, _randn, _violation


def _swap_halves(x: np.ndarray, half: int) -> np.ndarray:
    pairs = x.reshape(-1, 2, half)
    return pairs[:, ::-1, :].reshape(x.shape)


def test_dsmem_reads_of_the_peer_after_a_cluster_barrier():
    x = _randn(np.random.default_rng(1), 256)
    out = Interpreter(C.dsmem_swap.specialize()).run({"x": x, "y": np.zeros(256, np.float32)})
    np.testing.assert_array_equal(out["y"], _swap_halves(x, 64))


def test_dsmem_views_print_their_rank():
    text = print_kernel(C.dsmem_swap.specialize())
    assert "@rank(-cluster_rank + 1)[" in text and "cluster=(2, 1, 1)" in text


def test_dsmem_read_without_a_cluster_barrier_is_a_race():
    x = _randn(np.random.default_rng(2), 256)
    v = _violation(C.dsmem_swap, {"x": x, "y": np.zeros(256, np.float32)}, FIRST_SYNC=False)
    assert v.kind == "race" and "not ordered after its write" in v.message
    assert "of block" in v.message and v.other_block is not None and v.other_block != v.block
    assert v.position.line == _line(C.dsmem_swap, "A.copy(A.mapa(s, 1 - r)")


def test_dsmem_write_race_between_blocks():
    x = _randn(np.random.default_rng(3), 256)
    v = _violation(C.dsmem_swap, {"x": x, "y": np.zeros(256, np.float32)}, PEER_WRITE=True)
    assert v.kind == "race"
    assert v.position.line == _line(C.dsmem_swap, "A.copy(x.tile((1,), (b * 64 + t,)), A.mapa(s")


def test_block_exiting_while_its_peer_reads_its_shared_memory():
    x = _randn(np.random.default_rng(4), 256)
    v = _violation(C.dsmem_swap, {"x": x, "y": np.zeros(256, np.float32)}, LAST_SYNC=False)
    assert v.kind == "cluster" and "exits while" in v.message and "reads its shared memory" in v.message


def test_remote_arrive_releases_dsmem_writes_to_the_peer():
    x = _randn(np.random.default_rng(5), 128)
    out = Interpreter(C.remote_handoff.specialize()).run({"x": x, "y": np.zeros(128, np.float32)})
    np.testing.assert_array_equal(out["y"], _swap_halves(x, 64))
    # every peer access was ordered before each block's exit by the phase it waited for
    out = Interpreter(C.remote_handoff.specialize(LAST_SYNC=False)).run({"x": x, "y": np.zeros(128, np.float32)})
    np.testing.assert_array_equal(out["y"], _swap_halves(x, 64))


def test_reading_peer_data_without_waiting_for_the_remote_release():
    x = _randn(np.random.default_rng(6), 128)
    v = _violation(C.remote_handoff, {"x": x, "y": np.zeros(128, np.float32)}, WAIT=False)
    assert v.kind == "race" and v.other_block is not None
    assert v.position.line == _line(C.remote_handoff, "A.copy(s.tile((1,), (t,)), y.tile")


def test_remote_arrive_before_the_peer_init_is_ordered():
    x = _randn(np.random.default_rng(7), 128)
    v = _violation(C.remote_handoff, {"x": x, "y": np.zeros(128, np.float32)}, INIT_SYNC=False)
    assert v.kind in ("mbarrier", "race")


def test_missing_remote_release():
    x = _randn(np.random.default_rng(8), 128)
    v = _violation(C.remote_handoff, {"x": x, "y": np.zeros(128, np.float32)}, ARRIVE_REMOTE=False)
    assert v.kind == "race" and v.other_block is not None


def test_multicast_delivers_the_box_to_every_block_of_the_mask():
    x = _randn(np.random.default_rng(9), 16, 16)
    out = Interpreter(C.multicast_halves.specialize()).run({"x": x, "y": np.zeros((32, 16), np.float32)})
    np.testing.assert_array_equal(out["y"], np.concatenate([x, x]))


def test_multicast_into_a_block_whose_barrier_does_not_count_its_bytes():
    x = _randn(np.random.default_rng(10), 16, 16)
    v = _violation(C.multicast_halves, {"x": x, "y": np.zeros((32, 16), np.float32)}, ARM_ALL=False)
    assert v.kind == "expect-tx"
    assert "multicast" in v.message and "not armed" in v.message


def test_multicast_before_the_receiver_initialized_its_barrier():
    x = _randn(np.random.default_rng(11), 16, 16)
    v = _violation(C.multicast_halves, {"x": x, "y": np.zeros((32, 16), np.float32)}, INIT_SYNC=False)
    assert v.kind == "mbarrier" and "cluster barrier" in v.message


def test_multicast_mask_outside_the_cluster_is_rejected_when_traced():
    with pytest.raises(ArgusError, match="outside the cluster"):
        C.multicast_halves.specialize(MASK=4)


def test_multicast_to_one_block_leaves_the_peer_waiting():
    x = _randn(np.random.default_rng(12), 16, 16)
    v = _violation(C.multicast_halves, {"x": x, "y": np.zeros((32, 16), np.float32)}, MASK=1)
    assert v.kind in ("expect-tx", "deadlock")


def test_block_exiting_before_a_peer_multicast_lands():
    x = _randn(np.random.default_rng(13), 16, 16)
    out = Interpreter(C.multicast_halves.specialize(LAST_SYNC=False)).run(
        {"x": x, "y": np.zeros((32, 16), np.float32)})  # each block waited for its own phase: ordered
    np.testing.assert_array_equal(out["y"], np.concatenate([x, x]))


def test_cluster_barrier_reached_by_one_block_only():
    x = _randn(np.random.default_rng(14), 128)
    v = _violation(C.cluster_barrier_in_one_block, {"x": x})
    assert v.kind == "barrier" and "cluster barrier" in v.message and "exited" in v.message


def test_grid_must_be_a_whole_number_of_clusters():
    with pytest.raises(ArgusError, match="not a whole number of clusters"):
        Interpreter(C.odd_grid.specialize()).run({"x": np.ones(64, np.float32)})


def test_replaying_one_block_runs_its_cluster():
    x = _randn(np.random.default_rng(15), 256)
    y = np.zeros(256, np.float32)
    out = Interpreter(C.dsmem_swap.specialize()).run({"x": x, "y": y}, blocks=[(3, 0, 0)])
    np.testing.assert_array_equal(out["y"][128:], _swap_halves(x, 64)[128:])
    assert not out["y"][:128].any()


@pytest.mark.parametrize("what, message", [("rank", "outside 0..1"), ("global", "only shared memory"),
                                           ("twice", "already names a peer")])
def test_mapa_misuse_is_rejected_when_traced(what, message):
    with pytest.raises(ArgusError, match=message):
        C.mapa_misuse.specialize(WHAT=what)


def test_waiting_on_a_peer_mbarrier_is_rejected():
    v = _violation(C.mapa_misuse, {"x": np.ones(64, np.float32)}, WHAT="peer-wait")
    assert v.kind == "mbarrier" and "peer block" in v.message
    assert v.position.line == _line(C.mapa_misuse, "A.wait(A.mapa(bar")
