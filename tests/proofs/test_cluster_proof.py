"""The 2-block cluster GEMM with TMA multicast (examples/gemm_cluster_multicast.py): proved
with every read of the multicast operand resolved to the copy of the block that owns its half,
and each planted cluster bug refuted by the property that names it, with a counterexample the
reference interpreter reproduces (same kind, program point and block)."""

from pathlib import Path

import pytest
from async_kernels_support import line_of, verify_properties

from argus.proofs import verify_kernel
from argus.proofs.cli_verify import load_kernels

ROOT = Path(__file__).resolve().parents[2]
ASYNC = {"async", "mbarrier", "expect-tx", "phase", "proxy", "descriptor", "role", "registers", "barrier", "wgmma",
         "cluster"}


def _kernel():
    (kernel,) = load_kernels(ROOT / "examples" / "gemm_cluster_multicast.py")
    return kernel


def test_the_cluster_multicast_gemm_is_proved():
    report = verify_kernel(_kernel().specialize())
    assert report.verdict == "proved", [(r.vc.id, r.verdict, r.reason) for r in report.results
                                        if r.verdict != "proved"]
    proved = {r.vc.property for r in report.results}
    assert {"async", "mbarrier", "phase", "expect-tx", "cluster", "tag", "mma-operands", "witness"} <= proved
    # nothing havocked: the multicast half and the phases across the blocks are modelled (the
    # coverage VCs' note on zero-filled tails is about sums, not about the cluster)
    assert not [a for r in report.results if r.vc.property != "coverage" for a in r.vc.approximations]


# bug: (property, line of the VC, line the interpreter reports, kind it reports, the other block is the peer)
BUGS = {
    "unarmed-multicast": ("expect-tx", "A.arrive_expect_tx(full[s], nbytes)", None, "expect-tx", False),
    "no-remote-release": ("async", "A.mma(ATOM, sa[s]", "A.tma_load(b.tile((half, BK)", "race", True),
    "early-exit": ("cluster", "A.arrive(A.mapa(empty, peer)[s])", "A.arrive(A.mapa(empty, peer)[s])", "cluster",
                   False),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_cluster_bugs_are_refuted_and_replay(bug):
    prop, vc_line, replay_line, kind, peer = BUGS[bug]
    kernel = _kernel()
    results = verify_properties(kernel.specialize(BUG=bug), ASYNC)
    refuted = [r for r in results if r.verdict == "refuted" and r.vc.property == prop and r.counterexample]
    assert refuted, [(r.vc.id, r.verdict, r.reason) for r in results if r.verdict != "proved"]
    cx = refuted[0].counterexample
    assert cx.position.line == line_of(kernel, vc_line)
    assert cx.replay.status == "reproduced", cx.human()
    assert cx.replay.violation["kind"] == kind, cx.human()
    if replay_line is not None:
        assert cx.replay.violation["position"].endswith(f":{line_of(kernel, replay_line)}"), cx.human()
    if peer:  # the conflicting copy is the peer block's multicast into this block
        assert cx.other["block"] != list(cx.block), cx.human()
    assert all(r.verdict != "refuted" or r.vc.property in (prop, "async") for r in results)


def test_cluster_ranks_and_peers_are_those_of_the_interpreter():
    """``cluster_rank`` of a block and the block of a rank in its cluster, as terms, agree with
    the interpreter's numbering (x fastest) for a 2 x 2 cluster."""
    import argus.spec as A
    from argus.abstract_interp.mbarrier import peer_block, rank_term
    from argus.ir.interpreter import Interpreter
    from argus.smt import terms as T
    from argus.smt.evaluate import evaluate

    @A.kernel(threads=32, cluster=(2, 2, 1), grid=lambda: (4, 4))
    def k(x: A.Global(A.f32, "32")):
        A.copy(x.tile((1,), (A.thread_id(),)), x.tile((1,), (A.thread_id(),)))

    kernel = k.specialize()
    interp = Interpreter(kernel)
    for bx in range(4):
        for by in range(4):
            block = [T.int_const(bx), T.int_const(by), T.int_const(0)]
            assert evaluate(rank_term(kernel, block), {}) == interp.cluster_rank((bx, by, 0))
            for p in range(4):
                peer = [evaluate(t, {}) for t in peer_block(kernel, block, T.int_const(p))]
                assert interp.cluster_rank(tuple(peer)) == p
                assert (peer[0] // 2, peer[1] // 2) == (bx // 2, by // 2)


def test_cluster_shapes_outside_the_model_are_unknown_with_their_reason():
    """A remote arrive with no local arrive to join, and a multicast box read that no mbarrier
    phase pins to an iteration, leave their VCs ``unknown`` with the reason (never proved)."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "ir"))
    import cluster_kernels as C

    report = verify_kernel(C.remote_handoff.specialize())
    reasons = " ".join(r.reason or "" for r in report.results if r.verdict == "unknown")
    assert report.verdict == "unknown" and "follows no local arrive on the same element" in reasons
    report = verify_kernel(C.multicast_halves.specialize())
    reasons = " ".join(r.reason or "" for r in report.results if r.verdict == "unknown")
    assert report.verdict == "unknown" and "no mbarrier phase pins the issuing iteration" in reasons
