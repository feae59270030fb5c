"""Known zeros in the verifier: the zero fill of a TMA box's elements outside the tensor.

A TMA load writes, for each element of its box outside the source tensor, a zero that stands for
the tag the tensor's tag function gives that coordinate (the interpreter's rule).  The verifier
models the same: an MMA product with a known-zero factor contributes nothing (the pairing of k
only concerns elements that carry a record; a row or column that starts with a zero is zero
throughout, and an MMA all of whose products are zero leaves its accumulator as it was), and a
tag assertion checks a known zero against the tag it stands for.

The kernel is a one-warpgroup TMA/wgmma GEMM whose K need not be a multiple of the k-block: its
last k-block arrives partly zero-filled.  Planted bugs (a k-block loaded from the wrong
coordinate, a stage asserted to hold another tile) are refuted with counterexamples the
interpreter reproduces."""

import numpy as np
import pytest
from proof_support import source_line
from sympy import Eq

import argus.spec as A
from argus.layout_algebra.hopper import SwizzleMode
from argus.proofs import verify_kernel

ATOM = "wgmma.m64n64k16.bf16"
SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)


@A.kernel(threads=128, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)),
          assume=lambda K: [Eq(K % 8, 0), K >= 1])
def gemm_k_tail(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
                BM: A.const = 64, BN: A.const = 64, BK: A.const = 64, STAGES: A.const = 2, BUG: A.const = ""):
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    bm, bn = A.block_id(1), A.block_id(0)
    K = a.shape[1]
    nk = K // BK if BUG == "floor_k" else A.cdiv(K, BK)  # floor: the partial k-block is never loaded
    sa = A.shared(A.bf16, (STAGES, BM, BK), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (STAGES, BN, BK), swizzle=SWIZZLE_128B)
    acc = A.mma_fragment(ATOM, "c")
    for kt, st in A.range(nk, pipeline=STAGES):
        A.tma_load(a.tile((BM, BK), (bm, kt)), sa[st])
        if BUG == "b_next_block":  # B's box from the next k-block: k no longer pairs up
            A.tma_load(b.tile((BN, BK), (bn, kt + 1)), sb[st])
        else:
            A.tma_load(b.tile((BN, BK), (bn, kt)), sb[st])
        # the whole stage, zero-filled edges included: a known zero stands for its coordinate's tag
        if BUG == "wrong_row_tile":
            A.assert_tag(sa[st], lambda s, i, k, tg, kt=kt: tg == ((bm + 1) * BM + i, kt * BK + k), "A's stage")
        else:
            A.assert_tag(sa[st], lambda s, i, k, tg, kt=kt: tg == (bm * BM + i, kt * BK + k), "A's stage")
        A.assert_tag(sb[st], lambda s, j, k, tg, kt=kt: tg == (bn * BN + j, kt * BK + k), "B's stage")
        for ks in A.range(BK // 16, unroll=True):
            A.mma(ATOM, sa[st].tile((BM, 16), (0, ks)), sb[st].tile((BN, 16), (0, ks)), acc)
        A.wgmma_commit()
        A.wgmma_wait(0)
    mine = A.mma_partition(ATOM, "c", c.tile((BM, BN), (bm, bn)))
    A.store(acc, mine)
    A.assert_tag(mine, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")


def _report(**consts):
    return verify_kernel(gemm_k_tail.specialize(**consts))


def _not_proved(report, properties):
    return [(r.vc.id, r.verdict, r.reason) for r in report.results
            if r.vc.property in properties and r.verdict != "proved"]


def test_a_partial_last_k_block_pairs_k_and_keeps_the_result_tags():
    """K = 72 (say): the second k-block holds 8 real columns and 56 zero-filled ones; the
    pairing of k, the row records, the accumulator and C's tags are proved for every K."""
    report = _report()
    assert not _not_proved(report, {"tag", "mma-operands", "uninitialized", "async", "phase", "race"}), \
        report.human()


def test_the_kernel_runs_with_a_partial_k_block_in_the_interpreter():
    from argus.ir.interpreter import Interpreter

    rng = np.random.default_rng(0)
    m, n, k = 96, 80, 72
    a = rng.integers(-3, 4, (m, k)).astype(np.float32)
    b = rng.integers(-3, 4, (n, k)).astype(np.float32)
    out = Interpreter(gemm_k_tail.specialize()).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)},
                                                  {"M": m, "N": n, "K": k})
    np.testing.assert_array_equal(out["c"], a @ b.T)


def _refuted(report, prop, marker):
    found = [c for c in report.counterexamples if c.property == prop]
    assert found, report.human()
    line = source_line(gemm_k_tail, marker)
    replayed = [c for c in found if c.replay.status == "reproduced" and c.position.line == line]
    assert replayed, [c.human() for c in found]
    return replayed[0]


