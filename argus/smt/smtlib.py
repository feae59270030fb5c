"""SMT-LIB 2 text: the printer of terms, queries and command scripts, and a reader.

Printer
-------
:func:`term_to_smtlib` prints a term; :func:`query_to_smtlib` a whole, self-contained query
(options, ``set-logic``, declarations, domain constraints, named assertions
``(! φ :named n)``, ``check-sat`` and optionally ``get-model`` / ``get-unsat-core``);
:func:`script_to_smtlib` a list of :class:`Command` (``push`` / ``pop``,
``check-sat-assuming``, ``get-value``, ...).  Scripts and queries write a subterm used more
than once as one ``define-fun`` (text linear in the term DAG, not in its unfolded tree;
``share=False`` writes every use).  Integer-level bitwise nodes are written out in
standard SMT-LIB through :func:`argus.smt.terms.bitwise_encoding`.  Negative integer literals
print as ``(- n)``.

Variable bounds are part of argus variables but not of SMT-LIB declarations: the printer
asserts them (so any solver sees them) and records them in a comment line
``; argus:bounds x 0 15`` (``-`` for an open side), which this reader uses to rebuild the
bounded variable.  Stock solvers ignore the comment.

Reader
------
:func:`parse_script` reads the fragment argus prints plus common benchmark syntax: ``let``,
``declare-const``, ``declare-fun`` (with arguments: uninterpreted functions),
``define-fun`` (inlined, with or without arguments; one without is read once), Int / Bool / BitVec sorts, numerals,
``#b`` / ``#x`` / ``(_ bvN w)`` literals, Int arithmetic (``div mod abs``), every bit-vector
op :mod:`argus.smt.terms` has, ``int2bv`` / ``bv2nat`` (also ``int_to_bv`` / ``ubv_to_int``),
``ite = distinct => and or not xor``, chained comparisons, named terms ``(! t :named n)``,
``push`` / ``pop``, ``check-sat``, ``check-sat-assuming``, ``get-model``, ``get-value``,
``get-unsat-core``, ``set-logic``, ``set-option``, ``set-info``, ``exit``.  Terms are built
without simplification, except that ``(- n)`` for a numeral is the literal ``-n`` and the
expansion of an integer-level bitwise node, which the printer wraps in
``(let ((|argus:int_xor| <encoding>)) |argus:int_xor|)``, is read back as that node, so
``parse_term(term_to_smtlib(t)) is t`` for every term the constructors build.
:func:`read_query` turns a one-check script into a :class:`~argus.smt.query.Query`.
"""

from __future__ import annotations

import itertools
import re
from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from argus.errors import ArgusError
from argus.smt.terms import (
    BOOL,
    INT,
    BitVec,
    Function,
    Sort,
    Term,
    bitwise_encoding,
    functions,
    subterms,
    variables,
)

__all__ = [
    "Command",
    "SmtlibError",
    "parse_script",
    "parse_term",
    "query_to_smtlib",
    "quote_symbol",
    "read_query",
    "script_to_smtlib",
    "sort_to_smtlib",
    "term_to_smtlib",
]


class SmtlibError(ArgusError):
    """SMT-LIB text argus cannot read (the message gives the line)."""


_SIMPLE_SYMBOL = re.compile(r"^[A-Za-z~!@$%^&*_+=<>.?/\-][A-Za-z0-9~!@$%^&*_+=<>.?/\-]*$")
_RESERVED = frozenset(
    "! _ as BINARY DECIMAL exists HEXADECIMAL forall let match NUMERAL par STRING true false".split()
)
_BITWISE = frozenset({"int_xor", "int_and", "int_or"})


# =========================================================================== printer


def quote_symbol(name: str) -> str:
    """``name`` as an SMT-LIB symbol, ``|quoted|`` when it is not a simple symbol."""
    if _SIMPLE_SYMBOL.match(name) and name not in _RESERVED:
        return name
    return f"|{name}|"


