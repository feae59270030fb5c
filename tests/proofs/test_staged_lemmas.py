"""Every read resolved through a staged cp.async write (a guard on the stage loop's counter) has
its stage lemma stated for the stage that read sees — the tag assertion on a stage included —
and the lemmas hold for the double-buffered GEMM."""

from pathlib import Path

from argus.abstract_interp import generate_vcs
from argus.proofs import verify_kernel
from argus.proofs.cli_verify import load_kernels

ROOT = Path(__file__).resolve().parents[2]


def test_each_staged_read_has_its_lemma():
    kernel = load_kernels(ROOT / "examples" / "gemm_cp_async.py")[0].specialize()
    _, vcs = generate_vcs(kernel)
    needed = {key for vc in vcs for key in vc.lemmas if isinstance(key, tuple) and key[0] == "staged"}
    stated = {}
    for vc in vcs:
        key = vc.roles.get("lemma_key")
        if isinstance(key, tuple) and key[0] == "staged":
            stated.setdefault(key, []).append(vc)
    assert needed and needed <= set(stated)
    assert all(vc.unknown is None for group in stated.values() for vc in group)
    readers = {kernel_site for (_, _, kernel_site) in needed}
    assert len(readers) >= 2  # the MMA operand loads and the stage's tag assertion


def test_the_stage_lemmas_hold():
    kernel = load_kernels(ROOT / "examples" / "gemm_cp_async.py")[0].specialize()
    report = verify_kernel(kernel)
    lemmas = [r for r in report.results if isinstance(r.vc.roles.get("lemma_key"), tuple)
              and r.vc.roles["lemma_key"][0] == "staged"]
    assert lemmas and all(r.verdict == "proved" for r in lemmas)
