"""A query every solver gave up on is checked again, alone in freshly started solver processes
(``verify_kernel(retries=n)``, ``argus verify --retries``): a proof that depends on the history
of a solver's process is found again where any machine can reproduce it."""

import transpose_swizzled as TS
import vector_add as VA

import argus.proofs.verify as verify
from argus.proofs import LocalProver, verify_kernel
from argus.smt.results import SolverRun, Unknown


class Worn:
    """A prover whose long-lived process gives up on every query (``reason``), while each of
    its forks — fresh processes — answers with z3 after ``give_up`` failures of its own."""

    name = "z3"

    def __init__(self, reason="resource_limit", log=None, fresh=False, give_up=0):
        self.reason, self.fresh, self.give_up = reason, fresh, give_up
        self.log = log if log is not None else {"forks": 0, "closed": 0, "checks": [], "fresh_checks": []}
        self.inner = LocalProver("z3")

    def fork(self, seed=None):
        self.log["forks"] += 1
        self.log.setdefault("seeds", []).append(seed)
        return Worn(self.reason, self.log, fresh=True, give_up=self.log.get("fresh_failures", 0))

    def check(self, query, guards):
        if not self.fresh or self.give_up > 0:
            (self.log["fresh_checks"] if self.fresh else self.log["checks"]).append(id(query))
            self.give_up -= 1
            return Unknown((SolverRun("z3", "unknown", self.reason, "", 0.5, 10),))
        self.log["fresh_checks"].append(id(query))
        return self.inner.check(query, guards)

    def versions(self):
        return self.inner.versions()

    def close(self):
        if self.fresh:
            self.log["closed"] += 1


def _verify(prover, retries, monkeypatch, split=False):
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)  # the first pass on the prover itself
    return verify_kernel(TS.transpose.specialize(), prover=prover, retries=retries, replay=False, split=split)


def test_without_retries_a_worn_process_leaves_the_kernel_unknown(monkeypatch):
    report = _verify(Worn(), 0, monkeypatch)
    assert report.verdict == "unknown"
    solved = [r for r in report.results if r.solver != "structural"]
    assert solved and all(r.verdict == "unknown" and "resource_limit" in r.reason for r in solved)
    assert all("fresh" not in r.reason for r in solved)


def test_a_retry_alone_in_a_fresh_process_proves_what_the_worn_one_gave_up_on(monkeypatch):
    prover = Worn()
    report = _verify(prover, 1, monkeypatch)
    assert report.verdict == "proved"
    log = prover.log
    distinct = len(set(log["checks"]))
    # every distinct query given up on was retried once, each in a fork of its own, closed after
    assert log["forks"] == distinct == len(log["fresh_checks"]) == log["closed"] > 0
    retried = [r for r in report.results if r.solver != "structural"]
    assert all(r.verdict == "proved" for r in retried)
    assert any(r.reason and "attempt 2" in r.reason and "random seed 1" in r.reason for r in retried)


def test_retries_stop_at_the_limit_and_say_how_many_attempts_ran(monkeypatch):
    prover = Worn()
    prover.log["fresh_failures"] = 5  # fresh processes give up too
    report = _verify(prover, 2, monkeypatch)
    assert report.verdict == "unknown"
    distinct = len(set(prover.log["checks"]))
    assert prover.log["forks"] == 2 * distinct  # two retries per query, no more
    unknown = [r for r in report.results if r.verdict == "unknown"]
    assert unknown and all("3 attempts, random seeds 0-2" in r.reason for r in unknown)
    # each retry searches anew: attempt k runs the solvers with random seed k
    assert sorted(set(prover.log["seeds"])) == [1, 2]
    assert prover.log["seeds"].count(1) == prover.log["seeds"].count(2) == distinct


def test_a_fork_carries_its_seed_to_the_solver_workers():
    from argus.proofs.provers import PortfolioProver, SequentialProver, seed_options

    assert seed_options(("z3", "cvc5"), 0) == {}
    assert seed_options(("z3", "cvc5"), 2) == {"z3": {"random_seed": 2}, "cvc5": {"seed": 2}}
    prover = SequentialProver(("z3", "cvc5"))
    try:
        fork = prover.fork(seed=3)
        assert [stage.portfolio.options() for stage in fork.stages] == [
            {"z3": {"random_seed": "3"}}, {"cvc5": {"seed": "3"}}]
        again, plain = fork.fork(), prover.fork()
        assert again.seed == 3 and plain.seed == 0
        # a fork's wall clock is the prover's unless given (the retries' own budget)
        longer = prover.fork(wall_clock_s=prover.stages[0].portfolio.wall_clock_s * 3)
        assert [s.portfolio.wall_clock_s / 3 for s in longer.stages] == [s.portfolio.wall_clock_s for s in plain.stages]
        assert longer.seed == 0
        for p in (again, plain, fork, longer):
            p.close()
        # the seeded workers start (the option names are the solvers' own) and prove
        race = PortfolioProver(("z3", "cvc5"), seed=5)
        try:
            report = verify_kernel(TS.transpose.specialize(), prover=race, replay=False)
            assert report.verdict == "proved"
        finally:
            race.close()
    finally:
        prover.close()


def test_an_error_is_not_retried(monkeypatch):
    prover = Worn(reason="error")
    report = _verify(prover, 3, monkeypatch)
    assert report.verdict == "unknown"
    assert prover.log["forks"] == 0


