"""Acceptance: every gfx942-capable example emits, assembles and links; the code object's
metadata note (``llvm-readobj --notes``) and kernel descriptor state the kernel's arguments,
register counts and LDS size; ``llvm-objdump --mcpu=gfx942`` gives back the emitted
instructions; the hazard checker finds nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from argus.backend_amdgcn.assemble import disassemble, read_descriptor, read_metadata
from argus.backend_amdgcn.cfg import branch_target
from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.isa import Label, RegFile, render_inst
from argus.backend_amdgcn.isel import Policy
from argus.ir.lowering import lower_kernel
from argus.proofs.cli_verify import load_kernels
from argus.toolchain import find_amdgpu_tools

pytestmark = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942 (apt-get install llvm-19 lld-19)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TARGETS = ["vector_add", "row_softmax", "transpose_swizzled", "gemm_mfma"]


def kernel(name: str, **consts):
    (k,) = load_kernels(EXAMPLES / f"{name}.py")
    return k.specialize(**consts)


@pytest.fixture(scope="module", params=TARGETS)
def built(request):
    ir = kernel(request.param)
    emitted = emit(ir)
    return ir, emitted, emitted.assemble()


def test_metadata_matches_the_kernel(built):
    ir, emitted, hsaco = built
    meta = read_metadata(hsaco)
    assert meta["amdhsa.version"] == [1, 2]  # code object v5
    assert meta["amdhsa.target"] == "amdgcn-amd-amdhsa--gfx942"
    (entry,) = meta["amdhsa.kernels"]
    lowered = lower_kernel(ir, "gfx942")
    expected = [(p.name, "global_buffer", 8) for p in lowered.tensors] + \
               [(s.name, "by_value", 4) for s in lowered.sizes]
    args = [(a[".name"], a[".value_kind"], a[".size"]) for a in entry[".args"]]
    assert args == expected
    offsets = [a[".offset"] for a in entry[".args"]]
    assert offsets == sorted(offsets) and all(o % s == 0 for o, (_, _, s) in zip(offsets, expected))
    final = emitted.final
    vgprs, agprs = final.allocation.count(RegFile.VGPR), final.allocation.count(RegFile.AGPR)
    assert entry[".agpr_count"] == agprs
    assert entry[".vgpr_count"] == (final.allocation.accum_offset + agprs if agprs else vgprs)
    assert entry[".sgpr_count"] >= final.allocation.count(RegFile.SGPR)
    assert entry[".group_segment_fixed_size"] == lowered.shared_bytes
    assert entry[".max_flat_workgroup_size"] == ir.launch.threads
    assert entry[".wavefront_size"] == 64 and entry[".name"] == ir.name and entry[".symbol"] == f"{ir.name}.kd"


def test_descriptor_matches_the_allocation(built):
    ir, emitted, hsaco = built
    kd = read_descriptor(hsaco, ir.name)
    res = emitted.resources
    assert kd.group_segment_fixed_size == res.lds_bytes
    assert kd.kernarg_size == res.kernarg_size
    assert kd.max_vgprs >= res.unified_vgprs > kd.max_vgprs - 8
    assert kd.accum_offset == res.accum_offset
    assert kd.user_sgpr_count == 2 and kd.kernarg_segment_ptr
    assert kd.workgroup_id_enabled == tuple(d < len(ir.launch.grid) for d in range(3))


def test_disassembly_round_trips(built):
    ir, emitted, hsaco = built
    final = emitted.final
    insts, labels = [], {}
    for item in final.items:
        if isinstance(item, Label):
            labels[item.name] = len(insts)
        else:
            insts.append(item)
    listing = disassemble(hsaco, ir.name)[:len(insts)]
    index = {d.offset: i for i, d in enumerate(listing)}
    assert len(listing) == len(insts)

    def canonical(text: str) -> str:  # the assembler picks the VOP encoding; the text is otherwise ours
        return re.sub(r"\s+", " ", re.sub(r"_e(32|64)\b", "", text)).strip()

    for mine, back in zip(insts, listing):
        target = branch_target(mine)
        if target is not None:
            assert back.text.split()[0] == mine.opcode and index[back.target] == labels[target]
        else:
            assert canonical(render_inst(mine, final.allocation.assignment)) == canonical(back.text)


def test_no_hazards(built):
    _, emitted, _ = built
    assert emitted.hazards() == []


def test_gemm_uses_mfma_with_agpr_accumulators():
    emitted = emit(kernel("gemm_mfma"))
    assert "v_mfma_f32_32x32x8_bf16 a[" in emitted.source
    assert emitted.resources.agprs == 16
    assert re.search(r"ds_write_b128 v\d+, v\[\d+:\d+\]", emitted.source)
    assert re.search(r"ds_read_b64 v\[\d+:\d+\], v\d+ offset:\d+", emitted.source)


@pytest.mark.parametrize("policy", [Policy(accumulators="vgpr"), Policy(mfma_priority=2, hoist_lds_reads=True)])
def test_gemm_policies_assemble_without_hazards(policy):
    emitted = emit(kernel("gemm_mfma"), policy)
    emitted.assemble()
    assert emitted.hazards() == []
    if policy.accumulators == "vgpr":
        assert emitted.resources.agprs == 0 and "v_mfma_f32_32x32x8_bf16 v[" in emitted.source
    else:
        assert "s_setprio 2" in emitted.source


def test_row_softmax_reduces_across_lanes_with_dpp_and_swizzle():
    source = emit(kernel("row_softmax")).source
    assert "quad_perm:[1,0,3,2]" in source and "quad_perm:[2,3,0,1]" in source
    assert "offset:swizzle(SWAP,8)" in source and "offset:swizzle(SWAP,4)" in source
    assert "v_div_fmas_f32" in source and "v_exp_f32" in source
