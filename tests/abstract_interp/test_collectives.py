"""Collectives and atomics in the verifier, checked against the reference interpreter's own
functions (source lanes, the reduction tag rule) and on small kernels."""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import argus.spec as A
from argus.abstract_interp import collectives as C
from argus.abstract_interp import generate_vcs
from argus.abstract_interp import tags as TG
from argus.ir import interp_mma
from argus.ir.interpreter import MAX_TAG_FIELDS
from argus.proofs import verify_kernel
from argus.smt import terms as T
from argus.smt.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import row_softmax as RS  # noqa: E402


@pytest.mark.parametrize("mode", ["idx", "xor", "up", "down"])
def test_shuffle_source_lanes_are_the_interpreters(mode):
    lane_var = T.int_var("lane", 0, 63)
    operand_var = T.int_var("operand", 0, 127)
    for width in (1, 2, 4, 8, 16, 32, 64):
        group = max(width, 32)
        lanes = np.arange(group)
        for operand in (0, 1, 2, 3, 5, 8, 16, 31, 33, 64, 100):
            expected = interp_mma._shuffle_source(mode, lanes, np.full(group, operand), width)
            constant = C.shuffle_source(mode, lane_var, T.int_const(operand), width)
            symbolic = C.shuffle_source(mode, lane_var, operand_var, width)
            for lane in range(group):
                model = {"lane": lane, "operand": operand}
                assert evaluate(constant, model) == expected[lane], (mode, width, operand, lane)
                assert evaluate(symbolic, model) == expected[lane], (mode, width, operand, lane)


@pytest.mark.parametrize("masks", [(1,), (8, 4, 2, 1), (16, 8, 4, 2, 1), (1, 4), (2, 16), (32, 1)])
def test_butterfly_groups_are_the_xor_closures(masks):
    class Holder:
        pass

    analysis = Holder()
    tid = T.int_var("tid", 0, 127)
    span = {sum(c) for r in range(len(masks) + 1) for c in itertools.combinations(masks, r)}
    for value in range(128):
        base = C.butterfly_base(analysis, tid, masks)
        lanes = [evaluate(lane, {"tid": value}) for lane in C.butterfly_lanes(analysis, base, masks)]
        assert sorted(lanes) == sorted(value ^ x for x in span)
    # a lane enumerated from a base maps back to the same base term (one group, computed once)
    base = C.butterfly_base(analysis, tid, masks)
    for lane in C.butterfly_lanes(analysis, base, masks):
        assert C.butterfly_base(analysis, lane, masks) is base


def _tag_terms(record):
    if record is None:
        return TG.BOTTOM
    return TG.TagValue.record([T.int_const(v) for v in record])


def _interpreter_rule(records):
    fields = np.zeros((1, 1, len(records), MAX_TAG_FIELDS), np.int64)
    counts = np.zeros((1, 1, len(records)), np.int64)
    for i, r in enumerate(records):
        if r is None:
            counts[0, 0, i] = interp_mma._UNTAGGED
        else:
            counts[0, 0, i] = len(r)
            fields[0, 0, i, :len(r)] = r
    out_fields, out_counts = interp_mma._common_fields(fields, counts)
    n = int(out_counts[0, 0])
    return None if n < 0 else tuple(int(v) for v in out_fields[0, 0, :n])


def test_reduction_tag_rule_is_the_interpreters():
    rng = np.random.default_rng(7)
    choices = [None, (), (0,), (1,), (0, 1), (0, 2), (1, 1), (0, 1, 2), (3, 1, 2), (0, 5, 2)]
    for _ in range(400):
        records = [choices[i] for i in rng.integers(0, len(choices), rng.integers(1, 5))]
        tag = C.common_fields([_tag_terms(r) for r in records])
        length = evaluate(tag.length, {})
        got = None if length < 0 else tuple(evaluate(f, {}) for f in tag.fields[:length])
        assert got == _interpreter_rule(records), records


def test_row_softmax_reductions_are_collectives_proved_by_uniformity():
    _, vcs = generate_vcs(RS.row_softmax.specialize())
    collective = [vc for vc in vcs if vc.property == "collective"]
    assert len(collective) == 2 and all(vc.structural for vc in collective)
    assert not [vc for vc in vcs if vc.unknown or vc.approximations]


@A.kernel(threads=64)
def shared_histogram(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "8"), BARRIER: A.const = True):
    """Threads t and t + 8, t + 16 ... add into bin t % 8 of a shared histogram; BARRIER=False
    reads the bins while other threads may still be adding."""
    t = A.thread_id()
    s = A.shared(A.f32, (8,))
    if t < 8:
        A.store(A.zeros((1,), A.f32), s.tile((1,), (t,)))
    A.barrier()
    A.atomic_add(s.tile((1,), (t % 8,)), A.load(x.tile((1,), (t,))))
    if BARRIER:
        A.barrier()
    if t < 8:
        A.store(A.load(s.tile((1,), (t,))), y.tile((1,), (t,)))


def test_atomics_commute_but_race_with_plain_accesses():
    proved = verify_kernel(shared_histogram.specialize())
    assert proved.verdict == "proved", proved.human()
    refuted = verify_kernel(shared_histogram.specialize(BARRIER=False))
    cx = next(c for c in refuted.counterexamples if c.property == "race")
    assert {cx.op, cx.other["op"]} == {"Atomic", "Copy"}, cx.human()
    assert cx.replay.status == "reproduced", cx.human()


def test_reads_of_atomically_accumulated_data_are_approximations():
    _, vcs = generate_vcs(shared_histogram.specialize())
    reads = [vc for vc in vcs if vc.property == "uninitialized" and vc.roles.get("buffer") == "smem0"
             and any("atomic add" in a for a in vc.approximations)]
    assert reads, [vc.describe() for vc in vcs if vc.property == "uninitialized"]
