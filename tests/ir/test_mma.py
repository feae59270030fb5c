"""MMA atoms, shuffles, reductions and atomics on the reference interpreter.

Each atom's tile is checked bit-exactly against ``numerics.mma`` (the defined semantics) and
within ``mma_tolerance`` against a float64 product on fresh random inputs; the tag rules
(k agreement, result ``(row, col)``) are checked with a correct and a planted-bug kernel.
"""


import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

import argus.spec as A
from argus.errors import ArgusError
from argus.ir import nodes as N
from argus.ir import numerics
from argus.ir.atoms import mma_atom
from argus.ir.interpreter import Interpreter, InterpreterError
from argus.layout_algebra import Swizzle

sys.path.insert(0, str(Path(__file__).parent))
import mma_kernels as K

ATOMS = [
    "mma.sync.m16n8k16.bf16", "mma.sync.m16n8k16.f16",
    "wgmma.m64n16k16.bf16", "wgmma.m64n24k16.f16.rs",
    "v_mfma_f32_32x32x8_bf16", "v_mfma_f32_16x16x16_bf16",
    "v_mfma_f32_32x32x16_fp8_fp8", "v_mfma_f32_16x16x32_fp8_fp8",
]


def _random(rng, dtype, shape):
    x = numerics.round_to(dtype, rng.standard_normal(shape))
    x[x == 0] = 1.0
    return x


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("name", ATOMS)
def test_one_atom_tile_matches_exact_semantics_and_float64(name):
    spec = mma_atom(name)
    m, n, k = spec.mnk
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    a, b = _random(rng, spec.a_dtype, (m, k)), _random(rng, spec.b_dtype, (n, k))
    c = _random(rng, spec.acc_dtype, (m, n))
    out = Interpreter(K.one_tile(name).specialize()).run(
        {"a": a, "b": b, "c": c, "d": np.zeros((m, n), np.float32)})["d"]
    exact = numerics.mma(a, b.T, c, a_dtype=spec.a_dtype, b_dtype=spec.b_dtype, acc_dtype=spec.acc_dtype)
    np.testing.assert_array_equal(out, exact)
    reference = a.astype(np.float64) @ b.astype(np.float64).T + c
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(a, b.T, c))


@pytest.mark.parametrize("name", ["mma.sync.m16n8k16.bf16", "wgmma.m64n16k16.bf16", "v_mfma_f32_16x16x16_bf16"])
def test_wrong_k_pairing_is_a_tag_violation_at_the_mma(name):
    spec = mma_atom(name)
    m, n, k = spec.mnk
    rng = np.random.default_rng(5)
    kernel = K.one_tile(name, WRONG_K=True)
    inputs = {"a": _random(rng, spec.a_dtype, (m, k)), "b": _random(rng, spec.b_dtype, (n, k)),
              "c": _random(rng, spec.acc_dtype, (m, n)), "d": np.zeros((m, n), np.float32)}
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize()).run(inputs)
    v = err.value.violation
    assert v.kind == "tag" and "disagree on k" in v.message
    assert v.block == (0, 0, 0) and v.thread is not None and 0 <= v.thread < spec.threads
    assert v.element is not None
    assert v.position.line == _line(kernel.fn, "A.mma(spec, fa, fb, acc)")


def test_wgmma_reading_unfenced_shared_stores_is_a_proxy_violation():
    name = "wgmma.m64n16k16.bf16"
    spec = mma_atom(name)
    m, n, k = spec.mnk
    rng = np.random.default_rng(17)
    kernel = K.one_tile(name, NO_FENCE=True)
    inputs = {"a": _random(rng, spec.a_dtype, (m, k)), "b": _random(rng, spec.b_dtype, (n, k)),
              "c": np.zeros((m, n), np.float32), "d": np.zeros((m, n), np.float32)}
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize()).run(inputs)
    v = err.value.violation
    assert v.kind == "proxy" and "fence.proxy.async" in v.message
    assert v.position.line == _line(kernel.fn, "A.mma(spec, fa, fb, acc)")


