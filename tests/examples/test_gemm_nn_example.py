"""The Hopper GEMM example with B row-major (``C = A · B``, B read MN-major by wgmma) against
numpy on fresh random inputs, and what its B operand lowers to."""

import gemm_tma_wgmma_nn  # examples/ is on the path (tests/examples/conftest.py)
import numpy as np
import pytest
from example_inputs_support import bf16_gemm_inputs

from argus.ir import check, numerics
from argus.ir import lowering as L
from argus.ir.interpreter import Interpreter
from argus.layout_algebra.hopper import Major

KERNEL = gemm_tma_wgmma_nn.gemm_tma_wgmma_nn


# trip counts K / 64 = 1, 2, 4 against 2 or 3 stages; M and N not multiples of the tile; BN of
# one, two and four 64-column boxes
@pytest.mark.parametrize("shape, consts", [((100, 136, 128), {}), ((64, 64, 64), {"BN": 64}),
                                           ((70, 200, 256), {"STAGES": 2}), ((64, 256, 128), {"BN": 256})])
def test_row_major_b_gemm_matches_numpy(shape, consts):
    m, n, k = shape
    inputs = bf16_gemm_inputs(m + n + k, m, n, k)
    inputs["b"] = np.ascontiguousarray(inputs["b"].T)  # K x N, N contiguous
    kernel = KERNEL.specialize(**consts)
    check.check(kernel)
    out = Interpreter(kernel).run(inputs, {"M": m, "N": n, "K": k})["c"]
    a, b = inputs["a"], inputs["b"]
    np.testing.assert_array_equal(out, numerics.mma(a, b, None, a_dtype="bf16"))  # k-blocks in order
    reference = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b))


@pytest.mark.parametrize("bn", [64, 128, 256])
def test_b_lowers_to_an_mn_major_descriptor_over_its_boxes(bn):
    lowered = L.lower_kernel(KERNEL.specialize(BN=bn))
    mmas = [s for s in lowered.walk() if isinstance(s, L.MmaStmt)]
    assert mmas and all(s.a.descriptor.major is Major.K and s.b.descriptor.major is Major.MN for s in mmas)
    for s in mmas:
        # LBO: from one 64-column box to the next (64 K-rows of 128 bytes); SBO: 8 K-rows
        assert s.b.descriptor.stride_byte_offset == 1024
        assert bn == 64 or s.b.descriptor.leading_byte_offset == 64 * 128
    boxes = [s for s in lowered.walk() if isinstance(s, L.TensorCopy) and s.load]
    assert {lowered.tensor_maps[s.tensor_map].box for s in boxes} == {(64, 64)}  # A's box and B's: 64 x 64
    assert sum(1 for s in boxes if lowered.tensor_maps[s.tensor_map].param == "b") == (bn // 64) * 3  # per stage
