"""The persistent Hopper GEMM (``argus.kernels.gemm``) under the verifier.

Every specialization the autotuner may pick (``CANDIDATES`` at the H200's 132 persistent blocks)
and the bias + ReLU variant with the tuned consts are proved by ``benchmarks/prove_gemm.py`` (z3 at 10^9 resource units per VC:
the lemma ``mma-acc`` — the accumulator an MMA reads holds its record, or ⊥ — needs up to ~10^8),
and their proof records are checked in under ``proofs/``; the tests here check that each of them
has a record bound to the kernel as it is now (the full proofs take ~6 minutes each).

Proved in the test run itself: the whole synchronisation of every candidate and variant —
mbarrier rounds and phases over the ring that runs across tiles (nested loops, flattened
counter), the release of each stage (after ``wgmma_wait(1)`` or ``wgmma_wait(0)``, by every
consumer thread, or by one after the consumers' named barrier), the epilogue's role-scoped named
barriers, proxy fences and the TMA stores' asynchronous source reads, races and the write
conflicts of C across blocks (the grouped tile order is injective).

Planted bugs of the persistent kernel (IR mutations of a small specialization) are refuted
and their counterexamples replayed on the interpreter."""

import dataclasses

import pytest
import sympy
from async_kernels_support import _replace_ops, _with_body, discharge

from argus.abstract_interp import generate_vcs
from argus.ir import nodes as N
from argus.kernels import gemm as G

#: the properties of the synchronisation model (and of memory races)
SYNC = {"async", "mbarrier", "expect-tx", "phase", "proxy", "descriptor", "role", "registers", "barrier", "wgmma",
        "race", "write-conflict"}

#: why the full proof of a specialization fails under the default limits (the record's need more)
REMAINING = ("the lemma mma-acc (the accumulator an MMA reads holds its record, or ⊥) needs up to ~10^8 z3 "
             "resource units per VC, over the default 5·10^7 (benchmarks/prove_gemm.py proves it with 10^9)",)


def _small(**consts):
    """A small specialization: two persistent blocks, so that each visits several tiles."""
    return G.gemm_kernel().specialize(**{"BN": 64, "STAGES": 2, "GROUP_M": 2, "SMS": 2, "RELEASE": "threads",
                                         **consts})


def _sync_results(kernel):
    analysis, vcs = generate_vcs(kernel)
    return discharge(kernel, analysis, [vc for vc in vcs if vc.property in SYNC])


def _not_proved(results):
    return [(r.vc.id, r.verdict, r.reason) for r in results if r.verdict != "proved"]


def _refuted_and_replayed(results, props):
    refuted = [r for r in results if r.verdict == "refuted" and r.vc.property in props and r.counterexample]
    assert refuted, _not_proved(results)
    replayed = [r for r in refuted if r.counterexample.replay.status == "reproduced"]
    assert replayed, [(r.vc.id, r.counterexample.human()) for r in refuted]
    return replayed[0].counterexample


def _mutate(kernel, fn):
    return _with_body(kernel, _replace_ops(kernel.body, fn))


def _in_role(kernel, name, fn):
    """Apply ``fn`` to the ops of warp role ``name`` only."""

    def outer(op):
        if isinstance(op, N.WarpRole) and op.name == name:
            return [dataclasses.replace(op, body=_replace_ops(op.body, fn))]
        return [op]

    return _with_body(kernel, N.Region(tuple(x for op in kernel.body.ops for x in outer(op))))


