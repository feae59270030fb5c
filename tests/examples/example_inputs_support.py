"""Inputs of the example tests (a uniquely named module: every tests/ folder shares sys.path)."""

import numpy as np

from argus.ir import numerics


def bf16_gemm_inputs(seed: int, m: int, n: int, k: int) -> dict:
    """A (m x k) and B (n x k) random normal values exactly representable in bf16, no zeros
    (a zero would hide a dropped product), and a zeroed C (m x n)."""
    rng = np.random.default_rng(seed)
    a = numerics.round_to("bf16", rng.standard_normal((m, k))).astype(np.float32)
    b = numerics.round_to("bf16", rng.standard_normal((n, k))).astype(np.float32)
    a[a == 0], b[b == 0] = 0.5, 0.5
    return {"a": a, "b": b, "c": np.zeros((m, n), np.float32)}
