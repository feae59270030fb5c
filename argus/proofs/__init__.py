"""Proofs: discharging VCs, counterexamples with replay, proof records, ``argus verify``.

=================  ========================================================================
module             what it holds
=================  ========================================================================
``provers``        the portfolio / single-solver back ends behind one ``prove`` interface
``verify``         one kernel specialization: VCs → verdicts → report and proof record
``counterexample`` minimized, explained, replayed counterexamples (versioned JSON, human)
``record``         proof records bound to the kernel hash; the VC cache
``cli_verify``     the ``argus verify`` subcommand
=================  ========================================================================
"""

from argus.proofs.counterexample import Counterexample, Replay
from argus.proofs.provers import LocalProver, PortfolioProver, Prover, SequentialProver, make_prover
from argus.proofs.record import ProofRecord, VCCache
from argus.proofs.verify import KernelReport, VCResult, verify_kernel

__all__ = [
    "Counterexample",
    "KernelReport",
    "LocalProver",
    "PortfolioProver",
    "ProofRecord",
    "Prover",
    "Replay",
    "SequentialProver",
    "VCCache",
    "VCResult",
    "make_prover",
    "verify_kernel",
]