def test_b_loaded_from_the_next_k_block_is_refuted():
    """B's stage holds k-block kt + 1 (zero-filled past K): refuted at B's stage assertion and
    at the MMA's k pairing (the interpreter stops at the first)."""
    report = _report(BUG="b_next_block")
    assert report.verdict == "refuted", report.human()
    cx = _refuted(report, "tag", "A.assert_tag(sb[st]")
    assert cx.replay.violation["kind"] == "tag"
    mma_line = source_line(gemm_k_tail, "A.mma(ATOM, sa[st]")
    assert any(r.verdict == "refuted" and r.vc.property == "tag" and r.vc.position.line == mma_line
               for r in report.results), report.human()


def test_a_loop_that_skips_the_partial_k_block_is_refuted():
    """``K // BK`` k-blocks: the sum misses the last ``K % BK`` k (coverage at the store)."""
    report = _report(BUG="floor_k")
    assert report.verdict == "refuted", report.human()
    cx = _refuted(report, "coverage", "A.store(acc, mine)")
    assert cx.replay.violation["kind"] == "coverage"


@pytest.mark.slow
def test_a_stage_asserted_to_hold_the_next_tile_row_is_refuted():
    report = _report(BUG="wrong_row_tile")
    assert report.verdict == "refuted", report.human()
    cx = _refuted(report, "tag", 'A.assert_tag(sa[st], lambda s, i, k, tg, kt=kt: tg == ((bm + 1)')
    assert cx.replay.violation["kind"] == "tag"


def test_the_known_zero_encoding_is_the_interpreters():
    """Length ``-2 - n`` for a zero standing for an n-field record, ``-2`` for none."""
    from argus.abstract_interp import tags as TG
    from argus.ir.interpreter import _KNOWN_ZERO, known_zero_tags
    from argus.smt import terms as T
    from argus.smt.evaluate import evaluate

    zero = TG.TagValue.known_zero([7, 100])
    assert TG.KNOWN_ZERO == _KNOWN_ZERO
    assert int(known_zero_tags(np.array([evaluate(zero.length, {})]))[1][0]) == 2
    assert evaluate(zero.length, {}) == -4 and evaluate(zero.stands_for, {}) == 2
    assert evaluate(zero.zero, {}) and not evaluate(zero.tagged, {})
    assert evaluate(TG.TagValue.known_zero(None).stands_for, {}) == TG.UNTAGGED
    assert not evaluate(T.ge(zero.length, 1), {})  # no k: it pairs with nothing


# --------------------------------------------------------------------------- a load's zero fill


@A.kernel(threads=128, grid=lambda n, BLOCK: (A.cdiv(n, BLOCK),), assume=lambda n: [n >= 1])
def narrow_add(a: A.Global(A.f32, "n"), c: A.Global(A.f32, "n"), n: A.Index, BLOCK: A.const = 64,
               SHIFT: A.const = 0):
    """128 threads over ``BLOCK``-element tiles: with BLOCK = 64, threads 64.. address past their
    tile, so their loads read zeros (the zero fill of ``load``) and their stores are skipped."""
    A.tag(a, lambda i: (i,), "a")
    i = A.block_id(0) * BLOCK + A.thread_id()
    x = A.load(a.tile((BLOCK,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
    if i < n:  # a zero past the tile stands for the tag of the element it replaced
        A.assert_tag(x, lambda j, t: t == (i + SHIFT,), "x stands for a[i]")
    out = c.tile((BLOCK,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    A.store(x + x, out)
    A.assert_tag(out, lambda j, t: t == (j,), "c[j] comes from a[j]")


def test_a_loads_zero_fill_stands_for_the_source_tags_as_in_the_interpreter():
    """The verifier once took the zero fill for untagged data and refuted this kernel with a
    counterexample (thread 64, n = 65) that the interpreter, which writes known zeros, could
    not reproduce."""
    from argus.ir.interpreter import Interpreter

    report = verify_kernel(narrow_add.specialize())
    assert report.verdict == "proved", report.human()
    a = np.arange(1, 66, dtype=np.float32)
    out = Interpreter(narrow_add.specialize()).run({"a": a, "c": np.full(65, np.nan, np.float32)}, {"n": 65})
    np.testing.assert_array_equal(out["c"], 2 * a)


def test_a_zero_fill_asserted_to_stand_for_another_element_is_refuted():
    report = verify_kernel(narrow_add.specialize(SHIFT=1))
    assert report.verdict == "refuted", report.human()
    line = source_line(narrow_add, "A.assert_tag(x,")
    found = [c for c in report.counterexamples if c.property == "tag" and c.position.line == line]
    assert found and found[0].replay.status == "reproduced", report.human()