def sort_to_smtlib(sort: Sort) -> str:
    """``Int``, ``Bool`` or ``(_ BitVec w)``."""
    return str(sort)


def _bv_literal(value: int, width: int) -> str:
    if width % 4 == 0:
        return "#x" + format(value, f"0{width // 4}x")
    return "#b" + format(value, f"0{width}b")


def term_to_smtlib(term: Term, memo: dict[Term, str] | None = None) -> str:
    """The SMT-LIB 2 text of ``term`` (shared subterms are printed at each use).

    ``memo`` (term -> text) may be shared between calls that print related terms.
    """
    text: dict[Term, str] = {} if memo is None else memo
    for t in subterms(term):
        if t in text:
            continue
        text[t] = _text(t, text)
    return text[term]


def _text(t: Term, memo: Mapping[Term, str]) -> str:
    """The text of ``t`` given its arguments' texts in ``memo``."""
    if t.op in _BITWISE:
        # a let with a reserved binder marks the expansion, so the reader restores the node;
        # the encoding's own nodes go to a scratch memo
        marker = quote_symbol(f"argus:{t.op}")
        encoding = term_to_smtlib(bitwise_encoding(t), ChainMap({}, memo))  # type: ignore[arg-type]
        return f"(let (({marker} {encoding})) {marker})"
    return _node(t, [memo[a] for a in t.args])


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


@dataclass(frozen=True)
class Command:
    """One SMT-LIB command.

    ============================  =================================================
    ``name``                      ``args``
    ============================  =================================================
    ``set-logic``                 ``(logic,)``
    ``set-option``, ``set-info``  ``(keyword without ':', value text)``
    ``declare``                   ``(variable term or Function,)``
    ``assert``                    ``(term, name or None)``
    ``push``, ``pop``             ``(levels,)``
    ``check-sat``                 ``()``
    ``check-sat-assuming``        ``(term, ...)``
    ``get-value``                 ``(term, ...)``
    ``get-model``, ``get-unsat-core``, ``exit``  ``()``
    ============================  =================================================
    """

    name: str
    args: tuple = ()


def _declaration(d: Term | Function) -> list[str]:
    lines = []
    if isinstance(d, Function):
        if d.bounds is not None:
            lines.append(f"; argus:bounds {quote_symbol(d.name)} {_bound_text(d.bounds)}")
        dom = " ".join(sort_to_smtlib(s) for s in d.domain)
        lines.append(f"(declare-fun {quote_symbol(d.name)} ({dom}) {sort_to_smtlib(d.result)})")
        return lines
    name = d.params[0]
    if d.sort.is_int and d.bounds != (None, None):
        lines.append(f"; argus:bounds {quote_symbol(name)} {_bound_text(d.bounds)}")
    lines.append(f"(declare-const {quote_symbol(name)} {sort_to_smtlib(d.sort)})")
    return lines


def _bound_text(bounds: tuple[int | None, int | None]) -> str:
    return " ".join("-" if b is None else str(b) for b in bounds)


SHARE_MIN_CHARS = 24
"""A subterm used more than once whose text is longer than this is written once, as a
``define-fun`` (:func:`script_to_smtlib`)."""


