"""Facts about layout sizes: decided statically where possible, otherwise handed to the verifier.

Every precondition of a layout operation (a stride divides another, a tile fits an extent, a
size is positive) is a :class:`Fact` over int-like values.  A fact is *decided* three-valued:
``True``, ``False`` or ``None`` (cannot tell without knowing the run-time sizes).

* ``True``: nothing to do.
* ``False``: the operation raises :class:`LayoutError` naming itself and the fact.
* ``None``: the fact becomes a :class:`SideCondition` for the verifier to prove, collected by the
  innermost ``with collect_side_conditions() as conditions:`` block.  Outside such a block an
  undecided precondition raises :class:`LayoutError`: it is never silently assumed.

A fact whose answer would change the *structure* of a result (which of two decompositions to
build) is not a precondition; operations raise ``LayoutError("... needs static ...")`` for it
through :func:`needs_static`.

Decisions are fast for Python ints and for *monomials* (an integer times a product of powers
of positive integer symbols, e.g. ``128*M*K``), which is what sizes and strides of kernels are;
other sympy expressions fall back to sympy's assumption system.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy

from argus import symbolic
from argus.errors import ArgusError, SourcePosition

__all__ = [
    "Fact",
    "LayoutError",
    "SideCondition",
    "collect_side_conditions",
    "decide_divides",
    "decide_equal",
    "decide_less_equal",
    "decide_positive",
    "exact_div",
    "needs_static",
    "require",
]


class LayoutError(ArgusError):
    """A layout operation got input it is not defined on, or could not decide a precondition."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, position=SourcePosition.of_caller(), hint=hint)


@dataclass(frozen=True)
class SideCondition:
    """A precondition the layout algebra could not decide: the verifier must prove it.

    ``condition`` is a sympy boolean over size symbols, ``operation`` the layout operation that
    needs it, ``reason`` why, ``position`` the user's call site.
    """

    condition: sympy.Basic
    operation: str
    reason: str
    position: SourcePosition | None = None

    def __str__(self) -> str:
        where = f"{self.position}: " if self.position else ""
        return f"{where}{self.operation}: {self.condition} ({self.reason})"


_COLLECTORS: contextvars.ContextVar[tuple[list[SideCondition], ...]] = contextvars.ContextVar(
    "argus_layout_side_conditions", default=()
)


@contextmanager
def collect_side_conditions() -> Iterator[list[SideCondition]]:
    """Collect the undecided preconditions of layout operations run inside the block.

    Yields a list that fills up as operations run.  Blocks nest; when an inner block ends, its
    conditions are also added to the enclosing block, so no condition is ever lost.
    """
    collected: list[SideCondition] = []
    token = _COLLECTORS.set((*_COLLECTORS.get(), collected))
    try:
        yield collected
    finally:
        _COLLECTORS.reset(token)
        outer = _COLLECTORS.get()
        if outer:
            outer[-1].extend(collected)


# --------------------------------------------------------------------------- monomials


def _norm(x: Any) -> Any:
    return symbolic.normalize(x)


@lru_cache(maxsize=8192)
def _monomial(x: Any) -> tuple[int, tuple[tuple[sympy.Symbol, int], ...]] | None:
    """``(c, ((s1, e1), ...))`` when ``x == c * s1**e1 * ...`` with positive integer symbols."""
    if symbolic.static_value(x) is not None:
        return symbolic.static_value(x), ()
    if not isinstance(x, sympy.Expr):
        return None
    coeff, rest = x.as_coeff_Mul()
    if not isinstance(coeff, sympy.Integer):
        return None
    powers = []
    for base, exponent in rest.as_powers_dict().items():
        if base == 1:
            continue
        if not (base.is_integer and (base.is_positive or _abstract(base).is_positive)):
            return None
        if not (isinstance(exponent, sympy.Integer) and exponent > 0):
            return None
        powers.append((base, int(exponent)))
    return int(coeff), tuple(sorted(powers, key=lambda p: str(p[0])))


def _exponents_le(small: tuple, large: tuple) -> bool:
    big = dict(large)
    return all(big.get(symbol, 0) >= exponent for symbol, exponent in small)


@lru_cache(maxsize=8192)
def _abstract(x: sympy.Expr) -> sympy.Expr:
    """Replace floor divisions and remainders by fresh symbols carrying their known sign.

    sympy cannot see that ``FloorDiv(M + 127, 128)`` is positive for ``M >= 1``; its dummy
    stand-in can, so signs of sums and products of such terms become decidable.
    """
    replacements = {}
    for atom in x.atoms(symbolic.FloorDiv):
        a, b = (_abstract(arg) for arg in atom.args)
        if b.is_positive and (a - b).is_nonnegative:
            replacements[atom] = sympy.Dummy(integer=True, positive=True)
        elif b.is_positive and a.is_nonnegative:
            replacements[atom] = sympy.Dummy(integer=True, nonnegative=True)
    for atom in x.atoms(sympy.Mod):
        if _abstract(atom.args[1]).is_positive:
            replacements[atom] = sympy.Dummy(integer=True, nonnegative=True)
    return x.xreplace(replacements) if replacements else x


# --------------------------------------------------------------------------- decisions


@lru_cache(maxsize=8192)
def _decide_equal(a: Any, b: Any) -> bool | None:
    difference = sympy.expand(symbolic.to_sympy(a) - symbolic.to_sympy(b))
    if difference == 0:
        return True
    if difference.is_zero is False:
        return False
    return None


