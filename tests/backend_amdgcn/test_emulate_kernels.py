"""The gfx942 emulator on the backend's test kernels (fp8/bf16 MFMA tiles, FNUZ conversion,
buffer loads with out-of-range lanes, direct-to-LDS loads, wave-uniform values) against the
reference interpreter on fresh random inputs, and the code-object-level ``emulate`` entry.
These kernels are emitted through the ungated ``emit`` path (backend tests, not proved)."""

from __future__ import annotations

from pathlib import Path

import amdgcn_kernels as K
import numpy as np
import pytest

import argus.spec as A
from argus.backend_amdgcn.compile import emit
from argus.backend_amdgcn.emulate_run import compare, emulate_kernel, random_inputs
from argus.ir import numerics
from argus.ir.interpreter import Interpreter
from argus.proofs.cli_verify import load_kernels
from argus.toolchain import find_amdgpu_tools

pytestmark = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942 (apt-get install llvm-19 lld-19)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str, **consts):
    (k,) = load_kernels(EXAMPLES / f"{name}.py")
    return k.specialize(**consts)


def run_both(ir, sizes, seed):
    inputs = random_inputs(ir, sizes, np.random.default_rng(seed))
    for name, values in inputs.items():
        assert np.all(values != 0), f"{name}: inputs are never zero"
    got, emulation = emulate_kernel(ir, {k: v.copy() for k, v in inputs.items()}, sizes)
    ref = Interpreter(ir).run({k: v.copy() for k, v in inputs.items()}, sizes)
    return inputs, got, ref, emulation


def test_emulate_takes_a_code_object_numpy_buffers_and_a_grid():
    """The low-level entry: the metadata's argument order, buffers written back in place."""
    from argus.backend_amdgcn.emulate import emulate

    ir = example("vector_add")
    hsaco = emit(ir).assemble()
    rng = np.random.default_rng(19)
    n = 300
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    emulation = emulate(hsaco, "vector_add", [a, b, c, n], grid=(3,))
    assert emulation.findings == [] and emulation.workgroups == 3
    assert np.array_equal(c, a + b)
    assert emulation.writer("c", 299).startswith("workgroup (2, 0, 0) wave 0 lane 43:")


@pytest.mark.parametrize("atom, dtype, shape", [
    ("v_mfma_f32_32x32x8_bf16", A.bf16, (32, 32, 8)),
    ("v_mfma_f32_16x16x16_bf16", A.bf16, (16, 16, 16)),
    ("v_mfma_f32_32x32x16_fp8_fp8", A.e4m3fnuz, (32, 32, 16)),
    ("v_mfma_f32_16x16x32_fp8_fp8", A.e4m3fnuz, (16, 16, 32)),
])
def test_single_mfma_tiles(atom, dtype, shape):
    m, n, k = shape
    ir = K.mfma_tile(atom, dtype, m, n, k).specialize()
    inputs, got, ref, emulation = run_both(ir, {}, seed=15)
    assert emulation.findings == []
    a, b = inputs["a"].reshape(m, k), inputs["b"].reshape(n, k)
    bound = numerics.mma_tolerance(a, b.T, acc_dtype="f32", in_dtype=str(dtype.name)).reshape(-1)
    assert np.all(np.abs(got["c"] - ref["c"]) <= bound)
    # a wrong lane layout would put products in the wrong places: far outside the bound
    assert np.all(np.abs(got["c"].reshape(m, n) - a @ b.T) <= bound.reshape(m, n))


@pytest.mark.parametrize("sat", [False, True])
def test_fnuz_conversion_is_exact_including_overflow_and_nan(sat):
    ir = K.to_fp8.specialize(SAT=sat)
    n = 130
    inputs = random_inputs(ir, {"n": n}, np.random.default_rng(16))
    x = inputs["x"] * 80.0  # many magnitudes beyond 240 (e4m3fnuz max finite)
    x[:4] = [np.nan, 247.0, 248.0, -1e9]
    inputs["x"] = x
    got, emulation = emulate_kernel(ir, {k: v.copy() for k, v in inputs.items()}, {"n": n})
    ref = Interpreter(ir).run({k: v.copy() for k, v in inputs.items()}, {"n": n})
    assert emulation.findings == []
    assert compare("y", ref["y"], got["y"]).exact


def test_buffer_loads_out_of_range_read_zero():
    ir = K.buffer_copy.specialize()
    n = 1000  # not a multiple of 256: the last block's tail is outside the buffer resource
    _, got, ref, emulation = run_both(ir, {"n": n}, seed=17)
    assert emulation.findings == []
    assert compare("y", ref["y"], got["y"]).exact


@pytest.mark.parametrize("kernel, sizes", [
    ("lds_direct_f32", {"n": 768}),  # direct-to-LDS buffer loads, M0 = the wave's LDS base
    ("lds_direct_bf16", {}),
    ("wave_uniform_ids", {}),  # wave-uniform values through v_readfirstlane and scalar branches
])
def test_direct_lds_loads_and_wave_uniform_values(kernel, sizes):
    ir = getattr(K, kernel).specialize()
    _, got, ref, emulation = run_both(ir, sizes, seed=18)
    assert emulation.findings == []
    for tensor in ref:
        assert compare(tensor, ref[tensor], got[tensor]).exact, tensor
