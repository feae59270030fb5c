"""MFMA forms (bf16, fp8) with AGPR or VGPR accumulators, FNUZ fp8 conversion, buffer loads with
their range in bytes, clear errors for what gfx942 cannot do, and the import-guarded launch."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from amdgcn_kernels import BF16_16, FP8_16, FP8_32, buffer_copy, mfma_tile, to_fp8

import argus.spec as A
from argus.backend_amdgcn.assemble import read_metadata
from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.isel import Policy, UnsupportedError
from argus.backend_amdgcn.launch import Gfx942Kernel, LaunchError
from argus.errors import ArgusError
from argus.ir import dtypes as D
from argus.ir import numerics
from argus.proofs.cli_verify import load_kernels
from argus.toolchain import find_amdgpu_tools

pytestmark = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def f32_hex(x: float) -> str:
    return hex(struct.unpack("<I", struct.pack("<f", x))[0])


@pytest.mark.parametrize(("atom", "in_type", "shape", "acc"), [
    (FP8_32, A.e4m3fnuz, (32, 32, 16), 16), (FP8_16, A.e4m3fnuz, (16, 16, 32), 4),
    (BF16_16, A.bf16, (16, 16, 16), 4)])
@pytest.mark.parametrize("accumulators", ["agpr", "vgpr"])
def test_mfma_forms_assemble(atom, in_type, shape, acc, accumulators):
    emitted = emit(mfma_tile(atom, in_type, *shape).specialize(), Policy(accumulators=accumulators))
    hsaco = emitted.assemble()
    assert emitted.hazards() == []
    file = "a" if accumulators == "agpr" else "v"
    assert re.search(rf"{atom} {file}\[\d+:\d+\], v\[\d+:\d+\], v\[\d+:\d+\], {file}\[\d+:\d+\]", emitted.source)
    entry = read_metadata(hsaco)["amdhsa.kernels"][0]
    assert entry[".agpr_count"] == (acc if accumulators == "agpr" else 0)


def test_fp8_is_fnuz_on_gfx942():
    e4, e5 = D.dtype("e4m3fnuz"), D.dtype("e5m2fnuz")
    assert (e4.amdgcn, e5.amdgcn) == ("fp8", "bf8")
    assert e4.max_finite == 240 and e5.max_finite == 57344 and e4.nan_bits == 0x80 == e5.nan_bits
    # no infinity: an overflow rounds to NaN (0x80); 0x80 decodes to NaN, -0 does not exist
    bits = numerics.to_bits(e4, np.array([1e6, -1e6, 248.0, 247.9, -0.0]))
    assert list(np.asarray(bits).reshape(-1)) == [0x80, 0x80, 0x80, numerics.to_bits(e4, np.array([240.0]))[0], 0]
    assert np.isnan(numerics.from_bits(e4, np.array([0x80]))[0])


@pytest.mark.parametrize("satfinite", [False, True])
def test_fp8_conversion_follows_fnuz(satfinite):
    source = emit(to_fp8.specialize(SAT=satfinite)).source
    assert "v_cvt_pk_fp8_f32" in source
    assert f32_hex(240.0) in source and f32_hex(-240.0) in source  # clamp (v_med3_f32) to ±max_finite
    assert "v_cmp_u_f32" in source and "0x80" in source  # NaN in -> NaN (0x80) out
    if satfinite:
        assert f32_hex(248.0) not in source
    else:  # |x| >= 248 (the rounding boundary above 240) becomes NaN 0x80
        assert f32_hex(248.0) in source


def test_buffer_load_range_is_in_bytes_and_masked_lanes_read_out_of_range():
    emitted = emit(buffer_copy.specialize())
    emitted.assemble()
    source = emitted.source
    assert re.search(r"buffer_load_dword(x\d)? v(\d+|\[\d+:\d+\]), v\d+, s\[\d+:\d+\], 0 offen", source)
    assert "0x20000" in source  # resource word 3: 32-bit data format, raw buffer
    assert "s_lshl_b64" in source and "s_cselect_b32" in source  # elements left -> bytes, clamped
    assert "0x80000000" in source  # the offset of a masked-off element: past any num_records
    assert emitted.hazards() == []


@pytest.mark.parametrize("name", ["vector_add", "row_softmax"])
def test_zero_filled_masked_loads_become_buffer_loads_by_policy(name):
    (k,) = load_kernels(EXAMPLES / f"{name}.py")
    exec_masked = emit(k.specialize()).source
    emitted = emit(k.specialize(), Policy(masked_loads="buffer"))
    emitted.assemble()
    assert emitted.hazards() == []
    source = emitted.source
    assert "global_load" in exec_masked and "global_load" not in source
    assert re.search(r"v_cndmask_b32_e64 v\d+, v\d+, v\d+, s\[\d+:\d+\]", source)  # offset or 0x80000000
    assert re.search(r"buffer_load_dword(x\d)? v(\d+|\[\d+:\d+\]), v\d+, s\[\d+:\d+\], 0 offen", source)
    assert source.count("s_and_saveexec_b64") < exec_masked.count("s_and_saveexec_b64")
    with pytest.raises(ArgusError, match="masked_loads"):
        Policy(masked_loads="dma")


@pytest.mark.parametrize(("name", "what"), [("gemm_tma_wgmma", "MbarrierInitStmt"), ("gemm_cp_async", "cp.async.16"),
                                            ("gemm_mma_sync", "mma.sync.m16n8k16.bf16")])
def test_nvidia_only_constructs_are_refused_with_their_source_line(name, what):
    (k,) = load_kernels(EXAMPLES / f"{name}.py")
    with pytest.raises(UnsupportedError) as err:
        emit(k.specialize())
    assert f"{name}.py:" in str(err.value) and what in str(err.value) and err.value.hint


def test_launch_without_rocm_says_what_is_missing():
    (k,) = load_kernels(EXAMPLES / "vector_add.py")
    ir = k.specialize()
    emitted = emit(ir)
    kernel = Gfx942Kernel(ir, None, emitted, b"")
    try:
        import hip  # noqa: F401
    except ImportError:
        with pytest.raises(LaunchError, match="hip-python"):
            kernel()
