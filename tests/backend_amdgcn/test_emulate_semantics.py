"""Instruction semantics of the gfx942 emulator on hand-written programs (no LLVM needed), its
coverage of every mnemonic the emitter can produce, and the MFMA lane layouts against the
layout algebra's TV layouts.  Expected values are computed here from the ISA's definitions."""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest

from argus.backend_amdgcn.emulate import EmulationError, KernelImage, handled_ops, launch
from argus.backend_amdgcn.emulate_decode import (
    DecodeError,
    base_mnemonic,
    parse_instruction,
    parse_listing,
)
from argus.backend_amdgcn.emulate_mfma import accumulator_coordinates, mfma_shape, operand_matrix
from argus.backend_amdgcn.emulate_numerics import f32_to_fp8, fma_f32, fp8_table
from argus.backend_amdgcn.isa import EMITTED_MNEMONICS
from argus.ir import numerics

LANES = np.arange(64)


def run(text: str, *, threads: int = 64, lds: int = 0, buffers: int = 1, grid=(1,), extra_args=()):
    """Run a listing whose kernel arguments are ``buffers`` pointers (s[0:1] -> kernarg), each a
    fresh 4 KiB buffer of distinct words; returns (emulation, buffers as uint32 arrays)."""
    args, arrays = [], []
    for i in range(buffers):
        arrays.append(np.arange(1024, dtype=np.uint32) + 1000 * (i + 1))
        args.append({".name": f"p{i}", ".offset": 8 * i, ".size": 8, ".value_kind": "global_buffer"})
    offset = 8 * buffers
    values = list(arrays)
    for j, value in enumerate(extra_args):
        args.append({".name": f"x{j}", ".offset": offset, ".size": 4, ".value_kind": "by_value"})
        offset += 4
        values.append(value)
    image = KernelImage("test", parse_listing(text), threads, lds, (True, False, False), 2, offset, args)
    emulation = launch(image, values, grid)
    return emulation, arrays


PROLOGUE = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v1, 2, v0
"""
STORE_V2 = """
  global_store_dword v1, v2, s[4:5]
  s_endpgm
"""


def lanes_out(out: np.ndarray) -> np.ndarray:
    return out[:64]


# --------------------------------------------------------------------------- coverage


def test_every_emitted_mnemonic_is_executed():
    handled = handled_ops()
    missing = sorted(m for m in EMITTED_MNEMONICS if base_mnemonic(m)[0] not in handled)
    assert missing == [], f"the emitter can produce instructions the emulator does not know: {missing}"


def test_unknown_instruction_is_an_error_naming_wave_and_instruction():
    with pytest.raises(EmulationError, match=r"wave 0: 0x0000: v_frobnicate_b32 v1, v0: .*not an instruction"):
        run("  v_frobnicate_b32 v1, v0\n  s_endpgm\n")


def test_bad_operand_is_a_decode_error():
    with pytest.raises(DecodeError, match="q17"):
        parse_instruction("v_mov_b32 v1, q17")


@pytest.mark.parametrize("line, why", [
    ("v_add_u32 v2, v0, v0 clamp", "modifier clamp of v_add_u32"),
    ("v_cndmask_b32_dpp v2, v0, v0 quad_perm:[0,0,0,0] row_mask:0xf bank_mask:0xf", "DPP form of v_cndmask_b32"),
    ("v_add_u32_sdwa v2, v0, v0 src0_sel:BYTE_1", "SDWA form of v_add_u32"),
    ("v_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[0:1], 0 cbsz:1", "cbsz broadcast"),
])
def test_unmodelled_forms_are_refused_not_ignored(line, why):
    with pytest.raises(EmulationError, match=why):
        run(f"  {line}\n  s_endpgm\n")


def test_running_off_the_end_is_an_error():
    with pytest.raises(EmulationError, match="without s_endpgm"):
        run("  v_mov_b32 v1, 0\n")


def test_unmapped_address_is_a_fault_with_the_lane():
    text = PROLOGUE + "  v_mov_b32 v2, 7\n  v_add_u32 v1, 0x10000, v1\n" + STORE_V2
    with pytest.raises(EmulationError, match=r"lane 0: .*global_store_dword.*unmapped address"):
        run(text)


# --------------------------------------------------------------------------- scalar ALU and control


def test_64_bit_scalar_carry_chain_and_compare_loop():
    # s[6:7] = 0xffffffff + 1 (64-bit), then a loop adds 3 five times
    text = PROLOGUE + """
  s_mov_b32 s6, -1
  s_mov_b32 s7, 0
  s_add_u32 s6, s6, 1
  s_addc_u32 s7, s7, 0
  s_mov_b32 s8, 0
  s_mov_b32 s9, 0