def test_a_row_of_mixed_sources_gives_untagged_results():
    name = "mma.sync.m16n8k16.f16"
    spec = mma_atom(name)
    m, n, k = spec.mnk
    rng = np.random.default_rng(6)
    kernel = K.one_tile(name, MIXED_ROWS=True)
    inputs = {"a": _random(rng, spec.a_dtype, (m, k)), "b": _random(rng, spec.b_dtype, (n, k)),
              "c": np.zeros((m, n), np.float32), "d": np.zeros((m, n), np.float32)}
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize()).run(inputs)
    v = err.value.violation
    assert v.kind == "tag" and "untagged" in v.message
    assert v.position.line == _line(kernel.fn, "A.assert_tag(out")


def test_shuffles_move_values_and_tags():
    rng = np.random.default_rng(7)
    x = _random(rng, "f32", (32, 2))
    y = Interpreter(K.shuffles.specialize()).run({"x": x, "y": np.zeros((4, 32, 2), np.float32)})["y"]
    lane = np.arange(32)
    np.testing.assert_array_equal(y[0], x[(lane + 3) % 32])
    np.testing.assert_array_equal(y[1], x[lane ^ 5])
    np.testing.assert_array_equal(y[2], x[np.where(lane >= 2, lane - 2, lane)])
    np.testing.assert_array_equal(y[3], x[np.where(lane + 7 < 32, lane + 7, lane)])


def test_lane_reductions_over_a_quad_and_a_wavefront():
    rng = np.random.default_rng(8)
    x = _random(rng, "f32", (64, 4))
    out = Interpreter(K.lane_reductions.specialize()).run(
        {"x": x, "s": np.zeros(64, np.float32), "mx": np.zeros(64, np.float32)})
    quad = x.astype(np.float64).reshape(16, 16).sum(axis=1)
    np.testing.assert_allclose(out["s"], np.repeat(quad, 4), rtol=1e-6)
    assert np.all(out["s"].reshape(16, 4) == out["s"].reshape(16, 4)[:, :1])  # butterfly: equal in a quad
    np.testing.assert_array_equal(out["mx"], np.full(64, x.max()))


def test_atomics_from_all_blocks_accumulate():
    rng = np.random.default_rng(9)
    n = 100
    w = _random(rng, "f32", (n,))
    h = _random(rng, "f32", (8,))
    out = Interpreter(K.bucket_sums.specialize()).run({"w": w, "h": h.copy()}, {"n": n})["h"]
    expected = h.astype(np.float64) + np.array([w[(np.arange(n) % 32) % 8 == b].astype(np.float64).sum()
                                                for b in range(8)])
    np.testing.assert_allclose(out, expected, rtol=1e-5)


# --------------------------------------------------------------------------- front-end errors


def _trace_error(body):
    @A.kernel(threads=32)
    def k(a: A.Global(A.bf16, "16 16"), b: A.Global(A.bf16, "8 16"), c: A.Global(A.f32, "16 8")):
        body(a, b, c)

    with pytest.raises(A.SpecError) as err:
        k.specialize()
    return err.value


def test_mma_rejects_a_wrong_operand_type_with_hint():
    atom = "mma.sync.m16n8k16.bf16"

    def body(a, b, c):
        fa = A.load(A.mma_partition(atom, "a", a)).to(A.f32)
        fb = A.load(A.mma_partition(atom, "b", b))
        A.mma(atom, fa, fb, A.mma_fragment(atom, "c"))

    err = _trace_error(body)
    assert "A has element type f32" in err.message and "to(A.bf16)" in err.hint
    assert err.position is not None and err.position.file == __file__


