"""The Hopper GEMM examples (TMA + mbarrier pipelines + wgmma) against numpy on fresh random
inputs, and the warp-specialized GEMM's planted pipeline bugs caught with their place."""

import sys
from pathlib import Path

import numpy as np
import pytest
from example_inputs_support import bf16_gemm_inputs
from proof_support import source_line

from argus.ir import check, numerics
from argus.ir.interpreter import Interpreter, InterpreterError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm_tma_wgmma
import gemm_warp_specialized


def _check_gemm(out: np.ndarray, inputs: dict) -> None:
    a, b = inputs["a"], inputs["b"]
    # k-blocks accumulate in order: the same fused multiply-add chain as one MMA over all of K
    np.testing.assert_array_equal(out, numerics.mma(a, b.T, None, a_dtype="bf16"))
    reference = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T))


# trip counts K / 64 = 1, 2, 4 against 2..4 stages; M and N not multiples of the 64 x 64 tile
@pytest.mark.parametrize("shape, stages", [((100, 80, 128), 3), ((64, 64, 64), 3), ((64, 128, 256), 2),
                                           ((128, 64, 256), 4)])
def test_policy_pipelined_tma_wgmma_gemm_matches_numpy(shape, stages):
    m, n, k = shape
    inputs = bf16_gemm_inputs(m + n + k + stages, m, n, k)
    kernel = gemm_tma_wgmma.gemm_tma_wgmma.specialize(STAGES=stages)
    check.check(kernel)
    out = Interpreter(kernel).run(inputs, {"M": m, "N": n, "K": k})["c"]
    _check_gemm(out, inputs)


WS = gemm_warp_specialized.gemm_ws
WS_SHAPE = {"M": 128, "N": 64, "K": 320}  # 5 k-blocks through 3 stages: every stage is refilled


def test_warp_specialized_gemm_matches_numpy():
    inputs = bf16_gemm_inputs(7, WS_SHAPE["M"], WS_SHAPE["N"], WS_SHAPE["K"])
    out = Interpreter(WS.specialize()).run(inputs, WS_SHAPE)["c"]
    _check_gemm(out, inputs)


def test_warp_roles_carry_their_register_budgets():
    from argus.ir import nodes as N

    k = WS.specialize()
    check.check(k)  # roles are warp-uniform: the wgmma collectives are not divergent
    roles = {op.name: op for op in N.walk(k.body) if isinstance(op, N.WarpRole)}
    assert roles["producer"].registers == 40 and roles["consumer"].registers == 232
    first = {name: role.body.ops[0] for name, role in roles.items()}
    assert isinstance(first["producer"], N.SetMaxNReg) and not first["producer"].increase
    assert isinstance(first["consumer"], N.SetMaxNReg) and first["consumer"].increase


@pytest.mark.parametrize("bug, kind, line, thread, other", [
    # the producer refills stage 0 (k-block 3) while a consumer's wgmma may still read k-block 0
    ("no-empty-wait", "async", "A.tma_load(a.tile((BM, BK), (bm, kt))", 0, 128),
    ("early-release", "async", "A.tma_load(a.tile((BM, BK), (bm, kt))", 0, 128),
    # released after the wgmma commit but before the wgmma_wait that retires the stage's wgmmas
    ("release-before-retire", "race", "A.tma_load(a.tile((BM, BK), (bm, kt))", 0, 128),
    ("parity", "deadlock", "A.wait(full[s], parity=", 128, None),
    ("expect-tx", "expect-tx", "A.mma(ATOM, sa[s].tile((64, 16), (wg, ks))", 128, 0),
])
def test_warp_specialized_pipeline_bugs_are_caught_with_their_place(bug, kind, line, thread, other):
    inputs = bf16_gemm_inputs(8, WS_SHAPE["M"], WS_SHAPE["N"], WS_SHAPE["K"])
    with pytest.raises(InterpreterError) as err:
        Interpreter(WS.specialize(BUG=bug)).run(inputs, WS_SHAPE)
    v = err.value.violation
    assert v.kind == kind, v
    assert v.block == (0, 0, 0) and v.thread == thread and v.other_thread == other
    assert v.position.line == source_line(WS, line)
    if kind != "deadlock":
        assert v.element == (0, 0)


# --------------------------------------------------------------------------- known zeros

import argus.spec as A  # noqa: E402
from argus.layout_algebra.hopper import SwizzleMode  # noqa: E402

_SW128 = SwizzleMode.B128.element_swizzle(2)


@A.kernel(threads=128, grid=lambda M, N, BM, BN: (A.cdiv(N, BN), A.cdiv(M, BM)))
def gemm_partial_k(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N"),
                   BM: A.const = 64, BN: A.const = 64, BK: A.const = 64, STAGES: A.const = 2,
                   WRONG: A.const = False):
    """gemm_tma_wgmma with K not a multiple of BK and no guards on the tag assertions: the
    out-of-range parts of the partial tiles (M, N and K) are known zeros from the TMA fill."""
    A.tag(a, lambda i, k: (i, k), "A")
    A.tag(b, lambda j, k: (j, k), "B")
    bm, bn = A.block_id(1), A.block_id(0)
    sa = A.shared(A.bf16, (STAGES, BM, BK), swizzle=_SW128)
    sb = A.shared(A.bf16, (STAGES, BN, BK), swizzle=_SW128)
    acc = A.mma_fragment("wgmma.m64n64k16.bf16", "c")
    for kt, st in A.range(A.cdiv(a.shape[1], BK), pipeline=STAGES):
        A.tma_load(a.tile((BM, BK), (bm, kt)), sa[st])
        A.tma_load(b.tile((BN, BK), (bn, kt)), sb[st])
        A.assert_tag(sa[st], lambda s, i, k, tg, kt=kt, off=int(WRONG): tg == (bm * BM + i, kt * BK + k + off),
                     "stage holds kt")
        A.assert_tag(sb[st], lambda s, j, k, tg, kt=kt: tg == (bn * BN + j, kt * BK + k), "stage holds kt")
        for ks in A.range(BK // 16, unroll=True):
            A.mma("wgmma.m64n64k16.bf16", sa[st].tile((BM, 16), (0, ks)), sb[st].tile((BN, 16), (0, ks)), acc)
        A.wgmma_commit()
        A.wgmma_wait(0)
    mine = A.mma_partition("wgmma.m64n64k16.bf16", "c", c.tile((BM, BN), (bm, bn)))
    A.store(acc, mine)
    A.assert_tag(mine, lambda i, j, tg: tg == (i, j), "c[i, j] = row i of A · row j of B")


@pytest.mark.parametrize("shape", [(100, 80, 96), (64, 64, 40), (70, 64, 136)])
def test_partial_k_tiles_carry_known_zeros_and_tag_assertions_hold_unguarded(shape):
    m, n, k = shape
    inputs = bf16_gemm_inputs(m * n + k, m, n, k)
    out = Interpreter(gemm_partial_k.specialize()).run(inputs, {"M": m, "N": n, "K": k})["c"]
    _check_gemm(out, inputs)


def test_known_zeros_do_not_hide_a_wrong_tag_assertion():
    inputs = bf16_gemm_inputs(3, 64, 64, 96)
    with pytest.raises(InterpreterError) as err:
        Interpreter(gemm_partial_k.specialize(WRONG=True)).run(inputs, {"M": 64, "N": 64, "K": 96})
    v = err.value.violation
    assert v.kind == "tag" and "assert_tag failed" in v.message and v.element is not None
