"""Verification time per example and test kernel (``argus verify`` without the CLI start-up).

Prints one row per kernel specialization: verdict, number of VCs, wall time with z3
in-process and through ``argus verify``'s default portfolio (warm z3 worker, then cvc5 on the
VCs z3 gives up on).  ``--examples`` instead verifies the default specialization of the first
kernel of every file in ``examples/`` (the GEMMs included) with the default portfolio, and
prints the time spent generating the VCs apart.  Run from the repository root:

    .venv/bin/python benchmarks/verify_examples.py [--portfolio | --examples]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples"), str(ROOT / "tests" / "ir"), str(ROOT / "tests" / "proofs")]

import interp_kernels as K  # noqa: E402
import transpose_swizzled as TS  # noqa: E402
import vector_add as VA  # noqa: E402
import verifier_kernels as V  # noqa: E402

from argus.proofs import LocalProver, SequentialProver, verify_kernel  # noqa: E402

CASES = [
    ("examples/vector_add.py", VA.vector_add, {}),
    ("examples/transpose_swizzled.py", TS.transpose, {}),
    ("tests/ir: tiled_copy", K.tiled_copy, {}),
    ("tests/ir: rotate_through_shared", K.rotate_through_shared, {}),
    ("tests/ir: rotate_through_shared (no barrier)", K.rotate_through_shared, {"SYNC": False}),
    ("tests/ir: raw_index_copy", K.raw_index_copy, {}),
    ("tests/ir: warp_zero_barrier", K.warp_zero_barrier, {}),
    ("tests/ir: reads_uninitialized", K.reads_uninitialized, {}),
    ("tests/ir: transpose_tagged", K.transpose_tagged, {}),
    ("tests/ir: transpose_tagged (wrong)", K.transpose_tagged, {"WRONG": True}),
    ("tests/proofs: grid_stride_copy (symbolic loop)", V.grid_stride_copy, {}),
    ("tests/proofs: shared_loop (symbolic loop, barriers)", V.shared_loop, {}),
    ("tests/proofs: swizzled_stage", V.swizzled_stage, {}),
]


#: the examples ``--examples`` verifies (default specialization of each file's first kernel)
EXAMPLES = ("vector_add", "transpose_swizzled", "row_softmax", "gemm_mfma", "gemm_mma_sync", "gemm_cp_async",
            "gemm_tma_wgmma", "gemm_tma_wgmma_nn", "gemm_warp_specialized")


def examples() -> None:
    from argus.abstract_interp import generate_vcs
    from argus.proofs.cli_verify import load_kernels

    print("| example | verdict | VCs | solver calls | VC generation | argus verify (portfolio) |")
    print("|---|---|---|---|---|---|")
    prover = SequentialProver()
    try:
        for name in EXAMPLES:
            kernel = load_kernels(ROOT / "examples" / f"{name}.py")[0].specialize()
            start = time.perf_counter()
            generate_vcs(kernel)
            generation = time.perf_counter() - start
            start = time.perf_counter()
            report = verify_kernel(kernel, prover=prover)
            wall = time.perf_counter() - start
            calls = sum(1 for r in report.results if r.solver not in (None, "structural") and r.seconds > 0)
            print(f"| examples/{name}.py | {report.verdict} | {len(report.results)} | {calls} | {generation:.2f} s "
                  f"| {wall:.2f} s |", flush=True)
    finally:
        prover.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--portfolio", action="store_true", help="also time the default portfolio")
    parser.add_argument("--examples", action="store_true", help="time argus verify on every example instead")
    args = parser.parse_args()
    if args.examples:
        print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
        examples()
        return
    portfolio = SequentialProver() if args.portfolio else None
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    head = "| kernel | verdict | VCs | z3 in-process |" + (" portfolio |" if portfolio else "")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    try:
        for name, kernel, consts in CASES:
            ir = kernel.specialize(**consts)
            start = time.perf_counter()
            report = verify_kernel(ir, prover=LocalProver("z3"))
            local = time.perf_counter() - start
            row = f"| {name} | {report.verdict} | {len(report.results)} | {local:.2f} s |"
            if portfolio is not None:
                start = time.perf_counter()
                verify_kernel(ir, prover=portfolio)
                row += f" {time.perf_counter() - start:.2f} s |"
            print(row, flush=True)
    finally:
        if portfolio is not None:
            portfolio.close()


if __name__ == "__main__":
    main()
