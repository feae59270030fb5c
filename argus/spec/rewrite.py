"""Source rewriting of kernel bodies: run-time ``if`` statements become traced branches.

A kernel body runs once, on symbolic values.  Python's ``if`` would ask a symbolic
condition for a truth value, so before tracing, the body's AST is rewritten:

=====================================  ==================================================
``if c: A`` / ``else: B``               ``for _ in __argus_if(c): A`` then
                                        ``for _ in __argus_else(): B`` (always emitted)
``a and b``, ``a or b``, ``not a``      ``__argus_and(a, b)``, ``__argus_or``, ``__argus_not``
(inside conditions)
``x if c else y``                       ``__argus_select(c, lambda: x, lambda: y)``
``a == b``, ``a != b``                  ``__argus_eq(a, b)``, ``__argus_ne(a, b)`` (sympy's
                                        ``==`` is structural identity, not an equation)
``with region(...): A``                 ``for _ in __argus_with(region(...)): A`` (traced
                                        regions such as ``warp_role``)
=====================================  ==================================================

``__argus_if`` yields once or never: a condition that is static (a Python bool, or a sympy
condition that simplifies to true/false) is decided at trace time, so constant branches cost
nothing; a run-time condition is traced once into an IR ``If``.  Constructs argus cannot
trace (``while``, ``try``, other ``with`` statements, ``yield``, ``global``, ``nonlocal``, ``async``, nested
function definitions that capture loop state...) are rejected with the user's file:line.
Line numbers are preserved, so every traced op points at the user's source.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from argus.errors import SourcePosition
from argus.spec.builder import SpecError

_UNSUPPORTED: dict[type, str] = {
    ast.While: "`while` loops (use argus.spec.range with a trip count)",
    ast.Try: "`try` statements",
    ast.With: "`with` statements",
    ast.AsyncFunctionDef: "async functions",
    ast.AsyncFor: "async loops",
    ast.AsyncWith: "async with",
    ast.Global: "`global` declarations",
    ast.Nonlocal: "`nonlocal` declarations",
    ast.Yield: "`yield`",
    ast.YieldFrom: "`yield from`",
    ast.Await: "`await`",
    ast.ClassDef: "class definitions",
    ast.Raise: "`raise` (use argus.spec.assert_tag for run-time facts)",
    ast.Delete: "`del`",
}


class _Rewriter(ast.NodeTransformer):
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.depth = 0

    def _reject(self, node: ast.AST, what: str) -> None:
        raise SpecError(
            f"{what} cannot be used in a kernel body",
            position=SourcePosition(self.filename, getattr(node, "lineno", 0)),
            hint="kernel bodies are traced once on symbolic values; see argus.spec docs",
        )

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for kind, what in _UNSUPPORTED.items():
            if isinstance(node, kind):
                self._reject(node, what)
        return super().generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.depth += 1
        try:
            if self.depth > 1:
                self._reject(node, "nested function definitions")
            node.decorator_list = []  # the decorator already ran
            return self.generic_visit(node)
        finally:
            self.depth -= 1

    def _call(self, name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
        call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])
        return ast.copy_location(call, like)

    def _condition(self, node: ast.expr) -> ast.expr:
        """Rewrite boolean operators inside a condition into traceable calls."""
        match node:
            case ast.BoolOp(op=ast.And(), values=values):
                return self._call("__argus_and", [self._condition(v) for v in values], node)
            case ast.BoolOp(op=ast.Or(), values=values):
                return self._call("__argus_or", [self._condition(v) for v in values], node)
            case ast.UnaryOp(op=ast.Not(), operand=operand):
                return self._call("__argus_not", [self._condition(operand)], node)
            case _:
                return self.visit(node)

    def _for_each(self, call: ast.Call, body: list[ast.stmt], like: ast.AST) -> ast.For:
        loop = ast.For(
            target=ast.Name(id="__argus_branch", ctx=ast.Store()),
            iter=call,
            body=body or [ast.copy_location(ast.Pass(), like)],
            orelse=[],
        )
        return ast.copy_location(loop, like)

    def visit_If(self, node: ast.If) -> list[ast.stmt]:
        cond = self._condition(node.test)
        then = [s for stmt in node.body for s in _as_list(self.visit(stmt))]
        orelse = [s for stmt in node.orelse for s in _as_list(self.visit(stmt))]
        first = self._for_each(self._call("__argus_if", [cond], node), then, node)
        second = self._for_each(self._call("__argus_else", [], node), orelse, node)
        return [first, second]

    def visit_With(self, node: ast.With) -> ast.AST:
        if len(node.items) != 1 or node.items[0].optional_vars is not None:
            self._reject(node, "`with` statements other than `with <argus region>(...):`")
        body = [s for stmt in node.body for s in _as_list(self.visit(stmt))]
        call = self._call("__argus_with", [self.visit(node.items[0].context_expr)], node)
        return self._for_each(call, body, node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        def thunk(expr: ast.expr) -> ast.Lambda:
            args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
            return ast.copy_location(ast.Lambda(args=args, body=self.visit(expr)), expr)

        return self._call(
            "__argus_select", [self._condition(node.test), thunk(node.body), thunk(node.orelse)], node
        )

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        """``==`` / ``!=`` on sympy values compare structure; make them build equations."""
        node = self.generic_visit(node)  # type: ignore[assignment]
        if not any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
            return node
        parts: list[ast.expr] = []
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Eq, ast.NotEq)):
                name = "__argus_eq" if isinstance(op, ast.Eq) else "__argus_ne"
                parts.append(self._call(name, [left, right], node))
            else:
                parts.append(ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]), node))
            left = right
        return parts[0] if len(parts) == 1 else self._call("__argus_and", parts, node)

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        return self.generic_visit(node)  # a trace-time check on static values


def _as_list(x: Any) -> list[ast.stmt]:
    return x if isinstance(x, list) else [x]


def rewrite_kernel_body(fn: Callable[..., Any], helpers: dict[str, Any]) -> Callable[..., Any]:
    """Return ``fn`` recompiled from its rewritten source (same file, same line numbers).

    ``helpers`` supplies the ``__argus_*`` functions.  Closure variables of ``fn`` are
    captured by value at decoration time.
    """
    try:
        source_lines, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError) as err:
        raise SpecError(
            f"cannot read the source of kernel {fn.__name__!r}: {err}",
            hint="define kernels in a .py file (not in an interactive prompt or exec string)",
        ) from None
    filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    source = textwrap.dedent("".join(source_lines))
    tree = ast.parse(source, filename=filename)
    ast.increment_lineno(tree, first_line - 1)
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        raise SpecError(f"kernel {fn.__name__!r} must be a plain function definition")
    tree.body[0] = _Rewriter(filename).visit(func)
    ast.fix_missing_locations(tree)
    code = compile(tree, filename, "exec")
    namespace: dict[str, Any] = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:  # an empty cell: the name is defined later
                pass
    namespace.update(helpers)
    exec(code, namespace)
    rewritten = namespace[func.name]
    rewritten.__defaults__ = fn.__defaults__
    rewritten.__kwdefaults__ = fn.__kwdefaults__
    return rewritten
