"""The PTX backend: verified tile IR → PTX (sm_90a, sm_80) → cubin.

=============  ==========================================================================
module         what it holds
=============  ==========================================================================
``emit``       instruction selection from :mod:`argus.ir.lowering` to readable PTX
``assemble``   PTX → cubin with ptxas or nvJitLink; the on-disk cubin cache; SASS listing
``cli``        the ``argus compile`` subcommand
=============  ==========================================================================

Emission never checks proofs: the gate is :func:`argus.compile` (and ``argus compile``), the
only entry points that hand a kernel to a GPU.
"""

from argus.backend_ptx.emit import DEFAULT_PTX_VERSION, PtxError, PtxKernel, emit_ptx

__all__ = ["DEFAULT_PTX_VERSION", "PtxError", "PtxKernel", "emit_ptx"]
