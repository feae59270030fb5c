"""The SMT-LIB logic of a set of terms.

Rules (quantifier-free throughout):

==========================================  ===============================================
what the terms contain                       logic
==========================================  ===============================================
only Booleans                                ``QF_UF``
Int arithmetic, linear                       ``QF_LIA``
Int arithmetic, nonlinear                    ``QF_NIA``
bit-vectors only                             ``QF_BV``
Int and bit-vectors (``int2bv``/``bv2nat``,  ``ALL``
integer-level ``^ & |``, or both sorts)
any of the above with function applications  ``UF`` inserted after ``QF_``: ``QF_UFLIA``,
(except ``ALL``)                             ``QF_UFNIA``, ``QF_UFBV``
==========================================  ===============================================

*Nonlinear* means a product of two non-literal factors, or a ``div`` / ``mod`` whose divisor
is not a non-zero literal.  Mixed Int / bit-vector queries get ``ALL``: the SMT-LIB catalogue has no
logic with ``int2bv`` / ``bv2nat``, and Z3's SMT-LIB front end rejects those operators under
any other logic name (cvc5 would take ``QF_UFBVLIA``-style names).  :class:`LogicFeatures`
keeps the details (nonlinear, functions) for a mixed query.
"""

from __future__ import annotations

from dataclasses import dataclass

from argus.smt.terms import Term, subterms

__all__ = ["STANDARD_LOGICS", "LogicFeatures", "detect_logic", "features"]

#: logics from the SMT-LIB catalogue that argus emits
STANDARD_LOGICS = frozenset(
    {"QF_UF", "QF_LIA", "QF_NIA", "QF_BV", "QF_UFLIA", "QF_UFNIA", "QF_UFBV"}
)


@dataclass(frozen=True)
class LogicFeatures:
    """What a set of terms uses."""

    integers: bool = False
    bitvectors: bool = False
    nonlinear: bool = False
    functions: bool = False
    conversions: bool = False

    @property
    def logic(self) -> str:
        uf = "UF" if self.functions else ""
        arith = "NIA" if self.nonlinear else "LIA"
        if self.bitvectors and (self.integers or self.conversions):
            return "ALL"
        if self.bitvectors:
            return f"QF_{uf}BV"
        if self.integers:
            return f"QF_{uf}{arith}"
        return "QF_UF"


def features(*roots: Term) -> LogicFeatures:
    """The theory features used by ``roots``."""
    integers = bitvectors = nonlinear = functions = conversions = False
    for t in subterms(*roots):
        if t.sort.is_int:
            integers = True
        elif t.sort.is_bv:
            bitvectors = True
        match t.op:
            case "*":
                if sum(1 for a in t.args if a.op != "const") > 1:
                    nonlinear = True
            case "div" | "mod":
                # SMT-LIB's linear logics allow division only by non-zero numerals
                if t.args[1].op != "const" or t.args[1].params[0] == 0:
                    nonlinear = True
            case "apply":
                functions = True
            case "int2bv" | "bv2nat" | "int_xor" | "int_and" | "int_or":
                conversions = bitvectors = integers = True
            case _:
                pass
    return LogicFeatures(integers, bitvectors, nonlinear, functions, conversions)


def detect_logic(*roots: Term) -> str:
    """The logic name for a query made of ``roots`` (see the module table)."""
    return features(*roots).logic
