"""``argus doctor``: one table of what this machine can do.

Rows: the two solvers (with a self-test each), the PTX assemblers for sm_90a (ptxas and
nvJitLink, with the newest PTX ISA each accepts), the AMDGPU assembler/linker for gfx942, the
CUDA driver and GPU, the HIP runtime and GPU, and torch.  A missing piece is shown with the
command that installs it.  The exit status is 0 when verification works here (both solvers
pass), 1 otherwise: GPUs and backends are optional for proving kernels.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

from argus import __version__
from argus.toolchain import ALL_PROBES, Probe

REQUIRED = ("z3", "cvc5")

ROLE = {
    "z3": "SMT solver",
    "cvc5": "SMT solver",
    "ptxas": "PTX -> cubin (sm_90a)",
    "nvjitlink": "PTX -> cubin (sm_90a)",
    "amdgpu-asm": "gfx942 assembler/linker",
    "cuda": "NVIDIA driver / GPU",
    "gpu-e2e": "PTX -> cubin -> launch",
    "hip": "HIP runtime / AMD GPU",
    "torch": "PyTorch",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def collect() -> list[Probe]:
    """Run every probe (each one guarded: none raises)."""
    return [probe() for _, probe in ALL_PROBES]


def report(probes: list[Probe]) -> dict[str, Any]:
    return {
        "argus": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "verification_ready": all(p.ok for p in probes if p.name in REQUIRED),
        "components": [p.as_dict() | {"role": ROLE.get(p.name, "")} for p in probes],
    }


def render(probes: list[Probe]) -> str:
    rows = [("component", "role", "status", "version", "details")]
    for p in probes:
        rows.append((p.name, ROLE.get(p.name, ""), "ok" if p.ok else "missing", p.version or "-", p.detail))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"argus {__version__} on Python {platform.python_version()} ({platform.machine()})", ""]
    for i, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row[:4])) + "  " + row[4])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 7)
    fixes = [(p.name, p.fix) for p in probes if not p.ok and p.fix]
    if fixes:
        lines += ["", "to install what is missing:"]
        lines += [f"  {name}: {fix}" for name, fix in fixes]
    ready = all(p.ok for p in probes if p.name in REQUIRED)
    lines += ["", "verification: ready" if ready else "verification: NOT ready (a solver is missing)"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    probes = collect()
    if args.json:
        json.dump(report(probes), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(probes))
    return 0 if all(p.ok for p in probes if p.name in REQUIRED) else 1
