"""``argus demo``: the whole path on the shipped examples, in one run.

1. what this machine can do (solvers, assemblers, GPUs);
2. verify examples — every VC proved;
3. verify a shipped buggy kernel — refuted, with the counterexample replayed on the interpreter;
4. run the proved kernels in the reference interpreter against numpy on ragged shapes;
5. compile them for sm_90a (PTX → cubin) and gfx942 (HSA code object), through the gate;
6. run them on the GPU against torch when a CUDA device and torch are present.

The exit status is 0 when every step this machine can do succeeded (a missing GPU or
toolchain is reported, not failed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import argus
from argus.errors import ArgusError

EXAMPLES = Path(argus.__file__).resolve().parents[1] / "examples"
PROVED = (("vector_add.py", {}), ("transpose_swizzled.py", {}))
BUGGY = "buggy/transpose_race.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=Path, default=EXAMPLES,
                        help="folder of the examples (default: the repository's examples/)")


class _Steps:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def header(self, number: int, title: str) -> None:
        print(f"\n== {number}. {title}", flush=True)

    def fail(self, what: str) -> None:
        self.failed.append(what)
        print(f"   FAILED: {what}", flush=True)


def _kernel(path: Path) -> Any:
    from argus.proofs.cli_verify import load_kernels

    kernels = load_kernels(path)
    if len(kernels) != 1:
        raise ArgusError(f"{path}: expected one kernel, found {len(kernels)}")
    return kernels[0]


def _verify(kernel: Any, consts: dict[str, Any], prover: Any) -> Any:
    from argus.proofs.verify import verify_kernel

    return verify_kernel(kernel.specialize(**consts), prover=prover)


def _interpret(name: str, kernel: Any, rng: np.random.Generator) -> str:
    from argus.ir.interpreter import Interpreter

    def randn(*shape: int) -> np.ndarray:
        x = rng.standard_normal(shape).astype(np.float32)
        x[x == 0] = 1.0
        return x

    if name == "vector_add.py":
        n = 1000
        a, b = randn(n), randn(n)
        out = Interpreter(kernel.specialize()).run({"a": a, "b": b, "c": np.zeros(n, np.float32)}, {"n": n})
        ok = np.array_equal(out["c"], a + b)
        return f"n={n}: {'matches numpy exactly' if ok else 'MISMATCH'}" if ok else "MISMATCH"
    m, n = 70, 45
    x = randn(m, n)
    out = Interpreter(kernel.specialize()).run({"x": x, "y": np.zeros((n, m), np.float32)}, {"M": m, "N": n})
    ok = np.array_equal(out["y"], x.T)
    return f"{m}x{n}: {'matches numpy exactly' if ok else 'MISMATCH'}" if ok else "MISMATCH"


def run(args: argparse.Namespace) -> int:
    from argus.doctor import REQUIRED, collect

    examples: Path = args.examples
    if not (examples / "vector_add.py").is_file():
        raise ArgusError(f"no examples in {examples}", hint="run from a checkout of the argus repository "
                         "or pass --examples DIR")
    steps = _Steps()
    print(f"argus {argus.__version__} demo")

    steps.header(1, "this machine")
    probes = {p.name: p for p in collect()}
    for p in probes.values():
        print(f"   {p.name:<11} {'ok' if p.ok else 'missing':<8} {p.detail if p.ok else (p.fix or p.detail)}")
    if not all(probes[name].ok for name in REQUIRED):
        steps.fail("a solver is missing: verification cannot run here")
        return 1

    from argus.proofs.provers import make_prover

    prover = make_prover("portfolio")
    proved: list[tuple[str, Any]] = []
    try:
        steps.header(2, "verify the examples (every VC must be proved)")
        for name, consts in PROVED:
            kernel = _kernel(examples / name)
            start = time.perf_counter()
            report = _verify(kernel, consts, prover)
            print(f"   {report.human().splitlines()[0]}  [{time.perf_counter() - start:.1f} s wall]")
            if report.verdict == "proved":
                proved.append((name, kernel))
            else:
                steps.fail(f"{name} is not proved")

        steps.header(3, f"verify a shipped buggy kernel ({BUGGY}): it must be refuted")
        report = _verify(_kernel(examples / BUGGY), {}, prover)
        print("\n".join("   " + line for line in report.human().splitlines()[:9]))
        if report.verdict != "refuted":
            steps.fail(f"{BUGGY} was not refuted ({report.verdict})")
    finally:
        prover.close()

    steps.header(4, "run the proved kernels in the reference interpreter")
    rng = np.random.default_rng(2026)
    for name, kernel in proved:
        result = _interpret(name, kernel, rng)
        print(f"   {name}: {result}")
        if "MISMATCH" in result:
            steps.fail(f"{name} differs from numpy in the interpreter")

    steps.header(5, "compile through the verification gate")
    for target, probe in (("sm_90a", "ptxas"), ("gfx942", "amdgpu-asm")):
        if not probes[probe].ok:
            print(f"   {target}: skipped ({probe} missing: {probes[probe].fix})")
            continue
        for name, kernel in proved:
            try:
                compiled = argus.compile(kernel, target=target)
            except ArgusError as err:
                steps.fail(f"{name} for {target}: {err.message}")
                continue
            size = _image_size(compiled)
            print(f"   {name} -> {target}: {size} bytes" if size else f"   {name} -> {target}: built")

    steps.header(6, "run on the GPU")
    if not probes["cuda"].ok:
        print(f"   skipped: {probes['cuda'].detail}")
    elif not probes["torch"].ok:
        print(f"   skipped: torch is not installed ({probes['torch'].fix})")
    else:
        _run_on_gpu(proved, steps)

    print()
    if steps.failed:
        print(f"demo: {len(steps.failed)} step(s) failed: " + "; ".join(steps.failed))
        return 1
    print("demo: every step this machine can run succeeded")
    return 0


def _image_size(compiled: Any) -> int | None:
    for attribute in ("cubin", "hsaco", "image", "code_object"):
        value = getattr(compiled, attribute, None)
        if isinstance(value, (bytes, bytearray)):
            return len(value)
        image = getattr(value, "image", None)
        if isinstance(image, (bytes, bytearray)):
            return len(image)
    return None


def _run_on_gpu(proved: list[tuple[str, Any]], steps: _Steps) -> None:
    import torch

    for name, kernel in proved:
        compiled = argus.compile(kernel, target="sm_90a")
        if name == "vector_add.py":
            n = 1_000_003
            a, b = (torch.randn(n, device="cuda") for _ in range(2))
            c = torch.full((n,), float("nan"), device="cuda")
            compiled(a, b, c, n)
            ok = torch.equal(c, a + b)
            shape = f"n={n}"
        else:
            m, n = 1000, 777
            x = torch.randn(m, n, device="cuda")
            y = torch.full((n, m), float("nan"), device="cuda")
            compiled(x, y)
            ok = torch.equal(y, x.T)
            shape = f"{m}x{n}"
        torch.cuda.synchronize()
        print(f"   {name} {shape} on {torch.cuda.get_device_name()}: {'matches torch' if ok else 'MISMATCH'}")
        if not ok:
            steps.fail(f"{name} differs from torch on the GPU")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run(argparse.Namespace(examples=EXAMPLES)))
