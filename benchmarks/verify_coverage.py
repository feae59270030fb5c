"""Coverage property: the k-block mutants of the GEMM examples and what the property costs
(a benchmark, not a test).

For each GEMM example: verifies ``KBLOCK_BUG="skip"`` (one k-block short) and ``"repeat"``
(k-block 0 once more) and prints the verdict, the properties not proved, where the replayed
counterexample points and what the interpreter said; then verifies the correct kernel with
and without the coverage VCs (in one process, same code otherwise) and prints both times.

    python benchmarks/verify_coverage.py
"""

import platform
import runpy
import time
from pathlib import Path

from argus.abstract_interp import properties as P
from argus.proofs import verify_kernel
from argus.proofs.provers import make_prover

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [("gemm_mma_sync.py", "gemm"), ("gemm_mfma.py", "gemm_mfma"), ("gemm_cp_async.py", "gemm_cp_async")]


def _verify(kernel):
    prover = make_prover("portfolio")
    try:
        start = time.perf_counter()
        report = verify_kernel(kernel, prover=prover)
        return report, time.perf_counter() - start
    finally:
        prover.close()


def main() -> None:
    print(f"device: CPU ({platform.machine()}), z3 ‖ cvc5 portfolio; python {platform.python_version()}")
    print("| example | mutant | verdict | properties not proved | refuted at | replay: interpreter says | K | time |")
    print("|---|---|---|---|---|---|---|---|")
    kernels = {f: runpy.run_path(str(ROOT / "examples" / f))[name] for f, name in EXAMPLES}
    for f, kernel in kernels.items():
        for bug in ("skip", "repeat"):
            report, seconds = _verify(kernel.specialize(KBLOCK_BUG=bug))
            failed = sorted({r.vc.property for r in report.results if r.verdict != "proved"})
            cx = next((c for c in report.counterexamples if c.property == "coverage" and c.replay
                       and c.replay.status == "reproduced"), None)
            where = f"{Path(cx.position.file).name}:{cx.position.line} ({cx.op})" if cx else "-"
            said = cx.replay.violation["message"].split(" (the reduction")[0].split(" since")[0] if cx else "-"
            status = cx.replay.status if cx else "-"
            size = cx.sizes.get("K") if cx else "-"
            print(f"| {f} | KBLOCK_BUG={bug} | {report.verdict} | {', '.join(failed)} | {where} | {status}: {said} "
                  f"| {size} | {seconds:.1f} s |", flush=True)
    print()
    print("| example | without coverage | with coverage | ratio |")
    print("|---|---|---|---|")
    full = P.EXTRA_PROPERTIES
    without = tuple(make for make in full if make.__name__ != "coverage")
    for f, kernel in kernels.items():
        row = []
        for extra in (without, full):
            P.EXTRA_PROPERTIES = extra
            try:
                report, seconds = _verify(kernel.specialize())
            finally:
                P.EXTRA_PROPERTIES = full
            covered = sum(r.vc.property == "coverage" for r in report.results)
            row.append((f"{report.verdict}, {len(report.results)} VCs ({covered} coverage), {seconds:.1f} s", seconds))
        print(f"| {f} | {row[0][0]} | {row[1][0]} | {row[1][1] / row[0][1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
