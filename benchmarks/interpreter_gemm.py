"""Reference-interpreter speed on a GEMM specialization (a benchmark, not a test).

Runs the tiled GEMM examples (mma.sync on 4 warps with synchronous and with double-buffered
cp.async staging, MFMA on 4 wavefronts) at M = N = 128,
K = 64 on the reference interpreter, single-threaded, checks the result against numpy, and
prints the time of each phase next to numpy's float64 product of the same shapes.  The
target is under 30 s per run on one core.

    python benchmarks/interpreter_gemm.py [--m 128 --n 128 --k 64] [--profile]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import gemm_cp_async  # noqa: E402
import gemm_mfma  # noqa: E402
import gemm_mma_sync  # noqa: E402

from argus.ir import numerics  # noqa: E402
from argus.ir.interpreter import Interpreter  # noqa: E402


def run(kernel, m: int, n: int, k: int, profile: bool) -> None:
    rng = np.random.default_rng(0)
    a = numerics.round_to("bf16", rng.standard_normal((m, k))).astype(np.float32)
    b = numerics.round_to("bf16", rng.standard_normal((n, k))).astype(np.float32)
    start = time.perf_counter()
    spec = kernel.specialize()
    traced = time.perf_counter()
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    out = Interpreter(spec).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})["c"]
    if profiler:
        profiler.disable()
    done = time.perf_counter()
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    t0 = time.perf_counter()
    a.astype(np.float64) @ b.astype(np.float64).T
    numpy_s = time.perf_counter() - t0
    interp_s = done - traced
    print(f"{kernel.name:14s} {m}x{n}x{k} bf16->f32  trace {traced - start:6.2f} s  interpret {interp_s:6.2f} s  "
          f"numpy f64 {numpy_s * 1e3:7.3f} ms  ratio {interp_s / max(numpy_s, 1e-9):10.0f}x  "
          f"{'OK' if interp_s < 30 else 'OVER'} (target < 30 s)")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=128)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"device: CPU ({platform.processor() or platform.machine()}), reference interpreter, one thread; "
          f"python {platform.python_version()}, numpy {np.__version__}")
    for kernel in (gemm_mma_sync.gemm, gemm_cp_async.gemm_cp_async, gemm_mfma.gemm_mfma):
        run(kernel, args.m, args.n, args.k, args.profile)


if __name__ == "__main__":
    main()
