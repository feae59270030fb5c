"""Shared helpers of the verifier tests: the example and test kernels on the path."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "examples", ROOT / "tests" / "ir", ROOT / "tests" / "proofs"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from proof_support import source_line  # noqa: E402,F401 - re-exported for older imports
