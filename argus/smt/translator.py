"""The part of the solver translators that does not depend on the solver.

:class:`CachedTranslator` translates a term bottom-up with a cache, declares each
uninterpreted function once (a second declaration with another signature is an error), and
reads a model back into Python values.  The Z3 and cvc5 translators supply the solver's
nodes (``_node``), function declarations (``_declare_function``), values (``value``) and
function interpretations (``_function_table``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from argus.smt.terms import Function, Term, TermError, subterms


class CachedTranslator:
    """Bottom-up translation with a cache; model read-back; one declaration per function."""

    def __init__(self) -> None:
        self.cache: dict[Term, Any] = {}
        self.functions: dict[str, tuple[Function, Any]] = {}

    # ---- supplied by each solver's translator
    def _node(self, t: Term, args: list[Any]) -> Any:
        raise NotImplementedError

    def _declare_function(self, f: Function) -> Any:
        raise NotImplementedError

    def value(self, model: Any, term: Term) -> int | bool:
        raise NotImplementedError

    def _function_table(self, model: Any, f: Function) -> dict[Any, Any]:
        raise NotImplementedError

    # ---- shared
    def function(self, f: Function) -> Any:
        """The solver's declaration of ``f`` (declared on first use)."""
        known = self.functions.get(f.name)
        if known is not None:
            if known[0] != f:
                raise TermError(f"function {f.name!r} declared twice with different signatures")
            return known[1]
        decl = self._declare_function(f)
        self.functions[f.name] = (f, decl)
        return decl

    def translate(self, term: Term) -> Any:
        """The solver's term for ``term`` (children first, cached)."""
        cache = self.cache
        if term in cache:
            return cache[term]
        for t in subterms(term):
            if t not in cache:
                cache[t] = self._node(t, [cache[a] for a in t.args])
        return cache[term]

    def translate_all(self, terms: Iterable[Term]) -> list[Any]:
        return [self.translate(t) for t in terms]

    def model_values(self, model: Any, roots: Iterable[Term]) -> dict[str, Any]:
        """Variables (name -> int/bool) and functions (name -> ``{args: value, None: default}``)
        of ``roots`` in ``model``; function tables include every application in ``roots``
        (plus what the solver's own interpretation lists, see ``_function_table``)."""
        out: dict[str, Any] = {}
        applications: list[Term] = []
        for t in subterms(*roots):
            if t.op == "var":
                out[t.params[0]] = self.value(model, t)
            elif t.op == "apply":
                applications.append(t)
        for t in applications:
            f = t.params[0]
            table = out.get(f.name)
            if table is None:
                table = out[f.name] = self._function_table(model, f)
            key = tuple(self.value(model, a) for a in t.args)
            table[key] = self.value(model, t)
        return out
