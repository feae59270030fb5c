"""MFMA in the gfx942 emulator: operand and accumulator lane layouts, and the arithmetic.

Layouts (CDNA3 ISA, "Matrix Arithmetic Instructions", wave64, one block, CBSZ = ABID =
BLGP = 0), for ``v_mfma_f32_{M}x{N}x{K}_{type}`` with ``P`` inputs per lane (4 for 16-bit
types, 8 for 8-bit types) packed little-endian in 2 VGPRs:

* A (M x K): lane ``l``, element ``j`` is ``A[l % M][P * (l // M) + j]``;
* B (K x N): lane ``l``, element ``j`` is ``B[P * (l // N) + j][l % N]``;
* C/D (M x N, f32): 32x32 shapes, register ``r`` of lane ``l`` is
  ``D[8 * (r // 4) + 4 * (l // 32) + r % 4][l % 32]`` (16 registers);
  16x16 shapes, ``D[4 * (l // 16) + r][l % 16]`` (4 registers).

Arithmetic: the products of the inputs are exact in binary64 (at most 2 x 11 significand
bits); each output adds its K products to C in binary64 and rounds once to binary32.  The
hardware's internal accumulation order and rounding are not specified by the ISA, so results
are compared with a tolerance (``argus.ir.numerics.mma_tolerance``), never bit for bit.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from argus.backend_amdgcn.emulate_numerics import as_u32, bf16_to_f32, fp8_table

__all__ = ["MfmaShape", "mfma_compute", "mfma_shape"]

_NAME = re.compile(r"v_mfma_f32_(\d+)x(\d+)x(\d+)_(bf16|f16|fp8|bf8)(?:_(fp8|bf8))?$")


class MfmaShape:
    def __init__(self, m: int, n: int, k: int, a_type: str, b_type: str) -> None:
        self.m, self.n, self.k = m, n, k
        self.a_type, self.b_type = a_type, b_type
        self.per_lane = 8 if a_type in ("fp8", "bf8") else 4
        self.acc_regs = m * n // 64

    @property
    def src_regs(self) -> int:
        return 2


@cache
def mfma_shape(op: str) -> MfmaShape | None:
    match = _NAME.match(op)
    if match is None:
        return None
    m, n, k = (int(match.group(i)) for i in (1, 2, 3))
    a = match.group(4)
    b = match.group(5) or a
    shape = MfmaShape(m, n, k, a, b)
    if (m, n) not in ((32, 32), (16, 16)) or k != (64 // m) * shape.per_lane:
        return None
    return shape


def _unpack(words: np.ndarray, kind: str) -> np.ndarray:
    """[2, 64] uint32 words -> [64, P] float64 input values."""
    lo, hi = words[0].astype(np.uint64), words[1].astype(np.uint64)
    packed = lo | (hi << np.uint64(32))
    if kind in ("fp8", "bf8"):
        codes = np.stack([(packed >> np.uint64(8 * j)) & np.uint64(0xFF) for j in range(8)], axis=1)
        return fp8_table(kind)[codes.astype(np.int64)].astype(np.float64)
    halves = np.stack([(packed >> np.uint64(16 * j)) & np.uint64(0xFFFF) for j in range(4)], axis=1).astype(np.uint32)
    if kind == "bf16":
        return bf16_to_f32(halves).astype(np.float64)
    return halves.astype(np.uint16).view(np.float16).astype(np.float64)


@cache
def accumulator_coordinates(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) [regs, 64] of every accumulator register and lane."""
    lanes = np.arange(64)
    if m == 32:
        regs = np.arange(16)[:, None]
        rows = 8 * (regs // 4) + 4 * (lanes[None, :] // 32) + regs % 4
        cols = np.broadcast_to(lanes % 32, (16, 64))
    else:
        regs = np.arange(4)[:, None]
        rows = 4 * (lanes[None, :] // 16) + regs
        cols = np.broadcast_to(lanes % 16, (4, 64))
    return np.asarray(rows), np.asarray(cols)


def operand_matrix(shape: MfmaShape, words: np.ndarray, which: str) -> np.ndarray:
    """The A (M x K) or B (K x N) matrix one wave's source registers hold."""
    kind = shape.a_type if which == "a" else shape.b_type
    values = _unpack(words, kind)  # [64, P]
    rows = shape.m if which == "a" else shape.n
    lanes = np.arange(64)
    k_index = shape.per_lane * (lanes // rows)[:, None] + np.arange(shape.per_lane)[None, :]
    outer = np.broadcast_to((lanes % rows)[:, None], k_index.shape)
    if which == "a":
        out = np.zeros((shape.m, shape.k))
        out[outer, k_index] = values
    else:
        out = np.zeros((shape.k, shape.n))
        out[k_index, outer] = values
    return out


def mfma_compute(shape: MfmaShape, a_words: np.ndarray, b_words: np.ndarray, c_words: np.ndarray) -> np.ndarray:
    """D registers [acc_regs, 64] (uint32) of ``D = A · B + C``."""
    a = operand_matrix(shape, a_words, "a")
    b = operand_matrix(shape, b_words, "b")
    rows, cols = accumulator_coordinates(shape.m)
    c = np.zeros((shape.m, shape.n))
    c[rows, cols] = c_words.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        d = a @ b + c
        out = d[rows, cols].astype(np.float32)
    return as_u32(out)
