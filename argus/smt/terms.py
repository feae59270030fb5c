"""The verification-condition term language: small, sorted, hash-consed terms.

A :class:`Term` is one node ``op(args...)`` with static ``params`` and a :class:`Sort`
(``INT``, ``BOOL`` or ``BitVec(w)``).  Terms are *interned*: building a term that is
structurally equal to a live one returns that very object, so ``a is b`` and ``a == b`` both
mean structural equality, hashing is O(1), and shared subterms are stored once.  Pickling
re-interns (``__reduce__``), so terms sent to worker processes keep this property.

``==`` on terms is Python structural equality (needed for hashing); the SMT equation is
:func:`eq` / :func:`ne`.  ``<``, ``<=``, ``>``, ``>=`` build Bool terms, Python ints mix in
(``x + 1``, ``2 * x < n``), and a term refuses to be used as a Python bool (``if x < 3:``
raises) so a comparison is never silently truthy.

Operators by sort
-----------------
=========================  ==============================================================
Int ``+ - * -x``            integer arithmetic (``abs(x)`` too)
Int ``// %``                *floor* division / modulo, like Python (see below)
``a.div(b)``, ``a.mod(b)``  Euclidean division / modulo (SMT-LIB ``div`` / ``mod``)
``a.trunc_div(b)``          C / PTX ``div.s32`` (toward zero); ``a.trunc_mod(b)`` its ``rem``
Int ``^ & |``               two's-complement bitwise ops through bit-vectors (see below)
Int ``<< k``, ``>> k``      ``x * 2**k`` and ``floor(x / 2**k)`` for a static ``k >= 0``
Bool ``& | ^ ~``            and / or / xor / not (also :func:`and_`, :func:`or_`, ...)
BitVec ``+ - * & | ^ ~ <<`` ``bvadd bvsub bvmul bvand bvor bvxor bvnot bvshl``; the rest
                            (unsigned/signed compare, shifts right, division) are functions
=========================  ==============================================================

Division semantics and guards
-----------------------------
The primitive integer divisions are SMT-LIB's Euclidean ``div`` / ``mod``
(``a = b*div(a,b) + mod(a,b)``, ``0 <= mod(a,b) < |b|``).  Floor (Python) and truncating (C)
divisions are *encodings* over them, built by the operators, so every backend, the printer and
the evaluator only ever see ``div`` / ``mod``:

* ``a // b``: ``div(a, b)`` for a constant ``b > 0``, ``div(-a, -b)`` for a constant ``b < 0``,
  else ``ite(b >= 0, div(a, b), div(-a, -b))``; ``a % b`` likewise with ``mod`` and
  ``-mod(-a, -b)``.
* ``trunc_div(a, b)`` is ``ite(a >= 0, div(a, b), -div(-a, b))``, ``trunc_mod(a, b)`` is
  ``ite(a >= 0, mod(a, b), -mod(-a, b))``.

Division by zero is a total but unspecified function in SMT-LIB, so a VC must never depend
on it.  :func:`definedness` returns the guards of a term: ``divisor != 0`` for every ``div`` /
``mod`` (each under the conditions of the ``ite`` branches and the short-circuit ``and`` /
``or`` / ``=>`` operands that reach it) and the range guards of integer-level bitwise ops.
A validity VC ``hyps → goal`` is therefore discharged as two unsat queries (see
:func:`argus.smt.query.validity_queries`): ``hyps ∧ defined ∧ ¬goal`` (the goal holds
wherever it is defined) and ``hyps ∧ ¬defined`` (the hypotheses imply it is defined).

Integer-level bitwise ops and the bit-width policy
---------------------------------------------------
``a ^ b``, ``a & b``, ``a | b`` on Int terms build ``int_xor``/``int_and``/``int_or`` nodes
with params ``(width, signed)``; translators encode them as
``bv2nat(bvop(int2bv_w(a), int2bv_w(b)))`` (unsigned) or, when ``signed``, as the
two's-complement reading of the same bit-vector.  The width comes from :func:`interval`,
an interval analysis over the *variable bounds* (``int_var(name, lo, hi)``), constants and
bounded function results:

* both operands ``>= 0``: unsigned, ``width = max(1, bit_length(max upper bound))``;
* otherwise: signed, the smallest ``width`` with both intervals inside
  ``[-2**(width-1), 2**(width-1))``.

An operand without a finite interval is an error unless the width is passed explicitly
(:func:`int_xor` ``(a, b, width=16)``).  Out-of-range values are excluded, not wrapped: the
node's :func:`definedness` guards state that both operands lie in the chosen range (implied
by the variable bounds when the width was inferred), and the evaluator and solvers agree on
the wrapped value outside of it.

Variables and bounds
--------------------
``int_var(name, lo, hi)`` carries its bounds (``None`` for an open side).  Every query that
mentions a variable includes ``lo <= x <= hi`` (:func:`domain_constraints`); two variables
with one name but different sorts or bounds in one query are an error.  A
:class:`Function` may state the range of its Int result the same way.
"""

from __future__ import annotations

import itertools
import operator
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from argus.errors import ArgusError

__all__ = [
    "BOOL",
    "FALSE",
    "INT",
    "OPS",
    "TRUE",
    "BitVec",
    "Function",
    "Sort",
    "Term",
    "TermError",
    "abs_",
    "add",
    "and_",
    "app",
    "bitwise_encoding",
    "bitwise_width",
    "bool_const",
    "bool_var",
    "bv2nat",
    "bv_const",
    "bv_var",
    "bvadd",
    "bvand",
    "bvashr",
    "bvlshr",
    "bvmul",
    "bvneg",
    "bvnot",
    "bvor",
    "bvsdiv",
    "bvshl",
    "bvsmod",
    "bvsrem",
    "bvsub",
    "bvudiv",
    "bvurem",
    "bvxor",
    "concat",
    "definedness",
    "distinct",
    "div",
    "domain_constraints",
    "eq",
    "extract",
    "floordiv",
    "floormod",
    "functions",
    "ge",
    "gt",
    "implies",
    "int2bv",
    "int_and",
    "int_const",
    "int_or",
    "int_var",
    "int_xor",
    "interval",
    "ite",
    "le",
    "lift",
    "lt",
    "mod",
    "mul",
    "ne",
    "neg",
    "not_",
    "or_",
    "rebuild",
    "sge",
    "sgt",
    "sign_extend",
    "sle",
    "slt",
    "sub",
    "substitute",
    "subterms",
    "trunc_div",
    "trunc_mod",
    "uge",
    "ugt",
    "ule",
    "ult",
    "variables",
    "xor_",
    "zero_extend",
]


class TermError(ArgusError):
    """A term was built wrongly: sort mismatch, bad arity, unknown op, name clash."""


# --------------------------------------------------------------------------- sorts


@dataclass(frozen=True)
class Sort:
    """``Sort("Int")``, ``Sort("Bool")`` or ``Sort("BitVec", w)``; use ``INT``, ``BOOL``, ``BitVec(w)``."""

    kind: str
    width: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("Int", "Bool", "BitVec"):
            raise TermError(f"unknown sort {self.kind!r}")
        if (self.kind == "BitVec") != (self.width is not None):
            raise TermError(
                f"sort {self.kind} {'needs' if self.kind == 'BitVec' else 'takes no'} width"
            )
        if self.width is not None and (not isinstance(self.width, int) or self.width < 1):
            raise TermError(f"bit-vector width must be a positive int, got {self.width!r}")

    @property
    def is_int(self) -> bool:
        return self.kind == "Int"

    @property
    def is_bool(self) -> bool:
        return self.kind == "Bool"

    @property
    def is_bv(self) -> bool:
        return self.kind == "BitVec"

    def __str__(self) -> str:
        return f"(_ BitVec {self.width})" if self.kind == "BitVec" else self.kind

    __repr__ = __str__


