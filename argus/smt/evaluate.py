"""Concrete evaluation of terms: the semantics every solver answer is checked against.

``evaluate(term, env)`` returns a Python ``int`` (Int terms; bit-vectors as their unsigned
value in ``[0, 2**w)``) or ``bool``.  ``env`` maps variable names (or variable terms) to
values and function names to interpretations: a ``{argument tuple: value}`` table whose key
``None`` holds the default, or a Python callable.

Semantics are SMT-LIB's, evaluated lazily in the order :func:`argus.smt.terms.definedness`
assumes: ``ite`` evaluates only the branch taken, ``and`` / ``or`` / ``=>`` stop at the first
operand that decides them.  Where SMT-LIB leaves a value unspecified, evaluation raises
instead of guessing, so callers can classify the answer as *underspecified*:

* ``div`` / ``mod`` by zero raises :class:`DivisionByZero`;
* an uninterpreted function applied outside its table (and with no default) raises
  :class:`UnboundName`, like a missing variable.

Integer-level bitwise nodes compute what their bit-vector encoding computes (operands taken
modulo ``2**width``); with ``strict=True`` an operand outside the node's range raises
:class:`BitwiseOutOfRange` instead (its :func:`definedness` guard is false).  Bit-vector
division by zero follows SMT-LIB (``bvudiv`` gives all ones, ``bvurem`` the dividend).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from argus.errors import ArgusError
from argus.smt.terms import Term

__all__ = [
    "BitwiseOutOfRange",
    "DivisionByZero",
    "EvaluationError",
    "UnboundName",
    "Undefined",
    "evaluate",
    "evaluate_all",
    "satisfies",
]


class EvaluationError(ArgusError):
    """A term could not be evaluated."""


class UnboundName(EvaluationError):
    """A variable or function application has no value in the environment."""


class Undefined(EvaluationError):
    """The term's value is not specified by its semantics at this point (underspecified)."""


class DivisionByZero(Undefined):
    """An integer ``div`` or ``mod`` with divisor 0 was evaluated."""


class BitwiseOutOfRange(Undefined):
    """(strict mode) an integer-level bitwise operand lies outside its node's bit range."""


Env = Mapping[Any, Any]


def evaluate(term: Term, env: Env | None = None, *, strict: bool = False) -> int | bool:
    """The value of ``term`` under ``env`` (see the module docstring for the semantics).

    A term evaluated again (the address of an access at every lane of a warp) is compiled
    to a Python function of ``env`` the second time, when it only uses Int and Bool
    variables, integer arithmetic, comparisons and connectives; that function computes the
    same value in the same lazy order.  Whenever it cannot answer (a missing variable, a
    division by zero, a value to coerce) the evaluator below answers instead, errors
    included."""
    env = env or {}
    fn = _compiled(term)
    if fn is not None:
        try:
            return fn(env)
        except Exception:  # the evaluator gives the exact answer, or the exact error
            pass
    return _Evaluator(env, strict).value(term)


# --------------------------------------------------------------------------- compiled terms

_COMPILED: dict[Term, Any] = {}  # term -> function, or None where not compilable
_SEEN: dict[Term, int] = {}
_COMPILE_NODES = 2000  # tree nodes (shared subterms counted at each use)
_COMPILE_DEPTH = 60  # nesting Python's parser accepts comfortably
_CACHE_LIMIT = 1 << 13


class _NotCompiled(Exception):
    pass


def _compiled(term: Term) -> Any:
    got = _COMPILED.get(term, _NotCompiled)
    if got is not _NotCompiled:
        return got
    seen = _SEEN.get(term, 0) + 1
    if len(_SEEN) > _CACHE_LIMIT or len(_COMPILED) > _CACHE_LIMIT:
        _SEEN.clear()
        _COMPILED.clear()
    if seen < 2:  # evaluated once so far: compiling would cost more than it saves
        _SEEN[term] = seen
        return None
    _SEEN.pop(term, None)
    try:
        got = _compile(term)
    except (_NotCompiled, SyntaxError, RecursionError, MemoryError):
        got = None
    _COMPILED[term] = got
    return got


def _lookup(env: Env, t: Term, is_bool: bool) -> Any:
    """A variable's value as :meth:`_Evaluator.lookup_var` finds it, when no coercion is
    needed (otherwise the evaluator takes over)."""
    v = env[t] if t in env else env[t.params[0]]
    if (v is True or v is False) if is_bool else type(v) is int:
        return v
    raise _NotCompiled


