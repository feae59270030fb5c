"""The PTX backend on every NVIDIA example: it lowers, ptxas assembles it, and the SASS holds
the instructions the kernel asked for (HGMMA for wgmma, UTMALDG for TMA, LDGSTS for cp.async,
HMMA for mma.sync).  A golden file pins the PTX of the smallest example."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

import pytest
import sympy

import argus.spec as A
from argus.backend_ptx import PtxError, emit_ptx
from argus.backend_ptx.assemble import build_cubin, disassemble
from argus.errors import ArgusError
from argus.ir import lowering as L
from argus.layout_algebra.hopper import SwizzleMode
from argus.spec.kernel import Kernel, kernel_hash
from argus.toolchain import find_ptxas

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(ROOT / "examples"))

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")

# example -> (targets, SASS instructions that must appear)
EXAMPLES = {
    "vector_add": (("sm_90a",), ("LDG.E", "STG.E")),
    "transpose_swizzled": (("sm_90a",), ("STS", "LDS", "BAR.SYNC")),
    "row_softmax": (("sm_90a",), ("LDG.E.128", "SHFL.BFLY", "MUFU.EX2", "STG.E.128")),
    "gemm_mma_sync": (("sm_80", "sm_90a"), ("HMMA.16816.F32.BF16", "LDG.E.128")),
    "gemm_cp_async": (("sm_80", "sm_90a"), ("HMMA.16816.F32.BF16", "LDGSTS.E.BYPASS.128", "LDGDEPBAR")),
    "gemm_tma_wgmma": (("sm_90a",), ("HGMMA.64x64x16.F32.BF16", "UTMALDG.2D", "SYNCS.PHASECHK")),
    "gemm_tma_wgmma_nn": (("sm_90a",), ("HGMMA.64x128x16.F32.BF16", "UTMALDG.2D")),  # B read MN-major
    "gemm_warp_specialized": (("sm_90a",), ("HGMMA.64x64x16.F32.BF16", "UTMALDG.2D", "USETMAXREG")),
    # multicast TMA into both blocks, remote release of the peer's empty barrier, cluster barrier
    "gemm_cluster_multicast": (("sm_90a",), ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "UCGABAR_WAIT")),
}


def _kernel(module_name: str):
    module = importlib.import_module(module_name)
    (k,) = [v for v in vars(module).values() if isinstance(v, Kernel)]
    return k.specialize()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))


@needs_ptxas
@pytest.mark.parametrize("module_name,target", [(m, t) for m, (ts, _) in EXAMPLES.items() for t in ts])
def test_every_nvidia_example_assembles_and_its_sass_has_the_atoms(module_name, target):
    kernel = _kernel(module_name)
    ptx = emit_ptx(kernel, target, root=str(ROOT))
    cubin = build_cubin(ptx, kernel_hash(kernel))
    assert "spill" not in cubin.log or "0 bytes spill stores" in cubin.log
    assert "warning" not in cubin.log.lower(), cubin.log
    try:
        sass = disassemble(cubin.image)
    except Exception as err:  # no disassembler: assembling is the test
        pytest.skip(f"no SASS disassembler: {err}")
    for instruction in EXAMPLES[module_name][1]:
        assert instruction in sass, f"{instruction} missing from the SASS of {module_name} ({target})"


def test_ptx_is_readable_with_source_lines():
    ptx = emit_ptx(_kernel("gemm_tma_wgmma"), "sm_90a", root=str(ROOT)).text
    assert "// examples/gemm_tma_wgmma.py:43" in ptx
    assert ".version 8.0" in ptx and ".target sm_90a" in ptx
    assert "wgmma.fence.sync.aligned;" in ptx and "wgmma.wait_group.sync.aligned 0;" in ptx
    assert "cvta.param.u64" in ptx  # the tensor map's generic address
    assert ".param .align 64 .b8 p_tmap0[128]" in ptx


def test_golden_vector_add_ptx():
    text = emit_ptx(_kernel("vector_add"), "sm_90a", root=str(ROOT)).text
    path = GOLDEN / "vector_add.ptx"
    if os.environ.get("ARGUS_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text()


def test_hopper_atoms_are_refused_for_sm_80():
    with pytest.raises(PtxError, match="sm_90a"):
        emit_ptx(_kernel("gemm_tma_wgmma"), "sm_80")


def test_wgmmas_before_an_explicit_commit_leave_completion_to_the_kernels_wait():
    ptx = emit_ptx(_kernel("gemm_tma_wgmma"), "sm_90a").text
    # four K steps per stage, in both loops of the pipeline (steady state and drain)
    assert ptx.count("wgmma.mma_async") == 8
    assert ptx.count("wgmma.fence.sync.aligned;") == 2
    # the example's own wgmma_commit / wgmma_wait(0) complete the group (both loops): the
    # backend adds no commit or wait of its own
    assert ptx.count("wgmma.commit_group.sync.aligned;") == 2
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 2
    for body in ptx.split("wgmma.fence.sync.aligned;")[1:]:
        issue = body.split("wgmma.commit_group")[0]
        assert issue.count("wgmma.mma_async") == 4 and "wait_group" not in issue


SWIZZLE_128B = SwizzleMode.B128.element_swizzle(2)


@A.kernel(threads=128, grid=lambda: (1,))
def one_tile(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N")):
    """One 64x64 tile: four wgmmas with no explicit commit (the backend completes them)."""
    sa = A.shared(A.bf16, (64, 64), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (64, 64), swizzle=SWIZZLE_128B)
    bar = A.mbarrier(1)
    A.mbarrier_init(bar)
    A.arrive_expect_tx(bar, A.transaction_bytes(sa) + A.transaction_bytes(sb))
    A.tma_load(a.tile((64, 64), (0, 0)), sa, bar)
    A.tma_load(b.tile((64, 64), (0, 0)), sb, bar)
    A.wait(bar, phase=0)
    acc = A.mma_fragment("wgmma.m64n64k16.bf16", "c")
    for ks in A.range(4, unroll=True):
        A.mma("wgmma.m64n64k16.bf16", sa.tile((64, 16), (0, ks)), sb.tile((64, 16), (0, ks)), acc)
    A.store(acc, A.mma_partition("wgmma.m64n64k16.bf16", "c", c.tile((64, 64), (0, 0))))


def test_wgmmas_without_a_commit_get_their_own_fence_commit_and_wait():
    ptx = emit_ptx(one_tile.specialize(), "sm_90a").text
    _, rest = ptx.split("wgmma.fence.sync.aligned;")
    assert rest.count("wgmma.mma_async") == 4
    tail = rest.split("wgmma.mma_async")[-1]
    assert "wgmma.commit_group.sync.aligned;" in tail and "wgmma.wait_group.sync.aligned 0;" in tail
    assert tail.index("wait_group") < tail.index("st.global")


def test_predicates_guard_loads_and_tail_elements():
    ptx = emit_ptx(_kernel("vector_add"), "sm_90a").text
    assert re.search(r"setp\.lt\.s32 %p\d+, %r\d+, %r\d+;", ptx)
    assert re.search(r"@%p\d+ ld\.global\.f32", ptx)
    assert re.search(r"@%p\d+ st\.global\.f32", ptx)


def test_vector_accesses_are_16_bytes_where_alignment_is_proved():
    ptx = emit_ptx(_kernel("row_softmax"), "sm_90a").text
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx
    cp = emit_ptx(_kernel("gemm_cp_async"), "sm_90a").text
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+(\+\d+)?\], 16, %r\d+;", cp)


def test_floor_division_keeps_its_sign_correction_where_the_dividend_may_be_negative():
    from argus.backend_ptx.emit import _Emitter

    lowered = L.lower_kernel(_kernel("vector_add"))
    emitter = _Emitter(lowered, "sm_90a", "8.0", None)
    emitter.prologue()
    tid = lowered.kernel.thread_id
    from argus import symbolic

    before = len(emitter.lines)
    emitter.value(lowered.facts.truncating(symbolic.FloorDiv(tid - 7, 3)), 32)
    floor_code = "\n".join(emitter.lines[before:])
    assert "div.s32" in floor_code and "selp" in floor_code  # floor correction
    before = len(emitter.lines)
    emitter.value(lowered.facts.truncating(symbolic.FloorDiv(tid + 7, 3)), 32)
    trunc_code = "\n".join(emitter.lines[before:])
    assert "div.u32" in trunc_code and "selp" not in trunc_code  # proved non-negative: plain unsigned div
    before = len(emitter.lines)
    emitter.value(sympy.Mod(tid - 7, 16), 32)
    assert "and.b32" in "\n".join(emitter.lines[before:])  # power of two: a mask is floor modulo


@pytest.mark.parametrize("d", [3, 5, 6, 7, 132, 1000003, 2**40 + 3])
def test_unsigned_64_bit_division_by_a_constant_is_a_multiply_high(d):
    import random

    from argus.backend_ptx.emit import u64_division_magic

    m, e = u64_division_magic(d)
    assert 0 < m < 2**64
    rng = random.Random(d)
    for x in [0, 1, d - 1, d, d + 1, 2**63 - 1, 2**63 - d] + [rng.randrange(2**63) for _ in range(2000)]:
        assert ((x * m) >> 64) >> (e - 1) == x // d



@A.kernel(threads=128, grid=lambda: (1,))
def one_tile_register_a(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N")):
    """One 64x64 tile with A in registers (``ldmatrix`` per warp, ``wgmma ... .rs``)."""
    sa = A.shared(A.bf16, (64, 64), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (64, 64), swizzle=SWIZZLE_128B)
    bar = A.mbarrier(1)
    A.mbarrier_init(bar)
    A.arrive_expect_tx(bar, A.transaction_bytes(sa) + A.transaction_bytes(sb))
    A.tma_load(a.tile((64, 64), (0, 0)), sa, bar)
    A.tma_load(b.tile((64, 64), (0, 0)), sb, bar)
    A.wait(bar, phase=0)
    acc = A.mma_fragment("wgmma.m64n64k16.bf16", "c")
    frags = [A.ldmatrix(sa.tile((16, 16), (A.warp_id() % 4, ks))) for ks in range(4)]
    for ks in range(4):
        A.mma("wgmma.m64n64k16.bf16.rs", frags[ks], sb.tile((64, 16), (0, ks)), acc)
    A.store(acc, A.mma_partition("wgmma.m64n64k16.bf16", "c", c.tile((64, 64), (0, 0))))


def test_register_a_operands_are_packed_before_the_wgmma_fence():
    # a register write between wgmma.fence and the wgmma reading it is a hazard ptxas repairs
    # by inserting a fence of its own and serializing every wgmma (its C7519 note)
    ptx = emit_ptx(one_tile_register_a.specialize(), "sm_90a")
    _, run = ptx.text.split("wgmma.fence.sync.aligned;")
    issue = run.split("wgmma.commit_group")[0]
    assert issue.count("wgmma.mma_async") == 4 and "mov.b32" not in issue and "ldmatrix" not in issue
    if find_ptxas() is not None:
        cubin = build_cubin(ptx, "register-a-" + ptx.name)
        assert cubin.performance_issues == [], cubin.log


def test_the_ptx_does_not_depend_on_the_hash_seed():
    """sympy orders the terms of some sums by hash; the emitter orders them itself, so a kernel's
    PTX is the same text under every ``PYTHONHASHSEED`` (reproducible builds, cache keys)."""
    import subprocess
    import sys

    script = ("import hashlib; from argus.kernels.gemm import gemm_kernel, GemmConfig; "
              "from argus.backend_ptx.emit import emit_ptx; "
              "k = gemm_kernel('bf16', 'f32').specialize(**GemmConfig(BN=64, STAGES=2).consts(), SMS=132, EPILOGUE='direct'); "
              "print(hashlib.sha256(emit_ptx(k, 'sm_90a').text.encode()).hexdigest())")
    runs = [subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed}, cwd=ROOT,
                             stdout=subprocess.PIPE, text=True) for seed in ("1", "2", "3", "4")]
    digests = {run.communicate()[0].strip() for run in runs}
    assert all(run.returncode == 0 for run in runs)
    assert len(digests) == 1 and all(len(d) == 64 for d in digests)


def test_a_floor_division_of_a_non_negative_dividend_reuses_the_truncating_value():
    """The lowering rewrites floor division to truncating division where it proves the dividend
    non-negative, but an expression it left as written can reach the emitter as ``FloorDiv``:
    the emitter must treat both spellings as one value (so a quotient hoisted out of a loop is
    not computed again, with a signed 64-bit division, inside it)."""
    from argus import symbolic
    from argus.backend_ptx.emit import _Emitter

    lowered = L.lower_kernel(_kernel("vector_add"))
    emitter = _Emitter(lowered, "sm_90a", "8.0", None)
    emitter.prologue()
    n = lowered.sizes[0]
    dividend = (lowered.kernel.block_ids[0] + 1) * n  # non-negative, 64 bits wide
    assert lowered.facts.nonnegative(dividend) and lowered.facts.bits(dividend) == 64
    before = len(emitter.lines)
    quotient = emitter.value(symbolic.TruncDiv(dividend, 132), 64)
    remainder = emitter.value(symbolic.TruncMod(dividend, 132), 64)
    hoisted = "\n".join(emitter.lines[before:])
    assert "mul.hi.u64" in hoisted and "div.s64" not in hoisted
    before = len(emitter.lines)
    assert emitter.value(symbolic.FloorDiv(dividend, 132), 64) == quotient
    assert emitter.value(sympy.Mod(dividend, 132, evaluate=False), 64) == remainder
    assert emitter.lines[before:] == []  # nothing computed again
    # a floor form first: the unsigned path, no sign correction
    before = len(emitter.lines)
    emitter.value(symbolic.FloorDiv(dividend + n, 132), 64)
    fresh = "\n".join(emitter.lines[before:])
    assert "mul.hi.u64" in fresh and "div.s64" not in fresh and "selp" not in fresh


def _division_in_loop(pinned: bool) -> str:
    @A.kernel(threads=32)
    def once(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, m: A.Index):
        for k in A.range(m):
            if (k == 0) if pinned else (k < 1):
                A.copy(x.tile((1,), (A.thread_id() + A.cdiv(n, m),)), y.tile((1,), (A.thread_id(),)))

    return emit_ptx(once.specialize(), "sm_90a").text


def test_a_division_under_a_branch_on_one_iteration_stays_in_it():
    """Index arithmetic leaves a loop for its preheader (computed once, not per iteration) —
    except what a branch taken on one iteration (``k == c``) needs: that runs once either way,
    and inside the branch it is off the path to the loop's first iteration."""
    for pinned in (True, False):
        text = _division_in_loop(pinned)
        head = text.index(re.search(r"^\$L_loop_\d+:$", text, re.M).group(0))
        divisions = [m.start() for m in re.finditer(r"\bdiv\.(?:u32|s64|u64)\b", text)]
        assert divisions
        if pinned:
            assert all(at > head for at in divisions)
        else:  # not pinned (a range of iterations as far as the emitter knows): hoisted as before
            assert all(at < head for at in divisions)


