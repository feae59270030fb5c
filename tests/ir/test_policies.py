"""Policies: the pipelining policy's output is the hand-written pipeline (up to renaming), runs
correctly for every trip count (also below the number of stages), and unrolling keeps results."""

import sys
from pathlib import Path

import numpy as np
import pytest
import sympy

import argus.spec as A
from argus.ir import check
from argus.ir import nodes as N
from argus.ir.equivalence import difference, equivalent
from argus.ir.interpreter import Interpreter
from argus.ir.policies import PolicyError, apply_policies

sys.path.insert(0, str(Path(__file__).parent))
import async_kernels as K
from test_async import _line, _randn, _tile_sums_reference, _violation


def _run_tile_sums(kernel, m, k, **consts):
    x = _randn(np.random.default_rng(m * 1000 + k), m, k)
    out = Interpreter(kernel.specialize(**consts)).run({"x": x, "out": np.zeros((m, K.BK), np.float32)},
                                                       {"M": m, "K": k})
    np.testing.assert_array_equal(out["out"], _tile_sums_reference(x))


# trip counts n = ceil(K / 32): 1, 2, 3, 4, 7 against 1..4 stages (n < S - 1, n = S - 1, n = S, n > S)
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("m,k", [(64, 32), (64, 64), (100, 70), (64, 128), (128, 224)])
def test_tma_pipeline_matches_numpy_for_every_trip_count(stages, m, k):
    _run_tile_sums(K.tile_sums, m, k, STAGES=stages)


