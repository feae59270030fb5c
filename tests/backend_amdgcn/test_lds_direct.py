"""Direct-to-LDS buffer loads (``buffer_load_dword ... lds``) and wave-uniform values in SGPRs.

* Selection: M0 gets the wavefront's LDS base (a wave-uniform value: ``v_readfirstlane_b32``
  then scalar code), lane ``l``'s dword lands at ``M0 + 4*l``; destinations that are not one
  dword per lane at consecutive addresses are refused at their source line.
* Waits: the load counts on ``vmcnt`` (LLVM is the oracle); ``s_waitcnt vmcnt(0)`` comes before
  the ``s_barrier`` that orders other waves' reads.
* The hazard checker catches each planted bug: the vmcnt wait removed, the barrier removed,
  the read moved above the barrier, the M0 wait state removed, M0 never written.
* Wave uniformity: ``t // 64`` lives in an SGPR, feeds scalar arithmetic and a scalar branch.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from amdgcn_kernels import lds_direct_bf16, lds_direct_f32, wave_uniform_ids

from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.hazards import _facts, check, parse
from argus.backend_amdgcn.isa import InstClass, inst_class
from argus.backend_amdgcn.isel import UnsupportedError
from argus.ir.interpreter import Interpreter
from argus.toolchain import find_amdgpu_tools

TOOLS = find_amdgpu_tools()
pytestmark = pytest.mark.skipif(TOOLS is None, reason="no LLVM with gfx942")
LLC = TOOLS.llvm_mc.parent / "llc" if TOOLS else None

_cache: dict = {}


def body(name: str, **consts) -> str:
    key = (name, tuple(sorted(consts.items())))
    if key not in _cache:
        kernel = {"f32": lds_direct_f32, "bf16": lds_direct_bf16, "wave": wave_uniform_ids}[name]
        emitted = emit(kernel.specialize(**consts))
        emitted.assemble()
        _cache[key] = emitted.source
    return _cache[key]


def instructions(text: str) -> list[str]:
    return [line.split(";")[0].strip() for line in text.splitlines() if line.startswith("  ") and
            not line.strip().startswith(".")]


def test_interpreter_reference_of_the_direct_load_kernel():
    x = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    out = Interpreter(lds_direct_f32.specialize()).run({"x": x, "y": np.zeros(512, np.float32)}, {"n": 512})
    assert np.array_equal(out["y"].reshape(2, 256), x.reshape(2, 256)[:, ::-1])


@pytest.mark.parametrize("name", ["f32", "bf16"])
def test_direct_load_sets_m0_to_the_wave_base(name):
    code = instructions(body(name))
    loads = [i for i, line in enumerate(code) if re.fullmatch(r"buffer_load_dword v\d+, s\[\d+:\d+\], 0 offen lds", line)]
    assert loads, "no direct-to-LDS load selected"
    for i in loads:
        m0 = max(j for j in range(i) if code[j].startswith("s_mov_b32 m0, "))
        assert i - m0 >= 2  # at least one wait state between the M0 write and the load
        source = code[m0].split(", ")[1]
        if source.startswith("s"):  # the wave base is scalar code on v_readfirstlane_b32 of the wave index
            assert any(line.startswith("v_readfirstlane_b32") for line in code[:m0])
    assert inst_class("buffer_load_dword", "offen lds") is InstClass.VMEM_LDS
    assert check(body(name)) == []


def test_vmcnt_wait_precedes_the_barrier_and_the_read():
    code = instructions(body("f32"))
    load = next(i for i, line in enumerate(code) if line.endswith(" lds"))
    barrier = code.index("s_barrier")
    read = next(i for i, line in enumerate(code) if line.startswith("ds_read"))
    assert load < barrier < read
    assert "s_waitcnt vmcnt(0)" in code[load + 1:barrier]


@pytest.mark.parametrize(("kernel", "consts"), [
    (lds_direct_f32, {"REVERSED": True}),  # lane l writes 4*(63 - l)
    (lds_direct_bf16, {"WIDTH": 4}),  # two dwords per thread: lane l writes 8*l and 8*l + 4
])
def test_layouts_the_instruction_cannot_write_are_refused(kernel, consts):
    with pytest.raises(UnsupportedError) as err:
        emit(kernel.specialize(**consts))
    assert "M0 + 4*l" in str(err.value) and "amdgcn_kernels.py:" in str(err.value) and err.value.hint


def _mutate(text: str, pattern: str, replacement: str = "") -> str:
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if re.match(pattern, line.strip())]
    assert hits, f"no line {pattern!r}"
    if replacement:
        lines[hits[0]] = "  " + replacement
    else:
        del lines[hits[0]]
    return "\n".join(lines)


def _move_read_above_barrier(text: str) -> str:
    lines = text.splitlines()
    barrier = next(i for i, line in enumerate(lines) if line.strip().startswith("s_barrier"))
    read = next(i for i, line in enumerate(lines) if line.strip().startswith("ds_read"))
    line = lines.pop(read)
    lines.insert(barrier, line)
    return "\n".join(lines)


@pytest.mark.parametrize(("plant", "kind"), [
    (lambda t: _mutate(t, r"s_waitcnt vmcnt\(0\)\s"), "barrier"),  # barrier with the DMA in flight
    (lambda t: _mutate(t, r"s_barrier"), "barrier"),  # read of another wave's dword, unordered
    (_move_read_above_barrier, "waitcnt"),  # read while this wave's DMA may be in flight
    (lambda t: _mutate(t, r"s_nop 0\s.*before buffer_load_dword"), "waitstates"),  # M0 wait state
    (lambda t: _mutate(t, r"s_mov_b32 m0"), "m0"),  # M0 never written
])
def test_planted_direct_load_bugs_are_caught(plant, kind):
    text = body("f32")
    assert check(text) == []
    assert kind in {h.kind for h in check(plant(text))}


LDS_DMA = """
target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.raw.buffer.load.lds(<4 x i32>, ptr addrspace(3), i32, i32, i32, i32, i32)
declare void @llvm.amdgcn.s.barrier()
@lds = internal addrspace(3) global [1024 x i32] undef, align 16

