"""SMT-LIB 2 text for terms and queries: the printer.

``term_to_smtlib(t)`` prints one term; integer-level bitwise nodes are written out in
standard SMT-LIB (``bv2nat`` / ``int2bv``) so any solver reads them.
"""

from __future__ import annotations

import re

from argus.smt.terms import Term, bitwise_encoding, subterms

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


_BITWISE_BV = frozenset({"int_xor", "int_and", "int_or"})


def term_to_smtlib(term: Term, memo: dict[Term, str] | None = None) -> str:
    """The SMT-LIB 2 text of ``term`` (shared subterms are printed at each use).

    ``memo`` (term -> text) may be shared between calls that print related terms.
    """
    text: dict[Term, str] = {} if memo is None else memo
    for t in subterms(term):
        if t in text:
            continue
        if t.op in _BITWISE_BV:
            text[t] = term_to_smtlib(bitwise_encoding(t), text)
        else:
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
    if op == "int2bv":
        return f"((_ int2bv {t.params[0]}) {args[0]})"
    if op == "extract":
        return f"((_ extract {t.params[0]} {t.params[1]}) {args[0]})"
    if op in ("zero_extend", "sign_extend"):
        return f"((_ {op} {t.params[0]}) {args[0]})"
    return f"({op} {' '.join(args)})"