INT = Sort("Int")
BOOL = Sort("Bool")


def BitVec(width: int) -> Sort:
    """The sort of bit-vectors of ``width`` bits."""
    return Sort("BitVec", width)


# --------------------------------------------------------------------------- functions


@dataclass(frozen=True)
class Function:
    """An uninterpreted function ``name : domain -> result`` (e.g. an index tensor in memory).

    ``bounds=(lo, hi)`` (Int results only) states the range of every application; queries
    include ``lo <= f(args) <= hi`` for each application they mention.  Calling the function
    builds an application term: ``f(i, j)``.
    """

    name: str
    domain: tuple[Sort, ...]
    result: Sort
    bounds: tuple[int | None, int | None] | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        object.__setattr__(self, "domain", tuple(self.domain))
        if not self.domain:
            raise TermError(f"function {self.name!r} needs at least one argument; use a variable")
        if self.bounds is not None:
            if not self.result.is_int:
                raise TermError(f"bounds on function {self.name!r} need an Int result")
            object.__setattr__(self, "bounds", tuple(self.bounds))

    def __call__(self, *args: Any) -> Term:
        if len(args) != len(self.domain):
            raise TermError(f"{self.name} takes {len(self.domain)} arguments, got {len(args)}")
        return Term(
            "apply", tuple(lift(a, s) for a, s in zip(args, self.domain)), (self,), self.result
        )


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name or "|" in name or "\\" in name:
        raise TermError(f"invalid name {name!r}: a non-empty string without '|' or '\\'")


# --------------------------------------------------------------------------- terms

_INTERNED: weakref.WeakValueDictionary[tuple, Term] = weakref.WeakValueDictionary()


@dataclass(frozen=True, eq=False, init=False, repr=False)
class Term:
    """One interned node: ``op`` applied to ``args`` with static ``params``, of sort ``sort``.

    ============  ==========================  ==========================================
    op            params                      meaning
    ============  ==========================  ==========================================
    ``const``     ``(value,)``                int, bool, or bit-vector value in [0, 2**w)
    ``var``       ``(name, lo, hi)`` / ``(name,)``  Int variable with bounds / Bool, BV var
    ``apply``     ``(function,)``             uninterpreted function application
    ``int_xor``   ``(width, signed)``         also ``int_and``, ``int_or``: see module doc
    ``int2bv``    ``(width,)``                SMT-LIB ``(_ int2bv w)`` (modulo 2**w)
    ``extract``   ``(hi, lo)``                also ``zero_extend`` / ``sign_extend`` ``(k,)``
    others        ``()``                      SMT-LIB name, e.g. ``+``, ``div``, ``bvxor``
    ============  ==========================  ==========================================

    ``Term(op, args, params, sort)`` checks sorts and returns the interned node without any
    simplification (what the SMT-LIB reader uses); the module functions and operators
    simplify lightly (constant folding, neutral elements, flattening).
    """

    op: str
    args: tuple[Term, ...]
    params: tuple
    sort: Sort
    _hash: int = field(compare=False)

    def __new__(
        cls, op: str, args: tuple[Term, ...] = (), params: tuple = (), sort: Sort | None = None
    ):
        args = tuple(args)
        params = tuple(params)
        # the sort of every node but a leaf follows from op, args and params
        key = (op, args, params, sort if not args else None)
        term = _INTERNED.get(key)
        if term is not None:
            if sort is not None and term.sort != sort:
                raise TermError(f"ill-sorted {op}: declared {sort}, computed {term.sort}")
            return term
        checked = _check(op, args, params, sort)
        term = object.__new__(cls)
        object.__setattr__(term, "op", op)
        object.__setattr__(term, "args", args)
        object.__setattr__(term, "params", params)
        object.__setattr__(term, "sort", checked)
        object.__setattr__(term, "_hash", hash((op, params, checked, tuple(a._hash for a in args))))
        return _INTERNED.setdefault((op, args, params, checked if not args else None), term)

    # ---- identity, hashing, pickling
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __reduce__(self):
        return (Term, (self.op, self.args, self.params, self.sort))

    def __copy__(self) -> Term:
        return self

    def __deepcopy__(self, memo: dict) -> Term:
        return self

    def __bool__(self) -> bool:
        raise TypeError(
            f"an SMT term has no Python truth value: {_short(self)}; "
            "use eq()/ne() for equations and and_()/or_()/not_() for connectives"
        )

    def __repr__(self) -> str:
        return _short(self, 400)

    def __str__(self) -> str:
        return _short(self, 10_000)

    # ---- convenience accessors
    @property
    def is_const(self) -> bool:
        return self.op == "const"

    @property
    def is_var(self) -> bool:
        return self.op == "var"

    @property
    def value(self) -> int | bool:
        """The value of a ``const`` node."""
        if self.op != "const":
            raise TermError(f"not a constant: {_short(self)}")
        return self.params[0]

    @property
    def name(self) -> str:
        """The name of a variable (or of the function of an application)."""
        if self.op == "var":
            return self.params[0]
        if self.op == "apply":
            return self.params[0].name
        raise TermError(f"not a variable: {_short(self)}")

    @property
    def bounds(self) -> tuple[int | None, int | None]:
        """``(lo, hi)`` of an Int variable (``None`` = unbounded on that side)."""
        if self.op == "var" and self.sort.is_int:
            return self.params[1], self.params[2]
        raise TermError(f"not an Int variable: {_short(self)}")

    @property
    def width(self) -> int:
        if not self.sort.is_bv:
            raise TermError(f"not a bit-vector: {_short(self)}")
        return self.sort.width  # type: ignore[return-value]

    def with_args(self, args: Iterable[Any]) -> Term:
        """The same node with other arguments (same op, params; sorts re-checked, no simplification)."""
        return Term(self.op, tuple(args), self.params, self.sort if not self.args else None)

    # ---- arithmetic operators
    def __add__(self, o: Any) -> Term:
        return bvadd(self, o) if self.sort.is_bv else add(self, o)

    def __radd__(self, o: Any) -> Term:
        return bvadd(o, self) if self.sort.is_bv else add(o, self)

    def __sub__(self, o: Any) -> Term:
        return bvsub(self, o) if self.sort.is_bv else sub(self, o)

    def __rsub__(self, o: Any) -> Term:
        return bvsub(o, self) if self.sort.is_bv else sub(o, self)

    def __mul__(self, o: Any) -> Term:
        return bvmul(self, o) if self.sort.is_bv else mul(self, o)

    def __rmul__(self, o: Any) -> Term:
        return bvmul(o, self) if self.sort.is_bv else mul(o, self)

    def __neg__(self) -> Term:
        return bvneg(self) if self.sort.is_bv else neg(self)

    def __pos__(self) -> Term:
        return self

    def __abs__(self) -> Term:
        return abs_(self)

    def __floordiv__(self, o: Any) -> Term:
        return floordiv(self, o)

    def __rfloordiv__(self, o: Any) -> Term:
        return floordiv(o, self)

    def __mod__(self, o: Any) -> Term:
        return floormod(self, o)

    def __rmod__(self, o: Any) -> Term:
        return floormod(o, self)

    def div(self, o: Any) -> Term:
        """Euclidean division (SMT-LIB ``div``)."""
        return div(self, o)

    def mod(self, o: Any) -> Term:
        """Euclidean modulo (SMT-LIB ``mod``), always in ``[0, |o|)``."""
        return mod(self, o)

    def trunc_div(self, o: Any) -> Term:
        """Division rounding toward zero (C, PTX ``div.s32``)."""
        return trunc_div(self, o)

    def trunc_mod(self, o: Any) -> Term:
        """Remainder with the sign of the dividend (C, PTX ``rem.s32``)."""
        return trunc_mod(self, o)

    # ---- comparisons
    def __lt__(self, o: Any) -> Term:
        return lt(self, o)

    def __le__(self, o: Any) -> Term:
        return le(self, o)

    def __gt__(self, o: Any) -> Term:
        return gt(self, o)

    def __ge__(self, o: Any) -> Term:
        return ge(self, o)

    # ---- bitwise / boolean operators, by sort
    def __and__(self, o: Any) -> Term:
        return _bitwise("and", self, o)

    def __rand__(self, o: Any) -> Term:
        return _bitwise("and", o, self)

    def __or__(self, o: Any) -> Term:
        return _bitwise("or", self, o)

    def __ror__(self, o: Any) -> Term:
        return _bitwise("or", o, self)

    def __xor__(self, o: Any) -> Term:
        return _bitwise("xor", self, o)

    def __rxor__(self, o: Any) -> Term:
        return _bitwise("xor", o, self)

    def __invert__(self) -> Term:
        if self.sort.is_bool:
            return not_(self)
        if self.sort.is_bv:
            return bvnot(self)
        return sub(neg(self), 1)  # two's complement: ~x == -x - 1

    def __lshift__(self, k: Any) -> Term:
        if self.sort.is_bv:
            return bvshl(self, k)
        k = _static_shift(k)
        return mul(self, 1 << k)

    def __rshift__(self, k: Any) -> Term:
        if self.sort.is_bv:
            raise TermError(
                "'>>' on a bit-vector is ambiguous",
                hint="use bvlshr (logical) or bvashr (arithmetic)",
            )
        k = _static_shift(k)
        return floordiv(self, 1 << k)