.Lloop:
  s_add_i32 s8, s8, 3
  s_add_i32 s9, s9, 1
  s_cmp_lt_i32 s9, 5
  s_cbranch_scc1 .Lloop
  s_sub_u32 s10, 0, 1
  s_subb_u32 s11, 0, 0
  v_mov_b32 v2, s6
  global_store_dword v1, v2, s[4:5]
  v_mov_b32 v2, s7
  global_store_dword v1, v2, s[4:5] offset:256
  v_mov_b32 v2, s8
  global_store_dword v1, v2, s[4:5] offset:512
  v_mov_b32 v2, s11
  global_store_dword v1, v2, s[4:5] offset:768
  s_endpgm
"""
    _, (out,) = run(text)
    assert np.all(out[0:64] == 0) and np.all(out[64:128] == 1)
    assert np.all(out[128:192] == 15) and np.all(out[192:256] == 0xFFFFFFFF)


def test_exec_regions_and_saveexec():
    text = PROLOGUE + """
  v_mov_b32 v2, 5
  v_cmp_lt_u32_e64 s[6:7], v0, 10
  s_and_saveexec_b64 s[8:9], s[6:7]
  v_mov_b32 v2, 9
  s_mov_b64 exec, s[8:9]
""" + STORE_V2
    _, (out,) = run(text)
    assert list(out[:12]) == [9] * 10 + [5, 5] and np.all(out[10:64] == 5)


def test_vopc_e32_writes_vcc_and_cndmask_e32_reads_it():
    text = PROLOGUE + """
  v_mov_b32 v3, 1
  v_mov_b32 v4, 2
  v_cmp_gt_i32_e32 vcc, 20, v0
  v_cndmask_b32_e32 v2, v3, v4, vcc
""" + STORE_V2
    _, (out,) = run(text)
    assert np.array_equal(out[:64], np.where(LANES < 20, 2, 1))


def test_partial_wave_leaves_dead_lanes_alone():
    _, (out,) = run(PROLOGUE + "  v_mov_b32 v2, 1\n" + STORE_V2, threads=40)
    assert np.all(out[:40] == 1) and np.all(out[40:64] == np.arange(40, 64) + 1000)


# --------------------------------------------------------------------------- vector ALU


def test_mad_u64_u32_lshl_add_u64_and_mbcnt():
    text = PROLOGUE + """
  v_mov_b32 v4, -1
  v_mov_b32 v5, 0
  v_mad_u64_u32 v[6:7], s[10:11], v0, v4, v[4:5]
  v_lshl_add_u64 v[8:9], v[6:7], 1, v[4:5]
  v_mbcnt_lo_u32_b32 v3, -1, 0
  v_mbcnt_hi_u32_b32 v3, -1, v3
  global_store_dword v1, v7, s[4:5]
  global_store_dword v1, v8, s[4:5] offset:256
  global_store_dword v1, v3, s[4:5] offset:512
  s_endpgm
