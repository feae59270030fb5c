"""Terms to cvc5 (base API, one ``cvc5.TermManager``) and cvc5 values back to Python.

One :class:`Cvc5Translator` per term manager: it caches every translated term, declares each
variable and function once and rejects two declarations of one name.  cvc5 terms belong to
the term manager, not to a solver, so one translator serves every solver built on it (a
session rebuilds its solver when a check needs another resource limit and re-asserts the
cached terms).  ``INTS_DIVISION`` / ``INTS_MODULUS`` are SMT-LIB's Euclidean ``div`` / ``mod``.
"""

from __future__ import annotations

from typing import Any

import cvc5
from cvc5 import Kind

from argus.smt.terms import Function, Sort, Term, TermError, bitwise_encoding
from argus.smt.translator import CachedTranslator

__all__ = ["Cvc5Translator", "cvc5_version", "python_value"]


def cvc5_version() -> str:
    """cvc5's version string."""
    return cvc5.Solver(cvc5.TermManager()).getVersion()


_KINDS: dict[str, Kind] = {
    "+": Kind.ADD,
    "*": Kind.MULT,
    "-": Kind.SUB,
    "neg": Kind.NEG,
    "abs": Kind.ABS,
    "div": Kind.INTS_DIVISION,
    "mod": Kind.INTS_MODULUS,
    "<": Kind.LT,
    "<=": Kind.LEQ,
    ">": Kind.GT,
    ">=": Kind.GEQ,
    "=": Kind.EQUAL,
    "distinct": Kind.DISTINCT,
    "and": Kind.AND,
    "or": Kind.OR,
    "not": Kind.NOT,
    "=>": Kind.IMPLIES,
    "xor": Kind.XOR,
    "ite": Kind.ITE,
    "bvadd": Kind.BITVECTOR_ADD,
    "bvsub": Kind.BITVECTOR_SUB,
    "bvmul": Kind.BITVECTOR_MULT,
    "bvand": Kind.BITVECTOR_AND,
    "bvor": Kind.BITVECTOR_OR,
    "bvxor": Kind.BITVECTOR_XOR,
    "bvshl": Kind.BITVECTOR_SHL,
    "bvlshr": Kind.BITVECTOR_LSHR,
    "bvashr": Kind.BITVECTOR_ASHR,
    "bvudiv": Kind.BITVECTOR_UDIV,
    "bvurem": Kind.BITVECTOR_UREM,
    "bvsdiv": Kind.BITVECTOR_SDIV,
    "bvsrem": Kind.BITVECTOR_SREM,
    "bvsmod": Kind.BITVECTOR_SMOD,
    "bvneg": Kind.BITVECTOR_NEG,
    "bvnot": Kind.BITVECTOR_NOT,
    "bvult": Kind.BITVECTOR_ULT,
    "bvule": Kind.BITVECTOR_ULE,
    "bvugt": Kind.BITVECTOR_UGT,
    "bvuge": Kind.BITVECTOR_UGE,
    "bvslt": Kind.BITVECTOR_SLT,
    "bvsle": Kind.BITVECTOR_SLE,
    "bvsgt": Kind.BITVECTOR_SGT,
    "bvsge": Kind.BITVECTOR_SGE,
    "concat": Kind.BITVECTOR_CONCAT,
    "bv2nat": Kind.BITVECTOR_TO_NAT,
}

_INDEXED: dict[str, Kind] = {
    "int2bv": Kind.INT_TO_BITVECTOR,
    "extract": Kind.BITVECTOR_EXTRACT,
    "zero_extend": Kind.BITVECTOR_ZERO_EXTEND,
    "sign_extend": Kind.BITVECTOR_SIGN_EXTEND,
}


