"""Verification time of the Hopper examples and the detection table of the asynchrony mutants.

First the warp-specialized GEMM and the policy-pipelined TMA/wgmma GEMM through
``verify_kernel`` (every property, z3 in-process), then each mutant of
``tests/proofs/test_async_mutants.py`` with the asynchrony properties only: verdict, the
property that refutes it, the interpreter's replay, wall time.  Run from the repository root:

    .venv/bin/python benchmarks/verify_async.py
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples"), str(ROOT / "tests" / "ir"), str(ROOT / "tests" / "proofs")]

import async_kernels_support as S  # noqa: E402
import cluster_kernels as C  # noqa: E402

from argus.layout_algebra.hopper import SwizzleMode  # noqa: E402
from argus.proofs import LocalProver, verify_kernel  # noqa: E402

ASYNC = {"async", "mbarrier", "expect-tx", "phase", "proxy", "descriptor", "role", "registers", "barrier", "wgmma"}

MUTANTS = [
    ("wrong parity (gemm_ws BUG=parity)", lambda: S.WS.specialize(BUG="parity")),
    ("expect-tx off by one box (gemm_ws BUG=expect-tx)", lambda: S.WS.specialize(BUG="expect-tx")),
    ("missing empty-barrier wait (gemm_ws)", lambda: S.WS.specialize(BUG="no-empty-wait")),
    ("release before wait_group (gemm_ws)", lambda: S.WS.specialize(BUG="release-before-retire")),
    ("release before the MMAs (gemm_ws)", lambda: S.WS.specialize(BUG="early-release")),
    ("accumulator stored before its wgmma retires (gemm_tma_wgmma)",
     lambda: S.wgmma_wait_pending(S.TMA_WGMMA.specialize(), 1)),
    ("descriptor swizzle 64B vs TMA 128B (gemm_tma_wgmma)",
     lambda: S.descriptor_mismatch(S.TMA_WGMMA.specialize(), SwizzleMode.B64.element_swizzle(2))),
    ("missing proxy fence before a TMA store", lambda: S.doubled_by_tma_store.specialize(FENCE=False)),
    ("producer writing the consumers' accumulator (gemm_ws)",
     lambda: S.producer_writes_accumulator(S.WS.specialize())),
    ("unbalanced named barrier (96 of 64)", lambda: S.halves.specialize(PARTICIPANTS=96)),
    ("multicast peer not armed (2-CTA cluster)", lambda: C.multicast_halves.specialize(ARM_ALL=False)),
    ("trip count < stages: deadlock", lambda: S.first_tiles.specialize(CLAMPED=False)),
    ("missing cp.async wait", lambda: S.cp_async_pipeline.specialize(WAIT_ALL_BUT=2)),
    ("cp.async refills a stage others read", lambda: S.cp_async_pipeline.specialize(SECOND_BARRIER=False)),
]


def main() -> None:
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    print("| kernel | verdict | VCs | proved | unknown | wall (z3 in-process) |")
    print("|---|---|---|---|---|---|")
    for name, kernel in (("examples/gemm_warp_specialized.py", S.WS.specialize()),
                         ("examples/gemm_tma_wgmma.py", S.TMA_WGMMA.specialize())):
        start = time.perf_counter()
        report = verify_kernel(kernel, prover=LocalProver("z3"))
        wall = time.perf_counter() - start
        counts = {v: len(report.by_verdict(v)) for v in ("proved", "unknown")}
        mine = [r for r in report.results if r.vc.property in ASYNC]
        print(f"| {name} | {report.verdict} | {len(report.results)} | {counts['proved']} | {counts['unknown']} | "
              f"{wall:.2f} s |  (asynchrony VCs: {len(mine)}, "
              f"{sum(r.verdict == 'proved' for r in mine)} proved)", flush=True)
    print()
    print("| mutant | verdict | property | replay | wall |")
    print("|---|---|---|---|---|")
    for name, make in MUTANTS:
        kernel = make()
        start = time.perf_counter()
        results = S.verify_properties(kernel, ASYNC)
        wall = time.perf_counter() - start
        refuted = [r for r in results if r.verdict == "refuted" and r.counterexample is not None]
        verdict = "refuted" if refuted else ("proved" if all(r.verdict == "proved" for r in results) else "unknown")
        prop = refuted[0].vc.property if refuted else "-"
        replay = refuted[0].counterexample.replay.status if refuted else "-"
        print(f"| {name} | {verdict} | {prop} | {replay} | {wall:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
