"""argus.kernels.gemm in the reference interpreter against numpy, at small specializations
(n64 atoms, few persistent blocks) that still exercise every part of the kernel: several
tiles per block, a ring refilled across tile boundaries, tails of M, N and K."""

import numpy as np
import pytest

from argus.ir import check, numerics
from argus.ir.interpreter import Interpreter
from argus.kernels.gemm import (
    CANDIDATES,
    EARLIER,
    TUNED,
    GemmConfig,
    GemmError,
    gemm_kernel,
    tile_of,
    tuned_config,
)


def _operands(seed: int, m: int, n: int, k: int, dtype: str = "bf16"):
    rng = np.random.default_rng(seed)
    a = numerics.round_to(dtype, rng.standard_normal((m, k))).astype(np.float32)
    b = numerics.round_to(dtype, rng.standard_normal((n, k))).astype(np.float32)
    a[a == 0], b[b == 0] = 0.5, 0.5  # never zeros
    return a, b


@pytest.mark.parametrize("tiles_m, tiles_n, group", [(1, 1, 8), (5, 3, 2), (7, 4, 8), (16, 2, 8), (3, 9, 16)])
def test_grouped_tile_order_is_a_bijection_on_the_tiles(tiles_m, tiles_n, group):
    seen = {tile_of(t, tiles_m, tiles_n, group) for t in range(tiles_m * tiles_n)}
    assert seen == {(i, j) for i in range(tiles_m) for j in range(tiles_n)}


def test_grouped_order_visits_group_rows_before_moving_right():
    order = [tile_of(t, 4, 3, 2) for t in range(4)]
    assert order == [(0, 0), (1, 0), (0, 1), (1, 1)]


# (M, N, K), persistent blocks, stages: several tiles per block (6 tiles on 2 blocks), more
# blocks than tiles, a ring of 2 stages refilled within and across tiles, K not a multiple of BK
@pytest.mark.parametrize("shape, sms, stages", [((200, 136, 72), 2, 2), ((64, 64, 64), 3, 3), ((130, 72, 136), 1, 2)])
def test_gemm_matches_numpy(shape, sms, stages):
    m, n, k = shape
    a, b = _operands(sum(shape), m, n, k)
    kernel = gemm_kernel(out_dtype="f32").specialize(BN=64, STAGES=stages, SMS=sms)
    check.check(kernel)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})["c"]
    # k-blocks accumulate in order: the chain of one MMA over all of K (zero-filled tail included)
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    reference = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T))


# clusters of two blocks: B's box multicast into both; odd tile rows (the last pair's second
# block lies past M and only feeds B to its peer), several tile pairs per cluster, both releases
@pytest.mark.parametrize("shape, sms, release", [((200, 136, 72), 2, "warpgroups"), ((330, 72, 136), 4, "threads")])
def test_cluster_of_two_blocks_matches_numpy(shape, sms, release):
    m, n, k = shape
    a, b = _operands(sum(shape) + 1, m, n, k)
    kernel = gemm_kernel().specialize(BN=64, STAGES=2, SMS=sms, GROUP_M=2, CLUSTER=2, RELEASE=release)
    assert kernel.launch.cluster == (2, 1, 1)
    check.check(kernel)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.round_to("bf16", numerics.mma(a, b.T, None, a_dtype="bf16")))


