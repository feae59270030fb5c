"""The atom registry: every entry is consistent with its layouts, types and lowering facts."""

from __future__ import annotations

import pytest

from argus.ir import atoms as R
from argus.ir import dtypes as D
from argus.ir.nodes import HandleKind, MemorySpace


def test_every_name_resolves_and_mma_registers_match_layouts():
    for name in R.atom_names():
        spec = R.atom(name)
        assert spec.name in (name, "buffer.load.lds")
        if spec.kind == "mma":
            a, b, c = spec.lowering.registers
            for which, regs in zip("abc", (a, b, c)):
                values = spec.values_per_thread(which)
                assert regs * 32 == values * spec.dtype(which).bits
                if values:
                    assert values * spec.threads == spec.tile(which)[0] * spec.tile(which)[1]
            assert spec.scope.threads == spec.threads


@pytest.mark.parametrize("name, scope, async_class, types, mnk", [
    ("mma.sync.m16n8k16.bf16", R.AtomScope.WARP, R.AsyncClass.SYNC, ("bf16", "bf16", "f32"), (16, 8, 16)),
    ("mma.sync.m16n8k16.f16", R.AtomScope.WARP, R.AsyncClass.SYNC, ("f16", "f16", "f32"), (16, 8, 16)),
    ("wgmma.m64n128k16.bf16", R.AtomScope.WARPGROUP, R.AsyncClass.WGMMA_GROUP, ("bf16", "bf16", "f32"), (64, 128, 16)),
    ("wgmma.m64n64k16.f16.rs", R.AtomScope.WARPGROUP, R.AsyncClass.WGMMA_GROUP, ("f16", "f16", "f32"), (64, 64, 16)),
    ("v_mfma_f32_32x32x8_bf16", R.AtomScope.WAVE64, R.AsyncClass.SYNC, ("bf16", "bf16", "f32"), (32, 32, 8)),
    ("v_mfma_f32_16x16x16_bf16", R.AtomScope.WAVE64, R.AsyncClass.SYNC, ("bf16", "bf16", "f32"), (16, 16, 16)),
    ("v_mfma_f32_32x32x16_fp8_fp8", R.AtomScope.WAVE64, R.AsyncClass.SYNC, ("e4m3fnuz", "e4m3fnuz", "f32"), (32, 32, 16)),
    ("v_mfma_f32_16x16x32_fp8_fp8", R.AtomScope.WAVE64, R.AsyncClass.SYNC, ("e4m3fnuz", "e4m3fnuz", "f32"), (16, 16, 32)),
])
def test_mma_facts(name, scope, async_class, types, mnk):
    spec = R.mma_atom(name)
    assert spec.scope is scope and spec.async_class is async_class
    assert (spec.a_dtype.name, spec.b_dtype.name, spec.acc_dtype.name) == types
    assert spec.mnk == mnk
    family = {"mma.sync": "mma.sync", "wgmma": "wgmma", "mfma": "mfma"}[spec.family]
    combos = D.mma_type_combinations(spec.target, family)
    assert any((c.a, c.b, c.acc) == (spec.a_dtype, spec.b_dtype, spec.acc_dtype) for c in combos)


def test_wgmma_operand_sources():
    assert (R.mma_atom("wgmma.m64n64k16.bf16").a_source, R.mma_atom("wgmma.m64n64k16.bf16").b_source) == ("shared", "shared")
    rs = R.mma_atom("wgmma.m64n64k16.bf16.rs")
    assert (rs.a_source, rs.b_source) == ("registers", "shared")
    assert rs.values_per_thread("a") == 8 and rs.values_per_thread("b") == 0
    assert R.AsyncClass.WGMMA_GROUP.handle_kind is HandleKind.WGMMA_GROUP


def test_copy_atom_facts():
    cp = R.copy_atom("cp.async.16")
    assert cp.async_class.handle_kind is HandleKind.CP_ASYNC_GROUP and cp.zero_fill
    assert cp.src_spaces == {MemorySpace.GLOBAL} and cp.dst_spaces == {MemorySpace.SHARED}
    assert cp.lowering("sm_90a").alignment == 16
    assert R.copy_atom("cp.async.4").access_bytes == (4,)
    tma = R.copy_atom("tma.load")
    assert tma.elected and tma.zero_fill and tma.async_class.handle_kind is HandleKind.MBARRIER_PHASE
    assert R.copy_atom("tma.store").async_class.handle_kind is HandleKind.TMA_STORE_GROUP
    assert R.copy_atom("buffer.load").zero_fill and R.copy_atom("buffer.load").lowering("gfx942")
    assert R.copy_atom("lds.direct") is R.copy_atom("buffer.load.lds")
    ld = R.copy_atom("ldmatrix.m8n8.x4.trans.b16")
    assert ld.matrix is not None and ld.matrix.transposed and ld.scope is R.AtomScope.WARP
    assert not R.copy_atom("sync").is_async
    with pytest.raises(R.AtomError):
        R.copy_atom("tma.load").lowering("gfx942")


def test_unknown_and_misused_names_are_errors_with_hints():
    with pytest.raises(R.AtomError) as err:
        R.mma_atom("mma.sync.m16n8k8.bf16")
    assert err.value.hint and "mma.sync.m16n8k16" in err.value.hint
    with pytest.raises(R.AtomError):
        R.mma_atom("cp.async.16")
    with pytest.raises(R.AtomError):
        R.copy_atom("v_mfma_f32_32x32x8_bf16")
