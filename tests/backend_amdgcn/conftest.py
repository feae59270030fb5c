"""Put this folder on ``sys.path`` so tests import ``amdgcn_kernels`` (uniquely named: every
tests/ folder shares sys.path)."""

import sys
from pathlib import Path

folder = Path(__file__).resolve().parent
if str(folder) not in sys.path:
    sys.path.insert(0, str(folder))
