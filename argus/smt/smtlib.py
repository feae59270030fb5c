"""SMT-LIB 2 text for terms and queries: the printer.

``term_to_smtlib(t)`` prints one term; integer-level bitwise nodes are written out in
standard SMT-LIB (``bv2nat`` / ``int2bv``) so any solver reads them.
"""

from __future__ import annotations

import re

from argus.smt.terms import Term

__all__ = ["quote_symbol", "sort_to_smtlib", "term_to_smtlib"]

_SIMPLE_SYMBOL = re.compile(r"^[A-Za-z~!@$%^&*_+=<>.?/\-][A-Za-z0-9~!@$%^&*_+=<>.?/\-]*$")
_RESERVED = frozenset(
    "! _ as BINARY DECIMAL exists HEXADECIMAL forall let match NUMERAL par STRING "
    "true false".split()
)


def quote_symbol(name: str) -> str:
    """``name`` as an SMT-LIB symbol, ``|quoted|`` when it is not a simple symbol."""
    if _SIMPLE_SYMBOL.match(name) and name not in _RESERVED:
        return name
    return f"|{name}|"


def sort_to_smtlib(sort) -> str:
    """``Int``, ``Bool`` or ``(_ BitVec w)``."""
    return str(sort)


def _bv_literal(value: int, width: int) -> str:
    if width % 4 == 0:
        return "#x" + format(value, f"0{width // 4}x")
    return "#b" + format(value, f"0{width}b")


_BITWISE_BV = {"int_xor": "bvxor", "int_and": "bvand", "int_or": "bvor"}


def term_to_smtlib(term: Term) -> str:
    """The SMT-LIB 2 text of ``term`` (shared subterms are printed at each use)."""
    text: dict[Term, str] = {}
    from argus.smt.terms import subterms

    for t in subterms(term):
        text[t] = _node(t, [text[a] for a in t.args])
    return text[term]


def _node(t: Term, args: list[str]) -> str:
    op = t.op
    if op == "const":
        v = t.params[0]
        if t.sort.is_bool:
            return "true" if v else "false"
        if t.sort.is_bv:
            return _bv_literal(v, t.sort.width)  # type: ignore[arg-type]
        return str(v) if v >= 0 else f"(- {-v})"
    if op == "var":
        return quote_symbol(t.params[0])
    if op == "apply":
        return f"({quote_symbol(t.params[0].name)} {' '.join(args)})"
    if op == "neg":
        return f"(- {args[0]})"
    if op in _BITWISE_BV:
        w, signed = t.params
        inner = f"({_BITWISE_BV[op]} ((_ int2bv {w}) {args[0]}) ((_ int2bv {w}) {args[1]}))"
        if not signed:
            return f"(bv2nat {inner})"
        half = 1 << (w - 1)
        return f"(- (bv2nat (bvxor {inner} {_bv_literal(half, w)})) {half})"
    if op == "int2bv":
        return f"((_ int2bv {t.params[0]}) {args[0]})"
    if op == "extract":
        return f"((_ extract {t.params[0]} {t.params[1]}) {args[0]})"
    if op in ("zero_extend", "sign_extend"):
        return f"((_ {op} {t.params[0]}) {args[0]})"
    return f"({op} {' '.join(args)})"
