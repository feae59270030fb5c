"""``argus compile FILE``: prove a kernel specialization and write its PTX or cubin.

The gate applies: a specialization that is not proved (no matching proof record, and the
verifier here does not prove it) is refused with its report, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from argus.errors import ArgusError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a Python file defining @argus.spec.kernel functions")
    parser.add_argument("--kernel", metavar="NAME", help="the kernel to compile (needed when the file has several)")
    parser.add_argument("--target", choices=("sm_90a", "sm_80", "gfx942"), default="sm_90a", help="GPU architecture")
    parser.add_argument("--emit", choices=("ptx", "cubin", "asm", "hsaco"), default=None,
                        help="what to write (default cubin; gfx942: hsaco or asm, default hsaco)")
    parser.add_argument("--policy", metavar="K=V,...", help="gfx942 emitter policies (argus.backend_amdgcn.isel.Policy)")
    parser.add_argument("--consts", nargs="+", default=[], metavar="K=V", help="const values of the specialization")
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="output file")


def run(args: argparse.Namespace) -> int:
    from argus.backend_ptx.assemble import build_cubin
    from argus.backend_ptx.emit import emit_ptx
    from argus.proofs.cli_verify import specialize_one
    from argus.runtime.gate import VerificationRequired, require_proof
    from argus.spec.kernel import kernel_hash

    specialized = specialize_one(args.file, args.kernel, args.consts)
    try:
        require_proof(specialized)
    except VerificationRequired as refusal:
        print(f"argus compile: refused: {refusal}", file=sys.stderr)
        return 1
    if args.target == "gfx942":
        from argus.backend_amdgcn.cli import write_output

        return write_output(specialized, args)
    args.emit = args.emit or "cubin"
    if args.emit not in ("ptx", "cubin"):
        raise ArgusError(f"--emit {args.emit} is not an NVIDIA output", hint="use --emit ptx or --emit cubin")
    ptx = emit_ptx(specialized, args.target)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.emit == "ptx":
        out.write_text(ptx.text)
    else:
        cubin = build_cubin(ptx, kernel_hash(specialized))
        out.write_bytes(cubin.image)
        if cubin.log:
            print(cubin.log, file=sys.stderr)
    print(f"{specialized.name} ({args.target}): wrote {out}")
    return 0