def test_mma_rejects_a_fragment_of_the_wrong_size_and_unknown_atoms():
    atom = "mma.sync.m16n8k16.bf16"

    def wrong_size(a, b, c):
        fa = A.load(A.mma_partition(atom, "a", a))
        A.mma(atom, fa, fa, A.mma_fragment(atom, "c"))

    err = _trace_error(wrong_size)
    assert "B fragment has 8 values per thread, the atom needs 4" in err.message

    def unknown(a, b, c):
        A.mma("mma.sync.m16n8k8.bf16", a, b, c)

    err = _trace_error(unknown)
    assert "unknown MMA atom" in err.message and "mma.sync.m16n8k16" in err.hint

    def shared_for_register(a, b, c):
        s = A.shared(A.bf16, (16, 16))
        A.mma(atom, s, A.load(A.mma_partition(atom, "b", b)), A.mma_fragment(atom, "c"))

    err = _trace_error(shared_for_register)
    assert "register fragment" in err.message and "mma_partition" in err.hint


def test_warpgroup_atom_needs_a_whole_warpgroup():
    atom = "wgmma.m64n8k16.bf16"

    @A.kernel(threads=64)
    def k(c: A.Global(A.f32, "64 8")):
        sa, sb = A.shared(A.bf16, (64, 16)), A.shared(A.bf16, (8, 16))
        A.mma(atom, sa, sb, A.mma_fragment(atom, "c"))

    with pytest.raises(A.SpecError) as err:
        k.specialize()
    assert "128 threads" in err.value.message


def test_wgmma_shared_operand_needs_a_descriptor_layout():
    atom = "wgmma.m64n8k16.bf16"

    @A.kernel(threads=128)
    def k():
        sa, sb = A.shared(A.bf16, (64, 16)), A.shared(A.bf16, (8, 16), swizzle=Swizzle(1, 3, 3))
        A.mma(atom, sa, sb, A.mma_fragment(atom, "c"))

    with pytest.raises(A.SpecError) as err:
        k.specialize()
    assert "A in shared memory has no wgmma descriptor" in err.value.message and "Swizzle" in err.value.hint


def test_mma_under_divergence_is_a_collective_violation():
    atom = "mma.sync.m16n8k16.bf16"

    @A.kernel(threads=32)
    def k(a: A.Global(A.bf16, "16 16"), b: A.Global(A.bf16, "8 16"), c: A.Global(A.f32, "16 8")):
        fa = A.load(A.mma_partition(atom, "a", a))
        fb = A.load(A.mma_partition(atom, "b", b))
        acc = A.mma_fragment(atom, "c")
        if A.thread_id() < 16:
            A.mma(atom, fa, fb, acc)

    rng = np.random.default_rng(1)
    with pytest.raises(InterpreterError) as err:
        Interpreter(k.specialize()).run({"a": _random(rng, "bf16", (16, 16)), "b": _random(rng, "bf16", (8, 16)),
                                         "c": np.zeros((16, 8), np.float32)})
    assert err.value.violation.kind == "collective" and err.value.violation.other_thread == 16


def test_accumulator_retiled_as_next_operand_mma_sync():
    rng = np.random.default_rng(11)
    q, k, vt = _random(rng, "bf16", (16, 16)), _random(rng, "bf16", (16, 16)), _random(rng, "bf16", (8, 16))
    out = Interpreter(K.two_gemms_mma_sync.specialize()).run({"q": q, "k": k, "vt": vt, "o": np.zeros((16, 8), np.float32)})
    s = numerics.mma(q, k.T, None, a_dtype="bf16")
    p = numerics.round_to("bf16", s)
    np.testing.assert_array_equal(out["o"], numerics.mma(p, vt.T, None, a_dtype="bf16"))
    reference = (q.astype(np.float64) @ k.T.astype(np.float64)) @ vt.T.astype(np.float64)
    np.testing.assert_allclose(out["o"], reference, rtol=0.05, atol=0.05 * np.abs(reference).max())
    # one op moves the whole fragment: the permutation is the identity for mma.sync
    ops = [op for op in K.two_gemms_mma_sync.specialize().body.ops if type(op).__name__ == "Convert"]
    assert len(ops) == 1


