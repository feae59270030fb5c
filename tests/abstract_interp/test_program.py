"""Sites: static order, unrolling, paths, symbolic loops and barrier epochs."""

import numpy as np
import sympy

import argus.spec as A
from argus.abstract_interp import program as P
from argus.abstract_interp.program import build_program, common_loops, may_precede
from argus.ir import nodes as N
from argus.ir.interpreter import Interpreter


@A.kernel(threads=64)
def loops_and_barriers(x: A.Global(A.f32, "n"), n: A.Index):
    s = A.shared(A.f32, (64,))
    for r in A.range(3, unroll=True):
        A.copy(x.tile((1,), (r,)), s.tile((1,), (A.thread_id(),)))
        A.barrier()
    for k in A.range(n):
        A.copy(x.tile((1,), (k,)), s.tile((1,), (A.thread_id(),)))
        A.barrier()
        if A.thread_id() < 8:
            A.copy(s.tile((1,), (A.thread_id(),)), s.tile((1,), (A.thread_id() + 8,)))
        A.barrier()
    A.barrier()


@A.kernel(threads=32)
def barrier_count_varies(x: A.Global(A.f32, "n"), n: A.Index):
    for k in A.range(n):
        if k % 2 == 0:  # not a linear inequality of k: no closed form for the count
            A.barrier()


@A.kernel(threads=32)
def barrier_count_linear(x: A.Global(A.f32, "n"), n: A.Index):
    for k in A.range(n):
        if k < 3:  # a linear inequality: the barriers before an iteration counted in closed form
            A.barrier()


def _sites(kernel, kind):
    return [s for s in build_program(kernel).sites if isinstance(s.op, kind)]


def test_small_constant_loops_unroll_into_sites_of_their_own():
    k = loops_and_barriers.specialize()
    copies = _sites(k, N.Copy)
    assert [dict(s.subst) for s in copies[:3]] == [{}, {}, {}]  # unrolled at trace time already
    program = build_program(k, unroll_limit=16)
    assert all(not s.loops for s in program.sites[:6])


def test_symbolic_loop_sites_carry_the_loop_and_its_range():
    k = loops_and_barriers.specialize()
    program = build_program(k)
    inner = [s for s in program.sites if s.loops]
    assert inner and all(s.loops[0] is inner[0].loops[0] for s in inner)
    loop = inner[0].loops[0]
    assert any(c.what == "loop" for c in inner[0].conditions)
    guarded = [s for s in inner if any(c.what == "then" for c in s.conditions)]
    assert len(guarded) == 1 and isinstance(guarded[0].op, N.Copy)
    assert common_loops(inner[0], inner[-1]) == (loop,)
    assert may_precede(inner[-1], inner[0])  # a later op of the body precedes in the next iteration


def test_epochs_count_barriers_across_iterations():
    k = loops_and_barriers.specialize()
    program = build_program(k)
    barriers = [s for s in program.sites if isinstance(s.op, N.Barrier)]
    var = barriers[3].loops[0].var
    assert [s.epoch for s in barriers[:3]] == [0, 1, 2]
    # inside the loop: 3 barriers before it, 2 per iteration
    assert sympy.simplify(barriers[3].epoch - (3 + 2 * var)) == 0
    assert sympy.simplify(barriers[4].epoch - (4 + 2 * var)) == 0
    last = barriers[-1]
    n = next(s for s in last.epoch.free_symbols)
    assert last.epoch.subs(n, 5) == 3 + 2 * 5


def test_last_epoch_counts_the_barriers_of_every_iteration():
    """The kernel runs on the interpreter (every barrier reached by all threads) and the epoch
    of the final barrier is 3 unrolled + 2 per iteration."""
    k = loops_and_barriers.specialize()
    program = build_program(k)
    last = [s for s in program.sites if isinstance(s.op, N.Barrier)][-1]
    for size in (1, 4):
        Interpreter(k).run({"x": np.ones(size, np.float32)}, {"n": size})
        n = next(iter(last.epoch.free_symbols))
        assert last.epoch.subs(n, size) == 3 + 2 * size


def test_loop_whose_barrier_count_changes_is_unsupported():
    program = build_program(barrier_count_varies.specialize())
    assert program.unsupported and "barriers" in program.unsupported[0][1]
    assert not program.sites
    linear = build_program(barrier_count_linear.specialize())
    assert not linear.unsupported and linear.sites


@A.kernel(threads=32)
def barrier_on_one_iteration(x: A.Global(A.f32, "n"), n: A.Index, m: A.Index):
    for j in A.range(m):
        for k in A.range(n):
            if k == 0:  # one iteration of each inner loop, and only after the first outer one
                if j > 0:
                    A.barrier()
        A.barrier()


def test_a_barrier_on_one_iteration_is_counted():
    """``if k == 0`` (with a count that depends on the outer counter only) passes its barriers on
    one iteration: the epochs are exact, and the interpreter reaches every barrier."""
    kernel = barrier_on_one_iteration.specialize()
    program = build_program(kernel)
    assert not program.unsupported
    inner, outer = [s for s in program.sites if isinstance(s.op, N.Barrier)]
    j, k = (lp.var for lp in inner.loops)
    for jv, before in ((0, 0), (1, 1), (2, 3), (3, 5)):
        # outer iteration j starts after j outer barriers and j - 1 inner ones (none in iteration 0)
        assert int(inner.epoch.subs({j: jv, k: 0})) == before
    assert int(outer.epoch.subs({j: 2})) == 2 + 1 + 1  # two outer, iteration 1's inner and its own inner
    n = sympy.Symbol("n", integer=True, positive=True)
    assert P.barriers_before(sympy.Piecewise((1, sympy.Eq(k, n - 1)), (0, True)), k, 0, 1, n).subs(n, 4) == 1
    assert P.barriers_before(sympy.Piecewise((1, sympy.Eq(k, 7)), (0, True)), k, 0, 1, n).subs(n, 4) == 0
    Interpreter(kernel).run({"x": np.ones(4, np.float32)}, {"n": 4, "m": 3})
