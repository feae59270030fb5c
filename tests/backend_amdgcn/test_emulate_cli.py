"""``argus run``: fresh random inputs, the kernel in the gfx942 emulator (or on a CUDA GPU), the
reference interpreter on the same inputs, and the comparison; the gate; clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus.cli import main
from argus.toolchain import find_amdgpu_tools

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
needs_llvm = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942")


@needs_llvm
def test_run_vector_add_in_the_emulator(capsys):
    rc = main(["run", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--emulate", "--sizes", "n=777",
               "--seed", "4"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "vector_add on gfx942 (emulated); sizes n=777; seed 4" in out
    assert "emulated 7 workgroup(s)" in out
    assert "c: max abs err 0.000e+00, max rel err 0.000e+00: bit-exact" in out
    assert out.rstrip().endswith("argus run: PASS")


def _refuse(kernel, *args, **kwargs):
    from argus.runtime.gate import VerificationRequired

    raise VerificationRequired(f"{kernel.name} is not proved (verdict unknown); it will not be compiled")


@needs_llvm
def test_the_gate_refuses_an_unproved_kernel(capsys, monkeypatch):
    # the gate's answer is stubbed: what is tested is that argus run honours a refusal
    monkeypatch.setattr("argus.runtime.gate.require_proof", _refuse)
    rc = main(["run", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--emulate", "--sizes", "n=64"])
    captured = capsys.readouterr()
    assert rc == 1
    assert "argus run: refused: vector_add is not proved" in captured.err and "--unproved" in captured.err
    assert "max abs err" not in captured.out


@needs_llvm
def test_unproved_runs_in_the_emulator_without_the_gate(capsys, monkeypatch):
    # gemm_mfma is not proved yet (the verifier answers unknown); --unproved skips the gate
    monkeypatch.setattr("argus.runtime.gate.require_proof", _refuse)
    rc = main(["run", str(EXAMPLES / "gemm_mfma.py"), "--target", "gfx942", "--emulate", "--sizes", "M=64", "N=64",
               "K=64", "--consts", "BN=64", "--unproved"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "gate skipped (--unproved)" in out and "c: max abs err" in out and out.rstrip().endswith("PASS")


def test_unproved_is_for_the_emulator_only(capsys):
    assert main(["run", str(EXAMPLES / "vector_add.py"), "--sizes", "n=10", "--unproved"]) == 2
    assert "--unproved only applies to the emulator" in capsys.readouterr().err


def test_emulate_needs_gfx942(capsys):
    assert main(["run", str(EXAMPLES / "vector_add.py"), "--emulate", "--sizes", "n=10"]) == 2
    assert "--emulate runs gfx942 code" in capsys.readouterr().err


def test_gfx942_without_emulate_is_a_clear_error(capsys):
    assert main(["run", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--sizes", "n=10"]) == 2
    assert "use --emulate" in capsys.readouterr().err


def test_sm_90a_without_a_gpu_is_a_clear_error(capsys):
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA GPU is present")
    except ImportError:
        pass
    assert main(["run", str(EXAMPLES / "vector_add.py"), "--sizes", "n=10"]) == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU" in err or "needs torch" in err


@needs_llvm
def test_missing_size_names_the_parameter(capsys):
    assert main(["run", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--emulate"]) == 2
    err = capsys.readouterr().err
    assert "index parameter n needs a value" in err and "--sizes n=128" in err


def test_bad_size_value(capsys):
    assert main(["run", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--emulate", "--sizes", "n=x"]) == 2
    assert "'x' is not a number" in capsys.readouterr().err
