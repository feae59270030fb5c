"""The asynchrony model against its classic bugs: each mutant is refuted by the property that
names it, with a counterexample the reference interpreter reproduces (same violation, same
program point, same block) where the interpreter checks that property; each original is proved.

The properties checked are only those of the asynchrony model (the examples' tag VCs through
MMAs are another module's business)."""

import pytest
from async_kernels_support import (
    TMA_WGMMA,
    WS,
    cp_async_pipeline,
    descriptor_mismatch,
    doubled_by_tma_store,
    first_tiles,
    halves,
    line_of,
    producer_writes_accumulator,
    verify_properties,
    wgmma_wait_pending,
)

from argus.layout_algebra.hopper import SwizzleMode

ASYNC = {"async", "mbarrier", "expect-tx", "phase", "proxy", "descriptor", "role", "registers", "barrier", "wgmma"}


def _refuted(results, prop, line=None):
    """The counterexample of a VC of ``prop`` refuted (at ``line``, when given: a bug may
    break several VCs of the property, e.g. a wrong parity also lets the producer lag)."""
    refuted = [r for r in results if r.verdict == "refuted" and r.vc.property == prop and r.counterexample
               and (line is None or r.counterexample.position.line == line)]
    assert refuted, [(r.vc.id, r.verdict, r.reason) for r in results if r.verdict != "proved"]
    return refuted[0].counterexample


def _proved(results):
    assert results and all(r.verdict == "proved" for r in results), \
        [(r.vc.id, r.verdict, r.reason) for r in results if r.verdict != "proved"]


# --------------------------------------------------------------------------- the warp-specialized GEMM

def test_warp_specialized_gemm_satisfies_the_asynchrony_model():
    results = verify_properties(WS.specialize(), ASYNC)
    _proved(results)
    assert {"async", "mbarrier", "expect-tx", "phase", "registers"} <= {r.vc.property for r in results}


# bug: (property, line of the VC, line the interpreter reports, kind the interpreter reports)
WS_BUGS = {
    "parity": ("phase", "A.wait(full[s], parity=", "A.wait(full[s], parity=", "deadlock"),
    "expect-tx": ("expect-tx", "A.arrive_expect_tx(full[s], nbytes)", "A.mma(ATOM, sa[s]", "expect-tx"),
    "no-empty-wait": ("async", "A.mma(ATOM, sa[s]", "A.tma_load(a.tile((BM, BK), (bm, kt))", "async"),
    "release-before-retire": ("async", "A.mma(ATOM, sa[s]", "A.tma_load(a.tile((BM, BK), (bm, kt))", "race"),
    "early-release": ("async", "A.mma(ATOM, sa[s]", "A.tma_load(a.tile((BM, BK), (bm, kt))", "async"),
}


def test_accumulator_read_before_its_wgmma_retires_is_refuted():
    kernel = wgmma_wait_pending(TMA_WGMMA.specialize(), 1)
    results = verify_properties(kernel, {"wgmma", "async"})
    cx = _refuted(results, "wgmma")
    assert cx.position.line == line_of(TMA_WGMMA, "A.store(acc, mine)")
    assert cx.other["line"] == line_of(TMA_WGMMA, "A.mma(ATOM, sa[st]")
    assert cx.replay.status == "reproduced", cx.human()
    # the stage is also released to the producer while the last wgmma may still read it
    assert _refuted(results, "async").replay.status == "reproduced"


@pytest.mark.parametrize("bug", sorted(WS_BUGS))
def test_warp_specialized_gemm_bugs_are_refuted_and_replayed(bug):
    prop, vc_line, reported, kind = WS_BUGS[bug]
    cx = _refuted(verify_properties(WS.specialize(BUG=bug), ASYNC), prop, line_of(WS, vc_line))
    assert cx.position.line == line_of(WS, vc_line)
    assert cx.replay.status == "reproduced", cx.human()
    assert cx.replay.violation["kind"] == kind
    assert cx.replay.violation["position"].endswith(f":{line_of(WS, reported)}")
    assert tuple(cx.block) == (0, 0, 0)
    if bug == "parity":  # a consumer's first wait: the parity of its own count of waits (phase 0)
        assert cx.iteration == {next(iter(cx.iteration)): 0} and cx.thread >= 128
        assert "own count of waits" in cx.message


# --------------------------------------------------------------------------- cp.async

def test_cp_async_pipeline_is_proved():
    _proved(verify_properties(cp_async_pipeline.specialize(), ASYNC))


def test_missing_cp_async_wait_is_refuted():
    cx = _refuted(verify_properties(cp_async_pipeline.specialize(WAIT_ALL_BUT=2), ASYNC), "async")
    read = line_of(cp_async_pipeline, "acc = acc + A.load(s[kt % 2]")
    assert cx.position.line == read and cx.replay.status == "reproduced", cx.human()
    copies = {line_of(cp_async_pipeline, "A.cp_async(x.tile((ROWS, COLS), (m0, kt + 1))"),
              line_of(cp_async_pipeline, "A.cp_async(x.tile((ROWS, COLS), (m0, 0))")}
    assert cx.other["line"] in copies  # k-tile kt's copy: the prologue's (kt = 0) or the previous iteration's


