"""Inverses of write layouts: exhaustive post-conditions, symbolic evaluation, an SMT proof."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy

from argus import symbolic as sym
from argus.layout_algebra import (
    ComposedLayout,
    Layout,
    LayoutError,
    Swizzle,
    atom_tv_layouts,
    lds_tile_layout,
    left_inverse,
)
from argus.layout_algebra.hopper import Major, SwizzleMode, smem_tile_layout, tma_box_smem_layout
from argus.layout_algebra.inverse import layout_inverse, write_inverse
from argus.layout_algebra.swizzle import evaluate_all, evaluate_at, is_injective

# --------------------------------------------------------------------------- layout_inverse


def small_layouts():
    for shape in ((2, 3), (4, 2), (3, 2, 2)):
        for stride in itertools.product(range(0, 13), repeat=len(shape)):
            yield Layout(shape, stride)


def test_layout_inverse_exhaustive_on_small_layouts() -> None:
    inverted = rejected = 0
    for layout in small_layouts():
        values = [layout(i) for i in range(layout.size)]
        try:
            inverse = layout_inverse(layout)
        except LayoutError:
            rejected += 1
            # only layouts whose sorted non-trivial modes overlap are rejected
            modes = sorted((d, s) for s, d in zip(layout.shape, layout.stride) if s > 1 and d != 0)
            assert any(d1 < s0 * d0 for (d0, s0), (d1, _) in itertools.pairwise(modes))
            continue
        inverted += 1
        image = set(values)
        for x in range(-3, max(values) + 4):
            ((lhs, rhs),) = inverse.conditions(x)
            assert (lhs == rhs) == (x in image), (layout, x)
            if x in image:
                assert layout(inverse.coordinate(x)) == x
        if 0 not in layout.stride:  # injective: the index is recovered exactly
            for i in range(layout.size):
                assert inverse.index(values[i]) == i
    assert inverted > 100 and rejected > 100


def test_layout_inverse_agrees_with_left_inverse() -> None:
    for layout in (
        Layout((4, 8), (8, 1)),
        Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))),
        Layout((2, 4), (4, 8)),
        Layout(8, 2),
    ):
        inverse = layout_inverse(layout)
        assert inverse.nested
        left = left_inverse(layout)
        for i in range(layout.size):
            assert inverse.index(layout(i)) == left(layout(i)) == i


def test_layout_inverse_with_gaps_and_broadcast() -> None:
    padded = Layout((16, 8), (9, 1))  # rows padded to 9: strides do not nest
    inverse = layout_inverse(padded)
    assert not inverse.nested
    for r, c in itertools.product(range(16), range(8)):
        assert inverse.coordinate(padded(r, c)) == (r, c)
    assert inverse.conditions(8)[0][0] != 8  # the padding column is not written
    broadcast = Layout((4, 3, 2), (2, 0, 1))
    inverse = layout_inverse(broadcast)
    for coord in itertools.product(range(4), range(3), range(2)):
        x = broadcast(coord)
        representative = inverse.coordinate(x)
        assert representative[1] == 0 and broadcast(representative) == x


def test_layout_inverse_rejects() -> None:
    with pytest.raises(LayoutError, match="overlap"):
        layout_inverse(Layout((3, 2), (2, 3)))  # injective, but interleaved modes
    with pytest.raises(LayoutError, match="negative"):
        layout_inverse(Layout((3, 2), (-1, 3)))
    with pytest.raises(LayoutError, match="symbolic"):
        layout_inverse(Layout((sym.size_symbol("n"), 2)))
    with pytest.raises(LayoutError):
        write_inverse(Layout((3, 2), (2, 3)))
    with pytest.raises(LayoutError):
        write_inverse(Layout(4), ComposedLayout(Swizzle(1, 0, 1), 0, Layout((3, 2), (2, 3))))


# --------------------------------------------------------------------------- write layouts


def _write_cases():
    mma = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    wg64 = atom_tv_layouts("wgmma.m64n64k16.bf16")
    wg256 = atom_tv_layouts("wgmma.m64n256k16.bf16")
    mfma32 = atom_tv_layouts("v_mfma_f32_32x32x8_bf16")
    mfma_fp8 = atom_tv_layouts("v_mfma_f32_16x16x32_fp8_fp8")
    stmatrix = atom_tv_layouts("stmatrix.m8n8.x4.b16")
    row_major = Layout((16, 8), (8, 1))
    return [
        ("mma C -> row-major", mma.c, row_major),
        ("mma C -> swizzled row-major", mma.c, ComposedLayout(Swizzle(2, 1, 3), 0, row_major)),
        ("mma C -> padded rows", mma.c, Layout((16, 8), (9, 1))),
        ("mma A -> K-major 32B tile", mma.a, smem_tile_layout(SwizzleMode.B32, Major.K, 2, 16, 16)),
        (
            "wgmma D n64 -> 128B K-major tile",
            wg64.c,
            smem_tile_layout(SwizzleMode.B128, Major.K, 2, 64, 64),
        ),
        (
            "wgmma D n256 -> 128B MN-major tile",
            wg256.c,
            smem_tile_layout(SwizzleMode.B128, Major.MN, 2, 64, 256),
        ),
        (
            "wgmma D n64 at stage offset",
            wg64.c,
            ComposedLayout(Swizzle(3, 3, 3), 8192, Layout((64, 64), (64, 1))),
        ),
        ("mfma 32x32 C -> LDS tile", mfma32.c, lds_tile_layout(32, 32, 4)),
        ("mfma fp8 A -> LDS tile", mfma_fp8.a, lds_tile_layout(16, 32, 1)),
        (
            "stmatrix x4 -> swizzled matrices",
            stmatrix.fragment,
            ComposedLayout(Swizzle(2, 3, 3), 0, Layout((8, 8, 4), (8, 1, 64))),
        ),
        (
            "TMA box 128B (box coordinates)",
            tma_box_smem_layout((64, 32), 2, SwizzleMode.B128, units="elements"),
            None,
        ),
        ("broadcast writer", Layout((4, 2), (1, 0)), Layout(4, 3)),
    ]


WRITE_CASES = _write_cases()


@pytest.mark.parametrize(
    ("label", "writer", "memory"), WRITE_CASES, ids=[c[0] for c in WRITE_CASES]
)
def test_write_inverse_exhaustive(label, writer, memory) -> None:
    inverse = write_inverse(writer, memory)
    written = inverse.image()
    lo, hi = min(written) - 40, max(written) + 40
    addresses = np.arange(lo, hi, dtype=np.int64)
    # vectorized over every address in the window (numpy arrays are int-like terms)
    domain = inverse.domain(addresses)
    assert np.array_equal(domain, np.isin(addresses, sorted(written)))
    mode_indices = inverse(addresses)
    modes = writer.shape if isinstance(writer.shape, tuple) else (writer.shape,)
    for index, mode in zip(mode_indices, modes):
        extent = Layout(mode).size
        index = np.broadcast_to(np.asarray(index), addresses.shape)  # stride-0 modes give 0
        assert np.all((index[domain] >= 0) & (index[domain] < extent))
    coordinate = inverse.coordinate(addresses)
    back = inverse.write(coordinate)
    assert np.array_equal(np.asarray(back)[domain], addresses[domain])
    # the forward map at every writer coordinate, and injectivity where the writer is injective
    forward = evaluate_all(writer)
    if memory is not None:
        forward = evaluate_at(memory, forward)
    assert set(int(a) for a in forward) == written
    if is_injective(writer):
        recovered = inverse(forward)
        flat, scale = np.zeros_like(forward), 1
        for index, mode in zip(recovered, modes):
            flat = flat + np.asarray(index) * scale
            scale *= Layout(mode).size
        assert np.array_equal(flat, np.arange(writer.size))
    # scalar ints on a sample
    for address in [*sorted(written)[:: max(1, len(written) // 50)], lo, hi - 1]:
        in_domain = inverse.domain(int(address))
        assert isinstance(in_domain, bool) and in_domain == (address in written)
        if in_domain:
            assert inverse.write(inverse.coordinate(int(address))) == address


def test_write_inverse_of_mma_accumulator_gives_thread_and_value() -> None:
    mma = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    inverse = write_inverse(mma.c, Layout((16, 8), (8, 1)))  # row-major f32 tile
    # lane 0 writes (0,0), (0,1), (8,0), (8,1): addresses 0, 1, 64, 65
    assert [inverse(a) for a in (0, 1, 64, 65)] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert inverse(8 * 3 + 5) == (4 * 3 + 2, 1)  # row 3, column 5: group 3, lane%4 = 2
    assert inverse.domain(128) is False and inverse.domain(-1) is False


def test_write_inverse_symbolic_sympy() -> None:
    wg = atom_tv_layouts("wgmma.m64n16k16.bf16")
    memory = smem_tile_layout(SwizzleMode.B32, Major.K, 2, 64, 16)
    inverse = write_inverse(wg.c, memory)
    a = sym.index_symbol("a")
    thread, value = inverse(a)
    predicate = inverse.domain(a)
    assert thread.has(sym.BitXor)
    assert isinstance(predicate, sympy.Basic)
    written = inverse.image()
    for address in (0, 1, 7, 33, 100, 512, 1023, 1024, 1500):
        env = {"a": address}
        holds = all(
            sym.evaluate(lhs, env) == sym.evaluate(rhs, env) for lhs, rhs in inverse.conditions(a)
        )
        assert holds == (address in written)
        if holds:
            t, v = sym.evaluate(thread, env), sym.evaluate(value, env)
            assert inverse.write(t, v) == address


def test_domain_needs_eq_for_foreign_terms() -> None:
    class Opaque:
        def __add__(self, other):
            return self

        __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __add__

        def __floordiv__(self, other):
            return self

        __mod__ = __xor__ = __and__ = __rshift__ = __lshift__ = __floordiv__

    inverse = write_inverse(Layout((4, 2), (2, 1)))
    with pytest.raises(LayoutError, match="eq="):
        inverse.domain(Opaque())
    assert inverse.domain(Opaque(), eq=lambda x, y: True, conj=all) is True


# --------------------------------------------------------------------------- SMT


def _prove(query) -> str:
    from argus.smt.session import solve

    return solve(query, "z3", timeout_s=60).status


def test_write_inverse_proved_by_smt() -> None:
    """With SMT terms as addresses, z3 proves both directions for a swizzled mma.sync store."""
    smt = pytest.importorskip("argus.smt")
    pytest.importorskip("z3")
    mma = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    memory = ComposedLayout(Swizzle(2, 1, 3), 0, Layout((16, 8), (8, 1)))
    inverse = write_inverse(mma.c, memory)

    def conj(xs):
        return smt.and_(*xs)

    a = smt.int_var("a", -64, 256)
    thread, value = inverse(a)
    domain = inverse.domain(a, eq=smt.eq, conj=conj)
    # soundness: a written address is written by its witness, which is a valid (thread, value)
    assert _prove(smt.Query.of(domain, smt.ne(inverse.write(thread, value), a))) == "unsat"
    out_of_range = smt.or_(
        smt.lt(thread, 0), smt.ge(thread, 32), smt.lt(value, 0), smt.ge(value, 4)
    )
    assert _prove(smt.Query.of(domain, out_of_range)) == "unsat"
    # completeness: every (thread, value) writes an address in the domain and is recovered
    t, v = smt.int_var("t", 0, 31), smt.int_var("v", 0, 3)
    address = inverse.write(t, v)
    t2, v2 = inverse(address)
    recovered = smt.and_(
        inverse.domain(address, eq=smt.eq, conj=conj), smt.eq(t2, t), smt.eq(v2, v)
    )
    assert _prove(smt.Query.of(smt.not_(recovered))) == "unsat"
    # and a wrong inverse is refuted: pretend the store was unswizzled
    plain = write_inverse(mma.c, Layout((16, 8), (8, 1)))
    pt, pv = plain(a)
    assert _prove(smt.Query.of(domain, smt.ne(inverse.write(pt, pv), a))) == "sat"