@pytest.mark.parametrize("tiles_m, tiles_n, group", [(5, 3, 2), (4, 4, 16), (1, 7, 8)])
def test_cluster_tile_pairs_cover_every_tile_once(tiles_m, tiles_n, group):
    """Cluster u visits pairs u, u + units, ...; rank r takes row 2·pm + r: every tile is taken
    once, and the only extra tiles are the second rows of the last pair (odd tiles_m)."""
    pairs_m = -(-tiles_m // 2)
    taken = [(2 * pm + r, tn) for t in range(pairs_m * tiles_n) for pm, tn in [tile_of(t, pairs_m, tiles_n, group // 2)]
             for r in (0, 1)]
    inside = [t for t in taken if t[0] < tiles_m]
    assert sorted(inside) == sorted({(i, j) for i in range(tiles_m) for j in range(tiles_n)})
    assert len(taken) - len(inside) == (tiles_n if tiles_m % 2 else 0)


def test_cluster_configuration_errors_have_hints():
    with pytest.raises(GemmError, match="use 1 or 2"):
        gemm_kernel().specialize(CLUSTER=3)
    with pytest.raises(GemmError, match="even SMS"):
        gemm_kernel().specialize(CLUSTER=2, SMS=131)


def test_fp16_inputs_and_output():
    m, n, k = 130, 72, 40
    a, b = _operands(3, m, n, k, "f16")
    kernel = gemm_kernel("f16", "f16").specialize(BN=64, STAGES=2, SMS=3)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})["c"]
    exact = numerics.mma(a, b.T, None, a_dtype="f16")
    np.testing.assert_array_equal(out, numerics.round_to("f16", exact))


def test_bias_and_relu_epilogue():
    m, n, k = 70, 136, 24
    a, b = _operands(5, m, n, k)
    bias = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    kernel = gemm_kernel("bf16", "bf16", bias=True, activation="relu").specialize(BN=64, STAGES=2, SMS=2)
    inputs = {"a": a, "b": b, "c": np.zeros((m, n), np.float32), "bias": bias}
    out = Interpreter(kernel).run(inputs, {"M": m, "N": n, "K": k})["c"]
    acc = numerics.mma(a, b.T, None, a_dtype="bf16")
    expected = numerics.round_to("bf16", np.maximum((acc + bias).astype(np.float32), 0))
    np.testing.assert_array_equal(out, expected)
    assert (out == 0).any() and (out > 0).any()  # the activation did something on both sides


def test_unsupported_types_are_refused_with_a_hint():
    with pytest.raises(GemmError, match="bf16"):
        gemm_kernel("f32", "bf16")
    with pytest.raises(GemmError, match="activation"):
        gemm_kernel(activation="gelu")


def test_every_candidate_fits_shared_memory():
    assert GemmConfig() in EARLIER and not set(CANDIDATES) & set(EARLIER)
    assert all(cfg.INFLIGHT == 0 and cfg.RELEASE == "threads" for cfg in CANDIDATES)
    for cfg in CANDIDATES + EARLIER:
        assert cfg.shared_bytes() + 1024 + 64 * cfg.STAGES <= 227 * 1024  # + alignment slack, mbarriers
        assert cfg.BN % 8 == 0 and 8 <= cfg.BN <= 256


@pytest.mark.parametrize("shape, bn", [((130, 72, 40), 64), ((64, 200, 24), 128)])
def test_tma_store_epilogue_matches_numpy(shape, bn):
    # boxes of 64 columns through two staging buffers; one box per tile (BN = 64) reuses the
    # same buffer tile after tile, BN = 128 alternates; tails of M and N clipped by TMA
    m, n, k = shape
    a, b = _operands(11, m, n, k)
    specialized = gemm_kernel("bf16", "bf16").specialize(BN=bn, STAGES=2, SMS=2, EPILOGUE="tma")
    out = Interpreter(specialized).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)},
                                       {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.round_to("bf16", numerics.mma(a, b.T, None, a_dtype="bf16")))


@pytest.mark.parametrize("shape, bn, sms", [((130, 600, 40), 256, 2), ((64, 256, 24), 256, 3), ((200, 296, 72), 256, 1)])
def test_deferred_epilogue_matches_numpy(shape, bn, sms):
    # a tile's last two boxes leave during the next tile's first k-block, the block's last
    # tile's after its tile loop: several tiles per block, one tile, and a block without any
    m, n, k = shape
    a, b = _operands(17, m, n, k)
    kernel = gemm_kernel("bf16", "bf16").specialize(BN=bn, STAGES=2, SMS=sms, EPILOGUE="deferred", INFLIGHT=0,
                                                   RELEASE="threads")
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)},
                                  {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.round_to("bf16", numerics.mma(a, b.T, None, a_dtype="bf16")))


def test_l2_priorities_leave_the_result_alone():
    # L2="stream" only hints the cache: the one-tile-row pick computes the same C
    m, n, k = 64, 200, 24
    a, b = _operands(19, m, n, k)
    kernel = gemm_kernel("bf16", "bf16").specialize(**{**tuned_config(m, n, k).consts(), "STAGES": 2}, SMS=2)
    assert dict(kernel.consts)["L2"] == "stream"
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)},
                                  {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.round_to("bf16", numerics.mma(a, b.T, None, a_dtype="bf16")))
    with pytest.raises(GemmError, match="L2='evict_first' is not an L2 policy"):
        gemm_kernel("bf16", "bf16").specialize(BN=128, SMS=1, L2="evict_first")


