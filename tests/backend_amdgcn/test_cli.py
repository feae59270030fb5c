"""``argus compile FILE --target gfx942`` and ``argus.compile(..., target="gfx942")``: the
verification gate applies; a proved kernel is written as a linked code object or as assembly."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import argus
from argus.backend_amdgcn.assemble import read_metadata
from argus.backend_amdgcn.launch import Gfx942Kernel
from argus.cli import main
from argus.proofs.cli_verify import load_kernels
from argus.runtime import VerificationRequired
from argus.toolchain import find_amdgpu_tools

pytestmark = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BUGGY = textwrap.dedent('''
    import argus.spec as A

    @A.kernel(threads=64, grid=lambda n: (A.cdiv(n, 64),))
    def shifted(a: A.Global(A.f32, "n"), c: A.Global(A.f32, "n"), n: A.Index):
        A.tag(a, lambda i: (i,), "a")
        x = A.load(a.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
        out = c.tile((64,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
        A.store(x, out)
        A.assert_tag(out, lambda j, t: t == (j + 1,), "c[j] holds a[j + 1]")  # wrong: it holds a[j]
''')


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ARGUS_PROOF_PATH", "")


def test_compile_writes_a_code_object_and_assembly(tmp_path, capsys):
    hsaco, asm = tmp_path / "out.hsaco", tmp_path / "out.s"
    assert main(["compile", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "-o", str(hsaco)]) == 0
    assert "vector_add (gfx942): wrote" in capsys.readouterr().out
    entry = read_metadata(hsaco.read_bytes())["amdhsa.kernels"][0]
    assert entry[".name"] == "vector_add" and [a[".name"] for a in entry[".args"]] == ["a", "b", "c", "n"]
    # the proof record cached by the first compile satisfies the gate now
    assert main(["compile", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--emit", "asm",
                 "--policy", "accumulators='vgpr'", "-o", str(asm)]) == 0
    text = asm.read_text()
    assert ".amdhsa_code_object_version 5" in text and "global_load_dword" in text and "kernel hash" in text


def test_compile_refuses_a_kernel_that_is_not_proved(tmp_path, capsys):
    path = tmp_path / "buggy.py"
    path.write_text(BUGGY)
    out = tmp_path / "out.hsaco"
    assert main(["compile", str(path), "--target", "gfx942", "-o", str(out)]) == 1
    assert "refused" in capsys.readouterr().err and not out.exists()
    with pytest.raises(VerificationRequired):
        argus.compile(load_kernels(path)[0], target="gfx942")


def test_emit_kinds_are_checked_per_target(tmp_path, capsys):
    code = main(["compile", str(EXAMPLES / "vector_add.py"), "--target", "gfx942", "--emit", "ptx",
                 "-o", str(tmp_path / "x")])
    assert code == 2 and "not a gfx942 output" in capsys.readouterr().err


def test_runtime_compile_returns_a_gfx942_kernel():
    (k,) = load_kernels(EXAMPLES / "vector_add.py")
    compiled = argus.compile(k, target="gfx942")
    assert isinstance(compiled, Gfx942Kernel) and compiled.proof.proved
    assert compiled.hsaco[:4] == b"\x7fELF" and compiled.grid({sym: 1000 for sym in compiled.kernel.launch.grid[0].free_symbols}) == (8, 1, 1)
