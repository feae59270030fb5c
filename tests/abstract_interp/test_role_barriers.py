"""Named barriers scoped to a warp role: they order the role's threads among themselves (a
role epoch of their own), not the other roles'; other barriers inside a role stay unsupported."""

import pytest
from sympy import Eq

import argus.spec as A
from argus.abstract_interp.program import barrier_between, build_program
from argus.ir import nodes as N
from argus.proofs import verify_kernel


@A.kernel(threads=256, assume=lambda n: [Eq(n % 128, 0)])
def role_exchange(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, BUG: A.const = ""):
    s = A.shared(A.f32, (128,))
    with A.warp_role("idle", warps=range(0, 4)):
        pass
    with A.warp_role("exchange", warps=range(4, 8)):
        t = A.thread_id() - 128
        for k in A.range(A.cdiv(n, 128)):
            if BUG != "war":
                A.named_barrier(1, 128)  # the previous iteration's reads are done
            A.copy(x.tile((1,), (k * 128 + t,)), s.tile((1,), (t,)))
            if BUG == "wrong-count":
                A.named_barrier(1, 64)
            elif BUG != "raw":
                A.named_barrier(1, 128)  # every thread's element is written
            A.copy(s.tile((1,), ((t + 1) % 128,)), y.tile((1,), (k * 128 + t,)))


def test_role_barriers_get_a_role_epoch_and_leave_the_block_epoch():
    program = build_program(role_exchange.specialize())
    assert not program.unsupported
    inside = [s for s in program.sites if s.role_scope is not None]
    assert inside and all(s.role_scope.name == "exchange" and s.epoch == 0 for s in inside)
    copies = [s for s in inside if isinstance(s.op, N.Copy)]
    (_, role) = barrier_between(copies[0], copies[1])
    assert role is not None and role[0] != role[1]  # a role barrier lies between the two copies


def test_a_role_barrier_orders_the_role_threads_exchange():
    report = verify_kernel(role_exchange.specialize())
    assert report.verdict == "proved", report.human()


@pytest.mark.parametrize("bug", ["raw", "war"])
def test_without_either_role_barrier_the_exchange_races(bug):
    """Without the barrier after the writes a thread reads its neighbour's element before it is
    written; without the one before them it overwrites what the neighbour reads in the
    previous iteration."""
    report = verify_kernel(role_exchange.specialize(BUG=bug))
    assert report.verdict == "refuted", report.human()
    cx = [c for c in report.counterexamples if c.property == "race"]
    assert cx and cx[0].replay.status == "reproduced", report.human()


def test_a_barrier_of_another_participant_count_inside_a_role_is_unsupported():
    program = build_program(role_exchange.specialize(BUG="wrong-count"))
    assert any("only named barriers of the role's 128 threads" in reason for _, reason in program.unsupported)
    assert verify_kernel(role_exchange.specialize(BUG="wrong-count")).verdict != "proved"


@A.kernel(threads=256)
def conditional_role_barrier(x: A.Global(A.f32, "n"), n: A.Index):
    with A.warp_role("idle", warps=range(0, 4)):
        pass
    with A.warp_role("worker", warps=range(4, 8)):
        for k in A.range(n):
            if k > 0:
                A.named_barrier(2, 128)
            A.copy(x.tile((1,), (k,)), x.tile((1,), (k,)))


def test_a_role_barrier_skipped_in_the_first_iterations_counts_in_closed_form():
    program = build_program(conditional_role_barrier.specialize())
    assert not program.unsupported
    (copy,) = [s for s in program.sites if isinstance(s.op, N.Copy)]
    (k,) = [lp.var for lp in copy.loops]
    for value, passed in ((0, 0), (1, 1), (5, 5)):  # the barrier of iteration k comes before the copy
        assert int(copy.role_epoch.xreplace({k: value})) == passed
