"""The closed forms of the asynchrony model against enumeration, and the shape of its sites:
rounds of an mbarrier element counted in a loop, warp roles walked as guarded regions, thread
counts of a path."""

import dataclasses
import itertools
import sys
import types
from pathlib import Path

import pytest
import sympy

from argus.abstract_interp import generate_vcs
from argus.abstract_interp.analysis import Analysis
from argus.abstract_interp.mbarrier import Counter
from argus.abstract_interp.program import Loop, build_program
from argus.abstract_interp.roles import executing_threads, thread_sum
from argus.ir import nodes as N
from argus.smt import terms as T
from argus.smt.evaluate import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "proofs"))
import async_kernels_support as S

K = sympy.Symbol("k", integer=True)


class _Encoder:
    """The one method of an encoder the counter uses: sympy → terms."""

    def term(self, expr, values):
        from argus.smt.from_sympy import from_sympy

        return from_sympy(sympy.sympify(expr), dict(values))


class _Analysis:
    encoder = _Encoder()


@pytest.mark.parametrize("stages, offset", [(1, 0), (2, 1), (3, 2), (4, -3), (3, 0)])
def test_rounds_of_a_periodic_element_match_enumeration(stages, offset):
    """``#{k in [lo, hi) : (k + c) % S == e}`` for every small lo, hi and e (e outside 0..S-1
    included: it is never named)."""
    counter = Counter(_Analysis())
    loop = Loop(None, K, 0, 0, 1)
    elem = sympy.Mod(K + offset, stages)
    for lo, hi, e in itertools.product(range(-3, 5), range(-3, 9), range(-1, stages + 1)):
        term = counter._in_range(loop, T.int_const(lo), T.int_const(hi), T.int_const(e), elem, {})
        expected = sum(1 for k in range(lo, hi) if (k + offset) % stages == e)
        assert evaluate(term, {}) == expected, (lo, hi, e)


def test_rounds_of_a_linear_element_match_enumeration():
    counter = Counter(_Analysis())
    loop = Loop(None, K, 0, 0, 1)
    for c, lo, hi, e in itertools.product(range(-2, 3), range(-2, 3), range(-2, 6), range(-3, 7)):
        term = counter._in_range(loop, T.int_const(lo), T.int_const(hi), T.int_const(e), K + c, {})
        assert evaluate(term, {}) == sum(1 for k in range(lo, hi) if k + c == e), (c, lo, hi, e)


def test_warp_roles_guard_their_sites_and_a_role_with_a_barrier_is_unsupported():
    kernel = S.WS.specialize()
    program = build_program(kernel)
    roles = {op.name: op for op in N.walk(kernel.body) if isinstance(op, N.WarpRole)}
    for site in program.sites:
        guards = [c.op for c in site.conditions if c.what == "role"]
        if isinstance(site.op, N.MbarrierArrive) and site.op.expect_tx != 0:
            assert guards == [roles["producer"]]
        if isinstance(site.op, N.Mma):
            assert guards == [roles["consumer"]]
    role = roles["producer"]
    with_barrier = dataclasses.replace(role, body=N.Region((*role.body.ops, N.Barrier(loc=role.loc))))
    body = N.Region(tuple(with_barrier if op is role else op for op in kernel.body.ops))
    broken = build_program(dataclasses.replace(kernel, body=body))
    assert any("barrier inside the warp role" in reason for _, reason in broken.unsupported)


def test_thread_counts_of_role_and_election_paths():
    analysis = Analysis(S.WS.specialize())
    sites = {type(s.op).__name__ + str(i): s for i, s in enumerate(analysis.program.sites)}
    arrive = next(s for s in sites.values() if isinstance(s.op, N.MbarrierArrive) and s.op.expect_tx != 0)
    release = next(s for s in sites.values() if isinstance(s.op, N.MbarrierArrive) and s.op.expect_tx == 0)
    values = {**{b: T.int_const(0) for b in analysis.block_ids},
              **{lp.var: T.int_const(0) for lp in arrive.loops + release.loops}}
    assert evaluate(thread_sum(analysis, arrive, values, 1), {"K": 320}) == 1  # the elected producer thread
    assert evaluate(thread_sum(analysis, release, values, 1), {"K": 320}) == 256  # both consumer warpgroups
    init = next(s for s in sites.values() if isinstance(s.op, N.MbarrierInit))
    assert executing_threads(analysis, init, {}) == [0]


