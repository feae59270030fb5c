"""``argus verify FILE``: prove every kernel of a Python file, or print counterexamples.

Exit status: 0 when every VC of every kernel is proved, 1 when some VC is refuted (a
counterexample is printed), 2 when some VC is unknown or an error occurred.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from argus.errors import ArgusError

FORMAT = "argus.verify"
FORMAT_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a Python file defining @argus.spec.kernel functions, or module:name of "
                        "an importable kernel or kernel factory (e.g. argus.kernels.gemm:gemm_kernel)")
    parser.add_argument("--kernel", action="append", metavar="NAME",
                        help="verify only this kernel (repeatable)")
    parser.add_argument("--consts", nargs="+", default=[], metavar="K=V",
                        help="const values of the specialization (Python literals)")
    parser.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    parser.add_argument("--smtlib", metavar="DIR", help="write every query as an SMT-LIB file under DIR")
    parser.add_argument("--solver", choices=("portfolio", "race", "z3", "cvc5"), default="portfolio",
                        help="portfolio (default): z3, then cvc5 on the VCs z3 gives up on; race: both "
                        "on every VC, first answer wins; or a single solver")
    parser.add_argument("--budget", type=float, default=20.0, metavar="S",
                        help="wall-clock safety net per VC in seconds (the solvers' resource limits decide "
                        "verdicts reproducibly; a VC stopped by the clock is reported as a timeout)")
    parser.add_argument("--rlimit", type=int, default=None, metavar="UNITS",
                        help="resource limit per VC and solver (z3 rlimit, cvc5 rlimit-per; default: the "
                        "portfolio's, 50 M for z3); recorded in the proof record")
    parser.add_argument("--retries", type=int, default=1, metavar="N",
                        help="check a query the solvers gave up on again, up to N times, each time alone in "
                        "freshly started solver processes under the same limits (default 1; 0: never)")
    parser.add_argument("--race", action="store_true",
                        help="retries: where fewer queries are open than solver lanes, race several random "
                        "seeds of each at once (the first to decide one wins)")
    parser.add_argument("--retry-budget", type=float, default=None, metavar="S",
                        help="wall-clock safety net of the split parts and the retries (default: --budget): "
                        "a short --budget sorts out the hard queries, and only they get this clock")
    parser.add_argument("--no-split", action="store_true",
                        help="do not split a query the solvers gave up on into parts (the goal's conjuncts, "
                        "the definedness guards by divisor) before the retries")
    parser.add_argument("--records", metavar="DIR", help="write a proof record per kernel under DIR")
    parser.add_argument("--cache", metavar="DIR", help="reuse proofs of unchanged VCs from DIR")
    parser.add_argument("--seed-cache", action="append", default=[], metavar="RECORDS",
                        help="also reuse the proved VCs listed in the proof records under RECORDS (a directory "
                        "such as proofs/, or one record): an edited kernel re-solves only what the edit changed")
    parser.add_argument("--no-replay", action="store_true",
                        help="do not replay counterexamples on the reference interpreter")


def parse_consts(items: list[str]) -> dict[str, Any]:
    """``["BLOCK=128", "SYNC=False"]`` -> ``{"BLOCK": 128, "SYNC": False}``."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise ArgusError(f"--consts {item!r}: expected NAME=VALUE", hint="e.g. --consts BLOCK=128 SYNC=False")
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[name] = text
    return out


def load_kernels(path: str | Path) -> list[Any]:
    """The ``@kernel`` definitions of a file, in definition order; or, for ``module:name`` (an
    importable module and one of its attributes, e.g. ``argus.kernels.gemm:gemm_kernel``), that
    kernel, or what a factory of that name returns when called without arguments, or with the
    literal arguments given (``argus.kernels.gemm:gemm_kernel('f16', 'f16')``)."""
    from argus.spec.kernel import Kernel

    text = str(path)
    if not Path(text).exists() and ":" in text and not text.endswith(".py"):
        return [_import_kernel(text)]
    path = Path(path).resolve()
    if not path.exists():
        raise ArgusError(f"{path}: no such file", hint="give a Python file, or module:name of an importable kernel")
    name = f"argus_verify_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ArgusError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return [v for v in vars(module).values() if isinstance(v, Kernel)]