@A.kernel(threads=64, assume=lambda n: [n >= 1])
def carried_halves(x: A.Global(A.f32, "n 128"), y: A.Global(A.bf16, "n 128"), n: A.Index, ARITH: A.const = False):
    """Row ``j`` of x converted to bf16 and stored one iteration late (the converted pair is
    held across the loop); ``ARITH`` takes a bf16 maximum of the held values before the store."""
    t = A.thread_id()
    held = A.convert(A.load(x.tile((1, 2), (0, t))), A.bf16)
    for j in A.range(1, n):
        out = y.tile((1, 2), (j - 1, t))
        if ARITH:
            A.store(A.maximum(held, held), out)
        else:
            A.store(held, out)
        held = A.convert(A.load(x.tile((1, 2), (j, t))), A.bf16)
    A.store(held, y.tile((1, 2), (n - 1, t)))


def _declared(text: str) -> dict[str, str]:
    return {name: cls for cls, name in re.findall(r"^\s*\.reg \.(\w+) (%v\w+?_)<\d+>;", text, re.M)}


def test_a_16_bit_fragment_moved_only_in_pairs_is_held_packed():
    """Converted in pairs, copied across the loop and stored as one 32-bit word: each pair is
    one ``.b32`` register from the conversion to the store, with no unpacking in between (one
    16-bit register per element costs a 32-bit one each where the value lives across an
    iteration)."""
    ptx = emit_ptx(carried_halves.specialize(), "sm_90a")
    text = ptx.text
    declared = _declared(text)
    assert sorted(declared.values()) == ["b32", "b32", "f32", "f32"], declared
    packed = [name for name, cls in declared.items() if name.startswith("%vp")]
    assert len(packed) == 2
    assert "mov.b32 {" not in text and not re.search(r"mov\.b32 %\w+, \{", text)
    assert re.search(rf"cvt\.rn\.bf16x2\.f32 {re.escape(packed[0])}0, %vr\d+_1, %vr\d+_0;", text)
    assert re.search(rf"st\.global\.b32 \[[^\]]+\], {re.escape(packed[0])}0;", text)
    assert f"mov.b32 {packed[0]}0, {packed[1]}0;" in text  # the loop-carried copy: one move per pair
    if find_ptxas() is not None:
        cubin = build_cubin(ptx, "pairs-" + kernel_hash(carried_halves.specialize()))
        assert cubin.performance_issues == [], cubin.log