def script_to_smtlib(commands: Iterable[Command], *, share: bool = True) -> str:
    """The text of a command list (one command per line).

    With ``share`` (the default), a non-atomic subterm that occurs more than once in the
    script's terms (under two parents, or as two commands' terms) and prints longer than
    :data:`SHARE_MIN_CHARS` is written once, as ``(define-fun |argus:sN| () Sort body)`` just
    before the first command that needs it, and by name at every use: a term DAG of ``n``
    nodes gives text linear in ``n`` instead of the size of its unfolded tree (exponential for
    a chain of shared sums).  Definitions are scoped like declarations: one made inside a
    ``push`` is written again after the ``pop``.  The reader expands them back into the same
    terms.  ``share=False`` writes every use out (the text is then a function of the terms
    alone, whatever else the script holds).
    """
    commands = list(commands)
    shared = _shared_subterms(commands) if share else frozenset()
    memo: dict[Term, str] = {}
    scopes: list[list[Term]] = [[]]  # memo entries made at each push depth
    counter = itertools.count()
    out: list[str] = []

    def text(term: Term) -> str:
        for t in subterms(term):
            if t in memo:
                continue
            body = _text(t, memo)
            if t in shared and len(body) > SHARE_MIN_CHARS:
                name = quote_symbol(f"argus:s{next(counter)}")
                out.append(f"(define-fun {name} () {sort_to_smtlib(t.sort)} {body})")
                body = name
            memo[t] = body
            scopes[-1].append(t)
        return memo[term]

    for c in commands:
        match c.name:
            case "set-logic":
                out.append(f"(set-logic {c.args[0]})")
            case "set-option" | "set-info":
                out.append(f"({c.name} :{c.args[0]} {c.args[1]})")
            case "declare":
                out.extend(_declaration(c.args[0]))
            case "assert":
                term, name = c.args
                body = text(term)
                out.append(
                    f"(assert {body})"
                    if name is None
                    else f"(assert (! {body} :named {quote_symbol(name)}))"
                )
            case "push":
                levels = c.args[0] if c.args else 1
                scopes.extend([] for _ in range(levels))
                out.append(f"(push {levels})")
            case "pop":
                levels = c.args[0] if c.args else 1
                for _ in range(min(levels, len(scopes) - 1)):
                    for t in scopes.pop():  # their texts may name definitions the pop removes
                        memo.pop(t, None)
                out.append(f"(pop {levels})")
            case "check-sat-assuming":
                out.append(f"(check-sat-assuming ({' '.join(text(t) for t in c.args)}))")
            case "get-value":
                out.append(f"(get-value ({' '.join(text(t) for t in c.args)}))")
            case "check-sat" | "get-model" | "get-unsat-core" | "exit":
                out.append(f"({c.name})")
            case _:
                raise SmtlibError(f"cannot print command {c.name!r}")
    return "\n".join(out) + "\n"


def _shared_subterms(commands: Sequence[Command]) -> frozenset[Term]:
    """The non-atomic subterms of the commands' terms with more than one use: two distinct
    parents, or a parent and a command (or two commands)."""
    roots = [
        t
        for c in commands
        if c.name in ("assert", "check-sat-assuming", "get-value")
        for t in (c.args[:1] if c.name == "assert" else c.args)
    ]
    uses: dict[Term, int] = {}
    for r in roots:
        uses[r] = uses.get(r, 0) + 1
    for t in subterms(*roots):
        for a in set(t.args):
            uses[a] = uses.get(a, 0) + 1
    return frozenset(t for t, n in uses.items() if n > 1 and t.op not in ("var", "const"))


def declarations(terms: Sequence[Term]) -> list[Command]:
    """``declare`` commands for the functions, then the variables, of ``terms``."""
    return [Command("declare", (f,)) for f in functions(*terms).values()] + [
        Command("declare", (v,)) for v in variables(*terms).values()
    ]


def query_to_smtlib(
    query: Any,
    *,
    model: bool = False,
    core: bool = False,
    options: Mapping[str, str] | None = None,
    comment: str | None = None,
    share: bool = True,
) -> str:
    """A self-contained script for a :class:`~argus.smt.query.Query`: ``check-sat`` plus
    ``get-model`` (``model=True``) or ``get-unsat-core`` (``core=True``).  Shared subterms
    are written once (``share``, see :func:`script_to_smtlib`)."""
    commands: list[Command] = []
    opts = dict(options or {})
    if model:
        opts.setdefault("produce-models", "true")
    if core:
        opts.setdefault("produce-unsat-cores", "true")
    commands.extend(Command("set-option", (k, v)) for k, v in opts.items())
    commands.append(Command("set-logic", (query.logic,)))
    everything = [t for t, _ in query.all_assertions()]
    commands.extend(declarations(everything))
    commands.extend(Command("assert", (t, n)) for t, n in query.all_assertions())
    commands.append(Command("check-sat"))
    if model:
        commands.append(Command("get-model"))
    if core:
        commands.append(Command("get-unsat-core"))
    header = comment if comment is not None else query.label
    prefix = "".join(f"; {line}\n" for line in header.splitlines()) if header else ""
    return prefix + script_to_smtlib(commands, share=share)


