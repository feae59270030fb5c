"""``argus smt-diff``: differential testing of cvc5 and Z3.

Inputs (any mix):

* ``PATH ...``: SMT-LIB 2 files, or directories searched recursively for ``*.smt2`` (the
  queries ``argus verify --smtlib DIR`` writes are such a directory);
* ``--generate N --seed S``: ``N`` random queries from the index-arithmetic family
  (:mod:`argus.smt.generate`), reproducible from the seed.

Every query runs on every solver to completion, each ``sat`` model is evaluated on the
original terms, small domains are enumerated as an independent oracle, and each query is
classified (:mod:`argus.smt.diff`).  Solver-bug findings (soundness, invalid model, crash) are
minimized and, with ``--out DIR``, written as standalone ``.smt2`` reproducers.

Exit status: 0 when nothing points at a solver bug (or at argus), 1 otherwise, 2 on a usage
or configuration error.

``--json`` prints one JSON object on stdout (progress and tables go to stderr):

=====================  ===============================================================
key                    value
=====================  ===============================================================
``schema``             format version (1)
``argus_version``      argus's version
``solvers``            ``{name: {"version", "options", "rlimit"}}``
``seed``               the ``--seed`` (``null`` without ``--generate``)
``total``              number of queries
``elapsed_s``          wall-clock seconds of the campaign
``counts``             ``{category: n}`` for every category (see :data:`CATEGORIES`)
``findings``           number of queries in a bug category
``queries``            one object per query: ``id``, ``source``, ``logic``, ``category``,
                       ``wrong`` (solvers blamed), ``truth``, ``detail``, ``oracle``
                       (``status``, ``points``, ``undefined_points``), ``solvers``
                       (``{name: {"status", "reason", "message", "seconds", "resources",
                       "model_check"}}``), ``reproducer``, ``minimized``, ``reproduces``
=====================  ===============================================================
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from argus.errors import ArgusError

#: the categories, repeated here so that ``--help`` does not import the solvers
_CATEGORY_HELP = (
    "soundness, invalid_model, crash, internal, underspecified, error, unknown_vs_answer, "
    "performance_gap, both_unknown, agree"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help=".smt2 files or directories")
    parser.add_argument(
        "--generate", type=int, metavar="N", default=0, help="also test N generated queries"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --generate (default 0)")
    parser.add_argument(
        "--solvers",
        default="z3,cvc5",
        help="comma-separated solvers to compare (default: z3,cvc5)",
    )
    parser.add_argument(
        "--options",
        action="append",
        default=[],
        metavar="SOLVER:NAME=VALUE[,NAME=VALUE]",
        help="solver options, e.g. 'z3:rewriter.hi_div0=false' or 'cvc5:seed=3' (repeatable)",
    )
    parser.add_argument(
        "--rlimit",
        action="append",
        default=[],
        metavar="[SOLVER=]UNITS",
        help="resource limit per check (z3 rlimit, cvc5 rlimit-per), for all solvers or one",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="wall-clock safety net per check (default 10)",
    )
    parser.add_argument(
        "--oracle-points",
        type=int,
        default=4096,
        metavar="N",
        help="enumerate queries with at most N points (default 4096; 0 disables)",
    )
    parser.add_argument(
        "--gap", type=float, default=10.0, help="performance gap ratio to report (default 10)"
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="reuse solver contexts between queries (faster; by default every query gets a "
        "fresh context, as a stock solver run on a reproducer file would)",
    )
    parser.add_argument("--out", metavar="DIR", help="write minimized reproducers to DIR")
    parser.add_argument(
        "--no-minimize", action="store_true", help="keep findings at their original size"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    parser.add_argument(
        "--show",
        default="",
        metavar="CATEGORIES",
        help=f"also list queries of these categories in the table (of: {_CATEGORY_HELP})",
    )


def parse_options(specs: list[str], solvers: list[str]) -> dict[str, dict[str, str]]:
    """``['z3:a=1,b=2', 'cvc5:c=3']`` -> ``{'z3': {'a': '1', 'b': '2'}, 'cvc5': {'c': '3'}}``."""
    out: dict[str, dict[str, str]] = {}
    for spec in specs:
        solver, sep, rest = spec.partition(":")
        if not sep or not rest:
            raise ArgusError(
                f"bad --options {spec!r}", hint="write SOLVER:NAME=VALUE, e.g. z3:random_seed=3"
            )
        if solver not in solvers:
            raise ArgusError(
                f"--options names solver {solver!r}, which is not compared",
                hint=f"compared solvers: {', '.join(solvers)}",
            )
        for item in rest.split(","):
            name, eq, value = item.partition("=")
            if not eq or not name.strip() or not value.strip():
                raise ArgusError(
                    f"bad option {item!r} in --options {spec!r}", hint="write NAME=VALUE"
                )
            out.setdefault(solver, {})[name.strip()] = value.strip()
    return out


def parse_rlimits(specs: list[str], solvers: list[str]) -> dict[str, int] | None:
    """``['1000']`` or ``['z3=5000', 'cvc5=200']`` -> per-solver limits (``None``: defaults)."""
    if not specs:
        return None
    from argus.smt.portfolio import DEFAULT_RLIMIT

    out = {s: DEFAULT_RLIMIT.get(s, 0) for s in solvers}
    for spec in specs:
        solver, sep, value = spec.rpartition("=")
        try:
            units = int(value)
        except ValueError:
            raise ArgusError(f"bad --rlimit {spec!r}", hint="write UNITS or SOLVER=UNITS") from None
        if units < 0:
            raise ArgusError(f"bad --rlimit {spec!r}: the limit must be >= 0")
        if not sep:
            out = dict.fromkeys(solvers, units)
        elif solver in solvers:
            out[solver] = units
        else:
            raise ArgusError(f"--rlimit names solver {solver!r}, which is not compared")
    return out


def run(args: argparse.Namespace) -> int:
    from argus.smt.diff import BUG_CATEGORIES, Campaign, smtlib_queries
    from argus.smt.generate import generate
    from argus.smt.portfolio import Portfolio

    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    if len(solvers) < 2:
        raise ArgusError("smt-diff compares at least two solvers", hint="e.g. --solvers z3,cvc5")
    if not args.paths and args.generate <= 0:
        raise ArgusError(
            "nothing to test", hint="give .smt2 files or directories, or --generate N --seed S"
        )
    if args.generate < 0:
        raise ArgusError("--generate needs a count >= 0")
    options = parse_options(args.options, solvers)
    rlimits = parse_rlimits(args.rlimit, solvers)
    show = {c.strip() for c in args.show.split(",") if c.strip()}

    queries: list[tuple[str, Any]] = []
    if args.paths:
        missing = [p for p in args.paths if not _exists(p)]
        if missing:
            raise ArgusError(f"no such file or directory: {missing[0]}")
        queries.extend(smtlib_queries(args.paths))
    if args.generate:
        queries.extend(generate(args.generate, args.seed))

    from rich.console import Console

    console = Console(stderr=True)
    with Portfolio(
        solvers, rlimit=rlimits, wall_clock_s=args.timeout, options=options, isolated=not args.warm
    ) as p:
        campaign = Campaign(
            p,
            oracle_points=args.oracle_points,
            gap=args.gap,
            minimize=not args.no_minimize,
            out_dir=args.out,
        )
        report = _run_with_progress(
            campaign, queries, args.seed if args.generate else None, console
        )
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    _print_summary(report, console if args.json else Console(), show | BUG_CATEGORIES)
    return 1 if report.findings() else 0


def _exists(path: str) -> bool:
    import os

    return os.path.exists(path)


def _run_with_progress(campaign: Any, queries: list, seed: int | None, console: Any) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    counts: dict[str, int] = {}
    with Progress(
        TextColumn("[bold]smt-diff"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("", total=len(queries))

        def advance(outcome: Any) -> None:
            counts[outcome.category] = counts.get(outcome.category, 0) + 1
            shown = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            progress.update(task, advance=1, description=shown)

        return campaign.run(queries, seed=seed, on_outcome=advance)


def _print_summary(report: Any, console: Any, show: set[str]) -> None:
    from rich.table import Table

    summary = Table(title="smt-diff summary", show_edge=False)
    summary.add_column("category")
    summary.add_column("queries", justify="right")
    for category, count in report.counts().items():
        if count:
            style = "bold red" if category in show and category != "agree" else ""
            summary.add_row(category, str(count), style=style)
    console.print(summary)
    solvers = ", ".join(f"{n} {i['version']}" for n, i in report.solvers.items())
    console.print(f"{len(report.outcomes)} queries in {report.elapsed_s:.1f} s; {solvers}")
    listed = [o for o in report.outcomes if o.category in show and o.category != "agree"]
    if listed:
        table = Table(title="findings", show_edge=False)
        for column in ("query", "category", "wrong", "detail", "reproducer"):
            table.add_column(column, overflow="fold")
        for o in listed:
            table.add_row(
                o.id, o.category, ", ".join(o.classification.wrong), o.classification.detail,
                o.reproducer or "",
            )  # fmt: skip
        console.print(table)
