"""The gfx942 GEMM twin and the direct-to-LDS / wave-uniform test kernels run in the gfx942
emulator (the linked code object, instruction by instruction) against the reference
interpreter, on fresh random inputs (never zero): MFMA results within the MMA tolerance,
everything else bit for bit, and no hazard finding.

Only ``CONFIGS[0]`` of the twin is proved so far (tests/proofs/test_gemm_gfx942_proof.py): the
kernels are emitted through the ungated ``emit`` path (as the other backend tests do).
"""

from __future__ import annotations

import numpy as np
import pytest
from amdgcn_kernels import lds_direct_bf16, lds_direct_f32, wave_uniform_ids

from argus.ir import numerics
from argus.ir.interpreter import Interpreter
from argus.kernels.gemm_gfx942 import CONFIGS, gemm_gfx942
from argus.toolchain import find_amdgpu_tools

pytestmark = pytest.mark.skipif(find_amdgpu_tools() is None, reason="no LLVM with gfx942 (apt-get install llvm-19 lld-19)")
emulate_run = pytest.importorskip("argus.backend_amdgcn.emulate_run", reason="the gfx942 emulator is not there")


def run_both(ir, sizes, seed):
    inputs = emulate_run.random_inputs(ir, sizes, np.random.default_rng(seed))
    for name, values in inputs.items():
        assert np.all(values != 0), f"{name}: inputs are never zero"
    got, emulation = emulate_run.emulate_kernel(ir, {k: v.copy() for k, v in inputs.items()}, sizes)
    ref = Interpreter(ir).run({k: v.copy() for k, v in inputs.items()}, sizes)
    return inputs, got, ref, emulation


def check_gemm(config: dict, direct: bool, tiles: tuple[int, int, int], seed: int) -> None:
    ir = gemm_gfx942(DIRECT=direct, **config).specialize()
    mt, nt, kt = tiles
    inputs, got, ref, emulation = run_both(ir, {"MT": mt, "NT": nt, "KT": kt}, seed)
    assert emulation.findings == []
    assert emulation.workgroups == mt * nt
    m, n, k = mt * config["BM"], nt * config["BN"], kt * config["BK"]
    for name in ("a", "b"):
        assert emulate_run.compare(name, ref[name], got[name]).exact
    a, b = inputs["a"].reshape(m, k), inputs["b"].reshape(n, k)
    bound = numerics.mma_tolerance(a, b.T, acc_dtype="f32")
    diff = np.abs(got["c"].reshape(m, n) - ref["c"].reshape(m, n))
    assert np.all(diff <= bound), float(diff.max())


@pytest.mark.parametrize(("direct", "tiles"), [(True, (2, 1, 3)), (False, (1, 2, 3))])
def test_gemm_matches_the_interpreter(direct, tiles):
    check_gemm(CONFIGS[0], direct, tiles, seed=21)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS[1:])
@pytest.mark.parametrize("direct", [True, False])
def test_gemm_with_larger_tiles_matches_the_interpreter(config, direct):
    check_gemm(config, direct, (1, 1, 3), seed=22)


@pytest.mark.parametrize(("kernel", "sizes"), [(lds_direct_f32, {"n": 512}), (lds_direct_bf16, {}),
                                               (wave_uniform_ids, {})])
def test_direct_loads_and_wave_uniform_values_match_bit_for_bit(kernel, sizes):
    ir = kernel.specialize()
    _, got, ref, emulation = run_both(ir, sizes, seed=23)
    assert emulation.findings == []
    for name in ref:
        assert emulate_run.compare(name, ref[name], got[name]).exact, name


@pytest.mark.parametrize(("name", "sizes"), [("vector_add", {"n": 1000}), ("row_softmax", {"R": 20})])
def test_masked_loads_as_buffer_loads_match_the_interpreter(name, sizes):
    """Policy masked_loads="buffer": partial-tile loads read 0 out of range instead of running
    under an exec mask after a zero fill; the last block is partial in both kernels."""
    from pathlib import Path

    from argus.backend_amdgcn.isel import Policy
    from argus.proofs.cli_verify import load_kernels

    (k,) = load_kernels(Path(__file__).resolve().parents[2] / "examples" / f"{name}.py")
    ir = k.specialize()
    inputs = emulate_run.random_inputs(ir, sizes, np.random.default_rng(24))
    got, emulation = emulate_run.emulate_kernel(ir, {n: v.copy() for n, v in inputs.items()}, sizes,
                                                policy=Policy(masked_loads="buffer"))
    ref = Interpreter(ir).run({n: v.copy() for n, v in inputs.items()}, sizes)
    assert emulation.findings == []
    for tensor in ref:
        result = emulate_run.compare(tensor, ref[tensor], got[tensor], rtol=1e-5)
        assert result.ok, result.line()