# =========================================================================== reader


@dataclass(frozen=True)
class _Sym:
    name: str


@dataclass(frozen=True)
class _Key:
    name: str


@dataclass(frozen=True)
class _Str:
    text: str


@dataclass(frozen=True)
class _BvLit:
    value: int
    width: int


_TOKEN = re.compile(
    r"""\s+|;[^\n]*|\(|\)|\|[^|]*\||"(?:[^"]|"")*"|\#b[01]+|\#x[0-9a-fA-F]+|:[^\s()|;"]+|[^\s()|;"]+"""
)


def _tokens(text: str) -> Iterator[tuple[Any, int]]:
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SmtlibError(f"line {line}: cannot read {text[pos : pos + 20]!r}")
        tok = m.group()
        pos = m.end()
        start_line = line
        line += tok.count("\n")
        if tok[0].isspace() or tok[0] == ";":
            continue
        if tok in "()":
            yield tok, start_line
        elif tok[0] == "|":
            yield _Sym(tok[1:-1]), start_line
        elif tok[0] == '"':
            yield _Str(tok[1:-1].replace('""', '"')), start_line
        elif tok.startswith("#b"):
            yield _BvLit(int(tok[2:], 2), len(tok) - 2), start_line
        elif tok.startswith("#x"):
            yield _BvLit(int(tok[2:], 16), 4 * (len(tok) - 2)), start_line
        elif tok[0] == ":":
            yield _Key(tok[1:]), start_line
        elif tok.isdigit():
            yield int(tok), start_line
        else:
            yield _Sym(tok), start_line


def _sexprs(text: str) -> Iterator[tuple[Any, int]]:
    """Top-level s-expressions (lists of atoms) with their first line."""
    stack: list[list] = []
    first = 0
    for tok, line in _tokens(text):
        if tok == "(":
            if not stack:
                first = line
            stack.append([])
        elif tok == ")":
            if not stack:
                raise SmtlibError(f"line {line}: unbalanced ')'")
            done = stack.pop()
            if stack:
                stack[-1].append(done)
            else:
                yield done, first
        elif stack:
            stack[-1].append(tok)
        else:
            yield tok, line
    if stack:
        raise SmtlibError("unexpected end of input: unbalanced '('")


_BOUNDS_COMMENT = re.compile(
    r"^;\s*argus:bounds\s+(\|[^|]*\||\S+)\s+(\S+)\s+(\S+)\s*$", re.MULTILINE
)


def _bounds_comments(text: str) -> dict[str, tuple[int | None, int | None]]:
    out = {}
    for m in _BOUNDS_COMMENT.finditer(text):
        name = m.group(1)
        name = name[1:-1] if name.startswith("|") else name
        out[name] = tuple(None if b == "-" else int(b) for b in (m.group(2), m.group(3)))
    return out  # type: ignore[return-value]


