"""Terms to Z3 (Python API) and Z3 models back to Python values.

One :class:`Z3Translator` per ``z3.Context``: it caches every translated term (interned terms
make the cache a plain dict), declares each variable and function once and rejects two
declarations of one name.  Integer-level bitwise nodes are translated through
:func:`argus.smt.terms.bitwise_encoding`, the same encoding the SMT-LIB printer writes.
Z3's integer ``/`` and ``%`` are SMT-LIB's Euclidean ``div`` and ``mod``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import z3

from argus.smt.terms import Function, Sort, Term, TermError, bitwise_encoding
from argus.smt.translator import CachedTranslator

__all__ = ["Z3Translator", "z3_version"]


def z3_version() -> str:
    """Z3's full version string."""
    return z3.get_full_version()


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "-": lambda a, b: a - b,
    "div": lambda a, b: a / b,  # Int / Int is SMT-LIB div in z3py
    "mod": lambda a, b: a % b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "=>": z3.Implies,
    "xor": z3.Xor,
    "bvadd": lambda a, b: a + b,
    "bvsub": lambda a, b: a - b,
    "bvmul": lambda a, b: a * b,
    "bvand": lambda a, b: a & b,
    "bvor": lambda a, b: a | b,
    "bvxor": lambda a, b: a ^ b,
    "bvshl": lambda a, b: a << b,
    "bvlshr": z3.LShR,
    "bvashr": lambda a, b: a >> b,
    "bvudiv": z3.UDiv,
    "bvurem": z3.URem,
    "bvsdiv": lambda a, b: a / b,  # BitVec / BitVec is bvsdiv in z3py
    "bvsrem": z3.SRem,
    "bvsmod": lambda a, b: a % b,  # BitVec % BitVec is bvsmod in z3py
    "bvult": z3.ULT,
    "bvule": z3.ULE,
    "bvugt": z3.UGT,
    "bvuge": z3.UGE,
    "bvslt": lambda a, b: a < b,
    "bvsle": lambda a, b: a <= b,
    "bvsgt": lambda a, b: a > b,
    "bvsge": lambda a, b: a >= b,
    "concat": z3.Concat,
}

_UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": lambda a: -a,
    "not": z3.Not,
    "bvneg": lambda a: -a,
    "bvnot": lambda a: ~a,
    "bv2nat": lambda a: z3.BV2Int(a, is_signed=False),
}


class Z3Translator(CachedTranslator):
    """Translate terms into one Z3 context, with a cache."""

    def __init__(self, ctx: z3.Context | None = None) -> None:
        super().__init__()
        self.ctx = ctx if ctx is not None else z3.Context()
        self.variables: dict[str, Term] = {}

    def sort(self, sort: Sort) -> z3.SortRef:
        if sort.is_int:
            return z3.IntSort(self.ctx)
        if sort.is_bool:
            return z3.BoolSort(self.ctx)
        return z3.BitVecSort(sort.width, self.ctx)  # type: ignore[arg-type]

    def declare(self, var: Term) -> z3.ExprRef:
        """The Z3 constant of variable ``var`` (declared on first use)."""
        name = var.params[0]
        known = self.variables.setdefault(name, var)
        if known is not var:
            raise TermError(
                f"variable {name!r} declared twice with different sorts or bounds: {known!r} vs {var!r}"
            )
        return z3.Const(name, self.sort(var.sort))

    def _declare_function(self, f: Function) -> z3.FuncDeclRef:
        return z3.Function(f.name, *(self.sort(s) for s in f.domain), self.sort(f.result))

    def _node(self, t: Term, args: list[Any]) -> z3.ExprRef:
        op = t.op
        ctx = self.ctx
        if op == "const":
            v = t.params[0]
            if t.sort.is_bool:
                return z3.BoolVal(v, ctx)
            if t.sort.is_int:
                return z3.IntVal(v, ctx)
            return z3.BitVecVal(v, t.sort.width, ctx)
        if op == "var":
            return self.declare(t)
        if op in _BINARY:
            return _BINARY[op](args[0], args[1])
        if op in _UNARY:
            return _UNARY[op](args[0])
        match op:
            case "+":
                return z3.Sum(*args)
            case "*":
                return z3.Product(*args)
            case "abs":
                return z3.If(args[0] >= 0, args[0], -args[0])
            case "and":
                return z3.And(*args)
            case "or":
                return z3.Or(*args)
            case "=":
                return (
                    z3.And(*(a == b for a, b in itertools.pairwise(args)))
                    if len(args) > 2
                    else args[0] == args[1]
                )
            case "distinct":
                return z3.Distinct(*args)
            case "ite":
                return z3.If(args[0], args[1], args[2])
            case "int_xor" | "int_and" | "int_or":
                return self.translate(bitwise_encoding(t))
            case "int2bv":
                return z3.Int2BV(args[0], t.params[0])
            case "extract":
                return z3.Extract(t.params[0], t.params[1], args[0])
            case "zero_extend":
                return z3.ZeroExt(t.params[0], args[0])
            case "sign_extend":
                return z3.SignExt(t.params[0], args[0])
            case "apply":
                return self.function(t.params[0])(*args)
        raise TermError(f"no Z3 translation for op {op!r}")

    # ---- models
    def value(self, model: z3.ModelRef, term: Term) -> int | bool:
        """The value of ``term`` in ``model`` (completed: unconstrained parts get defaults)."""
        return python_value(model.eval(self.translate(term), model_completion=True))

    def _function_table(self, model: z3.ModelRef, f: Function) -> dict[Any, Any]:
        decl = self.function(f)
        table: dict[Any, Any] = {}
        interp = model[decl] if decl in model.decls() else None
        if interp is None:
            return table
        for entry in interp.as_list()[:-1]:
            try:
                table[tuple(python_value(a) for a in entry[:-1])] = python_value(entry[-1])
            except TermError:
                continue
        try:
            table[None] = python_value(interp.else_value())
        except TermError:
            pass
        return table


def python_value(e: z3.ExprRef) -> int | bool:
    """A Z3 literal as a Python ``int`` (bit-vectors unsigned) or ``bool``."""
    if z3.is_true(e):
        return True
    if z3.is_false(e):
        return False
    if z3.is_int_value(e):
        return e.as_long()
    if z3.is_bv_value(e):
        return e.as_long()
    raise TermError(f"not a literal value: {e}")