"""
    _, (out,) = run(text)
    wide = LANES.astype(object) * 0xFFFFFFFF + 0xFFFFFFFF
    assert [int(x) for x in out[:64]] == [int(w >> 32) for w in wide]
    shifted = [(int(w) * 2 + 0xFFFFFFFF) & 0xFFFFFFFF for w in wide]
    assert [int(x) for x in out[64:128]] == shifted
    assert np.all(out[128:192] == LANES)


def test_fma_is_correctly_rounded():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(4000).astype(np.float32) for _ in range(3))
    c = (c * np.float32(1e-3)).astype(np.float32)  # cancellation-heavy and tie-prone cases
    got = fma_f32(a, b, c)
    for x, y, z, r in zip(a[:400], b[:400], c[:400], got[:400]):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        nearest = np.float32(float(exact))
        # float(Fraction) is correctly rounded to binary64; the binary32 candidates around it:
        candidates = [nearest, np.nextafter(nearest, np.float32(np.inf)), np.nextafter(nearest, np.float32(-np.inf))]
        best = min(candidates, key=lambda v: (abs(Fraction(float(v)) - exact), int(np.float32(v).view(np.uint32)) & 1))
        assert r == best


@pytest.mark.parametrize("num, den", [(1.0, 3.0), (3.0e38, 1.0e-3), (1.0e-40, 3.0), (2.5, 1.0e-42),
                                      (-7.0, 2.0e-39), (1.0e30, 1.0e-30), (0.0, 5.0), (5.0, 0.0)])
def test_division_sequence_with_scaling(num, den):
    """The emitter's f32 division (div_scale, rcp, fma refinement, div_fmas, div_fixup) gives the
    correctly rounded quotient, including the scaled cases the ISA's div_scale handles."""
    bits = [struct.unpack("<I", struct.pack("<f", v))[0] for v in (num, den)]
    text = PROLOGUE + f"""
  v_mov_b32 v8, {bits[0]:#x}
  v_mov_b32 v0, {bits[1]:#x}
  v_div_scale_f32 v10, s[2:3], v0, v0, v8
  v_div_scale_f32 v11, vcc, v8, v0, v8
  v_rcp_f32 v3, v10
  v_fma_f32 v4, -v10, v3, 1.0
  v_fma_f32 v5, v4, v3, v3
  v_mul_f32 v3, v11, v5
  v_fma_f32 v4, -v10, v3, v11
  v_fma_f32 v7, v4, v5, v3
  v_fma_f32 v3, -v10, v7, v11
  v_div_fmas_f32 v10, v3, v5, v7
  v_div_fixup_f32 v2, v10, v0, v8
""" + STORE_V2
    _, (out,) = run(text)
    got = out[:64].view(np.float32)
    with np.errstate(all="ignore"):
        expected = np.float32(np.float64(np.float32(num)) / np.float64(np.float32(den)))
    if np.isnan(expected):
        assert np.all(np.isnan(got))
    else:
        assert np.all(got == expected), (got[0], expected)


def test_fnuz_tables_and_conversion_agree_with_the_reference_numerics():
    for kind, name in (("fp8", "e4m3fnuz"), ("bf8", "e5m2fnuz")):
        codes = np.arange(256)
        mine = fp8_table(kind).astype(np.float64)
        theirs = numerics.from_bits(name, codes)
        assert np.array_equal(np.isnan(mine), np.isnan(theirs))
        assert np.array_equal(mine[~np.isnan(mine)], theirs[~np.isnan(theirs)])
        rng = np.random.default_rng(1)
        top = float(np.nanmax(mine))
        x = np.concatenate([rng.standard_normal(3000) * top / 4, mine[~np.isnan(mine)],
                            (mine[1:0x7f] + mine[2:0x80]) / 2]).astype(np.float32)  # every tie
        x = x[np.abs(x) <= top]
        assert np.array_equal(f32_to_fp8(x, kind, saturate=False), numerics.to_bits(name, x).astype(np.uint32))
        assert f32_to_fp8(np.array([np.nan, 1e9, -1e9], np.float32), kind, saturate=False).tolist() == [0x80] * 3
        assert f32_to_fp8(np.array([1e9, -1e9], np.float32), kind, saturate=True).tolist() == [0x7F, 0xFF]