def _subst(value, mapping):
    """``value`` with ``mapping`` applied to every index expression in it (views included;
    buffers keep their identity)."""
    if isinstance(value, sympy.Basic):
        return value.xreplace(mapping)
    if isinstance(value, tuple):
        return tuple(_subst(v, mapping) for v in value)
    if isinstance(value, N.Region):
        return N.Region(tuple(_subst(op, mapping) for op in value.ops))
    if dataclasses.is_dataclass(value) and not isinstance(value, (N.Buffer, type)):
        changes = {f.name: _subst(getattr(value, f.name), mapping) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


#: every specialization the autotuner may pick (default release and epilogue), and the variants
SPECIALIZATIONS = {
    **{f"c{i}": ((), c) for i, c in enumerate(G.CANDIDATES)},
    **{f"e{i}": ((), c) for i, c in enumerate(G.EARLIER)},
    "f32": (("bf16", "f32"), G.TUNED[(4096, 4096, 4096)]),
    "f16": (("f16", "f16"), G.TUNED[(4096, 4096, 4096)]),
    "bias-relu": (("bf16", "bf16", True, "relu"), G.TUNED[(4096, 4096, 4096)]),
}
#: specializations with a synchronisation VC over the verifier's resource limit
OVER_LIMIT = {
    "e3": "the consumers' waiter-lag VC (BN=192) exceeds the resource limit",
    "e4": "the producer's waiter-lag VC (6 stages) exceeds the resource limit (z3 proves it with 4x)",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=OVER_LIMIT[n]))
                                  if n in OVER_LIMIT else n for n in SPECIALIZATIONS])
def test_the_synchronisation_of_every_specialization_is_proved(name):
    args, config = SPECIALIZATIONS[name]
    kernel = G.gemm_kernel(*args).specialize(**config.consts(), SMS=132)
    results = _sync_results(kernel)
    assert not _not_proved(results)
    assert {"phase", "async", "mbarrier", "barrier", "write-conflict"} <= {r.vc.property for r in results}


def test_the_synchronisation_of_a_small_specialization_is_proved():
    results = _sync_results(_small())
    assert not _not_proved(results)


# --------------------------------------------------------------------------- planted bugs


def _ring(kernel, role):
    """The ring stage ``(o·nk + i) % S`` of ``role``'s loops and the k-block counter ``i``."""
    role_op = next(op for op in kernel.body.ops if isinstance(op, N.WarpRole) and op.name == role)
    wait = next(op for op in N.walk(role_op.body) if isinstance(op, N.MbarrierWait))
    stage = wait.bar.offset
    inner = next(op for op in N.walk(role_op.body) if isinstance(op, N.For) and op.body.ops
                 and any(isinstance(x, N.MbarrierWait) for x in op.body.ops))
    return stage, inner.var


@pytest.mark.slow  # the module's budget (60 s) in the default run
def test_a_consumer_stage_taken_from_the_k_block_alone_is_refuted():
    """``sc = kc % STAGES`` instead of ``jt % STAGES``: past the first tile (when the k-blocks
    per tile are not a multiple of the stages) the consumer waits on and reads another stage
    than the producer filled."""
    kernel = _small()
    stage, kc = _ring(kernel, "consumer")
    bad = _in_role(kernel, "consumer", lambda op: [_subst(op, {stage: sympy.Mod(kc, 2)})])
    cx = _refuted_and_replayed(_sync_results(bad), {"phase", "async"})
    assert cx.replay.violation["kind"] in ("parity", "deadlock", "async", "race")


def test_a_consumer_waiting_one_phase_late_is_refuted():
    """The consumers wait for phase ``jt // S + 1`` of ``full`` instead of ``jt // S``: they
    skip a round of data, and at the end of the ring wait for phases no copy completes."""

    def late(op):
        if isinstance(op, N.MbarrierWait):
            return [dataclasses.replace(op, phase=op.phase + 1, parity=sympy.Mod(op.phase + 1, 2))]
        return [op]

    cx = _refuted_and_replayed(_sync_results(_in_role(_small(), "consumer", late)), {"phase", "async"})
    assert cx.replay.violation["kind"] in ("deadlock", "parity", "async")


def test_a_stage_released_before_its_wgmmas_retire_is_refuted():
    """``wgmma_wait(2)`` in the k loop: the previous k-block's wgmmas may still read the stage
    the consumers then give back to the producer."""

    def looser(op):
        if isinstance(op, N.AsyncWait) and op.group is N.HandleKind.WGMMA_GROUP and op.pending == 1:
            return [dataclasses.replace(op, pending=2)]
        return [op]

    cx = _refuted_and_replayed(_sync_results(_in_role(_small(), "consumer", looser)), {"async"})
    assert cx.replay.violation["kind"] in ("async", "race")


@pytest.mark.slow  # the module's budget (60 s) in the default run
def test_the_synchronisation_of_the_one_thread_release_is_proved():
    """``RELEASE="warpgroups"``: the consumers meet at their role's named barrier (under
    ``if kc > 0`` in the k loop) and one thread arrives for all of them."""
    assert not _not_proved(_sync_results(_small(RELEASE="warpgroups")))