def _static_shift(k: Any) -> int:
    if isinstance(k, Term) and k.is_const and k.sort.is_int:
        k = k.value
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise TermError(
            f"an integer shift needs a static non-negative amount, got {_short(k) if isinstance(k, Term) else k!r}",
            hint="shift bit-vector terms (bvshl/bvlshr) for symbolic amounts",
        )
    return k


def _short(t: Any, limit: int = 120) -> str:
    if not isinstance(t, Term):
        return repr(t)
    from argus.smt.smtlib import term_to_smtlib  # local: the printer depends on this module

    text = term_to_smtlib(t)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- sort checking

_INT_NARY = {"+", "*"}
_INT_BINARY = {"-", "div", "mod"}
_INT_UNARY = {"neg", "abs"}
_INT_COMPARE = {"<", "<=", ">", ">="}
_INT_BITWISE = {"int_xor", "int_and", "int_or"}
_BOOL_NARY = {"and", "or"}
_BV_BINARY = {
    "bvadd", "bvsub", "bvmul", "bvand", "bvor", "bvxor", "bvshl", "bvlshr", "bvashr",
    "bvudiv", "bvurem", "bvsdiv", "bvsrem", "bvsmod",
}  # fmt: skip
_BV_UNARY = {"bvneg", "bvnot"}
_BV_COMPARE = {"bvult", "bvule", "bvugt", "bvuge", "bvslt", "bvsle", "bvsgt", "bvsge"}
# ops whose result sort follows from the arguments (``sort`` may be omitted)
_SORT_FROM_ARGS = (
    _INT_NARY | _INT_BINARY | _INT_UNARY | _INT_COMPARE | _INT_BITWISE | _BOOL_NARY | _BV_BINARY
    | _BV_UNARY | _BV_COMPARE
    | {"not", "=>", "xor", "=", "distinct", "ite", "int2bv", "bv2nat", "concat", "extract",
       "zero_extend", "sign_extend", "apply"}
)  # fmt: skip

#: every op a term may have
OPS = frozenset(_SORT_FROM_ARGS | {"const", "var"})


