"""Integer expressions shared by the layout algebra and the SMT layer.

This is a leaf module: it imports nothing else from argus.

Three families of values are *int-like* and flow through layout arithmetic:

* Python ``int`` (concrete sizes, strides and coordinates),
* sympy expressions over integer symbols (run-time sizes, symbolic coordinates),
* foreign terms that implement the operator protocol (:class:`IntTerm`), e.g. the
  SMT layer's terms, so the verifier can evaluate a layout straight into solver terms.

Layout code never uses ``//``, ``%``, ``^``, ``&``, ``<<`` or ``>>`` directly on int-like
values; it calls :func:`floordiv`, :func:`mod`, :func:`xor`, ... which pick the right
semantics for each family (sympy has no integer XOR, and its ``//`` builds ``floor(a/b)``,
which the SMT layer cannot read back as a division).

Semantics (the same for every family):

=================  ===========================================================
``floordiv(a, b)``  floor(a / b)                      (Python ``//``)
``mod(a, b)``       a - b * floor(a / b)              (Python ``%``; sign of b)
``trunc_div(a, b)`` a / b rounded toward zero         (C, PTX ``div.s32``)
``trunc_mod(a, b)`` a - b * trunc_div(a, b)           (C, PTX ``rem.s32``; sign of a)
``xor/and/or``      two's-complement bitwise ops on unbounded integers
``shl(a, k)``       a * 2**k
``shr(a, k)``       floor(a / 2**k)                   (arithmetic shift)
=================  ===========================================================

Division by zero is undefined here; the SMT layer guards every division it emits.
"""

from __future__ import annotations

from typing import Any, Protocol, Union, runtime_checkable

import sympy

__all__ = [
    "BitAnd",
    "BitOr",
    "BitXor",
    "FloorDiv",
    "IntLike",
    "IntTerm",
    "TruncDiv",
    "TruncMod",
    "bit_and",
    "bit_or",
    "ceil_div",
    "decide",
    "divides",
    "evaluate",
    "floordiv",
    "free_symbols",
    "index_symbol",
    "is_static",
    "mod",
    "normalize",
    "shl",
    "shr",
    "size_symbol",
    "static_value",
    "to_sympy",
    "trunc_div",
    "trunc_mod",
    "xor",
]


@runtime_checkable
class IntTerm(Protocol):
    """Operator protocol of foreign integer terms (e.g. SMT terms).

    ``//`` and ``%`` must have floor semantics (Euclidean and floor agree for positive
    divisors, which is all layouts use); ``^ & |`` are bitwise; ``<< >>`` are shifts.
    """

    def __add__(self, other: Any) -> Any: ...
    def __mul__(self, other: Any) -> Any: ...
    def __floordiv__(self, other: Any) -> Any: ...
    def __mod__(self, other: Any) -> Any: ...
    def __xor__(self, other: Any) -> Any: ...


IntLike = Union[int, sympy.Expr, IntTerm]


# --------------------------------------------------------------------------- sympy functions


def _ints(*args: sympy.Expr) -> list[int] | None:
    if all(isinstance(a, sympy.Integer) for a in args):
        return [int(a) for a in args]
    return None


class FloorDiv(sympy.Function):
    """``floor(a / b)`` on integers, kept as one node so it can be translated back."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        v = _ints(a, b)
        if v is not None:
            if v[1] == 0:
                raise ZeroDivisionError("argus.symbolic.FloorDiv by zero")
            return sympy.Integer(v[0] // v[1])
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if isinstance(b, sympy.Integer) and b > 0:
            # split off the part of a sum that b divides exactly: (b*q + r) // b == q + r // b
            coeff, rest = _split_multiple(a, int(b))
            if coeff != 0:
                return coeff + FloorDiv(rest, b)
            if isinstance(a, FloorDiv) and isinstance(a.args[1], sympy.Integer) and a.args[1] > 0:
                return FloorDiv(a.args[0], a.args[1] * b)  # (x // p) // q == x // (p*q), p,q > 0
        return None


def _split_multiple(expr: sympy.Expr, divisor: int) -> tuple[sympy.Expr, sympy.Expr]:
    """Write ``expr = divisor*q + rest`` where every term of ``q`` has an integer coefficient."""
    q = sympy.Integer(0)
    rest = sympy.Integer(0)
    for term in sympy.Add.make_args(expr):
        coeff, factor = term.as_coeff_Mul()
        if isinstance(coeff, sympy.Integer) and int(coeff) % divisor == 0 and factor.is_integer:
            q += sympy.Integer(int(coeff) // divisor) * factor
        else:
            rest += term
    return q, rest


def _trunc_div_int(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("argus.symbolic.trunc_div by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class TruncDiv(sympy.Function):
    """Division rounding toward zero (C / PTX ``div``)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        v = _ints(a, b)
        if v is not None:
            return sympy.Integer(_trunc_div_int(*v))
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        return None