def test_a_one_thread_release_without_the_barrier_is_refuted():
    """Without the named barrier, the arriving thread gives the stage back while the other
    consumer threads' wgmmas may still read it."""

    def drop(region_ops):
        out = []
        for i, op in enumerate(region_ops):
            follows = i + 1 < len(region_ops) and isinstance(region_ops[i + 1], N.MbarrierArrive)
            if not (isinstance(op, N.Barrier) and follows):
                out.append(op)
        return out

    def fn(op):
        for f in dataclasses.fields(op):
            value = getattr(op, f.name)
            if isinstance(value, N.Region):
                op = dataclasses.replace(op, **{f.name: N.Region(tuple(drop(list(value.ops))))})
        return [op]

    bad = _in_role(_small(RELEASE="warpgroups"), "consumer", fn)
    assert sum(isinstance(op, N.Barrier) for op in N.walk(bad.body)) < \
        sum(isinstance(op, N.Barrier) for op in N.walk(_small(RELEASE="warpgroups").body))
    cx = _refuted_and_replayed(_sync_results(bad), {"async", "phase"})
    assert cx.replay.violation["kind"] in ("async", "race", "parity", "deadlock")


def test_a_missing_release_of_the_last_k_block_deadlocks():
    """Without the release after the k loop, the stage of each tile's last k-block is never
    given back: the producer waits for it forever once the ring comes round."""

    def drop(op):
        if isinstance(op, N.For):  # the tile loop's body: drop the arrive that follows the k loop
            ops = op.body.ops
            inner = [i for i, x in enumerate(ops) if isinstance(x, N.For)]
            if inner:
                kept = [x for i, x in enumerate(ops) if not (isinstance(x, N.MbarrierArrive) and i > inner[0])]
                return [dataclasses.replace(op, body=N.Region(tuple(kept)))]
        return [op]

    cx = _refuted_and_replayed(_sync_results(_in_role(_small(), "consumer", drop)), {"phase"})
    assert cx.replay.violation["kind"] == "deadlock"


def test_a_staging_buffer_rewritten_before_its_store_read_it_is_refuted():
    """Without ``tma_store_wait(.., read=True)`` the epilogue writes a staging box that the
    previous tile's TMA store may still be reading."""

    def drop(op):
        if isinstance(op, N.AsyncWait) and op.group is N.HandleKind.TMA_STORE_GROUP and op.read:
            return []
        return [op]

    cx = _refuted_and_replayed(_sync_results(_mutate(_small(), drop)), {"async"})
    assert cx.replay.violation["kind"] == "async"


def test_a_tile_order_that_is_not_injective_is_refuted(monkeypatch):
    """Tile columns counted in whole groups (``r // GROUP_M``) while the last group is
    clipped: two tiles of the last group map to the same C tile, written by two blocks."""

    def tile_of(t, tiles_m, tiles_n, group_m):
        from argus import symbolic

        per_group = group_m * tiles_n
        first = symbolic.floordiv(t, per_group) * group_m
        height = sympy.Min(tiles_m - first, group_m)
        r = symbolic.mod(t, per_group)
        return first + symbolic.mod(r, height), symbolic.floordiv(r, group_m)

    monkeypatch.setattr(G, "tile_of", tile_of)
    cx = _refuted_and_replayed(_sync_results(_small(GROUP_M=4)), {"write-conflict"})
    assert cx.replay.violation["kind"] in ("write-conflict", "race")


def _tag_results(kernel):
    analysis, vcs = generate_vcs(kernel)
    return discharge(kernel, analysis, [vc for vc in vcs if vc.property == "tag" and "stage" in vc.message])


@pytest.mark.slow  # the module's budget (60 s) in the default run
def test_b_loaded_from_the_next_k_block_is_refuted():
    """The producer loads B's box of k-block ``kt + 1`` (zero-filled past K): the consumers'
    stage assertion on B fails, and the counterexample replays."""
    kernel = _small()
    _, kt = _ring(kernel, "producer")

    def shifted(op):
        if isinstance(op, N.Copy) and op.atom == "tma.load" and op.src.buffer.name == "b":
            return [dataclasses.replace(op, src=_subst(op.src, {kt: kt + 1}))]
        return [op]

    cx = _refuted_and_replayed(_tag_results(_in_role(kernel, "producer", shifted)), {"tag"})
    assert cx.replay.violation["kind"] == "tag"