def _check(op: str, args: tuple, params: tuple, sort: Sort | None) -> Sort:
    """Validate a node and return its sort."""
    for a in args:
        if not isinstance(a, Term):
            raise TermError(f"argument of {op} is not a term: {a!r}")
    sorts = [a.sort for a in args]

    def need(cond: bool, what: str) -> None:
        if not cond:
            shown = " ".join(str(s) for s in sorts)
            raise TermError(f"ill-sorted {op}: {what} (arguments: {shown or 'none'})")

    def arity(n: int, at_least: bool = False) -> None:
        need(
            len(args) >= n if at_least else len(args) == n,
            f"needs {'at least ' if at_least else ''}{n} arguments",
        )

    def nparams(n: int) -> None:
        need(len(params) == n, f"needs {n} parameters, got {params!r}")

    result: Sort
    if op == "const":
        nparams(1)
        arity(0)
        need(sort is not None, "constant needs a sort")
        v = params[0]
        if sort.is_bool:  # type: ignore[union-attr]
            need(isinstance(v, bool), "Bool constant must be a bool")
        else:
            need(isinstance(v, int) and not isinstance(v, bool), "constant must be an int")
            if sort.is_bv:  # type: ignore[union-attr]
                need(0 <= v < (1 << sort.width), "bit-vector value out of [0, 2**w)")  # type: ignore[union-attr, operator]
        return sort  # type: ignore[return-value]
    if op == "var":
        arity(0)
        need(sort is not None, "variable needs a sort")
        need(
            len(params) == (3 if sort.is_int else 1),
            "Int variables take (name, lo, hi), others (name,)",
        )  # type: ignore[union-attr]
        _check_name(params[0])
        if sort.is_int:  # type: ignore[union-attr]
            lo, hi = params[1], params[2]
            for b in (lo, hi):
                need(
                    b is None or (isinstance(b, int) and not isinstance(b, bool)),
                    "bounds must be int or None",
                )
            need(lo is None or hi is None or lo <= hi, f"empty bounds [{lo}, {hi}]")
        return sort  # type: ignore[return-value]

    if op in _INT_NARY:
        arity(2, at_least=True)
        need(all(s.is_int for s in sorts), "needs Int arguments")
        result = INT
    elif op in _INT_BINARY:
        arity(2)
        need(all(s.is_int for s in sorts), "needs Int arguments")
        result = INT
    elif op in _INT_UNARY:
        arity(1)
        need(sorts[0].is_int, "needs an Int argument")
        result = INT
    elif op in _INT_COMPARE:
        arity(2)
        need(all(s.is_int for s in sorts), "needs Int arguments")
        result = BOOL
    elif op in _INT_BITWISE:
        arity(2)
        nparams(2)
        need(all(s.is_int for s in sorts), "needs Int arguments")
        w, signed = params
        need(
            isinstance(w, int) and not isinstance(w, bool) and w >= 1,
            "width must be a positive int",
        )
        need(isinstance(signed, bool), "signed flag must be a bool")
        result = INT
    elif op in _BOOL_NARY:
        arity(2, at_least=True)
        need(all(s.is_bool for s in sorts), "needs Bool arguments")
        result = BOOL
    elif op == "not":
        arity(1)
        need(sorts[0].is_bool, "needs a Bool argument")
        result = BOOL
    elif op in ("=>", "xor"):
        arity(2)
        need(all(s.is_bool for s in sorts), "needs Bool arguments")
        result = BOOL
    elif op in ("=", "distinct"):
        arity(2, at_least=True)
        need(all(s == sorts[0] for s in sorts), "needs arguments of one sort")
        result = BOOL
    elif op == "ite":
        arity(3)
        need(sorts[0].is_bool and sorts[1] == sorts[2], "needs (Bool, S, S)")
        result = sorts[1]
    elif op in _BV_BINARY:
        arity(2)
        need(sorts[0].is_bv and sorts[0] == sorts[1], "needs two bit-vectors of one width")
        result = sorts[0]
    elif op in _BV_UNARY:
        arity(1)
        need(sorts[0].is_bv, "needs a bit-vector")
        result = sorts[0]
    elif op in _BV_COMPARE:
        arity(2)
        need(sorts[0].is_bv and sorts[0] == sorts[1], "needs two bit-vectors of one width")
        result = BOOL
    elif op == "int2bv":
        arity(1)
        nparams(1)
        need(sorts[0].is_int, "needs an Int argument")
        result = BitVec(params[0])
    elif op == "bv2nat":
        arity(1)
        need(sorts[0].is_bv, "needs a bit-vector")
        result = INT
    elif op == "concat":
        arity(2)
        need(all(s.is_bv for s in sorts), "needs bit-vectors")
        result = BitVec(sorts[0].width + sorts[1].width)  # type: ignore[operator]
    elif op == "extract":
        arity(1)
        nparams(2)
        need(sorts[0].is_bv, "needs a bit-vector")
        hi, lo = params
        need(
            isinstance(hi, int) and isinstance(lo, int) and 0 <= lo <= hi < sorts[0].width,
            "needs 0 <= lo <= hi < width",
        )  # type: ignore[operator]
        result = BitVec(hi - lo + 1)
    elif op in ("zero_extend", "sign_extend"):
        arity(1)
        nparams(1)
        need(sorts[0].is_bv, "needs a bit-vector")
        need(isinstance(params[0], int) and params[0] >= 0, "needs an extension >= 0")
        result = BitVec(sorts[0].width + params[0])  # type: ignore[operator]
    elif op == "apply":
        nparams(1)
        f = params[0]
        need(isinstance(f, Function), "needs a Function parameter")
        need(tuple(sorts) == f.domain, f"{f.name} expects ({' '.join(map(str, f.domain))})")
        result = f.result
    else:
        raise TermError(f"unknown term op {op!r}")
    if sort is not None and sort != result:
        raise TermError(f"ill-sorted {op}: declared {sort}, computed {result}")
    return result


# --------------------------------------------------------------------------- leaves

TRUE = Term("const", (), (True,), BOOL)
FALSE = Term("const", (), (False,), BOOL)


def int_const(value: int) -> Term:
    """The integer literal ``value``."""
    if isinstance(value, bool) or not isinstance(value, int):
        value = _int_of(value)
    return Term("const", (), (int(value),), INT)


def bool_const(value: bool) -> Term:
    """``TRUE`` or ``FALSE``."""
    return TRUE if value else FALSE


def bv_const(value: int, width: int) -> Term:
    """The ``width``-bit vector holding ``value mod 2**width`` (negative values wrap)."""
    return Term("const", (), (int(value) % (1 << width),), BitVec(width))


def int_var(name: str, lo: int | None = None, hi: int | None = None) -> Term:
    """An integer variable with inclusive bounds ``lo <= name <= hi`` (``None``: unbounded side)."""
    lo = None if lo is None else _int_of(lo)
    hi = None if hi is None else _int_of(hi)
    return Term("var", (), (name, lo, hi), INT)


def bool_var(name: str) -> Term:
    """A Boolean variable."""
    return Term("var", (), (name,), BOOL)


def bv_var(name: str, width: int) -> Term:
    """A bit-vector variable of ``width`` bits."""
    return Term("var", (), (name,), BitVec(width))


def _int_of(x: Any) -> int:
    if isinstance(x, bool):
        raise TermError(f"expected an int, got the bool {x!r}")
    if isinstance(x, int):
        return x
    try:
        import sympy

        if isinstance(x, sympy.Integer):
            return int(x)
    except ImportError:  # pragma: no cover
        pass
    if hasattr(x, "__index__"):
        return operator.index(x)
    raise TermError(f"expected an int, got {type(x).__name__}: {x!r}")


def lift(x: Any, sort: Sort | None = None) -> Term:
    """A term for ``x``: terms pass through, ints become Int (or, given a BitVec ``sort``,
    bit-vector) literals, bools become ``TRUE``/``FALSE``."""
    if isinstance(x, Term):
        if sort is not None and x.sort != sort:
            raise TermError(f"expected a term of sort {sort}, got {x.sort}: {_short(x)}")
        return x
    if isinstance(x, bool):
        if sort is not None and not sort.is_bool:
            raise TermError(f"expected sort {sort}, got the bool {x!r}")
        return bool_const(x)
    if sort is not None and sort.is_bv:
        return bv_const(_int_of(x), sort.width)  # type: ignore[arg-type]
    if sort is not None and sort.is_bool:
        raise TermError(f"expected a Bool, got {x!r}")
    return int_const(_int_of(x))


def _lift2(a: Any, b: Any) -> tuple[Term, Term]:
    """Lift two operands, giving a bare int the sort of the other operand."""
    if isinstance(a, Term):
        return a, lift(b, a.sort if not isinstance(b, Term) else None)
    if isinstance(b, Term):
        return lift(a, b.sort), b
    return lift(a), lift(b)


def _ints(*ts: Term) -> bool:
    return all(t.op == "const" and t.sort.is_int for t in ts)


# --------------------------------------------------------------------------- integer arithmetic


def add(*xs: Any) -> Term:
    """``x0 + x1 + ...`` (flattened; constants folded into one trailing literal)."""
    terms: list[Term] = []
    total = 0
    for x in xs:
        t = lift(x, INT)
        for part in t.args if t.op == "+" else (t,):
            if part.op == "const":
                total += part.value  # type: ignore[operator]
            else:
                terms.append(part)
    if total != 0 or not terms:
        terms.append(int_const(total))
    return terms[0] if len(terms) == 1 else Term("+", tuple(terms))


def mul(*xs: Any) -> Term:
    """``x0 * x1 * ...`` (flattened; constants folded into one leading literal)."""
    terms: list[Term] = []
    product = 1
    for x in xs:
        t = lift(x, INT)
        for part in t.args if t.op == "*" else (t,):
            if part.op == "const":
                product *= part.value  # type: ignore[operator]
            else:
                terms.append(part)
    if product == 0:
        return int_const(0)
    if product != 1 or not terms:
        terms.insert(0, int_const(product))
    return terms[0] if len(terms) == 1 else Term("*", tuple(terms))


