"""Linear normalization of Int terms, with divisions and modulos by constants folded.

Reads through several writes compose their witnesses: the address a thread reads is put
through the inverse of a register fragment, then of a shared-memory store, then of a copy
from global memory.  Each level adds floor divisions and modulos by constants of the
previous level's terms, and block offsets that the next level subtracts again
(``(64·b + r) - 64·b``).  Left to the solvers, every such level is a case split.

:func:`simplify` rewrites a term bottom-up into a sum ``Σ cᵢ·aᵢ + c`` of *atoms* (variables,
applications, and the divisions / modulos that remain), combining like atoms, and folds

* ``(Σ cᵢ·aᵢ + c) mod m``: drops every ``cᵢ·aᵢ`` with ``m | cᵢ`` and reduces ``c``; when
  what is left provably lies in ``[q·m, (q+1)·m)``, the modulo is that sum less ``q·m``;
* ``(Σ cᵢ·aᵢ + c) div d``: takes every ``cᵢ·aᵢ`` with ``d | cᵢ`` out as ``(cᵢ/d)·aᵢ``
  (exact for Euclidean division by a positive ``d``); when the rest provably lies in
  ``[q·d, (q+1)·d)``, its quotient is ``q``.

Bounds come from the variables' declared ranges (:func:`argus.smt.terms.interval`).  Every
rewrite is an identity over the integers within those ranges, which every VC states as
hypotheses: the result is equivalent to the input wherever the VC is evaluated.
"""

from __future__ import annotations

import math

from argus.smt import terms as T

_Form = tuple[dict[T.Term, int], int]  # atom -> coefficient, constant


def simplify(term: T.Term, memo: dict[T.Term, T.Term] | None = None) -> T.Term:
    """``term`` normalized (see the module docstring); Bool and other sorts are rebuilt with
    their Int subterms normalized."""
    memo = {} if memo is None else memo
    forms: dict[T.Term, _Form] = {}
    if len(_INTERVALS) + len(_KEYS) > _CACHE_LIMIT:
        _INTERVALS.clear()
        _KEYS.clear()
    return _rebuild(term, memo, forms)


#: bounds and ordering keys of atoms, shared by every call (terms are immutable and
#: hash-consed, so an entry never goes stale; the caches are only emptied when large)
_INTERVALS: dict[T.Term, tuple[int | None, int | None]] = {}
_KEYS: dict[T.Term, str] = {}
_CACHE_LIMIT = 1 << 19


def _interval(t: T.Term) -> tuple[int | None, int | None]:
    """:func:`argus.smt.terms.interval` of ``t``, memoized across calls (children first)."""
    got = _INTERVALS.get(t)
    if got is not None:
        return got
    stack = [(t, False)]
    while stack:
        node, expanded = stack.pop()
        if node in _INTERVALS:
            continue
        if expanded:
            try:
                _INTERVALS[node] = T._interval_node(node, _INTERVALS)
            except T.TermError:
                _INTERVALS[node] = (None, None)
            continue
        stack.append((node, True))
        stack.extend((a, False) for a in node.args if a.sort.is_int and a not in _INTERVALS)
    return _INTERVALS[t]


def _key(t: T.Term) -> str:
    got = _KEYS.get(t)
    if got is None:
        got = _KEYS[t] = str(t)
    return got


_CONNECTIVES = {"and": T.and_, "or": T.or_, "not": T.not_, "=>": T.implies, "ite": T.ite}
_COMPARISONS = ("=", "<", "<=", ">", ">=")


def _rebuild(t: T.Term, memo: dict, forms: dict) -> T.Term:
    got = memo.get(t)
    if got is not None:
        return got
    if t.sort.is_int:
        out = _term(_form(t, memo, forms))
    elif t.op in _COMPARISONS and t.args[0].sort.is_int:
        out = _compare(t.op, _form(t.args[0], memo, forms), _form(t.args[1], memo, forms))
    elif t.op in _CONNECTIVES or (t.op == "=" and t.args[0].sort.is_bool):
        # rebuilt through the constructors: operands that folded to constants fold the node
        args = tuple(_rebuild(a, memo, forms) for a in t.args)
        out = T.eq(*args) if t.op == "=" else _CONNECTIVES[t.op](*args)
    elif t.args:
        args = tuple(_rebuild(a, memo, forms) for a in t.args)
        out = t if all(a is b for a, b in zip(args, t.args)) else t.with_args(args)
    else:
        out = t
    memo[t] = out
    return out


