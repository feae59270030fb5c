"""Planted emitter bugs are caught by the gfx942 emulator, each with the wave, the lane and the
instruction: the emitted assembly of an example is edited the way a broken emitter would have
written it, assembled and linked, and the code object is emulated on fresh random inputs.

``gemm_mfma`` is not proved yet (the verifier answers unknown); it is emitted through the
ungated ``emit`` path like the other backend tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from argus.backend_amdgcn.assemble import assemble
from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.emulate_run import compare, emulate_kernel, random_inputs
from argus.ir.interpreter import Interpreter
from argus.proofs.cli_verify import load_kernels
from argus.toolchain import find_amdgpu_tools

pytestmark = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942 (apt-get install llvm-19 lld-19)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GEMM_SIZES = {"M": 64, "N": 128, "K": 64}


def example(name: str):
    if name in ("lds_direct_f32", "mfma_tile"):
        import amdgcn_kernels

        if name == "mfma_tile":
            import argus.spec as A

            return amdgcn_kernels.mfma_tile("v_mfma_f32_32x32x8_bf16", A.bf16, 32, 32, 8).specialize()
        return amdgcn_kernels.lds_direct_f32.specialize()
    (k,) = load_kernels(EXAMPLES / f"{name}.py")
    return k.specialize()


def planted(name: str, edit, sizes: dict, seed: int = 5):
    """Emulate ``name`` with its emitted assembly passed through ``edit``; returns the
    emulation, the outputs, the reference outputs and the inputs."""
    ir = example(name)
    source = emit(ir).source
    body, rodata = source.split(".rodata", 1)
    changed = edit(body)
    assert changed != body, "the edit must change the program"
    hsaco = assemble(changed + ".rodata" + rodata)
    inputs = random_inputs(ir, sizes, np.random.default_rng(seed))
    got, emulation = emulate_kernel(ir, {k: v.copy() for k, v in inputs.items()}, sizes, hsaco=hsaco)
    ref = Interpreter(ir).run({k: v.copy() for k, v in inputs.items()}, sizes)
    return emulation, got, ref, inputs


def remove_line(pattern: str, occurrence: int = 0):
    def edit(body: str) -> str:
        lines = body.splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if re.search(pattern, line.split(";")[0])]
        del lines[hits[occurrence]]
        return "".join(lines)
    return edit


def replace_in(pattern: str, old: str, new: str, count: int = 1):
    def edit(body: str) -> str:
        lines = body.splitlines(keepends=True)
        done = 0
        for i, line in enumerate(lines):
            code = line.split(";")[0]
            if done < count and re.search(pattern, code):
                lines[i] = code.replace(old, new) + "\n"
                done += 1
        return "".join(lines)
    return edit


def kinds(emulation) -> set[str]:
    return {f.kind for f in emulation.findings}


def test_unmodified_examples_have_no_findings():
    emulation, *_ = planted("gemm_mfma", lambda body: body + "\n", GEMM_SIZES)
    assert emulation.findings == []


def test_removed_vmcnt_wait_is_a_use_before_waitcnt():
    emulation, *_ = planted("vector_add", remove_line(r"s_waitcnt vmcnt\(0\)"), {"n": 300})
    found = [f for f in emulation.findings if f.kind == "use-before-waitcnt"]
    assert {f.message.split()[1] for f in found} == {"v0", "v1"}  # both loaded operands
    for finding in found:
        assert finding.instruction.endswith("v_add_f32_e32 v3, v0, v1")
        assert "global_load_dword" in finding.producer
        assert finding.wave == 0 and finding.lane == 0 and finding.workgroup == (0, 0, 0)


def test_removed_lgkmcnt_wait_before_mfma_is_a_use_before_waitcnt():
    emulation, *_ = planted("gemm_mfma", remove_line(r"s_waitcnt lgkmcnt\(0\)", occurrence=-1), GEMM_SIZES)
    found = [f for f in emulation.findings if f.kind == "use-before-waitcnt"]
    assert found, [str(f) for f in emulation.findings]
    assert all(f.lane is not None and f.wave is not None for f in found)
    assert any("ds_read_b64" in (f.producer or "") for f in found)


def test_off_by_one_vgpr_read_of_an_unwritten_register():
    emulation, *_ = planted("vector_add", replace_in(r"global_store_dword", "v3,", "v4,"), {"n": 300})
    (finding,) = [f for f in emulation.findings if f.kind == "undefined-register"]
    assert "global_store_dword" in finding.instruction and "v4" in finding.message
    assert finding.wave == 0 and finding.lane == 0


def test_off_by_one_vgpr_with_a_defined_neighbour_is_a_wrong_value_at_its_store():
    # v_add_f32 reads v2 (the lane's byte offset) instead of v1 (b's element)
    emulation, got, ref, _ = planted("vector_add", replace_in(r"v_add_f32", "v0, v1", "v0, v2"), {"n": 300})
    result = compare("c", ref["c"], got["c"], emulation=emulation)
    assert not result.ok and result.first == 0
    assert result.origin.startswith("workgroup (0, 0, 0) wave 0 lane 0:") and "global_store_dword" in result.origin
    assert "written by workgroup (0, 0, 0) wave 0 lane 0" in result.line()


def test_swapped_mfma_operands_give_a_wrong_product_named_at_its_store():
    def swap(body: str) -> str:
        return re.sub(r"(v_mfma_f32_32x32x8_bf16 a\[0:15\]), (v\[\d+:\d+\]), (v\[\d+:\d+\])",
                      r"\1, \3, \2", body)

    emulation, got, ref, _ = planted("gemm_mfma", swap, GEMM_SIZES)
    assert emulation.findings == []  # no hazard: the operands are simply the wrong ones
    result = compare("c", ref["c"], got["c"], rtol=1e-3, atol=1e-3, emulation=emulation)
    assert not result.ok
    assert "global_store_dword" in result.origin and " wave " in result.origin and " lane " in result.origin


def test_removed_barrier_between_lds_writes_and_reads_is_a_race():
    emulation, *_ = planted("gemm_mfma", remove_line(r"^\s*s_barrier", occurrence=0), GEMM_SIZES)
    races = [f for f in emulation.findings if f.kind == "lds-race"]
    assert races, [str(f) for f in emulation.findings]
    assert any("ds_read_b64" in f.instruction for f in races)
    assert all(f.lane is not None for f in races)


def test_removed_barrier_between_lds_reads_and_the_next_writes_is_a_race():
    emulation, *_ = planted("gemm_mfma", remove_line(r"^\s*s_barrier", occurrence=1), GEMM_SIZES)
    races = [f for f in emulation.findings if f.kind == "lds-race"]
    assert any("ds_write_b128" in f.instruction for f in races), [str(f) for f in emulation.findings]


def test_barrier_reached_with_lds_writes_in_flight():
    def drop_wait_before_barrier(body: str) -> str:
        lines = body.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if re.match(r"\s*s_barrier", line) and "lgkmcnt" in lines[i - 1]:
                del lines[i - 1]
                break
        return "".join(lines)

    emulation, *_ = planted("gemm_mfma", drop_wait_before_barrier, GEMM_SIZES)
    assert "barrier-lds-in-flight" in kinds(emulation), [str(f) for f in emulation.findings]
    finding = next(f for f in emulation.findings if f.kind == "barrier-lds-in-flight")
    assert "s_barrier" in finding.instruction and "ds_write" in finding.producer


def test_direct_lds_load_read_before_its_vmcnt_wait():
    # without the wait, the barrier is passed and the LDS is read while the loads are in flight
    emulation, *_ = planted("lds_direct_f32", remove_line(r"s_waitcnt vmcnt\(0\)"), {"n": 512})
    found = {f.kind: f for f in emulation.findings}
    assert "barrier-lds-in-flight" in found and "buffer_load_dword" in found["barrier-lds-in-flight"].producer
    assert found["barrier-lds-in-flight"].lane == 0


def test_direct_lds_load_with_a_wrong_m0_is_a_race():
    # M0 = 0 for every wave: all four waves write LDS bytes 0..255 with no barrier between
    def zero_m0(body: str) -> str:
        return re.sub(r"s_mov_b32 m0, s\d+", "s_mov_b32 m0, 0", body)

    emulation, *_ = planted("lds_direct_f32", zero_m0, {"n": 512})
    races = [f for f in emulation.findings if f.kind == "lds-race"]
    assert races and all("buffer_load_dword" in f.instruction and f.wave > 0 for f in races), \
        [str(f) for f in emulation.findings]


def test_removed_mfma_wait_states_before_reading_the_result():
    emulation, *_ = planted("mfma_tile", remove_line(r"^\s*s_nop 7"), {})
    found = [f for f in emulation.findings if f.kind == "wait-states"]
    assert found, [str(f) for f in emulation.findings]
    first = found[0]
    assert "global_store_dword" in first.instruction and "a0 is used 3 wait state(s)" in first.message
    assert "v_mfma_f32_32x32x8_bf16" in first.producer and "requires 11" in first.message
    assert first.wave == 0 and first.lane == 0


def test_removed_valu_wait_states_in_the_softmax():
    emulation, *_ = planted("row_softmax", lambda body: re.sub(r"\n\s*s_nop \d+[^\n]*", "", body), {"R": 8})
    found = [f for f in emulation.findings if f.kind == "wait-states"]
    whats = {f.message.split(":")[0] for f in found}
    assert {"transcendental result read by a VALU", "VALU result read through DPP",
            "VALU-written SGPR read by a VALU"} <= whats, whats
    for f in found:
        assert f.wave == 0 and f.lane == 0 and f.producer
