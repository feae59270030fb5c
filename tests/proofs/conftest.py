"""Shared helpers of the verifier tests: the example and test kernels on the path."""

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "examples", ROOT / "tests" / "ir", ROOT / "tests" / "proofs"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def source_line(kernel, text: str) -> int:
    """The line of ``kernel``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)
