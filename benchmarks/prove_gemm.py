"""Prove the specializations of ``argus.kernels.gemm`` that ``benchmarks/gemm.py`` runs, and
write their proof records (the gate then builds them through ``argus.compile``).

    python benchmarks/prove_gemm.py                       # every autotuner candidate and variant
    python benchmarks/prove_gemm.py --only main_c1 f16_tuned
    python benchmarks/prove_gemm.py --records /tmp/records --sms 114

Specializations are those of ``benchmarks/gemm.py prepare`` (keys ``main_c<i>`` for each entry
of ``CANDIDATES``; for the other types, epilogues and operand layouts, ``<variant>_tuned`` with
the autotuner's pick at 4096³ and ``<variant>_skinny`` with its pick for one tile row, M <= 128:
``tuned_picks()``), at the persistent grid of the target (``--sms``, 132 on an H200;
the grid is a ``const`` of the kernel, so a record is bound to it; ``main_c1_sms128`` fixes its
own).  The default keys exclude the schedule experiments that the autotuner never picks
(``main_e0``, ``main_c1_cluster2``).

The solver is z3 alone (it decides every VC of these kernels; cvc5 gives up on the largest)
under a resource limit of 10^9 units per VC, recorded in the record: the lemma that an
accumulator holds its MMA's record needs up to ~10^8 units (up to 330 s of z3 on this class of
machine), beyond the default 5·10^7.  A VC z3 gives up on is tried again alone in a fresh z3
process (``--retries``): z3's answer depends on what its process solved before.  Before the
retries, a VC z3 gave up on is split into parts (the goal's conjuncts, the definedness guards by
divisor), each solved on its own: the operand lemmas of the transposed layouts need it.  Proved VCs go
to a cache keyed by the query's hash (``--cache``): the variants share most of their queries
(the fp16 kernel's are the bf16 kernel's, text for text), so after one kernel the others cost
little more than their VC generation.  Prints one Markdown row per specialization.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

RLIMIT = 1_000_000_000
"""z3 resource units per VC (reproducible: the same z3 decides the same query the same way)."""
NOT_AUTOTUNED = ("main_e0", "main_c1_cluster2", "f32_out_direct")


def main() -> int:
    from gemm import H200_SMS, _kernel, _specializations, _with_grid

    from argus.proofs import verify, verify_kernel
    from argus.proofs.cli_verify import record_path
    from argus.proofs.provers import PortfolioProver
    from argus.proofs.record import VCCache

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=[], help="keys to prove (default: every autotuned key and variant)")
    p.add_argument("--records", type=Path, default=ROOT / "proofs", help="where the records go (default: proofs/)")
    p.add_argument("--sms", type=int, default=H200_SMS, help="the persistent grid (the target's SM count)")
    p.add_argument("--rlimit", type=int, default=RLIMIT)
    p.add_argument("--budget", type=float, default=900.0, help="wall-clock safety net per VC in seconds")
    p.add_argument("--retry-budget", type=float, default=None,
                   help="wall-clock safety net of the split parts and the retries (default: --budget)")
    p.add_argument("--cache", type=Path, default=ROOT / "build" / "vccache",
                   help="the VC cache (default build/vccache): a VC proved before, for this or any other "
                   "specialization, is not solved again — the fp16 kernel's VCs are the bf16 kernel's")
    p.add_argument("--seed-cache", type=Path, action="append", default=[], metavar="RECORDS",
                   help="first take the proved VCs of the proof records under RECORDS (e.g. proofs/) into the "
                   "cache: after an edit of the kernel's file, only the queries the edit changed are solved")
    p.add_argument("--no-cache", action="store_true", help="solve every VC")
    p.add_argument("--retries", type=int, default=2,
                   help="attempts more for a VC z3 gave up on, each alone in a fresh z3 process")
    p.add_argument("--no-race", action="store_true",
                   help="retries one seed per open query at a time (default: lanes that few open queries would "
                   "leave idle race further seeds of them)")
    p.add_argument("--lanes", type=int, default=verify.PARALLEL,
                   help=f"z3 processes solving one specialization's queries at once (default {verify.PARALLEL})")
    p.add_argument("--jobs", type=int, default=1,
                   help="specializations proved at once, each in a process of its own with --lanes z3 "
                   "processes (a machine of many cores: --jobs 3 --lanes 5 on 16)")
    args = p.parse_args()
    if args.lanes < 1 or args.jobs < 1:
        p.error("--lanes and --jobs must be at least 1")
    if args.seed_cache and not args.no_cache:
        seeded = sum(VCCache(args.cache).seed(records) for records in args.seed_cache)
        print(f"cache {args.cache}: {seeded} proved queries taken from {', '.join(map(str, args.seed_cache))}",
              flush=True)
    keys = {key: (variant, consts) for key, variant, consts in _specializations()}
    chosen = args.only or [k for k in keys if k not in NOT_AUTOTUNED]
    unknown = [k for k in chosen if k not in keys]
    if unknown:
        p.error(f"unknown keys {unknown}; known: {sorted(keys)}")
    print("| key | kernel | consts | verdict | VCs | proved | most z3 units of one VC | time |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    if args.jobs > 1 and len(chosen) > 1:
        return _in_parallel(chosen, args)
    prover = PortfolioProver(("z3",), rlimit=args.rlimit, wall_clock_s=args.budget)
    verify.PARALLEL = args.lanes
    verify.MIN_PARALLEL_QUERIES = 2  # these queries take seconds to minutes: a fork pays for itself
    failed = 0
    try:
        for key in chosen:
            variant, consts = keys[key]
            kernel = _kernel(variant).specialize(**_with_grid(consts, args.sms))  # a key may fix its own grid
            start = time.perf_counter()
            report = verify_kernel(kernel, prover=prover, replay=False, retries=args.retries,
                                   retry_budget=args.retry_budget, race=not args.no_race,
                                   cache=None if args.no_cache else VCCache(args.cache))
            seconds = time.perf_counter() - start
            proved = sum(r.verdict == "proved" for r in report.results)
            most = max((r.resources or 0 for r in report.results), default=0)
            if report.verdict == "proved":
                report.record.save(record_path(args.records, kernel))
            else:
                failed += 1
                print(report.human(), file=sys.stderr, flush=True)
            shown = ", ".join(f"{k}={v}" for k, v in consts.items())
            print(f"| {key} | {kernel.name} | {shown} | {report.verdict} | {len(report.results)} | {proved} | "
                  f"{most / 1e6:.1f} M | {seconds:.0f} s |", flush=True)
    finally:
        prover.close()
    return 1 if failed else 0


def _in_parallel(chosen: list[str], args: argparse.Namespace) -> int:
    """Each key in a process of its own (this script with ``--only KEY``), ``args.jobs`` at once;
    their rows are printed as they finish, their reports of what is not proved go to stderr.
    They share the cache: each query proved by one is there for the others' next runs."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    common = ["--records", str(args.records), "--sms", str(args.sms), "--rlimit", str(args.rlimit),
              "--budget", str(args.budget), "--cache", str(args.cache), "--retries", str(args.retries),
              "--lanes", str(args.lanes)]
    common += ["--retry-budget", str(args.retry_budget)] if args.retry_budget is not None else []
    common += ["--no-cache"] if args.no_cache else []
    common += ["--no-race"] if args.no_race else []

    def one(key: str) -> int:
        done = subprocess.run([sys.executable, __file__, "--only", key, *common], capture_output=True, text=True)
        rows = [line for line in done.stdout.splitlines() if line.startswith(f"| {key} |")]
        print("\n".join(rows) or f"| {key} | (exit {done.returncode}, no row) |", flush=True)
        print(done.stderr, end="", file=sys.stderr, flush=True)
        return done.returncode

    with ThreadPoolExecutor(args.jobs) as pool:
        codes = list(pool.map(one, chosen))
    return 1 if any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
