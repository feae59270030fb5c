"""``argus.kernels.matmul``: which kernel variant and extents a call takes (from shapes, strides,
dtypes and addresses, on stand-in tensors: no GPU), the arguments it refuses, that every default
pick passes the gate from a proof record, what ``autotune=True`` may time, and that the staged
(zero-padded) operands give the product of the original ones in the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from argus.ir import numerics
from argus.ir.interpreter import Interpreter
from argus.kernels.gemm import BM, CANDIDATES, GemmError, tuned_config
from argus.kernels.matmul import PROVED_SMS, autotune_candidates, plan_matmul


class _Dtype:
    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


class _T:
    """Shape, strides (in elements), dtype and address: what the plan reads of a torch tensor."""

    def __init__(self, shape, stride=None, dtype="bfloat16", ptr=1 << 20):
        self.shape = tuple(shape)
        if stride is None:
            stride, step = [], 1
            for size in reversed(self.shape):
                stride.insert(0, step)
                step *= size
        self._stride, self.dtype, self._ptr = tuple(stride), _Dtype(dtype), ptr

    def stride(self):
        return self._stride

    def data_ptr(self):
        return self._ptr

    def t(self):
        return _T(self.shape[::-1], self._stride[::-1], self.dtype.name, self._ptr)


def _plan(a, b, **kw):
    p = plan_matmul(a, b, **kw)
    return p.a_major, p.b_major, p.staged, p.k_kernel, p.n_kernel


def test_row_major_operands_are_read_in_place():
    assert _plan(_T((256, 512)), _T((512, 384))) == ("k", "n", False, 512, 384)


def test_transposed_views_are_read_mn_major_in_place():
    a_t = _T((512, 256)).t()  # M x K, columns dense: A stored K x M
    b_t = _T((384, 512)).t()  # K x N, columns dense: B stored N x K
    assert _plan(a_t, _T((512, 384))) == ("m", "n", False, 512, 384)
    assert _plan(_T((256, 512)), b_t) == ("k", "k", False, 512, 384)
    assert _plan(a_t, b_t) == ("m", "k", False, 512, 384)


def test_a_k_that_is_no_multiple_of_8_stays_in_place_only_where_no_operand_is_k_major():
    # A stored K x M and B stored K x N: row pitches M and N, K free
    assert _plan(_T((13, 64)).t(), _T((13, 72))) == ("m", "n", False, 13, 72)
    # A row-major: its pitch K = 13 is no multiple of 8 (26 bytes): staged, K padded to 16
    assert _plan(_T((64, 13)), _T((13, 72))) == ("k", "k", True, 16, 72)


@pytest.mark.parametrize("why, a, b", [
    ("N not a multiple of 8", _T((64, 64)), _T((64, 36))),
    ("a strided slice", _T((64, 64), stride=(128, 1)), _T((64, 64))),
    ("neither rows nor columns dense", _T((64, 64), stride=(2, 128)), _T((64, 64))),
    ("a base address off 16 bytes", _T((64, 64), ptr=(1 << 20) + 2), _T((64, 64))),
])
def test_what_the_kernel_cannot_read_in_place_is_staged(why, a, b):
    p = plan_matmul(a, b)
    assert p.staged and (p.a_major, p.b_major) == ("k", "k"), why
    assert p.k_kernel % 8 == 0 and p.n_kernel % 8 == 0 and p.n_kernel >= p.n


def test_types_epilogue_and_out():
    p = plan_matmul(_T((64, 64), dtype="float16"), _T((64, 64), dtype="float16").t(),
                    bias=_T((64,), dtype="float32"), activation="relu")
    assert (p.in_dtype, p.out_dtype, p.bias, p.activation) == ("f16", "f16", True, "relu")
    assert p.kernel().name == "gemm_f16_f16_bias_relu"
    p = plan_matmul(_T((64, 64)), _T((64, 64)), out=_T((64, 64), dtype="float32"))
    assert p.out_dtype == "f32" and p.kernel().name == "gemm_bf16_f32_kn"


@pytest.mark.parametrize("a, b, kw, message", [
    (_T((4, 64, 64)), _T((64, 64)), {}, "must be 2-D"),
    (_T((64, 32)), _T((64, 64)), {}, "inner dimensions differ"),
    (_T((64, 64)), _T((64, 64), dtype="float16"), {}, "torch.bfloat16 and B is torch.float16"),
    (_T((64, 64), dtype="float32"), _T((64, 64), dtype="float32"), {}, "A is torch.float32"),
    (_T((64, 64), dtype="float64"), _T((64, 64)), {}, "dtype torch.float64"),
    (_T((64, 64)), _T((64, 64)), {"activation": "gelu"}, "activation 'gelu'"),
    (_T((64, 64)), _T((64, 64)), {"bias": _T((32,))}, "vector of N = 64"),
    (_T((64, 64)), _T((64, 64)), {"out": _T((64, 32))}, "dense row-major 64 x 64"),
    (_T((64, 64)), _T((64, 64)), {"out": _T((64, 64), stride=(1, 64))}, "dense row-major"),
    (_T((64, 64)), _T((64, 64)), {"out": _T((64, 64), dtype="float16"), "out_dtype": "bf16"}, "out has dtype"),
    (_T((64, 64)), _T((64, 64)), {"out_dtype": "f64"}, "out_dtype 'f64'"),
])
def test_refused_arguments_get_a_clear_error(a, b, kw, message):
    with pytest.raises(GemmError, match=message):
        plan_matmul(a, b, **kw)


# the variants whose records are in proofs/ (the benchmark's variants), and their default picks
RECORDED = [
    ({}, (_T((64, 64)), _T((64, 64)).t())),  # A and B K-major: gemm_bf16_bf16
    ({}, (_T((64, 64)), _T((64, 64)))),  # B stored K x N: _kn
    ({}, (_T((64, 64)).t(), _T((64, 64)).t())),  # A stored K x M: _mk
    ({}, (_T((64, 64)).t(), _T((64, 64)))),  # both: _mn
    ({}, (_T((64, 64), dtype="float16"), _T((64, 64), dtype="float16").t())),
    ({"out_dtype": "f32"}, (_T((64, 64)), _T((64, 64)).t())),
    ({"bias": _T((64,), dtype="float32"), "activation": "relu"}, (_T((64, 64)), _T((64, 64)).t())),
]


@pytest.mark.parametrize("kw, operands", RECORDED)
@pytest.mark.parametrize("m, n, k", [(4096, 4096, 4096), (BM, 14336, 4096), (5000, 3000, 7000)])
def test_every_default_pick_passes_the_gate_from_its_record(kw, operands, m, n, k):
    from argus.runtime import require_proof

    plan = plan_matmul(*operands, **kw)
    config = tuned_config(m, n, k)
    require_proof(plan.kernel().specialize(**config.consts(), SMS=PROVED_SMS), verify=False)


def test_autotune_times_the_candidates_with_records():
    main = plan_matmul(_T((64, 64)), _T((64, 64)).t())
    got = {(CANDIDATES.index(c), sms) for c, sms in autotune_candidates(main)}
    assert got == {(i, 132) for i in range(len(CANDIDATES))} | {(1, 128), (3, 128)}
    # a fused epilogue cannot defer its last boxes (CANDIDATES[3]); the others with records
    fused = plan_matmul(_T((64, 64)), _T((64, 64)).t(), bias=_T((64,), dtype="float32"), activation="relu")
    assert {(CANDIDATES.index(c), sms) for c, sms in autotune_candidates(fused)} == {(1, 132), (1, 128), (4, 132)}


@pytest.mark.parametrize("m, n, k", [(70, 36, 20), (65, 72, 9)])
def test_staged_operands_give_the_product_of_the_originals(m, n, k):
    """The plan's padded extents satisfy the kernel's assumptions, and the zero padding leaves
    the first n columns of C equal to A·B (run in the reference interpreter)."""
    rng = np.random.default_rng(m * n + k)
    a = numerics.round_to("bf16", rng.standard_normal((m, k))).astype(np.float32)
    b = numerics.round_to("bf16", rng.standard_normal((k, n))).astype(np.float32)
    plan = plan_matmul(_T((m, k)), _T((k, n)), out_dtype="f32")
    assert plan.staged
    a_pad = np.zeros((m, plan.k_kernel), np.float32)
    a_pad[:, :k] = a
    b_pad = np.zeros((plan.n_kernel, plan.k_kernel), np.float32)
    b_pad[:n, :k] = b.T
    kernel = plan.kernel().specialize(BN=64, STAGES=2, SMS=2)
    c = np.full((m, plan.n_kernel), np.nan, np.float32)
    sizes = {"M": m, "N": plan.n_kernel, "K": plan.k_kernel}
    out = Interpreter(kernel).run({"a": a_pad, "b": b_pad, "c": c}, sizes)["c"][:, :n]
    reference = a.astype(np.float64) @ b.astype(np.float64)
    assert not np.isnan(out).any()
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b))


def test_linear_refuses_a_weight_that_is_no_matrix_and_a_k_that_differs():
    from argus.kernels.matmul import linear

    with pytest.raises(GemmError, match="weight must be N x K"):
        linear(_T((8, 64)), _T((64,)))
    with pytest.raises(GemmError, match=r"last dimension of x must be K = weight\.shape"):
        linear(_T((2, 8, 64)), _T((32, 48)))
