"""Register allocation, s_waitcnt insertion and wait states on hand-written gfx942 sequences.

The independent hazard checker (``argus.backend_amdgcn.hazards``) is the oracle of the
random-program tests: after insertion it must find nothing (safe), and relaxing any inserted
wait by one must make it find something (minimal).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.backend_amdgcn.hazards import check
from argus.backend_amdgcn.isa import Imm, Inst, Label, LabelRef, RegFile, VirtualReg, render
from argus.backend_amdgcn.regalloc import RegisterBudgetError, allocate, budget_for, intervals
from argus.backend_amdgcn.waitcnt import insert_waitcnts, parse_waitcnt
from argus.backend_amdgcn.waitstates import insert_wait_states

S, V, A = RegFile.SGPR, RegFile.VGPR, RegFile.AGPR


def reg(file, size=1, name="x", align=None, fixed=None):
    return VirtualReg(file, size, name, align or (2 if size > 1 else 1), fixed)


KERNARG = reg(S, 2, "kernarg", fixed=0)


def prologue():
    """base (SGPR pair) and a lane offset (VGPR) every sequence starts from."""
    base, offset = reg(S, 2, "base"), reg(V, 1, "offset")
    return base, offset, [Inst("s_load_dwordx2", (base.all, KERNARG.all, "0x0"), (0,)),
                          Inst("v_mov_b32", (offset[0], Imm(0)), (0,))]


def load(dst, offset, base):
    return Inst("global_load_dword", (dst[0], offset[0], base.all), (0,))


def use(*regs):
    out = reg(V, 1, "use")
    return Inst("v_add_u32", (out[0], regs[0][0], regs[-1][0]), (0,))


def finish(items):
    items = [*items, Inst("s_endpgm")]
    allocation = allocate(items, budget_for(64))
    items = insert_waitcnts(items, allocation.assignment)
    items = insert_wait_states(items, allocation.assignment)
    return items, allocation


def waits(items):
    return [" ".join(map(str, i.operands)) for i in items if isinstance(i, Inst) and i.opcode == "s_waitcnt"]


# --------------------------------------------------------------------------- waitcnt


def test_vector_memory_completes_in_issue_order():
    base, offset, items = prologue()
    x, y, z = reg(V), reg(V), reg(V)
    items += [load(x, offset, base), load(y, offset, base), load(z, offset, base), use(x), use(y), use(z)]
    out, _ = finish(items)
    assert waits(out) == ["lgkmcnt(0)", "vmcnt(2)", "vmcnt(1)", "vmcnt(0)"]


def test_a_store_counts_in_vmcnt():
    base, offset, items = prologue()
    x, data = reg(V), reg(V)
    items += [Inst("v_mov_b32", (data[0], Imm(1)), (0,)), load(x, offset, base),
              Inst("global_store_dword", (offset[0], data[0], base.all)), use(x)]
    out, _ = finish(items)
    assert waits(out)[-1] == "vmcnt(1)"


def test_scalar_loads_return_out_of_order():
    _base, offset, items = prologue()
    s1, s2, lds = reg(S), reg(S), reg(V)
    items += [Inst("s_load_dword", (s1[0], KERNARG.all, "0x8"), (0,)),
              Inst("ds_read_b32", (lds[0], offset[0]), (0,)),
              Inst("s_load_dword", (s2[0], KERNARG.all, "0xc"), (0,)),
              use(lds)]
    out, _ = finish(items)
    assert waits(out)[-1] == "lgkmcnt(0)"  # an s_load is pending: no count is safe but 0


def test_lds_in_order_and_overwrite_waits():
    _base, offset, items = prologue()
    a, b = reg(V), reg(V)
    items += [Inst("s_waitcnt", ("lgkmcnt(0)",)), Inst("ds_read_b32", (a[0], offset[0]), (0,)),
              Inst("ds_read_b32", (b[0], offset[0]), (0,), "offset:4"), use(a),
              Inst("v_mov_b32", (b[0], Imm(3)), (0,))]  # overwriting a pending load's target waits too
    out, _ = finish(items)
    assert waits(out)[-2:] == ["lgkmcnt(1)", "lgkmcnt(0)"]


def test_barrier_waits_for_lds_writes_and_stores_and_direct_loads_for_vmcnt():
    _base, offset, items = prologue()
    data = reg(V)
    rsrc = reg(S, 4, "rsrc", align=4)
    items += [Inst("v_mov_b32", (data[0], Imm(1)), (0,)),
              Inst("s_mov_b64", (rsrc[0:2], Imm(0)), (0,)), Inst("s_mov_b64", (rsrc[2:4], Imm(0)), (0,)),
              Inst("ds_write_b32", (offset[0], data[0])), Inst("s_barrier"),
              Inst("buffer_load_dword", (offset[0], rsrc.all, Imm(0)), (), "offen lds"),
              Inst("ds_read_b32", (data[0], offset[0]), (0,))]
    out, _ = finish(items)
    text = [(i.opcode, " ".join(map(str, i.operands))) for i in out if isinstance(i, Inst)]
    assert ("s_waitcnt", "lgkmcnt(0)") in text[text.index(("s_barrier", "")) - 1:]
    before_read = text[[t[0] for t in text].index("ds_read_b32") - 1]
    assert before_read == ("s_waitcnt", "vmcnt(0)")


def test_loop_carried_load_waits_at_the_loop_head():
    base, offset, items = prologue()
    x, counter = reg(V), reg(S)
    items += [Inst("s_mov_b32", (counter[0], Imm(0)), (0,)), load(x, offset, base), Label(".Lhead"),
              use(x), load(x, offset, base),
              Inst("s_add_i32", (counter[0], counter[0], Imm(1)), (0,)),
              Inst("s_cmp_lt_i32", (counter[0], Imm(4))), Inst("s_cbranch_scc1", (LabelRef(".Lhead"),))]
    out, alloc = finish(items)
    head = next(i for i, it in enumerate(out) if isinstance(it, Label))
    assert isinstance(out[head + 1], Inst) and out[head + 1].opcode == "s_waitcnt"
    assert check(render(out, alloc.assignment)) == []


def test_parse_waitcnt():
    assert parse_waitcnt("vmcnt(3) lgkmcnt(0)").vm == 3
    assert parse_waitcnt("0").lgkm == 0


# --------------------------------------------------------------------------- allocation


def test_values_live_across_a_loop_keep_their_registers():
    base, offset, items = prologue()
    acc, t, counter = reg(V), reg(V), reg(S)
    items += [Inst("v_mov_b32", (acc[0], Imm(0)), (0,)), Inst("s_mov_b32", (counter[0], Imm(0)), (0,)),
              Label(".Lhead"), Inst("v_mov_b32", (t[0], Imm(1)), (0,)),
              Inst("v_add_u32", (acc[0], acc[0], t[0]), (0,)),
              Inst("s_add_i32", (counter[0], counter[0], Imm(1)), (0,)),
              Inst("s_cmp_lt_i32", (counter[0], Imm(4))), Inst("s_cbranch_scc1", (LabelRef(".Lhead"),)),
              Inst("global_store_dword", (offset[0], acc[0], base.all))]
    ivs = intervals([*items, Inst("s_endpgm")])
    head = 4
    assert ivs[acc].start < head and ivs[acc].end >= 8
    out, alloc = finish(items)
    a = alloc.assignment
    assert a[acc] != a[t]
    assert check(render(out, a)) == []


def test_alignment_of_tuples():
    _base, offset, items = prologue()
    pair, quad, single = reg(V, 2), reg(S, 4, align=4), reg(V)
    items += [Inst("v_mov_b32", (single[0], Imm(0)), (0,)), Inst("v_mov_b32", (pair[0], Imm(0)), (0,)),
              Inst("v_mov_b32", (pair[1], Imm(0)), (0,)), Inst("s_mov_b64", (quad[0:2], Imm(0)), (0,)),
              Inst("s_mov_b64", (quad[2:4], Imm(0)), (0,)), use(single, pair),
              Inst("buffer_load_dword", (single[0], offset[0], quad.all, Imm(0)), (0,), "offen")]
    _, alloc = finish(items)
    assert alloc.assignment[pair] % 2 == 0 and alloc.assignment[quad] % 4 == 0


def test_exceeding_the_budget_names_the_live_values():
    base, offset, items = prologue()
    values = [reg(V, 1, f"%r9[{i}] (f32)") for i in range(300)]
    items += [Inst("v_mov_b32", (v[0], Imm(i)), (0,)) for i, v in enumerate(values)]
    items += [Inst("global_store_dword", (offset[0], v[0], base.all)) for v in values]
    with pytest.raises(RegisterBudgetError) as err:
        allocate([*items, Inst("s_endpgm")], budget_for(256), kernel="big")
    text = str(err.value)
    assert "big: 301 VGPRs live" in text and "%r9[0] (f32)" in text and "at most 256 VGPRs" in text


def test_agprs_share_the_unified_file_with_vgprs():
    base, offset, items = prologue()
    acc = reg(A, 256, "accumulators")
    vs = [reg(V, 1, f"v{i}") for i in range(200)]
    items += [Inst("v_accvgpr_write_b32", (acc[0], Imm(0)), (0,))]
    items += [Inst("v_mov_b32", (v[0], Imm(1)), (0,)) for v in vs]
    items += [Inst("global_store_dword", (offset[0], v[0], base.all)) for v in vs]
    items += [Inst("global_store_dword", (offset[0], acc[0], base.all))]
    with pytest.raises(RegisterBudgetError, match="accum_offset"):
        allocate([*items, Inst("s_endpgm")], budget_for(512))  # 8 waves: 256 unified per wave


# --------------------------------------------------------------------------- wait states


def nops_before(items, opcode):
    total, out = 0, []
    for it in items:
        if isinstance(it, Inst) and it.opcode == "s_nop":
            total += it.operands[0].value + 1
        elif isinstance(it, Inst):
            if it.opcode == opcode:
                out.append(total)
            total = 0
    return out


@pytest.mark.parametrize(("mfma", "acc_size", "states"), [("v_mfma_f32_32x32x8_bf16", 16, 11),
                                                         ("v_mfma_f32_16x16x16_bf16", 4, 7),
                                                         ("v_mfma_f32_32x32x16_fp8_fp8", 16, 11),
                                                         ("v_mfma_f32_16x16x32_fp8_fp8", 4, 7)])
def test_mfma_result_read_waits_passes_plus_three(mfma, acc_size, states):
    base, offset, items = prologue()
    a, b, acc, out = reg(V, 2), reg(V, 2), reg(A, acc_size), reg(V)
    items += [Inst("v_mov_b32", (r, Imm(0)), (0,)) for r in (a[0], a[1], b[0], b[1])]
    items += [Inst("v_accvgpr_write_b32", (acc[i], Imm(0)), (0,)) for i in range(acc_size)]
    items += [Inst(mfma, (acc.all, a.all, b.all, acc.all), (0,)), Inst(mfma, (acc.all, a.all, b.all, acc.all), (0,)),
              Inst("v_accvgpr_read_b32", (out[0], acc[3]), (0,)),
              Inst("global_store_dword", (offset[0], out[0], base.all))]
    done, _ = finish(items)
    assert nops_before(done, mfma) == [2, 0]  # VALU write -> MFMA read: 2 states; back-to-back accumulate: 0
    assert nops_before(done, "v_accvgpr_read_b32") == [states]  # LLVM's numbers (test_llvm_oracle)


def test_transcendental_result_and_vcc_reads():
    base, offset, items = prologue()
    x, y, z = reg(V), reg(V), reg(V)
    items += [Inst("v_mov_b32", (x[0], Imm(1.0)), (0,)), Inst("v_exp_f32", (y[0], x[0]), (0,)),
              Inst("v_mul_f32", (z[0], y[0], x[0]), (0,)), Inst("global_store_dword", (offset[0], z[0], base.all))]
    done, _ = finish(items)
    assert nops_before(done, "v_mul_f32") == [1]


# --------------------------------------------------------------------------- random programs


def _program(ops: list[tuple[str, int]]):
    base, offset, items = prologue()
    values: list[VirtualReg] = []
    for kind, k in ops:
        if kind in ("global", "lds", "smem"):
            r = reg(S if kind == "smem" else V)
            if kind == "global":
                items.append(load(r, offset, base))
            elif kind == "lds":
                items.append(Inst("ds_read_b32", (r[0], offset[0]), (0,), f"offset:{4 * k}"))
            else:
                items.append(Inst("s_load_dword", (r[0], KERNARG.all, hex(4 * k)), (0,)))
            values.append(r)
        elif kind == "store" and values:
            v = values[k % len(values)]
            if v.file is V:
                items.append(Inst("global_store_dword", (offset[0], v[0], base.all)))
        elif kind == "use" and values:
            v = values[k % len(values)]
            out = reg(v.file)
            op = "s_add_i32" if v.file is S else "v_add_u32"
            items.append(Inst(op, (out[0], v[0], Imm(1)), (0,)))
            values.append(out)
    for v in values:
        if v.file is V:
            items.append(Inst("global_store_dword", (offset[0], v[0], base.all)))
    return items


OPS = st.lists(st.tuples(st.sampled_from(["global", "lds", "smem", "use", "use", "store"]),
                         st.integers(0, 7)), min_size=1, max_size=14)


@settings(max_examples=40, deadline=None)
@given(OPS)
def test_inserted_waits_are_safe_and_minimal(ops):
    done, alloc = finish(_program(ops))
    text = render(done, alloc.assignment)
    assert [h for h in check(text) if h.kind == "waitcnt"] == []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*s_waitcnt (.*?)\s*(;|$)", line)
        if not m:
            continue
        for counter, n in re.findall(r"(vmcnt|lgkmcnt)\((\d+)\)", m.group(1)):
            maximum = 63 if counter == "vmcnt" else 15
            if int(n) >= maximum:
                continue
            relaxed = line.replace(f"{counter}({n})", f"{counter}({int(n) + 1})")
            mutated = "\n".join([*lines[:i], relaxed, *lines[i + 1:]])
            assert [h for h in check(mutated) if h.kind == "waitcnt"], (
                f"relaxing {counter}({n}) on line {i + 1} is still safe: the wait is not minimal\n{text}")


def test_every_emitted_mnemonic_has_a_class_and_the_mfma_forms_are_listed():
    from argus.backend_amdgcn.isa import EMITTED_MNEMONICS, inst_class

    for mnemonic in EMITTED_MNEMONICS:
        inst_class(mnemonic)
    assert {"v_mfma_f32_32x32x8_bf16", "v_mfma_f32_16x16x16_bf16", "v_mfma_f32_32x32x16_fp8_fp8",
            "v_mfma_f32_16x16x32_fp8_fp8"} <= EMITTED_MNEMONICS