def _import_kernel(spec: str) -> Any:
    """The kernel ``module:name`` names (see :func:`load_kernels`)."""
    import importlib

    from argus.spec.kernel import Kernel

    module_name, _, attr = spec.partition(":")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if "(" in attr:  # a factory called with literal arguments: name('f16', 'f16', bias=True)
        try:
            call = ast.parse(attr, mode="eval").body
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                raise ValueError
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        except (SyntaxError, ValueError):
            raise ArgusError(f"{spec}: expected module:name or module:factory(literal arguments)") from None
        attr = call.func.id
    if not module_name or not attr.isidentifier():
        raise ArgusError(f"{spec}: expected module:name (e.g. argus.kernels.gemm:gemm_kernel)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ArgusError(f"{spec}: cannot import {module_name} ({e})") from None
    value = getattr(module, attr, None)
    if value is None:
        raise ArgusError(f"{spec}: module {module_name} has no attribute {attr!r}")
    if not isinstance(value, Kernel) and callable(value):
        try:
            value = value(*args, **kwargs)
        except TypeError as e:
            raise ArgusError(f"{spec}: {attr} is neither a kernel nor a factory callable without arguments ({e})") \
                from None
    if not isinstance(value, Kernel):
        raise ArgusError(f"{spec}: {attr} is not an @argus.spec.kernel (got {type(value).__name__})")
    return value


def specialize_one(path: str | Path, kernel: str | None, consts: list[str]) -> Any:
    """The specialization ``--consts`` of the one kernel of a file (``kernel`` chooses among
    several), as the single-kernel commands (``compile``, ``run``) take it."""
    kernels = load_kernels(path)
    if kernel:
        kernels = [k for k in kernels if k.name == kernel]
        if not kernels:
            raise ArgusError(f"{path}: no kernel named {kernel!r}")
    if len(kernels) != 1:
        names = ", ".join(k.name for k in kernels) or "none"
        raise ArgusError(f"{path} defines {len(kernels)} kernels ({names})", hint="choose one with --kernel NAME")
    return kernels[0].specialize(**parse_consts(consts))


def record_path(directory: str | Path, ir: Any) -> Path:
    """Where ``--records DIR`` saves the record of a specialization: ``DIR/name[K=V-...].json``."""
    consts_text = "-".join(f"{n}={v}" for n, v in ir.consts)
    return Path(directory) / f"{ir.name}{'[' + consts_text + ']' if consts_text else ''}.json"


def _progress(stream: Any):
    if not getattr(stream, "isatty", lambda: False)():
        return None

    def show(done: int, total: int, vc: Any) -> None:
        stream.write(f"\r  {done + 1}/{total} VCs {vc.property:<15}")
        stream.flush()
        if done + 1 == total:
            stream.write("\r" + " " * 40 + "\r")

    return show


def run(args: argparse.Namespace) -> int:
    from argus.proofs.provers import make_prover
    from argus.proofs.record import VCCache
    from argus.proofs.verify import verify_kernel

    kernels = load_kernels(args.file)
    if args.kernel:
        missing = sorted(set(args.kernel) - {k.name for k in kernels})
        if missing:
            raise ArgusError(f"{args.file}: no kernel named {', '.join(missing)}",
                             hint=f"kernels in the file: {', '.join(k.name for k in kernels) or 'none'}")
        kernels = [k for k in kernels if k.name in args.kernel]
    if not kernels:
        raise ArgusError(f"{args.file}: defines no @argus.spec.kernel")
    consts = parse_consts(args.consts)
    unknown = set(consts) - {n for k in kernels for n in k.const_names()}
    if unknown:
        raise ArgusError(f"--consts: no kernel has a const named {', '.join(sorted(unknown))}")
    cache = VCCache(args.cache) if args.cache or args.seed_cache else None
    for records in args.seed_cache:
        if not Path(records).exists():
            raise ArgusError(f"--seed-cache {records}: no such file or directory",
                             hint="name a directory of proof records (e.g. proofs/) or one record file")
        cache.seed(records)
    if args.budget <= 0:
        raise ArgusError(f"--budget {args.budget}: must be positive")
    if args.retries < 0:
        raise ArgusError(f"--retries {args.retries}: must be 0 or more")
    if args.retry_budget is not None and args.retry_budget <= 0:
        raise ArgusError(f"--retry-budget {args.retry_budget}: must be positive")
    if args.rlimit is not None and args.rlimit <= 0:
        raise ArgusError(f"--rlimit {args.rlimit}: must be positive")
    prover = make_prover(args.solver, wall_clock_s=args.budget, rlimit=args.rlimit)
    reports = []
    try:
        for k in kernels:
            mine = {n: v for n, v in consts.items() if n in k.const_names()}
            ir = k.specialize(**mine)
            report = verify_kernel(ir, prover=prover, cache=cache, smtlib_dir=args.smtlib,
                                   replay=not args.no_replay, retries=args.retries, split=not args.no_split,
                                   retry_budget=args.retry_budget, race=args.race, progress=None if args.json else _progress(sys.stderr))
            reports.append(report)
            if args.records:
                report.record.save(record_path(args.records, ir))
            if not args.json:
                print(report.human(), flush=True)
    finally:
        prover.close()
    verdicts = {r.verdict for r in reports}
    code = 1 if "refuted" in verdicts else 2 if verdicts & {"unknown", "error"} else 0
    if args.json:
        print(json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "file": str(args.file),
                          "exit": code, "kernels": [r.to_json() for r in reports]}, indent=1))
    return code