# op name in SMT-LIB -> (argus op, arity rule): "bin" binary, "left" left-assoc chain, "nary"
# as is, "chain" chainable comparison, "un" unary
_OPS: dict[str, tuple[str, str]] = {
    "+": ("+", "nary"),
    "*": ("*", "nary"),
    "div": ("div", "left"),
    "mod": ("mod", "bin"),
    "abs": ("abs", "un"),
    "<": ("<", "chain"),
    "<=": ("<=", "chain"),
    ">": (">", "chain"),
    ">=": (">=", "chain"),
    "=": ("=", "nary"),
    "distinct": ("distinct", "nary"),
    "and": ("and", "nary"),
    "or": ("or", "nary"),
    "not": ("not", "un"),
    "xor": ("xor", "left"),
    "ite": ("ite", "nary"),
    "bvadd": ("bvadd", "left"),
    "bvmul": ("bvmul", "left"),
    "bvand": ("bvand", "left"),
    "bvor": ("bvor", "left"),
    "bvxor": ("bvxor", "left"),
    "bvsub": ("bvsub", "bin"),
    "bvshl": ("bvshl", "bin"),
    "bvlshr": ("bvlshr", "bin"),
    "bvashr": ("bvashr", "bin"),
    "bvudiv": ("bvudiv", "bin"),
    "bvurem": ("bvurem", "bin"),
    "bvsdiv": ("bvsdiv", "bin"),
    "bvsrem": ("bvsrem", "bin"),
    "bvsmod": ("bvsmod", "bin"),
    "bvneg": ("bvneg", "un"),
    "bvnot": ("bvnot", "un"),
    "bvult": ("bvult", "bin"),
    "bvule": ("bvule", "bin"),
    "bvugt": ("bvugt", "bin"),
    "bvuge": ("bvuge", "bin"),
    "bvslt": ("bvslt", "bin"),
    "bvsle": ("bvsle", "bin"),
    "bvsgt": ("bvsgt", "bin"),
    "bvsge": ("bvsge", "bin"),
    "concat": ("concat", "left"),
    "bv2nat": ("bv2nat", "un"),
    "ubv_to_int": ("bv2nat", "un"),
}
_INDEXED = {"int2bv": "int2bv", "int_to_bv": "int2bv", "extract": "extract", "zero_extend": "zero_extend", "sign_extend": "sign_extend"}  # fmt: skip