def sub(a: Any, b: Any) -> Term:
    """``a - b``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b):
        return int_const(a.value - b.value)  # type: ignore[operator]
    if b.op == "const":
        return add(a, -b.value)  # type: ignore[operator]
    if a is b:
        return int_const(0)
    return Term("-", (a, b))


def neg(a: Any) -> Term:
    """``-a``."""
    a = lift(a, INT)
    if a.op == "const":
        return int_const(-a.value)  # type: ignore[operator]
    if a.op == "neg":
        return a.args[0]
    return Term("neg", (a,))


def abs_(a: Any) -> Term:
    """``|a|``."""
    a = lift(a, INT)
    if a.op == "const":
        return int_const(abs(a.value))  # type: ignore[arg-type]
    return Term("abs", (a,))


def div(a: Any, b: Any) -> Term:
    """Euclidean division (SMT-LIB ``div``): ``a = b*q + r`` with ``0 <= r < |b|``; guarded ``b != 0``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b) and b.value != 0:
        return int_const(_euclid_div(a.value, b.value))  # type: ignore[arg-type]
    if b.op == "const" and b.value == 1:
        return a
    return Term("div", (a, b))


def mod(a: Any, b: Any) -> Term:
    """Euclidean modulo (SMT-LIB ``mod``), in ``[0, |b|)``; guarded ``b != 0``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b) and b.value != 0:
        return int_const(a.value - b.value * _euclid_div(a.value, b.value))  # type: ignore[operator, arg-type]
    if b.op == "const" and b.value in (1, -1):
        return int_const(0)
    return Term("mod", (a, b))


def _euclid_div(a: int, b: int) -> int:
    q = a // abs(b)  # floor division by |b| gives the Euclidean quotient for |b|
    return q if b > 0 else -q


def floordiv(a: Any, b: Any) -> Term:
    """``floor(a / b)`` (Python ``//``), encoded over Euclidean ``div``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b) and b.value != 0:
        return int_const(a.value // b.value)  # type: ignore[operator]
    if b.op == "const":
        if b.value > 0:  # type: ignore[operator]
            return div(a, b)
        if b.value < 0:  # type: ignore[operator]
            return div(neg(a), neg(b))
        return Term("div", (a, b))  # a // 0: left undefined, definedness() flags it
    return ite(ge(b, 0), div(a, b), div(neg(a), neg(b)))


def floormod(a: Any, b: Any) -> Term:
    """``a - b*floor(a/b)`` (Python ``%``, sign of ``b``), encoded over Euclidean ``mod``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b) and b.value != 0:
        return int_const(a.value % b.value)  # type: ignore[operator]
    if b.op == "const":
        if b.value > 0:  # type: ignore[operator]
            return mod(a, b)
        if b.value < 0:  # type: ignore[operator]
            return neg(mod(neg(a), neg(b)))
        return Term("mod", (a, b))
    return ite(ge(b, 0), mod(a, b), neg(mod(neg(a), neg(b))))


def trunc_div(a: Any, b: Any) -> Term:
    """Division rounding toward zero (C / PTX ``div.s32``), encoded over Euclidean ``div``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b) and b.value != 0:
        q = abs(a.value) // abs(b.value)  # type: ignore[arg-type]
        return int_const(q if (a.value >= 0) == (b.value >= 0) else -q)  # type: ignore[operator]
    return ite(ge(a, 0), div(a, b), neg(div(neg(a), b)))


def trunc_mod(a: Any, b: Any) -> Term:
    """Remainder with the sign of the dividend (C / PTX ``rem.s32``), over Euclidean ``mod``."""
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b) and b.value != 0:
        r = abs(a.value) % abs(b.value)  # type: ignore[arg-type]
        return int_const(r if a.value >= 0 else -r)  # type: ignore[operator]
    return ite(ge(a, 0), mod(a, b), neg(mod(neg(a), b)))


# --------------------------------------------------------------------------- comparisons

