"""The examples are proved; every planted bug of the interpreter tests is refuted, and its
counterexample replays on the reference interpreter with the same kind, block, thread and line."""

import interp_kernels as K
import pytest
import vector_add as VA
from proof_support import source_line

from argus.proofs import verify_kernel


def test_vector_add_is_proved_without_false_alarms():
    report = verify_kernel(VA.vector_add.specialize())
    assert report.verdict == "proved", report.human()
    assert {r.vc.property for r in report.results} >= {"in-bounds", "uninitialized", "race", "write-conflict",
                                                        "tag", "witness"}
    assert all(r.verdict == "proved" for r in report.results)


@pytest.mark.parametrize("kernel, consts", [
    (K.tiled_copy, {}),
    (K.rotate_through_shared, {"SYNC": True}),
])
def test_correct_interpreter_kernels_are_proved(kernel, consts):
    report = verify_kernel(kernel.specialize(**consts))
    assert report.verdict == "proved", report.human()


def test_transpose_is_proved():
    report = verify_kernel(K.transpose_tagged.specialize())
    assert report.verdict == "proved", report.human()


# (kernel, consts, property, interpreter kind, marker of the source line, thread)
PLANTED = [
    (K.raw_index_copy, {}, "in-bounds", "out-of-bounds", "A.copy(x[i], v)", 1),
    (K.rotate_through_shared, {"SYNC": False}, "race", "race", "A.copy(s.tile((1,), ((t + 1) % 64,))", 0),
    (K.warp_zero_barrier, {}, "barrier", "barrier", "A.barrier()", 0),
    (K.reads_uninitialized, {}, "uninitialized", "uninitialized", "A.store(r.tile", 0),
    (K.transpose_tagged, {"WRONG": True}, "tag", "tag", "A.assert_tag(out", 0),
]


@pytest.mark.parametrize("kernel, consts, prop, kind, marker, thread", PLANTED,
                         ids=[p[0].name + "".join(f"-{k}={v}" for k, v in p[1].items()) for p in PLANTED])
def test_planted_bugs_are_refuted_and_replay(kernel, consts, prop, kind, marker, thread):
    report = verify_kernel(kernel.specialize(**consts))
    assert report.verdict == "refuted", report.human()
    line = source_line(kernel, marker)
    found = [c for c in report.counterexamples if c.property == prop and c.position.line == line]
    assert found, report.human()
    cx = found[0]
    assert cx.replay.status == "reproduced", cx.human()
    v = cx.replay.violation
    assert v["kind"] == kind and v["block"] == [0, 0, 0] and tuple(cx.block) == (0, 0, 0)
    assert cx.thread == thread and cx.replay.thread_matches
    assert v["position"].endswith(f":{line}")
