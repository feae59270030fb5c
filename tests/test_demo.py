"""The main job: ``argus demo`` runs every step this machine can do and says so."""

from __future__ import annotations

from argus.cli import main


def test_demo_verifies_refutes_interprets_and_compiles(capsys):
    code = main(["demo"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "vector_add [BLOCK=128]: proved" in out
    assert "transpose [SWIZZLED=True]: proved" in out
    assert "transpose_race: refuted" in out and "replay: reproduced" in out
    assert out.count("matches numpy exactly") == 2
    assert "vector_add.py -> sm_90a:" in out  # CI installs ptxas
    assert "vector_add.py -> gfx942:" in out  # and LLVM 19
    assert "demo: every step this machine can run succeeded" in out