class _Reader:
    def __init__(self, bounds: Mapping[str, tuple[int | None, int | None]]) -> None:
        self.bounds = bounds
        self.globals: dict[str, Any] = {}  # name -> Term (var / 0-ary define) or Function or macro
        self.named: dict[str, Term] = {}
        self.line = 0

    def error(self, message: str) -> SmtlibError:
        return SmtlibError(f"line {self.line}: {message}")

    # ---- sorts
    def sort(self, s: Any) -> Sort:
        if s == _Sym("Int"):
            return INT
        if s == _Sym("Bool"):
            return BOOL
        if (
            isinstance(s, list)
            and len(s) == 3
            and s[0] == _Sym("_")
            and s[1] == _Sym("BitVec")
            and isinstance(s[2], int)
        ):
            return BitVec(s[2])
        raise self.error(f"unsupported sort {_show(s)}")

    def declare(self, name: str, sort: Sort) -> Term:
        if sort.is_int:
            lo, hi = self.bounds.get(name, (None, None))
            var = Term("var", (), (name, lo, hi), INT)
        else:
            var = Term("var", (), (name,), sort)
        self.globals[name] = var
        return var

    # ---- terms
    def term(self, e: Any, env: Mapping[str, Term]) -> Term:
        if isinstance(e, int) and not isinstance(e, bool):
            return Term("const", (), (e,), INT)
        if isinstance(e, _BvLit):
            return Term("const", (), (e.value,), BitVec(e.width))
        if isinstance(e, _Sym):
            return self.symbol(e.name, env)
        if not isinstance(e, list) or not e:
            raise self.error(f"not a term: {_show(e)}")
        head = e[0]
        if head == _Sym("let"):
            if len(e) != 3 or not isinstance(e[1], list):
                raise self.error("malformed let")
            marked = _bitwise_marker(e)
            if marked is not None:
                return self.bitwise(marked, e[1][0][1], env)
            bound = dict(env)
            for binding in e[1]:
                if not (
                    isinstance(binding, list) and len(binding) == 2 and isinstance(binding[0], _Sym)
                ):
                    raise self.error(f"malformed let binding {_show(binding)}")
                bound[binding[0].name] = self.term(binding[1], env)  # parallel let
            return self.term(e[2], bound)
        if head == _Sym("!"):
            t = self.term(e[1], env)
            attrs = e[2:]
            for key, value in zip(attrs[::2], attrs[1::2]):
                if key == _Key("named") and isinstance(value, _Sym):
                    self.named[value.name] = t
                    self.globals[value.name] = t
            return t
        if head == _Sym("_"):
            if (
                len(e) == 3
                and isinstance(e[1], _Sym)
                and e[1].name.startswith("bv")
                and isinstance(e[2], int)
            ):
                return Term("const", (), (int(e[1].name[2:]) % (1 << e[2]),), BitVec(e[2]))
            raise self.error(f"unsupported indexed term {_show(e)}")
        args = [self.term(a, env) for a in e[1:]]
        if isinstance(head, list):
            if (
                len(head) >= 3
                and head[0] == _Sym("_")
                and isinstance(head[1], _Sym)
                and head[1].name in _INDEXED
            ):
                params = tuple(head[2:])
                if len(args) != 1 or not all(isinstance(p, int) for p in params):
                    raise self.error(f"malformed {_show(head)} application")
                return self.node(_INDEXED[head[1].name], args, params)
            raise self.error(f"unsupported operator {_show(head)}")
        if not isinstance(head, _Sym):
            raise self.error(f"not an operator: {_show(head)}")
        name = head.name
        target = env.get(name, self.globals.get(name))
        if isinstance(target, Function):
            return self.node("apply", args, (target,))
        if isinstance(target, _Macro):
            return target.expand(self, args)
        if name == "-":
            if len(args) == 1:
                a = args[0]
                if a.op == "const" and a.sort.is_int and isinstance(e[1], int):
                    return Term("const", (), (-a.value,), INT)  # type: ignore[operator]
                return self.node("neg", args)
            return self._left("-", args)
        if name == "=>":
            out = args[-1]
            for a in reversed(args[:-1]):
                out = self.node("=>", [a, out])
            return out
        rule = _OPS.get(name)
        if rule is None:
            raise self.error(f"unknown function or operator {name!r}")
        op, kind = rule
        if kind == "un":
            return self.node(op, args)
        if kind == "bin":
            return self.node(op, args)
        if kind == "left":
            return self._left(op, args)
        if kind == "chain" and len(args) > 2:
            return self.node("and", [self.node(op, [a, b]) for a, b in itertools.pairwise(args)])
        if op in ("and", "or") and len(args) < 2:
            return args[0] if args else Term("const", (), (op == "and",), BOOL)
        return self.node(op, args)

    def bitwise(self, op: str, encoding: Any, env: Mapping[str, Term]) -> Term:
        t = _recognize_bitwise(self.term(encoding, env))
        if t.op != op:
            raise self.error(f"the argus:{op} marker wraps a term that is not its encoding")
        return t

    def _left(self, op: str, args: list[Term]) -> Term:
        out = args[0]
        for a in args[1:]:
            out = self.node(op, [out, a])
        return out

    def node(self, op: str, args: Sequence[Term], params: tuple = ()) -> Term:
        try:
            return Term(op, tuple(args), params)
        except ArgusError as err:
            raise self.error(err.message) from None

    def symbol(self, name: str, env: Mapping[str, Term]) -> Term:
        if name in env:
            return env[name]
        if name in ("true", "false"):
            return Term("const", (), (name == "true",), BOOL)
        target = self.globals.get(name)
        if isinstance(target, Term):
            return target
        if isinstance(target, _Macro):
            return target.expand(self, [])
        raise self.error(f"undeclared symbol {name!r}")

    # ---- commands
    def command(self, e: Any) -> list[Command]:
        if not isinstance(e, list) or not e or not isinstance(e[0], _Sym):
            raise self.error(f"not a command: {_show(e)}")
        name, args = e[0].name, e[1:]
        match name:
            case "set-logic":
                return [Command("set-logic", (args[0].name,))]
            case "set-option" | "set-info":
                key = args[0].name if isinstance(args[0], _Key) else str(args[0])
                return [Command(name, (key, " ".join(_show(a) for a in args[1:])))]
            case "declare-const":
                return [Command("declare", (self.declare(args[0].name, self.sort(args[1])),))]
            case "declare-fun":
                fname, domain, result = args[0].name, args[1], self.sort(args[2])
                if not domain:
                    return [Command("declare", (self.declare(fname, result),))]
                bounds = self.bounds.get(fname)
                f = Function(
                    fname,
                    tuple(self.sort(s) for s in domain),
                    result,
                    bounds if result.is_int else None,
                )
                self.globals[fname] = f
                return [Command("declare", (f,))]
            case "define-fun":
                fname, params, result, body = args[0].name, args[1], self.sort(args[2]), args[3]
                sig = [(p[0].name, self.sort(p[1])) for p in params]
                self.globals[fname] = _Macro(fname, sig, result, body)
                return []
            case "assert":
                body = args[0]
                label = None
                if isinstance(body, list) and body and body[0] == _Sym("!"):
                    attrs = body[2:]
                    for key, value in zip(attrs[::2], attrs[1::2]):
                        if key == _Key("named") and isinstance(value, _Sym):
                            label = value.name
                term = self.term(body, {})
                if term.sort != BOOL:
                    raise self.error(f"assertion of sort {term.sort}")
                return [Command("assert", (term, label))]
            case "push" | "pop":
                return [Command(name, (args[0] if args else 1,))]
            case (
                "check-sat"
                | "get-model"
                | "get-unsat-core"
                | "exit"
                | "get-assertions"
                | "reset-assertions"
            ):
                return [Command(name)]
            case "check-sat-assuming":
                return [Command(name, tuple(self.term(a, {}) for a in args[0]))]
            case "get-value":
                return [Command(name, tuple(self.term(a, {}) for a in args[0]))]
            case "get-info" | "get-option" | "echo" | "get-unsat-assumptions":
                return []
            case _:
                raise self.error(f"unsupported command {name!r}")


