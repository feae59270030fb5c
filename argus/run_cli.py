"""``argus run FILE``: run a kernel on fresh random inputs and compare it with the reference interpreter.

::

    argus run examples/vector_add.py --target gfx942 --emulate --sizes n=1000
    argus run examples/gemm_mfma.py --target gfx942 --emulate --sizes M=128 N=128 K=64 --unproved
    argus run examples/vector_add.py --target sm_90a --sizes n=1000000      # needs a CUDA GPU

Every tensor parameter gets fresh random values (normal, rounded to the element type, never
zero; ``--seed``); the kernel runs — for ``--target gfx942 --emulate`` in the gfx942
instruction-level emulator on the linked code object, for ``sm_90a`` on the CUDA device
through :func:`argus.runtime.compile` — and the reference interpreter runs on the same inputs.
Each tensor is compared: bit-exact, or within ``|got - ref| <= rtol * (|ref| + max|ref|)``
(a norm-relative tolerance: MMA and reduction results may cancel).  Exit status 0 when every
tensor matches and the emulator reported no hazard, 1 otherwise.

The verification gate applies as for ``argus compile``: a specialization that is not proved is
refused.  ``--unproved`` lets the *emulator* run a specialization without the gate (nothing is
shipped; the output says so).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from typing import Any

from argus.errors import ArgusError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a Python file defining @argus.spec.kernel functions")
    parser.add_argument("--kernel", metavar="NAME", help="the kernel to run (needed when the file has several)")
    parser.add_argument("--target", choices=("sm_90a", "gfx942"), default="sm_90a", help="GPU architecture")
    parser.add_argument("--emulate", action="store_true",
                        help="gfx942: run in the instruction-level emulator (no MI300X needed)")
    parser.add_argument("--sizes", "--shape", nargs="+", default=[], metavar="K=V", dest="sizes",
                        help="values of the index parameters and tensor size symbols (e.g. M=128 N=64)")
    parser.add_argument("--consts", nargs="+", default=[], metavar="K=V", help="const values of the specialization")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance of the comparison (default 1e-5)")
    parser.add_argument("--policy", metavar="K=V,...", help="gfx942 emitter policies (argus.backend_amdgcn.isel.Policy)")
    parser.add_argument("--unproved", action="store_true",
                        help="with --emulate: skip the verification gate (for kernels not proved yet; nothing is shipped)")


def parse_sizes(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise ArgusError(f"--sizes {item!r}: expected NAME=VALUE", hint="e.g. --sizes M=128 N=64")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ArgusError(f"--sizes {item!r}: {text!r} is not a number")
        out[name] = value
    return out


def _choose(args: argparse.Namespace) -> Any:
    from argus.proofs.cli_verify import specialize_one

    return specialize_one(args.file, args.kernel, args.consts)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from argus.backend_amdgcn.emulate_run import compare, random_inputs
    from argus.ir.interpreter import Interpreter
    from argus.runtime.gate import VerificationRequired, require_proof

    if args.emulate and args.target != "gfx942":
        raise ArgusError("--emulate runs gfx942 code", hint="use --target gfx942 --emulate")
    if args.unproved and not args.emulate:
        raise ArgusError("--unproved only applies to the emulator", hint="add --target gfx942 --emulate")
    if args.target == "gfx942" and not args.emulate:
        raise ArgusError("running gfx942 code needs an MI300X (not reachable from argus run)",
                         hint="use --emulate to run the linked code object in the gfx942 emulator")
    if not args.emulate:
        _require_cuda()
    specialized = _choose(args)
    sizes = parse_sizes(args.sizes)
    if not args.unproved:
        try:
            require_proof(specialized)
        except VerificationRequired as refusal:
            print(f"argus run: refused: {refusal}", file=sys.stderr)
            print("argus run: (--target gfx942 --emulate --unproved runs it in the emulator anyway)", file=sys.stderr)
            return 1
    rng = np.random.default_rng(args.seed)
    inputs = random_inputs(specialized, sizes, rng)
    shown = " ".join(f"{k}={v}" for k, v in sizes.items())
    print(f"argus run: {specialized.name} on {args.target}{' (emulated)' if args.emulate else ''}"
          f"{', gate skipped (--unproved)' if args.unproved else ''}; sizes {shown or '-'}; seed {args.seed}")
    # the reference first: it checks the kernel's declared assumptions on these inputs
    start = time.perf_counter()
    ref = Interpreter(specialized).run({k: v.copy() for k, v in inputs.items()}, sizes)
    print(f"  reference interpreter in {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    findings: list[Any] = []
    emulation = None
    if args.emulate:
        from argus.backend_amdgcn.cli import parse_policy
        from argus.backend_amdgcn.emulate_run import emulate_kernel

        got, emulation = emulate_kernel(specialized, {k: v.copy() for k, v in inputs.items()}, sizes,
                                        policy=parse_policy(args.policy))
        findings = emulation.findings
        print(f"  emulated {emulation.workgroups} workgroup(s), {emulation.instructions} wave instructions "
              f"in {time.perf_counter() - start:.2f} s")
    else:
        got = _run_cuda(specialized, inputs, sizes)
        print(f"  ran on {_cuda_name()} in {time.perf_counter() - start:.2f} s")
    ok = True
    for f in findings:
        print(f"  hazard: {f}")
        ok = False
    for name in ref:
        scale = float(np.nanmax(np.abs(ref[name]), initial=0.0))
        result = compare(name, ref[name], got[name], rtol=args.rtol, atol=args.rtol * scale, emulation=emulation)
        print("  " + result.line().replace("\n", "\n  "))
        ok = ok and result.ok
    print(f"argus run: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def _cuda_name() -> str:
    import torch

    return str(torch.cuda.get_device_name())


def _require_cuda() -> None:
    try:
        import torch
    except ImportError:
        raise ArgusError("--target sm_90a runs on a CUDA GPU and needs torch, which is not installed",
                         hint="pip install torch, or use --target gfx942 --emulate") from None
    if not torch.cuda.is_available():
        raise ArgusError("--target sm_90a runs on a CUDA GPU, and no CUDA GPU is available here",
                         hint="run it on a machine with an H100/H200, or use --target gfx942 --emulate")


def _run_cuda(kernel: Any, inputs: dict[str, Any], sizes: dict[str, Any]) -> dict[str, Any]:
    """Launch the proved specialization on the CUDA device; returns the tensors as values."""
    import numpy as np
    import torch

    from argus import symbolic
    from argus.backend_amdgcn.emulate_run import size_values
    from argus.ir import numerics
    from argus.runtime import compile as compile_kernel
    from argus.runtime.launch import TORCH_DTYPES

    compiled = compile_kernel(kernel, target="sm_90a")
    env = size_values(kernel, sizes)
    args: list[Any] = []
    tensors: dict[str, Any] = {}
    for p in kernel.params:
        if p.kind == "tensor":
            layout = p.buffer.layout
            shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
            dims = tuple(int(symbolic.evaluate(d, env)) for d in shape)
            bits = numerics.to_bits(p.buffer.dtype, inputs[p.name].reshape(-1))
            signed = np.dtype(f"i{bits.dtype.itemsize}")
            t = torch.from_numpy(bits.view(signed).copy()).cuda()
            want = getattr(torch, TORCH_DTYPES[p.buffer.dtype.name])
            tensors[p.name] = t.view(want).reshape(dims)
            args.append(tensors[p.name])
        elif p.kind == "index":
            args.append(int(sizes[p.name]))
        else:
            args.append(float(sizes[p.name]))
    compiled(*args)
    torch.cuda.synchronize()
    out = {}
    for p in kernel.params:
        if p.kind == "tensor":
            t = tensors[p.name].reshape(-1)
            width = t.element_size()
            raw = t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).cpu().numpy()
            unsigned = raw.view(np.dtype(f"u{width}"))
            out[p.name] = (numerics.from_bits(p.buffer.dtype, unsigned) if p.buffer.dtype.is_float
                           else unsigned.view(np.dtype(f"i{width}")).astype(np.int64)).reshape(inputs[p.name].shape)
    return out
