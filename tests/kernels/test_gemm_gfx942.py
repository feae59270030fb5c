"""The gfx942 GEMM twin (argus.kernels.gemm_gfx942).

* Reference interpreter at small shapes against numpy (float64 product of the bf16-rounded
  inputs, within the MMA tolerance); the kernel's tag assertions (stage contents, accumulator
  -> C mapping) and the MMA's k-pairing check run on every call.
* Backend: emits, assembles and links for gfx942 through the ungated ``emit`` path (only
  ``CONFIGS[0]`` is proved so far, tests/proofs/test_gemm_gfx942_proof.py); ``llvm-readobj --notes`` metadata and the kernel
  descriptor state the arguments, register counts and LDS; ``llvm-objdump`` gives back the
  emitted instructions; the hazard checker finds nothing.
* Structure of the emitted loop: direct-to-LDS loads (or buffer loads + ``ds_write_b128``),
  one ``s_barrier`` per k-block, no ``vmcnt`` wait between the prefetch and the MFMAs.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from argus.backend_amdgcn.assemble import disassemble, read_descriptor, read_metadata
from argus.backend_amdgcn.cfg import branch_target
from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.hazards import check
from argus.backend_amdgcn.isa import Label, RegFile, render_inst
from argus.ir import numerics
from argus.kernels.gemm_gfx942 import CONFIGS, GemmError, gemm_gfx942, run_reference
from argus.toolchain import find_amdgpu_tools

needs_llvm = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942 (apt-get install llvm-19 lld-19)")


def bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float64)


def check_against_numpy(config: dict, m: int, n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    c = run_reference(a, b, config)
    want = bf16(a) @ bf16(b).T
    bound = numerics.mma_tolerance(bf16(a), bf16(b).T, acc_dtype="f32")
    assert c.shape == (m, n)
    assert np.all(np.abs(c - want) <= bound), float(np.max(np.abs(c - want)))
    assert np.max(np.abs(c - want)) < 1e-3 * np.max(np.abs(want))


@pytest.mark.parametrize(("direct", "shape"), [(True, (128, 64, 96)), (False, (64, 128, 64))])
def test_interpreter_matches_numpy(direct, shape):
    check_against_numpy({"DIRECT": direct}, *shape, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS[1:])
@pytest.mark.parametrize("direct", [True, False])
def test_interpreter_matches_numpy_for_larger_tiles(config, direct):
    m, n, k = config["BM"], config["BN"], 3 * config["BK"]  # odd KT: the last step has no prefetch
    check_against_numpy(dict(config, DIRECT=direct), m, n, k, seed=2)


@pytest.mark.parametrize(("config", "what"), [({"BM": 96}, "multiples of 64"), ({"BK": 12}, "multiple of 8"),
                                              ({"BK": 8, "DIRECT": False}, "multiples of 2048")])
def test_configurations_the_kernel_cannot_build_are_refused(config, what):
    gemm_gfx942.cache_clear()
    with pytest.raises(GemmError) as err:
        gemm_gfx942(**config)
    assert what in err.value.hint


def test_shapes_that_are_not_whole_tiles_are_refused():
    with pytest.raises(GemmError, match="multiples"):
        run_reference(np.ones((64, 40)), np.ones((64, 40)))


_built: dict = {}


def built(config: dict, direct: bool):
    key = (tuple(sorted(config.items())), direct)
    if key not in _built:
        ir = gemm_gfx942(DIRECT=direct, **config).specialize()
        emitted = emit(ir)
        _built[key] = (ir, emitted, emitted.assemble())
    return _built[key]


def acceptance(config: dict, direct: bool) -> None:
    ir, emitted, hsaco = built(config, direct)
    tm, tn = config["BM"] // 64, config["BN"] // 64
    assert emitted.hazards() == []
    # metadata: arguments, registers, LDS
    (entry,) = read_metadata(hsaco)["amdhsa.kernels"]
    args = [(x[".name"], x[".value_kind"], x[".size"]) for x in entry[".args"]]
    assert args == [("a", "global_buffer", 8), ("b", "global_buffer", 8), ("c", "global_buffer", 8),
                    ("MT", "by_value", 4), ("KT", "by_value", 4), ("NT", "by_value", 4)]
    final = emitted.final
    agprs = final.allocation.count(RegFile.AGPR)
    assert agprs == entry[".agpr_count"] == 16 * tm * tn  # one 32x32 accumulator per MFMA tile
    assert entry[".vgpr_count"] == final.allocation.accum_offset + agprs
    assert entry[".sgpr_count"] >= final.allocation.count(RegFile.SGPR)
    assert entry[".group_segment_fixed_size"] == 2 * (config["BM"] + config["BN"]) * config["BK"] * 2
    assert entry[".max_flat_workgroup_size"] == 256
    kd = read_descriptor(hsaco, ir.name)
    assert kd.group_segment_fixed_size == entry[".group_segment_fixed_size"]
    assert kd.accum_offset == final.allocation.accum_offset
    # disassembly round trip
    insts, labels = [], {}
    for item in final.items:
        if isinstance(item, Label):
            labels[item.name] = len(insts)
        else:
            insts.append(item)
    listing = disassemble(hsaco, ir.name)[:len(insts)]
    index = {d.offset: i for i, d in enumerate(listing)}
    assert len(listing) == len(insts)

    def canonical(text: str) -> str:
        return re.sub(r"\s+", " ", re.sub(r"_e(32|64)\b", "", text)).strip()

    for mine, back in zip(insts, listing):
        target = branch_target(mine)
        if target is not None:
            assert back.text.split()[0] == mine.opcode and index[back.target] == labels[target]
        else:
            assert canonical(render_inst(mine, final.allocation.assignment)) == canonical(back.text)


@needs_llvm
@pytest.mark.parametrize("direct", [True, False])
def test_default_configuration_emits_assembles_and_round_trips(direct):
    acceptance(CONFIGS[0], direct)


@needs_llvm
@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS[1:])
@pytest.mark.parametrize("direct", [True, False])
def test_larger_tiles_emit_assemble_and_round_trip(config, direct):
    acceptance(config, direct)


def loop_body(source: str) -> list[str]:
    body = re.split(r"\.Lgemm_gfx942_\w+_loop1:", source)[1]
    body = re.split(r"\.Lgemm_gfx942_\w+_loop_end", body)[0]
    return [line.split(";")[0].strip() for line in body.splitlines() if line.startswith("  ")]


@needs_llvm
def test_direct_staging_overlaps_the_prefetch_with_the_mfmas():
    _, emitted, _ = built(CONFIGS[0], True)
    code = loop_body(emitted.source)
    assert sum(line == "s_barrier" for line in code) == 2  # one per k-block, two k-blocks per trip
    assert not any(line.startswith(("ds_write", "buffer_load_dwordx")) for line in code)  # no VGPR staging
    for half in "\n".join(code).split("s_barrier")[1:]:
        lines = half.splitlines()
        dma = [i for i, line in enumerate(lines) if re.fullmatch(r"buffer_load_dword v\d+, s\[\d+:\d+\], 0 offen lds", line)]
        mfma = [i for i, line in enumerate(lines) if line.startswith("v_mfma_f32_32x32x8_bf16 a[")]
        assert len(mfma) == 4  # BK / 8 k-steps of one 32x32 tile
        if dma:  # the prefetch of the next k-block: 8 dwords per thread, none waited for before the MFMAs
            assert len(dma) == 8 and max(dma) < min(mfma)
            assert not any("vmcnt" in line for line in lines[min(dma):max(mfma)])
    # the wave index (t // 64) is computed once and kept in an SGPR
    assert re.search(r"v_readfirstlane_b32 s\d+, v\d+", emitted.source)


@needs_llvm
def test_register_staging_writes_lds_with_b128_after_the_mfmas():
    _, emitted, _ = built(CONFIGS[0], False)
    code = loop_body(emitted.source)
    assert not any(line.endswith(" lds") for line in code)
    text = "\n".join(code)
    assert re.search(r"buffer_load_dwordx4 v\[\d+:\d+\], v\d+, s\[\d+:\d+\], 0 offen", text)
    assert re.search(r"ds_write_b128 v\d+, v\[\d+:\d+\]", text)
    load = min(i for i, line in enumerate(code) if line.startswith("buffer_load_dwordx4"))
    write = min(i for i, line in enumerate(code) if line.startswith("ds_write_b128") and i > load)
    # the prefetch's loads are in flight during the k-block's MFMAs; their LDS writes follow them
    mfmas = [i for i in range(load, write) if code[i].startswith("v_mfma")]
    assert len(mfmas) == 4
    assert not any("vmcnt" in line for line in code[load:mfmas[-1]])


def _without(text: str, pattern: str, nth: int = 0) -> str:
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if re.match(pattern, line.strip())]
    assert len(hits) > nth, pattern
    del lines[hits[nth]]
    return "\n".join(lines)


@needs_llvm
@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize(("plant", "kind"), [
    (r"s_barrier", "barrier"),  # the loop's first barrier: a stage is read while it is refilled
    (r"s_waitcnt .*; @ before s_barrier", "barrier"),  # LDS writes (direct loads / ds_write) in flight
])
def test_planted_pipeline_bugs_are_caught(direct, plant, kind):
    _, emitted, _ = built(CONFIGS[0], direct)
    assert emitted.hazards() == []
    head = re.split(r"\.Lgemm_gfx942_\w+_loop1:", emitted.source)[0]  # plant inside the main loop
    mutated = head + _without(emitted.source[len(head):], plant)
    assert kind in {h.kind for h in check(mutated)}
