"""Layout-algebra sympy expressions to terms.

``from_sympy(expr, symbols)`` maps every sympy node of the integer fragment the layout
algebra produces to the term with the same integer semantics:

=========================================  ================================================
sympy                                       term
=========================================  ================================================
``Integer``, ``true`` / ``false``           literals
``Symbol``                                  ``symbols[symbol]`` (or ``symbols[name]``)
``Add``, ``Mul``, ``Pow(e, k >= 0)``        ``+``, ``*``, repeated ``*``
``floor(p/q)``, ``ceiling(p/q)``            ``p // q``, ``-((-p) // q)`` (floor semantics)
``Mod``, ``FloorDiv``                       ``%``, ``//`` (floor semantics)
``TruncDiv``, ``TruncMod``                  :meth:`Term.trunc_div`, :meth:`Term.trunc_mod`
``BitXor``, ``BitAnd``, ``BitOr``           integer-level ``^ & |`` (width from the bounds)
``Eq Ne Lt Le Gt Ge``                       ``eq ne < <= > >=``
``And``, ``Or``, ``Not``, ``Implies``,      connectives
``Xor``, ``ITE``
``Piecewise``                               nested ``ite`` (needs a final ``True`` branch)
``Min``, ``Max``, ``Abs``                   ``ite`` chains, ``abs``
=========================================  ================================================

``p/q`` inside ``floor`` / ``ceiling`` is read as one fraction (``sympy.fraction`` of the
combined argument), so ``floor(x/3 + y/2)`` becomes ``(2*x + 3*y) // 6``.  A rational
coefficient or negative power outside of ``floor`` / ``ceiling`` has no integer meaning and
is rejected, as is any other node: the :class:`SympyConversionError` names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy

from argus.errors import ArgusError
from argus.smt.terms import (
    FALSE,
    TRUE,
    Term,
    abs_,
    add,
    and_,
    eq,
    floordiv,
    floormod,
    ge,
    gt,
    implies,
    int_const,
    ite,
    le,
    lift,
    lt,
    mul,
    ne,
    neg,
    not_,
    or_,
    trunc_div,
    trunc_mod,
    xor_,
)
from argus.symbolic import BitAnd, BitOr, BitXor, FloorDiv, TruncDiv, TruncMod

__all__ = ["SympyConversionError", "from_sympy"]


class SympyConversionError(ArgusError):
    """A sympy expression has a node with no integer term equivalent."""


def from_sympy(expr: Any, symbols: Mapping[Any, Any] | None = None) -> Term:
    """The term of a sympy integer expression or condition.

    ``symbols`` maps sympy symbols (or their names) to terms or ints; a symbol missing from
    it is an error.
    """
    return _Converter(symbols or {}).convert(expr)


class _Converter:
    def __init__(self, symbols: Mapping[Any, Any]) -> None:
        self.symbols = symbols
        self.memo: dict[Any, Term] = {}

    def convert(self, e: Any) -> Term:
        if isinstance(e, Term):
            return e
        if isinstance(e, bool):
            return TRUE if e else FALSE
        if isinstance(e, int):
            return int_const(e)
        if not isinstance(e, sympy.Basic):
            raise SympyConversionError(f"not a sympy expression: {type(e).__name__} {e!r}")
        got = self.memo.get(e)
        if got is None:
            got = self.memo[e] = self._node(e)
        return got

    def _fail(self, e: sympy.Basic, why: str = "") -> SympyConversionError:
        return SympyConversionError(
            f"cannot convert sympy {type(e).__name__} node to an SMT term: {e}"
            + (f" ({why})" if why else ""),
            hint="keep VC expressions in the integer fragment: + * // % floor ceiling Mod FloorDiv "
            "TruncDiv TruncMod BitXor/And/Or Min Max Abs Piecewise and relations",
        )

    def _node(self, e: sympy.Basic) -> Term:
        c = self.convert
        if e is sympy.true:
            return TRUE
        if e is sympy.false:
            return FALSE
        if isinstance(e, sympy.Integer):
            return int_const(int(e))
        if isinstance(e, sympy.Rational):
            raise self._fail(e, "a non-integer rational")
        if isinstance(e, sympy.Symbol):
            if e in self.symbols:
                return lift(self.symbols[e])
            if e.name in self.symbols:
                return lift(self.symbols[e.name])
            raise SympyConversionError(
                f"sympy symbol {e.name!r} has no term",
                hint="pass it in the symbols mapping of from_sympy",
            )
        if isinstance(e, sympy.Add):
            return add(*(c(a) for a in e.args))
        if isinstance(e, sympy.Mul):
            factors = []
            for a in e.args:
                if isinstance(a, sympy.Rational) and not isinstance(a, sympy.Integer):
                    raise self._fail(e, "a rational coefficient outside floor/ceiling")
                if isinstance(a, sympy.Pow) and a.exp.is_negative:
                    raise self._fail(e, "a division outside floor/ceiling")
                factors.append(c(a))
            return mul(*factors)
        if isinstance(e, sympy.Pow):
            base, exp = e.args
            if isinstance(exp, sympy.Integer) and exp >= 0:
                b = c(base)
                return mul(*([b] * int(exp))) if exp > 0 else int_const(1)
            raise self._fail(e, "only non-negative integer powers")
        if isinstance(e, sympy.floor):
            num, den = self._fraction(e.args[0])
            return floordiv(num, den)
        if isinstance(e, sympy.ceiling):
            num, den = self._fraction(e.args[0])
            return neg(floordiv(neg(num), den))
        if isinstance(e, sympy.Mod):
            return floormod(c(e.args[0]), c(e.args[1]))
        if isinstance(e, FloorDiv):
            return floordiv(c(e.args[0]), c(e.args[1]))
        if isinstance(e, TruncDiv):
            return trunc_div(c(e.args[0]), c(e.args[1]))
        if isinstance(e, TruncMod):
            return trunc_mod(c(e.args[0]), c(e.args[1]))
        if isinstance(e, BitXor):
            return c(e.args[0]) ^ c(e.args[1])
        if isinstance(e, BitAnd):
            return c(e.args[0]) & c(e.args[1])
        if isinstance(e, BitOr):
            return c(e.args[0]) | c(e.args[1])
        if isinstance(e, sympy.Abs):
            return abs_(c(e.args[0]))
        if isinstance(e, (sympy.Min, sympy.Max)):
            args = [c(a) for a in e.args]
            pick = le if isinstance(e, sympy.Min) else ge
            out = args[0]
            for a in args[1:]:
                out = ite(pick(out, a), out, a)
            return out
        if isinstance(e, sympy.Piecewise):
            pieces = list(e.args)
            last_expr, last_cond = pieces[-1]
            if last_cond is not sympy.true:
                raise self._fail(e, "a Piecewise needs a final (expr, True) branch")
            out = c(last_expr)
            for expr, cond in reversed(pieces[:-1]):
                out = ite(c(cond), c(expr), out)
            return out
        if isinstance(e, sympy.ITE):
            return ite(c(e.args[0]), c(e.args[1]), c(e.args[2]))
        relations = {
            sympy.Eq: eq,
            sympy.Ne: ne,
            sympy.StrictLessThan: lt,
            sympy.LessThan: le,
            sympy.StrictGreaterThan: gt,
            sympy.GreaterThan: ge,
        }
        for cls, build in relations.items():
            if isinstance(e, cls):
                lhs, rhs = _integral_sides(e.args[0], e.args[1])
                return build(c(lhs), c(rhs))
        if isinstance(e, sympy.And):
            return and_(*(c(a) for a in e.args))
        if isinstance(e, sympy.Or):
            return or_(*(c(a) for a in e.args))
        if isinstance(e, sympy.Not):
            return not_(c(e.args[0]))
        if isinstance(e, sympy.Implies):
            return implies(c(e.args[0]), c(e.args[1]))
        if isinstance(e, sympy.Xor):
            out = c(e.args[0])
            for a in e.args[1:]:
                out = xor_(out, c(a))
            return out
        raise self._fail(e)

    def _fraction(self, arg: sympy.Expr) -> tuple[Term, Term]:
        """``(numerator, denominator)`` terms of a floor/ceiling argument."""
        num, den = sympy.fraction(sympy.together(arg))
        return self.convert(sympy.expand(num) if num.is_Add else num), self.convert(den)


def _integral_sides(lhs: sympy.Expr, rhs: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    """Both sides of a relation scaled by the common denominator of their rational
    coefficients (sympy normalizes ``2*a < a + b`` to ``a < a/2 + b/2``); scaling by a
    positive integer keeps the relation and brings it back to integer terms."""
    denominators = [sympy.fraction(t.as_coeff_Mul()[0])[1]
                    for side in (lhs, rhs) if isinstance(side, sympy.Expr)
                    for t in sympy.Add.make_args(side)]
    scale = sympy.ilcm(*denominators) if denominators else 1
    if scale == 1:
        return lhs, rhs
    return sympy.expand(lhs * scale), sympy.expand(rhs * scale)
