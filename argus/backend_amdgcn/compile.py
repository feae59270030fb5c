"""The gfx942 compile entry: gate, emit, check, assemble.

:func:`emit` turns one kernel specialization into assembly text (no gate: it is what tests,
the hazard checker and the emulator inspect; nothing it returns can be launched).
:func:`compile_kernel` is the entry point that produces a runnable code object: it refuses a
specialization that is not proved (:func:`argus.runtime.gate.require_proof`; there is no way
around it), emits, runs the hazard checker on the emitted text (a hazard is an internal error
of the emitter, never shipped), assembles and links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argus.backend_amdgcn.hazards import Hazard, check
from argus.backend_amdgcn.isel import Policy, select
from argus.backend_amdgcn.program import FinalKernel, assembly, finalize
from argus.errors import ArgusError
from argus.ir import nodes as N

__all__ = ["EmittedKernel", "HazardError", "compile_kernel", "emit"]


class HazardError(ArgusError):
    """The hazard checker found a problem in emitted code (a bug of the emitter)."""

    def __init__(self, kernel: str, hazards: list[Hazard]) -> None:
        self.hazards = hazards
        shown = "\n".join(str(h) for h in hazards[:10])
        super().__init__(f"{kernel}: the emitted gfx942 assembly has {len(hazards)} hazard(s):\n{shown}",
                         hint="this is a bug of the AMDGCN emitter; please report the kernel")


@dataclass
class EmittedKernel:
    """One specialization's gfx942 assembly and what the descriptor says about it."""

    kernel: N.Kernel
    final: FinalKernel
    source: str

    @property
    def name(self) -> str:
        return self.final.name

    @property
    def resources(self) -> Any:
        return self.final.resources

    def hazards(self) -> list[Hazard]:
        return check(self.source)

    def assemble(self) -> bytes:
        from argus.backend_amdgcn.assemble import assemble

        return assemble(self.source)


def _header(kernel: N.Kernel, policy: Policy) -> str:
    from argus import __version__
    from argus.spec.kernel import kernel_hash

    consts = ", ".join(f"{k}={v!r}" for k, v in kernel.consts)
    return (f"{kernel.name}" + (f" [{consts}]" if consts else "") + f" for gfx942, argus {__version__}\n"
            f"kernel hash {kernel_hash(kernel)}\npolicy {policy}")


def emit(kernel: N.Kernel, policy: Policy | None = None) -> EmittedKernel:
    """gfx942 assembly of one specialization (IR after policies); no verification gate."""
    policy = policy or Policy()
    final = finalize(select(kernel, policy))
    return EmittedKernel(kernel, final, assembly([final], header=_header(kernel, policy)))


def compile_kernel(kernel: N.Kernel, policy: Policy | None = None, *, verify: bool = True) -> Any:
    """Prove (or find the proof record of), emit, check and assemble one specialization.

    Returns a :class:`~argus.backend_amdgcn.launch.Gfx942Kernel`; raises
    :class:`~argus.runtime.gate.VerificationRequired` when the specialization is not proved
    and :class:`HazardError` when the emitted code fails the hazard checker.
    """
    from argus.backend_amdgcn.launch import Gfx942Kernel
    from argus.runtime.gate import require_proof

    record = require_proof(kernel, verify=verify)
    emitted = emit(kernel, policy)
    hazards = emitted.hazards()
    if hazards:
        raise HazardError(kernel.name, hazards)
    return Gfx942Kernel(kernel, record, emitted, emitted.assemble())
