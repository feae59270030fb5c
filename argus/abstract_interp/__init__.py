"""Abstract interpretation of the tile IR: per-thread symbolic execution into VCs.

=================  ========================================================================
module             what it holds
=================  ========================================================================
``program``        sites: every op with its path, symbolic loops and barrier epoch
``encoding``       sympy index expressions to SMT terms, per thread instance
``memory``         the table of what each op reads and writes
``witness``        quantifier-free inverses of write address maps (who wrote ``a``)
``tags``           tag records as terms, with the interpreter's rules
``analysis``       instances, addresses, reads resolved to their last writer
``properties``     the built-in properties and tag assertions as VCs
``vc``             VCs with provenance
=================  ========================================================================

``generate_vcs(kernel)`` is the entry point; :mod:`argus.proofs` discharges the VCs, builds
counterexamples and writes proof records.
"""

from __future__ import annotations

from argus.abstract_interp.analysis import Analysis
from argus.abstract_interp.properties import generate
from argus.abstract_interp.vc import PROPERTIES, VC
from argus.ir import nodes as N

__all__ = ["PROPERTIES", "VC", "Analysis", "generate_vcs"]


def generate_vcs(kernel: N.Kernel, *, unroll_limit: int | None = None) -> tuple[Analysis, list[VC]]:
    """The analysis of ``kernel`` and every VC it must satisfy."""
    analysis = Analysis(kernel, unroll_limit=unroll_limit)
    return analysis, generate(analysis)
