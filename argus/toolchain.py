"""Locate and probe the external tools argus needs: solvers, PTX assemblers, AMDGPU tools, drivers.

Every probe runs the real tool on a tiny input (a one-query self-test, a one-instruction
kernel) and returns a :class:`Probe`; no probe raises.  Missing or broken pieces carry the
exact command that installs them.  The backends use the ``find_*`` functions to pick their
tools, so what ``argus doctor`` reports is what a compile will use.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALL_NVIDIA = "pip install 'argus-kernels[nvidia]'"
INSTALL_AMD_TOOLS = "apt-get install -y llvm-19 lld-19"
INSTALL_HIP = "pip install 'argus-kernels[amd]' (needs a ROCm installation)"
INSTALL_TORCH = "pip install 'argus-kernels[torch]'"
INSTALL_SOLVERS = "pip install 'z3-solver>=4.15.4' 'cvc5>=1.4.2'"

# Newest first; the probes walk this list until a tool accepts a version.
PTX_ISA_CANDIDATES = tuple(
    f"{major}.{minor}" for major in (9, 8, 7) for minor in range(9, -1, -1)
)

LLVM_VERSIONS = (22, 21, 20, 19, 18)


@dataclass(frozen=True)
class Probe:
    """What one probe found.

    ``ok`` is True when the piece works; ``detail`` says what was found or why not;
    ``fix`` is the command that installs or repairs it (None when nothing is missing).
    """

    name: str
    ok: bool
    version: str | None = None
    detail: str = ""
    fix: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "version": self.version,
            "detail": self.detail,
            "fix": self.fix,
            "facts": self.facts,
        }


def _guarded(name: str, fix: str | None) -> Callable[[Callable[[], Probe]], Callable[[], Probe]]:
    """Turn any exception escaping a probe into a failed Probe (a probe never raises)."""

    def wrap(fn: Callable[[], Probe]) -> Callable[[], Probe]:
        def run() -> Probe:
            try:
                return fn()
            except Exception as err:
                return Probe(name, False, detail=f"probe failed: {type(err).__name__}: {err}", fix=fix)

        run.__name__ = fn.__name__
        run.__doc__ = fn.__doc__
        return run

    return wrap


def _run(cmd: list[str], *, timeout: float = 30.0, input_text: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, input=input_text, check=False
    )


# --------------------------------------------------------------------------- solvers


@_guarded("z3", INSTALL_SOLVERS)
def probe_z3() -> Probe:
    """Import Z3 and decide one sat and one unsat integer query."""
    try:
        import z3
    except ImportError as err:
        return Probe("z3", False, detail=f"not importable: {err}", fix=INSTALL_SOLVERS)
    x = z3.Int("x")
    solver = z3.Solver()
    solver.add(x > 2, x < 4)
    if solver.check() != z3.sat or solver.model()[x].as_long() != 3:
        return Probe("z3", False, z3.get_version_string(), "self-test: wrong model", INSTALL_SOLVERS)
    solver.add(x * 2 == 7)
    if solver.check() != z3.unsat:
        return Probe("z3", False, z3.get_version_string(), "self-test: 2x=7 not unsat", INSTALL_SOLVERS)
    return Probe("z3", True, z3.get_version_string(), "self-test passed (sat model x=3, unsat 2x=7)")


@_guarded("cvc5", INSTALL_SOLVERS)
def probe_cvc5() -> Probe:
    """Import cvc5 (base API with TermManager) and decide one sat and one unsat query."""
    try:
        import cvc5
    except ImportError as err:
        return Probe("cvc5", False, detail=f"not importable: {err}", fix=INSTALL_SOLVERS)
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("produce-models", "true")
    solver.setLogic("QF_LIA")
    int_sort = tm.getIntegerSort()
    x = tm.mkConst(int_sort, "x")
    solver.assertFormula(tm.mkTerm(cvc5.Kind.GT, x, tm.mkInteger(2)))
    solver.assertFormula(tm.mkTerm(cvc5.Kind.LT, x, tm.mkInteger(4)))
    version = cvc5.__version__
    if not solver.checkSat().isSat() or solver.getValue(x).getIntegerValue() != 3:
        return Probe("cvc5", False, version, "self-test: wrong model", INSTALL_SOLVERS)
    two_x = tm.mkTerm(cvc5.Kind.MULT, tm.mkInteger(2), x)
    solver.assertFormula(tm.mkTerm(cvc5.Kind.EQUAL, two_x, tm.mkInteger(7)))
    if not solver.checkSat().isUnsat():
        return Probe("cvc5", False, version, "self-test: 2x=7 not unsat", INSTALL_SOLVERS)
    return Probe("cvc5", True, version, "self-test passed (sat model x=3, unsat 2x=7)")


# --------------------------------------------------------------------------- NVIDIA


def _ptx_probe_source(isa: str, target: str = "sm_90a") -> str:
    return (
        f".version {isa}\n.target {target}\n.address_size 64\n"
        ".visible .entry argus_probe()\n{\n  ret;\n}\n"
    )


def _pip_nvidia_bin(tool: str) -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in spec.submodule_search_locations:
        for sub in ("cu13", "cu12", "cuda_nvcc"):
            candidate = Path(root) / sub / "bin" / tool
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found.append(candidate)
    return found


def ptxas_candidates() -> list[Path]:
    """ptxas binaries in order of preference: $ARGUS_PTXAS, pip's nvidia-cuda-nvcc, PATH, CUDA_HOME."""
    env = os.environ.get("ARGUS_PTXAS")
    if env:
        return [Path(env)] if Path(env).is_file() else []
    out: list[Path] = list(_pip_nvidia_bin("ptxas"))
    on_path = shutil.which("ptxas")
    if on_path:
        out.append(Path(on_path))
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    out.append(Path(cuda_home) / "bin" / "ptxas")
    unique: list[Path] = []
    for p in out:
        if p.is_file() and p.resolve() not in [u.resolve() for u in unique]:
            unique.append(p)
    return unique


