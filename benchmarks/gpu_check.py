"""Every NVIDIA example on a GPU: correctness against the reference interpreter, float64 and
torch on fresh random inputs at several shapes (tile multiples and ragged edges), and timings
against torch from the same run.

Two steps, so that the GPU machine needs neither solvers nor an assembler:

    python benchmarks/gpu_check.py prepare build/gpu_check     # here: proofs, PTX, cubins
    python benchmarks/gpu_check.py run build/gpu_check --out OUT  # on the GPU machine

``prepare`` verifies each example (saving proof records of the proved ones), emits its sm_90a
PTX and assembles it with ptxas, and writes ``manifest.json``.  ``run`` goes through the gate
for each example: a proved kernel is compiled by ``argus.compile`` (its record satisfies the
gate; the device's assembler builds it); a kernel the verifier has not proved yet is reported
as refused by the gate and then checked through the backend's internal API with the cubin
prepared here (the same PTX, compared by hash) — a backend test, not a user path.  Each
example runs in its own process under a time limit, so a hang cannot take the others down.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

DEVICE = os.environ.get("ARGUS_GPU_CHECK_DEVICE", "cuda")  # "cpu": a dry run of this script on the interpreter

# name: (module, kernel, consts, shapes checked, shapes run on the interpreter, timed shape)
EXAMPLES = {
    "vector_add": ("vector_add", "vector_add", {}, [(1,), (1000,), ((1 << 20) + 3,)], [(1000,)], (1 << 26,)),
    "transpose": ("transpose_swizzled", "transpose", {}, [(32, 32), (100, 77), (1024, 1000)], [(70, 45)],
                  (8192, 8192)),
    "row_softmax": ("row_softmax", "row_softmax", {}, [(1,), (13,), (100003,)], [(13,)], (1 << 20,)),
    "gemm_mma_sync": ("gemm_mma_sync", "gemm", {}, [(64, 64, 32), (128, 192, 96), (512, 512, 512)],
                      [(64, 64, 64)], (4096, 4096, 4096)),
    "gemm_cp_async": ("gemm_cp_async", "gemm_cp_async", {}, [(64, 64, 32), (128, 192, 96), (512, 512, 512)],
                      [(64, 64, 64)], (4096, 4096, 4096)),
    "gemm_tma_wgmma": ("gemm_tma_wgmma", "gemm_tma_wgmma", {}, [(64, 64, 64), (100, 72, 128), (1000, 520, 256),
                                                                 (512, 512, 1024)], [(100, 72, 128)],
                       (4096, 4096, 4096)),
    "gemm_tma_wgmma_nn": ("gemm_tma_wgmma_nn", "gemm_tma_wgmma_nn", {},
                          [(64, 128, 64), (100, 72, 128), (1000, 520, 256), (512, 512, 1024)], [(100, 72, 128)],
                          (4096, 4096, 4096)),
    "gemm_ws": ("gemm_warp_specialized", "gemm_ws", {}, [(128, 64, 64), (200, 100, 192), (1024, 1024, 512)],
                [(130, 70, 128)], (4096, 4096, 4096)),
    "gemm_cluster": ("gemm_cluster_multicast", "gemm_cluster_multicast", {},
                     [(128, 64, 64), (100, 72, 192), (1000, 520, 256)], [(100, 72, 128)], (4096, 4096, 4096)),
}


def _kernel(name: str):
    import importlib

    module, attr, consts, *_ = EXAMPLES[name]
    return getattr(importlib.import_module(module), attr), consts


#: GEMM examples whose B is K x N row-major (C = A · B); the others take B as N x K (C = A · Bᵀ)
B_ROW_MAJOR = ("gemm_tma_wgmma_nn",)


# --------------------------------------------------------------------------- prepare (no GPU)


def prepare(directory: Path, records_only: bool = False) -> None:
    from argus.backend_ptx.assemble import build_cubin
    from argus.backend_ptx.emit import emit_ptx
    from argus.runtime.gate import VerificationRequired, require_proof, save_record
    from argus.spec.kernel import kernel_hash

    (directory / "proofs").mkdir(parents=True, exist_ok=True)
    (directory / "cubin").mkdir(exist_ok=True)
    manifest = {}
    for name in EXAMPLES:
        kernel, consts = _kernel(name)
        specialized = kernel.specialize(**consts)
        start = time.time()
        try:
            record = require_proof(specialized, verify=not records_only)
            save_record(specialized, record, directory / "proofs")
            gate = "proved"
        except VerificationRequired as refusal:
            gate = f"refused: verdict {refusal.record.verdict if refusal.record else 'none'}"
        verify_s = time.time() - start
        ptx = emit_ptx(specialized, "sm_90a", root=str(ROOT))
        cubin = build_cubin(ptx, kernel_hash(specialized))
        (directory / "cubin" / f"{name}.cubin").write_bytes(cubin.image)
        (directory / "cubin" / f"{name}.ptx").write_text(ptx.text)
        manifest[name] = {"kernel_hash": kernel_hash(specialized), "ptx_sha256": hashlib.sha256(ptx.text.encode()).hexdigest(),
                          "tool": cubin.tool, "gate_here": gate, "verify_s": round(verify_s, 1),
                          "ptxas_report": cubin.log.splitlines()[-2:] if cubin.log else []}
        print(f"{name:16s} gate here: {gate:28s} ({verify_s:5.1f} s)  {cubin.tool}")
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


# --------------------------------------------------------------------------- run (GPU)


def _inputs(name: str, shape: tuple[int, ...], seed: int):
    import torch

    g = torch.Generator(device=DEVICE).manual_seed(seed)
    if name == "vector_add":
        (n,) = shape
        return {"a": torch.randn(n, device=DEVICE, generator=g), "b": torch.randn(n, device=DEVICE, generator=g),
                "c": torch.full((n,), float("nan"), device=DEVICE), "n": n}
    if name == "transpose":
        m, n = shape
        return {"x": torch.randn(m, n, device=DEVICE, generator=g), "y": torch.full((n, m), float("nan"), device=DEVICE)}
    if name == "row_softmax":
        (r,) = shape
        return {"x": 4 * torch.randn(r, 64, device=DEVICE, generator=g),
                "y": torch.full((r, 64), float("nan"), device=DEVICE)}
    m, n, k = shape
    a = torch.randn(m, k, device=DEVICE, generator=g).to(torch.bfloat16)
    b = torch.randn(*((k, n) if name in B_ROW_MAJOR else (n, k)), device=DEVICE, generator=g).to(torch.bfloat16)
    return {"a": a, "b": b, "c": torch.full((m, n), float("nan"), device=DEVICE)}


def _sync() -> None:
    if DEVICE == "cuda":
        import torch

        torch.cuda.synchronize()


def _output(name: str) -> str:
    return {"vector_add": "c", "transpose": "y", "row_softmax": "y"}.get(name, "c")


def _reference(name: str, args: dict):
    """float64 reference and the torch op, from the same inputs."""
    import torch

    if name == "vector_add":
        return args["a"].double() + args["b"].double(), args["a"] + args["b"]
    if name == "transpose":
        return args["x"].double().t(), args["x"].t().contiguous()
    if name == "row_softmax":
        return torch.softmax(args["x"].double(), dim=1), torch.softmax(args["x"], dim=1)
    a, b = args["a"], args["b"]
    if name in B_ROW_MAJOR:
        return a.double() @ b.double(), (a.float() @ b.float())
    return a.double() @ b.double().t(), (a.float() @ b.float().t())


# relative error vs float64: f32 rounding of one add, exact moves, ex2.approx, f32 accumulation
TOLERANCE = {"vector_add": 1.2e-7, "transpose": 0.0, "row_softmax": 2e-6}
GEMM_TOLERANCE = 2e-5


def _errors(out, ref) -> dict:
    import torch

    out64 = out.double()
    diff = (out64 - ref).abs()
    norm = ref.norm().item() or 1.0
    return {"rel_err": float((out64 - ref).norm().item() / norm), "max_abs_err": float(diff.max().item()) if diff.numel() else 0.0,
            "nan": int(torch.isnan(out).sum().item())}


def _interpreter(name: str, kernel, consts: dict, shape: tuple[int, ...]) -> dict:
    import numpy as np
    import torch

    from argus.ir.interpreter import Interpreter

    args = _inputs(name, shape, seed=4242)
    specialized = kernel.specialize(**consts)
    arrays, sizes = {}, {}
    for p in specialized.params:
        if p.kind == "tensor":
            t = args[p.name]
            arrays[p.name] = (t.float() if t.dtype == torch.bfloat16 else t).cpu().numpy().astype(np.float32)
        elif p.kind == "index":
            sizes[p.name] = args[p.name]
    for p in specialized.params:  # size symbols from the shapes
        if p.kind == "tensor":
            layout = p.buffer.layout
            dims = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
            for extent, actual in zip(dims, args[p.name].shape):
                if hasattr(extent, "name"):
                    sizes[extent.name] = int(actual)
    start = time.time()
    expected = Interpreter(specialized).run(arrays, sizes)[_output(name)]
    interp_s = time.time() - start
    compiled = _compiled_cache[name]
    _launch(compiled, specialized, args)
    _sync()
    got = args[_output(name)].cpu().numpy().astype(np.float64)
    diff = np.abs(got - expected)
    norm = float(np.linalg.norm(expected)) or 1.0
    return {"shape": list(shape), "interpreter_s": round(interp_s, 2), "bitwise_equal": bool(np.array_equal(got, expected)),
            "rel_err": float(np.linalg.norm(got - expected) / norm), "max_abs_err": float(diff.max()) if diff.size else 0.0}


_compiled_cache: dict = {}


def _launch(compiled, specialized, args: dict) -> None:
    positional = [args[p.name] for p in specialized.params]
    if DEVICE == "cpu":  # dry run: the interpreter stands in for the GPU
        import numpy as np
        import torch

        from argus.ir.interpreter import Interpreter

        arrays = {p.name: args[p.name].float().numpy().copy() for p in specialized.params if p.kind == "tensor"}
        sizes = {p.name: args[p.name] for p in specialized.params if p.kind == "index"}
        for p in specialized.params:
            if p.kind == "tensor":
                dims = p.buffer.layout.shape if isinstance(p.buffer.layout.shape, tuple) else (p.buffer.layout.shape,)
                sizes.update({str(d): int(n) for d, n in zip(dims, args[p.name].shape) if hasattr(d, "name")})
        out = Interpreter(specialized).run(arrays, sizes)
        name = _output_of(specialized)
        args[name].copy_(torch.from_numpy(np.asarray(out[name], np.float32)))
        return
    compiled(*positional)


def _output_of(specialized) -> str:
    return "c" if any(p.name == "c" for p in specialized.params) else "y"


def _compile(name: str, directory: Path) -> tuple:
    """(compiled kernel, how it passed or failed the gate, which cubin)."""
    from argus.backend_ptx.assemble import Cubin
    from argus.backend_ptx.emit import emit_ptx
    from argus.runtime import CompiledKernel, VerificationRequired, compile
    from argus.runtime.gate import require_proof

    kernel, consts = _kernel(name)
    specialized = kernel.specialize(**consts)
    manifest = json.loads((directory / "manifest.json").read_text())[name]
    try:
        require_proof(specialized, verify=False)
        compiled = compile(kernel, **consts)
        return compiled, "proved (carried record); argus.compile", compiled.cubin.tool + " on this machine"
    except VerificationRequired as refusal:
        gate = f"refused by the gate ({str(refusal).splitlines()[0][:120]})"
    ptx = emit_ptx(specialized, "sm_90a", root=str(ROOT))
    sha = hashlib.sha256(ptx.text.encode()).hexdigest()
    gate += "; backend checked via internal API"
    if sha != manifest["ptx_sha256"]:  # emitted differently here (other sympy?): assemble this machine's PTX
        from argus.backend_ptx.assemble import build_cubin
        from argus.spec.kernel import kernel_hash

        cubin = build_cubin(ptx, kernel_hash(specialized))
        return CompiledKernel(specialized, None, ptx, cubin), gate, f"PTX differs from the prepared one; {cubin.tool} here"
    image = (directory / "cubin" / f"{name}.cubin").read_bytes()
    cubin = Cubin(image, sha, manifest["tool"], "", True)
    return CompiledKernel(specialized, None, ptx, cubin), gate, f"carried cubin ({manifest['tool']})"


def run_one(name: str, directory: Path, timing: bool) -> dict:
    import torch

    from argus.runtime.timing import benchmark

    result: dict = {"example": name}
    kernel, consts = _kernel(name)
    compiled, gate, cubin = _compile(name, directory)
    _compiled_cache[name] = compiled
    result.update(gate=gate, cubin=cubin)
    specialized = compiled.kernel
    checks = []
    for i, shape in enumerate(EXAMPLES[name][3][: 2 if DEVICE == "cpu" else None]):
        args = _inputs(name, shape, seed=1000 + i)
        _launch(compiled, specialized, args)
        _sync()
        out = args[_output(name)]
        ref64, ref_torch = _reference(name, args)
        vs64 = _errors(out, ref64)
        vs_torch = _errors(out, ref_torch.to(out.dtype))
        tolerance = TOLERANCE.get(name, GEMM_TOLERANCE)
        ok = vs64["nan"] == 0 and vs64["rel_err"] <= tolerance
        checks.append({"shape": list(shape), "ok": ok, "vs_float64": vs64, "vs_torch": vs_torch, "tolerance": tolerance,
                       "bitwise_equal_to_torch": bool(torch.equal(out, ref_torch.to(out.dtype)))})
    result["checks"] = checks
    result["interpreter"] = [_interpreter(name, kernel, consts, tuple(s)) for s in EXAMPLES[name][4]]
    if timing:
        shape = EXAMPLES[name][5]
        rotations = 2 if len(shape) == 3 else 3
        sets = [_inputs(name, shape, seed=77 + r) for r in range(rotations)]
        baseline = {"vector_add": lambda a: torch.add(a["a"], a["b"], out=a["c"]),
                    "transpose": lambda a: a["y"].copy_(a["x"].t()),
                    "row_softmax": lambda a: torch.softmax(a["x"], dim=1)}
        base = baseline.get(name, (lambda a: torch.matmul(a["a"], a["b"])) if name in B_ROW_MAJOR
                            else (lambda a: torch.matmul(a["a"], a["b"].t())))
        timings = benchmark({"argus": lambda a: _launch(compiled, specialized, a), "torch": base},
                            lambda r: (sets[r],), rotations=rotations, warmup=2, repeat=20)
        t_argus, t_torch = timings["argus"], timings["torch"]
        if len(shape) == 3:
            work = 2 * shape[0] * shape[1] * shape[2]
            unit = "TFLOP/s"
        else:
            elements = shape[0] * (64 if name == "row_softmax" else (shape[1] if len(shape) > 1 else 1))
            work = elements * 4 * (3 if name == "vector_add" else 2)
            unit = "TB/s"
        result["timing"] = {"shape": list(shape), "argus_ms": t_argus.median, "argus_p10_p90": [t_argus.p10, t_argus.p90],
                            "torch_ms": t_torch.median, "torch_p10_p90": [t_torch.p10, t_torch.p90],
                            "speed_vs_torch": t_torch.median / t_argus.median,
                            "argus_rate": work / (t_argus.median * 1e-3) / 1e12, "unit": unit,
                            "torch_baseline": ("torch.matmul(a, b)" if name in B_ROW_MAJOR else "torch.matmul(a, b.T)")
                            + " in bf16 (cuBLAS)" if len(shape) == 3 else "torch op"}
    return result


def run(directory: Path, out: Path, only: list[str], timing: bool, limit: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    parts = out / "parts"
    parts.mkdir(exist_ok=True)
    os.environ.setdefault("ARGUS_PROOF_PATH", str(directory / "proofs"))
    os.environ.setdefault("ARGUS_CACHE_DIR", "/tmp/argus-cache")
    results = []
    for name in only or list(EXAMPLES):
        part = parts / f"{name}.json"
        cmd = [sys.executable, __file__, "one", str(directory), name, str(part)] + (["--timing"] if timing else [])
        start = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            log = (proc.stdout + proc.stderr)[-3000:]
            status = proc.returncode
        except subprocess.TimeoutExpired as err:
            log, status = f"timed out after {limit} s: {(err.stdout or b'')[-2000:]!r}", "timeout"
        entry = json.loads(part.read_text()) if part.exists() else {"example": name, "error": log}
        entry["seconds"] = round(time.time() - start, 1)
        entry["status"] = status
        results.append(entry)
        print(_summary(entry), flush=True)
        (out / "gpu_check.json").write_text(json.dumps(_envelope(results), indent=1) + "\n")


def _envelope(results: list) -> dict:
    info: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)}
    try:
        import torch

        info.update(device=torch.cuda.get_device_name(0), torch=torch.__version__, cuda=torch.version.cuda)
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        info["nvidia_smi"] = smi.stdout.strip()
    except Exception as err:  # report, do not fail
        info["device_error"] = str(err)
    return {"info": info, "results": results}


def _summary(entry: dict) -> str:
    name = entry["example"]
    if "error" in entry:
        return f"{name:16s} ERROR {entry['error'][-400:]}"
    checks = " ".join(f"{'x'.join(map(str, c['shape']))}:{'ok' if c['ok'] else 'FAIL'}({c['vs_float64']['rel_err']:.1e})"
                      for c in entry["checks"])
    interp = " ".join("interp {}: {}".format("x".join(map(str, i["shape"])),
                                             "bitwise" if i["bitwise_equal"] else "rel {:.1e}".format(i["rel_err"]))
                      for i in entry.get("interpreter", []))
    t = entry.get("timing")
    timing = (f" | {t['argus_ms']:.3f} ms vs torch {t['torch_ms']:.3f} ms ({t['speed_vs_torch']:.2f}x, "
              f"{t['argus_rate']:.2f} {t['unit']})") if t else ""
    return f"{name:16s} {entry['gate'][:40]:40s} {checks} {interp}{timing}"


def one(directory: Path, name: str, part: Path, timing: bool) -> None:
    try:
        result = run_one(name, directory, timing)
    except Exception:
        result = {"example": name, "error": traceback.format_exc()[-3000:]}
    part.write_text(json.dumps(result, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("directory", type=Path)
    p.add_argument("--records-only", action="store_true",
                   help="take proofs from the checked-in records (proofs/, $ARGUS_PROOF_PATH); run no solver")
    r = sub.add_parser("run")
    r.add_argument("directory", type=Path)
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_check_out")))
    r.add_argument("--only", nargs="*", default=[])
    r.add_argument("--no-timing", action="store_true")
    r.add_argument("--limit", type=int, default=90, help="seconds per example")
    o = sub.add_parser("one")
    o.add_argument("directory", type=Path)
    o.add_argument("name")
    o.add_argument("part", type=Path)
    o.add_argument("--timing", action="store_true")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.directory, args.records_only)
    elif args.command == "run":
        run(args.directory, args.out, args.only, not args.no_timing, args.limit)
    else:
        os.environ.setdefault("ARGUS_PROOF_PATH", str(args.directory / "proofs"))
        one(args.directory, args.name, args.part, args.timing)


if __name__ == "__main__":
    main()
