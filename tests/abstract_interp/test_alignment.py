"""Alignment of fixed-width vector copies: each w-byte access starts at a multiple of w."""

import pytest

import argus.spec as A
from argus.abstract_interp import generate_vcs
from argus.abstract_interp.alignment import base_alignment, fixed_width
from argus.proofs import verify_kernel


@A.kernel(threads=32)
def rows_of_eight(x: A.Global(A.f32, "32 8"), y: A.Global(A.f32, "32 8")):
    """Each thread copies 4 floats (16 bytes) of its 32-byte row into shared memory."""
    t = A.thread_id()
    s = A.shared(A.f32, (32, 8))
    A.cp_async(x.tile((1, 4), (t, 1)), s.tile((1, 4), (t, 1)), atom="cp.async.16")
    A.cp_async_commit()
    A.cp_async_wait(0)
    A.barrier()
    A.copy(s.tile((1, 4), (t, 1)), y.tile((1, 4), (t, 1)))


@A.kernel(threads=32)
def rows_of_five(x: A.Global(A.f32, "32 5"), y: A.Global(A.f32, "32 5")):
    """Rows of 20 bytes: the 16-byte copy of row t starts at byte 20 t, misaligned for odd t."""
    t = A.thread_id()
    s = A.shared(A.f32, (32, 8))
    A.cp_async(x.tile((1, 4), (t, 0)), s.tile((1, 4), (t, 1)), atom="cp.async.16")
    A.cp_async_commit()
    A.cp_async_wait(0)
    A.barrier()
    A.copy(s.tile((1, 4), (t, 1)), y.tile((1, 4), (t, 0)))


def test_fixed_widths_of_the_atoms():
    assert fixed_width("cp.async.16") == 16 and fixed_width("cp.async.8") == 8
    assert fixed_width("sync") is None and fixed_width("no-such-atom") is None


def test_aligned_rows_are_proved_for_both_sides():
    report = verify_kernel(rows_of_eight.specialize())
    checks = [r for r in report.results if r.vc.property == "alignment"]
    assert len(checks) == 2 and all(r.verdict == "proved" for r in checks), report.human()


def test_misaligned_rows_are_refuted_with_the_thread():
    report = verify_kernel(rows_of_five.specialize())
    refuted = [c for c in report.counterexamples if c.property == "alignment"]
    assert refuted, report.human()
    cx = refuted[0]
    assert cx.thread % 2 == 1 and cx.buffer == "x", cx.human()
    assert cx.replay.status == "not-replayable"
    proved = [r for r in report.results if r.vc.property == "alignment" and r.verdict == "proved"]
    assert len(proved) == 1  # the shared side is aligned


@pytest.mark.parametrize("declared, expected", [(None, 16), (64, 64), (8, 16)])
def test_declared_alignment_is_a_hypothesis(declared, expected):
    assume = (lambda x: [A.aligned(x, declared)]) if declared else None

    @A.kernel(threads=32, assume=assume)
    def copy(x: A.Global(A.f32, "32 8")):
        s = A.shared(A.f32, (32, 8))
        A.cp_async(x.tile((1, 4), (A.thread_id(), 0)), s.tile((1, 4), (A.thread_id(), 0)), atom="cp.async.16")

    kernel = copy.specialize()
    buffer = next(p.buffer for p in kernel.params if p.name == "x")
    assert base_alignment(kernel, buffer) == expected
    _, vcs = generate_vcs(kernel)
    assert [vc for vc in vcs if vc.property == "alignment"]