@pytest.mark.parametrize("stages", [1, 2, 4])
@pytest.mark.parametrize("first", [1, 2])
@pytest.mark.parametrize("k", [32, 96, 300])  # trip counts n - first from -1 to 8
def test_pipeline_of_a_loop_not_starting_at_zero(stages, first, k):
    x = _randn(np.random.default_rng(k + first), 64, k)
    out = Interpreter(K.tile_sums_from.specialize(STAGES=stages, FIRST=first)).run(
        {"x": x, "out": np.zeros((64, K.BK), np.float32)}, {"K": k})
    n = -(-k // K.BK)
    padded = np.zeros((64, n * K.BK), np.float32)
    padded[:, :k] = x
    expected = np.zeros((64, K.BK), np.float32)
    for j in range(first, n):
        expected = (expected + padded[:, j * K.BK:(j + 1) * K.BK]).astype(np.float32)
    np.testing.assert_array_equal(out["out"], expected)


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("m,k", [(64, 32), (100, 70), (64, 224)])
def test_cp_async_pipeline_matches_numpy(stages, m, k):
    _run_tile_sums(K.tile_sums_cp_async, m, k, STAGES=stages)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_policy_output_is_the_hand_written_pipeline(stages):
    policy, by_hand = K.tile_sums.specialize(STAGES=stages), K.tile_sums_by_hand.specialize(STAGES=stages)
    assert difference(policy, by_hand) is None
    check.check(policy)
    _run_tile_sums(K.tile_sums_by_hand, 100, 130, STAGES=stages)


def test_equivalence_reports_where_programs_differ():
    policy = K.tile_sums.specialize()
    diff = difference(policy, K.tile_sums_by_hand.specialize(BUG="parity"))
    assert diff is not None and "MbarrierWait.parity" in diff.path
    assert not equivalent(policy, K.tile_sums_by_hand.specialize(STAGES=4))
    assert not equivalent(policy, K.tile_sums_by_hand.specialize(BUG="no-empty-wait"))
    assert equivalent(policy, policy)


def test_inserted_ops_point_back_to_the_range_line():
    k = K.tile_sums.specialize()
    line = _line(K.tile_sums, "A.range(n, pipeline=STAGES")
    inserted = [op for op in N.walk(k.body) if op.inserted_by is not None]
    kinds = {op.kind for op in inserted}
    assert {"Alloc", "MbarrierInit", "Fence", "Barrier", "If", "For", "MbarrierWait", "MbarrierArrive"} <= kinds
    assert all(op.inserted_by.line == line and op.loc.line == line for op in inserted)
    # the user's copies keep their own line; the policy gave them their full barrier
    copies = [op for op in N.walk(k.body) if isinstance(op, N.Copy) and op.atom == "tma.load"]
    assert len(copies) == 3 and all(op.mbarrier is not None and op.inserted_by is None for op in copies)
    assert all(op.loc.line == _line(K.tile_sums, "A.tma_load(x.tile") for op in copies)
    assert not any(isinstance(op, N.For) and op.pipeline for op in N.walk(k.body))
    assert apply_policies(k) is k  # idempotent


def test_prologue_is_guarded_by_the_trip_count():
    k = K.tile_sums.specialize(STAGES=4)
    guards = [op for op in k.body.ops if isinstance(op, N.If)]
    assert len(guards) == 3
    n = k.body.ops[-2].stop  # the epilogue runs to n
    assert [g.cond for g in guards] == [sympy.Lt(p, n) for p in range(3)]


@pytest.mark.parametrize("unroll", [2, 3])
@pytest.mark.parametrize("m,k", [(64, 32), (64, 224), (100, 170)])
def test_unrolled_pipeline_matches_numpy(unroll, m, k):
    _run_tile_sums(K.tile_sums, m, k, STAGES=3, UNROLL=unroll)


@pytest.mark.parametrize("m,k", [(64, 32), (100, 130)])
def test_pipeline_inside_a_warp_role_synchronises_the_role(m, k):
    kernel = K.tile_sums_in_a_role.specialize()
    (role,) = [op for op in kernel.body.ops if isinstance(op, N.WarpRole)]
    inits = [op for op in N.walk(role.body) if isinstance(op, N.MbarrierInit)]
    assert {op.count for op in inits} == {1, 64}  # the empty barriers count the role's 64 threads
    assert all(op.elected == sympy.Eq(kernel.thread_id, 64) for op in inits)
    (sync,) = [op for op in role.body.ops if isinstance(op, N.Barrier)]
    assert sync.id != 0 and sync.participants == 64  # a named barrier of the role, not bar.sync 0
    _run_tile_sums(K.tile_sums_in_a_role, m, k)


def test_unroll_makes_copies_and_a_remainder():
    @A.kernel(threads=32)
    def summed(x: A.Global(A.f32, "n 32"), y: A.Global(A.f32, "32"), U: A.const = 3):
        acc = A.zeros((1,), A.f32)
        for i in A.range(x.shape[0], unroll=U):
            acc = acc + A.load(x.tile((1, 1), (i, A.thread_id()))[0, :])
        A.store(acc, y.tile((1,), (A.thread_id(),)))

    k = summed.specialize()
    loops = [op for op in k.body.ops if isinstance(op, N.For)]
    assert len(loops) == 2  # blocks of 3 and the remainder
    main, _rest = loops
    assert sum(isinstance(op, N.Elementwise) for op in main.body.ops) == 3
    assert all(op.inserted_by is not None for op in loops)
    check.check(k)
    for n in (1, 5, 9):
        x = _randn(np.random.default_rng(n), n, 32)
        out = Interpreter(k).run({"x": x, "y": np.zeros(32, np.float32)}, {"n": n})
        ref = np.zeros(32, np.float32)
        for row in x:
            ref = (ref + row).astype(np.float32)
        np.testing.assert_array_equal(out["y"], ref)


def test_full_unroll_needs_constant_bounds():
    @A.kernel(threads=32)
    def summed(x: A.Global(A.f32, "n 32"), y: A.Global(A.f32, "32")):
        acc = A.zeros((1,), A.f32)
        for i in A.range(x.shape[0], unroll=True):
            acc = acc + A.load(x.tile((1, 1), (i, A.thread_id()))[0, :])
        A.store(acc, y.tile((1,), (A.thread_id(),)))

    with pytest.raises(PolicyError, match="constant loop bounds") as err:
        summed.specialize()
    assert err.value.position.line == _line(summed, "unroll=True")


def test_policy_errors_point_at_the_source():
    @A.kernel(threads=64)
    def named_bar(x: A.Global(A.f32, "64 64")):
        s = A.shared(A.f32, (2, 64, 32))
        bar = A.mbarrier(1)
        for kt, st in A.range(2, pipeline=2):
            A.tma_load(x.tile((64, 32), (0, kt)), s[st], bar)

    with pytest.raises(PolicyError, match="names an mbarrier") as err:
        named_bar.specialize()
    assert err.value.position.line == _line(named_bar, "A.tma_load(")

    @A.kernel(threads=64)
    def nothing_to_pipeline(x: A.Global(A.f32, "64")):
        for _kt, _st in A.range(2, pipeline=2):
            A.barrier()

    with pytest.raises(PolicyError, match="no asynchronous copy") as err:
        nothing_to_pipeline.specialize()
    assert err.value.position.line == _line(nothing_to_pipeline, "A.range(2, pipeline=2)")


# --------------------------------------------------------------------------- planted pipeline bugs

BUGS = {
    # bug: (kind, line of the report, K)
    "parity": ("deadlock", "A.wait(full[kt % STAGES], parity=", 160),
    "lagging-phase": ("parity", "phase=kt // STAGES - 1)", 160),
    "no-full-wait": ("race", "A.copy(acc + A.load(sx[kt % STAGES]", 160),
    "no-empty-wait": ("race", "A.tma_load(x.tile((BM, BK), (m0, j))", 160),
    "expect-tx-small": ("expect-tx", "A.tma_load(x.tile((BM, BK), (m0, p))", 160),
    "expect-tx-large": ("expect-tx", "A.wait(full[kt % STAGES], phase=kt // STAGES)", 160),
    "unclamped-drain": ("tag", "A.assert_tag(sx[kt % STAGES]", 32),
    # one k-block through 3 stages: stage 1's phase declares bytes that no copy delivers
    "expect-unguarded": ("expect-tx", "A.arrive_expect_tx(full[p], nbytes)", 32),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_pipeline_bug_is_caught_with_its_place(bug):
    kind, text, k = BUGS[bug]
    x = _randn(np.random.default_rng(11), 64, k)
    v = _violation(K.tile_sums_by_hand, {"x": x, "out": np.zeros((64, K.BK), np.float32)}, {"M": 64, "K": k},
                   BUG=bug)
    assert v.kind == kind, v
    lines = [_line(K.tile_sums_by_hand, text)]
    if bug in ("expect-tx-large", "no-full-wait", "unclamped-drain", "expect-unguarded"):  # several lines
        import inspect

        src, first = inspect.getsourcelines(K.tile_sums_by_hand.fn)
        lines = [first + i for i, line in enumerate(src) if text in line]
    assert v.position.line in lines, v
    assert v.block == (0, 0, 0) and v.thread is not None
    if bug == "no-empty-wait":  # write-after-read: the producer refills what a consumer still reads
        assert v.thread == 0 and v.other_thread not in (None, 0) and v.element is not None
    if bug in ("no-full-wait", "unclamped-drain"):
        assert v.element is not None
