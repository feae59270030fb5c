"""PTX → cubin with ptxas (or nvJitLink), an on-disk cubin cache, and SASS listings.

The cache key is sha256 of (kernel hash, specialization, target, toolchain version, PTX text):
the kernel hash already binds the IR after policies and the argus version, and the PTX text
binds the backend that emitted it, so a stale cubin is never served.  Entries live in
``$ARGUS_CACHE_DIR/cubin`` (default ``~/.cache/argus/cubin``) as ``<key>.cubin`` with a
``<key>.json`` that says what built it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from argus.backend_ptx.emit import PtxKernel
from argus.errors import ToolchainError
from argus.toolchain import INSTALL_NVIDIA, _pip_nvidia_bin, find_ptxas, nvjitlink_link

__all__ = ["Cubin", "build_cubin", "cache_dir", "disassemble", "toolchain_version"]


@dataclass(frozen=True)
class Cubin:
    """An assembled kernel: the image, what built it, and the assembler's resource report."""

    image: bytes
    key: str
    tool: str  # "ptxas <version>" or "nvjitlink <version>"
    log: str
    cached: bool

    @property
    def performance_issues(self) -> list[str]:
        """What the assembler reported that costs speed: spills to local memory, and its
        "Potential Performance Loss" notes — among them C7519, wgmma instructions serialized
        (a wait after every wgmma) because of how registers they read are written around them.
        ptxas prints these as ``info`` lines, not warnings, so they are picked out here."""
        issues = [line.split("ptxas info    :")[-1].strip() for line in self.log.splitlines()
                  if "Potential Performance Loss" in line]
        for line in self.log.splitlines():
            found = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if found and (int(found.group(1)) or int(found.group(2))):
                issues.append(line.strip())
        return issues


def cache_dir() -> Path:
    """Root of argus's on-disk caches (``$ARGUS_CACHE_DIR`` or ``~/.cache/argus``)."""
    root = os.environ.get("ARGUS_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "argus"


@functools.cache
def _ptxas_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"V(\d+\.\d+\.\d+)", out)
    return match.group(1) if match else None


def toolchain_version(tool: str | None = None) -> tuple[str, str]:
    """``(tool, version)`` of the assembler a build uses: ptxas when found, else nvJitLink."""
    if tool in (None, "ptxas"):
        ptxas = find_ptxas()
        if ptxas is not None:
            version = _ptxas_version(str(ptxas))
            if version:
                return "ptxas", version
        if tool == "ptxas":
            raise ToolchainError("ptxas not found", hint=INSTALL_NVIDIA)
    try:
        from cuda.bindings import nvjitlink

        major, minor = nvjitlink.version()
        return "nvjitlink", f"{major}.{minor}"
    except Exception as err:  # no cuda-bindings or no libnvJitLink
        raise ToolchainError(f"no PTX assembler: ptxas not found and nvJitLink unavailable ({err})",
                             hint=INSTALL_NVIDIA) from None


def _key(ptx: PtxKernel, kernel_hash: str, tool: str, version: str) -> str:
    digest = hashlib.sha256()
    for part in (kernel_hash, repr(ptx.lowered.kernel.consts), ptx.target, f"{tool} {version}",
                 hashlib.sha256(ptx.text.encode()).hexdigest()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def build_cubin(ptx: PtxKernel, kernel_hash: str, *, tool: str | None = None, cache: bool = True,
                extra_options: tuple[str, ...] = ()) -> Cubin:
    """Assemble ``ptx`` (or return the cached cubin of the same key).

    ptxas runs with ``-O3 -v``; its report (registers, spills, shared memory) and warnings
    (e.g. a ``setmaxnreg`` the assembler ignored) are kept in :attr:`Cubin.log`.
    """
    tool_name, version = toolchain_version(tool)
    key = _key(ptx, kernel_hash, tool_name, version)
    folder = cache_dir() / "cubin"
    image_path, meta_path = folder / f"{key}.cubin", folder / f"{key}.json"
    if cache and image_path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        return Cubin(image_path.read_bytes(), key, meta["tool"], meta.get("log", ""), True)
    if tool_name == "ptxas":
        image, log = _ptxas(ptx, extra_options)
    else:
        image, log = nvjitlink_link(ptx.text, ptx.target), ""
    result = Cubin(image, key, f"{tool_name} {version}", log, False)
    if cache:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = image_path.with_suffix(".tmp")
        tmp.write_bytes(image)
        tmp.replace(image_path)
        meta_path.write_text(json.dumps({"kernel": ptx.name, "target": ptx.target, "tool": result.tool,
                                         "log": log, "kernel_hash": kernel_hash}, indent=1) + "\n")
    return result


def _ptxas(ptx: PtxKernel, extra: tuple[str, ...]) -> tuple[bytes, str]:
    ptxas = find_ptxas()
    assert ptxas is not None
    with tempfile.TemporaryDirectory(prefix="argus-ptxas-") as tmp:
        src, out = Path(tmp) / f"{ptx.name}.ptx", Path(tmp) / f"{ptx.name}.cubin"
        src.write_text(ptx.text)
        cmd = [str(ptxas), f"-arch={ptx.target}", "-O3", "-v", *extra, str(src), "-o", str(out)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if result.returncode != 0 or not out.exists():
            raise ToolchainError(f"ptxas rejected the PTX of {ptx.name} ({ptx.target}):\n{result.stderr.strip()}",
                                 hint="this is an argus backend bug: please report it with the PTX (argus compile --emit ptx)")
        return out.read_bytes(), result.stderr.strip()


def _disassembler() -> tuple[str, list[str]] | None:
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
        found = _pip_nvidia_bin(tool)
        if found:
            return str(found[0]), args
        cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / tool
        if cuda.is_file():
            return str(cuda), args
    return None


def disassemble(image: bytes) -> str:
    """The SASS of a cubin (cuobjdump, else nvdisasm, from the NVIDIA wheels or CUDA_HOME)."""
    tool = _disassembler()
    if tool is None:
        raise ToolchainError("no SASS disassembler (cuobjdump / nvdisasm)",
                             hint="pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    path, args = tool
    with tempfile.TemporaryDirectory(prefix="argus-sass-") as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(image)
        result = subprocess.run([path, *args, str(cubin)], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise ToolchainError(f"{Path(path).name} failed: {result.stderr.strip()[:500]}")
        return result.stdout