def test_transposed_mfma_accumulator_as_b_operand():
    rng = np.random.default_rng(12)
    k, q, vt = _random(rng, "bf16", (32, 8)), _random(rng, "bf16", (32, 8)), _random(rng, "bf16", (32, 32))
    out = Interpreter(K.two_gemms_mfma.specialize()).run({"k": k, "q": q, "vt": vt, "ot": np.zeros((32, 32), np.float32)})
    st = numerics.mma(k, q.T, None, a_dtype="bf16")  # Sᵀ: rows keys j, columns queries i
    p = numerics.round_to("bf16", st)
    np.testing.assert_array_equal(out["ot"], numerics.mma(vt, p, None, a_dtype="bf16"))


def test_retile_between_mismatched_layouts_is_an_error():
    @A.kernel(threads=64)
    def k():
        st = A.mma_fragment("v_mfma_f32_32x32x8_bf16", "c")
        A.retile(st, "v_mfma_f32_32x32x8_bf16", "v_mfma_f32_32x32x8_bf16", "a")

    with pytest.raises(A.SpecError) as err:
        k.specialize()
    assert "is held by thread" in err.value.message and "transpose=True" in err.value.hint


def test_well_formedness_flags_a_divergent_collective():
    from argus.ir import check

    atom = "mma.sync.m16n8k16.bf16"

    @A.kernel(threads=64)
    def k(a: A.Global(A.bf16, "16 16"), b: A.Global(A.bf16, "8 16")):
        fa = A.load(A.mma_partition(atom, "a", a))
        fb = A.load(A.mma_partition(atom, "b", b))
        acc = A.mma_fragment(atom, "c")
        if A.warp_id() == 0:  # warp-uniform: fine
            A.mma(atom, fa, fb, acc)
        if A.lane_id() < 16:  # divergent
            A.mma(atom, fa, fb, acc)
            A.reduce(acc, "max", across_lanes=(1, 2))

    found = check.problems(k.specialize())
    assert len(found) == 2 and all("divergent collective" in p for p in found)
    assert str(_line(k.fn, "if A.lane_id() < 16") + 1) in found[0]


