"""``@kernel``: the kernel signature, its declared assumptions, and specialization.

A kernel's parameters are annotated:

* ``Global(dtype, "M K")`` (or ``Global[dtype, "M K"]``) — a global tensor; each name in the dims string is a run-time size
  (shared by every parameter that uses it), row-major by default (the last dim contiguous);
  ``Global(dtype, "M K", "K 1")`` gives the strides explicitly (names or ints).
* ``Index`` — a run-time integer scalar (a size symbol).
* ``const`` — a compile-time parameter; its default (or the value passed to
  :meth:`Kernel.specialize`) is baked into the specialization.

``@kernel(threads=..., grid=..., cluster=..., assume=...)``: ``grid`` and ``assume`` are
functions whose parameter names pick sizes, consts and tensors by name; ``cluster`` is a triple
or a function of consts returning one (a cluster shape chosen per specialization); ``assume`` returns
conditions (sympy relations over sizes, :func:`aligned`, :func:`no_alias`, and properties of
index tensors: :func:`ids_in_range`, :func:`monotone`) that the verifier may assume and the
runtime checks at launch.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

import argus
from argus import symbolic
from argus.errors import SourcePosition
from argus.ir import nodes as N
from argus.ir.printer import print_kernel
from argus.layout_algebra import Layout
from argus.spec import builder as B
from argus.spec.tensor import COORDS, Tensor


class const:
    """Annotation of a compile-time parameter: ``BM: const = 128``."""


class Index:
    """Annotation of a run-time integer parameter (non-negative)."""


@dataclass(frozen=True)
class GlobalSpec:
    dtype: Any
    dims: tuple[str, ...]
    strides: tuple[str | int, ...] | None = None


class _GlobalFactory:
    """``Global(dtype, "M K")`` (what linters accept) or ``Global[dtype, "M K"]``."""

    def __call__(self, dtype: Any, dims: str, strides: str | None = None) -> GlobalSpec:
        return self[(dtype, dims) if strides is None else (dtype, dims, strides)]

    def __getitem__(self, item: Any) -> GlobalSpec:
        item = item if isinstance(item, tuple) else (item,)
        if len(item) not in (2, 3) or not isinstance(item[1], str):
            raise B.SpecError(
                "Global[...] takes an element type, a dims string and optionally a strides string",
                position=B.user_position(),
                hint='write Global[f32, "M N"] or Global[f32, "M N", "1 M"]',
            )
        dims = tuple(item[1].split())
        strides = None
        if len(item) == 3:
            strides = tuple(int(s) if s.lstrip("-").isdigit() else s for s in str(item[2]).split())
            if len(strides) != len(dims):
                raise B.SpecError(f"Global: {len(dims)} dims but {len(strides)} strides",
                                  position=B.user_position())
        return GlobalSpec(item[0], dims, strides)


Global = _GlobalFactory()


@dataclass(frozen=True)
class Aligned:
    tensor: str
    bytes: int


@dataclass(frozen=True)
class NoAlias:
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class IdsInRange:
    tensor: str
    low: Any
    high: Any


@dataclass(frozen=True)
class Monotone:
    tensor: str


def aligned(tensor: Tensor, nbytes: int) -> Aligned:
    """Assumption: the tensor's base address is a multiple of ``nbytes``."""
    return Aligned(tensor.view.buffer.name, nbytes)


def no_alias(*tensors: Tensor) -> NoAlias:
    """Assumption: the tensors' memory does not overlap."""
    return NoAlias(tuple(t.view.buffer.name for t in tensors))


def eq(a: Any, b: Any) -> Any:
    """``a == b`` as an equation when either side is symbolic (Python's ``==`` on sympy
    expressions compares structure); a bool when both are constants."""
    from argus.spec.ops import _argus_eq

    return _argus_eq(a, b)


def divisible(value: Any, divisor: int) -> Any:
    """Assumption/condition: ``value % divisor == 0``."""
    return eq(symbolic.mod(value, divisor), 0)