def test_every_async_op_of_the_hopper_examples_is_modelled():
    _, vcs = generate_vcs(S.WS.specialize())
    mine = {"async", "mbarrier", "expect-tx", "phase", "registers", "descriptor", "wgmma"}
    assert not [vc for vc in vcs if vc.unknown and vc.property in mine | {"unsupported"}]
    assert mine - {"wgmma"} <= {vc.property for vc in vcs}


def test_the_copy_a_consumer_sees_is_the_one_of_the_phase_it_observed():
    """In the warp-specialized GEMM, consumer iteration k reads stage k % 3: of the producer's
    copies into that stage, exactly iteration k joined the phase its wait observed."""
    from argus.abstract_interp.asynchrony import delivered_to, model
    from argus.abstract_interp.encoding import Instance

    analysis = Analysis(S.WS.specialize())
    copy = model(analysis).tma_loads[0]
    mma = next(s for s in analysis.program.sites if isinstance(s.op, N.Mma))
    block = {b: T.int_const(0) for b in analysis.block_ids}
    for k in range(7):
        reader = Instance(mma, {**block, analysis.tid: T.int_const(128), mma.loops[0].var: T.int_const(k)})
        seen = [j for j in range(10) if j % 3 == k % 3 and evaluate(delivered_to(
            analysis, Instance(copy, {**block, analysis.tid: T.int_const(0), copy.loops[0].var: T.int_const(j)}),
            reader), {"K": 640})]
        assert seen == [k]


# --------------------------------------------------------------------------- nested loops (persistent kernels)

OUTER, INNER, TILES, NK = (sympy.Symbol(n, integer=True) for n in ("o", "i", "tiles", "nk"))


class _NestedAnalysis(_Analysis):
    tid = sympy.Symbol("tid", integer=True)


def _nested_site(index, loops, elem_cond=None):
    from argus.abstract_interp.program import Condition, Site

    conditions = tuple(Condition(lp.condition(), None, "loop") for lp in loops)
    if elem_cond is not None:
        conditions += (Condition(elem_cond, None, "then"),)
    return Site(index, None, (), conditions, loops, 0)


def _order(site, o, i):
    """Dynamic order of an instance: the inner loop's sites have indices 4 .. 7 of the outer body."""
    return (o, 4, i, site.index) if len(site.loops) == 2 else (o, site.index, 0, 0)


@pytest.mark.parametrize("stages, offset, skip", [(4, 0, 0), (4, -1, 1), (3, 0, 1), (6, 2, 2), (2, -1, 1)])
def test_rounds_in_nested_loops_match_enumeration(stages, offset, skip):
    """Counts over the flattened counter ``o·nk + i`` of a persistent kernel's ring: a site in
    both loops (running for ``i >= skip``) and a site after the inner loop on the stage of the
    tile's last k-block, before instances in both loops, in the outer loop only, and overall."""
    from argus.abstract_interp.encoding import Instance

    counter = Counter(_NestedAnalysis())
    outer, inner = Loop(None, OUTER, 0, TILES, 1), Loop(None, INNER, 0, NK, 1)
    ring = _nested_site(5, (outer, inner), sympy.Ge(INNER, skip) if skip else None)
    ring_elem = sympy.Mod(OUTER * NK + INNER + offset, stages)
    last = _nested_site(8, (outer,))
    last_elem = sympy.Mod(OUTER * NK + NK - 1, stages)
    probes = [_nested_site(3, (outer, inner)), _nested_site(7, (outer, inner)), _nested_site(2, (outer,)),
              _nested_site(9, (outer,))]
    for tiles, nk in itertools.product(range(0, 4), range(1, 6)):
        env = {TILES: T.int_const(tiles), NK: T.int_const(nk)}
        runs = {id(ring): [(o, i) for o in range(tiles) for i in range(nk) if i >= skip],
                id(last): [(o, 0) for o in range(tiles)]}
        values_of = {id(ring): lambda o, i, nk=nk: (o * nk + i + offset) % stages,
                     id(last): lambda o, i, nk=nk: (o * nk + nk - 1) % stages}
        for site, elem in ((ring, ring_elem), (last, last_elem)):
            for e in range(stages):
                got = counter.count_before(site, None, T.int_const(e), elem, env)
                expected = sum(1 for o, i in runs[id(site)] if values_of[id(site)](o, i) == e)
                assert evaluate(got, {}) == expected, (site.index, tiles, nk, e)
                for probe in probes:
                    inner_too = len(probe.loops) == 2
                    for o, i in itertools.product(range(tiles), range(nk) if inner_too else (0,)):
                        at = Instance(probe, {**env, OUTER: T.int_const(o), INNER: T.int_const(i)})
                        got = counter.count_before(site, at, T.int_const(e), elem)
                        before = _order(probe, o, i)
                        expected = sum(1 for oo, ii in runs[id(site)]
                                       if values_of[id(site)](oo, ii) == e and _order(site, oo, ii) < before)
                        assert evaluate(got, {}) == expected, (site.index, probe.index, tiles, nk, e, o, i)


