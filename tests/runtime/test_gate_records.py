"""The gate finds the records `argus verify --records` writes, and without solvers refuses an
unrecorded kernel with an argus error (never a traceback from a missing solver)."""

import importlib.util
from pathlib import Path

import pytest

import argus.spec as A
from argus.runtime.gate import VerificationRequired, find_record, require_proof
from argus.spec.kernel import Kernel

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"gate_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(v for v in vars(module).values() if isinstance(v, Kernel))


def test_records_named_by_consts_are_found():
    record = find_record(_example("vector_add").specialize())
    assert record is not None and record.proved and record.kernel == "vector_add"


@A.kernel(threads=32)
def unrecorded(x: A.Global(A.f32, "32"), y: A.Global(A.f32, "32")):
    A.copy(x.tile((1,), (A.thread_id(),)), y.tile((1,), (A.thread_id(),)))


def test_without_solvers_an_unrecorded_kernel_is_refused_with_a_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("ARGUS_PROOF_PATH", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("z3", "cvc5") else real(name, *a))
    with pytest.raises(VerificationRequired) as refusal:
        require_proof(unrecorded.specialize())
    assert "verifier cannot run here" in str(refusal.value)
    assert "z3" in str(refusal.value)
