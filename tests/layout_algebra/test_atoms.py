"""Atom TV layouts against independent transcriptions of the vendor documents.

Each ``*_reference`` function below is written from the vendor text (row/column formulas per
thread and fragment element), not from the layouts in ``argus.layout_algebra.atoms``.  The
tests evaluate every (thread, value) pair of every atom against them and check that every TV
layout is a bijection onto its tile.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from argus import symbolic as sym
from argus.layout_algebra import Layout, LayoutError
from argus.layout_algebra.atoms import (
    MatrixCopyAtom,
    MmaAtom,
    atom_names,
    atom_tv_layouts,
    ldmatrix_atom,
    mfma_atom,
    wgmma_m64nNk16,
)
from argus.layout_algebra.swizzle import evaluate_all, is_bijective_onto

# --------------------------------------------------------------------------- PTX ISA 9.7.14.5.8
# "Matrix Fragments for mma.m16n8k16 with floating point type", .f16/.bf16 inputs, .f32 C/D.


def mma_m16n8k16_a_reference(lane: int, i: int) -> tuple[int, int]:
    """a_i: row = groupID for i in {0,1,4,5} else groupID + 8; col = 2*tig + (i & 1) (+8 if i >= 4)."""
    group_id, thread_in_group = lane >> 2, lane % 4
    row = group_id if (0 <= i < 2 or 4 <= i < 6) else group_id + 8
    col = thread_in_group * 2 + (i & 0x1) + (8 if i >= 4 else 0)
    return row, col


def mma_m16n8k16_b_reference(lane: int, i: int) -> tuple[int, int]:
    """b_i of the 16x8 (K x N) matrix B: row (k) = 2*tig + (i & 1) (+8 if i >= 2); col (n) = groupID."""
    group_id, thread_in_group = lane >> 2, lane % 4
    row = thread_in_group * 2 + (i & 0x1) + (8 if i >= 2 else 0)
    return row, group_id


def mma_m16n8k16_c_reference(lane: int, i: int) -> tuple[int, int]:
    """c_i: row = groupID (+8 if i >= 2); col = 2*tig + (i & 1)."""
    group_id, thread_in_group = lane >> 2, lane % 4
    row = group_id if i < 2 else group_id + 8
    col = thread_in_group * 2 + (i & 0x1)
    return row, col


# --------------------------------------------------------------------------- PTX ISA 9.7.15.5.1.1.1
# wgmma.m64nNk16: Figure 149 (D, .f32: N/2 registers) and Figure 148 (A in registers); every warp
# of the warpgroup covers 16 rows.  Transcribed as: warp w = tid / 32, lane as in mma.m16n8k16.


def wgmma_d_reference(tid: int, i: int) -> tuple[int, int]:
    warp, lane = tid // 32, tid % 32
    group_id, thread_in_group = lane >> 2, lane % 4
    row = warp * 16 + group_id + (8 if i % 4 >= 2 else 0)
    col = (i // 4) * 8 + thread_in_group * 2 + (i % 2)
    return row, col


def wgmma_a_reference(tid: int, i: int) -> tuple[int, int]:
    warp, lane = tid // 32, tid % 32
    row, col = mma_m16n8k16_a_reference(lane, i)
    return warp * 16 + row, col


# --------------------------------------------------------------------------- PTX ISA 9.7.14.5.15/16
# ldmatrix / stmatrix .m8n8 .b16: "Each thread in a warp loads fragments of a row, with thread 0
# receiving the first fragment ... A group of four threads loads an entire row"; register j
# holds matrix j; .trans: "the matrix is loaded in column-major format".


def ldmatrix_reference(lane: int, value: int, transposed: bool) -> tuple[int, int, int]:
    element, matrix = value % 2, value // 2
    row, col = lane // 4, 2 * (lane % 4) + element
    if transposed:
        row, col = col, row
    return row, col, matrix


# --------------------------------------------------------------------------- CDNA3 ISA, MFMA
# Wave64.  D of the 32x32 shapes (acceptance golden): col = lane % 32,
# row = 4 * (lane // 32) + r % 4 + 8 * (r // 4).  D of the 16x16 shapes: col = lane % 16,
# row = 4 * (lane // 16) + r.  A (M x K): row = lane % M, k = per_lane * (lane // M) + v;
# B (K x N): col = lane % N, same k.


def mfma_d_reference(m: int, lane: int, r: int) -> tuple[int, int]:
    if m == 32:
        return 4 * (lane // 32) + r % 4 + 8 * (r // 4), lane % 32
    return 4 * (lane // 16) + r, lane % 16


def mfma_a_reference(m: int, per_lane: int, lane: int, v: int) -> tuple[int, int]:
    return lane % m, per_lane * (lane // m) + v


def mfma_b_reference(n: int, per_lane: int, lane: int, v: int) -> tuple[int, int]:
    """Returns (k, n) of the K x N matrix B."""
    return per_lane * (lane // n) + v, lane % n


# The ROCm blog "Matrix Core Programming on AMD CDNA3 and CDNA4" (sections 5.2, 5.3) gives HIP
# kernels that index row-major A, B, C per thread; their index expressions, copied as a second
# oracle (row-major flat index -> (row, col)).


def blog_16x16x16_f16(tid: int, i: int) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    a_index = 4 * (tid // 16) + 16 * (tid % 16) + i  # A + 4*(tid/16) + 16*(tid%16), vector of 4
    b_index = i * 16 + tid % 16 + (tid // 16) * 64
    c_index = i * 16 + tid % 16 + (tid // 16) * 64
    return divmod(a_index, 16), divmod(b_index, 16), divmod(c_index, 16)


def blog_32x32x16_fp8(tid: int, i: int) -> tuple[tuple[int, int], tuple[int, int]]:
    a_index = (tid // 32) * 8 + (tid % 32) * 16 + i  # vector of 8 fp8
    b_index = i * 32 + tid % 32 + (tid // 32) * 8 * 32
    return divmod(a_index, 16), divmod(b_index, 32)


def blog_32x32_c(tid: int, reg: int) -> tuple[int, int]:
    i, j = divmod(reg, 4)  # c_reg[i * 4 + j]
    c_index = tid % 32 + (tid // 32) * 4 * 32 + 32 * j + i * 32 * 8
    return divmod(c_index, 32)


# --------------------------------------------------------------------------- helpers


def tv_offsets(layout: Layout, threads: int) -> np.ndarray:
    """offsets[thread, value] of a TV layout, by enumeration."""
    values = layout.size // threads
    flat = evaluate_all(layout)  # index = thread + threads * value (column-major)
    return flat.reshape(values, threads).T


def check_against(layout: Layout, threads: int, rows: int, reference) -> None:
    offsets = tv_offsets(layout, threads)
    for t in range(threads):
        for v in range(offsets.shape[1]):
            row, col = reference(t, v)
            assert offsets[t, v] == row + rows * col, (t, v, row, col)


# --------------------------------------------------------------------------- mma.sync


@pytest.mark.parametrize("input_type", ["bf16", "f16"])
def test_mma_sync_m16n8k16_matches_ptx_fragments(input_type: str) -> None:
    atom = atom_tv_layouts(f"mma.sync.m16n8k16.{input_type}")
    assert isinstance(atom, MmaAtom)
    assert atom.mnk == (16, 8, 16) and atom.threads == 32
    assert (atom.a_type, atom.c_type) == (input_type, "f32")
    assert [atom.values_per_thread(x) for x in "abc"] == [8, 4, 4]
    check_against(atom.a, 32, 16, mma_m16n8k16_a_reference)
    # B is stored N x K: offset n + 8 * k; the PTX reference gives (k, n)
    check_against(atom.b, 32, 8, lambda t, v: mma_m16n8k16_b_reference(t, v)[::-1])
    check_against(atom.c, 32, 16, mma_m16n8k16_c_reference)
    assert "9.7.14.5.8" in atom.source


def test_mma_sync_accumulator_golden() -> None:
    atom = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    assert atom.c == Layout.parse("((4,8),(2,2)):((32,1),(16,8))")
    lane0 = [atom.coordinate("c", 0, v) for v in range(4)]
    assert lane0 == [(0, 0), (0, 1), (8, 0), (8, 1)]


# --------------------------------------------------------------------------- wgmma


@pytest.mark.parametrize("n", range(8, 257, 8))
def test_wgmma_accumulator_matches_ptx_figure(n: int) -> None:
    atom = atom_tv_layouts(f"wgmma.m64n{n}k16.bf16")
    assert atom.threads == 128 and atom.c_tile == (64, n)
    assert atom.values_per_thread("c") == n // 2
    assert atom.a is None and atom.b is None
    assert atom.a_in_shared_memory and atom.b_in_shared_memory
    offsets = tv_offsets(atom.c, 128)
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    warp, lane = t // 32, t % 32
    row = warp * 16 + (lane >> 2) + np.where(i % 4 >= 2, 8, 0)
    col = (i // 4) * 8 + (lane % 4) * 2 + i % 2
    assert np.array_equal(offsets, row + 64 * col)
    if n in (8, 24, 256):
        check_against(atom.c, 128, 64, wgmma_d_reference)
    assert is_bijective_onto(atom.c, 64 * n)


def test_wgmma_register_a_matches_ptx_figure() -> None:
    atom = atom_tv_layouts("wgmma.m64n64k16.f16.rs")
    assert atom.a is not None and not atom.a_in_shared_memory and atom.b_in_shared_memory
    assert atom.values_per_thread("a") == 8
    check_against(atom.a, 128, 64, wgmma_a_reference)
    assert is_bijective_onto(atom.a, 64 * 16)


def test_wgmma_warp_rows_repeat_mma_sync_pattern() -> None:
    """Warp w of the warpgroup, columns 0..7, is the mma.sync m16n8 accumulator moved by 16w rows."""
    wg = wgmma_m64nNk16(8, "bf16")
    sync = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    for tid in range(128):
        for v in range(4):
            r, c = wg.coordinate("c", tid, v)
            r0, c0 = sync.coordinate("c", tid % 32, v)
            assert (r, c) == (16 * (tid // 32) + r0, c0)


def test_wgmma_rejects_bad_n() -> None:
    for bad in (0, 4, 12, 264):
        with pytest.raises(LayoutError):
            wgmma_m64nNk16(bad, "bf16")
    with pytest.raises(LayoutError):
        atom_tv_layouts("wgmma.m64n12k16.bf16")
    with pytest.raises(LayoutError):
        wgmma_m64nNk16(64, "tf32")


# --------------------------------------------------------------------------- ldmatrix / stmatrix


@pytest.mark.parametrize("op", ["ldmatrix", "stmatrix"])
@pytest.mark.parametrize("matrices", [1, 2, 4])
@pytest.mark.parametrize("transposed", [False, True])
def test_matrix_copy_fragments_match_ptx(op: str, matrices: int, transposed: bool) -> None:
    name = f"{op}.m8n8.x{matrices}{'.trans' if transposed else ''}.b16"
    atom = atom_tv_layouts(name)
    assert isinstance(atom, MatrixCopyAtom)
    assert atom.tile == (8, 8, matrices) and atom.values_per_thread == 2 * matrices
    assert atom.direction == ("load" if op == "ldmatrix" else "store")
    offsets = tv_offsets(atom.fragment, 32)
    for lane in range(32):
        for value in range(2 * matrices):
            row, col, matrix = ldmatrix_reference(lane, value, transposed)
            assert offsets[lane, value] == row + 8 * col + 64 * matrix
            assert atom.coordinate(lane, value) == (row, col, matrix)
    assert is_bijective_onto(atom.fragment, 64 * matrices)
    # "threads 8j..8j+7 supply addr8j .. addr8j+7": the row starts of matrix j
    for thread in range(8 * matrices):
        assert atom.row_addresses(thread) == (thread % 8) + 64 * (thread // 8)


def test_ldmatrix_x4_feeds_mma_sync_a_and_x2_feeds_b() -> None:
    """ldmatrix.x4 of the four 8x8 quadrants (row-major A) gives exactly mma.sync's A fragment."""
    mma = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    x4 = ldmatrix_atom(4)
    for lane in range(32):
        for value in range(8):
            row, col, matrix = x4.coordinate(lane, value)
            # quadrant order: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), ...
            placed = (row + 8 * (matrix % 2), col + 8 * (matrix // 2))
            assert placed == mma.coordinate("a", lane, value)
    x2 = ldmatrix_atom(2)
    for lane in range(32):
        for value in range(4):
            row, col, matrix = x2.coordinate(lane, value)  # B stored N-rows x K-contiguous
            assert (row, col + 8 * matrix) == mma.coordinate("b", lane, value)


# --------------------------------------------------------------------------- MFMA


MFMA_CASES = [
    ("v_mfma_f32_32x32x8_bf16", 32, 8, 4, "bf16"),
    ("v_mfma_f32_32x32x8_f16", 32, 8, 4, "f16"),
    ("v_mfma_f32_16x16x16_bf16", 16, 16, 4, "bf16"),
    ("v_mfma_f32_16x16x16_f16", 16, 16, 4, "f16"),
    ("v_mfma_f32_32x32x16_fp8_fp8", 32, 16, 8, "e4m3fnuz"),
    ("v_mfma_f32_32x32x16_bf8_fp8", 32, 16, 8, "e5m2fnuz"),
    ("v_mfma_f32_16x16x32_fp8_fp8", 16, 32, 8, "e4m3fnuz"),
    ("v_mfma_f32_16x16x32_fp8_bf8", 16, 32, 8, "e4m3fnuz"),
]


@pytest.mark.parametrize(("name", "m", "k", "per_lane", "a_type"), MFMA_CASES)
def test_mfma_matches_cdna3_layouts(name: str, m: int, k: int, per_lane: int, a_type: str) -> None:
    atom = atom_tv_layouts(name)
    assert atom.mnk == (m, m, k) and atom.threads == 64 and atom.arch == "gfx942"
    assert atom.a_type == a_type and atom.c_type == "f32"
    assert atom.values_per_thread("a") == atom.values_per_thread("b") == per_lane
    assert atom.values_per_thread("c") == m * m // 64
    check_against(atom.a, 64, m, lambda t, v: mfma_a_reference(m, per_lane, t, v))
    # B is viewed N x K: offset n + N * k
    check_against(atom.b, 64, m, lambda t, v: mfma_b_reference(m, per_lane, t, v)[::-1])
    check_against(atom.c, 64, m, lambda t, r: mfma_d_reference(m, t, r))
    for operand, tile in (("a", m * k), ("b", m * k), ("c", m * m)):
        assert is_bijective_onto(atom.operand(operand), tile)


def test_mfma_32x32_output_golden() -> None:
    atom = mfma_atom("v_mfma_f32_32x32x8_bf16")
    for lane in range(64):
        for r in range(16):
            row = 4 * (lane // 32) + r % 4 + 8 * (r // 4)
            assert atom.coordinate("c", lane, r) == (row, lane % 32)
    assert atom.coordinate("c", 33, 5) == (4 + 1 + 8, 1)


def test_mfma_against_rocm_blog_kernels() -> None:
    f16 = atom_tv_layouts("v_mfma_f32_16x16x16_f16")
    for tid in range(64):
        for i in range(4):
            a, b, c = blog_16x16x16_f16(tid, i)
            assert f16.coordinate("a", tid, i) == a
            assert f16.coordinate("b", tid, i) == b[::-1]  # blog B is K x N, ours N x K
            assert f16.coordinate("c", tid, i) == c
    fp8 = atom_tv_layouts("v_mfma_f32_32x32x16_fp8_fp8")
    for tid in range(64):
        for i in range(8):
            a, b = blog_32x32x16_fp8(tid, i)
            assert fp8.coordinate("a", tid, i) == a
            assert fp8.coordinate("b", tid, i) == b[::-1]
        for reg in range(16):
            assert fp8.coordinate("c", tid, reg) == blog_32x32_c(tid, reg)


def test_mfma_rejects_unsupported_mnemonics() -> None:
    for bad in (
        "v_mfma_f32_32x32x4_bf16",
        "v_mfma_f32_16x16x16_fp8",
        "v_mfma_f32_32x32x8_bf16_fp8",
        "v_mfma_f32_32x32x2_f32",
        "v_mfma_f32_16x16x32_fp8_f16",
    ):
        with pytest.raises(LayoutError):
            mfma_atom(bad)


# --------------------------------------------------------------------------- registry


def test_every_registered_atom_is_a_bijection_onto_its_tiles() -> None:
    names = atom_names()
    assert len(names) == len(set(names))
    for name in names:
        atom = atom_tv_layouts(name)
        assert atom.name == name
        if isinstance(atom, MmaAtom):
            for operand in "abc":
                layout = atom.operand(operand)
                if layout is None:
                    continue
                rows, cols = atom.tile(operand)
                assert layout.size % atom.threads == 0
                if name.startswith("wgmma") and operand == "c" and atom.n not in (8, 128, 256):
                    continue  # every N is covered by test_wgmma_accumulator_matches_ptx_figure
                assert is_bijective_onto(layout, rows * cols), (name, operand)
        else:
            assert is_bijective_onto(atom.fragment, 64 * atom.matrices)


def test_registry_lookup_and_errors() -> None:
    assert atom_tv_layouts("mma.sync.m16n8k16.bf16") is atom_tv_layouts("mma.sync.m16n8k16.bf16")
    with pytest.raises(LayoutError):
        atom_tv_layouts("mma.sync.m16n8k8.bf16")
    with pytest.raises(LayoutError):
        atom_tv_layouts("ldmatrix.m8n8.x3.b16")
    atom = atom_tv_layouts("mma.sync.m16n8k16.f16")
    with pytest.raises(LayoutError):
        atom.operand("e")
    wg = atom_tv_layouts("wgmma.m64n16k16.bf16")
    with pytest.raises(LayoutError):
        wg.coordinate("b", 0, 0)


def test_coordinates_are_symbolic() -> None:
    atom = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    t = sym.index_symbol("t")
    row, col = atom.coordinate("c", t, 3)
    for lane in range(32):
        got = (sym.evaluate(row, {"t": lane}), sym.evaluate(col, {"t": lane}))
        assert got == mma_m16n8k16_c_reference(lane, 3)
    assert isinstance(row, sympy.Expr)


def test_thread_value_layout_view_partitions_a_tile() -> None:
    atom = atom_tv_layouts("mma.sync.m16n8k16.bf16")
    tv = atom.tv("c")
    assert tv.tiler == (16, 8) and tv.threads == 32 and tv.values == 4
    row_major = Layout((16, 8), (8, 1))  # a 16x8 row-major tile in memory
    for lane in (0, 5, 31):
        part = tv.partition(row_major, lane)
        for v in range(4):
            r, c = mma_m16n8k16_c_reference(lane, v)
            assert part.layout(v) + part.offset == 8 * r + c
