"""Throughput of small QF_LIA verification conditions through the cvc5 ‖ Z3 portfolio.

    .venv/bin/python benchmarks/smt_throughput.py [--count 2000] [--no-record]

The VCs are what the verifier asks about index arithmetic after specialization: bounds of
``(i * s + c) // d`` and ``(i * s + c) % d`` under range hypotheses on thread / loop
variables, about two thirds valid, the rest refuted with a counterexample.  Each goes through
:meth:`argus.smt.Portfolio.prove`: definedness guards, both warm workers racing, the loser
cancelled, every counterexample evaluated on the original terms.

Printed side by side from one run:

* ``portfolio, isolated``: the portfolio as configured by default, every VC in a fresh solver
  context in its warm worker (the figure that counts; target >= 200 VCs/s on 2 cores);
* ``portfolio, warm contexts``: ``Portfolio(isolated=False)``, reusing solver contexts;
* ``z3 in-process, warm``: one warm in-process :class:`argus.smt.session.Session`, no
  processes, no racing, no model check: the floor cost of asking a solver;
* ``z3 in-process, cold``: a fresh session per VC (:func:`argus.smt.session.solve`).

The result (date, machine, command, figures) is appended to ``benchmarks/RESULTS.md``
unless ``--no-record`` is given.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import sys
import time
from pathlib import Path

from argus.smt import Portfolio, Query, int_var, le, lt, validity_queries
from argus.smt.session import Session, solve

TARGET_PER_S = 200


def vcs(count: int, seed: int = 0) -> list[tuple[dict, object]]:
    """``count`` (hypotheses, goal) pairs of the index-arithmetic kind, deterministic."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        size = rng.choice((32, 64, 128, 256))
        tile = rng.choice((4, 8, 16))
        i = int_var("i", 0, 1023)
        n = int_var("n", 1, 4096)
        k = int_var("k", 0, 63)
        stride = rng.choice((1, 2, 4))
        offset = rng.randint(0, tile - 1)
        index = i * stride + k * tile + offset
        hypotheses = {"i_lt_size": lt(i, size), "k_tiles": lt(k * tile, n), "n_max": le(n, 1024)}
        if rng.random() < 0.5:
            bound = (size * stride + 1024 + tile) // tile
            if rng.random() < 0.33:
                bound = rng.randint(1, bound)  # often too tight: refuted
            goal = lt(index // tile, bound)
        else:
            goal = lt(index % tile, rng.choice((tile, tile, tile - 1)))
        out.append((hypotheses, goal))
    return out


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            ]
        if names:
            cpu = names[0]
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = f", load average {os.getloadavg()[0]:.1f} at start" if hasattr(os, "getloadavg") else ""
    return (
        f"{cpu}, {cores} cores available, {platform.system()} {platform.release()}, "
        f"python {platform.python_version()}{load}"
    )


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def run_portfolio(items: list, isolated: bool) -> tuple[float, dict[str, int], dict[str, str]]:
    verdicts = {"proved": 0, "refuted": 0, "unknown": 0}
    with Portfolio(("z3", "cvc5"), isolated=isolated) as portfolio:
        versions = portfolio.versions()
        for hypotheses, goal in items[:50]:  # warm-up: scratch contexts, caches
            portfolio.prove(hypotheses, goal)
        started = time.perf_counter()
        for hypotheses, goal in items:
            verdicts[portfolio.prove(hypotheses, goal).verdict] += 1
        elapsed = time.perf_counter() - started
    return elapsed, verdicts, versions


def run_warm_session(items: list) -> float:
    session = Session("z3", logic="QF_LIA")
    queries = [_single_query(h, g) for h, g in items]
    started = time.perf_counter()
    for query in queries:
        session.push()
        session.add_query(query)
        session.check(model=True)
        session.pop()
    return time.perf_counter() - started


def run_cold(items: list) -> float:
    queries = [_single_query(h, g) for h, g in items]
    started = time.perf_counter()
    for query in queries:
        solve(query, "z3")
    return time.perf_counter() - started


def _single_query(hypotheses: dict, goal: object) -> Query:
    goal_query, _ = validity_queries(hypotheses, goal)
    return goal_query


def record(lines: list[str]) -> Path:
    path = Path(__file__).with_name("RESULTS.md")
    if not path.exists():
        path.write_text("# Benchmark results\n\nResults worth keeping, newest last.\n")
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n" + "\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="VCs to prove (default 2000)")
    parser.add_argument("--no-record", action="store_true", help="do not touch RESULTS.md")
    args = parser.parse_args(argv)
    items = vcs(args.count)

    elapsed, verdicts, versions = run_portfolio(items, isolated=True)
    elapsed_warm, _, _ = run_portfolio(items, isolated=False)
    warm = run_warm_session(items)
    cold = run_cold(items[: max(1, args.count // 4)])
    cold_count = max(1, args.count // 4)

    portfolio_rate = rate(args.count, elapsed)
    rows = [
        ("portfolio z3 ‖ cvc5, isolated contexts (the default)", portfolio_rate),
        ("portfolio z3 ‖ cvc5, warm contexts (isolated=False)", rate(args.count, elapsed_warm)),
        ("z3 in-process, warm session (no processes, no checks)", rate(args.count, warm)),
        ("z3 in-process, cold session per VC", rate(cold_count, cold)),
    ]
    where = machine()
    print(f"machine: {where}")
    print(f"solvers: z3 {versions.get('z3')}, cvc5 {versions.get('cvc5')}")
    print(f"{args.count} QF_LIA VCs: {verdicts}")
    print(f"{'method':56} {'VCs/s':>7} {'vs portfolio':>13}")
    for name, value in rows:
        print(f"{name:56} {value:7.0f} {value / portfolio_rate:12.2f}x")
    verdict = "meets" if portfolio_rate >= TARGET_PER_S else "MISSES"
    print(
        f"portfolio throughput {portfolio_rate:.0f} VCs/s {verdict} the target of {TARGET_PER_S}/s"
    )

    if not args.no_record:
        command = "python benchmarks/smt_throughput.py" + (
            f" --count {args.count}" if args.count != 2000 else ""
        )
        lines = [
            "## SMT portfolio throughput, small QF_LIA VCs",
            "",
            f"{datetime.date.today().isoformat()}, `{command}`, {where}; "
            f"z3 {versions.get('z3')}, cvc5 {versions.get('cvc5')}; "
            f"{args.count} VCs ({verdicts['proved']} proved, {verdicts['refuted']} refuted, "
            f"{verdicts['unknown']} unknown):",
            "",
            "| method | VCs/s | vs portfolio |",
            "|---|---|---|",
            *(f"| {name} | {value:.0f} | {value / portfolio_rate:.2f}x |" for name, value in rows),
            "",
            f"Target: >= {TARGET_PER_S} VCs/s through the portfolio ({verdict.lower()}).",
        ]
        print(f"recorded in {record(lines)}")
    return 0 if portfolio_rate >= TARGET_PER_S else 1


if __name__ == "__main__":
    sys.exit(main())