@pytest.mark.parametrize("at_inner, from_outer, skip", [(0, 0, 0), (0, 1, 0), (2, 0, 0), (1, 2, 1), (None, 1, 0),
                                                         (None, 2, 1), (0, 0, 1)])
@pytest.mark.parametrize("staged", [False, True])
def test_a_site_pinned_to_one_inner_iteration_or_late_outer_ones_counts_as_enumerated(at_inner, from_outer, skip,
                                                                                    staged):
    """A site in both loops under ``i == c`` (one column of the nest: a deferred store's commit
    in a tile's first k-block), ``o >= a`` (not in the first tiles) and ``i >= b``, with and
    without a ring element: its executions before instances in both loops, in the outer loop
    only, and overall, equal the enumeration's."""
    from argus.abstract_interp.encoding import Instance
    from argus.abstract_interp.program import Condition, Site

    counter = Counter(_NestedAnalysis())
    outer, inner = Loop(None, OUTER, 0, TILES, 1), Loop(None, INNER, 0, NK, 1)
    conditions = [Condition(lp.condition(), None, "loop") for lp in (outer, inner)]
    if at_inner is not None:
        conditions.append(Condition(sympy.Eq(INNER, at_inner), None, "then"))
    if from_outer:
        conditions.append(Condition(sympy.Gt(OUTER, from_outer - 1), None, "then"))
    if skip:
        conditions.append(Condition(sympy.Ge(INNER, skip), None, "then"))
    site = Site(5, None, (), tuple(conditions), (outer, inner), 0)
    stages = 3
    elem = sympy.Mod(OUTER * NK + INNER + 1, stages) if staged else None
    probes = [_nested_site(3, (outer, inner)), _nested_site(7, (outer, inner)), _nested_site(2, (outer,)),
              _nested_site(9, (outer,))]
    for tiles, nk in itertools.product(range(0, 5), range(1, 5)):
        env = {TILES: T.int_const(tiles), NK: T.int_const(nk)}
        runs = [(o, i) for o in range(tiles) for i in range(nk)
                if (at_inner is None or i == at_inner) and o >= from_outer and i >= skip]
        for e in range(stages) if staged else (None,):
            def hits(o, i, e=e, nk=nk):
                return e is None or (o * nk + i + 1) % stages == e
            element = T.int_const(e) if staged else None
            got = counter.count_before(site, None, element, elem, env)
            assert evaluate(got, {}) == sum(hits(o, i) for o, i in runs), (tiles, nk, e)
            for probe in probes:
                for o, i in itertools.product(range(tiles), range(nk) if len(probe.loops) == 2 else (0,)):
                    at = Instance(probe, {**env, OUTER: T.int_const(o), INNER: T.int_const(i)})
                    got = counter.count_before(site, at, element, elem)
                    before = _order(probe, o, i)
                    expected = sum(1 for oo, ii in runs if hits(oo, ii) and _order(site, oo, ii) < before)
                    assert evaluate(got, {}) == expected, (probe.index, tiles, nk, e, o, i)


def test_a_site_under_another_condition_on_the_nested_counters_is_not_modelled():
    from argus.abstract_interp.mbarrier import NotModelled
    from argus.abstract_interp.program import Condition, Site

    counter = Counter(_NestedAnalysis())
    op = types.SimpleNamespace(loc="gemm.py:7", kind="AsyncCommit")
    outer, inner = Loop(op, OUTER, 0, TILES, 1), Loop(op, INNER, 0, NK, 1)
    for cond in (sympy.Lt(INNER, 2), sympy.Eq(INNER, OUTER), sympy.Eq(OUTER, 1)):
        conditions = (*(Condition(lp.condition(), None, "loop") for lp in (outer, inner)),
                      Condition(cond, None, "then"))
        site = Site(5, op, (), conditions, (outer, inner), 0)
        with pytest.raises(NotModelled, match="other than inner counter >= a constant"):
            counter.count_before(site, None, None, None, {TILES: T.int_const(3), NK: T.int_const(4)})
