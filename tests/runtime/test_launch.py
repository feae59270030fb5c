"""Launch-time checks of arguments against what a kernel declares (host tensors, no GPU), and
a GPU test of the whole path where a device is present."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sympy import Eq

import argus.spec as A
from argus.runtime.launch import LaunchError, bind_arguments

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))


@A.kernel(threads=128, grid=lambda M, N: (A.cdiv(N, 64), A.cdiv(M, 64)),
          assume=lambda a, c, M, K: [Eq(K % 32, 0), A.aligned(a, 64), A.no_alias(a, c)])
def _declared(a: A.Global(A.bf16, "M K"), c: A.Global(A.f32, "M N")):
    pass


def _bind(*args, **kwargs):
    return bind_arguments(_declared.specialize(), args, kwargs, require_cuda=False)


def _a(m=64, k=64):
    return torch.zeros(m, k, dtype=torch.bfloat16)


def test_sizes_are_bound_from_shapes():
    bound = _bind(_a(64, 96), torch.zeros(64, 8))
    assert {str(s): v for s, v in bound.sizes.items()} == {"M": 64, "K": 96, "N": 8}


@pytest.mark.parametrize("args,message", [
    ((torch.zeros(64, 64), torch.zeros(64, 8)), "dtype"),
    ((_a(64, 64), torch.zeros(32, 8)), "size M"),
    ((_a(64, 48), torch.zeros(64, 8)), r"K % 32|Mod\(K, 32\)"),
    ((_a(64, 64).t(), torch.zeros(64, 8)), "stride"),
    ((_a(64, 64), torch.zeros(64, 8, 1)), "dimensions"),
])
def test_arguments_that_break_a_declaration_are_refused(args, message):
    with pytest.raises(LaunchError, match=message):
        _bind(*args)


def test_overlapping_tensors_are_refused():
    buffer = torch.zeros(64 * 64 * 2, dtype=torch.float32)
    a = buffer.view(torch.bfloat16)[: 64 * 64].view(64, 64)
    c = buffer[: 64 * 8].view(64, 8)
    with pytest.raises(LaunchError, match="overlap"):
        _bind(a, c)


def test_misaligned_base_is_refused():
    storage = torch.zeros(64 * 64 + 8, dtype=torch.bfloat16)
    a = storage[1:1 + 64 * 64].view(64, 64)
    with pytest.raises(LaunchError, match="aligned"):
        _bind(a, torch.zeros(64, 8))


@pytest.mark.gpu
def test_vector_add_runs_on_the_gpu_and_matches_torch(tmp_path, monkeypatch):
    import vector_add

    import argus

    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    kernel = argus.compile(vector_add.vector_add)
    for n in (1, 1000, 12345):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.full((n,), float("nan"), device="cuda")
        kernel(a, b, c, n)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b)
