"""Kernels whose wgmma operands are MN-major (a uniquely named module: tests share sys.path)."""

from sympy import Eq

import argus.spec as A
from argus.layout_algebra.hopper import SwizzleMode

SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)
ATOM = "wgmma.m64n128k16.bf16"


@A.kernel(threads=128, grid=lambda: (1,), assume=lambda K: [Eq(K % 64, 0), K >= 64])
def both_mn_major(a: A.Global(A.bf16, "K M"), b: A.Global(A.bf16, "K N"), c: A.Global(A.f32, "M N"),
                  GROUP: A.const = "box-major", SWIZZLED: A.const = True, SWAP_BOXES: A.const = False):
    """``c = aᵀ · b`` for one 64 x 128 tile: A arrives as one K x 64 box (M contiguous), B as two
    K x 64 boxes (N contiguous); both wgmma operands are read MN-major.  ``GROUP="box-minor"``
    groups B's modes in the wrong order (box index fastest: no descriptor describes it);
    ``SWIZZLED=False`` leaves the shared tiles unswizzled (no descriptor either);
    ``SWAP_BOXES=True`` loads B's two boxes into each other's place (columns 64..127 of C then
    carry columns 0..63 of B: a tag violation at the final assertion)."""
    A.tag(a, lambda k, i: (i, k), "A")
    A.tag(b, lambda k, j: (j, k), "B")
    swizzle = SWIZZLE_128B if SWIZZLED else None
    sa = A.shared(A.bf16, (2, 64, 64), swizzle=swizzle)
    sb = A.shared(A.bf16, (2, 2, 64, 64), swizzle=swizzle)
    acc = A.mma_fragment(ATOM, "c")
    for kt, st in A.range(a.shape[0] // 64, pipeline=2):
        A.tma_load(a.tile((64, 64), (kt, 0)), sa[st])
        for q in A.range(2, unroll=True):
            A.tma_load(b.tile((64, 64), (kt, 1 - q if SWAP_BOXES else q)), sb[st, q])
        for ks in A.range(4, unroll=True):
            a_step = sa[st].tile((16, 64), (ks, 0)).T
            b_k = sb[st].tile((2, 16, 64), (0, ks, 0))
            b_step = b_k.permute((2, 0), 1) if GROUP == "box-major" else b_k.permute((0, 2), 1)
            A.mma(ATOM, a_step, b_step, acc)
        A.wgmma_commit()
        A.wgmma_wait(0)
    mine = A.mma_partition(ATOM, "c", c.tile((64, 128), (0, 0)))
    A.store(acc, mine)
    A.assert_tag(mine, lambda i, j, tg: tg == (i, j), "c[i, j] = column i of A · column j of B")


@A.kernel(threads=32, grid=lambda: (1,))
def permuted_copy(x: A.Global(A.f32, "P Q R"), y: A.Global(A.f32, "R PQ"), ORDER: A.const = ((2, (0, 1)))):
    """``y[r, p + P q] = x[p, q, r]`` for a 2 x 4 x 8 ``x`` through one permuted register view:
    the grouped mode enumerates ``(p, q)`` with ``p`` fastest."""
    A.tag(x, lambda p, q, r: (p, q, r), "X")
    v = A.load(x.tile((2, 4, 8), (0, 0, 0)))
    w = v.permute(*ORDER)
    A.store(w, y.tile((8, 8), (0, 0)), pred=A.thread_id() == 0)
