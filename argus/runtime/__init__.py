"""The runtime: the verification gate, compiling, launching on torch tensors, timing.

=============  ==========================================================================
module         what it holds
=============  ==========================================================================
``gate``       :func:`require_proof`: a matching proved record, or verification here, or a refusal
``launch``     :class:`CompiledKernel`: argument checks, tensor maps, driver launches
``timing``     the one timing harness (warm-up, events, L2 flush, rotation, medians)
=============  ==========================================================================

:func:`compile` is the entry point: ``argus.compile(kernel, **consts)`` specializes the kernel,
passes the gate (there is no way around it), emits PTX, assembles it (cached on disk) and
returns a :class:`CompiledKernel` that launches on the caller's current torch stream.
"""

from __future__ import annotations

from typing import Any

from argus.runtime.gate import VerificationRequired, require_proof
from argus.runtime.launch import CompiledKernel, LaunchError

__all__ = ["CompiledKernel", "LaunchError", "VerificationRequired", "compile", "require_proof"]


def compile(kernel: Any, target: str = "sm_90a", **consts: Any) -> Any:
    """Specialize ``kernel`` (an ``@argus.spec.kernel``) with ``consts``, prove it (or find its
    proof record), and build it for ``target`` (``"sm_90a"``, ``"sm_80"``: a
    :class:`CompiledKernel`; ``"gfx942"``: an :class:`argus.backend_amdgcn.launch.Gfx942Kernel`).

    Raises :class:`VerificationRequired` with the verification report (and counterexamples)
    when the specialization is not proved.
    """
    from argus.backend_ptx.assemble import build_cubin
    from argus.backend_ptx.emit import emit_ptx
    from argus.ir import nodes as N
    from argus.spec.kernel import kernel_hash

    specialized = kernel if isinstance(kernel, N.Kernel) else kernel.specialize(**consts)
    if consts and isinstance(kernel, N.Kernel):
        raise TypeError("consts are bound already: pass the @kernel, not a specialization, to set them")
    if target == "gfx942":
        from argus.backend_amdgcn.compile import compile_kernel

        return compile_kernel(specialized)  # gated there: require_proof first
    record = require_proof(specialized)
    ptx = emit_ptx(specialized, target)
    cubin = build_cubin(ptx, kernel_hash(specialized))
    if cubin.performance_issues:
        import warnings

        from argus.errors import PerformanceWarning

        warnings.warn(f"argus: {ptx.name} ({target}) assembled with performance issues: "
                      + "; ".join(cubin.performance_issues), PerformanceWarning, stacklevel=2)
    return CompiledKernel(specialized, record, ptx, cubin)