def test_deferred_epilogue_needs_a_plain_epilogue_and_boxes_to_defer():
    with pytest.raises(GemmError, match="plain epilogue"):
        gemm_kernel("bf16", "bf16", bias=True, activation="relu").specialize(BN=256, SMS=1, EPILOGUE="deferred")
    with pytest.raises(GemmError, match="more than 2"):
        gemm_kernel("bf16", "bf16").specialize(BN=128, SMS=1, EPILOGUE="deferred")
    with pytest.raises(GemmError, match="'auto', 'tma', 'deferred' or 'direct'"):
        gemm_kernel("bf16", "bf16").specialize(BN=128, SMS=1, EPILOGUE="late")


def test_tma_epilogue_needs_whole_boxes():
    with pytest.raises(GemmError, match="multiple of 32"):
        gemm_kernel("bf16", "f32").specialize(BN=48, SMS=1, EPILOGUE="tma")
    with pytest.raises(GemmError, match="multiple of 64"):
        gemm_kernel("bf16", "bf16").specialize(BN=96, SMS=1, EPILOGUE="tma")


# an fp32 C leaves through the staging buffers in boxes of 128 x 32 (128 bytes wide): BN / 32
# boxes per tile, tails of M and N clipped by TMA; and the direct epilogue, which "auto" takes
# where BN is not a multiple of the box width
@pytest.mark.parametrize("shape, bn, epilogue", [((130, 72, 40), 64, "auto"), ((200, 136, 72), 128, "tma"),
                                                 ((70, 40, 24), 64, "direct")])
def test_fp32_output_epilogues_match_numpy(shape, bn, epilogue):
    m, n, k = shape
    a, b = _operands(13, m, n, k)
    kernel = gemm_kernel("bf16", "f32").specialize(BN=bn, STAGES=2, SMS=2, EPILOGUE=epilogue, INFLIGHT=0,
                                                   RELEASE="threads")
    check.check(kernel)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)},
                                  {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))


def test_tuned_configs_are_candidates():
    assert all(cfg in CANDIDATES for cfg in TUNED.values())
    assert tuned_config(4096, 4096, 4096) == TUNED[(4096, 4096, 4096)]
    assert tuned_config(64, 8192, 1024).BN < tuned_config(8192, 8192, 1024).BN  # skinny M: narrower tiles


# one wgmma group in flight or none: with INFLIGHT=0 a consumer retires each k-block's wgmmas
# before the next and every consumer thread releases the stage at once (no barrier between
# the two consumer warpgroups, which then alternate on the tensor cores)
@pytest.mark.parametrize("shape, bn, sms", [((200, 136, 72), 128, 2), ((130, 296, 136), 256, 2), ((64, 64, 8), 64, 1)])
def test_no_group_in_flight_across_k_blocks_matches_numpy(shape, bn, sms):
    m, n, k = shape
    a, b = _operands(sum(shape) + 7, m, n, k)
    kernel = gemm_kernel().specialize(BN=bn, STAGES=2, SMS=sms, INFLIGHT=0, RELEASE="threads")
    check.check(kernel)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)},
                                  {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.round_to("bf16", numerics.mma(a, b.T, None, a_dtype="bf16")))


def test_inflight_configuration_errors_have_hints():
    with pytest.raises(GemmError, match="RELEASE='threads'"):
        gemm_kernel().specialize(BN=64, SMS=1, INFLIGHT=0)
    with pytest.raises(GemmError, match="use 1"):
        gemm_kernel().specialize(BN=64, SMS=1, INFLIGHT=2, RELEASE="threads")


def test_a_dependent_launch_computes_the_same_c_and_waits_in_every_thread():
    # PDL=True: every thread waits on the grid dependency before its first global access (the
    # interpreter checks the order as it runs); the result is the plain kernel's
    m, n, k = 72, 136, 40
    a, b = _operands(23, m, n, k)
    kernel = gemm_kernel("bf16", "bf16").specialize(BN=128, STAGES=2, SMS=2, PDL=True)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)},
                                  {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.round_to("bf16", numerics.mma(a, b.T, None, a_dtype="bf16")))
    with pytest.raises(GemmError, match="PDL='yes' is not a bool"):
        gemm_kernel("bf16", "bf16").specialize(BN=128, SMS=1, PDL="yes")
