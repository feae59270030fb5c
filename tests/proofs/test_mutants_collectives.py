"""Mutants of kernels with warp collectives and atomics (row softmax and smaller relatives):
each planted bug is refuted with a counterexample that replays on the reference interpreter,
and each correct variant is proved.  The detection table is printed by ``-s``."""

import pytest
import row_softmax as RS
from proof_support import assert_mutation_refuted

import argus.spec as A

BUTTERFLY = (8, 4, 2, 1)


@A.kernel(threads=64)
def guarded_warp_sum(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "64"), LIMIT: A.const = 64,
                     WIDE: A.const = False):
    """A warp sum under ``thread_id() < LIMIT``: 64 and 32 keep whole warps together, 8 splits
    warp 0 (a reduction under a divergent branch).  WIDE adds mask 32: the butterfly then
    sums both warps, and the result no longer depends on one warp only."""
    A.tag(x, lambda i: (i // 32,), "warp")
    t = A.thread_id()
    v = A.load(x.tile((1,), (t,)))
    if t < LIMIT:
        s = A.reduce(v, "add", across_lanes=(32, 16, 8, 4, 2, 1) if WIDE else (16, 8, 4, 2, 1))
        out = y.tile((1,), (t,))
        A.store(s, out)
        A.assert_tag(out, lambda i, tg: tg == (i // 32,), "y[i] sums warp i // 32 only")


@A.kernel(threads=64)
def warp_rotate(x: A.Global(A.f32, "64"), y: A.Global(A.f32, "64"), MODE: A.const = "idx"):
    """``y[t] = x[t + 1]`` rotated inside each warp: ``idx`` names lane ``(lane + 1) % 32``;
    ``down`` by 1 asks lane 31 for lane 32, outside the warp, and it keeps its own value."""
    A.tag(x, lambda i: (i,), "x")
    t = A.thread_id()
    v = A.load(x.tile((1,), (t,)))
    source = (A.lane_id() + 1) % 32 if MODE == "idx" else 1
    w = A.shuffle(v, source, MODE)
    out = y.tile((1,), (t,))
    A.store(w, out)
    A.assert_tag(out, lambda i, tg: tg == (32 * (i // 32) + (i % 32 + 1) % 32,), "y[i] holds the next lane's x")


@A.kernel(threads=128, grid=lambda R: (A.cdiv(R, 8),), assume=lambda R: [A.divisible(R, 8)])
def staged_softmax(x: A.Global(A.f32, "R 64"), y: A.Global(A.f32, "R 64"), BARRIER: A.const = True,
                   PREDICATED: A.const = True):
    """Row softmax whose rows arrive through shared memory in another thread distribution
    (thread t stages row t % 8, columns 4*(t // 8) ..); BARRIER=False drops the barrier between
    staging and reading, PREDICATED=False stores one row too far through a raw row index (no
    tail predicate).  Its tags are checked on ``row_softmax``; here races and bounds."""
    A.tag(x, lambda i, j: (i,), "row")
    s = A.shared(A.f32, (8, 64))
    t = A.thread_id()
    A.copy(x.tile((8, 64), (A.block_id(0), 0)).tile((1, 4), (t % 8, t // 8)), s.tile((1, 4), (t % 8, t // 8)))
    if BARRIER:
        A.barrier()
    row = A.block_id(0) * 8 + t // 16
    v = A.load(s.tile((1, 4), (t // 16, t % 16)))
    m = A.reduce(v, "max", across_lanes=BUTTERFLY)
    e = A.exp2((v - A.broadcast(m, (1, 4))) * RS.LOG2E)
    total = A.reduce(e, "add", across_lanes=BUTTERFLY)
    result = e / A.broadcast(total, (1, 4))
    if PREDICATED:
        A.store(result, y.tile((1, 4), (row, t % 16)))
    else:
        out = y[row + 8].tile((4,), (t % 16,))
        A.copy(result[0], out)


@A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),), assume=lambda n: [n >= 1])
def column_sums(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "64"), n: A.Index, ATOMIC: A.const = True):
    """Every block adds its 64 elements into y (y[t] += x[64 b + t]): blocks write the same
    elements, which only a commutative atomic makes well defined."""
    t = A.thread_id()
    v = A.load(x.tile((64,), (A.block_id(0),)).tile((1,), (t,)))
    out = y.tile((1,), (t,))
    if ATOMIC:
        A.atomic_add(out, v)
    else:
        A.store(v, out)


# (name, kernel, correct consts, mutant consts, property, interpreter kind, marker of the line);
# correct consts None: the correct kernel's proof is its record in proofs/ (tests/proofs/test_records.py)
MUTATIONS = [
    ("rows mixed by the butterfly (row_softmax)", RS.row_softmax, None, {"MIX_ROWS": True}, "tag", "tag",
     "A.assert_tag(out"),
    ("warps mixed by the butterfly", guarded_warp_sum, {}, {"WIDE": True}, "tag", "tag", "A.assert_tag(out"),
    ("reduction under a divergent branch", guarded_warp_sum, {"LIMIT": 32}, {"LIMIT": 8}, "collective",
     "collective", 's = A.reduce(v, "add"'),
    ("shuffle from an out-of-range lane", warp_rotate, {"MODE": "idx"}, {"MODE": "down"}, "tag", "tag",
     "A.assert_tag(out"),
    ("dropped barrier (softmax)", staged_softmax, {}, {"BARRIER": False}, "race", "race",
     "v = A.load(s.tile("),
    ("tail store without predicate (softmax)", staged_softmax, {}, {"PREDICATED": False}, "in-bounds",
     "out-of-bounds", "A.copy(result[0], out)"),
    ("overlapping writes by two blocks (not atomic)", column_sums, {}, {"ATOMIC": False}, "write-conflict",
     "write-conflict", "A.store(v, out)"),
]


@pytest.mark.parametrize("name, kernel, good, bad, prop, kind, marker", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_is_refuted_and_the_original_proved(name, kernel, good, bad, prop, kind, marker):
    assert_mutation_refuted(name, kernel, good, bad, prop, kind, marker, same_thread=False)