# --------------------------------------------------------------------------- DPP and cross-lane


@pytest.mark.parametrize("control, source, valid", [
    ("quad_perm:[1,0,3,2]", LANES ^ 1, np.ones(64, bool)),
    ("quad_perm:[2,3,0,1]", LANES ^ 2, np.ones(64, bool)),
    ("row_shr:1", LANES - 1, LANES % 16 >= 1),
    ("row_shl:3", LANES + 3, LANES % 16 < 13),
    ("row_ror:4", LANES - LANES % 16 + (LANES % 16 - 4) % 16, np.ones(64, bool)),
    ("row_mirror", LANES - LANES % 16 + 15 - LANES % 16, np.ones(64, bool)),
])
@pytest.mark.parametrize("bound", ["", " bound_ctrl:1"])
def test_dpp_lane_selection(control, source, valid, bound):
    text = PROLOGUE + f"""
  v_mov_b32 v3, 100
  v_add_u32 v3, v3, v0
  v_mov_b32 v2, 7
  v_add_u32_dpp v2, v3, v0 {control} row_mask:0xf bank_mask:0xf{bound}
""" + STORE_V2
    _, (out,) = run(text)
    # DPP selects src0 from another lane of the row; an invalid source lane reads 0 with
    # bound_ctrl and otherwise leaves the destination unwritten
    src = (100 + LANES).astype(np.int64)
    selected = src[np.clip(source, 0, 63)]
    want = np.where(valid, selected + LANES, LANES if bound else 7)
    assert np.array_equal(out[:64].astype(np.int64), want)