def find_ptxas() -> Path | None:
    """The ptxas a compile uses, or None."""
    candidates = ptxas_candidates()
    return candidates[0] if candidates else None


def ptxas_accepts(ptxas: Path, isa: str, target: str = "sm_90a") -> bool:
    """Does this ptxas assemble a trivial kernel written for PTX ISA ``isa`` and ``target``?"""
    with tempfile.TemporaryDirectory(prefix="argus-ptxas-") as tmp:
        src = Path(tmp) / "probe.ptx"
        src.write_text(_ptx_probe_source(isa, target))
        result = _run([str(ptxas), f"-arch={target}", str(src), "-o", str(Path(tmp) / "probe.cubin")])
        return result.returncode == 0


@_guarded("ptxas", INSTALL_NVIDIA)
def probe_ptxas() -> Probe:
    """Find ptxas, read its version, and find the newest PTX ISA it assembles for sm_90a."""
    env = os.environ.get("ARGUS_PTXAS")
    ptxas = find_ptxas()
    if ptxas is None:
        where = f"$ARGUS_PTXAS={env} does not exist" if env else "not found (pip, PATH, CUDA_HOME)"
        return Probe("ptxas", False, detail=where, fix=INSTALL_NVIDIA)
    result = _run([str(ptxas), "--version"])
    match = re.search(r"release (\d+\.\d+), V([\d.]+)", result.stdout)
    if result.returncode != 0 or not match:
        return Probe(
            "ptxas", False, detail=f"{ptxas} does not run: {result.stderr.strip()[:200]}",
            fix=INSTALL_NVIDIA,
        )
    version = match.group(2)
    highest = next((isa for isa in PTX_ISA_CANDIDATES if ptxas_accepts(ptxas, isa)), None)
    if highest is None:
        return Probe("ptxas", False, version, f"{ptxas} assembles no sm_90a kernel", INSTALL_NVIDIA)
    return Probe(
        "ptxas", True, version, f"{ptxas}; sm_90a up to PTX ISA {highest}",
        facts={"path": str(ptxas), "highest_ptx_isa": highest, "cuda_release": match.group(1)},
    )