define amdgpu_kernel void @dma(ptr addrspace(1) noalias %c, <4 x i32> inreg %rsrc) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %w = lshr i32 %t, 6
  %wb = shl i32 %w, 8
  %base = getelementptr i8, ptr addrspace(3) @lds, i32 %wb
  %off = shl i32 %t, 2
  call void @llvm.amdgcn.raw.buffer.load.lds(<4 x i32> %rsrc, ptr addrspace(3) %base, i32 4, i32 %off, i32 0, i32 0, i32 0)
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %x = xor i32 %t, 1
  %l = getelementptr [1024 x i32], ptr addrspace(3) @lds, i32 0, i32 %x
  %v = load i32, ptr addrspace(3) %l
  %pc = getelementptr i32, ptr addrspace(1) %c, i32 %t
  store i32 %v, ptr addrspace(1) %pc
  ret void
}
"""


@pytest.mark.skipif(LLC is None or not LLC.is_file(), reason="llc (llvm-19) not installed")
def test_llvm_waits_on_vmcnt_for_the_direct_load(tmp_path):
    """LLVM: the LDS read of the DMA's destination waits on vmcnt (not lgkmcnt); M0 comes from
    v_readfirstlane of the wave base.  LLVM 19 puts that wait after the barrier, which orders
    only this wave's own DMA; argus waits before the barrier (another wave's DMA may write what
    this wave reads), and the checker reports LLVM's placement as a barrier hazard."""
    src = tmp_path / "dma.ll"
    src.write_text(LDS_DMA)
    out = subprocess.run([str(LLC), "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx942", "-O2", str(src), "-o", "-"],
                         capture_output=True, text=True, check=True).stdout
    code = [line.strip() for line in out.split("dma:")[1].split("s_endpgm")[0].splitlines()
            if line.startswith("\t") and not line.strip().startswith((".", ";"))]
    load = next(i for i, line in enumerate(code) if line.endswith(" lds"))
    read = next(i for i, line in enumerate(code) if line.startswith("ds_read"))
    waits = [line for line in code[load + 1:read] if line.startswith("s_waitcnt")]
    assert waits and all("vmcnt" in w for w in waits) and not any("lgkmcnt" in w for w in waits)
    assert any(line.startswith("s_mov_b32 m0") for line in code[:load])
    assert any(line.startswith("v_readfirstlane_b32") for line in code[:load])
    program = parse("\n".join(code))
    dma = next(i for i in program.items if not isinstance(i, tuple) and i.text.endswith(" lds"))
    assert _facts(dma).counter == "vm" and _facts(dma).lds_async_write
    assert inst_class(dma.mnemonic, dma.modifiers) is InstClass.VMEM_LDS
    kinds = {h.kind for h in check("\n".join(code))}
    assert "waitcnt" not in kinds and "barrier" in kinds


def test_wave_index_lives_in_an_sgpr():
    code = instructions(body("wave"))
    first = next(line for line in code if line.startswith("v_readfirstlane_b32"))
    wave = first.split()[1].rstrip(",")
    assert wave.startswith("s")
    # arithmetic on the wave index is scalar, and the branch on it is a scalar branch
    assert any(re.match(rf"s_(add|and|lshl)_\w+ s\d+, {wave}, ", line) for line in code)
    assert any(line.startswith("s_cbranch_scc") for line in code)
    assert not any(line.startswith(("s_and_saveexec_b64", "s_cbranch_execz")) for line in code)
    assert sum(line.startswith("v_readfirstlane_b32") for line in code) == 1


def test_wave_uniform_kernel_matches_interpreter_layout():
    x = np.arange(256, dtype=np.float32)
    out = Interpreter(wave_uniform_ids.specialize()).run({"x": x, "y": np.zeros(256, np.float32)})
    want = x.copy()
    for w in (0, 2):
        want[64 * w:64 * w + 64] = x[64 * ((w + 1) % 4):64 * ((w + 1) % 4) + 64]
    assert np.array_equal(out["y"], want)


def test_warp_uniform_is_not_wave_uniform():
    """``t // 32`` is uniform per NVIDIA warp, not per gfx942 wavefront."""
    from argus.ir.uniformity import analyze

    kernel = wave_uniform_ids.specialize()
    info = analyze(kernel)
    t = kernel.thread_id
    from argus import symbolic

    assert info.uniform_within(symbolic.FloorDiv(t, 64), 64)
    assert info.uniform_within(symbolic.FloorDiv(t, 128) * 3 + 1, 64)
    assert info.uniform_within(symbolic.FloorDiv(t, 32), 32)
    assert not info.uniform_within(symbolic.FloorDiv(t, 32), 64)
    assert not info.uniform_within(t, 64)