_COMPARE_FN: dict[str, Callable[[int, int], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


def _compare(op: str, a: Any, b: Any) -> Term:
    a, b = _lift2(a, b)
    if a.sort.is_bv or b.sort.is_bv:
        raise TermError(
            f"'{op}' on bit-vectors is ambiguous", hint="use ult/ule/ugt/uge or slt/sle/sgt/sge"
        )
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b):
        return bool_const(_COMPARE_FN[op](a.value, b.value))  # type: ignore[arg-type]
    return Term(op, (a, b))


def lt(a: Any, b: Any) -> Term:
    """``a < b`` (Int)."""
    return _compare("<", a, b)


def le(a: Any, b: Any) -> Term:
    """``a <= b`` (Int)."""
    return _compare("<=", a, b)


def gt(a: Any, b: Any) -> Term:
    """``a > b`` (Int)."""
    return _compare(">", a, b)


def ge(a: Any, b: Any) -> Term:
    """``a >= b`` (Int)."""
    return _compare(">=", a, b)


def eq(a: Any, b: Any) -> Term:
    """The SMT equation ``a = b`` (any sort; a bare int takes the other side's sort)."""
    a, b = _lift2(a, b)
    if a is b:
        return TRUE
    if a.op == "const" and b.op == "const" and a.sort == b.sort:
        return bool_const(a.value == b.value)
    return Term("=", (a, b))


def ne(a: Any, b: Any) -> Term:
    """``not (a = b)``."""
    return not_(eq(a, b))


def distinct(*xs: Any) -> Term:
    """Pairwise distinct (``TRUE`` for fewer than two arguments)."""
    if len(xs) < 2:
        return TRUE
    if len(xs) == 2:
        return ne(xs[0], xs[1])
    sort = next((x.sort for x in xs if isinstance(x, Term)), None)
    return Term("distinct", tuple(lift(x, sort) for x in xs))


# --------------------------------------------------------------------------- connectives


def _connective(op: str, unit: Term, absorbing: Term, xs: tuple[Any, ...]) -> Term:
    """``op`` over ``xs``: nested ``op`` nodes flattened, ``unit`` dropped, duplicates removed;
    ``absorbing`` if any operand is; ``unit`` when nothing is left."""
    out: list[Term] = []
    seen: set[Term] = set()
    for x in xs:
        t = lift(x, BOOL)
        for part in t.args if t.op == op else (t,):
            if part is absorbing:
                return absorbing
            if part is not unit and part not in seen:
                seen.add(part)
                out.append(part)
    if not out:
        return unit
    return out[0] if len(out) == 1 else Term(op, tuple(out))


def and_(*xs: Any) -> Term:
    """Conjunction (flattened, ``TRUE`` dropped, duplicates removed; ``TRUE`` when empty)."""
    return _connective("and", TRUE, FALSE, xs)


def or_(*xs: Any) -> Term:
    """Disjunction (flattened, ``FALSE`` dropped, duplicates removed; ``FALSE`` when empty)."""
    return _connective("or", FALSE, TRUE, xs)


def not_(a: Any) -> Term:
    """Negation."""
    a = lift(a, BOOL)
    if a.op == "const":
        return bool_const(not a.value)
    if a.op == "not":
        return a.args[0]
    return Term("not", (a,))


def implies(a: Any, b: Any) -> Term:
    """``a => b``."""
    a, b = lift(a, BOOL), lift(b, BOOL)
    if a is TRUE:
        return b
    if a is FALSE or b is TRUE or a is b:
        return TRUE
    return Term("=>", (a, b))


def xor_(a: Any, b: Any) -> Term:
    """Boolean exclusive or."""
    a, b = lift(a, BOOL), lift(b, BOOL)
    if a.op == "const" and b.op == "const":
        return bool_const(a.value != b.value)
    return Term("xor", (a, b))


def ite(c: Any, a: Any, b: Any) -> Term:
    """``if c then a else b`` (``a`` and ``b`` of one sort; bare ints take the other's sort)."""
    c = lift(c, BOOL)
    a, b = _lift2(a, b)
    if c.op == "const":
        return a if c.value else b
    if a is b:
        return a
    return Term("ite", (c, a, b))


# --------------------------------------------------------------------------- int-level bitwise


def _bitwise(kind: str, a: Any, b: Any) -> Term:
    a, b = _lift2(a, b)
    if a.sort.is_bool:
        return {"and": and_, "or": or_, "xor": xor_}[kind](a, b)
    if a.sort.is_bv:
        return {"and": bvand, "or": bvor, "xor": bvxor}[kind](a, b)
    return _int_bitwise(kind, a, b, None)


def int_xor(a: Any, b: Any, width: int | None = None, signed: bool | None = None) -> Term:
    """Two's-complement ``a ^ b`` on Int terms through ``width``-bit vectors (inferred by default)."""
    return _int_bitwise("xor", a, b, width, signed)


def int_and(a: Any, b: Any, width: int | None = None, signed: bool | None = None) -> Term:
    """Two's-complement ``a & b`` on Int terms through ``width``-bit vectors (inferred by default)."""
    return _int_bitwise("and", a, b, width, signed)


def int_or(a: Any, b: Any, width: int | None = None, signed: bool | None = None) -> Term:
    """Two's-complement ``a | b`` on Int terms through ``width``-bit vectors (inferred by default)."""
    return _int_bitwise("or", a, b, width, signed)


_PY_BITWISE = {"xor": operator.xor, "and": operator.and_, "or": operator.or_}


def _int_bitwise(kind: str, a: Any, b: Any, width: int | None, signed: bool | None = None) -> Term:
    a, b = lift(a, INT), lift(b, INT)
    if _ints(a, b):
        return int_const(_PY_BITWISE[kind](a.value, b.value))
    if kind == "xor" and a is b:
        return int_const(0)
    if kind in ("and", "or") and a is b:
        return a
    for x, y in ((a, b), (b, a)):  # neutral and absorbing constants
        if x.op == "const" and x.value == 0:
            return y if kind in ("xor", "or") else int_const(0)
        if x.op == "const" and x.value == -1 and kind == "and":
            return y
    if width is not None and signed is None:
        ia, ib = interval(a), interval(b)
        signed = None not in ia + ib and min(ia[0], ib[0]) < 0  # type: ignore[type-var]
    if width is None:
        ia, ib = interval(a), interval(b)
        if None in ia or None in ib:
            raise TermError(
                f"cannot choose a bit width for integer {kind}: an operand is unbounded "
                f"({_short(a)} in {_show_interval(ia)}, {_short(b)} in {_show_interval(ib)})",
                hint="give the variables bounds (int_var(name, lo, hi)) or pass width= explicitly",
            )
        inferred_signed, width = bitwise_width(ia, ib)  # type: ignore[arg-type]
        signed = inferred_signed if signed is None else signed
    return Term(f"int_{kind}", (a, b), (int(width), bool(signed)))


def bitwise_encoding(t: Term) -> Term:
    """The standard SMT-LIB term an integer-level bitwise node stands for (raw nodes, no folding).

    unsigned: ``bv2nat(bvop(int2bv_w(a), int2bv_w(b)))``;
    signed: ``bv2nat(bvxor(bvop(...), 2**(w-1))) - 2**(w-1)`` (two's-complement reading).
    The printer and both solver translators use this one encoding.
    """
    w, signed = t.params
    a, b = (Term("int2bv", (x,), (w,)) for x in t.args)
    inner = Term(_BITWISE_BV_OP[t.op], (a, b))
    if not signed:
        return Term("bv2nat", (inner,))
    half = 1 << (w - 1)
    flipped = Term("bvxor", (inner, Term("const", (), (half,), BitVec(w))))
    return Term("-", (Term("bv2nat", (flipped,)), Term("const", (), (half,), INT)))


_BITWISE_BV_OP = {"int_xor": "bvxor", "int_and": "bvand", "int_or": "bvor"}


def bitwise_width(ia: tuple[int, int], ib: tuple[int, int]) -> tuple[bool, int]:
    """``(signed, width)`` of the bit-vectors that represent two integer intervals exactly.

    Non-negative intervals: unsigned, ``max(1, bit_length(max hi))`` bits; otherwise signed,
    the least width whose range ``[-2**(w-1), 2**(w-1))`` holds both intervals.
    """
    lo = min(ia[0], ib[0])
    hi = max(ia[1], ib[1])
    if lo >= 0:
        return False, max(1, hi.bit_length())
    return True, max(1, hi.bit_length() + 1, (-lo - 1).bit_length() + 1)


def _show_interval(i: tuple[int | None, int | None]) -> str:
    return f"[{'-inf' if i[0] is None else i[0]}, {'+inf' if i[1] is None else i[1]}]"


# --------------------------------------------------------------------------- bit-vectors


def _bv2(op: str, a: Any, b: Any) -> Term:
    a, b = _lift2(a, b)
    return Term(op, (a, b))


def bvadd(a: Any, b: Any) -> Term:
    """Addition modulo ``2**w``."""
    return _bv2("bvadd", a, b)


def bvsub(a: Any, b: Any) -> Term:
    """Subtraction modulo ``2**w``."""
    return _bv2("bvsub", a, b)


def bvmul(a: Any, b: Any) -> Term:
    """Multiplication modulo ``2**w``."""
    return _bv2("bvmul", a, b)


def bvand(a: Any, b: Any) -> Term:
    """Bitwise and."""
    return _bv2("bvand", a, b)


def bvor(a: Any, b: Any) -> Term:
    """Bitwise or."""
    return _bv2("bvor", a, b)


def bvxor(a: Any, b: Any) -> Term:
    """Bitwise exclusive or."""
    return _bv2("bvxor", a, b)


def bvshl(a: Any, b: Any) -> Term:
    """Shift left (``b`` is a bit-vector of the same width; shifts ``>= w`` give 0)."""
    return _bv2("bvshl", a, b)


def bvlshr(a: Any, b: Any) -> Term:
    """Logical shift right."""
    return _bv2("bvlshr", a, b)


def bvashr(a: Any, b: Any) -> Term:
    """Arithmetic shift right."""
    return _bv2("bvashr", a, b)


def bvudiv(a: Any, b: Any) -> Term:
    """Unsigned division (SMT-LIB: by zero gives all ones)."""
    return _bv2("bvudiv", a, b)


def bvurem(a: Any, b: Any) -> Term:
    """Unsigned remainder (SMT-LIB: by zero gives ``a``)."""
    return _bv2("bvurem", a, b)


def bvsdiv(a: Any, b: Any) -> Term:
    """Signed division rounding toward zero (SMT-LIB semantics at zero)."""
    return _bv2("bvsdiv", a, b)


def bvsrem(a: Any, b: Any) -> Term:
    """Signed remainder, sign of ``a`` (SMT-LIB semantics at zero)."""
    return _bv2("bvsrem", a, b)


def bvsmod(a: Any, b: Any) -> Term:
    """Signed modulo, sign of ``b`` (SMT-LIB semantics at zero)."""
    return _bv2("bvsmod", a, b)


def bvneg(a: Any) -> Term:
    """Two's-complement negation."""
    return Term("bvneg", (lift(a),))


def bvnot(a: Any) -> Term:
    """Bitwise complement."""
    return Term("bvnot", (lift(a),))


def ult(a: Any, b: Any) -> Term:
    """Unsigned ``<``."""
    return _bv2("bvult", a, b)


def ule(a: Any, b: Any) -> Term:
    """Unsigned ``<=``."""
    return _bv2("bvule", a, b)


def ugt(a: Any, b: Any) -> Term:
    """Unsigned ``>``."""
    return _bv2("bvugt", a, b)


def uge(a: Any, b: Any) -> Term:
    """Unsigned ``>=``."""
    return _bv2("bvuge", a, b)


def slt(a: Any, b: Any) -> Term:
    """Signed ``<``."""
    return _bv2("bvslt", a, b)


def sle(a: Any, b: Any) -> Term:
    """Signed ``<=``."""
    return _bv2("bvsle", a, b)


def sgt(a: Any, b: Any) -> Term:
    """Signed ``>``."""
    return _bv2("bvsgt", a, b)


def sge(a: Any, b: Any) -> Term:
    """Signed ``>=``."""
    return _bv2("bvsge", a, b)


def concat(a: Term, b: Term) -> Term:
    """``a`` as the high bits, ``b`` as the low bits."""
    return Term("concat", (a, b))


def extract(a: Term, hi: int, lo: int) -> Term:
    """Bits ``hi`` down to ``lo`` (inclusive) of ``a``."""
    return Term("extract", (a,), (hi, lo))


def zero_extend(a: Term, k: int) -> Term:
    """``a`` widened by ``k`` zero bits."""
    return Term("zero_extend", (a,), (k,))


def sign_extend(a: Term, k: int) -> Term:
    """``a`` widened by ``k`` copies of its sign bit."""
    return Term("sign_extend", (a,), (k,))


def int2bv(a: Any, width: int) -> Term:
    """SMT-LIB ``((_ int2bv width) a)``: ``a mod 2**width`` as a bit-vector (total)."""
    a = lift(a, INT)
    if a.op == "const":
        return bv_const(a.value, width)  # type: ignore[arg-type]
    return Term("int2bv", (a,), (width,))


def bv2nat(a: Term) -> Term:
    """The unsigned value of a bit-vector, as an Int."""
    if a.op == "const":
        return int_const(a.value)  # type: ignore[arg-type]
    return Term("bv2nat", (a,))


def app(op: str, *args: Any, params: tuple = (), sort: Sort | None = None) -> Term:
    """Build the node ``op(args)`` as is (no simplification); ints are lifted."""
    hint = next((a.sort for a in args if isinstance(a, Term) and not a.sort.is_bool), None)
    lifted = tuple(a if isinstance(a, Term) else lift(a, hint) for a in args)
    return Term(op, lifted, params, sort)


# --------------------------------------------------------------------------- traversal


def subterms(*roots: Term) -> Iterator[Term]:
    """Every distinct subterm of ``roots``, children before parents (iterative, DAG-aware)."""
    seen: set[int] = set()
    stack: list[tuple[Term, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            yield t
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        for a in reversed(t.args):
            if id(a) not in seen:
                stack.append((a, False))


def variables(*roots: Term) -> dict[str, Term]:
    """The variables of ``roots`` by name (in first-occurrence order).

    Raises :class:`TermError` when one name is used with two sorts or two bound pairs.
    """
    out: dict[str, Term] = {}
    for t in subterms(*roots):
        if t.op == "var":
            other = out.setdefault(t.params[0], t)
            if other is not t:
                raise TermError(
                    f"variable {t.params[0]!r} is used with two declarations: "
                    f"{_describe_var(other)} and {_describe_var(t)}",
                    hint="give each variable one sort and one pair of bounds",
                )
    return out


def functions(*roots: Term) -> dict[str, Function]:
    """The uninterpreted functions applied in ``roots`` by name (one signature per name)."""
    out: dict[str, Function] = {}
    for t in subterms(*roots):
        if t.op == "apply":
            f = t.params[0]
            other = out.setdefault(f.name, f)
            if other != f:
                raise TermError(f"function {f.name!r} is used with two signatures: {other} and {f}")
    return out


def _describe_var(v: Term) -> str:
    if v.sort.is_int:
        return f"Int in {_show_interval(v.bounds)}"
    return str(v.sort)


def substitute(term: Term, mapping: Mapping[Term, Any]) -> Term:
    """Replace subterms (usually variables) by terms or ints, rebuilding with simplification."""
    memo: dict[Term, Term] = {k: lift(v, k.sort) for k, v in mapping.items()}
    for t in subterms(term):
        if t in memo:
            continue
        if not t.args:
            memo[t] = t
            continue
        new_args = tuple(memo[a] for a in t.args)
        memo[t] = t if all(x is y for x, y in zip(new_args, t.args)) else rebuild(t, new_args)
    return memo[term]


def rebuild(t: Term, args: tuple[Term, ...]) -> Term:
    """``t``'s op applied to new ``args`` through the simplifying constructors."""
    builder = _SIMPLIFYING.get(t.op)
    if builder is not None:
        return builder(*args)
    if t.op in _INT_BITWISE:
        return _int_bitwise(t.op[4:], args[0], args[1], *t.params)
    if t.op == "int2bv":
        return int2bv(args[0], t.params[0])
    if t.op == "bv2nat":
        return bv2nat(args[0])
    return t.with_args(args)


_SIMPLIFYING: dict[str, Callable[..., Term]] = {
    "+": add, "*": mul, "-": sub, "neg": neg, "abs": abs_, "div": div, "mod": mod,
    "<": lt, "<=": le, ">": gt, ">=": ge, "and": and_, "or": or_, "not": not_,
    "=>": implies, "xor": xor_, "ite": ite, "distinct": distinct,
}  # fmt: skip


def _eq_rebuild(*args: Term) -> Term:
    return and_(*(eq(a, b) for a, b in itertools.pairwise(args)))


_SIMPLIFYING["="] = _eq_rebuild


# --------------------------------------------------------------------------- intervals


def interval(t: Term) -> tuple[int | None, int | None]:
    """Sound bounds ``(lo, hi)`` of an Int term from variable and function bounds (``None``: unknown).

    Valid whenever every variable and bounded function application lies within its bounds.
    """
    memo: dict[Term, tuple[int | None, int | None]] = {}
    for s in subterms(t):
        if s.sort.is_int:
            memo[s] = _interval_node(s, memo)
    return memo[t]


def _interval_node(t: Term, memo: dict) -> tuple[int | None, int | None]:
    args = [memo.get(a) for a in t.args]
    match t.op:
        case "const":
            return t.value, t.value  # type: ignore[return-value]
        case "var":
            return t.params[1], t.params[2]
        case "apply":
            return t.params[0].bounds or (None, None)
        case "+":
            lo = hi = 0
            for alo, ahi in args:
                lo = None if lo is None or alo is None else lo + alo
                hi = None if hi is None or ahi is None else hi + ahi
            return lo, hi
        case "-":
            (alo, ahi), (blo, bhi) = args
            return (
                None if alo is None or bhi is None else alo - bhi,
                None if ahi is None or blo is None else ahi - blo,
            )
        case "neg":
            lo, hi = args[0]
            return (None if hi is None else -hi, None if lo is None else -lo)
        case "abs":
            lo, hi = args[0]
            if lo is not None and lo >= 0:
                return lo, hi
            if hi is not None and hi <= 0:
                return -hi, (None if lo is None else -lo)
            return 0, (None if lo is None or hi is None else max(-lo, hi))
        case "*":
            acc: tuple[int | None, int | None] = (1, 1)
            for a in args:
                acc = _mul_interval(acc, a)
            return acc
        case "div":
            (alo, ahi), (blo, bhi) = args
            if blo is not None and blo == bhi and blo != 0:
                d = blo
                lo = None if alo is None else _euclid_div(alo, d)
                hi = None if ahi is None else _euclid_div(ahi, d)
                return (lo, hi) if d > 0 else (hi, lo)
            return None, None
        case "mod":
            blo, bhi = args[1]
            if blo is None or bhi is None:
                return 0, None
            m = max(abs(blo), abs(bhi))
            return 0, max(0, m - 1)
        case "ite":
            (alo, ahi), (blo, bhi) = args[1], args[2]
            return (
                None if alo is None or blo is None else min(alo, blo),
                None if ahi is None or bhi is None else max(ahi, bhi),
            )
        case "int_xor" | "int_and" | "int_or":
            w, signed = t.params
            (alo, ahi), (blo, bhi) = args
            if t.op == "int_and" and not signed and ahi is not None and bhi is not None:
                return 0, min(ahi, bhi, (1 << w) - 1)
            return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
        case "bv2nat":
            return 0, (1 << t.args[0].sort.width) - 1
        case _:
            return None, None


def _mul_interval(a: tuple, b: tuple) -> tuple[int | None, int | None]:
    if None in a or None in b:
        # a constant zero still pins the product; other unknowns stay unknown
        if a == (0, 0) or b == (0, 0):
            return 0, 0
        return None, None
    products = [x * y for x in a for y in b]
    return min(products), max(products)


# --------------------------------------------------------------------------- definedness


def definedness(term: Term) -> list[Term]:
    """The guards under which ``term`` means what argus intends (a list of Bool terms).

    * ``b != 0`` for every ``div(a, b)`` / ``mod(a, b)`` (skipped for non-zero literals),
    * ``range(a) ∧ range(b)`` for every integer-level bitwise node of width ``w``:
      ``0 <= x < 2**w`` (unsigned) or ``-2**(w-1) <= x < 2**(w-1)`` (signed).

    A guard below an ``ite`` branch or a later operand of ``and`` / ``or`` / ``=>`` is
    conditioned on reaching it (``c => guard``), matching :func:`argus.smt.evaluate`'s
    short-circuit order, so ``ite(b != 0, a div b, 0)`` is defined everywhere.  Guards are
    deduplicated; the empty list means "always defined".
    """
    out: dict[Term, None] = {}

    def emit(cond: Term, guard: Term) -> None:
        g = implies(cond, guard) if cond is not TRUE else guard
        if g is not TRUE:
            out.setdefault(g, None)

    # the subterms below which some guard arises: the others are not walked (on the ite-heavy
    # terms of a tag's resolution most are not, and each walk builds path conditions)
    bearing: dict[Term, bool] = {}
    for t in subterms(term):
        own = ((t.op in ("div", "mod") and not (t.args[1].op == "const" and t.args[1].value != 0))
               or t.op in ("int_xor", "int_and", "int_or"))
        bearing[t] = own or any(bearing[a] for a in t.args)

    # explicit stack of (term, path condition); visited pairs keep their terms alive
    visited: set[tuple[Term, Term]] = set()
    stack: list[tuple[Term, Term]] = [(term, TRUE)] if bearing[term] else []
    while stack:
        t, cond = stack.pop()
        key = (t, cond)
        if key in visited or not t.args:
            continue
        visited.add(key)
        match t.op:
            case "div" | "mod":
                divisor = t.args[1]
                if not (divisor.op == "const" and divisor.value != 0):
                    emit(cond, ne(divisor, 0))
                stack.extend((a, cond) for a in reversed(t.args) if bearing[a])
            case "int_xor" | "int_and" | "int_or":
                w, signed = t.params
                lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
                for a in t.args:
                    emit(cond, and_(le(lo, a), le(a, hi)))
                stack.extend((a, cond) for a in reversed(t.args) if bearing[a])
            case "ite":
                c, x, y = t.args
                if bearing[y]:
                    stack.append((y, and_(cond, not_(c))))
                if bearing[x]:
                    stack.append((x, and_(cond, c)))
                if bearing[c]:
                    stack.append((c, cond))
            case "and" | "or" | "=>":
                last = max((i for i, a in enumerate(t.args) if bearing[a]), default=-1)
                reached = cond
                pending = []
                for i, a in enumerate(t.args[:last + 1]):
                    if bearing[a]:
                        pending.append((a, reached))
                    if i < last:
                        step = not_(a) if t.op == "or" else a
                        reached = and_(reached, step)
                stack.extend(reversed(pending))
            case _:
                stack.extend((a, cond) for a in reversed(t.args) if bearing[a])
    return _weakest_premises(list(out))


def _weakest_premises(guards: list[Term]) -> list[Term]:
    """``guards`` less every ``P => g`` that another guard ``Q => g`` (or ``g`` itself) implies
    because ``Q``'s conjuncts are some of ``P``'s: an equivalent conjunction, kept in order.

    A guard reached under the first of many hypotheses is reached again under each longer
    prefix of them (``h0 => g``, ``h0 ∧ h1 => g``, ...); the walk emits them all, and a
    solver pays for every copy.  On the operand lemmas of a GEMM's MN-major layouts this cuts
    thousands of guards to tens."""
    by_conclusion: dict[Term, list[tuple[int, frozenset[Term]]]] = {}
    for i, g in enumerate(guards):
        premise, conclusion = (g.args[0], g.args[1]) if g.op == "=>" else (TRUE, g)
        conjuncts = frozenset() if premise is TRUE else frozenset(premise.args if premise.op == "and" else (premise,))
        by_conclusion.setdefault(conclusion, []).append((i, conjuncts))
    keep: set[int] = set()
    for group in by_conclusion.values():
        weakest: list[frozenset[Term]] = []
        for i, conjuncts in sorted(group, key=lambda item: len(item[1])):
            if not any(w <= conjuncts for w in weakest):
                weakest.append(conjuncts)
                keep.add(i)
    return [g for i, g in enumerate(guards) if i in keep]


def domain_constraints(*roots: Term) -> list[Term]:
    """``lo <= x <= hi`` for every bounded Int variable and bounded function application in ``roots``."""
    out: list[Term] = []
    for t in subterms(*roots):
        if t.op == "var" and t.sort.is_int:
            lo, hi = t.params[1], t.params[2]
        elif t.op == "apply" and t.params[0].bounds is not None:
            lo, hi = t.params[0].bounds
        else:
            continue
        if lo is not None:
            out.append(le(lo, t))
        if hi is not None:
            out.append(le(t, hi))
    variables(*roots)  # reject clashing declarations early
    return out
