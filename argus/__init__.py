"""argus: verification-first GPU kernels.

Kernels are written in a tile DSL (``argus.spec``), their data-flow invariants and built-in
safety properties are proved by SMT (``argus.smt``) over a layout algebra
(``argus.layout_algebra``), and only verified kernels reach the PTX and AMDGCN emitters.
"""

__version__ = "0.1.0"

from argus.errors import ArgusError, SourcePosition

__all__ = ["ArgusError", "SourcePosition", "__version__", "compile"]


def __getattr__(name: str):
    if name == "compile":  # the gated compile entry point, imported on first use
        from argus.runtime import compile

        return compile
    raise AttributeError(f"module 'argus' has no attribute {name!r}")
