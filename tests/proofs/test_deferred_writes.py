"""A write a k-block loop makes once per tile (``if kc == 0``), read later in the same
iteration: the witness of the read is the write of the reader's own tile, or of the tile
before where the read comes first (a deferred store of the previous tile's values)."""

from __future__ import annotations

import argus.spec as A
from argus.proofs import verify_kernel


@A.kernel(threads=64, assume=lambda n, kt: [n >= 1, kt >= 1])
def deferred_rows(x: A.Global(A.f32, "n 64"), y: A.Global(A.f32, "n 64"), n: A.Index, kt: A.Index,
                  EARLY_READ: A.const = False):
    """Row ``j`` of x is stored to y one tile iteration late, in the first iteration of the
    inner loop, through a shared slot: held in registers across the tile loop, written to the
    slot, read back and stored.  ``EARLY_READ`` reads the slot before this tile's write: it
    sees the previous tile's (the row before), or nothing at ``j = 1``."""
    A.tag(x, lambda r, c: (r, c), "x")
    t = A.thread_id()
    s = A.shared(A.f32, (1, 64))
    held = A.load(x.tile((1, 1), (0, t)))
    for j in A.range(n):
        for kc in A.range(kt):
            if kc == 0:
                if j > 0:
                    slot = s.tile((1, 1), (0, t))
                    if EARLY_READ:
                        v = A.load(slot)
                    A.store(held, slot)
                    if not EARLY_READ:
                        v = A.load(slot)
                    out = y.tile((1, 1), (j - 1, t))
                    A.store(v, out)
                    A.assert_tag(out, lambda r, c, tg: tg == (r, c), "y[r, c] holds x[r, c]")
        held = A.load(x.tile((1, 1), (j, t)))
    last = y.tile((1, 1), (n - 1, t))
    A.store(held, last)
    A.assert_tag(last, lambda r, c, tg: tg == (r, c), "y[r, c] holds x[r, c]")


def test_a_write_in_the_first_k_block_read_after_it_is_the_tiles_own():
    report = verify_kernel(deferred_rows.specialize())
    assert report.verdict == "proved", report.human()
    assert any(r.vc.property == "tag" for r in report.results)


def test_a_read_before_the_first_k_blocks_write_sees_the_previous_tiles_and_is_refuted():
    report = verify_kernel(deferred_rows.specialize(EARLY_READ=True), minimize=False)
    assert report.verdict == "refuted", report.human()
    refuted = {r.vc.property for r in report.results if r.verdict == "refuted"}
    assert refuted & {"tag", "uninitialized"}, report.human()
