"""The control structure the verifier reasons over: every op as a *site* in dynamic order.

:func:`build_program` walks a kernel's op tree once and lists its sites.  A :class:`Site` is
one op at one place of the (partially unrolled) program:

* ``conditions`` — the path: the ``If`` conditions (or their negations) and the iteration
  ranges of the symbolic loops around it, as sympy predicates over the thread's symbols;
* ``loops`` — the enclosing loops kept symbolic (outermost first); their counters are
  bounded SMT variables of every instance of the site;
* ``subst`` — the values of the loop counters of enclosing *unrolled* loops (small constant
  trip counts are unrolled: each iteration is a site of its own);
* ``epoch`` — how many block barriers a thread has passed before it reaches the site (a sympy
  expression over its loop counters and uniform conditions), so "no barrier between two
  accesses" is ``epoch(a) == epoch(b)``;
* ``role_epoch`` and ``role_scope`` — inside a warp role whose body passes named barriers, the
  number of those barriers the thread has passed since it entered the role, and the role.

Dynamic order: an instance of site ``w`` precedes an instance of site ``r`` when the counters
of their common symbolic loops compare lexicographically smaller, or are equal and ``w``
comes first statically (:func:`precedes`).

Supported loop shapes: any ``For`` with a constant trip count up to ``unroll_limit`` is
unrolled; any other ``For`` is symbolic as long as the number of barriers one iteration
passes does not depend on the iteration, or depends on it only through barriers under
linear inequalities of the counter (``if k > 0``, or ``if 2·k + 1 < KT`` in a loop unrolled
twice by hand): then the barriers before an iteration are counted in closed form
(:func:`barriers_before`).  A ``WarpRole`` region is walked like a branch: its
sites carry the role's warp range as a condition (``what == "role"``).

Role-scoped named barriers.  A warp role may pass named barriers whose participants are
exactly the role's threads (all of one barrier id that no other op of the kernel uses): they
order the role's threads among themselves and nothing else.  They do not advance the block
epoch; they advance the role's own epoch, which counts from the role's entry and is compared
only between two sites of the same role (:func:`barrier_between`, :func:`same_interval`).
Another role's accesses are ordered against the role's only through mbarriers, which the
asynchrony VCs prove.  The barrier VC (``roles.named_barrier``) proves that every instance is
reached by exactly the declared participants, so the ``n``-th barrier a thread of the role
passes is the ``n``-th of every other thread of the role.  Any other barrier inside a role (a
block barrier, a named barrier of another participant count or shared with other code) is
listed with a reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sympy

from argus import symbolic
from argus.ir import nodes as N

#: constant trip counts up to this are unrolled
UNROLL_LIMIT = 16


@dataclass(frozen=True, eq=False)
class Loop:
    """A loop kept symbolic: ``var`` ranges over ``start, start+step, ... < stop``."""

    op: N.For
    var: sympy.Symbol
    start: Any
    stop: Any
    step: int

    def condition(self) -> sympy.Basic:
        """The iteration range of ``var`` as a predicate."""
        parts = [sympy.Le(self.start, self.var), sympy.Lt(self.var, self.stop)]
        if self.step != 1:
            parts.append(sympy.Eq(symbolic.mod(self.var - self.start, self.step), 0))
        return sympy.And(*parts)

    def trip_count(self) -> Any:
        return sympy.Max(0, symbolic.ceil_div(self.stop - self.start, self.step))


@dataclass(frozen=True)
class Condition:
    """One conjunct of a site's path and where it comes from (an ``If`` branch or a loop)."""

    expr: sympy.Basic
    op: N.Op
    what: str  # "then", "else", "loop", "role"


@dataclass(frozen=True, eq=False)
class Site:
    """One op at one place of the unrolled program (see the module docstring)."""

    index: int
    op: N.Op
    subst: tuple[tuple[sympy.Symbol, int], ...]
    conditions: tuple[Condition, ...]
    loops: tuple[Loop, ...]
    epoch: Any
    unrolled: tuple[tuple[N.For, int], ...] = ()
    role_epoch: Any = 0
    role_scope: N.WarpRole | None = None  # the warp role whose named barriers role_epoch counts

    def expr(self, e: Any) -> Any:
        """``e`` with the unrolled loop counters replaced by their values."""
        if self.subst and isinstance(e, sympy.Basic):
            return e.xreplace(dict(self.subst))
        return e

    @property
    def path(self) -> sympy.Basic:
        return sympy.And(*(c.expr for c in self.conditions)) if self.conditions else sympy.true

    @property
    def straight_line(self) -> bool:
        """No symbolic loop around the site."""
        return not self.loops

    def describe(self) -> str:
        where = f" at {self.op.loc}" if self.op.loc else ""
        its = "".join(f" [{op.var}={v}]" for op, v in self.unrolled)
        return f"{self.op.kind}{where}{its}"


