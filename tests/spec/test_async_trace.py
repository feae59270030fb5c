"""Tracing the asynchronous operations: the concurrency contract (scope, elected issuer, explicit
handles) is in the IR, and misuse is an error at the user's line."""

import inspect

import pytest
import sympy

import argus.spec as A
from argus import symbolic
from argus.ir import check
from argus.ir import nodes as N
from argus.ir.printer import print_kernel
from argus.ir.uniformity import Uniformity, analyze
from argus.layout_algebra.hopper import SwizzleMode

TID = N.THREAD_ID


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _ops(kernel, kind):
    return [op for op in N.walk(kernel.body) if isinstance(op, kind)]


def test_tma_and_mbarrier_ops_declare_issuer_and_handles():
    @A.kernel(threads=128)
    def k(x: A.Global(A.bf16, "64 64")):
        s = A.shared(A.bf16, (64, 64), swizzle=SwizzleMode.B128.element_swizzle(2))
        bar = A.mbarrier(1)
        A.mbarrier_init(bar)
        nbytes = A.tma_load(x.tile((64, 64), (0, 0)), s, bar)
        A.arrive_expect_tx(bar, nbytes)
        A.wait(bar, phase=0)

    kernel = k.specialize()
    check.check(kernel)
    (init,) = _ops(kernel, N.MbarrierInit)
    (fence,) = _ops(kernel, N.Fence)
    (copy,) = _ops(kernel, N.Copy)
    (arrive,) = _ops(kernel, N.MbarrierArrive)
    (wait,) = _ops(kernel, N.MbarrierWait)
    assert init.elected == sympy.Eq(TID, 0) and init.count == 1
    assert fence.fence == "mbarrier_init" and fence.elected == init.elected
    assert _ops(kernel, N.Barrier)[0].scope is N.Scope.BLOCK  # the init is made visible to every thread
    assert copy.atom == "tma.load" and copy.elected == sympy.Eq(TID, 0) and copy.scope is N.Scope.THREAD
    assert copy.handle.kind is N.HandleKind.MBARRIER_PHASE and copy.mbarrier == arrive.bar
    assert arrive.expect_tx == 64 * 64 * 2 and arrive.elected == sympy.Eq(TID, 0)
    assert wait.handle == copy.handle and wait.parity == 0 and wait.phase == 0 and wait.elected is None
    text = print_kernel(kernel)
    assert "mbarrierwait" in text and "[elect Eq(tid, 0)]" in text


def test_cp_async_groups_are_explicit_handles():
    @A.kernel(threads=32)
    def k(x: A.Global(A.f32, "64")):
        s = A.shared(A.f32, (64,))
        A.cp_async(x.tile((1,), (A.thread_id(),)), s.tile((1,), (A.thread_id(),)))
        first = A.cp_async_commit()
        A.cp_async(x.tile((1,), (A.thread_id() + 32,)), s.tile((1,), (A.thread_id() + 32,)))
        second = A.cp_async_commit()
        A.cp_async_wait(1)
        A.cp_async_wait(0)
        assert first.handle != second.handle

    kernel = k.specialize()
    copies, commits, waits = _ops(kernel, N.Copy), _ops(kernel, N.AsyncCommit), _ops(kernel, N.AsyncWait)
    assert [c.handle for c in copies] == [c.handle for c in commits]
    assert all(h.kind is N.HandleKind.CP_ASYNC_GROUP for h in (c.handle for c in commits))
    assert waits[0].handles == (commits[0].handle,) and waits[1].handles == tuple(c.handle for c in commits)
    assert waits[0].group is N.HandleKind.CP_ASYNC_GROUP and waits[0].kind == "AsyncWait"


def test_warp_roles_with_statement_and_default_issuer():
    @A.kernel(threads=256)
    def k(x: A.Global(A.f32, "64 32")):
        s = A.shared(A.f32, (64, 32))
        bar = A.mbarrier(1)
        A.mbarrier_init(bar)
        with A.warp_role("producer", warps=range(4, 8), registers=40):
            A.arrive_expect_tx(bar, A.tma_load(x.tile((64, 32), (0, 0)), s, bar))
        for _ in A.warp_role("consumer", warps=range(0, 4), registers=232):
            A.wait(bar, phase=0)

    kernel = k.specialize()
    producer, consumer = _ops(kernel, N.WarpRole)
    assert producer.name == "producer" and producer.registers == 40
    warp = symbolic.floordiv(TID, 32)
    assert producer.cond == sympy.And(warp >= 4, warp < 8)
    assert analyze(kernel).context(producer.body.ops[0]) is Uniformity.WARP
    (copy,) = _ops(kernel, N.Copy)
    assert copy.elected == sympy.Eq(TID, 128)  # the first thread of the role issues
    assert isinstance(consumer.body.ops[0], N.SetMaxNReg) and consumer.body.ops[0].registers == 232
    check.check(kernel)


