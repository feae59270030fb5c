"""Coverage mutants: a k-block skipped or counted twice in the GEMM examples keeps every tag
right (``c[i, j]`` still carries ``(i, j)``), so only the ``coverage`` property can refute
it; each is refuted with a counterexample the reference interpreter reproduces (a missing k
at the store, a k twice at the MMA), and the correct kernels' coverage VCs are proved."""

import gemm_cp_async
import gemm_mfma
import gemm_mma_sync
import pytest
from async_kernels_support import discharge
from coverage_kernels import k_loop, partial_rows, split_k
from proof_support import source_line

from argus.abstract_interp import coverage
from argus.abstract_interp import properties as P
from argus.abstract_interp.analysis import Analysis
from argus.proofs import verify_kernel


def verify_coverage(kernel):
    """The kernel's ``coverage`` VCs only, discharged, judged and explained (minimized
    counterexamples replayed on the interpreter) as ``verify_kernel`` does."""
    analysis = Analysis(kernel)
    builder = P._Builder(analysis)
    for site in analysis.program.sites:
        if site.index not in analysis.unsupported:
            coverage.coverage(builder, site)
    return discharge(kernel, analysis, builder.vcs)


def _refuted(results):
    found = [r.counterexample for r in results if r.verdict == "refuted" and r.counterexample is not None
             and r.counterexample.replay.status == "reproduced"]
    assert found, [(r.vc.id, r.verdict, r.reason) for r in results if r.verdict != "proved"]
    return found[0]


EXAMPLES = {"gemm_mma_sync": (gemm_mma_sync.gemm, "A.mma(ATOM, fa, fb, acc[mi, ni])", "A.store(acc[mi, ni]"),
            "gemm_mfma": (gemm_mfma.gemm_mfma, "A.mma(ATOM, fa, fb, acc)", "A.store(acc, "),
            "gemm_cp_async": (gemm_cp_async.gemm_cp_async, "A.mma(ATOM, fa, fb, acc[mi, ni])", "A.store(acc[mi, ni]")}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n == "gemm_cp_async" else [])
                                  for n in sorted(EXAMPLES)])
def test_the_examples_cover_each_k_once(name):
    kernel, _, _ = EXAMPLES[name]
    results = verify_coverage(kernel.specialize())
    assert {"no k reaches", "lies in the reduction domain", "leaves its MMA chain"} <= {
        key for r in results for key in ("no k reaches", "lies in the reduction domain", "leaves its MMA chain")
        if key in r.vc.message}
    assert all(r.verdict == "proved" for r in results), [(r.vc.id, r.verdict, r.reason) for r in results]


# (example, bug, the line the VC names, what the interpreter says)
MUTANTS = [("gemm_mma_sync", "skip", 2, "k 32..63 never reached"),
           ("gemm_mma_sync", "repeat", 1, "k = 0 reaches this accumulator element a second time"),
           ("gemm_mfma", "skip", 2, "k 32..63 never reached"),
           ("gemm_mfma", "repeat", 1, "k = 0 reaches this accumulator element a second time"),
           ("gemm_cp_async", "skip", 2, "k 32..63 never reached"),
           ("gemm_cp_async", "repeat", 1, "k = 0 reaches this accumulator element a second time")]


def _mutant(m):
    slow = m[0] == "gemm_cp_async"  # in slow runs only: the default run keeps the module under its budget
    return pytest.param(*m, id=f"{m[0]}-{m[1]}", marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("name, bug, marker, said", [_mutant(m) for m in MUTANTS])
def test_a_k_block_skipped_or_repeated_is_refuted_and_replayed(name, bug, marker, said):
    kernel, *markers = EXAMPLES[name]
    cx = _refuted(verify_coverage(kernel.specialize(KBLOCK_BUG=bug)))
    line = source_line(kernel, markers[marker - 1])
    assert cx.property == "coverage" and cx.position.line == line, cx.human()
    assert cx.replay.violation["kind"] == "coverage" and said in cx.replay.violation["message"], cx.human()
    assert cx.replay.thread_matches and cx.block == (0, 0, 0), cx.human()
    assert cx.sizes["K"] == (64 if bug == "skip" else 32), cx.human()  # the smallest K the bug shows at
    print(f"\n{name} KBLOCK_BUG={bug:<8} coverage  refuted  replayed: {cx.replay.detail}")


@pytest.mark.slow
def test_only_coverage_refutes_a_skipped_k_block():
    """Every other property (tags included) is proved for the mutant: coverage is the only
    one that sees it."""
    report = verify_kernel(gemm_mfma.gemm_mfma.specialize(KBLOCK_BUG="skip"))
    assert report.verdict == "refuted"
    assert {r.vc.property for r in report.results if r.verdict != "proved"} == {"coverage"}, report.human()
    assert any(r.vc.property == "tag" and r.verdict == "proved" for r in report.results)


@pytest.mark.slow
@pytest.mark.parametrize("name, bug", [("gemm_mma_sync", "skip"), ("gemm_mma_sync", "repeat"),
                                       ("gemm_mfma", "repeat")])
def test_only_coverage_refutes_the_other_mutants(name, bug):
    report = verify_kernel(EXAMPLES[name][0].specialize(KBLOCK_BUG=bug))
    assert report.verdict == "refuted"
    assert {r.vc.property for r in report.results if r.verdict != "proved"} == {"coverage"}, report.human()


# --------------------------------------------------------------------------- one warp over K


def test_a_skipped_half_of_k_is_refuted_and_replayed():
    assert all(r.verdict == "proved" for r in verify_coverage(k_loop.specialize()))
    cx = _refuted(verify_coverage(k_loop.specialize(STEPS="half")))
    assert cx.position.line == source_line(k_loop, "A.store(acc, A.mma_partition")
    assert "k 16..31 never reached" in cx.replay.violation["message"] and cx.sizes["K"] == 32


def test_rows_past_m_do_not_hide_a_skipped_half():
    """Zero-filled rows past M (known zeros) are proved covered; a skipped half of K is refuted
    at the store that moves the whole accumulator to shared memory, and replayed."""
    assert all(r.verdict == "proved" for r in verify_coverage(partial_rows.specialize()))
    cx = _refuted(verify_coverage(partial_rows.specialize(STEPS="half")))
    assert cx.position.line == source_line(partial_rows, "A.store(acc, A.mma_partition(ATOM, \"c\", staged))")
    assert "never reached" in cx.replay.violation["message"]


def test_without_a_derivable_domain_only_duplicates_are_stated():
    results = verify_coverage(k_loop.specialize(COMPUTED_A=True))
    assert results and all("no k reaches" in r.vc.message and r.verdict == "proved" for r in results)
    cx = _refuted(verify_coverage(k_loop.specialize(COMPUTED_A=True, STEPS="twice")))
    assert cx.position.line == source_line(k_loop, "A.mma(ATOM, fa, fb, acc)")


@pytest.mark.parametrize("kernel", [k_loop.specialize(RESCALE=True), split_k.specialize()],
                         ids=["rescaled", "split-k"])
def test_partial_sums_moved_between_registers_are_unknown_not_proved(kernel):
    results = verify_coverage(kernel)
    assert results and all(r.verdict == "unknown" for r in results)
    assert all("moved" in r.reason and "not modelled" in r.reason for r in results), [r.reason for r in results]
