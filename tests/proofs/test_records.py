"""Proof records: bound to the kernel hash, round-trip JSON, the VC cache, and the checked-in
records of the examples re-checked against a fresh verification."""

import json
from pathlib import Path

import interp_kernels as K
import pytest
import vector_add as VA
import verifier_kernels as V

from argus.proofs import ProofRecord, VCCache, verify_kernel
from argus.proofs.cli_verify import load_kernels
from argus.spec.kernel import kernel_hash

ROOT = Path(__file__).resolve().parents[2]


def test_record_is_bound_to_the_kernel_and_round_trips(tmp_path):
    kernel = VA.vector_add.specialize()
    report = verify_kernel(kernel)
    record = report.record
    assert record.kernel_hash == kernel_hash(kernel) and record.verdict == "proved"
    assert record.solvers.get("z3")
    assert all(e.hash and len(e.hash) == 64 and e.solver for e in record.vcs)
    loaded = ProofRecord.load(record.save(tmp_path / "r.json"))
    assert loaded == record and loaded.matches(kernel)
    assert not loaded.matches(VA.vector_add.specialize(BLOCK=64))
    with pytest.raises(ValueError):
        ProofRecord.from_json({**json.loads((tmp_path / "r.json").read_text()), "version": 99})


def test_vc_cache_reuses_proofs_by_hash(tmp_path):
    cache = VCCache(tmp_path / "cache")
    first = verify_kernel(K.rotate_through_shared.specialize(), cache=cache)
    assert first.verdict == "proved" and not any(r.cached for r in first.results)
    again = verify_kernel(K.rotate_through_shared.specialize(), cache=VCCache(tmp_path / "cache"))
    solved = [r for r in again.results if r.solver != "structural"]
    assert again.verdict == "proved" and solved and all(r.cached for r in solved)


def test_the_cache_is_seeded_from_proof_records(tmp_path):
    """A fresh cache seeded from a directory of records holds every solved VC of them: the
    kernel verifies again without a solver call (and a record of another argus version, a
    refuted VC and a file that is no record add nothing)."""
    from argus.proofs import LocalProver

    class NoSolver(LocalProver):
        def check(self, query, guards):
            raise AssertionError("a seeded query was solved again")

    kernel = K.rotate_through_shared.specialize()
    record = verify_kernel(kernel).record
    records = tmp_path / "records"
    record.save(records / "rotate.json")
    (records / "notes.json").write_text("{}")
    old = json.loads((records / "rotate.json").read_text())
    for vc in old["vcs"]:
        vc["hash"] = "0" * 63 + "1"
    (records / "old.json").write_text(json.dumps({**old, "argus_version": "0.0.0"}))
    cache = VCCache(tmp_path / "cache")
    solved = {e.hash for e in record.vcs if e.solver not in (None, "structural")}
    assert solved and cache.seed(records) == len(solved)
    assert cache.seed(records) == 0  # already there
    assert VCCache(tmp_path / "cache").get("0" * 63 + "1") is None
    again = verify_kernel(kernel, prover=NoSolver("z3"), cache=VCCache(tmp_path / "cache"))
    assert again.verdict == "proved"
    assert all(r.cached for r in again.results if r.solver != "structural")


def test_a_run_stopped_halfway_resumes_from_the_cache(tmp_path, monkeypatch):
    """Each query proved valid is cached as soon as it is answered, not when the kernel's
    verification ends: a run that is killed (or fails) halfway loses none of its proofs."""
    import argus.proofs.verify as verify
    from argus.proofs import LocalProver

    class Stops(LocalProver):
        checks = 0

        def check(self, query, guards):
            Stops.checks += 1
            if Stops.checks > 3:
                raise KeyboardInterrupt  # the run is stopped
            return super().check(query, guards)

    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    kernel = K.rotate_through_shared.specialize()
    with pytest.raises(KeyboardInterrupt):
        verify_kernel(kernel, prover=Stops("z3"), cache=VCCache(tmp_path / "cache"))
    assert len(list((tmp_path / "cache").glob("*/*.json"))) == 3
    again = verify_kernel(kernel, cache=VCCache(tmp_path / "cache"))
    assert again.verdict == "proved" and sum(r.cached for r in again.results) >= 3


