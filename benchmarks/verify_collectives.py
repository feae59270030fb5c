"""Verification time of the collective examples: ``row_softmax`` and the kernels of the
collectives mutation suite (correct and planted bug), with z3 in-process.

Prints one Markdown row per specialization: verdict, VCs, wall time of ``verify_kernel``
(generation, solving, minimization, replay), and for a refutation the property and the
replay status.  Run from the repository root:

    .venv/bin/python benchmarks/verify_collectives.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples"), str(ROOT / "tests" / "ir"), str(ROOT / "tests" / "proofs")]

import row_softmax as RS  # noqa: E402
import test_mutants_collectives as M  # noqa: E402

from argus.proofs import verify_kernel  # noqa: E402


def main() -> None:
    cases = [("examples/row_softmax.py", RS.row_softmax, {})]
    for name, kernel, good, bad, *_ in M.MUTATIONS:
        if good is not None:
            cases.append((f"{kernel.name} {good or ''} (correct)", kernel, good))
        cases.append((f"{kernel.name}: {name}", kernel, bad))
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print("| kernel | verdict | VCs | time | counterexample |\n|---|---|---|---|---|")
    seen = set()
    for name, kernel, consts in cases:
        key = (kernel.name, tuple(sorted(consts.items())))
        if key in seen:
            continue
        seen.add(key)
        start = time.perf_counter()
        report = verify_kernel(kernel.specialize(**consts))
        seconds = time.perf_counter() - start
        cx = report.counterexamples[0] if report.counterexamples else None
        what = f"{cx.property}, replay {cx.replay.status}" if cx is not None and cx.replay else ""
        print(f"| {name} | {report.verdict} | {len(report.results)} | {seconds:.2f} s | {what} |")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
