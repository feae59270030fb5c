"""The verification gate of argus.compile / argus compile: no proof, no cubin.

A refuted kernel is refused with its counterexample; a proved kernel compiles and its record
satisfies later compiles without the solvers; a record of another specialization, or of a
refuted kernel, never lets a kernel through."""

from __future__ import annotations

import textwrap

import pytest

import argus
import argus.spec as A
from argus.cli import main
from argus.runtime import CompiledKernel, VerificationRequired
from argus.runtime.gate import find_record, require_proof
from argus.toolchain import find_ptxas

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")

BUGGY = textwrap.dedent('''
    import argus.spec as A

    @A.kernel(threads=128, grid=lambda n: (A.cdiv(n, 128),))
    def off_by_one(a: A.Global(A.f32, "n"), c: A.Global(A.f32, "n"), n: A.Index):
        A.tag(a, lambda i: (i,), "a")
        mine = (A.block_id(0),)
        x = A.load(a.tile((128,), mine).tile((1,), (A.thread_id(),)))
        out = c.tile((128,), mine).tile((1,), (A.thread_id(),))
        A.store(x, out)
        A.assert_tag(out, lambda j, t: t == (j + 1,), "c[j] holds a[j + 1]")  # wrong: it holds a[j]
''')


@A.kernel(threads=128, grid=lambda n: (A.cdiv(n, 128),))
def copy_kernel(a: A.Global(A.f32, "n"), c: A.Global(A.f32, "n"), n: A.Index, BLOCK: A.const = 128):
    A.tag(a, lambda i: (i,), "a")
    x = A.load(a.tile((128,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
    out = c.tile((128,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    A.store(x, out)
    A.assert_tag(out, lambda j, t: t == (j,), "c[j] holds a[j]")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ARGUS_PROOF_PATH", "")


def _buggy(tmp_path):
    path = tmp_path / "buggy.py"
    path.write_text(BUGGY)
    from argus.proofs.cli_verify import load_kernels

    return path, load_kernels(path)[0]


def _no_solvers(monkeypatch):
    import argus.proofs.verify as V

    def refuse(*args, **kwargs):
        raise AssertionError("the gate ran the verifier although a proof record matches")

    monkeypatch.setattr(V, "verify_kernel", refuse)


def test_a_refuted_kernel_is_refused_with_its_counterexample(tmp_path):
    _, kernel = _buggy(tmp_path)
    with pytest.raises(VerificationRequired) as refusal:
        argus.compile(kernel)
    assert refusal.value.report.verdict == "refuted"
    assert refusal.value.counterexamples
    assert "c[j] holds a[j + 1]" in str(refusal.value) or "tag" in str(refusal.value)
    # the refutation is not cached as a pass: asking again refuses again
    with pytest.raises(VerificationRequired):
        require_proof(kernel.specialize())


@needs_ptxas
def test_a_proved_kernel_compiles_and_its_record_satisfies_the_gate_without_solvers(monkeypatch):
    compiled = argus.compile(copy_kernel)
    assert isinstance(compiled, CompiledKernel) and compiled.proof.proved
    assert compiled.cubin.image[:4] == b"\x7fELF"
    record = find_record(copy_kernel.specialize())
    assert record is not None and record.proved
    _no_solvers(monkeypatch)
    again = argus.compile(copy_kernel)
    assert again.proof.kernel_hash == compiled.proof.kernel_hash
    assert again.cubin.cached


def test_a_record_of_another_specialization_is_ignored(monkeypatch):
    require_proof(copy_kernel.specialize())  # proves BLOCK=128 and saves its record
    other = copy_kernel.specialize(BLOCK=64)
    assert find_record(other) is None
    _no_solvers(monkeypatch)
    with pytest.raises(AssertionError, match="ran the verifier"):
        require_proof(other)


def test_a_refuted_record_refuses_without_running_the_verifier(tmp_path, monkeypatch):
    from argus.runtime.gate import save_record

    _, kernel = _buggy(tmp_path)
    specialized = kernel.specialize()
    with pytest.raises(VerificationRequired) as refusal:
        require_proof(specialized)
    save_record(specialized, refusal.value.record)
    _no_solvers(monkeypatch)
    with pytest.raises(VerificationRequired, match="refuted by its proof record"):
        require_proof(specialized)


def test_no_verification_here_means_no_compile(monkeypatch):
    with pytest.raises(VerificationRequired, match="no matching proof record"):
        require_proof(copy_kernel.specialize(BLOCK=32), verify=False)


def test_cli_compile_refuses_a_refuted_kernel(tmp_path, capsys):
    path, _ = _buggy(tmp_path)
    status = main(["compile", str(path), "--target", "sm_90a", "--emit", "ptx", "-o", str(tmp_path / "out.ptx")])
    assert status == 1
    assert "refused" in capsys.readouterr().err
    assert not (tmp_path / "out.ptx").exists()


@needs_ptxas
def test_cli_compile_writes_ptx_and_cubin_of_a_proved_kernel(tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
    assert main(["compile", str(example), "--emit", "ptx", "-o", str(tmp_path / "k.ptx")]) == 0
    assert ".entry vector_add(" in (tmp_path / "k.ptx").read_text()
    assert main(["compile", str(example), "--target", "sm_90a", "-o", str(tmp_path / "k.cubin")]) == 0
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"
