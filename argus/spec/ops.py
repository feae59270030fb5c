"""Operations of the DSL.  Each call records IR at the user's source line.

Index values (``thread_id()``, ``block_id(0)``, loop counters, sizes) are sympy integer
expressions; ``//`` and ``%`` on them are floor division and modulo (Python semantics).
Data lives in tensors: global parameters, ``shared(...)`` allocations and per-thread
register fragments (``fragment``, ``zeros``, the results of ``load`` and of math).
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import sympy

from argus import symbolic
from argus.ir import nodes as N
from argus.layout_algebra import Layout
from argus.spec import builder as B
from argus.spec.tensor import COORDS, Tensor, as_index

TID = N.THREAD_ID
BLOCK_IDS = N.BLOCK_IDS
CLUSTER_RANK = N.CLUSTER_RANK

# --------------------------------------------------------------------------- ids


def thread_id() -> sympy.Expr:
    """The thread's index in its block (0 .. threads-1)."""
    B.current()
    return TID


def block_id(dim: int = 0) -> sympy.Expr:
    """The block's index along grid dimension ``dim`` (0, 1 or 2)."""
    B.current()
    if dim not in (0, 1, 2):
        raise B.error(f"block_id({dim}): the grid has dimensions 0, 1 and 2")
    return BLOCK_IDS[dim]


def lane_id() -> sympy.Expr:
    """``thread_id() % 32``."""
    return symbolic.mod(thread_id(), 32)


def warp_id() -> sympy.Expr:
    """``thread_id() // 32``."""
    return symbolic.floordiv(thread_id(), 32)


def warpgroup_id() -> sympy.Expr:
    """``thread_id() // 128``."""
    return symbolic.floordiv(thread_id(), 128)


def cluster_rank() -> sympy.Expr:
    """The block's rank inside its cluster."""
    B.current()
    return CLUSTER_RANK


def cdiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for positive ``b``."""
    return symbolic.ceil_div(a, b)


# --------------------------------------------------------------------------- control flow


def _snapshot(frame: Any) -> dict[str, Any]:
    return dict(frame.f_locals)


def _carry(before: dict[str, Any], after: dict[str, Any], where: str,
           local_symbols: frozenset[sympy.Symbol] = frozenset()) -> None:
    """Make names rebound inside a traced region refer to state that lives across it.

    A register tensor rebound in a loop body (``acc = acc + x``) is copied back into the
    tensor the name held before the region, and the new handle is redirected to that
    storage, so the next iteration (and the code after the loop) sees the update.  An
    index expression that changes is loop-carried integer state, which argus asks to be
    derived from the loop counter instead.
    """
    builder = B.current()
    for name, new in after.items():
        old = before.get(name)
        if old is None or new is old or name.startswith("__argus"):
            continue
        if isinstance(old, Tensor) and isinstance(new, Tensor):
            if old.space is not N.MemorySpace.REGISTER:
                continue  # views of memory are re-derived, not carried
            if new.view == old.view:
                continue
            if new.shape != old.shape:
                raise B.error(f"{where}: register tensor {name!r} changes shape from {old.shape} to {new.shape}")
            builder.emit(_convert_or_copy(new.view, old.view, builder.position()))
            new.view = old.view
        elif isinstance(old, (int, sympy.Expr)) and isinstance(new, (int, sympy.Expr)):
            old_e, new_e = symbolic.to_sympy(old), symbolic.to_sympy(new)
            if new_e == old_e or new_e in local_symbols:
                continue
            derived = bool(new_e.free_symbols & local_symbols)
            accumulates = bool(old_e.free_symbols) and new_e.has(old_e)
            if not derived or accumulates:
                raise B.error(
                    f"{where}: integer {name!r} is updated inside the region; integer state "
                    "carried across iterations or branches must be a function of the loop counter",
                    hint=f"compute {name} from the loop variable (e.g. phase = (k // STAGES) % 2) "
                    "or choose with `a if cond else b`",
                )


def _convert_or_copy(src: N.View, dst: N.View, loc: Any) -> N.Op:
    if src.buffer.dtype != dst.buffer.dtype:
        return N.Convert(dst=dst, src=src, loc=loc)
    return N.Copy(src=src, dst=dst, atom="reg", loc=loc)


def range(*args: Any, pipeline: int | None = None, unroll: int | bool | None = None) -> Iterator[Any]:
    """``for k in range(stop)`` / ``range(start, stop, step)`` over index values.

    The body is traced once with a symbolic counter (an IR ``For``), unless the bounds are
    constants and ``unroll=True``, in which case it is unrolled at trace time.  ``pipeline=S``
    asks the pipelining policy (:mod:`argus.ir.policies`) for an S-stage software pipeline; the
    loop then yields ``(k, stage)``, the stage handle giving the buffer slot and mbarrier phase.
    ``unroll=k`` (an int) asks the unrolling policy to unroll the traced loop k times.
    """
    builder = B.current()
    loc = builder.position()
    if not 1 <= len(args) <= 3:
        raise B.error("range takes 1 to 3 arguments")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    start, stop = as_index(start, "range start"), as_index(stop, "range stop")
    if symbolic.static_value(step) is None or symbolic.static_value(step) <= 0:
        raise B.error(f"range step must be a positive constant, got {step}")
    step = symbolic.static_value(step)
    if pipeline is not None and (not isinstance(pipeline, int) or pipeline < 1):
        raise B.error(f"pipeline={pipeline}: the number of stages must be a positive int")
    static = symbolic.static_value(start) is not None and symbolic.static_value(stop) is not None
    if unroll is True and static and pipeline is None:
        yield from builtins.range(symbolic.static_value(start), symbolic.static_value(stop), step)
        return
    return (yield from _traced_loop(builder, loc, start, stop, step, pipeline, unroll))


def _traced_loop(builder: B.Builder, loc: Any, start: Any, stop: Any, step: int,
                 pipeline: int | None, unroll: Any) -> Iterator[Any]:
    var = sympy.Symbol(builder.fresh("k"), integer=True)
    caller = sys._getframe(2)
    before = _snapshot(caller)
    builder.open_region(loc, "range loop")
    if pipeline is None:
        yield var
    else:  # the iteration and its stage handle (argus.spec.async_ops.Stage)
        from argus.spec.async_ops import Stage

        yield var, Stage(symbolic.normalize(var - start), pipeline)
    _carry(before, _snapshot(sys._getframe(2)), "loop", frozenset({var}))
    body = builder.close_region()
    builder.emit(N.For(var=var, start=start, stop=stop, step=step, body=body, pipeline=pipeline,
                       unroll=unroll, loc=loc))


def _static_truth(cond: Any) -> bool | None:
    if isinstance(cond, (bool, int)) and not isinstance(cond, sympy.Basic):
        return builtins.bool(cond)
    if isinstance(cond, Tensor):
        raise B.error("a tensor cannot be an `if` condition", hint="use select(...) on tensors")
    if cond is sympy.true or cond is sympy.false:
        return cond is sympy.true
    if isinstance(cond, sympy.Basic):
        return None
    raise B.error(f"cannot use a {type(cond).__name__} as a condition")


def _argus_if(cond: Any) -> Iterator[None]:
    builder = B.current()
    loc = builder.position()
    truth = _static_truth(cond)
    if truth is not None:
        builder.if_stack.append(("static", truth))
        if truth:
            yield None
        return
    caller = sys._getframe(1)
    before = _snapshot(caller)
    builder.open_region(loc, "if")
    yield None
    _carry(before, _snapshot(sys._getframe(1)), "if")
    then = builder.close_region()
    op = builder.emit(N.If(cond=cond, then=then, loc=loc))
    builder.if_stack.append(("traced", (len(builder.frames[-1].ops) - 1, op, before)))


def _argus_else() -> Iterator[None]:
    builder = B.current()
    kind, info = builder.if_stack.pop()
    if kind == "static":
        if not info:
            yield None
        return
    index, op, before = info
    builder.open_region(op.loc, "else")
    yield None
    _carry(before, _snapshot(sys._getframe(1)), "else")
    orelse = builder.close_region()
    if orelse.ops:
        builder.frames[-1].ops[index] = replace(op, orelse=orelse)


def _argus_and(*conds: Any) -> Any:
    truths = [_static_truth(c) for c in conds]
    if any(t is False for t in truths):
        return False
    rest = [c for c, t in zip(conds, truths) if t is None]
    return True if not rest else sympy.And(*rest)


def _argus_or(*conds: Any) -> Any:
    truths = [_static_truth(c) for c in conds]
    if any(t is True for t in truths):
        return True
    rest = [c for c, t in zip(conds, truths) if t is None]
    return False if not rest else sympy.Or(*rest)


def _argus_not(cond: Any) -> Any:
    truth = _static_truth(cond)
    return (not truth) if truth is not None else sympy.Not(cond)


def _argus_select(cond: Any, if_true: Callable[[], Any], if_false: Callable[[], Any]) -> Any:
    truth = _static_truth(cond)
    if truth is not None:
        return if_true() if truth else if_false()
    a, b = if_true(), if_false()
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return select(cond, a, b)
    return sympy.Piecewise((symbolic.to_sympy(a), cond), (symbolic.to_sympy(b), True))


def _symbolic_operand(x: Any) -> bool:
    return isinstance(x, sympy.Basic) and not isinstance(x, sympy.Integer)


def _argus_eq(a: Any, b: Any) -> Any:
    if _symbolic_operand(a) or _symbolic_operand(b):
        result = sympy.Eq(symbolic.to_sympy(a), symbolic.to_sympy(b))
        return result if result not in (sympy.true, sympy.false) else result is sympy.true
    return a == b


def _argus_ne(a: Any, b: Any) -> Any:
    result = _argus_eq(a, b)
    return (not result) if isinstance(result, bool) else sympy.Not(result)


TRACED_REGIONS: set[Any] = set()
"""Code objects of the generator functions that open a traced region (``warp_role``...): what
``with region(...):`` accepts."""


def _argus_with(region: Any) -> Any:
    if getattr(region, "gi_code", None) not in TRACED_REGIONS:
        raise B.error("`with` in a kernel body takes an argus region (e.g. argus.spec.warp_role(...))",
                      hint="other context managers cannot be traced")
    return region


REWRITE_HELPERS: dict[str, Any] = {
    "__argus_eq": _argus_eq,
    "__argus_ne": _argus_ne,
    "__argus_if": _argus_if,
    "__argus_else": _argus_else,
    "__argus_and": _argus_and,
    "__argus_or": _argus_or,
    "__argus_not": _argus_not,
    "__argus_select": _argus_select,
    "__argus_with": _argus_with,
}

# --------------------------------------------------------------------------- memory


def _shape_tuple(shape: Any) -> tuple[int, ...]:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    for s in shape:
        if symbolic.static_value(s) is None or symbolic.static_value(s) <= 0:
            raise B.error(f"shape {shape}: register and shared tensors need positive constant sizes")
    return tuple(symbolic.static_value(s) for s in shape)


def _allocate(space: N.MemorySpace, dtype: Any, layout: Layout, prefix: str, swizzle: Any = None) -> Tensor:
    builder = B.current()
    loc = builder.position()
    cosize = symbolic.static_value(layout.cosize)
    buffer = builder.new_buffer(N.Buffer(builder.fresh(prefix), space, dtype, cosize, layout))
    builder.emit(N.Alloc(buffer=buffer, loc=loc, scope=N.Scope.BLOCK if space is N.MemorySpace.SHARED else N.Scope.THREAD))
    rank = len(layout.shape) if isinstance(layout.shape, tuple) else 1
    if not isinstance(layout.shape, tuple):
        layout = Layout((layout.shape,), (layout.stride,))
    return Tensor(N.View(buffer, layout, 0, COORDS[:rank], None, None, swizzle))


def fragment(shape: Any, dtype: Any) -> Tensor:
    """A per-thread register tensor (uninitialised: reading it before a write is an error)."""
    return _allocate(N.MemorySpace.REGISTER, dtype, Layout(_shape_tuple(shape)), "r")


def full(shape: Any, value: float | int, dtype: Any) -> Tensor:
    """A per-thread register tensor filled with ``value``."""
    t = fragment(shape, dtype)
    B.current().emit(N.Fill(dst=t.view, value=value, loc=B.current().position()))
    return t


def zeros(shape: Any, dtype: Any) -> Tensor:
    """A per-thread register tensor of zeros."""
    return full(shape, 0, dtype)


def shared(dtype: Any, shape: Any, layout: Layout | None = None, *, swizzle: Any = None) -> Tensor:
    """A shared-memory tensor of the block (row-major unless ``layout`` is given).

    ``swizzle`` (e.g. ``argus.layout_algebra.Swizzle(3, 3, 3)``, in element units) permutes
    every element address of the buffer: ``address = swizzle(offset + layout(c))``.
    """
    shape = _shape_tuple(shape)
    if layout is None:
        strides, running = [], 1
        for extent in reversed(shape):
            strides.append(running)
            running *= extent
        layout = Layout(shape, tuple(reversed(strides)))
    return _allocate(N.MemorySpace.SHARED, dtype, layout, "smem", swizzle)


def _check_same_shape(a: Tensor, b: Tensor, what: str) -> None:
    if a.shape != b.shape:
        raise B.error(f"{what}: shapes differ: {a.shape} vs {b.shape}",
                      hint="tile or partition both tensors to the same shape")


def copy(src: Tensor, dst: Tensor, *, atom: str = "sync", pred: Any = None) -> None:
    """Copy ``src`` into ``dst`` elementwise; elements invalid in either view are skipped.

    ``pred`` (an index predicate) masks the whole copy for this thread.
    """
    _check_same_shape(src, dst, "copy")
    builder = B.current()
    mask = _mask(pred, src.view.valid, dst.view.valid)
    builder.emit(N.Copy(src=src.view, dst=dst.view, atom=atom, pred=mask, loc=builder.position()))


def _mask(*preds: Any) -> Any:
    parts = [p for p in preds if p is not None and p is not True and p is not sympy.true]
    if any(p is False or p is sympy.false for p in parts):
        return sympy.false
    return sympy.And(*parts) if parts else None


def load(src: Tensor, *, other: float | int | None = 0, dtype: Any = None) -> Tensor:
    """A register copy of ``src``; elements outside the tensor (partial tiles) read as ``other``
    (``other=0``: they carry a known-zero fact, see :func:`assert_tag`)."""
    dst = fragment(src.shape, src.dtype)
    builder = B.current()
    if other is not None and src.view.valid is not None:
        builder.emit(N.Fill(dst=dst.view, value=other, tail=src.view, loc=builder.position()))
    copy(src, dst)
    return dst.to(dtype) if dtype is not None and dtype != src.dtype else dst


def store(value: Tensor, dst: Tensor, *, pred: Any = None) -> None:
    """Write ``value`` into ``dst`` (converting to ``dst``'s element type); invalid elements are skipped."""
    if value.dtype != dst.dtype:
        value = value.to(dst.dtype)
    copy(value, dst, pred=pred)


# --------------------------------------------------------------------------- math

_BINARY = {"add", "sub", "mul", "div", "max", "min"}
_UNARY = {"exp2", "neg", "abs", "rcp", "sqrt", "rsqrt", "log2"}


def elementwise(fn: str, *operands: Any) -> Tensor:
    """``fn`` applied elementwise; tensors must have one shape, Python numbers broadcast."""
    builder = B.current()
    tensors = [o for o in operands if isinstance(o, Tensor)]
    if not tensors:
        raise B.error(f"{fn}: needs at least one tensor operand")
    first = tensors[0]
    for t in tensors[1:]:
        _check_same_shape(first, t, fn)
        if t.dtype != first.dtype:
            raise B.error(f"{fn}: element types differ ({first.dtype} vs {t.dtype})",
                          hint="convert one operand with .to(dtype)")
    for o in operands:
        if not isinstance(o, (Tensor, int, float)) or isinstance(o, bool):
            raise B.error(f"{fn}: operand of type {type(o).__name__} is not a tensor or number")
    dst = fragment(first.shape, first.dtype)
    srcs = tuple(o.view if isinstance(o, Tensor) else o for o in operands)
    builder.emit(N.Elementwise(fn=fn, dst=dst.view, srcs=srcs, loc=builder.position()))
    return dst


def exp2(x: Tensor) -> Tensor:
    return elementwise("exp2", x)


def maximum(a: Any, b: Any) -> Tensor:
    return elementwise("max", a, b)


def minimum(a: Any, b: Any) -> Tensor:
    return elementwise("min", a, b)


def fma(a: Any, b: Any, c: Any) -> Tensor:
    return elementwise("fma", a, b, c)


def convert(x: Tensor, dtype: Any, *, rounding: str = "rn", satfinite: bool = False) -> Tensor:
    """``x`` rounded into ``dtype`` (a new register tensor)."""
    dst = fragment(x.shape, dtype)
    builder = B.current()
    builder.emit(N.Convert(dst=dst.view, src=x.view, rounding=rounding, satfinite=satfinite, loc=builder.position()))
    return dst


def select(cond: Any, a: Any, b: Any) -> Tensor:
    """Elementwise ``a if cond else b`` for an index predicate ``cond``."""
    builder = B.current()
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    if not tensors:
        raise B.error("select: at least one of the two values must be a tensor")
    result = fragment(tensors[0].shape, tensors[0].dtype)
    for value, when in ((a, cond), (b, sympy.Not(cond))):
        if isinstance(value, Tensor):
            builder.emit(N.Copy(src=value.view, dst=result.view, atom="reg", pred=when, loc=builder.position()))
        else:
            builder.emit(N.If(cond=when, then=N.Region((N.Fill(dst=result.view, value=value, loc=builder.position()),)),
                              loc=builder.position()))
    return result


# --------------------------------------------------------------------------- synchronisation


def barrier() -> None:
    """Block-wide barrier (``bar.sync 0`` / ``s_barrier``): every thread of the block must reach it."""
    builder = B.current()
    builder.emit(N.Barrier(loc=builder.position(), scope=N.Scope.BLOCK))


# --------------------------------------------------------------------------- tags


def _coordinate_args(t: Tensor) -> tuple[Any, ...]:
    return t.view.coords if t.view.coords is not None else COORDS[: t.rank]


def tag(t: Tensor, fn: Callable[..., Any], name: str) -> None:
    """Attach the record ``fn(*coordinate)`` (a tuple of integers, or a dict) to every element of ``t``.

    The tag of an element travels with its data through copies, math and MMAs.
    """
    builder = B.current()
    record = fn(*COORDS[: len(_coordinate_args(t))])
    if isinstance(record, dict):
        fields = tuple((str(k), symbolic.to_sympy(v)) for k, v in record.items())
    else:
        record = record if isinstance(record, tuple) else (record,)
        fields = tuple((f"f{i}", symbolic.to_sympy(v)) for i, v in enumerate(record))
    builder.emit(N.Tag(view=t.view, name=name, fields=fields, loc=builder.position()))


def assert_tag(t: Tensor, pred: Callable[..., Any], message: str = "") -> None:
    """Every valid element of ``t`` satisfies ``pred(*coordinate, tag)``; ``tag`` is a tuple of
    the element's tag fields (``tag[0]``, ``tag[1]``, ...).

    Elements zero-filled because they were out of range (a TMA box or cp.async past the tensor,
    ``load(..., other=0)`` of a partial tile) carry a *known zero* together with the tag the
    source's tag function gives their out-of-range coordinate: the predicate is checked against
    that tag (a zero fill in the wrong place fails), and ``tag.known_zero`` (true exactly at known
    zeros) states the fact itself, e.g. ``lambda i, tg: tg.known_zero`` for a tail that must be
    zero-filled.  A known zero of a source without a tag function satisfies a predicate that does
    not mention ``tag.known_zero``."""
    builder = B.current()
    tag_syms = tuple(sympy.Symbol(f"tag_f{i}", integer=True) for i in builtins.range(8))
    record = _TagRecord(tag_syms)
    result = pred(*COORDS[: len(_coordinate_args(t))], record)
    if isinstance(result, bool):
        result = sympy.true if result else sympy.false
    zero = record.zero if isinstance(result, sympy.Basic) and record.zero in result.free_symbols else None
    builder.emit(N.AssertTag(view=t.view, predicate=result,
                             tag_symbols=tuple((f"f{i}", s) for i, s in enumerate(tag_syms)),
                             message=message, loc=builder.position(), zero_symbol=zero))


class _TagRecord(tuple):
    """The symbolic tag of an element, compared as a tuple (``t == (i, k)`` builds a predicate)."""

    zero = sympy.Symbol("tag_known_zero", integer=True, nonnegative=True)

    def __new__(cls, symbols: tuple[sympy.Symbol, ...]) -> _TagRecord:
        return super().__new__(cls, symbols)

    @property
    def known_zero(self) -> Any:
        """True at an element zero-filled because it was out of range (a known-zero fact)."""
        return sympy.Eq(self.zero, 1)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        other = other if isinstance(other, tuple) else (other,)
        return sympy.And(*(sympy.Eq(a, symbolic.to_sympy(b)) for a, b in zip(self, other)))

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return sympy.Not(self.__eq__(other))

    __hash__ = tuple.__hash__


def assert_tag_eq(x: Tensor, y: Tensor, message: str = "") -> None:
    """``x`` and ``y`` carry equal tags elementwise."""
    _check_same_shape(x, y, "assert_tag_eq")
    builder = B.current()
    builder.emit(N.AssertTag(view=x.view, equal_to=y.view, message=message, loc=builder.position()))


def assert_bank_conflicts(t: Tensor, max_degree: int = 1) -> None:
    """A warp's access of the shared-memory tile ``t`` here takes at most ``max_degree`` passes
    (1: conflict-free); checked by the verifier for every block, iteration and size, erased
    from the compiled kernel.  Degrees of every shared access are reported either way."""
    if t.space is not N.MemorySpace.SHARED:
        raise B.error("assert_bank_conflicts: the tensor must be in shared memory")
    if not isinstance(max_degree, int) or isinstance(max_degree, bool) or not 1 <= max_degree <= 32:
        raise B.error(f"assert_bank_conflicts: max_degree {max_degree!r} is not an int from 1 to 32")
    builder = B.current()
    builder.emit(N.AssertBankConflicts(view=t.view, max_degree=max_degree, loc=builder.position()))


def reset_tags(t: Tensor) -> None:
    """Forget the tags of ``t`` (its elements become untagged: ⊥)."""
    builder = B.current()
    builder.emit(N.ResetTags(view=t.view, loc=builder.position()))