@dataclass
class Program:
    """The sites of a kernel in static order, plus what could not be placed."""

    kernel: N.Kernel
    sites: list[Site] = field(default_factory=list)
    unsupported: list[tuple[N.Op, str]] = field(default_factory=list)
    #: the grid-dependency waits, placed but not listed among the sites: a wait touches no
    #: memory and orders nothing inside the launch, and leaving it out keeps every other site's
    #: index (and so its queries) what it is in the same kernel without the wait.  A wait's
    #: ``index`` is that of the site after it.
    grid_waits: list[Site] = field(default_factory=list)


def common_loops(a: Site, b: Site) -> tuple[Loop, ...]:
    """The symbolic loops around both sites (a common prefix, outermost first)."""
    out = []
    for x, y in zip(a.loops, b.loops):
        if x is not y:
            break
        out.append(x)
    return tuple(out)


def barrier_between(first: Site, second: Site) -> tuple[Any, Any] | None:
    """How to tell that a barrier orders an instance of ``first`` before one of ``second``
    (each thread passes it after the first access and before the second): ``(block, role)``
    epoch pairs to compare, ``role`` being ``None`` when only block barriers can order the two
    (different roles, or no role-scoped barriers)."""
    if first.role_scope is not None and first.role_scope is second.role_scope:
        return (first.epoch, second.epoch), (first.role_epoch, second.role_epoch)
    return (first.epoch, second.epoch), None


def may_precede(writer: Site, reader: Site) -> bool:
    """Can some instance of ``writer`` come before some instance of ``reader``?"""
    return writer.index < reader.index or bool(common_loops(writer, reader))


class UnsupportedLoop(Exception):
    """A loop whose barrier count changes from one iteration to the next."""


def build_program(kernel: N.Kernel, *, unroll_limit: int = UNROLL_LIMIT) -> Program:
    """List the sites of ``kernel`` (see the module docstring)."""
    program = Program(kernel)
    _Walker(program, unroll_limit).region(kernel.body, (), (), (), (), sympy.Integer(0))
    return program