def test_dpp_row_and_bank_masks():
    text = PROLOGUE + """
  v_mov_b32 v2, 7
  v_max_i32_dpp v2, v0, v0 quad_perm:[3,2,1,0] row_mask:0x5 bank_mask:0x3
""" + STORE_V2
    _, (out,) = run(text)
    row_on = ((0x5 >> (LANES // 16)) & 1) == 1
    bank_on = ((0x3 >> ((LANES // 4) % 4)) & 1) == 1
    perm = LANES - LANES % 4 + 3 - LANES % 4
    want = np.where(row_on & bank_on, np.maximum(perm, LANES), 7)
    assert np.array_equal(out[:64], want)


@pytest.mark.parametrize("offset, source", [
    ("swizzle(SWAP,8)", LANES ^ 8),
    ("swizzle(SWAP,16)", LANES ^ 16),
    ('swizzle(BITMASK_PERM,"pppip")', LANES ^ 2),
    ("swizzle(QUAD_PERM,0,0,3,1)", LANES - LANES % 4 + np.array([0, 0, 3, 1])[LANES % 4]),
    ("swizzle(BROADCAST,8,5)", LANES - LANES % 8 + 5),
    ("swizzle(REVERSE,4)", LANES - LANES % 4 + 3 - LANES % 4),
])
def test_ds_swizzle_patterns(offset, source):
    text = PROLOGUE + f"""
  v_add_u32 v3, 1000, v0
  ds_swizzle_b32 v2, v3 offset:{offset}
  s_waitcnt lgkmcnt(0)
""" + STORE_V2
    _, (out,) = run(text)
    assert np.array_equal(out[:64], 1000 + source)


def test_ds_bpermute_reads_the_addressed_lane():
    text = PROLOGUE + """
  v_add_u32 v3, 1000, v0
  v_sub_u32 v4, 63, v0
  v_lshlrev_b32 v4, 2, v4
  ds_bpermute_b32 v2, v4, v3
  s_waitcnt lgkmcnt(0)
""" + STORE_V2
    _, (out,) = run(text)
    assert np.array_equal(out[:64], 1000 + 63 - LANES)


def test_ds_permute_writes_to_the_addressed_lane():
    text = PROLOGUE + """
  v_add_u32 v3, 1000, v0
  v_sub_u32 v4, 63, v0
  v_lshlrev_b32 v4, 2, v4
  ds_permute_b32 v2, v4, v3
  s_waitcnt lgkmcnt(0)
""" + STORE_V2
    _, (out,) = run(text)
    assert np.array_equal(out[:64], 1000 + 63 - LANES)


# --------------------------------------------------------------------------- memory


def test_buffer_out_of_range_reads_zero_per_dword():
    # num_records = 100 bytes: lane l loads 16 bytes at 16*l; dwords past byte 100 read 0
    text = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  s_mov_b32 s8, s4
  s_and_b32 s9, s5, 0xffff
  s_mov_b32 s10, 100
  s_mov_b32 s11, 0x20000
  v_lshlrev_b32 v1, 4, v0
  buffer_load_dwordx4 v[4:7], v1, s[8:11], 0 offen
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 v1, 2, v0
  global_store_dword v1, v4, s[4:5] offset:2048
  global_store_dword v1, v7, s[4:5] offset:2304
  s_endpgm
"""
    _, (out,) = run(text)
    first = out[512:576]
    last = out[576:640]
    base = np.arange(1024) + 1000
    assert np.array_equal(first, np.where(16 * LANES + 4 <= 100, base[4 * LANES % 1024], 0))
    assert np.array_equal(last, np.where(16 * LANES + 16 <= 100, base[(4 * LANES + 3) % 1024], 0))


def test_buffer_stores_out_of_range_are_dropped():
    # num_records = 72 bytes: lane l stores 8 bytes at 8*l; dwords past byte 72 are dropped
    text = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  s_mov_b32 s8, s4
  s_and_b32 s9, s5, 0xffff
  s_mov_b32 s10, 72
  s_mov_b32 s11, 0x20000
  v_lshlrev_b32 v1, 3, v0
  v_mov_b32 v2, 7
  v_mov_b32 v3, 9
  buffer_store_dwordx2 v[2:3], v1, s[8:11], 0 offen
  s_endpgm
"""
    _, (out,) = run(text)
    words = np.arange(1024) + 1000
    words[:18] = [7, 9] * 9  # bytes 0..71
    assert np.array_equal(out, words)


def test_lds_past_the_workgroup_allocation_is_reported_and_reads_zero():
    text = PROLOGUE + """
  v_mov_b32 v3, 5
  ds_write_b32 v1, v3
  s_waitcnt lgkmcnt(0)
  ds_read_b32 v2, v1 offset:192
  s_waitcnt lgkmcnt(0)
""" + STORE_V2
    emulation, (out,) = run(text, lds=256)
    (finding,) = emulation.findings
    assert finding.kind == "lds-out-of-range" and finding.lane == 16 and "ds_read_b32" in finding.instruction
    assert np.array_equal(out[:64], np.where(4 * LANES + 192 + 4 <= 256, 5, 0))


def test_global_atomics_apply_lane_by_lane():
    text = PROLOGUE + """
  v_mov_b32 v1, 0
  v_mov_b32 v3, 1
  global_atomic_add v2, v1, v3, s[4:5] sc0
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 v1, 2, v0
  global_store_dword v1, v2, s[4:5] offset:256
  s_endpgm
"""
    _, (out,) = run(text)
    assert out[0] == 1000 + 64
    assert np.array_equal(out[64:128], 1000 + LANES)  # each lane sees the previous lanes' adds


# --------------------------------------------------------------------------- waits and barriers


def test_smem_completes_out_of_order_under_lgkmcnt():
    # an LDS read and a scalar load in flight: lgkmcnt(1) does not complete the scalar load
    text = PROLOGUE + """
  ds_read_b32 v2, v1
  s_load_dword s6, s[0:1], 0x0
  s_waitcnt lgkmcnt(1)
  v_mov_b32 v5, s6
  s_waitcnt lgkmcnt(0)
""" + STORE_V2
    emulation, _ = run(text, lds=256)
    (finding,) = emulation.findings
    assert finding.kind == "use-before-waitcnt" and "s6" in finding.message and "s_load_dword" in finding.producer
    assert "v_mov_b32 v5, s6" in finding.instruction


def test_vmcnt_retires_in_order():
    text = PROLOGUE + """
  global_load_dword v2, v1, s[4:5]
  global_load_dword v3, v1, s[4:5] offset:256
  s_waitcnt vmcnt(1)
  v_mov_b32 v4, v2
  v_mov_b32 v4, v3
  s_waitcnt vmcnt(0)
""" + STORE_V2
    emulation, _ = run(text)
    (finding,) = emulation.findings
    assert "v_mov_b32 v4, v3" in finding.instruction and finding.lane == 0


def test_barrier_orders_lds_between_waves():
    # wave w writes slot t, then reads slot (t + 64) % 128 (the other wave's) after the barrier
    body = """
  v_mov_b32 v3, 0x80
  v_add_u32 v3, v3, v0
  ds_write_b32 v1, v3
  s_waitcnt lgkmcnt(0)
{barrier}
  v_add_u32 v4, 64, v0
  v_and_b32 v4, 0x7f, v4
  v_lshlrev_b32 v4, 2, v4
  ds_read_b32 v2, v4
  s_waitcnt lgkmcnt(0)
"""
    emulation, (out,) = run(PROLOGUE + body.format(barrier="  s_barrier") + STORE_V2, threads=128, lds=512)
    assert emulation.findings == []
    assert np.array_equal(out[:128], 0x80 + (np.arange(128) + 64) % 128)
    emulation, _ = run(PROLOGUE + body.format(barrier="") + STORE_V2, threads=128, lds=512)
    races = [f for f in emulation.findings if f.kind == "lds-race"]
    # whichever wave runs first, the other's access is the unordered one
    assert races and all(("ds_read_b32" in f.instruction or "ds_write_b32" in f.instruction) and
                         f.lane is not None for f in races)


# --------------------------------------------------------------------------- MFMA layouts


@pytest.mark.parametrize("name", sorted(m for m in EMITTED_MNEMONICS if m.startswith("v_mfma")))
def test_mfma_layouts_match_the_layout_algebra(name):
    """Each lane's operand and accumulator elements sit where argus.layout_algebra.atoms says."""
    from argus.layout_algebra.atoms import mfma_atom

    atom = mfma_atom(name)
    shape = mfma_shape(name)
    assert (shape.m, shape.n, shape.k) == atom.mnk
    one = {"bf16": 0x3F80, "f16": 0x3C00, "fp8": 0x40, "bf8": 0x3C}
    for which, kind in (("a", shape.a_type), ("b", shape.b_type)):
        bits = 8 if kind in ("fp8", "bf8") else 16
        for lane in range(0, 64, 7):
            for value in range(shape.per_lane):
                words = np.zeros((2, 64), np.uint32)
                packed = one[kind] << (bits * value)
                words[0, lane] = packed & 0xFFFFFFFF
                words[1, lane] = packed >> 32
                matrix = operand_matrix(shape, words, which)
                (pos,) = zip(*np.nonzero(matrix))
                row, col = atom.coordinate(which, lane, value)  # a: (m, k); b: (n, k)
                assert pos == ((int(row), int(col)) if which == "a" else (int(col), int(row)))
    rows, cols = accumulator_coordinates(shape.m)
    for lane in range(64):
        for reg in range(shape.acc_regs):
            assert (rows[reg, lane], cols[reg, lane]) == tuple(int(x) for x in atom.coordinate("c", lane, reg))