def test_refilling_a_stage_others_still_read_is_refuted():
    cx = _refuted(verify_properties(cp_async_pipeline.specialize(SECOND_BARRIER=False), ASYNC), "async")
    assert cx.replay.status == "reproduced" and cx.replay.violation["kind"] == "race", cx.human()


# --------------------------------------------------------------------------- trip counts, proxies, barriers

def test_trip_count_below_the_stage_count_deadlocks():
    _proved(verify_properties(first_tiles.specialize(), ASYNC))
    cx = _refuted(verify_properties(first_tiles.specialize(CLAMPED=False), ASYNC), "phase")
    assert cx.position.line == line_of(first_tiles, "A.wait(full[kt], phase=0)")
    assert cx.sizes["K"] < 3 * 32  # fewer k-tiles than stages
    assert cx.replay.status == "reproduced" and cx.replay.violation["kind"] == "deadlock", cx.human()


def test_missing_proxy_fence_before_a_tma_store_is_refuted():
    _proved(verify_properties(doubled_by_tma_store.specialize(), ASYNC))
    cx = _refuted(verify_properties(doubled_by_tma_store.specialize(FENCE=False), ASYNC), "proxy")
    assert cx.position.line == line_of(doubled_by_tma_store, "A.tma_store(s, y.tile(")
    assert cx.other["line"] == line_of(doubled_by_tma_store, "A.store(v * 2.0")
    assert cx.replay.status == "reproduced", cx.human()


def test_unbalanced_named_barrier_is_refuted():
    _proved(verify_properties(halves.specialize(), ASYNC))
    cx = _refuted(verify_properties(halves.specialize(PARTICIPANTS=96), ASYNC), "barrier")
    assert cx.position.line == line_of(halves, "A.named_barrier(1, PARTICIPANTS)")
    assert cx.replay.status == "reproduced", cx.human()


# --------------------------------------------------------------------------- roles, descriptors

def test_producer_writing_the_consumers_accumulator_is_refuted():
    cx = _refuted(verify_properties(producer_writes_accumulator(WS.specialize()), {"role"}), "role")
    assert cx.thread < 128  # a producer thread
    assert cx.replay.status == "not-replayable"  # registers are per thread: the interpreter cannot see it


def test_descriptor_swizzle_other_than_the_tma_swizzle_is_refuted():
    assert all(r.verdict == "proved" for r in verify_properties(TMA_WGMMA.specialize(), {"descriptor"}))
    mutant = descriptor_mismatch(TMA_WGMMA.specialize(), SwizzleMode.B64.element_swizzle(2))
    cx = _refuted(verify_properties(mutant, {"descriptor"}), "descriptor")
    assert cx.position.line == line_of(TMA_WGMMA, "A.mma(ATOM, sa[st]")
    assert cx.other["op"] == "Copy"  # the TMA load that fills the buffer in the other mode


def test_multicast_peer_not_armed_is_refuted():
    """Each block multicasts half a box to both blocks of the cluster: each block's barrier
    receives two halves, so each must arm the bytes of both."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ir"))
    import cluster_kernels

    kernel = cluster_kernels.multicast_halves
    _proved(verify_properties(kernel.specialize(), ASYNC))
    cx = _refuted(verify_properties(kernel.specialize(ARM_ALL=False), ASYNC), "expect-tx")
    assert cx.position.line == line_of(kernel, "A.arrive_expect_tx(bar, nbytes)")
    # the interpreter meets the unarmed bytes where the peer's half is read before it landed
    assert cx.replay.violation["kind"] == "expect-tx", cx.human()


# --------------------------------------------------------------------------- no false alarms

@pytest.mark.parametrize("name", ["tma_rows", "tile_sums_cp_async", "tile_sums_by_hand", "arrivals"])
def test_the_interpreters_asynchrony_kernels_are_proved(name):
    """The correct kernels of the interpreter's asynchrony tests (policy-made and hand-written
    pipelines, cp.async, single-phase TMA) satisfy the model."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ir"))
    import async_kernels

    _proved(verify_properties(getattr(async_kernels, name).specialize(), ASYNC))


def test_register_a_rewritten_before_its_wgmma_retires_is_refuted():
    # a wgmma .rs may read its A registers until the wait that retires it: loading the next
    # fragment into them earlier is refuted, and the interpreter reproduces it
    import mma_kernels as K  # tests/ir, on the path (conftest)

    results = verify_properties(K.one_tile("wgmma.m64n16k16.bf16.rs", REWRITE_A=True).specialize(), {"wgmma"})
    cx = _refuted(results, "wgmma")
    assert cx.replay.status == "reproduced", cx.human()
    original = verify_properties(K.one_tile("wgmma.m64n16k16.bf16.rs").specialize(), {"wgmma"})
    assert all(r.verdict == "proved" for r in original), [(r.vc.id, r.verdict) for r in original]