class _Walker:
    def __init__(self, program: Program, unroll_limit: int) -> None:
        self.program = program
        self.unroll_limit = unroll_limit
        #: inside a warp role with role-scoped barriers: ``(role, block epoch at its entry)``;
        #: the walker's epoch then counts the role's barriers
        self.scope: tuple[N.WarpRole, Any] | None = None

    def _site(self, op: N.Op, subst, conditions, loops, unrolled, epoch) -> None:
        if self.scope is not None:
            role, block_epoch = self.scope
            site = Site(len(self.program.sites), op, subst, conditions, loops, block_epoch, unrolled, epoch, role)
        else:
            site = Site(len(self.program.sites), op, subst, conditions, loops, epoch, unrolled)
        if isinstance(op, N.Fence) and op.fence.startswith("griddep."):
            if op.fence == "griddep.wait":  # launch_dependents orders nothing: no site at all
                self.program.grid_waits.append(site)
            return
        self.program.sites.append(site)

    def region(self, region: N.Region, subst, conditions, loops, unrolled, epoch) -> Any:
        """Add the sites of ``region``; returns the epoch after it."""
        for op in region.ops:
            epoch = self.op(op, subst, conditions, loops, unrolled, epoch)
        return epoch

    def op(self, op: N.Op, subst, conditions, loops, unrolled, epoch) -> Any:
        env = dict(subst)

        def sub(e: Any) -> Any:
            return e.xreplace(env) if env and isinstance(e, sympy.Basic) else e

        match op:
            case N.For(var=var, start=start, stop=stop, step=step, body=body):
                start, stop = sub(start), sub(stop)
                lo, hi = symbolic.static_value(start), symbolic.static_value(stop)
                if lo is not None and hi is not None and len(range(lo, hi, step)) <= self.unroll_limit:
                    for value in range(lo, hi, step):
                        epoch = self.region(body, (*subst, (var, value)), conditions, loops,
                                            (*unrolled, (op, value)), epoch)
                    return epoch
                loop = Loop(op, var, start, stop, step)
                try:
                    per_iteration = barrier_count(body, env)
                except UnsupportedLoop as err:
                    self.program.unsupported.append((op, str(err)))
                    return epoch
                if var in sympy.sympify(per_iteration).free_symbols:
                    before = barriers_before(per_iteration, var, start, step, var)
                    if before is None:
                        self.program.unsupported.append(
                            (op, f"loop at {op.loc} passes a number of barriers that depends on its counter"))
                        return epoch
                    self.region(body, subst, (*conditions, Condition(loop.condition(), op, "loop")),
                                (*loops, loop), unrolled, epoch + before)
                    return epoch + barriers_before(per_iteration, var, start, step, stop)
                inner = epoch + symbolic.floordiv(var - start, step) * per_iteration if per_iteration != 0 else epoch
                self.region(body, subst, (*conditions, Condition(loop.condition(), op, "loop")),
                            (*loops, loop), unrolled, inner)
                return epoch + loop.trip_count() * per_iteration if per_iteration != 0 else epoch
            case N.If(cond=cond, then=then, orelse=orelse):
                cond = sub(cond)
                after_then = self.region(then, subst, (*conditions, Condition(cond, op, "then")), loops,
                                         unrolled, epoch)
                after_else = self.region(orelse, subst, (*conditions, Condition(sympy.Not(cond), op, "else")),
                                         loops, unrolled, epoch)
                if after_then == after_else:
                    return after_then
                return sympy.Piecewise((after_then, cond), (after_else, True))
            case N.Barrier():
                self._site(op, subst, conditions, loops, unrolled, epoch)
                return epoch + 1
            case N.WarpRole(cond=cond, body=body):
                # the role's warps run its body: its sites are guarded by the warp range
                try:
                    inside = barrier_count(body, env)
                except UnsupportedLoop as err:
                    self.program.unsupported.append((op, str(err)))
                    return epoch
                path = (*conditions, Condition(sub(cond), op, "role"))
                if inside == 0:
                    return self.region(body, subst, path, loops, unrolled, epoch)
                problem = self.scope_problem(op, sub(cond))
                if problem is not None:
                    self.program.unsupported.append((op, problem))
                    return epoch
                # role-scoped barriers: the block epoch stays, the role's epoch counts them
                self.scope = (op, epoch)
                try:
                    self.region(body, subst, path, loops, unrolled, sympy.Integer(0))
                finally:
                    self.scope = None
                return epoch
            case _:
                self._site(op, subst, conditions, loops, unrolled, epoch)
                return epoch


    def scope_problem(self, role: N.WarpRole, cond: Any) -> str | None:
        """Why the barriers inside ``role`` are not role-scoped (``None``: they are)."""
        where = f" at {role.loc}" if role.loc else ""
        if self.scope is not None:
            return f"barrier inside a warp role nested in another{where}"
        kernel = self.program.kernel
        tid = kernel.thread_id
        cond = sympy.sympify(cond)
        if cond.free_symbols - {tid}:
            return f"barrier inside the warp role{where}, whose warps depend on more than the thread"
        threads = sum(1 for t in range(kernel.launch.threads) if bool(cond.xreplace({tid: t})))
        inside = list(_barriers(role.body))
        ids = {b.id for b in inside}
        for b in inside:
            if b.id == 0 or b.participants != threads:
                return (f"barrier inside the warp role{where}: only named barriers of the role's {threads} threads "
                        f"are modelled (barrier {b.id} at {b.loc} declares "
                        f"{b.participants if b.participants is not None else 'the whole block'})")
        if len(ids) > 1:
            return f"named barriers {sorted(ids)} inside the warp role{where}: one barrier id per role is modelled"
        outside = [b for b in _barriers(kernel.body) if b.id in ids and not any(b is x for x in inside)]
        if outside:
            return (f"named barrier {outside[0].id} at {outside[0].loc} is also used outside the warp role{where} "
                    "(a role-scoped barrier must be the role's own)")
        return None


def _barriers(region: N.Region) -> Iterable[N.Barrier]:
    """Every barrier op inside ``region`` (nested regions included)."""
    for op in region.ops:
        match op:
            case N.Barrier():
                yield op
            case N.If(then=then, orelse=orelse):
                yield from _barriers(then)
                yield from _barriers(orelse)
            case N.For(body=body) | N.WarpRole(body=body):
                yield from _barriers(body)


def barrier_count(region: N.Region, env: dict) -> Any:
    """Barriers one execution of ``region`` passes (a sympy expression); a warp role's
    barriers count as none (they are role-scoped or the role is unsupported, which
    :meth:`_Walker.scope_problem` decides)."""
    total: Any = sympy.Integer(0)

    def sub(e: Any) -> Any:
        return e.xreplace(env) if env and isinstance(e, sympy.Basic) else e

    for op in region.ops:
        match op:
            case N.Barrier():
                total += 1
            case N.If(cond=cond, then=then, orelse=orelse):
                a, b = barrier_count(then, env), barrier_count(orelse, env)
                total += a if a == b else sympy.Piecewise((a, sub(cond)), (b, True))
            case N.For(var=var, start=start, stop=stop, step=step, body=body):
                inner = barrier_count(body, env)
                if inner != 0:
                    if var in sympy.sympify(inner).free_symbols:
                        whole = barriers_before(inner, var, sub(start), step, sub(stop))
                        if whole is None:
                            raise UnsupportedLoop(f"loop at {op.loc} passes a number of barriers that depends on "
                                                  "its counter")
                        total += whole
                    else:
                        total += Loop(op, var, sub(start), sub(stop), step).trip_count() * inner
            case N.WarpRole(body=body):
                barrier_count(body, env)  # a loop in it whose count varies is unsupported
    return total