def test_a_16_bit_fragment_used_in_arithmetic_keeps_one_register_per_element():
    """The held values feed a bf16 ``max``: that fragment stays one ``.b16`` register per
    element, unpacked from the packed conversion it is copied from."""
    text = emit_ptx(carried_halves.specialize(ARITH=True), "sm_90a").text
    declared = _declared(text)
    per_element = [name for name, cls in declared.items() if cls == "b16"]
    packed = [name for name, cls in declared.items() if name.startswith("%vp")]
    assert len(per_element) == 2 and len(packed) == 1, declared
    assert re.search(rf"mov\.b32 \{{%vr\d+_0, %vr\d+_1\}}, {re.escape(packed[0])}0;", text)
    assert re.search(r"max\.bf16 %vr\d+_0, %vr\d+_0, %vr\d+_0;", text)


@A.kernel(threads=128, grid=lambda: (1,))
def hinted_loads(a: A.Global(A.bf16, "M K"), b: A.Global(A.bf16, "N K"), c: A.Global(A.f32, "M N")):
    """``one_tile`` with L2 eviction priorities on its loads, and a second box of A."""
    sa = A.shared(A.bf16, (2, 64, 64), swizzle=SWIZZLE_128B)
    sb = A.shared(A.bf16, (64, 64), swizzle=SWIZZLE_128B)
    bar = A.mbarrier(1)
    A.mbarrier_init(bar)
    A.arrive_expect_tx(bar, 2 * A.transaction_bytes(sa[0]) + A.transaction_bytes(sb))
    A.tma_load(a.tile((64, 64), (0, 0)), sa[0], bar, l2="evict_last")
    A.tma_load(a.tile((64, 64), (0, 1)), sa[1], bar, l2="evict_last")
    A.tma_load(b.tile((64, 64), (0, 0)), sb, bar, l2="evict_first")
    A.wait(bar, phase=0)
    acc = A.mma_fragment("wgmma.m64n64k16.bf16", "c")
    for ks in A.range(4, unroll=True):
        A.mma("wgmma.m64n64k16.bf16", sa[0].tile((64, 16), (0, ks)), sb.tile((64, 16), (0, ks)), acc)
    A.store(acc, A.mma_partition("wgmma.m64n64k16.bf16", "c", c.tile((64, 64), (0, 0))))