@dataclass
class _Macro:
    """A ``define-fun``: expanded at each use by reading its body with the arguments bound."""

    name: str
    params: list[tuple[str, Sort]]
    result: Sort
    body: Any
    value: Term | None = None  # a definition without parameters, read once

    def expand(self, reader: _Reader, args: list[Term]) -> Term:
        if not self.params and not args and self.value is not None:
            return self.value
        if len(args) != len(self.params):
            raise reader.error(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        env = {}
        for (pname, psort), a in zip(self.params, args):
            if a.sort != psort:
                raise reader.error(f"{self.name}: argument {pname} must be {psort}, got {a.sort}")
            env[pname] = a
        out = reader.term(self.body, env)
        if out.sort != self.result:
            raise reader.error(f"{self.name} is declared {self.result} but its body is {out.sort}")
        if not self.params:
            self.value = out
        return out


def _bitwise_marker(e: list) -> str | None:
    """``int_xor`` etc. for ``(let ((|argus:int_xor| enc)) |argus:int_xor|)``, else None."""
    if len(e) == 3 and isinstance(e[1], list) and len(e[1]) == 1:
        binding = e[1][0]
        if (
            isinstance(binding, list)
            and len(binding) == 2
            and binding[0] == e[2]
            and isinstance(e[2], _Sym)
        ):
            name = e[2].name
            if name.startswith("argus:") and name[6:] in _BITWISE:
                return name[6:]
    return None


def _recognize_bitwise(t: Term) -> Term:
    """Read back the expansion of an integer-level bitwise node as that node."""
    if t.op == "bv2nat":
        inner = t.args[0]
        op = _BV_TO_INT_OP.get(inner.op)
        if op is not None and all(a.op == "int2bv" for a in inner.args):
            w = inner.sort.width
            return Term(op, tuple(a.args[0] for a in inner.args), (w, False))
    elif t.op == "-":
        left, right = t.args
        if left.op == "bv2nat" and left.args[0].op == "bvxor" and right.op == "const":
            inner, sign = left.args[0].args
            w = inner.sort.width
            op = _BV_TO_INT_OP.get(inner.op)
            half = 1 << (w - 1)  # type: ignore[operator]
            if (
                op is not None
                and all(a.op == "int2bv" for a in inner.args)
                and sign.op == "const"
                and sign.value == half
                and right.value == half
            ):
                return Term(op, tuple(a.args[0] for a in inner.args), (w, True))
    return t


_BV_TO_INT_OP = {"bvxor": "int_xor", "bvand": "int_and", "bvor": "int_or"}


def _show(e: Any) -> str:
    if isinstance(e, list):
        return "(" + " ".join(_show(a) for a in e) + ")"
    if isinstance(e, _Sym):
        return e.name if _SIMPLE_SYMBOL.match(e.name) else f"|{e.name}|"
    if isinstance(e, _Key):
        return ":" + e.name
    if isinstance(e, _Str):
        return '"' + e.text.replace('"', '""') + '"'
    if isinstance(e, _BvLit):
        return _bv_literal(e.value, e.width)
    return str(e)


def parse_script(text: str, declarations: Iterable[Term | Function] = ()) -> list[Command]:
    """The commands of an SMT-LIB script (``define-fun`` inlined, so it produces no command).

    ``declarations`` pre-declares variables / functions (e.g. to read a bare assertion).
    """
    reader = _Reader(_bounds_comments(text))
    for d in declarations:
        reader.globals[d.name] = d
    out: list[Command] = []
    for e, line in _sexprs(text):
        reader.line = line
        out.extend(reader.command(e))
    return out


def parse_term(text: str, declarations: Iterable[Term | Function] = ()) -> Term:
    """One term.  Free symbols must be declared: pass variables / functions in
    ``declarations``, or let the term's own free variables be found from ``known``."""
    reader = _Reader({})
    for d in declarations:
        reader.globals[d.name] = d
    exprs = list(_sexprs(text))
    if len(exprs) != 1:
        raise SmtlibError(f"expected one term, got {len(exprs)} s-expressions")
    e, line = exprs[0]
    reader.line = line
    return reader.term(e, {})


def read_query(text: str, label: str = "") -> Any:
    """The :class:`~argus.smt.query.Query` of a script with one ``check-sat``.

    Assertions up to the first ``check-sat`` count (``push`` / ``pop`` are honoured);
    unnamed assertions that are domain constraints of the query's variables are folded
    into its domain, so ``read_query(query_to_smtlib(q)) == q``.
    """
    from argus.smt.query import Query

    logic: str | None = None
    frames: list[list[tuple[Term, str | None]]] = [[]]
    for c in parse_script(text):
        match c.name:
            case "set-logic":
                logic = c.args[0]
            case "assert":
                frames[-1].append(c.args)
            case "push":
                frames.extend([] for _ in range(c.args[0]))
            case "pop":
                del frames[len(frames) - c.args[0] :]
            case "check-sat" | "check-sat-assuming":
                break
    pairs = [p for f in frames for p in f]
    probe = Query.of(
        *(t for t, n in pairs if n is None), named=[(n, t) for t, n in pairs if n is not None]
    )
    domain = set(probe.domain)
    kept_unnamed = [t for t, n in pairs if n is None and t not in domain]
    named = [(n, t) for t, n in pairs if n is not None]
    return Query.of(*kept_unnamed, named=named, logic=logic, label=label)
