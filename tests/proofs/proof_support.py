"""Helpers of the verifier tests (a uniquely named module: every tests/ folder shares sys.path)."""

import inspect


def source_line(kernel, text: str) -> int:
    """The line of ``kernel``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)
