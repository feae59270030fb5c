"""argus doctor and the toolchain probes, run against the real tools of this machine.

CI installs the solvers, the pip NVIDIA toolchain and LLVM (scripts/setup.sh --dev), so those
probes must succeed here; the failure paths are exercised with real broken or absent tools.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from argus import doctor, toolchain
from argus.cli import main


def test_solver_probes_pass_self_tests():
    for probe in (toolchain.probe_z3(), toolchain.probe_cvc5()):
        assert probe.ok, probe.detail
        assert probe.version and probe.version[0].isdigit()
        assert "self-test passed" in probe.detail


def test_ptxas_found_with_sm90a_and_isa_version():
    probe = toolchain.probe_ptxas()
    assert probe.ok, probe.detail
    isa = probe.facts["highest_ptx_isa"]
    major, minor = map(int, isa.split("."))
    assert (major, minor) >= (8, 0), "sm_90a needs PTX ISA >= 8.0"
    path = Path(probe.facts["path"])
    # the reported ISA really is accepted, and the next candidate above it is not
    assert toolchain.ptxas_accepts(path, isa)
    newer = [c for c in toolchain.PTX_ISA_CANDIDATES if tuple(map(int, c.split("."))) > (major, minor)]
    if newer:
        assert not toolchain.ptxas_accepts(path, newer[-1])


def test_ptxas_rejects_a_wrong_target():
    path = toolchain.find_ptxas()
    assert path is not None
    assert not toolchain.ptxas_accepts(path, "8.0", target="sm_999")


def test_nvjitlink_links_sm90a():
    probe = toolchain.probe_nvjitlink()
    assert probe.ok, probe.detail
    cubin = toolchain.nvjitlink_link(toolchain._ptx_probe_source(probe.facts["highest_ptx_isa"]))
    assert cubin[:4] == b"\x7fELF"


def test_nvjitlink_reports_the_error_log():
    with pytest.raises(RuntimeError, match="nvJitLink"):
        toolchain.nvjitlink_link(".version 8.0\n.target sm_90a\n.address_size 64\nthis is not ptx\n")


def test_ptxas_missing_gives_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("ARGUS_PTXAS", str(tmp_path / "no-such-ptxas"))
    probe = toolchain.probe_ptxas()
    assert not probe.ok
    assert "does not exist" in probe.detail
    assert probe.fix == toolchain.INSTALL_NVIDIA


def test_ptxas_broken_binary_is_reported(monkeypatch, tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'segmentation fault' >&2\nexit 139\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("ARGUS_PTXAS", str(fake))
    probe = toolchain.probe_ptxas()
    assert not probe.ok
    assert "does not run" in probe.detail and "segmentation fault" in probe.detail


def test_amdgpu_assembler_builds_gfx942_code_object():
    probe = toolchain.probe_amdgpu_assembler()
    assert probe.ok, f"{probe.detail} (fix: {probe.fix})"
    tools = toolchain.find_amdgpu_tools()
    assert tools is not None and int(tools.version.split(".")[0]) >= 18


def test_amdgpu_assembler_missing_gives_apt_command(monkeypatch, tmp_path):
    monkeypatch.setattr(toolchain, "LLVM_VERSIONS", ())
    monkeypatch.setenv("ARGUS_LLVM_BIN", str(tmp_path))
    probe = toolchain.probe_amdgpu_assembler()
    assert not probe.ok
    assert probe.fix == "apt-get install -y llvm-19 lld-19"


def test_amdgpu_assembler_rejecting_gfx942_is_reported(monkeypatch, tmp_path):
    # LLVM 14 (Debian's default llvm) has no gfx942; emulate an assembler that rejects it
    for tool, script in (
        ("llvm-mc", "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'LLVM version 14.0.6'; exit 0; fi\n"
                    "echo \"error: unknown target CPU 'gfx942'\" >&2; exit 1\n"),
        ("ld.lld", "#!/bin/sh\nexit 0\n"),
    ):
        path = tmp_path / tool
        path.write_text(script)
        path.chmod(0o755)
    monkeypatch.setattr(toolchain, "LLVM_VERSIONS", ())
    monkeypatch.setenv("ARGUS_LLVM_BIN", str(tmp_path))
    probe = toolchain.probe_amdgpu_assembler()
    assert not probe.ok
    assert "gfx942" in probe.detail


def _has_driver() -> bool:
    return any(Path(p).exists() for p in ("/dev/nvidia0", "/dev/nvidiactl"))


def test_cuda_probe_never_raises_and_explains():
    probe = toolchain.cuda_device()
    if _has_driver():
        pytest.skip("this machine has an NVIDIA driver; covered by the gpu test")
    assert not probe.ok
    assert probe.detail  # says why: no driver library / no device


@pytest.mark.gpu
def test_cuda_probe_describes_device():
    probe = toolchain.cuda_device()
    assert probe.ok
    assert probe.facts["compute_capability"].count(".") == 1
    assert probe.facts["multiprocessors"] > 0


def test_gpu_end_to_end_probe_explains_a_missing_device():
    probe = toolchain.probe_gpu_end_to_end()
    if _has_driver():
        pytest.skip("this machine has an NVIDIA driver; covered by the gpu test")
    assert not probe.ok and "no CUDA device" in probe.detail


def test_gpu_end_to_end_kernel_assembles_here():
    # the probe's kernel itself is valid PTX for sm_90a (checked without a GPU)
    path = toolchain.find_ptxas()
    assert path is not None
    import subprocess as sp
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "e2e.ptx"
        src.write_text(toolchain._e2e_ptx("sm_90a"))
        result = sp.run([str(path), "-arch=sm_90a", str(src), "-o", str(Path(tmp) / "e2e.cubin")],
                        capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr


@pytest.mark.gpu
def test_gpu_end_to_end_launch():
    probe = toolchain.probe_gpu_end_to_end()
    assert probe.ok, probe.detail


def test_hip_probe_without_rocm_explains():
    probe = toolchain.probe_hip()
    if probe.ok:
        pytest.skip("an AMD GPU is present")
    assert probe.detail


def test_a_raising_probe_becomes_a_failed_probe():
    @toolchain._guarded("boom", "fix-it")
    def explode():
        raise OSError("disk on fire")

    probe = explode()
    assert not probe.ok and "disk on fire" in probe.detail and probe.fix == "fix-it"


def test_doctor_json_is_valid_and_complete(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [c["name"] for c in data["components"]]
    assert names == [name for name, _ in toolchain.ALL_PROBES]
    assert data["verification_ready"] is True
    for c in data["components"]:
        assert set(c) >= {"name", "ok", "version", "detail", "fix", "role"}
        if not c["ok"] and c["name"] in ("ptxas", "nvjitlink", "amdgpu-asm", "torch"):
            assert c["fix"], f"{c['name']} missing without an install command"


def test_doctor_table_lists_every_component(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for name, _ in toolchain.ALL_PROBES:
        assert name in out
    assert "verification: ready" in out


def test_doctor_exit_status_follows_the_solvers(monkeypatch, capsys):
    broken = toolchain.Probe("z3", False, detail="not importable", fix=toolchain.INSTALL_SOLVERS)
    monkeypatch.setattr(doctor, "collect", lambda: [broken, toolchain.probe_cvc5()])
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "NOT ready" in out and toolchain.INSTALL_SOLVERS in out


def test_console_script_version():
    exe = Path(sys.executable).with_name("argus")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "argus"]
    result = subprocess.run([*cmd, "--version"], capture_output=True, text=True, check=False,
                            env={**os.environ})
    assert result.returncode == 0
    from argus import __version__

    assert result.stdout.strip() == f"argus {__version__}"


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "doctor" in capsys.readouterr().out


def test_json_pipe_closed_early_is_not_a_traceback():
    result = subprocess.run(
        f"{sys.executable} -m argus doctor --json | head -c 10", shell=True,
        capture_output=True, text=True, check=False,
    )
    assert "Traceback" not in result.stderr
