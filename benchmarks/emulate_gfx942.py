"""The gfx942 emulator against the reference interpreter: wall time of the same launch.

    python benchmarks/emulate_gfx942.py

For each shape, the ``gemm_mfma`` example (v_mfma_f32_32x32x8_bf16, LDS staging, 4 waves per
workgroup) runs on fresh random bf16 inputs in the emulator (the linked code object; emission
and assembly are timed separately) and in the reference interpreter; the results are checked
against each other with the MMA tolerance.  Prints a markdown table: emulator seconds,
interpreter seconds, and their ratio.
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from argus.backend_amdgcn.compile import emit  # noqa: E402
from argus.backend_amdgcn.emulate_run import emulate_kernel, random_inputs  # noqa: E402
from argus.ir import numerics  # noqa: E402
from argus.ir.interpreter import Interpreter  # noqa: E402
from argus.proofs.cli_verify import load_kernels  # noqa: E402

SHAPES = [(64, 64, 64), (128, 128, 64), (128, 128, 256), (256, 256, 64)]


def main() -> int:
    (k,) = load_kernels(ROOT / "examples" / "gemm_mfma.py")
    ir = k.specialize()
    start = time.perf_counter()
    emitted = emit(ir)
    hsaco = emitted.assemble()
    build = time.perf_counter() - start
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"numpy {np.__version__}; emit + assemble + link: {build:.2f} s (once)\n")
    print("| M x N x K | workgroups | wave instructions | emulator (s) | interpreter (s) | interpreter / emulator |")
    print("|---|---|---|---|---|---|")
    for m, n, kk in SHAPES:
        sizes = {"M": m, "N": n, "K": kk}
        inputs = random_inputs(ir, sizes, np.random.default_rng(m + n + kk))
        t0 = time.perf_counter()
        got, emulation = emulate_kernel(ir, {a: v.copy() for a, v in inputs.items()}, sizes, emitted=emitted,
                                        hsaco=hsaco)
        t1 = time.perf_counter()
        ref = Interpreter(ir).run({a: v.copy() for a, v in inputs.items()}, sizes)
        t2 = time.perf_counter()
        a, b = inputs["a"].reshape(m, kk), inputs["b"].reshape(n, kk)
        bound = numerics.mma_tolerance(a, b.T, acc_dtype="f32").reshape(-1)
        ok = bool(np.all(np.abs(got["c"] - ref["c"]) <= bound)) and not emulation.findings
        print(f"| {m} x {n} x {kk} | {emulation.workgroups} | {emulation.instructions} | {t1 - t0:.2f} | "
              f"{t2 - t1:.2f} | {(t2 - t1) / (t1 - t0):.2f}x |" + ("" if ok else " MISMATCH"))
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
