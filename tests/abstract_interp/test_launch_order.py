"""Programmatic dependent launch: every global access after the thread's grid-dependency wait
(the ``launch-order`` property), proved, refuted with a replayed counterexample, emitted."""

import inspect

import numpy as np
import pytest

import argus.spec as A
from argus.abstract_interp import generate_vcs
from argus.backend_ptx.emit import emit_ptx
from argus.ir.interpreter import Interpreter, InterpreterError
from argus.proofs.verify import verify_kernel


@A.kernel(threads=128, grid=lambda n: (A.cdiv(n, 128),), assume=lambda n: [n >= 1])
def scaled(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index, WAIT: A.const = "first",
           TRIGGER: A.const = False):
    """y = 2x for a kernel launched as a dependent.  WAIT: "first" (every thread, at entry),
    "late" (after the load), "half" (threads 0..63 only), "guarded" (under the same condition as
    the accesses, which are then under it too), "loop" (inside a loop before the accesses, which
    runs at least once), "maybe_never" (inside a loop that runs no iteration at n = 1)."""
    i = A.block_id(0) * 128 + A.thread_id()
    if WAIT == "first":
        A.grid_dependency_wait()
    if WAIT == "half":
        if A.thread_id() < 64:
            A.grid_dependency_wait()
    if WAIT == "loop":
        for _ in A.range(n):
            A.grid_dependency_wait()
    if WAIT == "maybe_never":
        for _ in A.range(n - 1):
            A.grid_dependency_wait()
    if WAIT == "guarded":
        if i < n:
            A.grid_dependency_wait()
        if i < n:
            v = A.load(x.tile((1,), (i,)))
            A.store(v + v, y.tile((1,), (i,)))
    else:
        v = A.load(x.tile((128,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
        if WAIT == "late":
            A.grid_dependency_wait()
        if TRIGGER:
            A.launch_dependents()
        A.store(v + v, y.tile((128,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(scaled.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _order_vcs(kernel):
    _, vcs = generate_vcs(kernel)
    return [vc for vc in vcs if vc.property == "launch-order"]


def test_a_wait_at_entry_discharges_every_global_access_structurally():
    vcs = _order_vcs(scaled.specialize(TRIGGER=True))
    assert len(vcs) == 2  # the load of x and the store of y
    assert all(vc.structural and "every thread waits" in vc.structural for vc in vcs)
    report = verify_kernel(scaled.specialize(TRIGGER=True))
    assert report.verdict == "proved", report.human()


def test_a_kernel_without_a_wait_has_no_launch_order_vcs():
    assert _order_vcs(scaled.specialize(WAIT="none")) == []
    report = verify_kernel(scaled.specialize(WAIT="none"))
    assert report.verdict == "proved", report.human()


def test_a_wait_under_the_accesses_own_condition_is_proved_by_the_solver():
    vcs = _order_vcs(scaled.specialize(WAIT="guarded"))
    assert len(vcs) == 2 and not any(vc.structural for vc in vcs)
    report = verify_kernel(scaled.specialize(WAIT="guarded"))
    assert report.verdict == "proved", report.human()


@pytest.mark.parametrize("wait, thread_at_least", [("late", 0), ("half", 64)])
def test_a_global_access_before_the_threads_wait_is_refuted_and_replayed(wait, thread_at_least):
    report = verify_kernel(scaled.specialize(WAIT=wait))
    assert report.verdict == "refuted", report.human()
    cxs = [cx for cx in report.counterexamples if cx.property == "launch-order"]
    load = _line("v = A.load(x.tile((128,)")
    cx = next(cx for cx in cxs if cx.position.line == load)
    assert cx.thread >= thread_at_least and cx.op == "Copy"
    assert cx.replay.status == "reproduced", cx.human()
    if wait == "late":  # the store comes after the wait: only the load is early
        assert {c.position.line for c in cxs} == {load}


def test_a_wait_inside_a_loop_counts_through_its_first_iteration():
    vcs = _order_vcs(scaled.specialize(WAIT="loop"))
    assert vcs and all("first iteration" in note for vc in vcs for note in vc.approximations)
    report = verify_kernel(scaled.specialize(WAIT="loop"))  # n >= 1: the loop runs
    assert report.verdict == "proved", report.human()
    report = verify_kernel(scaled.specialize(WAIT="maybe_never"))  # at n = 1 it does not
    assert report.verdict == "refuted", report.human()
    cx = next(cx for cx in report.counterexamples if cx.property == "launch-order")
    assert cx.sizes["n"] == 1 and cx.replay.status == "reproduced", cx.human()


def test_the_interpreter_stops_at_the_first_early_access():
    x = np.arange(256, dtype=np.float32)
    out = Interpreter(scaled.specialize()).run({"x": x, "y": np.zeros(256, np.float32)}, {"n": 256})
    assert np.array_equal(out["y"], 2 * x)
    with pytest.raises(InterpreterError) as err:
        Interpreter(scaled.specialize(WAIT="half")).run({"x": x, "y": np.zeros(256, np.float32)}, {"n": 256})
    v = err.value.violation
    assert v.kind == "launch-order" and v.thread >= 64 and v.position.line == _line("v = A.load(x.tile((128,)")


def test_the_wait_and_the_trigger_are_emitted_before_the_accesses_for_sm90_only():
    ptx = emit_ptx(scaled.specialize(TRIGGER=True))
    body = ptx.text
    assert body.count("griddepcontrol.wait;") == 1 and body.count("griddepcontrol.launch_dependents;") == 1
    first_global = min(body.index(t) for t in ("ld.global", "st.global") if t in body)
    assert body.index("griddepcontrol.wait;") < first_global
    assert ptx.dependent_launch
    assert not emit_ptx(scaled.specialize(WAIT="none")).dependent_launch
    old = emit_ptx(scaled.specialize(TRIGGER=True), target="sm_80")
    assert "griddepcontrol" not in old.text and not old.dependent_launch


def test_gfx942_runs_a_dependent_kernel_as_an_ordinary_one():
    """No dependent launch on gfx942: the wait and the trigger emit nothing, the kernel still runs."""
    from argus.toolchain import find_amdgpu_tools

    if find_amdgpu_tools() is None:
        pytest.skip("no LLVM with gfx942 (apt-get install llvm-19 lld-19)")
    from argus.backend_amdgcn.compile import emit
    from argus.backend_amdgcn.emulate_run import emulate_kernel

    kernel = scaled.specialize(TRIGGER=True)
    plain = emit(scaled.specialize(WAIT="none"))
    emitted = emit(kernel)
    body = [line for line in emitted.source.splitlines() if line.startswith("\t") and not line.startswith("\t.")]
    assert len(body) == len([line for line in plain.source.splitlines() if line.startswith("\t")
                             and not line.startswith("\t.")])
    x = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    got, _ = emulate_kernel(kernel, {"x": x, "y": np.zeros(200, np.float32)}, {"n": 200})
    assert np.array_equal(got["y"], 2 * x)


def test_the_wait_leaves_every_other_query_as_it_was():
    """A wait is placed, not listed among the sites: the queries of a kernel with it are the
    queries of the kernel without it (so a proof record's cached queries carry over)."""
    import dataclasses

    from argus.ir import nodes as N
    from argus.proofs.verify import _prepare

    def queries(kernel):
        _, vcs = generate_vcs(kernel)
        return {p[2] for vc in vcs if vc.property != "launch-order" and (p := _prepare(vc, None, kernel))}

    plain = scaled.specialize(WAIT="none")
    wait = N.Fence(fence="griddep.wait", loc=plain.body.ops[0].loc, scope=N.Scope.THREAD)
    waiting = dataclasses.replace(plain, body=N.Region((wait, *plain.body.ops)))
    assert queries(plain) and queries(waiting) == queries(plain)


@pytest.mark.gpu
def test_a_dependent_launch_reads_what_the_kernel_before_it_wrote(tmp_path, monkeypatch):
    """Launched with programmatic stream serialization right behind a torch kernel that writes
    its input: the wait orders the reads after that write, launch after launch."""
    import torch

    import argus

    pytest.importorskip("z3", reason="the gate proves the kernel here: it needs a solver")
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    kernel = argus.compile(scaled, TRIGGER=True)
    assert kernel.ptx.dependent_launch
    n = 1 << 20
    x = torch.empty(n, device="cuda")
    for step in range(20):
        ys = []
        for i in range(4):
            x.fill_(float(step * 4 + i))  # the kernel right before each dependent launch writes x
            y = torch.empty(n, device="cuda")
            kernel(x, y, n)
            ys.append(y)
        torch.cuda.synchronize()
        for i, y in enumerate(ys):
            assert torch.equal(y, torch.full_like(y, 2.0 * (step * 4 + i)))


def test_argus_verify_refutes_the_shipped_early_read(capsys):
    from pathlib import Path

    from argus.cli import main

    path = Path(__file__).resolve().parents[2] / "examples" / "buggy" / "dependent_early_read.py"
    assert main(["verify", str(path), "--solver", "z3"]) == 1
    out = capsys.readouterr().out
    assert "dependent_early_read: refuted" in out and "launch-order" in out and "reproduced" in out
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "planted bug" in text)
    assert f"dependent_early_read.py:{line}" in out


@A.kernel(threads=32, grid=lambda n: (1,), assume=lambda n: [n >= 2])
def rounds(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index):
    """Each round reads x[k], then waits: round 0 reads before any wait (later rounds after the
    previous round's)."""
    for k in A.range(n):
        v = A.load(x.tile((1,), (k,)))
        A.grid_dependency_wait()
        if A.thread_id() == 0:
            A.store(v + v, y.tile((1,), (k,)))


def test_a_wait_later_in_the_loop_does_not_cover_the_first_round():
    report = verify_kernel(rounds.specialize())
    assert report.verdict in ("refuted", "unknown"), report.human()  # never proved, never an internal error
    (result,) = [r for r in report.results if r.vc.property == "launch-order" and r.verdict != "proved"]
    assert "later in a loop around the access" in " ".join(result.vc.approximations)
    if result.verdict == "refuted":
        assert result.counterexample.replay.status == "reproduced", result.counterexample.human()
