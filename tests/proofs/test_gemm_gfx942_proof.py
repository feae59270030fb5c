"""The gfx942 GEMM twin (``argus.kernels.gemm_gfx942``) under the verifier.

Fast: what made it ``unknown`` before is modelled — the buffer loads (``buffer.load`` into
registers, ``buffer.load.lds`` direct to LDS) are plain synchronous copies, as the reference
interpreter runs them, and the k loop, unrolled twice with one barrier per k-block under
``if kt < KT``, passes a number of barriers per iteration that :func:`barriers_before` counts
in closed form.  Slow: ``CONFIGS[0]`` proved with both stagings (about two minutes each on a
loaded two-core machine), and a planted bug refuted with a counterexample the interpreter
reproduces.
"""

import inspect

import pytest
import sympy

import argus.kernels.gemm_gfx942 as G
from argus.abstract_interp import program as P
from argus.abstract_interp.analysis import Analysis
from argus.ir import nodes as N

#: the solvers of ``argus verify`` (z3, then cvc5 where z3 gives up): z3 alone gives up on a few
#: coverage VCs of the twin under its tracked (incremental) resource limit
SOLVERS = ("z3", "cvc5")


def _k_loop(kernel):
    return next(op for op in kernel.body.ops if isinstance(op, N.For))


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "vgpr"])
def test_nothing_of_the_twin_is_unsupported(direct):
    analysis = Analysis(G.gemm_gfx942(**G.CONFIGS[0], DIRECT=direct).specialize())
    assert not analysis.program.unsupported and not analysis.unsupported and not analysis.taint


def test_barriers_of_the_twice_unrolled_k_loop_are_counted_per_iteration():
    kernel = G.gemm_gfx942(**G.CONFIGS[0]).specialize()
    loop = _k_loop(kernel)
    per_iteration = P.barrier_count(loop.body, {})
    before = P.barriers_before(per_iteration, loop.var, loop.start, loop.step, loop.var)
    total = P.barriers_before(per_iteration, loop.var, loop.start, loop.step, loop.stop)
    (kt,) = {s for s in total.free_symbols}
    for trips in range(1, 9):  # one barrier per k-block: iteration kp starts after 2·kp of them
        assert int(total.subs(kt, trips)) == trips
        for kp in range((trips + 1) // 2):
            assert int(before.subs({kt: trips, loop.var: kp})) == 2 * kp


def test_barrier_counts_of_other_shapes_stay_unsupported():
    k, n = sympy.symbols("k n", integer=True)
    varying = sympy.Piecewise((k, k > 2), (0, True))  # the count itself depends on the counter
    assert P.barriers_before(varying, k, 0, 1, n) is None
    both = sympy.Piecewise((1, sympy.And(k > 0, k < n)), (0, True))  # not one inequality
    assert P.barriers_before(both, k, 0, 1, n) is None
    assert P.barriers_before(sympy.Piecewise((1, k < n), (0, True)), k, 0, 2, n) is None  # step 2


def _verify(kernel):
    from argus.proofs import verify_kernel
    from argus.proofs.provers import make_prover

    prover = make_prover("portfolio")
    try:
        return verify_kernel(kernel, prover=prover)
    finally:
        prover.close()


@pytest.mark.slow
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "vgpr"])
def test_twin_is_proved(direct):
    report = _verify(G.gemm_gfx942(**G.CONFIGS[0], DIRECT=direct).specialize())
    assert report.verdict == "proved", report.human()


def _swapped_ksteps(sa, sb, acc, wm, wn, tm, tn, bk):
    """``_mfmas`` with B's k-steps rotated by one: each MFMA pairs A's k-step ``ks`` with B's
    ``ks + 1`` (a planted bug)."""
    import argus.spec as A

    for ks in range(bk // 8):
        kb = (ks + 1) % (bk // 8)
        fa = [A.load(A.mma_partition(G.ATOM, "a", sa.tile((32, 8), (wm * tm + mi, ks)))) for mi in range(tm)]
        fb = [A.load(A.mma_partition(G.ATOM, "b", sb.tile((32, 8), (wn * tn + ni, kb)))) for ni in range(tn)]
        for mi in range(tm):
            for ni in range(tn):
                A.mma(G.ATOM, fa[mi], fb[ni], acc[mi][ni])


@pytest.mark.slow
def test_twin_with_swapped_ksteps_is_refuted_at_the_mfma(monkeypatch):
    monkeypatch.setattr(G, "_mfmas", _swapped_ksteps)
    kernel = G.gemm_gfx942.__wrapped__(**G.CONFIGS[0], DIRECT=True).specialize()
    report = _verify(kernel)
    assert report.verdict == "refuted", report.human()
    found = [c for c in report.counterexamples if c.property == "tag"]
    assert found, report.human()
    cx = found[0]
    lines, first = inspect.getsourcelines(_swapped_ksteps)
    mma_line = first + next(i for i, line in enumerate(lines) if "A.mma(" in line)
    assert cx.position.line == mma_line, cx.human()
    assert cx.replay.status == "reproduced", cx.human()
    assert cx.replay.violation["kind"] == "tag"


#: the configurations with a checked-in proof record (``proofs/``); the gate builds them offline
RECORDED = ["gemm_gfx942_64x64x32_lds", "gemm_gfx942_64x64x32_vgpr", "gemm_gfx942_128x128x32_lds",
            "gemm_gfx942_128x64x64_lds"]


@pytest.mark.parametrize("config", G.CONFIGS, ids=lambda c: f"{c['BM']}x{c['BN']}x{c['BK']}")
@pytest.mark.parametrize("direct", [True, False], ids=["lds", "vgpr"])
def test_the_gate_builds_the_recorded_configurations_without_solvers(config, direct):
    from argus.runtime.gate import VerificationRequired, require_proof

    kernel = G.gemm_gfx942(**config, DIRECT=direct).specialize()
    assert G.kernel_named(kernel.name).specialize().name == kernel.name
    if kernel.name in RECORDED:
        record = require_proof(kernel, verify=False)
        assert record.proved and record.matches(kernel)
    else:  # not proved yet: refused (the gate would run the verifier where it can)
        with pytest.raises(VerificationRequired):
            require_proof(kernel, verify=False)
