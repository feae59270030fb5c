"""The tracing context: collects IR operations while a kernel body runs on symbolic values."""

from __future__ import annotations

import contextvars
import itertools
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import sympy

import argus
from argus.errors import ArgusError, SourcePosition
from argus.ir import nodes as N

_ARGUS_DIR = os.path.dirname(os.path.abspath(argus.__file__))
_USER_DIRS_INSIDE_ARGUS = (os.path.join(_ARGUS_DIR, "kernels"),)


class SpecError(ArgusError):
    """A kernel uses the DSL wrongly (unsupported construct, type or shape mismatch...)."""


def user_position(depth_limit: int = 64) -> SourcePosition | None:
    """The innermost stack frame that belongs to user code (not argus's own modules).

    Kernels of the library (``argus/kernels``) count as user code.
    """
    frame = sys._getframe(1)
    for _ in range(depth_limit):
        if frame is None:
            return None
        file = os.path.abspath(frame.f_code.co_filename)
        inside = file.startswith(_ARGUS_DIR + os.sep)
        if not inside or file.startswith(_USER_DIRS_INSIDE_ARGUS):
            if not frame.f_code.co_filename.startswith("<frozen"):
                return SourcePosition(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def error(message: str, hint: str | None = None) -> SpecError:
    return SpecError(message, position=user_position(), hint=hint)


@dataclass
class _Frame:
    """One open region: the ops emitted so far, and what it binds."""

    ops: list[N.Op] = field(default_factory=list)
    opened_at: SourcePosition | None = None
    what: str = "kernel body"


class Builder:
    """Collects ops into nested regions; hands out unique names and symbols."""

    def __init__(self, kernel_name: str, threads: int) -> None:
        self.kernel_name = kernel_name
        self.threads = threads
        self.frames: list[_Frame] = [_Frame()]
        self._names = itertools.count()
        self.buffers: list[N.Buffer] = []
        self.policy_position: SourcePosition | None = None  # set while a policy inserts ops
        self.shared_bytes = 0
        # pending static `if` outcomes, for pairing `else` with its `if`
        self.if_stack: list[Any] = []

    # ---------------------------------------------------------------- names

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def index_symbol(self, prefix: str) -> sympy.Symbol:
        return sympy.Symbol(self.fresh(prefix), integer=True)

    # ---------------------------------------------------------------- emission

    def emit(self, op: N.Op) -> N.Op:
        self.frames[-1].ops.append(op)
        return op

    def position(self) -> SourcePosition | None:
        return user_position()

    def open_region(self, position: SourcePosition | None = None, what: str = "region") -> None:
        self.frames.append(_Frame(opened_at=position, what=what))

    def close_region(self) -> N.Region:
        frame = self.frames.pop()
        return N.Region(tuple(frame.ops))

    def root_region(self) -> N.Region:
        if len(self.frames) != 1:
            frame = self.frames[-1]
            raise SpecError(
                f"the {frame.what} was left before its end: `break`, `continue` or `return` inside a "
                "traced loop or branch cannot be traced",
                position=frame.opened_at,
                hint="guard the rest of the body with an `if` instead",
            )
        return N.Region(tuple(self.frames[0].ops))

    def new_buffer(self, buffer: N.Buffer) -> N.Buffer:
        self.buffers.append(buffer)
        return buffer


_CURRENT: contextvars.ContextVar[Builder | None] = contextvars.ContextVar(
    "argus_builder", default=None
)


def current() -> Builder:
    builder = _CURRENT.get()
    if builder is None:
        raise error(
            "argus DSL operations can only be used inside an @argus.spec.kernel body while it is traced",
            hint="call kernel.specialize(...) or argus verify; do not call the body directly",
        )
    return builder


def tracing(builder: Builder):
    """Context manager: make ``builder`` the current one."""

    class _Ctx:
        def __enter__(self) -> Builder:
            self.token = _CURRENT.set(builder)
            return builder

        def __exit__(self, *exc: Any) -> None:
            _CURRENT.reset(self.token)

    return _Ctx()
