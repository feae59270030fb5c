"""Running an IR kernel specialization in the gfx942 emulator, next to the reference interpreter.

:func:`emulate_kernel` emits the specialization (:func:`argus.backend_amdgcn.compile.emit`),
assembles and links it, and runs the linked code object in the emulator
(:mod:`argus.backend_amdgcn.emulate`) on the given inputs: tensors are encoded in their
element types' bit patterns (``argus.ir.numerics.to_bits``), sizes and float scalars go to
the kernarg segment, the grid is the kernel's launch grid at those sizes.  It returns the
tensors after the launch as values (the interpreter's representation) and the emulation's
findings.  :func:`random_inputs` builds fresh random inputs (never zeros) and
:func:`compare` the per-tensor comparison :command:`argus run` prints.

:func:`emulate_kernel` does not pass the verification gate: callers decide (``argus run``
refuses a specialization that is not proved unless asked to emulate it anyway; the backend
tests emulate kernels the verifier cannot prove yet, and say so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from argus import symbolic
from argus.backend_amdgcn.emulate import Emulation, EmulationError, KernelImage, launch
from argus.errors import ArgusError
from argus.ir import nodes as N

__all__ = ["Comparison", "compare", "emulate_kernel", "random_inputs", "size_values"]


def size_values(kernel: N.Kernel, sizes: dict[str, Any]) -> dict[Any, int]:
    """Symbol -> value for the index parameters and tensor-shape symbols of ``kernel``."""
    env: dict[Any, int] = {}
    for p in kernel.params:
        if p.kind == "index":
            if p.name not in sizes:
                raise ArgusError(f"{kernel.name}: index parameter {p.name} needs a value",
                                 hint=f"give it a value (argus run: --sizes {p.name}=128)")
            env[p.symbol] = int(sizes[p.name])
    for p in kernel.params:
        if p.kind == "tensor":
            for s in symbolic.free_symbols(p.buffer.size):
                if s not in env:
                    if s.name not in sizes:
                        raise ArgusError(f"{kernel.name}: size {s.name} of tensor {p.name} needs a value",
                                         hint=f"give it a value (argus run: --sizes {s.name}=64)")
                    env[s] = int(sizes[s.name])
    return env


def _tensor_shape(p: N.Param, env: dict[Any, int]) -> tuple[int, ...]:
    """Tensors are passed flat (the element count of the buffer)."""
    return (int(symbolic.evaluate(p.buffer.size, env)),)


def random_inputs(kernel: N.Kernel, sizes: dict[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh random values for every tensor parameter (float: normal, rounded to the element
    type, zeros redrawn; integer: nonzero values in [-100, 100])."""
    from argus.ir import numerics

    env = size_values(kernel, sizes)
    out: dict[str, np.ndarray] = {}
    for p in kernel.params:
        if p.kind != "tensor":
            continue
        dt = p.buffer.dtype
        shape = _tensor_shape(p, env)
        if dt.is_float:
            values = rng.standard_normal(shape)
            values = np.where(np.abs(values) < 1e-3, 0.5, values)
            out[p.name] = numerics.round_to(dt, values).astype(np.float64)
        else:
            lo, hi = (0, 100) if not getattr(dt, "signed", True) else (-100, 100)
            values = rng.integers(lo, hi + 1, size=shape)
            out[p.name] = np.where(values == 0, 1, values).astype(np.int64)
    return out


def _encode(p: N.Param, values: np.ndarray) -> np.ndarray:
    from argus.ir import numerics

    return np.ascontiguousarray(numerics.to_bits(p.buffer.dtype, np.asarray(values).reshape(-1)))