_PY_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _compile(term: Term) -> Any:
    variables: dict[Term, str] = {}
    budget = [_COMPILE_NODES]

    def expr(t: Term, depth: int) -> str:
        budget[0] -= 1
        if budget[0] < 0 or depth > _COMPILE_DEPTH:
            raise _NotCompiled
        op, a = t.op, t.args
        if op == "const":
            v = t.params[0]
            if t.sort.is_bool or t.sort.is_int:
                return repr(v)
            raise _NotCompiled
        if op == "var":
            if not (t.sort.is_int or t.sort.is_bool):
                raise _NotCompiled
            name = variables.get(t)
            if name is None:
                name = variables[t] = f"v{len(variables)}"
            return name
        args = [expr(x, depth + 1) for x in a] if op != "ite" else None
        match op:
            case "+":
                return "(" + " + ".join(args) + ")"
            case "*":
                return "(" + " * ".join(args) + ")"
            case "-":
                return f"({args[0]} - {args[1]})"
            case "neg":
                return f"(-{args[0]})"
            case "abs":
                return f"abs({args[0]})"
            case "div":
                return f"_div({args[0]}, {args[1]})"
            case "mod":
                return f"_mod({args[0]}, {args[1]})"
            case "<" | "<=" | ">" | ">=":
                return f"({args[0]} {_PY_COMPARE[op]} {args[1]})"
            case "=" if len(args) == 2 and (a[0].sort.is_int or a[0].sort.is_bool):
                return f"({args[0]} == {args[1]})"
            case "not":
                return f"(not {args[0]})"
            case "and":
                return "(" + " and ".join(args) + ")"
            case "or":
                return "(" + " or ".join(args) + ")"
            case "=>":
                return f"((not {args[0]}) or {args[1]})"
            case "xor":
                return f"({args[0]} != {args[1]})"
            case "ite" if t.sort.is_int or t.sort.is_bool:
                c, x, y = (expr(v, depth + 1) for v in a)
                return f"({x} if {c} else {y})"
        raise _NotCompiled

    body = expr(term, 0)
    order = sorted(variables.items(), key=lambda item: int(item[1][1:]))
    lines = [f"    {name} = _lookup(env, _vars[{i}], {t.sort.is_bool})" for i, (t, name) in enumerate(order)]
    source = "def _f(env):\n" + "".join(line + "\n" for line in lines) + f"    return {body}\n"
    namespace = {"_div": euclid_div, "_mod": euclid_mod, "_lookup": _lookup, "_vars": tuple(t for t, _ in order)}
    exec(compile(source, "<argus term>", "exec"), namespace)  # source built from the term above
    return namespace["_f"]


def evaluate_all(
    terms: Iterable[Term], env: Env | None = None, *, strict: bool = False
) -> list[int | bool]:
    """The values of several terms, sharing one memo table."""
    ev = _Evaluator(env or {}, strict)
    return [ev.value(t) for t in terms]


def satisfies(terms: Iterable[Term], env: Env | None = None, *, strict: bool = False) -> bool:
    """True when every Bool term evaluates to ``True`` (raises :class:`Undefined` as evaluate does)."""
    ev = _Evaluator(env or {}, strict)
    return all(ev.value(t) is True for t in terms)


def _signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) else v


def _udiv(a: int, b: int, w: int) -> int:
    return (1 << w) - 1 if b == 0 else a // b


def _urem(a: int, b: int) -> int:
    return a if b == 0 else a % b


def _bvsdiv(a: int, b: int, w: int) -> int:
    mask = (1 << w) - 1
    na, nb = a >> (w - 1), b >> (w - 1)
    if not na and not nb:
        return _udiv(a, b, w)
    if na and not nb:
        return -_udiv(-a & mask, b, w) & mask
    if not na and nb:
        return -_udiv(a, -b & mask, w) & mask
    return _udiv(-a & mask, -b & mask, w)


def _bvsrem(a: int, b: int, w: int) -> int:
    mask = (1 << w) - 1
    na, nb = a >> (w - 1), b >> (w - 1)
    if not na and not nb:
        return _urem(a, b)
    if na and not nb:
        return -_urem(-a & mask, b) & mask
    if not na and nb:
        return _urem(a, -b & mask)
    return -_urem(-a & mask, -b & mask) & mask


