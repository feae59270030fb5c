"""The distinct queries of a kernel solved on two forked provers at once give the verdicts, the
query hashes and the counterexamples that one prover gives."""

import transpose_swizzled as TS
import verifier_kernels as V

import argus.proofs.verify as verify
from argus.proofs import SequentialProver, verify_kernel


def _run(kernel, parallel, monkeypatch, prover):
    monkeypatch.setattr(verify, "PARALLEL", parallel)
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 2)
    report = verify_kernel(kernel, prover=prover)
    entries = {(e.id, e.hash, e.verdict) for e in report.record.vcs}
    return report, entries


def test_two_provers_answer_as_one(monkeypatch):
    prover = SequentialProver()
    try:
        for kernel in (TS.transpose.specialize(), V.grid_stride_copy.specialize(STRIDE=192)):
            one, expected = _run(kernel, 1, monkeypatch, prover)
            two, got = _run(kernel, 2, monkeypatch, prover)
            assert got == expected and two.verdict == one.verdict
            assert [c.vc for c in two.counterexamples] == [c.vc for c in one.counterexamples]
            assert {r.hash for r in two.results if r.seconds > 0} == {r.hash for r in one.results if r.seconds > 0}
        assert two.verdict == "refuted" and two.counterexamples  # the overlapping grid-stride tiles
    finally:
        prover.close()