def ids_in_range(tensor: Tensor, low: Any, high: Any) -> IdsInRange:
    """Assumption: every element of the index tensor lies in ``[low, high)`` (e.g. expert ids < E)."""
    return IdsInRange(tensor.view.buffer.name, low, high)


def monotone(tensor: Tensor) -> Monotone:
    """Assumption: the index tensor is non-decreasing (e.g. segment offsets of sorted tokens)."""
    return Monotone(tensor.view.buffer.name)


def _call_by_names(fn: Callable[..., Any], env: dict[str, Any], what: str) -> Any:
    names = list(inspect.signature(fn).parameters)
    missing = [n for n in names if n not in env]
    if missing:
        raise B.SpecError(
            f"{what} asks for {', '.join(missing)}, which is not a size, const or parameter",
            position=SourcePosition(fn.__code__.co_filename, fn.__code__.co_firstlineno),
        )
    return fn(*(env[n] for n in names))


def _user_frame(tb: Any) -> SourcePosition | None:
    """The innermost traceback frame in user code (kernels under ``argus/kernels`` count)."""
    import os

    argus_dir = os.path.dirname(os.path.abspath(argus.__file__))
    library = os.path.join(argus_dir, "kernels") + os.sep
    found = None
    while tb is not None:
        file = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if (not file.startswith(argus_dir + os.sep) or file.startswith(library)) and not file.startswith("<"):
            found = SourcePosition(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


class Kernel:
    """A kernel definition; :meth:`specialize` traces one specialization into IR."""

    def __init__(self, fn: Callable[..., Any], threads: int, grid: Callable[..., Any] | None,
                 cluster: tuple[int, int, int] | Callable[..., Any], assume: Callable[..., Any] | None) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.threads = threads
        self.grid = grid
        self.cluster = cluster
        self.assume = assume
        self.position = SourcePosition(fn.__code__.co_filename, fn.__code__.co_firstlineno)
        try:  # string annotations (``from __future__ import annotations``) are evaluated
            self.signature = inspect.signature(fn, eval_str=True)
        except Exception as err:
            raise B.SpecError(f"cannot evaluate the annotations of kernel {fn.__name__!r}: {err}",
                              position=SourcePosition(fn.__code__.co_filename, fn.__code__.co_firstlineno),
                              hint="annotations must be Global(...), Index or const") from None
        self._rewritten: Callable[..., Any] | None = None
        self._cache: dict[tuple[tuple[str, Any], ...], N.Kernel] = {}
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<argus kernel {self.name} ({self.position})>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise B.SpecError(
            f"kernel {self.name} cannot be called directly on the host",
            position=B.user_position(),
            hint="use kernel.specialize(...) to trace it, argus.compile(...) to run it",
        )

    # ---------------------------------------------------------------- consts

    def const_names(self) -> list[str]:
        return [n for n, p in self.signature.parameters.items() if p.annotation in (const, "const", "A.const")]

    def bind_consts(self, consts: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        names = self.const_names()
        unknown = sorted(set(consts) - set(names))
        if unknown:
            raise B.SpecError(
                f"kernel {self.name} has no const parameter {', '.join(unknown)}",
                position=B.user_position(), hint=f"its consts are: {', '.join(names) or 'none'}",
            )
        bound = []
        for name in names:
            param = self.signature.parameters[name]
            if name in consts:
                value = consts[name]
            elif param.default is not inspect.Parameter.empty:
                value = param.default
            else:
                raise B.SpecError(f"const {name} of kernel {self.name} needs a value",
                                  position=B.user_position())
            if not isinstance(value, (int, float, str, bool, tuple)):
                raise B.SpecError(f"const {name} must be an int, float, bool, str or tuple, got {type(value).__name__}",
                                  position=B.user_position())
            bound.append((name, value))
        return tuple(bound)

    # ---------------------------------------------------------------- tracing

    def specialize(self, **consts: Any) -> N.Kernel:
        """Trace the body with ``consts`` bound; cached per const binding."""
        key = self.bind_consts(consts)
        if key not in self._cache:
            self._cache[key] = self._trace(key)
        return self._cache[key]

    def _trace(self, consts: tuple[tuple[str, Any], ...]) -> N.Kernel:
        from argus.spec import ops

        if self._rewritten is None:
            from argus.spec.rewrite import rewrite_kernel_body

            self._rewritten = rewrite_kernel_body(self.fn, ops.REWRITE_HELPERS)
        builder = B.Builder(self.name, self.threads)
        const_env = dict(consts)
        sizes: dict[str, sympy.Symbol] = {}
        params: list[N.Param] = []
        arguments: dict[str, Any] = {}
        for index, (name, p) in enumerate(self.signature.parameters.items()):
            ann = p.annotation
            if name in const_env:
                arguments[name] = const_env[name]
                continue
            if isinstance(ann, GlobalSpec):
                tensor = self._global_param(name, index, ann, sizes, const_env)
                params.append(N.Param(name, "tensor", buffer=tensor.view.buffer))
                arguments[name] = tensor
            elif ann is Index or ann == "Index":
                sym = sizes.setdefault(name, symbolic.size_symbol(name))
                params.append(N.Param(name, "index", symbol=sym))
                arguments[name] = sym
            else:
                raise B.SpecError(
                    f"parameter {name!r} of kernel {self.name} needs an annotation: Global[...], Index or const",
                    position=self.position,
                )
        env = {**sizes, **const_env, **arguments}
        cluster = self._cluster(const_env)
        builder.cluster = cluster
        grid = (1,)
        if self.grid is not None:
            grid = _call_by_names(self.grid, env, "grid")
            grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        assumptions = []
        if self.assume is not None:
            declared = _call_by_names(self.assume, env, "assume")
            declared = declared if isinstance(declared, (list, tuple)) else [declared]
            for item in declared:
                assumptions.append(self._assumption(item, arguments))
        with B.tracing(builder):
            try:
                self._rewritten(**arguments)
            except (TypeError, ValueError, AttributeError, ZeroDivisionError, IndexError, KeyError) as err:
                # Python itself refused an operation of the kernel body (e.g. ``1 << rank`` on an
                # index value): report it at the kernel's line, not as a traceback
                raise B.SpecError(f"kernel {self.name}: {type(err).__name__}: {err}",
                                  position=_user_frame(err.__traceback__) or self.position,
                                  hint="index values are symbolic expressions: use +, -, *, //, %, "
                                  "comparisons and the argus.spec helpers on them") from err
            body = builder.root_region()
        from argus.ir.policies import apply_policies  # pipeline= and unroll= loops become plain IR

        return apply_policies(N.Kernel(
            name=self.name,
            params=tuple(params),
            consts=consts,
            launch=N.LaunchConfig(self.threads, tuple(symbolic.normalize(g) for g in grid), cluster),
            assumptions=tuple(assumptions),
            body=body,
            loc=self.position,
        ))

    def _cluster(self, consts: dict[str, Any]) -> tuple[int, int, int]:
        """The cluster shape of a specialization: the declared triple, or what the declared
        function returns for the consts (a cluster shape is compile-time: it needs constants)."""
        shape = _call_by_names(self.cluster, consts, "cluster") if callable(self.cluster) else self.cluster
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        shape = shape + (1,) * (3 - len(shape))
        if len(shape) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise B.SpecError(f"kernel {self.name}: cluster={shape!r} must be up to three positive integers "
                              "(a function of consts only)", position=self.position,
                              hint="e.g. cluster=lambda CLUSTER: (CLUSTER, 1, 1)")
        if shape[0] * shape[1] * shape[2] > 16:
            raise B.SpecError(f"kernel {self.name}: cluster={shape!r} has more than 16 blocks", position=self.position,
                              hint="Hopper clusters hold at most 16 blocks (8 portably)")
        return shape

    def _global_param(self, name: str, index: int, spec: GlobalSpec, sizes: dict[str, sympy.Symbol],
                      consts: dict[str, Any]) -> Tensor:
        def size_of(dim: str | int) -> Any:
            if isinstance(dim, int):
                return dim
            if dim in consts:
                return consts[dim]
            if dim.isdigit():
                return int(dim)
            return sizes.setdefault(dim, symbolic.size_symbol(dim))

        shape = tuple(size_of(d) for d in spec.dims)
        if spec.strides is None:
            strides, running = [], 1
            for extent in reversed(shape):
                strides.append(running)
                running = running * extent
            strides = tuple(reversed(strides))
        else:
            strides = tuple(size_of(s) for s in spec.strides)
        layout = Layout(shape, strides)
        total = 1
        for extent in shape:
            total = total * extent
        buffer = N.Buffer(name, N.MemorySpace.GLOBAL, spec.dtype, symbolic.normalize(total), layout,
                          param_index=index)
        return Tensor(N.View(buffer, layout, 0, COORDS[: len(shape)], None, None))

    def _assumption(self, item: Any, arguments: dict[str, Any]) -> N.Assumption:
        if isinstance(item, Aligned):
            buffer = arguments[item.tensor].view.buffer
            pred = sympy.Eq(sympy.Mod(sympy.Symbol(f"addr_{buffer.name}", integer=True), item.bytes), 0)
            return N.Assumption(pred, f"aligned({item.tensor}, {item.bytes})", kind="aligned",
                                tensors=(item.tensor,), bound=(item.bytes,))
        if isinstance(item, NoAlias):
            return N.Assumption(sympy.true, f"no_alias({', '.join(item.tensors)})", kind="no_alias",
                                tensors=item.tensors)
        if isinstance(item, IdsInRange):
            return N.Assumption(sympy.true, f"ids_in_range({item.tensor}, {item.low}, {item.high})",
                                kind="ids_in_range", tensors=(item.tensor,),
                                bound=(symbolic.normalize(item.low), symbolic.normalize(item.high)))
        if isinstance(item, Monotone):
            return N.Assumption(sympy.true, f"monotone({item.tensor})", kind="monotone", tensors=(item.tensor,))
        if isinstance(item, (bool, sympy.Basic)):
            if item is False or item is sympy.false:
                raise B.SpecError(
                    "an assumption is statically false", position=self.position,
                    hint="`==` between size expressions compares their structure in Python; "
                    "write A.eq(n % 4, 0) or A.divisible(n, 4)")
            return N.Assumption(sympy.true if item is True else item, str(item))
        raise B.SpecError(f"assume: cannot use {item!r} as an assumption", position=self.position,
                          hint="return sympy relations over sizes, aligned(t, n), no_alias(a, b), "
                          "ids_in_range(t, lo, hi) or monotone(t)")


def kernel(*, threads: int, grid: Callable[..., Any] | None = None,
           cluster: tuple[int, int, int] | Callable[..., Any] = (1, 1, 1), assume: Callable[..., Any] | None = None):
    """Declare a kernel: ``@kernel(threads=128, grid=lambda n, BLOCK: (cdiv(n, BLOCK),))``."""
    if not isinstance(threads, int) or threads <= 0 or threads > 1024 or threads % 32:
        raise B.SpecError(f"threads={threads}: must be a positive multiple of 32 up to 1024",
                          position=B.user_position())

    def wrap(fn: Callable[..., Any]) -> Kernel:
        return Kernel(fn, threads, grid, cluster, assume)

    return wrap


def kernel_hash(k: N.Kernel) -> str:
    """sha256 of the printed IR (paths relative), its assumptions and the argus version."""
    text = print_kernel(k, root=None)
    digest = hashlib.sha256()
    digest.update(text.encode())
    digest.update(argus.__version__.encode())
    return digest.hexdigest()
