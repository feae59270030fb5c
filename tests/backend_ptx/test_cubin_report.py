"""What ``Cubin.performance_issues`` picks out of the assembler's report, and how
``argus.compile`` surfaces it (a :class:`argus.errors.PerformanceWarning`)."""

import warnings

import pytest

from argus.backend_ptx.assemble import Cubin
from argus.errors import PerformanceWarning

CLEAN = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_bf16_bf16' for 'sm_90a'
ptxas info    : Function properties for gemm_bf16_bf16
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers"""

SERIALIZED = ("ptxas info    : (C7519) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
              "to program dependence on compiler-inserted WG.AR in divergent path in the function "
              "'gemm_bf16_bf16' in line 827\n" + CLEAN)

SPILLING = CLEAN.replace("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                         "104 bytes stack frame, 284 bytes spill stores, 180 bytes spill loads")


def _cubin(log: str) -> Cubin:
    return Cubin(b"", "key", "ptxas 13.5", log, False)


def test_a_clean_report_has_no_issue():
    assert _cubin(CLEAN).performance_issues == []
    assert _cubin("").performance_issues == []  # nvJitLink: no report


def test_serialized_wgmma_is_an_issue():
    (issue,) = _cubin(SERIALIZED).performance_issues
    assert issue.startswith("(C7519) Potential Performance Loss: wgmma.mma_async instructions are serialized")


def test_spills_are_an_issue():
    (issue,) = _cubin(SPILLING).performance_issues
    assert "284 bytes spill stores" in issue


def test_compile_warns_about_them(monkeypatch):
    import argus.backend_ptx.assemble as assemble
    import argus.runtime as runtime
    import argus.runtime.gate as gate
    from argus.backend_ptx import emit as emit_module

    monkeypatch.setattr(gate, "require_proof", lambda kernel, **_: "record")
    monkeypatch.setattr(runtime, "require_proof", lambda kernel, **_: "record")

    class _Ptx:
        name = "k"

    monkeypatch.setattr(emit_module, "emit_ptx", lambda kernel, target: _Ptx())
    monkeypatch.setattr(assemble, "build_cubin", lambda ptx, key: _cubin(SERIALIZED))
    from argus.ir import nodes as N

    kernel = pytest.importorskip("argus.kernels.gemm").gemm_kernel().specialize(BN=64, STAGES=2, SMS=1)
    assert isinstance(kernel, N.Kernel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runtime.compile(kernel)
    assert [w.category for w in caught] == [PerformanceWarning]
    assert "C7519" in str(caught[0].message)