def test_a_prover_without_fork_retries_in_itself(monkeypatch):
    calls = []

    class Once(LocalProver):
        def check(self, query, guards):
            calls.append(id(query))
            if calls.count(id(query)) == 1:
                return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
            return super().check(query, guards)

    report = _verify(Once("z3"), 1, monkeypatch)
    assert report.verdict == "proved"
    assert all(calls.count(q) == 2 for q in set(calls))


def test_the_cli_passes_retries_and_rejects_a_negative_count(capsys):
    import json

    from argus.cli import main

    assert main(["verify", "--retries", "-1", "examples/vector_add.py"]) == 2
    assert "--retries -1: must be 0 or more" in capsys.readouterr().err
    # one resource unit: z3 gives up on every query, in its worker and in each fresh process
    code = main(["verify", "examples/vector_add.py", "--solver", "z3", "--rlimit", "1", "--retries", "1", "--json",
                 "--no-split"])
    assert code == 2
    (kernel,) = json.loads(capsys.readouterr().out)["kernels"]
    unknown = [v for v in kernel["vcs"] if v["verdict"] == "unknown"]
    assert unknown and all("2 attempts" in v["reason"] for v in unknown if "gave up" in v["reason"])
    assert any("gave up" in v["reason"] for v in unknown)
    # split (the default): a query with guards is also tried in parts, each part retried
    code = main(["verify", "examples/vector_add.py", "--solver", "z3", "--rlimit", "1", "--retries", "1", "--json"])
    assert code == 2
    (kernel,) = json.loads(capsys.readouterr().out)["kernels"]
    reasons = [v["reason"] for v in kernel["vcs"] if v["verdict"] == "unknown" and "gave up" in v["reason"]]
    assert reasons and all("2 attempts" in r or ("split into" in r and "random seeds 1-1" in r) for r in reasons)


class Lucky:
    """A prover whose long-lived process gives up on every query and whose forks prove only at
    random seed ``lucky``; at any other seed a fork's check holds on until the fork is closed
    (a solver searching past its luckiest rival) and then reports its workers killed.  With
    ``rivals``, the lucky fork answers only once that many forks (itself included) started on
    its query, so that a loaded machine cannot let it win before a rival is even started."""

    name = "z3"

    def __init__(self, lucky, log=None, seed=None, rivals=1):
        import threading

        self.lucky, self.seed, self.rivals = lucky, seed, rivals
        self.log = log if log is not None else {"seeds": [], "stopped": [], "closes": 0, "started": {},
                                                "turn": threading.Condition()}
        self.closed = threading.Event()
        self.inner = LocalProver("z3")

    def fork(self, seed=None):
        return Lucky(self.lucky, self.log, seed=seed, rivals=self.rivals)

    def check(self, query, guards):
        if self.seed is None:
            return Unknown((SolverRun("z3", "unknown", "resource_limit", "", 0.5, 10),))
        turn, started, key = self.log["turn"], self.log["started"], repr(query)
        with turn:
            self.log["seeds"].append(self.seed)
            started[key] = started.get(key, 0) + 1
            turn.notify_all()
        if self.seed == self.lucky:
            with turn:
                assert turn.wait_for(lambda: started[key] >= self.rivals, timeout=60), "a rival never started"
            return self.inner.check(query, guards)
        if not self.closed.wait(20):
            return Unknown((SolverRun("z3", "unknown", "resource_limit", "", 20.0, 10),))
        self.log["stopped"].append(self.seed)
        return Unknown((SolverRun("z3", "unknown", "crash", "worker killed by SIGKILL", 0.1),))

    def versions(self):
        return self.inner.versions()

    def close(self):
        self.log["closes"] += 1
        self.closed.set()


def test_racing_seeds_proves_at_the_lucky_seed_and_stops_its_rivals(monkeypatch):
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    monkeypatch.setattr(verify, "PARALLEL", 64)  # lanes enough for every query's four seeds at once
    prover = Lucky(lucky=3, rivals=4)
    report = verify_kernel(VA.vector_add.specialize(), prover=prover, retries=4, replay=False, split=False, race=True)
    assert report.verdict == "proved"
    solved = [r for r in report.results if r.solver != "structural"]
    distinct = len({r.hash for r in solved})
    assert 1 <= distinct <= 16
    # every seed 1-4 of every query started in the one round; seed 3 won, and the others were
    # stopped by it (a rival left to run out would answer after 20 s, without being stopped)
    assert sorted(prover.log["seeds"]) == sorted([1, 2, 3, 4] * distinct)
    assert sorted(prover.log["stopped"]) == sorted([1, 2, 4] * distinct)
    assert all("proved at attempt 2" in r.reason and "random seed 3" in r.reason for r in solved if r.reason)


def test_without_racing_the_seeds_run_one_round_each(monkeypatch):
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    monkeypatch.setattr(verify, "PARALLEL", 64)
    prover = Lucky(lucky=1)
    report = verify_kernel(VA.vector_add.specialize(), prover=prover, retries=4, replay=False, split=False)
    assert report.verdict == "proved"
    distinct = len({r.hash for r in report.results if r.solver != "structural"})
    assert prover.log["seeds"] == [1] * distinct and prover.log["stopped"] == []
