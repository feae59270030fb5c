"""The verifier's MMA rules on one atom tile: k-agreement at the MMA, the result's record from
its operands, and the accumulator rule — proved for correct kernels, refuted (with a replayed
counterexample) or left unknown where the operands do not pair up."""

import sys
from pathlib import Path

import pytest

for folder in ("ir", "proofs"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / folder))
import mma_kernels as K  # noqa: E402
from proof_support import source_line  # noqa: E402

from argus.abstract_interp.analysis import Analysis, apart, residue  # noqa: E402
from argus.abstract_interp.mma import _layouts  # noqa: E402
from argus.ir.atoms import mma_atom  # noqa: E402
from argus.proofs import verify_kernel  # noqa: E402
from argus.smt import terms as T  # noqa: E402

ATOMS = ["mma.sync.m16n8k16.bf16", "v_mfma_f32_16x16x16_bf16"]


@pytest.mark.parametrize("atom", ["mma.sync.m16n8k16.bf16", "v_mfma_f32_32x32x8_bf16", "wgmma.m64n8k16.bf16"])
@pytest.mark.parametrize("which", ["a", "b", "c"])
def test_fragment_layout_and_its_inverse_agree_with_the_atom(atom, which):
    import sympy

    from argus.abstract_interp.mma import _T, _V, _X

    spec = mma_atom(atom)
    layout = spec.layouts.operand(which)
    if layout is None:
        pytest.skip("operand read from shared memory")
    forward, (t_of, v_of) = _layouts(atom, which)
    for t in range(spec.threads):
        for v in range(spec.values_per_thread(which)):
            offset = int(layout(t, v))
            assert int(forward.xreplace({_T: t, _V: v})) == offset
            assert (int(sympy.sympify(t_of).xreplace({_X: offset})),
                    int(sympy.sympify(v_of).xreplace({_X: offset}))) == (t, v)


@pytest.mark.parametrize("atom", ATOMS)
def test_one_tile_is_proved(atom):
    report = verify_kernel(K.one_tile(atom).specialize())
    assert report.verdict == "proved", report.human()
    assert any(r.vc.property == "mma-operands" for r in report.results)


@pytest.mark.parametrize("atom", ATOMS)
def test_operands_that_disagree_on_k_are_refuted_at_the_mma(atom):
    kernel = K.one_tile(atom, WRONG_K=True)
    report = verify_kernel(kernel.specialize())
    assert report.verdict == "refuted", report.human()
    cx = next(c for c in report.counterexamples if c.property == "tag")
    assert cx.position.line == source_line(kernel, "A.mma(spec, fa, fb, acc)"), cx.human()
    assert cx.replay.status == "reproduced", cx.human()
    assert cx.replay.violation["kind"] == "tag"


def test_rows_of_mixed_records_are_not_proved():
    report = verify_kernel(K.one_tile(ATOMS[0], MIXED_ROWS=True).specialize())
    assert report.verdict != "proved", report.human()
    assert any(r.vc.property == "mma-operands" and r.verdict != "proved" for r in report.results), report.human()


def test_residues_separate_interleaved_fragments():
    c0, c1 = T.int_var("c0", 0, 1), T.int_var("c1", 0, 1)
    base = T.add(T.mul(8, c0), T.mul(16, c1))
    assert residue(base) == (8, 0)
    assert residue(T.add(base, 2)) == (8, 2)
    assert apart(residue(base), residue(T.add(base, 2)))
    assert not apart(residue(base), residue(T.add(base, 8)))
    assert not apart(residue(T.floormod(c0, 3)), residue(base))  # unknown residue: never apart
    assert apart((0, 3), (0, 4)) and not apart((0, 3), (0, 3))


def test_the_accumulator_of_a_loop_is_resolved_without_unfolding_it():
    """gemm_mma_sync: every read of the accumulator resolves to MMA records (no havoc, no
    'needs an invariant' approximation), and the interleaved fragments prune to their own MMAs."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gemm_mma_sync_example", root / "examples" / "gemm_mma_sync.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    analysis = Analysis(module.gemm.specialize())
    from argus.abstract_interp import properties as P

    vcs = P.generate(analysis)
    tags = [vc for vc in vcs if vc.property == "tag"]
    assert tags and not any(vc.approximations for vc in tags), [vc.approximations for vc in tags][:3]
