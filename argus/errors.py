"""The errors a user can cause, each with a source position and a one-line fix hint."""

from __future__ import annotations

import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class SourcePosition:
    """A place in user source code."""

    file: str
    line: int
    column: int | None = None

    def __str__(self) -> str:
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"

    @staticmethod
    def of_caller(skip_modules: tuple[str, ...] = ("argus",)) -> SourcePosition | None:
        """The first frame on the stack outside the named packages (the user's call site)."""
        frame = inspect.currentframe()
        try:
            while frame is not None:
                module = frame.f_globals.get("__name__", "")
                if not any(module == m or module.startswith(m + ".") for m in skip_modules):
                    return SourcePosition(frame.f_code.co_filename, frame.f_lineno)
                frame = frame.f_back
            return None
        finally:
            del frame


class ArgusError(Exception):
    """Base of every error argus reports to a user.

    ``str(err)`` reads ``file:line: message`` followed by ``hint: ...`` when a hint is given.
    """

    def __init__(
        self, message: str, *, position: SourcePosition | None = None, hint: str | None = None
    ) -> None:
        self.message = message
        self.position = position
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.position}: {self.message}" if self.position else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ToolchainError(ArgusError):
    """A tool argus needs (solver, assembler, driver) is missing or broken."""


class PerformanceWarning(UserWarning):
    """A kernel that builds and runs correctly but slower than it was written to: the assembler
    spilled registers or serialized wgmma instructions (``Cubin.performance_issues``)."""