def _bvsmod(a: int, b: int, w: int) -> int:
    mask = (1 << w) - 1
    na, nb = a >> (w - 1), b >> (w - 1)
    u = _urem(-a & mask if na else a, -b & mask if nb else b)
    if u == 0 or (not na and not nb):
        return u
    if na and not nb:
        return (-u + b) & mask
    if not na and nb:
        return (u + b) & mask
    return -u & mask


def _shl(a: int, b: int, w: int) -> int:
    return 0 if b >= w else (a << b) & ((1 << w) - 1)


def _lshr(a: int, b: int, w: int) -> int:
    return 0 if b >= w else a >> b


def _ashr(a: int, b: int, w: int) -> int:
    return (_signed(a, w) >> min(b, w - 1)) & ((1 << w) - 1)


_BV_BINARY: dict[str, Callable[[int, int, int], int]] = {
    "bvadd": lambda a, b, w: (a + b) & ((1 << w) - 1),
    "bvsub": lambda a, b, w: (a - b) & ((1 << w) - 1),
    "bvmul": lambda a, b, w: (a * b) & ((1 << w) - 1),
    "bvand": lambda a, b, w: a & b,
    "bvor": lambda a, b, w: a | b,
    "bvxor": lambda a, b, w: a ^ b,
    "bvshl": _shl,
    "bvlshr": _lshr,
    "bvashr": _ashr,
    "bvudiv": _udiv,
    "bvurem": lambda a, b, w: _urem(a, b),
    "bvsdiv": _bvsdiv,
    "bvsrem": _bvsrem,
    "bvsmod": _bvsmod,
}

_BV_COMPARE: dict[str, Callable[[int, int, int], bool]] = {
    "bvult": lambda a, b, w: a < b,
    "bvule": lambda a, b, w: a <= b,
    "bvugt": lambda a, b, w: a > b,
    "bvuge": lambda a, b, w: a >= b,
    "bvslt": lambda a, b, w: _signed(a, w) < _signed(b, w),
    "bvsle": lambda a, b, w: _signed(a, w) <= _signed(b, w),
    "bvsgt": lambda a, b, w: _signed(a, w) > _signed(b, w),
    "bvsge": lambda a, b, w: _signed(a, w) >= _signed(b, w),
}

_INT_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

_BITWISE = {"int_xor": operator.xor, "int_and": operator.and_, "int_or": operator.or_}


def euclid_div(a: int, b: int) -> int:
    """SMT-LIB ``div``: the ``q`` of ``a = b*q + r`` with ``0 <= r < |b|``."""
    if b == 0:
        raise DivisionByZero("integer division by zero")
    q = a // abs(b)
    return q if b > 0 else -q


def euclid_mod(a: int, b: int) -> int:
    """SMT-LIB ``mod``: the ``r`` of ``a = b*q + r`` with ``0 <= r < |b|``."""
    if b == 0:
        raise DivisionByZero("integer modulo by zero")
    return a % abs(b)


