"""LLVM as the oracle of counter classes and wait states: ``llc -mcpu=gfx942`` compiles small
LLVM-IR kernels; its s_waitcnt and s_nop placement is taken as correct.

* Every memory instruction LLVM emits is in the counter (vmcnt / lgkmcnt) that LLVM waits on
  before its result is used — in the emitter's table and in the hazard checker's.
* The hazard checker finds nothing in LLVM's code, and finds a hazard once any of LLVM's
  waits or MFMA ``s_nop`` is removed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from argus.backend_amdgcn.hazards import _facts, check, parse
from argus.backend_amdgcn.isa import inst_class
from argus.toolchain import find_amdgpu_tools

TOOLS = find_amdgpu_tools()
LLC = TOOLS.llvm_mc.parent / "llc" if TOOLS else None
pytestmark = pytest.mark.skipif(LLC is None or not LLC.is_file(), reason="llc (llvm-19) not installed")

MEMORY = """
target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)
declare i32 @llvm.amdgcn.ds.swizzle(i32, i32)
declare i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32>, i32, i32, i32)
@lds = internal addrspace(3) global [256 x i32] undef, align 16

define amdgpu_kernel void @memory(ptr addrspace(1) noalias %a, ptr addrspace(1) noalias %c,
                                  <4 x i32> inreg %rsrc, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %t
  %v = load i32, ptr addrspace(1) %pa
  %pa2 = getelementptr i32, ptr addrspace(1) %pa, i32 64
  %v2 = load <4 x i32>, ptr addrspace(1) %pa2
  %e = extractelement <4 x i32> %v2, i32 2
  %pc = getelementptr i32, ptr addrspace(1) %c, i32 %t
  store i32 %k, ptr addrspace(1) %pc
  %off = shl i32 %t, 2
  %bl = call i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  %l = getelementptr [256 x i32], ptr addrspace(3) @lds, i32 0, i32 %t
  store i32 %v, ptr addrspace(3) %l
  %l2 = getelementptr i32, ptr addrspace(3) %l, i32 64
  %w = load i32, ptr addrspace(3) %l2
  %b = call i32 @llvm.amdgcn.ds.bpermute(i32 %off, i32 %w)
  %s = call i32 @llvm.amdgcn.ds.swizzle(i32 %b, i32 31)
  %x1 = add i32 %s, %e
  %x2 = add i32 %x1, %bl
  %pc2 = getelementptr i32, ptr addrspace(1) %pc, i32 64
  store i32 %x2, ptr addrspace(1) %pc2
  ret void
}
"""

MFMA = """
target triple = "amdgcn-amd-amdhsa"
declare <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16>, <4 x i16>, <16 x float>, i32, i32, i32)
declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x16bf16.1k(<4 x i16>, <4 x i16>, <4 x float>, i32, i32, i32)
declare <16 x float> @llvm.amdgcn.mfma.f32.32x32x16.fp8.fp8(i64, i64, <16 x float>, i32, i32, i32)
declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8(i64, i64, <4 x float>, i32, i32, i32)
define amdgpu_kernel void @big(ptr addrspace(1) %c, <4 x i16> %x, <4 x i16> %y) {
  %acc = call <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16> %x, <4 x i16> %y, <16 x float> zeroinitializer, i32 0, i32 0, i32 0)
  %e = extractelement <16 x float> %acc, i32 3
  store float %e, ptr addrspace(1) %c
  ret void
}
define amdgpu_kernel void @small(ptr addrspace(1) %c, <4 x i16> %x, <4 x i16> %y) {
  %acc = call <4 x float> @llvm.amdgcn.mfma.f32.16x16x16bf16.1k(<4 x i16> %x, <4 x i16> %y, <4 x float> zeroinitializer, i32 0, i32 0, i32 0)
  %e = extractelement <4 x float> %acc, i32 3
  store float %e, ptr addrspace(1) %c
  ret void
}
define amdgpu_kernel void @big8(ptr addrspace(1) %c, i64 %x, i64 %y) {
  %acc = call <16 x float> @llvm.amdgcn.mfma.f32.32x32x16.fp8.fp8(i64 %x, i64 %y, <16 x float> zeroinitializer, i32 0, i32 0, i32 0)
  %e = extractelement <16 x float> %acc, i32 3
  store float %e, ptr addrspace(1) %c
  ret void
}
define amdgpu_kernel void @small8(ptr addrspace(1) %c, i64 %x, i64 %y) {
  %acc = call <4 x float> @llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8(i64 %x, i64 %y, <4 x float> zeroinitializer, i32 0, i32 0, i32 0)
  %e = extractelement <4 x float> %acc, i32 3
  store float %e, ptr addrspace(1) %c
  ret void
}
"""


def llc(ir: str, tmp: Path) -> dict[str, str]:
    """Assembly of each kernel of ``ir`` (instruction lines only)."""
    src = tmp / "k.ll"
    src.write_text(ir)
    out = subprocess.run([str(LLC), "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx942", "-O2", str(src), "-o", "-"],
                         capture_output=True, text=True, check=True).stdout
    kernels: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^(\w+):\s*(;.*)?$", line)
        if m:
            current = m.group(1)
            kernels[current] = []
            continue
        if current and line.startswith("\t") and not line.strip().startswith((".", ";")):
            kernels[current].append(line.strip())
        if line.strip().startswith("s_endpgm"):
            current = None
    return {k: "\n".join(v) for k, v in kernels.items()}


def test_memory_counters_agree_with_llvm(tmp_path):
    text = llc(MEMORY, tmp_path)["memory"]
    program = parse(text)
    insts = [i for i in program.items if not isinstance(i, tuple)]
    classes_seen = set()
    for n, inst in enumerate(insts):
        facts = _facts(inst)
        if not facts.memory_defs:
            continue
        # the s_waitcnt LLVM puts between this load and the first use of its result names the counter
        for later in insts[n + 1:]:
            if later.mnemonic == "s_waitcnt":
                counters = set(re.findall(r"(vmcnt|lgkmcnt)", " ".join(later.operands) + later.modifiers))
                if counters:
                    want = {"vm": "vmcnt", "lgkm": "lgkmcnt"}[facts.counter]
                    if want in counters:
                        break
                    continue
            if (_facts(later).uses | _facts(later).defs) & facts.memory_defs:
                pytest.fail(f"{inst.text}: used at {later.text} with no wait on its counter")
        emitter = inst_class(inst.mnemonic, inst.modifiers)
        assert emitter.counter is not None and emitter.counter.value.startswith(facts.counter), inst.text
        classes_seen.add(emitter.value)
    assert {"smem", "vmem.load", "ds.read", "ds.crosslane"} <= classes_seen


def test_checker_accepts_llvm_code_and_catches_each_removed_wait(tmp_path):
    text = llc(MEMORY, tmp_path)["memory"]
    assert [h for h in check(text) if h.kind == "waitcnt"] == []
    lines = text.splitlines()
    waits = [i for i, line in enumerate(lines) if line.startswith("s_waitcnt")]
    assert len(waits) >= 4
    for i in waits:
        mutated = "\n".join(lines[:i] + lines[i + 1:])
        assert [h for h in check(mutated) if h.kind == "waitcnt"], f"removing {lines[i]!r} went unnoticed"


@pytest.mark.parametrize(("kernel", "states"), [("big", 11), ("small", 7), ("big8", 11), ("small8", 7)])
def test_mfma_wait_states_agree_with_llvm(tmp_path, kernel, states):
    text = llc(MFMA, tmp_path)[kernel]
    nops = sum(int(n) + 1 for n in re.findall(r"s_nop (\d+)", text.split("v_mfma")[1]))
    assert nops == states  # LLVM: passes + 3; the emitter's and the checker's tables say the same
    assert [h for h in check(text) if h.kind == "waitstates"] == []
    stripped = re.sub(r"(?m)^s_nop \d+\n", "", text.split("v_mfma")[0]) + "v_mfma" + \
        re.sub(r"(?m)^s_nop \d+\n", "", text.split("v_mfma")[1])
    assert [h for h in check(stripped) if h.kind == "waitstates"]
