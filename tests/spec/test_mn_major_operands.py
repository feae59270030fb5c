"""MN-major wgmma operands: ``Tensor.permute`` / ``Tensor.T`` views, their descriptors (checked
when traced, lowered with the transpose bits), and the reference interpreter reading them."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import argus.spec as A
from argus import symbolic
from argus.backend_ptx import emit_ptx
from argus.backend_ptx.assemble import build_cubin
from argus.errors import ArgusError
from argus.ir import check, numerics
from argus.ir import lowering as L
from argus.ir.interpreter import Interpreter
from argus.layout_algebra import ComposedLayout, Layout, wgmma_descriptor
from argus.layout_algebra.hopper import Major
from argus.spec.kernel import kernel_hash
from argus.spec.tensor import COORDS, Tensor
from argus.toolchain import find_ptxas

sys.path.insert(0, str(Path(__file__).parent))
import mn_major_kernels as K

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")


def _view(shape, stride, offset=0, swizzle=None) -> Tensor:
    from argus.ir import nodes as N

    layout = Layout(shape, stride)
    buffer = N.Buffer("s", N.MemorySpace.SHARED, A.bf16, layout.cosize, layout)
    return Tensor(N.View(buffer, Layout(shape, stride), offset, COORDS[:len(shape)], None, None, swizzle))


def _address(t: Tensor, coord: tuple[int, ...]) -> int:
    value = t.view.offset + t.layout(coord if len(coord) != 1 else coord[0])
    return int(symbolic.static_value(value))


def _logical(t: Tensor, coord: tuple[int, ...]) -> tuple[int, ...]:
    env = dict(zip(COORDS, coord))
    return tuple(int(symbolic.evaluate(c, env)) for c in t.view.coords)


@pytest.mark.parametrize("modes", [(1, 0, 2), (2, 0, 1), ((2, 0), 1), (1, (0, 2)), ((0, 1, 2),), ((2, 1), 0)])
def test_permute_postcondition_over_the_whole_domain(modes):
    """Element ``c`` of ``x.permute(*modes)`` is the element of ``x`` whose coordinate the
    digits of ``c`` name (groups: the first mode fastest), both in its address and in the
    logical coordinate the view remembers."""
    x = _view((3, 4, 5), (1, 3, 12), offset=7)
    t = x.permute(*modes)
    groups = [m if isinstance(m, tuple) else (m,) for m in modes]
    extents = [x.shape[d] for d in range(3)]
    assert t.shape == tuple(int(np.prod([extents[d] for d in g])) for g in groups)
    seen = set()
    for c in itertools.product(*(range(s) for s in t.shape)):
        source = [0, 0, 0]
        for value, group in zip(c, groups):
            for d in group:
                source[d], value = value % extents[d], value // extents[d]
        assert _address(t, c) == _address(x, tuple(source))
        assert _logical(t, c) == tuple(source)
        seen.add(tuple(source))
    assert len(seen) == 60  # a bijection onto x's elements


def test_transpose_of_a_tile_keeps_the_tiles_coordinates_and_validity():
    x = _view((64, 64), (64, 1))
    tile = x.tile((16, 64), (2, 0))
    t = tile.T
    assert t.shape == (64, 16) and t.layout == Layout((64, 16), (1, 64)) and t.view.offset == 2048
    assert _logical(t, (5, 3)) == (35, 5)
    assert t.T.layout == tile.layout


def test_permute_carries_the_validity_of_a_partial_tile():
    import sympy

    m = sympy.Symbol("M", integer=True, positive=True)
    x = _view((m, 64), (64, 1))
    tile = x.tile((16, 64), (3, 0))  # rows 48..63: valid where 48 + row < M
    t = tile.T
    assert t.view.valid == sympy.Lt(48 + COORDS[1], m)
    grouped = x.tile((16, 64), (3, 0)).permute((1, 0))  # one mode: column fastest, then the row
    assert grouped.view.valid.subs(COORDS[0], 64 * 5 + 7) == sympy.Lt(53, m)


@pytest.mark.parametrize("modes, message", [((0,), "exactly once"), ((0, 0), "exactly once"), ((0, 2), "exactly once"),
                                            ((0, ()), "exactly once"), ((True, 0), "exactly once")])
def test_permute_refuses_modes_that_are_not_a_permutation(modes, message):
    x = _view((4, 8), (8, 1))
    with pytest.raises(ArgusError, match=message):
        x.permute(*modes)


def test_transpose_needs_a_matrix():
    with pytest.raises(ArgusError, match="transpose a matrix"):
        _ = _view((2, 4, 8), (32, 8, 1)).T


def test_register_views_permute_in_the_interpreter():
    kernel = K.permuted_copy.specialize()
    x = np.arange(64, dtype=np.float32).reshape(2, 4, 8)
    out = Interpreter(kernel).run({"x": x, "y": np.zeros((8, 8), np.float32)}, {"P": 2, "Q": 4, "R": 8, "PQ": 8})["y"]
    np.testing.assert_array_equal(out, x.transpose(2, 1, 0).reshape(8, 8))  # column p + 2 q is x[p, q, :]


# --------------------------------------------------------------------------- wgmma operands


def test_boxes_of_k_rows_are_an_mn_major_descriptor():
    """``C`` boxes of ``K x 64`` (128B swizzle) seen as one ``64 C x 16`` K step: MN-major, the
    leading byte offset is the distance of two boxes, the stride byte offset 8 K-rows."""
    from argus.layout_algebra.hopper import SwizzleMode

    swizzle = SwizzleMode.B128.element_swizzle(2)
    stage = _view((4, 64, 64), (4096, 64, 1), swizzle=swizzle)
    for ks in range(4):
        step = stage.tile((4, 16, 64), (0, ks, 0)).permute((2, 0), 1)
        assert step.view.offset == 1024 * ks  # K step ks starts 16 K-rows of 64 elements further
        desc = wgmma_descriptor(ComposedLayout(swizzle, step.view.offset, step.layout), 2, units="elements")
        assert desc.major is Major.MN and desc.leading_byte_offset == 8192 and desc.stride_byte_offset == 1024
        assert desc.start_offset == 2048 * ks


def test_both_operands_mn_major_match_numpy_in_the_interpreter():
    m, n, k = 50, 120, 128  # rows and columns past the edges arrive zero-filled and are not stored
    rng = np.random.default_rng(5)
    a = numerics.round_to("bf16", rng.standard_normal((k, m))).astype(np.float32)
    b = numerics.round_to("bf16", rng.standard_normal((k, n))).astype(np.float32)
    kernel = K.both_mn_major.specialize()
    check.check(kernel)
    out = Interpreter(kernel).run({"a": a, "b": b, "c": np.zeros((m, n), np.float32)}, {"M": m, "N": n, "K": k})["c"]
    np.testing.assert_array_equal(out, numerics.mma(a.T, b, None, a_dtype="bf16"))
    reference = a.T.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a.T, b))


@pytest.mark.parametrize("consts, message", [({"GROUP": "box-minor"}, "neither k nor mn is contiguous"),
                                             ({"SWIZZLED": False}, "is not a MN-major INTERLEAVE wgmma layout")])
def test_operands_no_descriptor_describes_are_refused_at_the_mma_line(consts, message):
    with pytest.raises(ArgusError, match=message) as err:
        K.both_mn_major.specialize(**consts)
    assert "A.mma(ATOM, a_step, b_step, acc)" in Path(K.__file__).read_text().splitlines()[err.value.position.line - 1]


def test_mn_major_operands_lower_to_transposed_descriptors():
    kernel = K.both_mn_major.specialize()
    mmas = [s for s in L.lower_kernel(kernel).walk() if isinstance(s, L.MmaStmt)]
    assert len(mmas) == 4 * 2  # four K steps in the prologue's and the steady state's copy of the body
    for s in mmas:
        assert s.a.descriptor.major is Major.MN and s.b.descriptor.major is Major.MN
        assert s.b.descriptor.leading_byte_offset == 8192 and s.b.descriptor.stride_byte_offset == 1024
        assert s.a.descriptor.stride_byte_offset == 1024
    text = emit_ptx(kernel, "sm_90a").text
    issues = [line for line in text.splitlines() if "wgmma.mma_async" in line]
    assert issues and all(line.rstrip().endswith(", 1, 1, 1, 1;") for line in issues)  # trans-a, trans-b


@needs_ptxas
def test_mn_major_kernel_assembles(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    kernel = K.both_mn_major.specialize()
    cubin = build_cubin(emit_ptx(kernel, "sm_90a"), kernel_hash(kernel))
    assert "0 bytes spill stores" in cubin.log and "warning" not in cubin.log.lower(), cubin.log


def test_mn_major_reads_are_proved_and_swapped_boxes_refuted_with_a_replay():
    from argus.proofs import verify_kernel

    report = verify_kernel(K.both_mn_major.specialize())
    assert report.verdict == "proved", report.human()
    report = verify_kernel(K.both_mn_major.specialize(SWAP_BOXES=True))
    assert report.verdict == "refuted", report.human()
    line = next(i for i, text in enumerate(Path(K.__file__).read_text().splitlines(), 1)
                if "A.assert_tag(mine" in text)
    found = [c for c in report.counterexamples if c.property == "tag" and c.position.line == line]
    assert found and found[0].replay.status == "reproduced", report.human()


def test_the_spec_exports_nothing_new():
    # permute and T are methods of tensors, not new top-level DSL names
    assert not hasattr(A, "permute")