def decide_equal(a: Any, b: Any) -> bool | None:
    """Is ``a == b``?  ``None`` when it depends on run-time sizes."""
    a, b = _norm(a), _norm(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return _decide_equal(a, b)


@lru_cache(maxsize=8192)
def _decide_less_equal(a: Any, b: Any) -> bool | None:
    difference = _abstract(sympy.expand(symbolic.to_sympy(b) - symbolic.to_sympy(a)))
    if difference.is_nonnegative:
        return True
    if difference.is_negative:
        return False
    ma, mb = _monomial(a), _monomial(b)
    if ma is not None and mb is not None and ma[0] >= 0 and mb[0] >= 0:
        # every symbol is >= 1, so a monomial grows with each factor it gains
        if ma[0] <= mb[0] and _exponents_le(ma[1], mb[1]):
            return True
        if mb[0] < ma[0] and _exponents_le(mb[1], ma[1]):
            return False
    return None


def decide_less_equal(a: Any, b: Any) -> bool | None:
    """Is ``a <= b``?  ``None`` when it depends on run-time sizes."""
    a, b = _norm(a), _norm(b)
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    return _decide_less_equal(a, b)


def decide_positive(x: Any) -> bool | None:
    """Is ``x > 0``?"""
    x = _norm(x)
    if isinstance(x, int):
        return x > 0
    abstract = _abstract(x)
    if abstract.is_positive:
        return True
    if abstract.is_nonpositive:
        return False
    return None


@lru_cache(maxsize=8192)
def _decide_divides(d: Any, x: Any) -> bool | None:
    md, mx = _monomial(d), _monomial(x)
    if md is not None and mx is not None and md[0] != 0:
        if mx[0] % md[0] == 0 and _exponents_le(md[1], mx[1]):
            return True
        if not md[1] and not mx[1]:
            return False
        return None
    return symbolic.divides(d, x)


def decide_divides(d: Any, x: Any) -> bool | None:
    """Does ``d`` divide ``x`` (``x == d * k`` for an integer ``k``)?"""
    d, x = _norm(d), _norm(x)
    if isinstance(d, int) and isinstance(x, int):
        return x == 0 if d == 0 else x % d == 0
    if d == 1 or x == 0:
        return True
    return _decide_divides(d, x)


def exact_div(x: Any, d: Any) -> Any:
    """``x / d`` where ``d`` is known to divide ``x`` (the quotient is simplified)."""
    x, d = _norm(x), _norm(d)
    if isinstance(d, int) and isinstance(x, int):
        return x // d
    if d == 1:
        return x
    return _norm(sympy.cancel(symbolic.to_sympy(x) / symbolic.to_sympy(d)))


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Fact:
    """A relation between int-likes with its three-valued static decision."""

    relation: str  # "divides", "less_equal", "equal", "positive"
    operands: tuple[Any, ...]
    decision: bool | None

    @staticmethod
    def divides(d: Any, x: Any) -> Fact:
        return Fact("divides", (_norm(d), _norm(x)), decide_divides(d, x))

    @staticmethod
    def less_equal(a: Any, b: Any) -> Fact:
        return Fact("less_equal", (_norm(a), _norm(b)), decide_less_equal(a, b))

    @staticmethod
    def equal(a: Any, b: Any) -> Fact:
        return Fact("equal", (_norm(a), _norm(b)), decide_equal(a, b))

    @staticmethod
    def positive(x: Any) -> Fact:
        return Fact("positive", (_norm(x),), decide_positive(x))

    def condition(self) -> sympy.Basic:
        """The fact as a sympy boolean (for the verifier)."""
        ops = [symbolic.to_sympy(o) for o in self.operands]
        match self.relation:
            case "divides":
                return sympy.Eq(sympy.Mod(ops[1], ops[0]), 0, evaluate=False)
            case "less_equal":
                return sympy.Le(ops[0], ops[1], evaluate=False)
            case "equal":
                return sympy.Eq(ops[0], ops[1], evaluate=False)
            case "positive":
                return sympy.Gt(ops[0], 0, evaluate=False)
        raise AssertionError(self.relation)

    def __str__(self) -> str:
        ops = [str(o) for o in self.operands]
        match self.relation:
            case "divides":
                return f"{ops[0]} divides {ops[1]}"
            case "less_equal":
                return f"{ops[0]} <= {ops[1]}"
            case "equal":
                return f"{ops[0]} == {ops[1]}"
            case "positive":
                return f"{ops[0]} > 0"
        raise AssertionError(self.relation)


def require(fact: Fact, operation: str, reason: str, *, hint: str | None = None) -> None:
    """State a precondition of ``operation``.

    Decided true: returns.  Decided false: raises :class:`LayoutError`.  Undecided: recorded as
    a :class:`SideCondition` in the innermost :func:`collect_side_conditions` block, or raises
    :class:`LayoutError` when no block is collecting.
    """
    if fact.decision is True:
        return
    if fact.decision is False:
        raise LayoutError(f"{operation}: {reason}: {fact} does not hold", hint=hint)
    collectors = _COLLECTORS.get()
    if not collectors:
        raise LayoutError(
            f"{operation}: cannot decide statically that {fact} ({reason})",
            hint="run the operation inside `with collect_side_conditions() as conditions:` "
            "to hand the condition to the verifier, or specialize the size",
        )
    condition = fact.condition()
    if any(c.condition == condition and c.operation == operation for c in collectors[-1]):
        return
    collectors[-1].append(SideCondition(condition, operation, reason, SourcePosition.of_caller()))


def needs_static(operation: str, fact: str) -> LayoutError:
    """The error for a result whose structure depends on an undecided fact (raise it)."""
    return LayoutError(
        f"{operation} needs static {fact}: the structure of its result depends on it",
        hint="specialize the size (make it a compile-time constant) or tile by mode",
    )
