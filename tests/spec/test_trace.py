"""Tracing kernels into IR: structure, positions, specialization, errors, uniformity."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest
import sympy

import argus.spec as A
from argus.ir import check
from argus.ir import nodes as N
from argus.ir.printer import print_kernel
from argus.ir.uniformity import Uniformity, analyze

sys.path.insert(0, str(Path(__file__).parent))
import kernels_for_tests as K

HERE = Path(K.__file__)


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def test_runtime_if_becomes_ir_if_and_static_if_disappears():
    k = K.branchy.specialize()
    ifs = [op for op in N.walk(k.body) if isinstance(op, N.If)]
    assert len(ifs) == 1
    (branch,) = ifs
    assert branch.cond == sympy.Lt(k.thread_id, 32)
    assert branch.then.ops and branch.orelse.ops
    assert branch.loc.line == _line(K.branchy, "if A.thread_id() < 32")
    # the static branch (SCALE > 1) added one more add outside any If
    top_level_adds = [op for op in k.body.ops if isinstance(op, N.Elementwise) and op.srcs[-1] == 0.5]
    assert len(top_level_adds) == 1
    check.check(k)


def test_static_branch_follows_the_const():
    k = K.branchy.specialize(SCALE=1)
    adds = [op for op in N.walk(k.body) if isinstance(op, N.Elementwise) and op.srcs[-1] == 0.5]
    assert adds == []


def test_register_rebinding_in_branch_is_written_back():
    k = K.branchy.specialize()
    (branch,) = [op for op in k.body.ops if isinstance(op, N.If)]
    # both arms end by storing their new value into the register the name held before the `if`
    loaded = next(op for op in k.body.ops if isinstance(op, N.Copy)).dst.buffer
    for arm in (branch.then, branch.orelse):
        last = arm.ops[-1]
        assert isinstance(last, N.Copy) and last.dst.buffer is loaded


def test_loop_carried_register_accumulator():
    k = K.summing.specialize(K=8)
    (loop,) = [op for op in k.body.ops if isinstance(op, N.For)]
    assert loop.stop == 8 and loop.step == 1
    acc = next(op for op in k.body.ops if isinstance(op, N.Alloc)).buffer
    assert isinstance(loop.body.ops[-1], N.Copy) and loop.body.ops[-1].dst.buffer is acc
    # the store after the loop reads the accumulator itself
    store = k.body.ops[-1]
    assert isinstance(store, N.Copy) and store.src.buffer is acc
    check.check(k)


def test_specializations_are_cached_and_distinct():
    assert K.summing.specialize(K=4) is K.summing.specialize(K=4)
    assert A.kernel_hash(K.summing.specialize(K=4)) != A.kernel_hash(K.summing.specialize(K=5))
    assert A.kernel_hash(K.summing.specialize(K=4)) == A.kernel_hash(K.summing.specialize())


def test_loop_carried_integer_is_rejected_with_position():
    with pytest.raises(A.SpecError, match="phase") as err:
        K.carried_integer.specialize()
    assert err.value.position.line == _line(K.carried_integer, "in A.range(4)")


def test_unsupported_construct_points_at_the_line():
    with pytest.raises(A.SpecError, match="while") as err:
        K.uses_while.specialize()
    assert err.value.position.file == str(HERE)
    assert err.value.position.line == _line(K.uses_while, "while True")


def test_shape_mismatch_is_an_argus_error():
    with pytest.raises(A.SpecError, match=r"shapes differ: \(2,\) vs \(4,\)") as err:
        K.shape_mismatch.specialize()
    assert err.value.position.line == _line(K.shape_mismatch, "c = a + b")


def test_unknown_const_and_direct_call():
    with pytest.raises(A.SpecError, match="no const parameter BOGUS"):
        K.summing.specialize(BOGUS=1)
    with pytest.raises(A.SpecError, match="cannot be called directly"):
        K.summing(None, None)


def test_divergent_barrier_is_malformed_but_warp_uniform_is_fine():
    with pytest.raises(check.IRError, match="divergent barrier"):
        check.check(K.divergent_barrier.specialize())
    check.check(K.warp_uniform_barrier.specialize())


def test_uniformity_classes():
    k = K.summing.specialize()
    info = analyze(k)
    tid = k.thread_id
    from argus import symbolic

    assert info.of(tid) is Uniformity.THREAD
    assert info.of(symbolic.floordiv(tid, 32)) is Uniformity.WARP
    assert info.of(symbolic.floordiv(tid + 64, 128)) is Uniformity.WARP
    assert info.of(symbolic.floordiv(tid + 1, 32)) is Uniformity.THREAD
    assert info.of(symbolic.mod(tid, 32)) is Uniformity.THREAD
    assert info.of(k.block_ids[0] * 4) is Uniformity.BLOCK
    (loop,) = [op for op in k.body.ops if isinstance(op, N.For)]
    assert info.symbols[loop.var] is Uniformity.BLOCK


def test_printer_is_stable_and_points_at_sources():
    text = print_kernel(K.summing.specialize(), root=str(HERE.parent))
    assert text == print_kernel(K.summing.specialize(), root=str(HERE.parent))
    assert "kernels_for_tests.py:" in text
    assert "for var=" in text or "for " in text
    assert text.splitlines()[0].startswith("kernel summing(")


@A.kernel(threads=64, grid=lambda: (1,))
def _shifted_rank(x: A.Global(A.f32, "N")):
    mask = 1 << A.thread_id()  # Python refuses: index values are symbolic
    A.store(x.tile((1,), (mask,)), x.tile((1,), (0,)))


def test_a_python_error_in_the_kernel_body_is_an_argus_error_at_its_line():
    with pytest.raises(A.SpecError, match="TypeError") as err:
        _shifted_rank.specialize()
    lines, first = inspect.getsourcelines(_shifted_rank.fn)
    line = first + next(i for i, text in enumerate(lines) if "1 << A.thread_id()" in text)
    assert err.value.position is not None and err.value.position.line == line
    assert "symbolic" in (err.value.hint or "")