def test_register_budgets_are_checked():
    def kernel_with(producer, consumer, warps=range(0, 4)):
        @A.kernel(threads=384)
        def k(x: A.Global(A.f32, "4")):
            with A.warp_role("producer", warps=warps, registers=producer):
                A.barrier()
            with A.warp_role("consumer", warps=range(4, 12), registers=consumer):
                A.barrier()

        return k

    kernel_with(40, 232).specialize()
    with pytest.raises(A.SpecError, match="register budgets need 70656"):
        kernel_with(40, 256).specialize()
    with pytest.raises(A.SpecError, match="multiple of 8"):
        kernel_with(44, 232).specialize()
    with pytest.raises(A.SpecError, match="split a warpgroup"):
        kernel_with(40, 232, warps=range(0, 2)).specialize()


def test_misuse_is_reported_at_the_users_line():
    @A.kernel(threads=128)
    def not_a_box(x: A.Global(A.f32, "64 64")):
        s = A.shared(A.f32, (64, 64))
        A.tma_load(x.tile((32, 32), (0, 0)), s.tile((32, 32), (0, 0)), A.mbarrier(1))

    with pytest.raises(A.SpecError, match="not the dense box") as err:
        not_a_box.specialize()
    assert err.value.position.line == _line(not_a_box, "A.tma_load(")

    @A.kernel(threads=128)
    def wide_swizzle(x: A.Global(A.f32, "64 64")):
        s = A.shared(A.f32, (64, 64), swizzle=SwizzleMode.B128.element_swizzle(4))
        A.tma_load(x.tile((64, 64), (0, 0)), s, A.mbarrier(1))

    with pytest.raises(A.SpecError, match="exceeds the 128-byte swizzle span"):
        wide_swizzle.specialize()

    @A.kernel(threads=128)
    def bad_named_barrier(x: A.Global(A.f32, "4")):
        A.named_barrier(1, 48)

    with pytest.raises(A.SpecError, match="multiple of 32"):
        bad_named_barrier.specialize()

    @A.kernel(threads=128)
    def wrong_direction(x: A.Global(A.f32, "64")):
        s = A.shared(A.f32, (64,))
        A.cp_async(s, x)

    with pytest.raises(A.SpecError, match="cp_async source: expected a global tensor"):
        wrong_direction.specialize()

    @A.kernel(threads=128)
    def with_other(x: A.Global(A.f32, "64")):
        with A.lane_id():
            pass

    with pytest.raises(A.SpecError, match="argus region") as err:
        with_other.specialize()
    assert err.value.position.line == _line(with_other, "with A.lane_id()")

    @A.kernel(threads=128)
    def unindexed_array(x: A.Global(A.f32, "64")):
        bars = A.mbarrier(1, stages=2)
        A.mbarrier_init(bars)
        A.wait(bars, phase=0)

    with pytest.raises(A.SpecError, match="bars\\[stage\\]"):
        unindexed_array.specialize()


def test_pipelined_range_yields_a_stage_handle():
    seen = {}

    @A.kernel(threads=64)
    def k(x: A.Global(A.f32, "M 32")):
        s = A.shared(A.f32, (2, 64, 32))
        for kt, st in A.range(3, x.shape[0] // 64, pipeline=2):
            seen["stage"] = st
            seen["kt"] = kt
            A.tma_load(x.tile((64, 32), (kt, 0)), s[st])

    k.specialize()
    st, kt = seen["stage"], seen["kt"]
    assert st.index == sympy.Mod(kt - 3, 2) and st.parity == sympy.Mod(st.round, 2)


def test_a_tma_load_needs_an_mbarrier_outside_pipelined_loops():
    @A.kernel(threads=64)
    def k(x: A.Global(A.f32, "64 32")):
        s = A.shared(A.f32, (64, 32))
        A.tma_load(x.tile((64, 32), (0, 0)), s)

    with pytest.raises(check.IRError, match=r"tma\.load without an mbarrier"):
        check.check(k.specialize())
