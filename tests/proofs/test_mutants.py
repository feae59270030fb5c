"""The mutation suite: each planted bug is refuted with a counterexample that replays; each
correct variant is proved (no false alarm).  The table is printed by ``-s``."""

import pytest
import verifier_kernels as V
from proof_support import assert_mutation_refuted, source_line

from argus.proofs import verify_kernel

# (name, kernel, correct consts, mutant consts, property, interpreter kind, marker of the line)
MUTATIONS = [
    ("off-by-one tile offset", V.tagged_copy, {"SHIFT": 0}, {"SHIFT": 1}, "tag", "tag", "A.assert_tag(out"),
    ("missing predicate on a tail", V.tail_store, {"PREDICATED": True}, {"PREDICATED": False},
     "in-bounds", "out-of-bounds", "A.copy(v, y[i])"),
    ("overlapping writes by two blocks", V.block_tiles, {"OVERLAP": False}, {"OVERLAP": True},
     "write-conflict", "write-conflict", "A.store(v, y.tile((64,), (b,))"),
    ("barrier in a divergent branch", V.divergent_barrier, {"DIVERGENT": False}, {"DIVERGENT": True},
     "barrier", "barrier", "A.barrier()"),
    ("dropped barrier (transpose)", V.transpose_shared, {"BARRIER": True}, {"BARRIER": False},
     "race", "race", "A.copy(s.tile((1, 1), (t, r))"),
    ("dropped barrier (loop)", V.shared_loop, {"SECOND_BARRIER": True}, {"SECOND_BARRIER": False},
     "race", "race", "A.copy(s.tile((1,), ((t + 1) % 64,))"),
    ("overlapping iterations (grid-stride loop)", V.grid_stride_copy, {"STRIDE": 256}, {"STRIDE": 192},
     "write-conflict", "write-conflict", "A.store(v, out)"),
    ("store/load swizzle mismatch", V.swizzled_stage, {"MISMATCH": False}, {"MISMATCH": True},
     "tag", "tag", "A.assert_tag(y.tile((1, 32)"),
]


@pytest.mark.parametrize("name, kernel, good, bad, prop, kind, marker", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_is_refuted_and_the_original_proved(name, kernel, good, bad, prop, kind, marker):
    assert_mutation_refuted(name, kernel, good, bad, prop, kind, marker)


def test_alternating_stages_resolve_to_the_latest_iteration_of_their_stage():
    report = verify_kernel(V.double_buffered.specialize())
    assert report.verdict == "proved", report.human()
    wrong = verify_kernel(V.double_buffered.specialize(WRONG_STAGE=True))
    assert wrong.verdict == "refuted", wrong.human()
    cx = wrong.counterexamples[0]
    assert cx.replay.status == "reproduced", cx.human()


def test_unsupported_loop_shapes_make_the_verdict_unknown():
    report = verify_kernel(V.uneven_barriers.specialize())
    assert report.verdict == "unknown"
    line = source_line(V.uneven_barriers, "for k in A.range")
    assert any(r.verdict == "unknown" and r.reason.startswith(f"loop at {V.uneven_barriers.position.file}:{line}")
               and "number of barriers that depends on its counter" in r.reason for r in report.results), \
        report.human()


def test_a_cp_async_read_without_commit_and_wait_is_refuted():
    report = verify_kernel(V.async_copy.specialize())
    cx = next(c for c in report.counterexamples if c.property == "async")
    assert cx.position.line == source_line(V.async_copy, "A.copy(s.tile((1,), (A.thread_id(),)), y.tile(")
    assert cx.replay.status == "reproduced", cx.human()


def test_accumulators_across_a_symbolic_loop_are_handled_soundly():
    """Reads of an accumulator resolve without an invariant (its tag is havocked, soundly);
    the zeros it starts from carry no tag, so a tag assertion on the sum is refuted, as the
    interpreter agrees."""
    proved = verify_kernel(V.row_sum.specialize())
    assert proved.verdict == "proved", proved.human()
    assert any("needs an invariant" in a for r in proved.results for a in r.vc.approximations)
    refuted = verify_kernel(V.row_sum.specialize(TAGGED=True))
    cx = next(c for c in refuted.counterexamples if c.property == "tag")
    assert cx.actual_tag is None and cx.replay.status == "reproduced"
