"""From IR index expressions (sympy) to SMT terms, one thread instance at a time.

An :class:`Instance` is one execution of a site by one thread: a mapping from the symbols an
op's expressions mention — thread id, block ids, counters of the symbolic loops around the
site, the element coordinates ``c0, c1, ...`` of the view being accessed — to terms.  The
terms are fresh bounded variables for the instance a VC quantifies over ("thread ``tid`` of
block ``bid_x``, element ``c0``"), or expressions of another instance's variables for a
witness (the writer of the address a reader reads).

Size symbols (index parameters, tensor extents) are one positive/non-negative variable per
name, shared by every instance of a query.  Expressions are converted once into a *template*
term over placeholder variables and then instantiated by substitution, so the hot path never
touches sympy.  Values of ``ReadIndex`` results are uninterpreted functions of the address
read (:class:`Encoder.read_index` is supplied by the analysis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy

from argus import symbolic
from argus.errors import ArgusError
from argus.ir import nodes as N
from argus.layout_algebra import Layout
from argus.smt import terms as T
from argus.smt.from_sympy import from_sympy

Values = Mapping[sympy.Symbol, T.Term]


class EncodingError(ArgusError):
    """An expression the verifier cannot encode (reported as ``unknown`` with its reason)."""


@dataclass(frozen=True, eq=False)
class Instance:
    """One execution of ``site`` by one thread: ``values`` binds the site's symbols."""

    site: Any  # argus.abstract_interp.program.Site
    values: Mapping[sympy.Symbol, T.Term]

    def key(self) -> tuple:
        return (self.site.index, tuple(sorted(((s.name, t) for s, t in self.values.items()), key=lambda p: p[0])))

    def bind(self, extra: Values) -> Instance:
        return Instance(self.site, {**self.values, **extra})


def view_extents(view: N.View) -> tuple[Any, ...]:
    """Extent of each top-level mode of a view (ints or size expressions)."""
    shape = view.layout.shape if isinstance(view.layout.shape, tuple) else (view.layout.shape,)
    return tuple(symbolic.normalize(Layout(s).size) for s in shape)


def view_inner_address(view: N.View) -> Any:
    """``offset + layout(c)`` over the view's coordinate symbols (before the swizzle)."""
    coords = tuple(view.coord_symbols) or N.COORDS[: len(view_extents(view))]
    arg = coords[0] if len(coords) == 1 else coords
    return sympy.expand(symbolic.to_sympy(view.offset) + symbolic.to_sympy(view.layout(arg)))


class Encoder:
    """Terms of a kernel's expressions (see the module docstring)."""

    def __init__(self, kernel: N.Kernel) -> None:
        self.kernel = kernel
        self.threads = kernel.launch.threads
        self.tid = kernel.thread_id
        self.block_ids = kernel.block_ids
        self.sizes: dict[sympy.Symbol, T.Term] = {}
        self.instance_symbols: set[sympy.Symbol] = {self.tid, *self.block_ids, *N.COORDS}
        self.read_index: Callable[[sympy.Symbol, Values], T.Term] | None = None
        self._templates: dict[Any, tuple[T.Term | None, tuple[sympy.Symbol, ...]]] = {}
        self._placeholders: dict[sympy.Symbol, T.Term] = {}
        self._names: dict[str, sympy.Symbol] = {}
        grid = tuple(kernel.launch.grid) + (1,) * (3 - len(kernel.launch.grid))
        self.grid = grid[:3]

    # ---------------------------------------------------------------- variables

    def size(self, s: sympy.Symbol) -> T.Term:
        var = self.sizes.get(s)
        if var is None:
            lo = 1 if s.is_positive else 0 if s.is_nonnegative else None
            var = self.sizes[s] = T.int_var(s.name, lo, None)
        return var

    def thread_var(self, suffix: str = "") -> T.Term:
        return T.int_var(f"tid{suffix}", 0, self.threads - 1)

    def block_vars(self, suffix: str = "") -> dict[sympy.Symbol, T.Term]:
        out = {}
        for sym, extent in zip(self.block_ids, self.grid):
            hi = symbolic.static_value(extent)
            out[sym] = T.int_var(f"{sym.name}{suffix}", 0, hi - 1 if hi is not None else None)
        return out

    def launch(self, values: Values) -> list[T.Term]:
        """Hypotheses of the launch for an instance: its block lies in the grid; declared assumptions."""
        hyps = []
        for sym, extent in zip(self.block_ids, self.grid):
            if sym in values and symbolic.static_value(extent) is None:
                hyps.append(T.lt(values[sym], self.term(extent, values)))
        return hyps

    def assumptions(self) -> list[tuple[str, T.Term]]:
        out = []
        for i, a in enumerate(self.kernel.assumptions):
            if a.predicate is sympy.true or a.predicate is True:
                continue
            try:
                out.append((f"assume{i}", self.term(a.predicate, {})))
            except EncodingError:
                continue  # e.g. alignment facts about addresses: not needed by these VCs
        return out

    # ---------------------------------------------------------------- expressions

    def _placeholder(self, s: sympy.Symbol) -> T.Term:
        var = self._placeholders.get(s)
        if var is None:
            other = self._names.setdefault(s.name, s)
            if other is not s:
                raise EncodingError(f"two different symbols are both called {s.name!r}")
            var = self._placeholders[s] = T.int_var(f"⟨{s.name}⟩")
        return var

    def _template(self, expr: Any) -> tuple[T.Term | None, tuple[sympy.Symbol, ...]]:
        key = expr
        got = self._templates.get(key)
        if got is None:
            symbols = tuple(sorted(expr.free_symbols, key=lambda s: s.name))
            try:
                template = from_sympy(expr, {s: self._placeholder(s) for s in symbols})
            except T.TermError:
                template = None  # bitwise ops need bounded operands: convert per instance
            got = self._templates[key] = (template, symbols)
        return got

    def term(self, expr: Any, values: Values) -> T.Term:
        """The term of ``expr`` with its symbols bound by ``values`` (sizes are global)."""
        if isinstance(expr, bool):
            return T.TRUE if expr else T.FALSE
        if isinstance(expr, int):
            return T.int_const(expr)
        if isinstance(expr, T.Term):
            return expr
        if expr is sympy.true:
            return T.TRUE
        if expr is sympy.false:
            return T.FALSE
        if isinstance(expr, sympy.Integer):
            return T.int_const(int(expr))
        if not isinstance(expr, sympy.Basic):
            raise EncodingError(f"cannot encode {type(expr).__name__} {expr!r}")
        template, symbols = self._template(expr)
        binding = {s: self._value(s, values) for s in symbols}
        try:
            if template is None:
                return from_sympy(expr, binding)
            return T.substitute(template, {self._placeholders[s]: binding[s] for s in symbols})
        except (T.TermError, ArgusError) as err:
            raise EncodingError(f"cannot encode {expr}: {err}") from None

    def _value(self, s: sympy.Symbol, values: Values) -> T.Term:
        got = values.get(s)
        if got is not None:
            return got
        if self.read_index is not None:
            value = self.read_index(s, values)
            if value is not None:
                return value
        if s in self.instance_symbols:
            raise EncodingError(f"symbol {s} has no value here")
        return self.size(s)