def _equation(atoms: dict[T.Term, int], c: int) -> T.Term:
    """``Σ kᵢ·aᵢ + c = 0``, split where a modulus separates it: when the terms whose
    coefficient ``m`` does not divide (with ``c``) provably lie in ``(-m, m)``, the equation
    holds exactly when they sum to 0 and the rest, divided by ``m``, does too (the first part
    is a multiple of ``m`` in that range).  A tile offset plus an offset inside the tile is
    a tile offset and an inner offset equal apart, without a search over the integers."""
    g = 0
    for k in atoms.values():
        g = math.gcd(g, k)
    if c % g:
        return T.FALSE  # g divides the atoms' part but not the constant
    atoms, c = {x: k // g for x, k in atoms.items()}, c // g
    for m in sorted({abs(k) for k in atoms.values() if abs(k) > 1}):
        big = {x: k // m for x, k in atoms.items() if k % m == 0}
        rest = ({x: k for x, k in atoms.items() if k % m}, c)
        if not big or not (rest[0] or rest[1]):
            continue
        lo, hi = _bounds(rest)
        if lo is not None and hi is not None and -m < lo and hi < m:
            return T.and_(_equation(*rest) if rest[0] else T.bool_const(rest[1] == 0), _equation(big, 0))
    lo, hi = _bounds((atoms, c))
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return T.FALSE
    if lo == 0 and hi == 0:
        return T.TRUE
    left = ({x: k for x, k in atoms.items() if k > 0}, max(c, 0))
    right = ({x: -k for x, k in atoms.items() if k < 0}, max(-c, 0))
    return T.eq(_term(left), _term(right))


def _compare(op: str, a: _Form, b: _Form) -> T.Term:
    """``a op b`` as ``d op 0`` with ``d = a - b`` normalized: decided by the bounds of ``d``
    where they suffice, else stated with the positive and negative parts of ``d`` on either
    side (equal differences give one term however the sides were written)."""
    atoms, c = _sum([a, _scale(b, -1)])
    if op == "=" and atoms:
        return _equation(atoms, c)
    lo, hi = _bounds((atoms, c))
    decided = {
        "=": (lo is not None and lo > 0) or (hi is not None and hi < 0),
        "<": lo is not None and lo >= 0, "<=": lo is not None and lo > 0,
        ">": hi is not None and hi <= 0, ">=": hi is not None and hi < 0,
    }[op]
    if decided:
        return T.FALSE
    holds = {
        "=": lo == 0 and hi == 0, "<": hi is not None and hi < 0, "<=": hi is not None and hi <= 0,
        ">": lo is not None and lo > 0, ">=": lo is not None and lo >= 0,
    }[op]
    if holds:
        return T.TRUE
    left = ({x: k for x, k in atoms.items() if k > 0}, max(c, 0))
    right = ({x: -k for x, k in atoms.items() if k < 0}, max(-c, 0))
    return {"=": T.eq, "<": T.lt, "<=": T.le, ">": T.gt, ">=": T.ge}[op](_term(left), _term(right))


def _form(t: T.Term, memo: dict, forms: dict) -> _Form:
    got = forms.get(t)
    if got is not None:
        return got
    match t.op:
        case "const":
            out: _Form = ({}, int(t.value))
        case "+":
            out = _sum([_form(a, memo, forms) for a in t.args])
        case "-":
            a, b = (_form(x, memo, forms) for x in t.args)
            out = _sum([a, _scale(b, -1)])
        case "neg":
            out = _scale(_form(t.args[0], memo, forms), -1)
        case "*" if sum(a.op != "const" for a in t.args) <= 1:
            factor = 1
            rest: _Form = ({}, 1)
            for a in t.args:
                if a.op == "const":
                    factor *= int(a.value)
                else:
                    rest = _form(a, memo, forms)
            out = _scale(rest, factor)
        case "mod" if t.args[1].op == "const" and int(t.args[1].value) > 0:
            out = _mod(_unwrap(_form(t.args[0], memo, forms), int(t.args[1].value), memo, forms),
                       int(t.args[1].value))
        case "div" if t.args[1].op == "const" and int(t.args[1].value) > 0:
            out = _div(_form(t.args[0], memo, forms), int(t.args[1].value))
        case "ite":
            cond = _rebuild(t.args[0], memo, forms)
            if cond.op == "const":
                out = _form(t.args[1] if cond.value else t.args[2], memo, forms)
            else:
                then, other = (_term(_form(x, memo, forms)) for x in t.args[1:])
                out = ({T.ite(cond, then, other): 1}, 0) if then is not other else _form(then, memo, forms)
        case _:
            args = tuple(_rebuild(a, memo, forms) for a in t.args)
            atom = t if all(a is b for a, b in zip(args, t.args)) else t.with_args(args)
            out = ({atom: 1}, 0)
    forms[t] = out
    return out


def _unwrap(form: _Form, m: int, memo: dict, forms: dict) -> _Form:
    """Inside a modulo by ``m``: ``k·(y mod m')`` is ``k·y`` whenever ``m | k·m'`` (they differ
    by a multiple of ``k·m'``)."""
    atoms, c = form
    parts: list[_Form] = [({}, c)]
    changed = False
    for atom, k in atoms.items():
        if atom.op == "mod" and atom.args[1].op == "const" and (k * int(atom.args[1].value)) % m == 0:
            parts.append(_scale(_form(atom.args[0], memo, forms), k))
            changed = True
        else:
            parts.append(({atom: k}, 0))
    return _sum(parts) if changed else form


def _sum(parts: list[_Form]) -> _Form:
    coeffs: dict[T.Term, int] = {}
    const = 0
    for atoms, c in parts:
        const += c
        for atom, k in atoms.items():
            coeffs[atom] = coeffs.get(atom, 0) + k
    return {a: k for a, k in coeffs.items() if k}, const


def _scale(form: _Form, k: int) -> _Form:
    if k == 0:
        return {}, 0
    atoms, c = form
    return {a: v * k for a, v in atoms.items()}, c * k


def _bounds(form: _Form) -> tuple[int | None, int | None]:
    atoms, c = form
    lo: int | None = c
    hi: int | None = c
    for atom, k in atoms.items():
        alo, ahi = _interval(atom)
        if k < 0:
            alo, ahi = (None if ahi is None else -ahi), (None if alo is None else -alo)
            k = -k
        lo = None if lo is None or alo is None else lo + k * alo
        hi = None if hi is None or ahi is None else hi + k * ahi
    return lo, hi


def _mod(form: _Form, m: int) -> _Form:
    atoms, c = form
    kept = {a: k for a, k in atoms.items() if k % m}
    reduced: _Form = (kept, c % m)
    lo, hi = _bounds(reduced)
    if lo is not None and hi is not None and lo // m == hi // m:
        return _sum([reduced, ({}, -(lo // m) * m)])
    return {T.mod(_term(reduced), m): 1}, 0


def _div(form: _Form, d: int) -> _Form:
    atoms, c = form
    whole = {a: k // d for a, k in atoms.items() if k % d == 0}
    rest: _Form = ({a: k for a, k in atoms.items() if k % d}, c % d)
    quotient: _Form = (whole, c // d)
    lo, hi = _bounds(rest)
    if lo is not None and hi is not None and lo // d == hi // d:
        return _sum([quotient, ({}, lo // d)])
    inner, k = next(iter(rest[0].items())) if len(rest[0]) == 1 else (None, 0)
    if inner is not None and k == 1 and rest[1] == 0 and inner.op == "div" and inner.args[1].op == "const" \
            and int(inner.args[1].value) > 0:  # (y div a) div d == y div (a·d)
        return _sum([quotient, ({T.div(inner.args[0], int(inner.args[1].value) * d): 1}, 0)])
    return _sum([quotient, ({T.div(_term(rest), d): 1}, 0)])


def _term(form: _Form) -> T.Term:
    atoms, c = form
    parts = [atom if k == 1 else T.mul(k, atom) for atom, k in sorted(atoms.items(), key=lambda x: _key(x[0]))]
    if c or not parts:
        parts.append(T.int_const(c))
    return T.add(*parts) if len(parts) > 1 else parts[0]