def nvjitlink_link(ptx: str, arch: str = "sm_90a") -> bytes:
    """Link one PTX module to a cubin with nvJitLink; raises RuntimeError with the error log."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "argus.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as err:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise RuntimeError(f"nvJitLink: {err}: {bytes(log).decode(errors='replace').strip()}") from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)


@_guarded("nvjitlink", INSTALL_NVIDIA)
def probe_nvjitlink() -> Probe:
    """Load nvJitLink through cuda-bindings and find the newest PTX ISA it links for sm_90a."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError as err:
        return Probe("nvjitlink", False, detail=f"cuda-bindings not importable: {err}", fix=INSTALL_NVIDIA)
    try:
        major, minor = nvjitlink.version()
    except Exception as err:
        return Probe("nvjitlink", False, detail=f"libnvJitLink not loadable: {err}", fix=INSTALL_NVIDIA)
    highest = None
    for isa in PTX_ISA_CANDIDATES:
        try:
            nvjitlink_link(_ptx_probe_source(isa))
        except RuntimeError:
            continue
        highest = isa
        break
    if highest is None:
        return Probe("nvjitlink", False, f"{major}.{minor}", "links no sm_90a kernel", INSTALL_NVIDIA)
    return Probe(
        "nvjitlink", True, f"{major}.{minor}", f"sm_90a up to PTX ISA {highest}",
        facts={"highest_ptx_isa": highest},
    )


@_guarded("cuda", INSTALL_NVIDIA)
def cuda_device() -> Probe:
    """Initialise the CUDA driver and describe device 0, or say why there is none.

    ``cuda.bindings.driver.cuInit`` raises (rather than returns an error) when no driver
    library exists; both paths become a failed Probe.
    """
    try:
        from cuda.bindings import driver
    except ImportError as err:
        return Probe("cuda", False, detail=f"cuda-bindings not importable: {err}", fix=INSTALL_NVIDIA)
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:
        return Probe("cuda", False, detail=f"no NVIDIA driver: {type(exc).__name__}: {exc}")
    if err != driver.CUresult.CUDA_SUCCESS:
        return Probe("cuda", False, detail=f"cuInit failed: {err.name}")
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return Probe("cuda", False, detail="driver present, no CUDA device")
    err, version = driver.cuDriverGetVersion()
    err, dev = driver.cuDeviceGet(0)
    err, raw_name = driver.cuDeviceGetName(128, dev)
    name = raw_name.split(b"\0", 1)[0].decode()
    attr = driver.CUdevice_attribute
    err, cc_major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    err, cc_minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    err, sms = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
    driver_version = f"{version // 1000}.{(version % 1000) // 10}"
    facts: dict[str, Any] = {
        "devices": count,
        "name": name,
        "compute_capability": f"{cc_major}.{cc_minor}",
        "multiprocessors": sms,
        "driver_cuda_version": driver_version,
    }
    jit_isa = _driver_highest_ptx_isa(driver, dev, f"sm_{cc_major}{cc_minor}")
    if jit_isa:
        facts["driver_highest_ptx_isa"] = jit_isa
    detail = f"{count} device(s); device 0: {name}, sm_{cc_major}{cc_minor}, {sms} SMs"
    if jit_isa:
        detail += f"; driver JITs PTX ISA up to {jit_isa}"
    return Probe("cuda", True, driver_version, detail, facts=facts)


def _driver_highest_ptx_isa(driver: Any, dev: Any, target: str) -> str | None:
    """The newest PTX ISA the driver's JIT loads, found by loading trivial modules."""
    err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    try:
        driver.cuCtxSetCurrent(ctx)
        for isa in PTX_ISA_CANDIDATES:
            image = _ptx_probe_source(isa, target).encode() + b"\0"
            err, module = driver.cuModuleLoadData(image)
            if err == driver.CUresult.CUDA_SUCCESS:
                driver.cuModuleUnload(module)
                return isa
        return None
    finally:
        driver.cuDevicePrimaryCtxRelease(dev)


E2E_THREADS = 64


def _e2e_ptx(target: str) -> str:
    """A one-instruction-per-thread kernel: ``out[tid] = 3 * tid + 1``."""
    return (
        f".version 8.0\n.target {target}\n.address_size 64\n"
        ".visible .entry argus_e2e(.param .u64 out)\n{\n"
        "  .reg .b32 %r<3>;\n  .reg .b64 %rd<4>;\n"
        "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd2, %rd1;\n"
        "  mov.u32 %r1, %tid.x;\n  mad.lo.s32 %r2, %r1, 3, 1;\n"
        "  mul.wide.u32 %rd3, %r1, 4;\n  add.s64 %rd3, %rd2, %rd3;\n"
        "  st.global.u32 [%rd3], %r2;\n  ret;\n}\n"
    )


