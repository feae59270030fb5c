"""Verification conditions with provenance.

A :class:`VC` is the validity claim ``hypotheses => goal`` over bounded integer variables
(thread, block, element, loop counters, sizes), plus everything needed to explain a model
of its negation: the op and source line it is about, the property, and the *roles* of its
variables (which term is "the thread", "the element", "the other thread").

``lemmas`` names the lemma VCs this VC relies on — the witness VC of a write site (its
index) and the ``coordinates`` VCs of a tensor matched by coordinate (``("coordinates",
name)``): the read resolution inside it is exact only when those are proved.
``approximations`` lists where the encoding over-approximates (an unsupported op may have
written the memory read, a write whose writer could not be inverted): the VC can still be
*proved* (the approximation is sound), but a model of its negation is only a
counterexample once the reference interpreter reproduces it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from argus.abstract_interp.program import Site
from argus.errors import SourcePosition
from argus.smt import terms as T

#: every property a VC may state
PROPERTIES = (
    "in-bounds",       # every active access lies inside its buffer
    "uninitialized",   # every read of shared/register memory reads written data
    "race",            # no conflicting accesses by two threads without a barrier between
    "write-conflict",  # blocks write disjoint global memory
    "barrier",         # every thread of the block reaches each barrier (no divergence)
    "tag",             # assert_tag / assert_tag_eq
    "witness",         # a write's witness function inverts its address map (a lemma)
    "coordinates",     # accesses of a tensor stay inside each of its dimensions (a lemma)
    "mma-operands",    # an MMA's operand rows / columns carry one record apart from k (a lemma)
    "unsupported",     # an op or loop shape the verifier does not handle (always unknown)
    "collective",      # every lane of a shuffle's / reduction's group executes it together
    "alignment",       # a vector access of w bytes is w-aligned
    "bank-conflicts",  # a shared-memory access stays within the degree the kernel asserts
    "async",           # reads see only completed, visible asynchronous copies; no overwrite before release
    "mbarrier",        # mbarriers used after init + fence; each round of arrivals equals the init count
    "expect-tx",       # declared transaction bytes equal the bytes of the TMA boxes of the phase
    "phase",           # every mbarrier wait's phase completes, with the parity it waits on
    "proxy",           # ordinary writes read by the async proxy are fenced (fence.proxy.async)
    "descriptor",      # a wgmma descriptor's swizzle is the swizzle of the TMA boxes filling it
    "role",            # a warp role does not touch another role's MMA accumulators
    "registers",       # setmaxnreg budgets fit the register file, agree within a warpgroup
    "wgmma",           # a wgmma accumulator is accessed only after the wait_group that retires it
    "coverage",        # each k of an MMA chain's reduction reaches each accumulator element exactly once
    "launch-order",    # a dependent launch reads and writes global memory only after its grid-dependency wait
)


@dataclass
class VC:
    """One verification condition (see the module docstring)."""

    id: str
    property: str
    site: Site | None
    hypotheses: tuple[tuple[str, T.Term], ...]
    goal: T.Term
    message: str
    roles: dict[str, Any] = field(default_factory=dict)
    lemmas: frozenset[Any] = frozenset()
    approximations: tuple[str, ...] = ()
    unknown: str | None = None  # set when the VC could not be stated: its verdict is unknown
    structural: str | None = None  # set when proved without a solver (the reason why)

    @property
    def position(self) -> SourcePosition | None:
        return self.site.op.loc if self.site is not None else None

    @property
    def op(self) -> str | None:
        return self.site.op.kind if self.site is not None else None

    @property
    def exact(self) -> bool:
        return not self.approximations

    def describe(self) -> str:
        where = f"{self.position}: " if self.position else ""
        return f"{where}{self.property}: {self.message}"

    def fingerprint(self) -> str:
        """A stable hash of the claim (hypotheses and goal as SMT-LIB text)."""
        from argus.smt.smtlib import term_to_smtlib

        digest = hashlib.sha256()
        digest.update(self.property.encode())
        for name, h in self.hypotheses:
            digest.update(name.encode())
            digest.update(term_to_smtlib(h).encode())
        digest.update(term_to_smtlib(self.goal).encode())
        digest.update((self.unknown or "").encode())
        return digest.hexdigest()
