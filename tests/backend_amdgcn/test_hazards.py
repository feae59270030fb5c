"""The hazard checker catches every planted emitter bug (and nothing in correct code).

==================================================  ============  ================================
planted bug                                          check         where
==================================================  ============  ================================
``s_waitcnt`` before an MFMA removed                 waitcnt       gemm_mfma (ds_read -> MFMA)
``s_waitcnt vmcnt(0)`` relaxed to ``vmcnt(1)``       waitcnt       vector_add (load -> add)
``s_waitcnt`` before ``s_barrier`` removed           barrier       transpose (LDS write in flight)
``s_barrier`` between ds_write and ds_read removed   barrier       transpose, gemm_mfma (RAW)
trailing loop ``s_barrier`` removed                  barrier       gemm_mfma (WAR across iterations)
two live values given one register                   overlap       row_softmax, gemm_mfma
``.amdhsa_accum_offset`` too small / not 4-aligned   descriptor    gemm_mfma
``s_nop`` after an MFMA removed                      waitstates    MFMA tile kernel (fp8 16x16)
==================================================  ============  ================================
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from amdgcn_kernels import FP8_16, mfma_tile

import argus.spec as A
from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.hazards import check
from argus.backend_amdgcn.isa import RegFile, render
from argus.backend_amdgcn.program import assembly
from argus.backend_amdgcn.regalloc import intervals
from argus.proofs.cli_verify import load_kernels

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_cache: dict[str, str] = {}


def source(name: str) -> str:
    if name not in _cache:
        (k,) = load_kernels(EXAMPLES / f"{name}.py")
        _cache[name] = emit(k.specialize()).source
    return _cache[name]


def drop(text: str, pattern: str, nth: int = 0) -> str:
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if re.match(pattern, line)]
    assert len(hits) > nth, f"no line {pattern!r}"
    del lines[hits[nth]]
    return "\n".join(lines)


def kinds(text: str) -> set[str]:
    return {h.kind for h in check(text)}


@pytest.mark.parametrize("name", ["vector_add", "row_softmax", "transpose_swizzled", "gemm_mfma"])
def test_emitted_examples_are_clean(name):
    assert check(source(name)) == []


def test_removed_wait_before_mfma():
    bad = drop(source("gemm_mfma"), r"\s*s_waitcnt lgkmcnt\(0\)\s*; @ before v_mfma")
    hazards = [h for h in check(bad) if h.kind == "waitcnt"]
    assert hazards and "v_mfma_f32_32x32x8_bf16" in hazards[0].instruction
    assert "may still be outstanding" in hazards[0].message


def test_relaxed_vmcnt():
    text = source("vector_add")
    bad = re.sub(r"s_waitcnt vmcnt\(0\)", "s_waitcnt vmcnt(1)", text, count=1)
    assert bad != text and "waitcnt" in kinds(bad)


def test_removed_wait_before_barrier():
    bad = drop(source("transpose_swizzled"), r"\s*s_waitcnt lgkmcnt\(0\)\s*; @ before s_barrier")
    hazards = [h for h in check(bad) if h.kind == "barrier"]
    assert hazards and "in flight" in hazards[0].message and hazards[0].instruction.startswith("s_barrier")


@pytest.mark.parametrize("name", ["transpose_swizzled", "gemm_mfma"])
def test_removed_barrier_before_lds_reads(name):
    bad = drop(source(name), r"\s*s_barrier")
    hazards = [h for h in check(bad) if h.kind == "barrier"]
    assert hazards and "LDS read after the LDS write" in hazards[0].message


def test_removed_trailing_barrier_of_the_loop():
    bad = drop(source("gemm_mfma"), r"\s*s_barrier", nth=1)
    hazards = [h for h in check(bad) if h.kind == "barrier"]
    assert hazards and "LDS write after the LDS read" in hazards[0].message


@pytest.mark.parametrize("name", ["row_softmax", "gemm_mfma"])
def test_two_live_values_in_one_register(name):
    (k,) = load_kernels(EXAMPLES / f"{name}.py")
    final = emit(k.specialize()).final
    ivs = intervals(final.items)
    assignment = dict(final.allocation.assignment)
    # two single-dword VGPR values live at the same time: give the later one the earlier's register
    singles = sorted((iv for iv in ivs.values() if iv.reg.file is RegFile.VGPR and iv.reg.size == 1
                      and iv.reg.fixed is None), key=lambda iv: iv.start)
    pair = next((a, b) for a in singles for b in singles
                if a.start < b.start < a.end and assignment[a.reg] != assignment[b.reg])
    assignment[pair[1].reg] = assignment[pair[0].reg]
    final.allocation.assignment = assignment
    bad = assembly([final])
    hazards = [h for h in check(bad) if h.kind == "overlap"]
    assert hazards and "two values live at once share this register" in hazards[0].message
    assert f"%{pair[0].reg.id}" in hazards[0].message or f"%{pair[1].reg.id}" in hazards[0].message


def test_wrong_accum_offset():
    text = source("gemm_mfma")
    offset = int(re.search(r"\.amdhsa_accum_offset (\d+)", text).group(1))
    low = text.replace(f".amdhsa_accum_offset {offset}", f".amdhsa_accum_offset {offset - 4}")
    odd = text.replace(f".amdhsa_accum_offset {offset}", f".amdhsa_accum_offset {offset + 2}")
    assert any("AGPRs start below it" in h.message for h in check(low))
    assert any("not a multiple of 4" in h.message for h in check(odd))
    assert any("exceed .amdhsa_next_free_vgpr" in h.message for h in check(odd))


def test_removed_mfma_wait_states():
    emitted = emit(mfma_tile(FP8_16, A.e4m3fnuz, 16, 16, 32).specialize())
    text = emitted.source
    assert re.search(r"s_nop \d+\s*; @ wait states before global_store", text)
    bad = drop(text, r"\s*s_nop \d+\s*; @ wait states before global_store")
    hazards = [h for h in check(bad) if h.kind == "waitstates"]
    assert hazards and "too early after the MFMA" in hazards[0].message


def test_render_without_annotations_skips_only_the_overlap_check():
    text = source("gemm_mfma")
    plain = re.sub(r";.*", "", text)
    assert check(plain) == []
    assert "barrier" in kinds(drop(plain, r"\s*s_barrier"))
    assert render  # the annotation renderer is the one under test above