def test_tma_loads_with_an_l2_priority_share_one_policy_per_priority():
    ptx = emit_ptx(hinted_loads.specialize(), "sm_90a").text
    made = re.findall(r"createpolicy\.fractional\.L2::(evict_\w+)\.b64 (%rd\d+), 1\.0;", ptx)
    assert sorted(p for p, _ in made) == ["evict_first", "evict_last"]  # one each, not one per load
    policy = dict(made)
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\S*\.L2::cache_hint \[%r\d+\], \[%rd\d+, \{[^}]*\}\], "
                       r"\[%r\d+\], (%rd\d+);", ptx)
    assert loads == [policy["evict_last"], policy["evict_last"], policy["evict_first"]]
    assert ptx.index("createpolicy") < ptx.index("cp.async.bulk.tensor")
    plain = emit_ptx(one_tile.specialize(), "sm_90a").text  # no priority: no policy, no hint
    assert "createpolicy" not in plain and "cache_hint" not in plain


@needs_ptxas
def test_tma_loads_with_an_l2_priority_assemble():
    kernel = hinted_loads.specialize()
    cubin = build_cubin(emit_ptx(kernel, "sm_90a"), kernel_hash(kernel))
    assert "warning" not in cubin.log.lower(), cubin.log


def test_an_unknown_l2_priority_is_an_argus_error_at_the_load():
    @A.kernel(threads=128, grid=lambda: (1,))
    def bad(a: A.Global(A.bf16, "M K")):
        sa = A.shared(A.bf16, (64, 64), swizzle=SWIZZLE_128B)
        bar = A.mbarrier(1)
        A.mbarrier_init(bar)
        A.arrive_expect_tx(bar, A.transaction_bytes(sa))
        A.tma_load(a.tile((64, 64), (0, 0)), sa, bar, l2="evict_normal")
        A.wait(bar, phase=0)

    with pytest.raises(ArgusError, match="l2='evict_normal' is not an L2 eviction priority") as info:
        bad.specialize()
    assert "test_emit.py" in str(info.value)  # the position of the load
