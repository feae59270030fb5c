"""Counterexamples: minimized, explained in the tensor's coordinates, versioned JSON, human text
with the source line, replay that tells a reproduced violation from one that is not."""

import dataclasses
import json

import interp_kernels as K
import verifier_kernels as V
from proof_support import source_line

from argus.proofs import verify_kernel
from argus.proofs.counterexample import FORMAT, FORMAT_VERSION, replay


def _first(report, prop):
    return next(c for c in report.counterexamples if c.property == prop)


def test_sizes_are_minimized_to_a_tile_or_two():
    cx = _first(verify_kernel(V.block_tiles.specialize(OVERLAP=True)), "write-conflict")
    assert cx.sizes == {"n": 65}  # two blocks, the smallest grid with a second block
    assert tuple(cx.block) == (0, 0, 0) and cx.other["block"] == [1, 0, 0]
    assert cx.thread == 0 and cx.other["thread"] == 0


def test_json_is_versioned_and_complete():
    report = verify_kernel(K.transpose_tagged.specialize(WRONG=True))
    data = json.loads(json.dumps(_first(report, "tag").to_json()))
    assert data["format"] == FORMAT and data["version"] == FORMAT_VERSION
    assert data["kernel"] == "transpose_tagged" and data["consts"] == {"WRONG": True}
    point = data["program_point"]
    assert point["line"] == source_line(K.transpose_tagged, "A.assert_tag(out")
    assert point["op"] == "AssertTag" and "assert_tag" in point["source"]
    assert data["block"] == [0, 0, 0] and data["thread"] == 0
    assert data["element"] == {"buffer": "y", "view": [0, 1], "tensor": [0, 1]}
    assert data["tags"] == {"actual": [0, 1], "expected": [1, 0]}
    assert data["replay"]["status"] == "reproduced"
    assert data["replay"]["violation"]["kind"] == "tag"


def test_human_text_shows_the_source_line_and_the_values():
    cx = _first(verify_kernel(V.tagged_copy.specialize(SHIFT=1)), "tag")
    text = cx.human()
    line = source_line(V.tagged_copy, "A.assert_tag(out")
    assert f"{line} | A.assert_tag(out" in text
    assert "actual tag ⊥ (untagged); expected (0,)" in text
    assert "replay: reproduced" in text


def test_loop_counterexamples_name_the_iteration_and_the_path():
    cx = _first(verify_kernel(V.shared_loop.specialize(SECOND_BARRIER=False)), "race")
    assert set(cx.iteration) == {next(iter(cx.iteration))} and cx.other["iteration"]
    assert cx.path and cx.path[0]["branch"] == "loop" and cx.path[0]["value"] is True
    assert cx.sizes["n"] % 64 == 0  # the declared assumption holds in the counterexample


def test_replay_tells_a_wrong_counterexample_apart():
    cx = _first(verify_kernel(K.raw_index_copy.specialize()), "in-bounds")
    assert cx.replay.status == "reproduced"
    # at a size where the thread is in bounds the interpreter runs clean
    clean = dataclasses.replace(cx, sizes={"n": 64}, replay=None)
    assert replay(K.raw_index_copy.specialize(), clean).status == "not-reproduced"
    # and a counterexample for another line is not confirmed by a violation elsewhere
    moved = dataclasses.replace(cx, position=dataclasses.replace(cx.position, line=cx.position.line + 1))
    assert replay(K.raw_index_copy.specialize(), moved).status == "different"


def test_race_counterexample_names_both_accesses():
    cx = _first(verify_kernel(K.rotate_through_shared.specialize(SYNC=False)), "race")
    assert cx.thread == 0 and cx.other["thread"] == 1
    assert cx.other["line"] == source_line(K.rotate_through_shared, "A.copy(x.tile((1,), (t,))")
    assert cx.other["kind"] == "write" and cx.buffer == "smem0"


def test_minimizing_stops_at_its_budget(monkeypatch):
    """Narrowing a model is bounded in time: with no budget left :func:`minimize` returns the
    solver's model, completed, without one more check; with time it narrows by checks."""
    from argus.abstract_interp import generate_vcs
    from argus.proofs import counterexample as CX
    from argus.smt.session import Session

    kernel = V.block_tiles.specialize(OVERLAP=True)
    report = verify_kernel(kernel)
    refuted = next(r for r in report.results if r.verdict == "refuted" and r.vc.property == "write-conflict")
    analysis, vcs = generate_vcs(kernel)
    vc = next(v for v in vcs if v.id == refuted.vc.id)
    raw = dict(refuted.model)
    checks = []
    original = Session.check
    monkeypatch.setattr(Session, "check", lambda self, *a, **k: checks.append(k.get("timeout_s")) or original(self, *a, **k))
    terms = list(_query_terms(vc))
    assert CX.minimize(vc, analysis, raw, budget_s=0.0) == CX.complete(raw, terms) and not checks
    CX.minimize(vc, analysis, raw, budget_s=60.0)
    assert checks and all(0 < t <= 60.0 for t in checks)  # each check gets the time that is left


def _query_terms(vc):
    from argus.proofs.provers import vc_query

    query, _ = vc_query(vc.hypotheses, vc.goal)
    return list(query.domain) + list(query.terms)