class TruncMod(sympy.Function):
    """Remainder with the sign of the dividend (C / PTX ``rem``)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        v = _ints(a, b)
        if v is not None:
            return sympy.Integer(v[0] - v[1] * _trunc_div_int(*v))
        if b == 1 or b == -1 or a == 0:
            return sympy.Integer(0)
        return None


class BitXor(sympy.Function):
    """Bitwise exclusive or of two integers (two's complement, unbounded)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        v = _ints(a, b)
        if v is not None:
            return sympy.Integer(v[0] ^ v[1])
        if a == 0:
            return b
        if b == 0:
            return a
        if a == b:
            return sympy.Integer(0)
        return None


class BitAnd(sympy.Function):
    """Bitwise and of two integers (two's complement, unbounded)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        v = _ints(a, b)
        if v is not None:
            return sympy.Integer(v[0] & v[1])
        if a == 0 or b == 0:
            return sympy.Integer(0)
        if a == b:
            return a
        return None


class BitOr(sympy.Function):
    """Bitwise or of two integers (two's complement, unbounded)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        v = _ints(a, b)
        if v is not None:
            return sympy.Integer(v[0] | v[1])
        if a == 0:
            return b
        if b == 0 or a == b:
            return a
        return None


# --------------------------------------------------------------------------- helpers


def size_symbol(name: str) -> sympy.Symbol:
    """A run-time size: an integer symbol known to be positive."""
    return sympy.Symbol(name, integer=True, positive=True)


def index_symbol(name: str) -> sympy.Symbol:
    """An index or coordinate: an integer symbol known to be non-negative."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def is_static(x: Any) -> bool:
    """True for Python ints (not bools) and sympy integer literals."""
    return (isinstance(x, int) and not isinstance(x, bool)) or isinstance(x, sympy.Integer)


def static_value(x: Any) -> int | None:
    """The int value of a static int-like, else ``None``."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, sympy.Integer):
        return int(x)
    return None


def normalize(x: Any) -> Any:
    """Turn sympy integer literals into Python ints; leave everything else alone."""
    if isinstance(x, sympy.Integer):
        return int(x)
    return x


def to_sympy(x: Any) -> sympy.Expr:
    """Lift an int or sympy expression to sympy (foreign terms are rejected)."""
    if isinstance(x, bool):
        raise TypeError("argus.symbolic: a bool is not an integer expression")
    if isinstance(x, int):
        return sympy.Integer(x)
    if isinstance(x, sympy.Expr):
        return x
    raise TypeError(f"argus.symbolic: cannot convert {type(x).__name__} to a sympy expression")


def _family(a: Any, b: Any) -> str:
    if static_value(a) is not None and static_value(b) is not None:
        return "int"
    if isinstance(a, (int, sympy.Expr)) and isinstance(b, (int, sympy.Expr)):
        return "sympy"
    return "term"


def floordiv(a: IntLike, b: IntLike) -> IntLike:
    """``floor(a / b)``."""
    match _family(a, b):
        case "int":
            bv = static_value(b)
            if bv == 0:
                raise ZeroDivisionError("argus.symbolic.floordiv by zero")
            return static_value(a) // bv  # type: ignore[operator]
        case "sympy":
            return normalize(FloorDiv(to_sympy(a), to_sympy(b)))
        case _:
            return a // b  # type: ignore[operator]


def mod(a: IntLike, b: IntLike) -> IntLike:
    """``a - b * floor(a / b)`` (Python ``%``)."""
    match _family(a, b):
        case "int":
            bv = static_value(b)
            if bv == 0:
                raise ZeroDivisionError("argus.symbolic.mod by zero")
            return static_value(a) % bv  # type: ignore[operator]
        case "sympy":
            return normalize(sympy.Mod(to_sympy(a), to_sympy(b)))
        case _:
            return a % b  # type: ignore[operator]


def ceil_div(a: IntLike, b: IntLike) -> IntLike:
    """``ceil(a / b)`` for positive ``b``, written as ``(a + b - 1) // b``."""
    return floordiv(a + b - 1, b)  # type: ignore[operator]


def trunc_div(a: IntLike, b: IntLike) -> IntLike:
    """Division rounding toward zero."""
    match _family(a, b):
        case "int":
            return _trunc_div_int(static_value(a), static_value(b))  # type: ignore[arg-type]
        case "sympy":
            return normalize(TruncDiv(to_sympy(a), to_sympy(b)))
        case _:
            return a.trunc_div(b)  # type: ignore[union-attr]


def trunc_mod(a: IntLike, b: IntLike) -> IntLike:
    """Remainder with the sign of the dividend."""
    match _family(a, b):
        case "int":
            av, bv = static_value(a), static_value(b)
            return av - bv * _trunc_div_int(av, bv)  # type: ignore[operator, arg-type]
        case "sympy":
            return normalize(TruncMod(to_sympy(a), to_sympy(b)))
        case _:
            return a.trunc_mod(b)  # type: ignore[union-attr]


def _bitwise(name: str, fn: type[sympy.Function], a: IntLike, b: IntLike, op) -> IntLike:
    match _family(a, b):
        case "int":
            return op(static_value(a), static_value(b))
        case "sympy":
            return normalize(fn(to_sympy(a), to_sympy(b)))
        case _:
            return op(a, b)


def xor(a: IntLike, b: IntLike) -> IntLike:
    """Bitwise exclusive or."""
    return _bitwise("xor", BitXor, a, b, lambda x, y: x ^ y)


def bit_and(a: IntLike, b: IntLike) -> IntLike:
    """Bitwise and."""
    return _bitwise("and", BitAnd, a, b, lambda x, y: x & y)


def bit_or(a: IntLike, b: IntLike) -> IntLike:
    """Bitwise or."""
    return _bitwise("or", BitOr, a, b, lambda x, y: x | y)


def shl(a: IntLike, k: int) -> IntLike:
    """``a * 2**k`` for a static, non-negative shift ``k``."""
    if static_value(k) is None or static_value(k) < 0:  # type: ignore[operator]
        raise ValueError("argus.symbolic.shl needs a static non-negative shift")
    k = static_value(k)  # type: ignore[assignment]
    if _family(a, 0) == "term":
        return a << k  # type: ignore[operator]
    return normalize(to_sympy(a) * 2**k) if not is_static(a) else static_value(a) << k


def shr(a: IntLike, k: int) -> IntLike:
    """``floor(a / 2**k)`` for a static, non-negative shift ``k``."""
    if static_value(k) is None or static_value(k) < 0:  # type: ignore[operator]
        raise ValueError("argus.symbolic.shr needs a static non-negative shift")
    k = static_value(k)  # type: ignore[assignment]
    if _family(a, 0) == "term":
        return a >> k  # type: ignore[operator]
    return floordiv(a, 1 << k)


# --------------------------------------------------------------------------- evaluation


def free_symbols(x: Any) -> frozenset[sympy.Symbol]:
    """The sympy symbols an int-like depends on (empty for ints)."""
    if isinstance(x, sympy.Basic):
        return frozenset(x.free_symbols)
    return frozenset()


def evaluate(x: IntLike, env: dict[Any, int] | None = None) -> int:
    """Evaluate an int or sympy expression to an int under ``env`` (symbol or name -> int).

    Raises ``ValueError`` naming the symbols left unbound.
    """
    if static_value(x) is not None:
        return static_value(x)  # type: ignore[return-value]
    if not isinstance(x, sympy.Expr):
        raise TypeError(f"argus.symbolic.evaluate: not an int or sympy expression: {x!r}")
    env = env or {}
    subs: dict[sympy.Symbol, sympy.Integer] = {}
    for s in x.free_symbols:
        if s in env:
            subs[s] = sympy.Integer(env[s])
        elif s.name in env:
            subs[s] = sympy.Integer(env[s.name])
    missing = sorted(s.name for s in x.free_symbols if s not in subs)
    if missing:
        raise ValueError(f"argus.symbolic.evaluate: unbound symbols {', '.join(missing)}")
    value = x.xreplace(subs)
    if not isinstance(value, sympy.Integer):
        value = sympy.simplify(value)
    if not isinstance(value, sympy.Integer):
        raise ValueError(f"argus.symbolic.evaluate: {x} did not reduce to an integer ({value})")
    return int(value)


def decide(cond: Any) -> bool | None:
    """Three-valued truth of a condition: ``True``/``False`` when sympy can tell, else ``None``.

    Accepts Python bools, sympy booleans and relationals (e.g. ``sympy.Eq(n % 8, 0)``).
    """
    if isinstance(cond, bool):
        return cond
    if cond is sympy.true:
        return True
    if cond is sympy.false:
        return False
    if isinstance(cond, sympy.Basic):
        simplified = sympy.simplify(cond)
        if simplified is sympy.true:
            return True
        if simplified is sympy.false:
            return False
    return None


def divides(d: IntLike, x: IntLike) -> bool | None:
    """Does ``d`` divide ``x``?  ``None`` when it cannot be decided statically."""
    dv, xv = static_value(d), static_value(x)
    if dv is not None and xv is not None:
        if dv == 0:
            return xv == 0
        return xv % dv == 0
    if dv == 1 or xv == 0:
        return True
    if isinstance(x, sympy.Expr) or isinstance(d, sympy.Expr):
        quotient = sympy.simplify(to_sympy(x) / to_sympy(d))
        if quotient.is_integer:
            return True
        r = sympy.Mod(to_sympy(x), to_sympy(d))
        if r == 0:
            return True
        if r.is_nonzero:
            return False
    return None