class Cvc5Translator(CachedTranslator):
    """Translate terms into one cvc5 term manager, with a cache."""

    def __init__(self, tm: cvc5.TermManager | None = None) -> None:
        super().__init__()
        self.tm = tm if tm is not None else cvc5.TermManager()
        self.variables: dict[str, tuple[Term, cvc5.Term]] = {}
        self._sorts: dict[Sort, cvc5.Sort] = {}

    def sort(self, sort: Sort) -> cvc5.Sort:
        s = self._sorts.get(sort)
        if s is None:
            if sort.is_int:
                s = self.tm.getIntegerSort()
            elif sort.is_bool:
                s = self.tm.getBooleanSort()
            else:
                s = self.tm.mkBitVectorSort(sort.width)  # type: ignore[arg-type]
            self._sorts[sort] = s
        return s

    def declare(self, var: Term) -> cvc5.Term:
        """The cvc5 constant of variable ``var`` (declared on first use)."""
        name = var.params[0]
        known = self.variables.get(name)
        if known is not None:
            if known[0] is not var:
                raise TermError(
                    f"variable {name!r} declared twice with different sorts or bounds: {known[0]!r} vs {var!r}"
                )
            return known[1]
        const = self.tm.mkConst(self.sort(var.sort), name)
        self.variables[name] = (var, const)
        return const

    def _declare_function(self, f: Function) -> cvc5.Term:
        fsort = self.tm.mkFunctionSort([self.sort(s) for s in f.domain], self.sort(f.result))
        return self.tm.mkConst(fsort, f.name)

    def _node(self, t: Term, args: list[Any]) -> cvc5.Term:
        tm = self.tm
        op = t.op
        if op == "const":
            v = t.params[0]
            if t.sort.is_bool:
                return tm.mkBoolean(v)
            if t.sort.is_int:
                return tm.mkInteger(str(v))
            return tm.mkBitVector(t.sort.width, str(v), 10)
        if op == "var":
            return self.declare(t)
        if op == "apply":
            return tm.mkTerm(Kind.APPLY_UF, self.function(t.params[0]), *args)
        if op in ("int_xor", "int_and", "int_or"):
            return self.translate(bitwise_encoding(t))
        if op in _INDEXED:
            return tm.mkTerm(tm.mkOp(_INDEXED[op], *t.params), *args)
        kind = _KINDS.get(op)
        if kind is None:
            raise TermError(f"no cvc5 translation for op {op!r}")
        return tm.mkTerm(kind, *args)

    # ---- models
    def value(self, solver: cvc5.Solver, term: Term) -> int | bool:
        """The value of ``term`` in ``solver``'s current model."""
        return python_value(solver.getValue(self.translate(term)))

    def _function_table(self, solver: cvc5.Solver, f: Function) -> dict[Any, Any]:
        table: dict[Any, Any] = {}
        try:
            lam = solver.getValue(self.function(f))
        except RuntimeError:
            return table
        if lam.getKind() != Kind.LAMBDA:
            return table
        params = [lam[0][i] for i in range(lam[0].getNumChildren())]
        body = lam[1]
        try:
            while body.getKind() == Kind.ITE:
                cond, then, body = body[0], body[1], body[2]
                table[_point(cond, params)] = python_value(then)
            table[None] = python_value(body)
        except TermError:
            pass  # not a simple table: the application points still are exact
        return table


def _point(cond: cvc5.Term, params: list[cvc5.Term]) -> tuple:
    """The argument tuple an ``ite`` condition of a lambda body selects."""
    equalities = (
        [cond[i] for i in range(cond.getNumChildren())] if cond.getKind() == Kind.AND else [cond]
    )
    values: dict[int, Any] = {}
    for eq in equalities:
        if eq.getKind() != Kind.EQUAL:
            raise TermError("not a point condition")
        lhs, rhs = eq[0], eq[1]
        if rhs in params:
            lhs, rhs = rhs, lhs
        if lhs not in params:
            raise TermError("not a point condition")
        values[params.index(lhs)] = python_value(rhs)
    if len(values) != len(params):
        raise TermError("not a point condition")
    return tuple(values[i] for i in range(len(params)))


def python_value(v: cvc5.Term) -> int | bool:
    """A cvc5 value as a Python ``int`` (bit-vectors unsigned) or ``bool``."""
    if v.isBooleanValue():
        return v.getBooleanValue()
    if v.isIntegerValue():
        return int(v.getIntegerValue())
    if v.isBitVectorValue():
        return int(v.getBitVectorValue(10))
    raise TermError(f"not a literal value: {v}")