def test_an_edited_kernel_reverifies_only_what_changed(tmp_path):
    cache = VCCache(tmp_path / "cache")
    verify_kernel(V.tail_store.specialize(PREDICATED=True), cache=cache)
    edited = verify_kernel(V.tail_store.specialize(PREDICATED=False), cache=cache)
    cached = [r for r in edited.results if r.cached]
    assert cached and len(cached) < len(edited.results)
    assert edited.verdict == "refuted"  # refutations are never taken from the cache


RECORDS = sorted((ROOT / "proofs").glob("*.json"))


#: the library GEMM record re-proved in slow runs (each takes ~6 minutes; benchmarks/prove_gemm.py
#: re-proves them all)
REPROVED_LIBRARY = ("gemm_bf16_bf16[BN=256-BK=64-STAGES=4-GROUP_M=16-SMS=132-RELEASE=threads-EPILOGUE=auto-CLUSTER=1-"
                    "INFLIGHT=0-L2=normal-PDL=True].json")


def test_the_library_record_re_proved_in_slow_runs_exists():
    # a renamed record (a new const) would otherwise leave every library GEMM record skipped
    assert REPROVED_LIBRARY in {p.name for p in RECORDS}


def _recheck(path):
    """Records whose proofs took long (the GEMMs) are re-proved only in slow runs."""
    record = ProofRecord.load(path)
    seconds = sum(e.seconds or 0 for e in record.vcs)
    # a library kernel's record is slow to re-prove whatever it says it took (VCs taken from a
    # VC cache record no solver time)
    library = (record.source or "").startswith("argus/kernels/")
    marks = [pytest.mark.slow] if seconds > 5 or library else []
    if record.source == "argus/kernels/gemm.py" and path.name != REPROVED_LIBRARY:
        marks.append(pytest.mark.skip(reason="a library GEMM record: benchmarks/prove_gemm.py re-proves it "
                                      f"({seconds:.0f} s of solver time); its binding is checked above"))
    return pytest.param(path, id=path.name, marks=marks)


def _specialized(path):
    record = ProofRecord.load(path)
    if record.source == "argus/kernels/gemm.py":  # the library GEMM: one kernel per variant name
        from argus.kernels.gemm import kernel_named

        return record, kernel_named(record.kernel).specialize(**record.consts)
    if record.source == "argus/kernels/gemm_gfx942.py":  # the gfx942 twin: one kernel per configuration
        from argus.kernels.gemm_gfx942 import kernel_named as gfx942_named

        return record, gfx942_named(record.kernel).specialize(**record.consts)
    kernels = {k.name: k for k in load_kernels(ROOT / "examples" / record.source)}
    return record, kernels[record.kernel].specialize(**record.consts)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_checked_in_records_match_their_kernels(path):
    record, kernel = _specialized(path)
    assert record.verdict == "proved"
    assert record.matches(kernel), f"{path.name} is stale: regenerate with argus verify --records proofs"


@pytest.mark.parametrize("path", [_recheck(p) for p in RECORDS])
def test_checked_in_records_still_hold(path):
    record, kernel = _specialized(path)
    assert record.matches(kernel), f"{path.name} is stale: regenerate with argus verify --records proofs"
    prover = None
    if record.rlimits:  # decided under other resource limits than the default: the same ones again
        from argus.proofs.provers import PortfolioProver

        prover = PortfolioProver(tuple(record.rlimits), rlimit=record.rlimits, wall_clock_s=900)
    try:
        report = verify_kernel(kernel, prover=prover)
    finally:
        if prover is not None:
            prover.close()
    assert report.verdict == record.verdict == "proved"
    assert {(e.id, e.hash, e.verdict) for e in report.record.vcs} == {(e.id, e.hash, e.verdict) for e in record.vcs}



def test_record_hashes_do_not_depend_on_the_checkouts_directory():
    """A structural or unknown VC is hashed by its reason, which names source positions:
    records made in one checkout must hold in another (CI clones elsewhere)."""
    from argus.abstract_interp.vc import VC
    from argus.proofs.verify import vc_hash
    from argus.smt import terms as T

    def vc(where: str, reason: str = "follows it") -> VC:
        return VC("cluster#1@9", "cluster", None, (), T.TRUE, "m",
                  structural=f"the cluster barrier at {where}/examples/k.py:93 {reason}")

    assert vc_hash(vc("/work/main")) == vc_hash(vc("/tmp/ci")) == vc_hash(vc("/home/u/argus"))
    assert vc_hash(vc("/work/main")) != vc_hash(vc("/work/main", "precedes it"))