def _decode(p: N.Param, bits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    from argus.ir import numerics

    dt = p.buffer.dtype
    if dt.is_float:
        return numerics.from_bits(dt, bits).reshape(shape)
    return bits.astype(np.int64).reshape(shape)


def emulate_kernel(kernel: N.Kernel, inputs: dict[str, np.ndarray], sizes: dict[str, Any] | None = None, *,
                   policy: Any = None, emitted: Any = None,
                   hsaco: bytes | None = None) -> tuple[dict[str, np.ndarray], Emulation]:
    """Emit (unless ``emitted`` is given), assemble and emulate ``kernel`` on ``inputs``."""
    from argus.backend_amdgcn.compile import emit

    sizes = dict(sizes or {})
    env = size_values(kernel, sizes)
    if emitted is None:
        emitted = emit(kernel, policy)
    image = KernelImage.from_hsaco(hsaco if hsaco is not None else emitted.assemble(), kernel.name)
    params = {p.name: p for p in kernel.params}
    symbols = {s.name: v for s, v in env.items()}
    args: list[Any] = []
    buffers: dict[str, np.ndarray] = {}
    for meta in image.arguments:
        name = meta[".name"]
        if meta[".value_kind"] == "global_buffer":
            p = params.get(name)
            if p is None or p.kind != "tensor":
                raise EmulationError(f"{kernel.name}: the code object's argument {name} is not a tensor parameter")
            if name not in inputs:
                raise ArgusError(f"{kernel.name}: tensor parameter {name} needs an array")
            expected = int(symbolic.evaluate(p.buffer.size, env))
            if np.asarray(inputs[name]).size != expected:
                raise ArgusError(f"{kernel.name}: tensor {name} has {np.asarray(inputs[name]).size} elements, "
                                 f"the kernel expects {expected}")
            buffers[name] = _encode(p, inputs[name])
            args.append(buffers[name])
        elif name in symbols:
            args.append(int(symbols[name]))
        elif name in sizes:
            p = params.get(name)
            args.append(float(sizes[name]) if p is not None and p.kind == "scalar" else int(sizes[name]))
        else:
            raise ArgusError(f"{kernel.name}: kernel argument {name} needs a value", hint=f"give it a value (argus run: --sizes {name}=1)")
    grid = tuple(int(symbolic.evaluate(g, env)) for g in kernel.launch.grid)
    if any(g <= 0 for g in grid):
        raise ArgusError(f"{kernel.name}: the launch grid {grid} is empty at these sizes")
    result = launch(image, args, grid)
    outputs = {name: _decode(params[name], bits, np.shape(inputs[name])) for name, bits in buffers.items()}
    return outputs, result


@dataclass
class Comparison:
    """One tensor of an emulated (or GPU) run against the reference interpreter."""

    name: str
    exact: bool
    max_abs: float
    max_rel: float
    tolerance: float
    mismatches: int
    first: int | None = None  # the first element outside the tolerance
    origin: str | None = None  # who wrote it (emulator runs)

    @property
    def ok(self) -> bool:
        return self.exact or self.mismatches == 0

    def line(self) -> str:
        status = "bit-exact" if self.exact else (f"within tolerance (rel {self.tolerance:.1e})" if self.ok else
                                                 f"MISMATCH at {self.mismatches} element(s)")
        text = f"{self.name}: max abs err {self.max_abs:.3e}, max rel err {self.max_rel:.3e}: {status}"
        if not self.ok and self.first is not None:
            text += f"\n  first: element {self.first}" + (f", written by {self.origin}" if self.origin else
                                                          ", never written by the kernel")
        return text


def compare(name: str, reference: np.ndarray, result: np.ndarray, *, rtol: float = 1e-5,
            atol: float = 0.0, emulation: Emulation | None = None) -> Comparison:
    """``result`` against ``reference``: bit-exact (NaN matches NaN), else elementwise
    ``|r - ref| <= atol + rtol * |ref|``.  With ``emulation``, the first element outside the
    tolerance names the store (workgroup, wave, lane, instruction) that wrote it."""
    ref = np.asarray(reference, np.float64).reshape(-1)
    got = np.asarray(result, np.float64).reshape(-1)
    both_nan = np.isnan(ref) & np.isnan(got)
    same = (ref == got) | both_nan
    exact = bool(np.all(same)) and bool(np.all(np.signbit(ref[~both_nan]) == np.signbit(got[~both_nan])))
    with np.errstate(all="ignore"):
        diff = np.where(same, 0.0, np.abs(got - ref))
        rel = np.where(same, 0.0, diff / np.maximum(np.abs(ref), np.finfo(np.float64).tiny))
        bad = ~same & ~(diff <= atol + rtol * np.abs(ref))
    first = int(np.flatnonzero(bad)[0]) if bad.any() else None
    origin = emulation.writer(name, first) if emulation is not None and first is not None else None
    return Comparison(name, exact, float(np.nanmax(diff, initial=0.0)), float(np.nanmax(rel, initial=0.0)), rtol,
                      int(np.sum(bad)), first, origin)
