"""The printed IR of every example is stable (golden files).

A change of the front end, a policy or the printer that alters an example's IR shows up here
as a diff.  Regenerate after an intended change with ``ARGUS_UPDATE_GOLDEN=1 pytest
tests/examples/test_golden_ir.py`` and review the diff of ``tests/examples/golden/``.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from argus.ir.printer import print_kernel
from argus.spec.kernel import Kernel

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(ROOT / "examples"))

EXAMPLES = [
    "vector_add", "transpose_swizzled", "row_softmax", "gemm_mma_sync", "gemm_cp_async",
    "gemm_mfma", "gemm_tma_wgmma", "gemm_warp_specialized", "gemm_cluster_multicast",
]


def _kernels():
    for module_name in EXAMPLES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, Kernel):
                yield pytest.param(value, id=f"{module_name}.{value.name}")


@pytest.mark.parametrize("kernel", list(_kernels()))
def test_printed_ir_matches_golden(kernel):
    text = print_kernel(kernel.specialize(), root=str(ROOT))
    path = GOLDEN / f"{kernel.name}.ir"
    if os.environ.get("ARGUS_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with ARGUS_UPDATE_GOLDEN=1"
    assert text == path.read_text()
