"""The ``argus`` command.

Each subcommand lives in its own module that exposes ``add_arguments(parser)`` and
``run(args) -> int``; heavy imports (solvers, drivers) happen inside ``run`` so that
``argus --help`` and ``argus --version`` stay fast and never fail on a missing tool.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from argus import __version__
from argus.errors import ArgusError

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("argus.doctor", "report what this machine can do (solvers, toolchains, GPUs)"),
    "demo": ("argus.demo", "verify, refute, interpret, compile and run the shipped examples"),
    "smt-diff": ("argus.smt.cli_diff", "differential testing of cvc5 and Z3 on SMT queries"),
    "verify": ("argus.proofs.cli_verify", "prove the kernels of a file or print counterexamples"),
    "compile": ("argus.backend_ptx.cli", "prove a kernel specialization and write its PTX, cubin or gfx942 code object"),
    "run": ("argus.run_cli", "run a kernel on random inputs (GPU or gfx942 emulator) against the reference interpreter"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="argus",
        description="Verification-first GPU kernels: prove, then emit PTX / AMDGCN.",
    )
    parser.add_argument("--version", action="version", version=f"argus {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ArgusError as err:
        print(f"argus: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (e.g. `argus doctor --json | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("argus: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
