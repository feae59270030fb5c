"""The example kernels and the shared test helpers on the path."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "examples", ROOT / "tests" / "examples", ROOT / "tests" / "proofs"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
