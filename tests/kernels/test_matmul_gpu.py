"""``argus.kernels.matmul`` on a GPU against a float64 reference: operands in place in each layout,
staged operands (K and N no multiple of 8, a strided slice), the fused epilogue, an fp32 C,
``out=``, the empty cases and the autotuner.  Every specialization passes the gate from its
proof record (no solver needed on the GPU machine)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 8e-3, torch.float16: 2e-3}


def _operand(rows: int, cols: int, dtype, transposed: bool, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if transposed:  # stored cols x rows, handed over as a transposed view
        return torch.randn(cols, rows, device="cuda", generator=g).to(dtype).t()
    return torch.randn(rows, cols, device="cuda", generator=g).to(dtype)


def _close(out, a, b, bias=None, relu=False):
    ref = a.double() @ b.double()
    if bias is not None:
        ref = ref + bias.double()
    if relu:
        ref = torch.relu(ref)
    assert not torch.isnan(out).any()
    rel = ((out.double() - ref).norm() / (ref.norm() or 1.0)).item()
    assert rel <= TOLERANCE[out.dtype], rel


@pytest.mark.parametrize("a_t, b_t", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("shape", [(1537, 2056, 1000), (128, 1024, 512), (70, 36, 20)])
def test_matmul_matches_float64(a_t, b_t, shape):
    from argus.kernels.matmul import matmul

    m, n, k = shape
    a, b = _operand(m, k, torch.bfloat16, a_t, 1), _operand(k, n, torch.bfloat16, b_t, 2)
    out = matmul(a, b)
    torch.cuda.synchronize()
    assert out.shape == (m, n) and out.dtype == torch.bfloat16 and out.is_contiguous()
    _close(out, a, b)


def test_fused_epilogue_fp32_out_fp16_and_out_argument():
    from argus.kernels.matmul import matmul

    a, b = _operand(300, 256, torch.bfloat16, False, 3), _operand(256, 200, torch.bfloat16, True, 4)
    bias = torch.randn(200, device="cuda")
    _close(matmul(a, b, bias=bias, activation="relu"), a, b, bias, relu=True)
    _close(matmul(a, b, out_dtype="f32"), a, b)
    out = torch.full((300, 200), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert matmul(a, b, out=out) is out
    _close(out, a, b)
    h, w = _operand(256, 512, torch.float16, False, 5), _operand(512, 264, torch.float16, True, 6)
    _close(matmul(h, w), h, w)
    wide = _operand(256, 1024, torch.bfloat16, False, 7)[:, 3:515]  # a slice: staged
    narrow = _operand(512, 64, torch.bfloat16, True, 8)
    _close(matmul(wide, narrow), wide, narrow)


def test_empty_extents_and_autotune():
    from argus.kernels.matmul import matmul

    z = matmul(torch.zeros(64, 0, device="cuda", dtype=torch.bfloat16),
               torch.zeros(0, 32, device="cuda", dtype=torch.bfloat16), bias=torch.ones(32, device="cuda"))
    assert torch.equal(z.float(), torch.ones(64, 32, device="cuda"))
    assert matmul(torch.zeros(0, 64, device="cuda", dtype=torch.bfloat16),
                  torch.zeros(64, 32, device="cuda", dtype=torch.bfloat16)).shape == (0, 32)
    a, b = _operand(1024, 512, torch.bfloat16, False, 9), _operand(512, 768, torch.bfloat16, True, 10)
    _close(matmul(a, b, autotune=True), a, b)
    _close(matmul(a, b, autotune=True), a, b)  # the remembered pick


def test_linear_matches_the_functional_linear():
    from argus.kernels.matmul import linear

    x = torch.randn(4, 96, 512, device="cuda").to(torch.bfloat16)  # (batch, sequence, K)
    weight = torch.randn(768, 512, device="cuda").to(torch.bfloat16)  # N x K, as a layer stores it
    bias = torch.randn(768, device="cuda").to(torch.bfloat16)
    y = linear(x, weight, bias, activation="relu")
    assert y.shape == (4, 96, 768) and y.dtype == torch.bfloat16
    ref = torch.relu(x.double() @ weight.double().t() + bias.double())
    rel = ((y.double() - ref).norm() / ref.norm()).item()
    assert rel <= TOLERANCE[torch.bfloat16], rel
    assert linear(x[0, 0], weight).shape == (768,)  # a single row