@_guarded("gpu-e2e", INSTALL_NVIDIA)
def probe_gpu_end_to_end() -> Probe:
    """The whole NVIDIA path on device 0: PTX → cubin (ptxas, else nvJitLink) → load → launch
    → copy back → check ``out[t] == 3t + 1`` for every thread."""
    import ctypes

    import numpy as np

    device = cuda_device()
    if not device.ok:
        return Probe("gpu-e2e", False, detail=f"no CUDA device ({device.detail})")
    from cuda.bindings import driver

    target = "sm_" + device.facts["compute_capability"].replace(".", "")
    ptx = _e2e_ptx(target)
    ptxas = find_ptxas()
    if ptxas is not None:
        with tempfile.TemporaryDirectory(prefix="argus-e2e-") as tmp:
            src, out = Path(tmp) / "e2e.ptx", Path(tmp) / "e2e.cubin"
            src.write_text(ptx)
            result = _run([str(ptxas), f"-arch={target}", str(src), "-o", str(out)])
            if result.returncode != 0:
                return Probe("gpu-e2e", False, detail=f"ptxas failed: {result.stderr.strip()[:200]}",
                             fix=INSTALL_NVIDIA)
            image, builder = out.read_bytes(), f"ptxas {ptxas}"
    else:
        image, builder = nvjitlink_link(ptx, target), "nvJitLink"

    def check(result: Any, what: str) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what} failed: {err.name}")
        return rest[0] if len(rest) == 1 else rest

    dev = check(driver.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    try:
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        module = check(driver.cuModuleLoadData(image), "cuModuleLoadData")
        try:
            function = check(driver.cuModuleGetFunction(module, b"argus_e2e"), "cuModuleGetFunction")
            nbytes = 4 * E2E_THREADS
            memory = check(driver.cuMemAlloc(nbytes), "cuMemAlloc")
            try:
                argument = ctypes.c_uint64(int(memory))
                params = (ctypes.c_void_p * 1)(ctypes.addressof(argument))
                check(driver.cuLaunchKernel(function, 1, 1, 1, E2E_THREADS, 1, 1, 0, 0,
                                            ctypes.addressof(params), 0), "cuLaunchKernel")
                check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
                host = np.zeros(E2E_THREADS, np.int32)
                check(driver.cuMemcpyDtoH(host.ctypes.data, memory, nbytes), "cuMemcpyDtoH")
            finally:
                driver.cuMemFree(memory)
        finally:
            driver.cuModuleUnload(module)
    finally:
        driver.cuDevicePrimaryCtxRelease(dev)
    expected = 3 * np.arange(E2E_THREADS, dtype=np.int32) + 1
    if not np.array_equal(host, expected):
        bad = int(np.flatnonzero(host != expected)[0])
        return Probe("gpu-e2e", False, detail=f"wrong result: out[{bad}] = {host[bad]}, expected {expected[bad]}")
    return Probe("gpu-e2e", True, detail=f"{target} kernel built with {builder}, launched on "
                 f"{device.facts['name']}, {E2E_THREADS} threads checked", facts={"target": target})


# --------------------------------------------------------------------------- AMD


@dataclass(frozen=True)
class AmdgpuTools:
    """LLVM tools that assemble and link gfx942 code objects."""

    llvm_mc: Path
    ld_lld: Path
    objdump: Path | None
    readobj: Path | None
    version: str


def _llvm_dirs() -> list[Path]:
    dirs = []
    env = os.environ.get("ARGUS_LLVM_BIN")
    if env:
        dirs.append(Path(env))
    dirs.extend(Path(f"/usr/lib/llvm-{v}/bin") for v in LLVM_VERSIONS)
    return dirs


def find_amdgpu_tools() -> AmdgpuTools | None:
    """The newest LLVM install (>= 18, gfx942-capable) with llvm-mc and ld.lld, or None."""
    for directory in _llvm_dirs():
        mc, lld = directory / "llvm-mc", directory / "ld.lld"
        if mc.is_file() and lld.is_file():
            result = _run([str(mc), "--version"])
            match = re.search(r"LLVM version ([\d.]+)", result.stdout)
            if result.returncode == 0 and match:
                objdump, readobj = directory / "llvm-objdump", directory / "llvm-readobj"
                return AmdgpuTools(
                    mc, lld, objdump if objdump.is_file() else None,
                    readobj if readobj.is_file() else None, match.group(1),
                )
    return None


GFX942_PROBE_ASM = """\
.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
.amdhsa_code_object_version 5
.text
.globl argus_probe
.p2align 8
.type argus_probe,@function
argus_probe:
  v_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15]
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel argus_probe
  .amdhsa_next_free_vgpr 4
  .amdhsa_next_free_sgpr 8
  .amdhsa_accum_offset 4
.end_amdhsa_kernel
"""


@_guarded("amdgpu-asm", INSTALL_AMD_TOOLS)
def probe_amdgpu_assembler() -> Probe:
    """Assemble and link a one-MFMA gfx942 kernel into an HSA code object."""
    tools = find_amdgpu_tools()
    if tools is None:
        searched = ", ".join(str(d) for d in _llvm_dirs())
        return Probe(
            "amdgpu-asm", False,
            detail=f"no llvm-mc + ld.lld with gfx942 support in {searched}", fix=INSTALL_AMD_TOOLS,
        )
    with tempfile.TemporaryDirectory(prefix="argus-amdgpu-") as tmp:
        obj, hsaco = Path(tmp) / "probe.o", Path(tmp) / "probe.hsaco"
        asm = _run(
            [str(tools.llvm_mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx942", "-filetype=obj",
             "-o", str(obj)],
            input_text=GFX942_PROBE_ASM,
        )
        if asm.returncode != 0:
            return Probe("amdgpu-asm", False, tools.version,
                         f"{tools.llvm_mc} rejects gfx942: {asm.stderr.strip()[:300]}", INSTALL_AMD_TOOLS)
        link = _run([str(tools.ld_lld), "-shared", str(obj), "-o", str(hsaco)])
        if link.returncode != 0 or not hsaco.is_file():
            return Probe("amdgpu-asm", False, tools.version,
                         f"{tools.ld_lld} failed: {link.stderr.strip()[:300]}", INSTALL_AMD_TOOLS)
    return Probe(
        "amdgpu-asm", True, tools.version,
        f"LLVM {tools.version}: {tools.llvm_mc.name} + {tools.ld_lld.name} in {tools.llvm_mc.parent}; "
        "gfx942 code object v5 assembled and linked",
        facts={"llvm_mc": str(tools.llvm_mc), "ld_lld": str(tools.ld_lld)},
    )


@_guarded("hip", INSTALL_HIP)
def probe_hip() -> Probe:
    """Import hip-python and count AMD GPUs, or say why there are none."""
    try:
        from hip import hip
    except ImportError as err:
        return Probe("hip", False, detail=f"hip-python not installed ({err})", fix=INSTALL_HIP)
    try:
        result = hip.hipGetDeviceCount()
    except Exception as err:
        return Probe("hip", False, detail=f"no ROCm runtime: {type(err).__name__}: {err}")
    status, count = result if isinstance(result, tuple) else (result, 0)
    if int(getattr(status, "value", status)) != 0 or count == 0:
        return Probe("hip", False, detail=f"ROCm runtime present, no AMD GPU ({status})")
    _status, props = hip.hipGetDeviceProperties(0)
    name = props.gcnArchName.decode() if hasattr(props.gcnArchName, "decode") else str(props.gcnArchName)
    return Probe("hip", True, detail=f"{count} AMD GPU(s); device 0: {name}", facts={"arch": name})


@_guarded("torch", INSTALL_TORCH)
def probe_torch() -> Probe:
    """Import torch and report its version and whether it sees a CUDA device."""
    if importlib.util.find_spec("torch") is None:
        return Probe("torch", False, detail="not installed", fix=INSTALL_TORCH)
    import torch

    cuda = torch.cuda.is_available()
    detail = f"CUDA {torch.version.cuda}, device: {torch.cuda.get_device_name(0)}" if cuda else (
        "CPU only" + (f" (built for CUDA {torch.version.cuda})" if torch.version.cuda else "")
    )
    return Probe("torch", True, torch.__version__, detail, facts={"cuda_available": cuda})


ALL_PROBES: tuple[tuple[str, Callable[[], Probe]], ...] = (
    ("z3", probe_z3),
    ("cvc5", probe_cvc5),
    ("ptxas", probe_ptxas),
    ("nvjitlink", probe_nvjitlink),
    ("amdgpu-asm", probe_amdgpu_assembler),
    ("cuda", cuda_device),
    ("gpu-e2e", probe_gpu_end_to_end),
    ("hip", probe_hip),
    ("torch", probe_torch),
)