class _Evaluator:
    def __init__(self, env: Env, strict: bool) -> None:
        self.env = env
        self.strict = strict
        self.memo: dict[Term, Any] = {}

    # ---- environment lookups
    def lookup_var(self, t: Term) -> Any:
        name = t.params[0]
        if t in self.env:
            v = self.env[t]
        elif name in self.env:
            v = self.env[name]
        else:
            raise UnboundName(f"variable {name!r} has no value")
        return self._coerce(v, t, f"variable {name!r}")

    def _coerce(self, v: Any, t: Term, what: str) -> Any:
        if t.sort.is_bool:
            if not isinstance(v, bool):
                raise EvaluationError(f"{what} is Bool but its value is {v!r}")
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            try:
                v = operator.index(v)
            except TypeError:
                raise EvaluationError(f"{what} is {t.sort} but its value is {v!r}") from None
        if t.sort.is_bv:
            return v % (1 << t.sort.width)  # type: ignore[operator]
        return v

    def apply(self, t: Term, args: tuple) -> Any:
        f = t.params[0]
        interp = self.env.get(f.name, self.env.get(f))
        if interp is None:
            raise UnboundName(f"function {f.name!r} has no interpretation")
        if callable(interp) and not isinstance(interp, Mapping):
            v = interp(*args)
        else:
            if args in interp:
                v = interp[args]
            elif len(args) == 1 and args[0] in interp:
                v = interp[args[0]]
            elif None in interp:
                v = interp[None]
            else:
                raise UnboundName(f"function {f.name!r} has no value at {args!r}")
        return self._coerce(v, t, f"{f.name}{args!r}")

    # ---- evaluation (explicit stack; lazy for ite / and / or / =>)
    def value(self, root: Term) -> Any:
        memo = self.memo
        stack = [root]
        while stack:
            t = stack[-1]
            if t in memo:
                stack.pop()
                continue
            needed = self._next_needed(t)
            if needed is not None:
                stack.append(needed)
                continue
            memo[t] = self._compute(t)
            stack.pop()
        return memo[root]

    def _next_needed(self, t: Term) -> Term | None:
        memo = self.memo
        match t.op:
            case "ite":
                c = t.args[0]
                if c not in memo:
                    return c
                branch = t.args[1] if memo[c] else t.args[2]
                return None if branch in memo else branch
            case "and" | "or":
                stop = t.op == "or"
                for a in t.args:
                    if a not in memo:
                        return a
                    if memo[a] is stop:
                        return None
                return None
            case "=>":
                a, b = t.args
                if a not in memo:
                    return a
                if not memo[a]:
                    return None
                return None if b in memo else b
            case _:
                for a in t.args:
                    if a not in memo:
                        return a
                return None

    def _compute(self, t: Term) -> Any:
        memo = self.memo
        op = t.op
        match op:
            case "const":
                return t.params[0]
            case "var":
                return self.lookup_var(t)
            case "ite":
                c = memo[t.args[0]]
                return memo[t.args[1]] if c else memo[t.args[2]]
            case "and":
                return not any(memo.get(a) is False for a in t.args)
            case "or":
                return any(memo.get(a) is True for a in t.args)
            case "=>":
                a, b = t.args
                return (not memo[a]) or memo[b]
            case _:
                pass
        args = [memo[a] for a in t.args]
        if op == "+":
            return sum(args)
        if op == "*":
            out = 1
            for a in args:
                out *= a
            return out
        if op == "-":
            return args[0] - args[1]
        if op == "neg":
            return -args[0]
        if op == "abs":
            return abs(args[0])
        if op == "div":
            return euclid_div(args[0], args[1])
        if op == "mod":
            return euclid_mod(args[0], args[1])
        if op in _INT_COMPARE:
            return _INT_COMPARE[op](args[0], args[1])
        if op == "=":
            return all(x == args[0] for x in args[1:])
        if op == "distinct":
            return len(set(args)) == len(args)
        if op == "not":
            return not args[0]
        if op == "xor":
            return args[0] != args[1]
        if op in _BITWISE:
            w, signed = t.params
            if self.strict:
                lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
                for a in args:
                    if not lo <= a <= hi:
                        raise BitwiseOutOfRange(
                            f"{op} of width {w} ({'signed' if signed else 'unsigned'}): operand {a} outside [{lo}, {hi}]"
                        )
            mask = (1 << w) - 1
            r = _BITWISE[op](args[0] & mask, args[1] & mask)
            return _signed(r, w) if signed else r
        if op == "apply":
            return self.apply(t, tuple(args))
        if op == "int2bv":
            return args[0] % (1 << t.params[0])
        if op == "bv2nat":
            return args[0]
        w = t.args[0].sort.width if t.args else None
        if op in _BV_BINARY:
            return _BV_BINARY[op](args[0], args[1], w)  # type: ignore[arg-type]
        if op in _BV_COMPARE:
            return _BV_COMPARE[op](args[0], args[1], w)  # type: ignore[arg-type]
        if op == "bvneg":
            return -args[0] & ((1 << w) - 1)  # type: ignore[operator]
        if op == "bvnot":
            return ~args[0] & ((1 << w) - 1)  # type: ignore[operator]
        if op == "concat":
            return (args[0] << t.args[1].sort.width) | args[1]
        if op == "extract":
            hi, lo = t.params
            return (args[0] >> lo) & ((1 << (hi - lo + 1)) - 1)
        if op == "zero_extend":
            return args[0]
        if op == "sign_extend":
            return _signed(args[0], w) % (1 << (w + t.params[0]))  # type: ignore[arg-type, operator]
        raise EvaluationError(f"cannot evaluate op {op!r}")