def barriers_before(per_iteration: Any, var: sympy.Symbol, start: Any, step: int, upto: Any) -> Any:
    """Barriers passed by the iterations ``start <= var < upto`` of a loop whose iteration
    passes ``per_iteration`` of them, when that is a sum of terms each of which is a constant
    ``c`` or ``c`` on the iterations where a linear inequality in ``var`` holds and none
    elsewhere (``Piecewise((c, cond), (0, True))``: a barrier under ``if k > 0`` or under
    ``if 2·k + 1 < KT``, the second half of a loop unrolled twice; or on the one iteration
    ``var == c``); ``None`` for other shapes.

    A term ``c`` on ``a·var + r >= 0`` (``a`` a nonzero integer, ``r`` integer-valued and free
    of ``var``; strict and reversed relations are brought to that form) holds exactly on
    ``var >= -floor(r / a)`` for ``a > 0`` and on ``var <= floor(r / -a)`` for ``a < 0``: an
    interval, so the iterations it holds on are counted in closed form."""
    expr = sympy.sympify(per_iteration)
    if step != 1:
        return None
    total: Any = sympy.Integer(0)
    for term in sympy.Add.make_args(expr):
        if var not in term.free_symbols:
            total += term * sympy.Max(0, upto - start)
            continue
        factor, piecewise = sympy.Integer(1), term
        if isinstance(term, sympy.Mul):
            rest = [f for f in term.args if var in f.free_symbols]
            if len(rest) != 1:
                return None
            piecewise = rest[0]
            factor = sympy.Mul(*(f for f in term.args if f is not piecewise))
        if not isinstance(piecewise, sympy.Piecewise) or len(piecewise.args) != 2:
            return None
        (count, cond), (other, default) = piecewise.args
        if other != 0 or default is not sympy.true or var in sympy.sympify(count).free_symbols:
            return None
        interval = _iterations_where(cond, var, start, upto)
        if interval is None:
            return None
        total += factor * count * interval
    return total


def _iterations_where(cond: Any, var: sympy.Symbol, start: Any, upto: Any) -> Any:
    """How many of ``start <= var < upto`` satisfy ``cond``, a linear inequality in ``var``
    with an integer coefficient, or ``var == c`` with ``c`` free of ``var`` (one iteration
    where ``c`` is in the range: a barrier under ``if k == 0``); ``None`` for any other condition."""
    if isinstance(cond, sympy.Eq):
        for lhs, rhs in ((cond.lhs, cond.rhs), (cond.rhs, cond.lhs)):
            if lhs == var and var not in sympy.sympify(rhs).free_symbols and sympy.sympify(rhs).is_integer:
                return sympy.Max(0, sympy.Min(upto, rhs + 1) - sympy.Max(start, rhs))
        return None
    if not isinstance(cond, (sympy.GreaterThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.StrictLessThan)):
        return None
    # as ``e >= 0`` with an integer-valued ``e``: ``x > y`` is ``x - y - 1 >= 0``
    if isinstance(cond, sympy.GreaterThan):
        e = cond.lhs - cond.rhs
    elif isinstance(cond, sympy.StrictGreaterThan):
        e = cond.lhs - cond.rhs - 1
    elif isinstance(cond, sympy.LessThan):
        e = cond.rhs - cond.lhs
    else:
        e = cond.rhs - cond.lhs - 1
    e = sympy.expand(e)
    if e.is_integer is not True:
        return None
    a = e.coeff(var, 1)
    r = sympy.expand(e - a * var)
    if not (a.is_Integer and a != 0) or var in r.free_symbols or r.is_integer is not True:
        return None
    if a > 0:  # var >= -floor(r / a)
        first = -symbolic.floordiv(r, int(a))
        return sympy.Max(0, upto - sympy.Max(first, start))
    last = symbolic.floordiv(r, int(-a))  # var <= floor(r / -a)
    return sympy.Max(0, sympy.Min(upto, last + 1) - start)


def sites_of(program: Program, kinds: Iterable[type]) -> list[Site]:
    kinds = tuple(kinds)
    return [s for s in program.sites if isinstance(s.op, kinds)]