def test_a_warp_missing_from_a_warpgroup_mma_is_a_deadlock():
    atom = "wgmma.m64n8k16.bf16"

    @A.kernel(threads=128)
    def k(a: A.Global(A.bf16, "64 16"), b: A.Global(A.bf16, "8 16")):
        sa = A.shared(A.bf16, (64, 16), swizzle=Swizzle(1, 3, 3))
        sb = A.shared(A.bf16, (8, 16), swizzle=Swizzle(1, 3, 3))
        t = A.thread_id()
        A.copy(a.tile((1, 8), (t // 2, t % 2)), sa.tile((1, 8), (t // 2, t % 2)))
        A.copy(b.tile((1, 1), (t // 16, t % 16)), sb.tile((1, 1), (t // 16, t % 16)))
        A.fence_proxy_async()
        A.barrier()
        acc = A.mma_fragment(atom, "c")
        if A.warp_id() != 3:
            A.mma(atom, sa, sb, acc)

    with pytest.raises(InterpreterError) as err:
        rng = np.random.default_rng(13)
        Interpreter(k.specialize()).run({"a": _random(rng, "bf16", (64, 16)), "b": _random(rng, "bf16", (8, 16))})
    v = err.value.violation
    assert v.kind == "deadlock" and v.position.line == _line(k.fn, "A.mma(atom, sa, sb, acc)")


def test_row_reduction_in_the_accumulator_layout():
    rng = np.random.default_rng(14)
    q, k = _random(rng, "bf16", (16, 16)), _random(rng, "bf16", (16, 16))
    out = Interpreter(K.accumulator_row_max.specialize()).run(
        {"q": q, "k": k, "mx": np.zeros(16, np.float32), "centered": np.zeros((16, 16), np.float32)})
    s = numerics.mma(q, k.T, None, a_dtype="bf16")
    np.testing.assert_array_equal(out["mx"], s.max(axis=1))
    np.testing.assert_array_equal(out["centered"], numerics.sub(s, s.max(axis=1, keepdims=True), "f32"))


def test_shared_atomics_commute_but_race_with_plain_reads():
    rng = np.random.default_rng(15)
    w = _random(rng, "f32", (64,))
    out = Interpreter(K.shared_counters.specialize()).run({"w": w, "out": np.zeros(4, np.float32)})["out"]
    np.testing.assert_allclose(out, w.astype(np.float64).reshape(16, 4).sum(axis=0), rtol=1e-5)
    with pytest.raises(InterpreterError) as err:
        Interpreter(K.shared_counters.specialize(SYNC=False)).run({"w": w, "out": np.zeros(4, np.float32)})
    v = err.value.violation
    assert v.kind == "race"
    assert v.position.line == _line(K.shared_counters.fn, "A.copy(s.tile((1,), (t,)), out.tile")


def test_wavefront_shuffle_and_reduction_span_two_interpreter_warps():
    rng = np.random.default_rng(16)
    x = _random(rng, "f32", (128,))
    out = Interpreter(K.wave64_collectives.specialize()).run(
        {"x": x, "rev": np.zeros(128, np.float32), "total": np.zeros(128, np.float32)})
    np.testing.assert_array_equal(out["rev"], x.reshape(2, 64)[:, ::-1].ravel())
    sums = x.astype(np.float64).reshape(2, 64).sum(axis=1)
    np.testing.assert_allclose(out["total"], np.repeat(sums, 64), rtol=1e-5)
    assert len(set(out["total"][:64].tolist())) == 1


def test_warps_of_a_warpgroup_naming_different_shared_tiles_is_a_violation():
    atom = "wgmma.m64n8k16.bf16"

    @A.kernel(threads=128)
    def k(a: A.Global(A.bf16, "64 32"), b: A.Global(A.bf16, "8 16")):
        sa = A.shared(A.bf16, (64, 32), swizzle=Swizzle(2, 3, 3))  # 64-byte rows
        sb = A.shared(A.bf16, (8, 16), swizzle=Swizzle(1, 3, 3))
        t = A.thread_id()
        A.copy(a.tile((1, 16), (t // 2, t % 2)), sa.tile((1, 16), (t // 2, t % 2)))
        A.copy(b.tile((1, 1), (t // 16, t % 16)), sb.tile((1, 1), (t // 16, t % 16)))
        A.fence_proxy_async()
        A.barrier()
        acc = A.mma_fragment(atom, "c")
        A.mma(atom, sa.tile((64, 16), (0, A.warp_id() % 2)), sb, acc)  # planted: the k-half depends on the warp

    rng = np.random.default_rng(18)
    with pytest.raises(InterpreterError) as err:
        Interpreter(k.specialize()).run({"a": _random(rng, "bf16", (64, 32)), "b": _random(rng, "bf16", (8, 16))})
    v = err.value.violation
    assert v.kind == "collective" and "differs between the warps" in v.message


def _wgmma_inputs(seed: int):
    spec = mma_atom("wgmma.m64n16k16.bf16")
    m, n, k = spec.mnk
    rng = np.random.default_rng(seed)
    return {"a": _random(rng, spec.a_dtype, (m, k)), "b": _random(rng, spec.b_dtype, (n, k)),
            "c": np.zeros((m, n), np.float32), "d": np.zeros((m, n), np.float32)}


def test_wgmma_accumulator_read_before_its_wait_group_is_an_async_violation():
    kernel = K.one_tile("wgmma.m64n16k16.bf16", EARLY_READ=True)
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize()).run(_wgmma_inputs(21))
    v = err.value.violation
    assert v.kind == "async" and "accumulator" in v.message and "wgmma_wait" in v.message
    assert v.block == (0, 0, 0) and 0 <= v.thread < 128 and v.element is not None
    assert v.position.line == _line(kernel.fn, "A.store(acc, out)")
    # the same kernel with the wait before the store runs
    Interpreter(K.one_tile("wgmma.m64n16k16.bf16").specialize()).run(_wgmma_inputs(21))


def test_wgmma_register_a_rewritten_before_its_wait_group_is_an_async_violation():
    # A in registers (.rs) is read by the tensor cores until the group's wait: rewriting it
    # earlier (the next k-block's fragment loaded into the same registers) is undefined in PTX
    kernel = K.one_tile("wgmma.m64n16k16.bf16.rs", REWRITE_A=True)
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize()).run(_wgmma_inputs(24))
    v = err.value.violation
    assert v.kind == "async" and "the A operand" in v.message and "in flight" in v.message
    assert 0 <= v.thread < 128 and v.element is not None
    # reading it is fine, and the same kernel without the rewrite runs and matches
    out = Interpreter(K.one_tile("wgmma.m64n16k16.bf16.rs").specialize()).run(_wgmma_inputs(24))
    assert np.isfinite(out["d"]).all()


def _with_wgmma_handles(kernel, *, fence: bool):
    """The kernel with its wgmma named by a handle (explicitly asynchronous), and a wgmma_fence
    before it when ``fence``."""
    import dataclasses

    from argus.ir import nodes as N

    ops = []
    for op in kernel.body.ops:
        if isinstance(op, N.Mma):
            if fence:
                ops.append(N.Fence(fence="wgmma", loc=op.loc, scope=N.Scope.THREAD))
            op = dataclasses.replace(op, handle=N.Handle("w_mma", N.HandleKind.WGMMA_GROUP))
        ops.append(op)
    return dataclasses.replace(kernel, body=dataclasses.replace(kernel.body, ops=tuple(ops)))


def test_asynchronous_wgmma_after_unfenced_accumulator_writes_is_a_fence_violation():
    kernel = K.one_tile("wgmma.m64n16k16.bf16")
    with pytest.raises(InterpreterError) as err:
        Interpreter(_with_wgmma_handles(kernel.specialize(), fence=False)).run(_wgmma_inputs(22))
    v = err.value.violation
    assert v.kind == "fence" and "wgmma_fence" in v.message
    assert 0 <= v.thread < 128 and v.element is not None
    assert v.position.line == _line(kernel.fn, "A.mma(spec, fa, fb, acc)")
    Interpreter(_with_wgmma_handles(kernel.specialize(), fence=True)).run(_wgmma_inputs(22))


def test_wgmma_never_waited_for_is_reported_at_block_exit():
    kernel = K.one_tile("wgmma.m64n16k16.bf16", NO_WAIT=True)
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize()).run(_wgmma_inputs(23))
    v = err.value.violation
    assert v.kind == "async" and "still in flight when the block exits" in v.message and "wgmma_wait" in v.message
    assert v.position.line == _line(kernel.fn, "A.mma(spec, fa, fb, acc)")


# --------------------------------------------------------------------------- known zeros


def _violation(kernel, inputs, sizes, **consts):
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel.specialize(**consts)).run(inputs, sizes)
    return err.value.violation


def _partial_k_inputs(k: int):
    rng = np.random.default_rng(k)
    a, b = _random(rng, "bf16", (16, k)), _random(rng, "bf16", (8, k))
    return {"a": a, "b": b, "c": np.zeros((16, 8), np.float32)}


@pytest.mark.parametrize("k", [20, 17, 31])
def test_load_tail_zero_fill_is_a_known_zero_for_mma_tags(k):
    inputs = _partial_k_inputs(k)
    out = Interpreter(K.partial_k_mma_sync.specialize()).run(inputs, {"K": k})["c"]
    reference = inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64).T
    assert np.all(np.abs(out - reference) <= numerics.mma_tolerance(inputs["a"], inputs["b"].T))


def test_a_known_zero_keeps_the_tag_its_source_would_have_had():
    # a tail shifted onto in-range elements still fails the assertion: the known zeros stand for
    # the out-of-range source coordinates, not for the elements they replace
    v = _violation(K.partial_k_mma_sync, _partial_k_inputs(20), {"K": 20}, STATE_TAIL="zero")
    assert "tag (0, 0)" in v.message
    inputs = {"x": _random(np.random.default_rng(0), "f32", (40,)), "y": np.zeros(40, np.float32)}
    out = Interpreter(K.shifted_tail.specialize()).run(inputs, {"n": 40})["y"]
    np.testing.assert_array_equal(out, np.append(inputs["x"][1:], 0))
    v = _violation(K.shifted_tail, inputs, {"n": 40}, OWN=True)
    assert v.kind == "tag" and "a known zero (standing for tag (40,))" in v.message


def test_a_tail_filled_with_another_value_is_untagged():
    v = _violation(K.partial_k_mma_sync, _partial_k_inputs(20), {"K": 20}, OTHER=1)
    assert v.kind == "tag" and "untagged" in v.message
    assert v.position.line == _line(K.partial_k_mma_sync, 'A.assert_tag(fa, lambda *ct: (ct[-1][1] < K)')
    v = _violation(K.partial_k_mma_sync, _partial_k_inputs(20), {"K": 20}, OTHER=1, STATE_TAIL="")
    assert v.kind == "tag" and "untagged" in v.message  # the filled products reach the accumulator
    assert v.position.line == _line(K.partial_k_mma_sync, "A.assert_tag(out,")


def test_an_assertion_can_state_known_zeros():
    v = _violation(K.partial_k_mma_sync, _partial_k_inputs(20), {"K": 20}, STATE_TAIL="zero")
    assert v.kind == "tag" and "assert_tag failed: tag (0, 0)" in v.message


def test_known_zero_fills_are_printed():
    from argus.ir.printer import print_kernel

    text = print_kernel(K.partial_k_mma_sync.specialize())
    assert "value=0 tail=%a[" in text and "value=0  #" in text  # the accumulator's fill is no tail


# --------------------------------------------------------------------------- ldmatrix / stmatrix


def _matrix_inputs(seed: int):
    rng = np.random.default_rng(seed)
    return {"x": _random(rng, "bf16", (16, 16)), "y": np.zeros((16, 16), np.float32)}


@pytest.mark.parametrize("rows, cols", [(16, 16), (8, 16), (16, 8), (8, 8)])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragment_layout_and_stmatrix_round_trip(rows, cols, trans):
    inputs = _matrix_inputs(rows * cols + trans)
    kernel = K.matrix_copies.specialize(ROWS=rows, COLS=cols, TRANS=trans)
    out = Interpreter(kernel).run(inputs)["y"]  # the kernel asserts the PTX fragment layout by tags
    np.testing.assert_array_equal(out[:rows, :cols], inputs["x"][:rows, :cols])
    atom = f"ldmatrix.m8n8.x{rows * cols // 64}{'.trans' if trans else ''}.b16"
    assert any(isinstance(op, N.Copy) and op.atom == atom and op.scope is N.Scope.WARP for op in N.walk(kernel.body))


def test_ldmatrix_needs_every_lane_of_the_warp():
    v = _violation(K.matrix_copies, _matrix_inputs(1), {}, DIVERGE=True)
    assert v.kind == "collective" and "thread 16" in v.message
    assert v.position.line == _line(K.matrix_copies, "f = A.ldmatrix(s.tile((ROWS, COLS), (0, 0)), trans=TRANS)")


def test_stmatrix_writes_race_with_unordered_reads():
    v = _violation(K.matrix_copies, _matrix_inputs(2), {}, BARRIER=False)
    assert v.kind == "race" and v.other_thread is not None


def test_ldmatrix_rows_must_be_aligned_16_byte_chunks():
    v = _violation(K.matrix_copies, _matrix_inputs(3), {}, STRIDE=20)
    assert v.kind == "layout" and "16-byte aligned" in v.message


@pytest.mark.parametrize("what, message", [("dtype", "16-bit"), ("shape", "1, 2 or 4 8x8"),
                                           ("global", "shared memory"), ("fragment", "values per thread")])
def test_matrix_copy_misuse_is_rejected_when_traced(what, message):
    with pytest.raises(ArgusError, match=message):
        K.matrix_copy_misuse.specialize(WHAT=what)
