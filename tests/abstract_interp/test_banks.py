"""Bank conflicts: degrees measured for every shared access, bounds checked where asserted."""

import sys
from pathlib import Path

import pytest

import argus.spec as A
from argus.abstract_interp import generate_vcs
from argus.layout_algebra.swizzle import bank_conflict_degree
from argus.proofs import verify_kernel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import transpose_swizzled as TS  # noqa: E402


def _degrees(kernel):
    _, vcs = generate_vcs(kernel)
    return {(vc.position.line, vc.roles["access"].role): vc.roles["degree"]
            for vc in vcs if vc.property == "bank-conflicts" and "degree" in vc.roles}


def test_transpose_degrees_are_measured_per_access():
    swizzled = _degrees(TS.transpose.specialize(SWIZZLED=True))
    plain = _degrees(TS.transpose.specialize(SWIZZLED=False))
    assert set(swizzled.values()) == {1}
    # the column read of an unswizzled 32 x 32 f32 tile: all 32 lanes in one bank
    assert sorted(plain.values()) == [1, 32]


@A.kernel(threads=64)
def strided_read(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "64"), STRIDE: A.const = 1, BOUND: A.const = 1):
    """Lane t reads word (STRIDE * t) % 64 of a shared row (stride 2: banks 0, 2, .. hold two
    words each, degree 2; stride 4: lanes t and t + 16 share a word, degree 2 again); the
    kernel asserts BOUND."""
    t = A.thread_id()
    s = A.shared(A.f32, (64,))
    A.copy(x.tile((1,), (t,)), s.tile((1,), (t,)))
    A.barrier()
    view = s.tile((1,), ((STRIDE * t) % 64,))
    A.assert_bank_conflicts(view, BOUND)
    A.copy(view, y.tile((1,), (t,)))


@pytest.mark.parametrize("stride", [1, 2, 4, 3])
def test_measured_degree_matches_the_model(stride):
    words = [(stride * t) % 64 for t in range(32)]
    expected = bank_conflict_degree([4 * w for w in words], 4)
    line = next(op.loc.line for op in strided_read.specialize(STRIDE=stride).body.ops
                if op.kind == "AssertBankConflicts") + 1
    assert _degrees(strided_read.specialize(STRIDE=stride))[(line, "src")] == expected


@pytest.mark.parametrize("stride, bound, verdict", [(1, 1, "proved"), (2, 2, "proved"), (2, 1, "refuted"),
                                                    (4, 1, "refuted"), (4, 2, "proved"), (3, 1, "proved")])
def test_asserted_bounds_are_checked(stride, bound, verdict):
    report = verify_kernel(strided_read.specialize(STRIDE=stride, BOUND=bound))
    checks = [r for r in report.results if r.vc.property == "bank-conflicts" and r.solver != "structural"]
    assert len(checks) == 1 and checks[0].verdict == verdict, report.human()
    if verdict == "refuted":
        cx = next(c for c in report.counterexamples if c.property == "bank-conflicts")
        assert cx.replay.status == "not-replayable", cx.human()


def test_the_assertion_needs_shared_memory_and_a_degree():
    from argus.errors import ArgusError

    @A.kernel(threads=32)
    def on_global(x: A.Global(A.f32, "32")):
        A.assert_bank_conflicts(x.tile((1,), (A.thread_id(),)), 1)

    @A.kernel(threads=32)
    def no_degree(x: A.Global(A.f32, "32")):
        s = A.shared(A.f32, (32,))
        A.assert_bank_conflicts(s.tile((1,), (A.thread_id(),)), 0)

    for kernel in (on_global, no_degree):
        with pytest.raises(ArgusError, match="assert_bank_conflicts"):
            kernel.specialize()