#: the kernel factory's arguments of the variants benchmarks/gemm.py runs: output types, the
#: bias + ReLU epilogue, fp16 inputs, and the operand layouts (B as K x N, A as K x M, both)
VARIANTS = [("bf16", "bf16", True, "relu"), ("f16", "f16"), ("bf16", "f32"),
            ("bf16", "bf16", False, None, "k", "n"), ("bf16", "bf16", False, None, "m", "k"),
            ("bf16", "bf16", False, None, "m", "n")]
#: what the gate must build without solvers: every candidate of the main variant, and every
#: pick of the autotuner (``tuned_picks``: the 4096³ one and the skinny one) of each variant
PROVED = [((), c) for c in G.CANDIDATES] + [(args, c) for args in VARIANTS for c in G.tuned_picks()]


def test_the_required_records_follow_the_autotuner_and_the_benchmark(gemm_benchmark):
    """A pick added to ``TUNED`` (or a new fallback of ``tuned_config``) and a variant added to
    the benchmark are required here."""
    shapes = [*G.TUNED, (1, 8, 8), (G.BM, 4096, 4096), (G.BM + 1, 4096, 4096), (5000, 3000, 7000)]
    assert {G.tuned_config(*s) for s in shapes} <= set(G.tuned_picks())
    bench = gemm_benchmark
    assert {G.gemm_kernel(*a).name for a in bench.VARIANTS.values()} == {G.gemm_kernel().name} | \
        {G.gemm_kernel(*a).name for a in VARIANTS}


@pytest.mark.parametrize("args, config", PROVED, ids=[f"{G.gemm_kernel(*a).name}-BN{c.BN}-G{c.GROUP_M}" for a, c in PROVED])
def test_every_specialization_the_benchmark_runs_has_a_proof_record(args, config):
    """The gate builds them from their records: a record must exist, be proved, and be bound to
    the kernel's IR as it is now (an edited kernel needs ``benchmarks/prove_gemm.py`` again)."""
    from argus.runtime.gate import find_record

    kernel = G.gemm_kernel(*args).specialize(**config.consts(), SMS=132)
    record = find_record(kernel)
    assert record is not None and record.proved, \
        f"{kernel.name} {config}: no proof record; run benchmarks/prove_gemm.py (and check in proofs/)"
    assert record.matches(kernel) and all(e.verdict == "proved" for e in record.vcs)
    assert {"mma-operands", "tag", "coverage", "phase", "race", "write-conflict"} <= {e.property for e in record.vcs}


def test_the_benchmark_grid_candidates_have_proof_records(gemm_benchmark):
    """``benchmarks/gemm.py``'s keys at a fixed persistent grid (``main_c1_sms128``, its deferred
    epilogue ``main_c3_sms128``, their serialized twins (``PDL=False``) and the variants' 4096³ picks at 128
    blocks) enter its autotuners and step 6 only through the gate: their records must exist and
    be bound to the kernel now."""
    from argus.runtime.gate import find_record

    bench = gemm_benchmark
    fixed = [(key, variant, consts) for key, variant, consts in bench._specializations() if "SMS" in consts]
    assert [key for key, *_ in fixed] == ["main_c1_sms128", "main_c3_sms128", "main_c1_sms128_serial",
                                          "main_c3_sms128_serial", *(f"{v}_tuned_sms128" for v in bench.TIMED_VARIANTS)]
    for key, variant, consts in fixed:
        kernel = G.gemm_kernel(*bench.VARIANTS[variant]).specialize(**consts)
        record = find_record(kernel)
        assert record is not None and record.proved and record.matches(kernel), f"{key}: no current proof record"
        assert record.consts["SMS"] == consts["SMS"]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="; ".join(REMAINING))
def test_the_default_specialization_is_not_proved_under_the_default_limits():
    from argus.proofs import verify_kernel

    report = verify_kernel(G.gemm_kernel().specialize(**G.EARLIER[0].consts(), SMS=132))
    assert report.verdict == "proved", report.human()
