"""A query the solvers gave up on is split into parts (the goal's conjuncts, the definedness
guards by divisor): the VC is proved when every part is, refuted when one is."""

import pytest
import transpose_swizzled as TS
import verifier_kernels as V

import argus.proofs.verify as verify
from argus.proofs import LocalProver, verify_kernel
from argus.proofs.provers import GUARD_PARTS_LIMIT, shown_guards, split_query, vc_query
from argus.smt import terms as T
from argus.smt.evaluate import evaluate
from argus.smt.results import Proved, Refuted, SolverRun, Unknown


def _vc(bound):
    """``x >= 1, y >= 0 => (y >= 0 => (y div x >= 0 ∧ y mod x < bound)) ∧ (y div (x+1) <= y)``."""
    x, y = T.int_var("x"), T.int_var("y")
    hyps = [("h0", T.ge(x, 1)), ("h1", T.ge(y, 0))]
    goal = T.and_(T.implies(T.ge(y, 0), T.and_(T.ge(T.div(y, x), 0), T.lt(T.mod(y, x), bound))),
                  T.le(T.div(y, T.add(x, 1)), y))
    return hyps, goal


def _proved_entries(directory):
    """The cache's proved queries and parts (not its notes of what a run split)."""
    import json

    return sum(json.loads(f.read_text())["verdict"] == "proved" for f in directory.rglob("*.json"))


def _goal_of(query):
    return next(t for t, n in query.assertions if n == "goal")


def test_parts_are_the_goal_conjuncts_and_the_guards_by_divisor():
    hyps, goal = _vc(T.int_var("x"))
    query, guards = vc_query(hyps, goal)
    assert guards  # the divisors x and x + 1 are variables: their guards are in the query
    parts = split_query(query, guards)
    negated = [_goal_of(p).args[0] for p in parts]
    # one part per divisor's guards, then the three goal conjuncts (through the implication)
    divisors = {g.args[1] if g.op == "=>" else g for g in guards}
    assert len(parts) == len(divisors) + 3
    assert set(negated[len(divisors):]) == {
        T.implies(T.ge(T.int_var("y"), 0), T.ge(T.div(T.int_var("y"), T.int_var("x")), 0)),
        T.implies(T.ge(T.int_var("y"), 0), T.lt(T.mod(T.int_var("y"), T.int_var("x")), T.int_var("x"))),
        T.le(T.div(T.int_var("y"), T.add(T.int_var("x"), 1)), T.int_var("y"))}
    # the hypotheses are every part's, unchanged
    for p in parts:
        assert [(t, n) for t, n in p.assertions if n != "goal"] == [(t, n) for t, n in query.assertions if n != "goal"]
    prover = LocalProver("z3")
    try:
        assert isinstance(prover.check(query, guards), Proved)
        assert all(isinstance(prover.check(p, guards), Proved) for p in parts)
    finally:
        prover.close()


def test_a_refuted_part_gives_a_model_of_the_whole_query():
    hyps, goal = _vc(T.add(T.int_var("x"), -1))  # y mod x < x - 1: false for y = x - 1
    query, guards = vc_query(hyps, goal)
    parts = split_query(query, guards)
    prover = LocalProver("z3")
    try:
        answers = [prover.check(p, guards) for p in parts]
    finally:
        prover.close()
    refuted = [a for a in answers if isinstance(a, Refuted)]
    assert len(refuted) == 1 and sum(isinstance(a, Proved) for a in answers) == len(parts) - 1
    model = dict(refuted[0].model)
    assert all(evaluate(t, model) is True for t, _ in query.assertions)  # the whole query holds on it


def test_ite_goals_split_by_branch_and_the_limit_holds():
    x, y = T.int_var("x"), T.int_var("y")
    conj = [T.le(x, T.add(y, i)) for i in range(20)]
    goal = T.ite(T.ge(x, 50), T.and_(*conj[:10]), T.and_(*conj[10:]))
    query, guards = vc_query([("h", T.le(x, y))], goal)
    assert guards == ()
    parts = split_query(query, guards, limit=4)
    assert len(parts) == 2  # one level deeper would give 20 > 4 parts
    assert {_goal_of(p).args[0] for p in parts} == {T.implies(T.ge(x, 50), T.and_(*conj[:10])),
                                                      T.implies(T.not_(T.ge(x, 50)), T.and_(*conj[10:]))}
    assert len(split_query(query, guards, limit=20)) == 20
    single, g = vc_query([("h", T.le(x, y))], T.le(x, T.add(y, 1)))
    assert split_query(single, g) == [single]


def test_guard_groups_are_capped():
    xs = [T.int_var(f"d{i}") for i in range(GUARD_PARTS_LIMIT + 5)]
    y = T.int_var("y")
    goal = T.and_(*[T.ge(T.mod(y, d), T.int_var("z")) for d in xs])  # (not valid: only its shape matters)
    query, guards = vc_query([(f"h{i}", T.ge(d, 1)) for i, d in enumerate(xs)] + [("hy", T.ge(y, 0))], goal)
    parts = split_query(query, guards, limit=1)
    assert len(parts) == GUARD_PARTS_LIMIT + 1  # the guard groups, then the (unsplit) goal
    covered = [c for p in parts[:-1] for c in (lambda t: t.args if t.op == "and" else (t,))(_goal_of(p).args[0])]
    assert sorted(map(id, covered)) == sorted(map(id, guards))


class WholeGivesUp(LocalProver):
    """z3 that gives up on every query it could split (it decides the parts): the shape of
    the GEMM operand lemmas, where z3 runs out on the whole and proves each part in seconds."""

    def __init__(self):
        super().__init__("z3")
        self.wholes = self.parts = 0

    def check(self, query, guards):
        if "part" not in query.label and len(split_query(query, guards)) > 1:
            self.wholes += 1
            return Unknown((SolverRun("z3", "unknown", "resource_limit", "", 1.0, 10),))
        self.parts += "part" in query.label
        return super().check(query, guards)


@pytest.fixture
def whole_gives_up(monkeypatch):
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    prover = WholeGivesUp()
    yield prover
    prover.close()


def test_a_kernel_whose_whole_queries_defeat_the_solver_is_proved_in_parts(whole_gives_up):
    kernel = TS.transpose.specialize()
    report = verify_kernel(kernel, prover=whole_gives_up, replay=False, split=False)
    assert report.verdict == "unknown" and whole_gives_up.wholes > 0 and whole_gives_up.parts == 0
    report = verify_kernel(kernel, prover=whole_gives_up, replay=False)
    assert report.verdict == "proved" and whole_gives_up.parts > 0
    split = [r for r in report.results if r.reason and r.reason.startswith("proved in ")]
    assert split and all(" parts: the goal's conjuncts and the definedness guards apart" in r.reason for r in split)
    assert all(r.entry().reason for r in split)  # the record says how


def test_a_bug_is_refuted_through_a_part_with_its_counterexample(whole_gives_up):
    kernel = V.double_buffered.specialize(WRONG_STAGE=True)
    plain = LocalProver("z3")
    try:
        expected = verify_kernel(kernel, prover=plain)
    finally:
        plain.close()
    report = verify_kernel(kernel, prover=whole_gives_up)
    assert expected.verdict == report.verdict == "refuted"
    assert {(r.vc.id, r.verdict) for r in report.results if r.verdict == "refuted"} == \
        {(r.vc.id, r.verdict) for r in expected.results if r.verdict == "refuted"}
    assert report.counterexamples
    # a refuted VC whose whole query the solver gave up on says that a part refuted it
    split = [r for r in report.results if r.verdict == "refuted" and r.reason]
    assert split and all(r.reason.startswith("refuted by one of ") for r in split)
    assert all(r.reason is None or "part" not in r.reason for r in expected.results)


def test_an_undecided_part_is_retried_with_seeds(monkeypatch):
    """Parts the solver gives up on in its long-lived process go to fresh forks, seed k."""
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    log = {"seeds": []}

    class Worn(WholeGivesUp):
        seed = 0

        def fork(self, seed=None):
            log["seeds"].append(seed)
            other = Worn()
            other.seed = seed
            return other

        def check(self, query, guards):
            if not self.seed and "part 1/" in query.label:  # seed 0: this prover and the split pass
                return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
            return super().check(query, guards)

    prover = Worn()
    try:
        report = verify_kernel(TS.transpose.specialize(), prover=prover, replay=False, retries=0)
        assert report.verdict == "unknown"
        undecided = [r for r in report.results if r.verdict == "unknown" and "split into" in (r.reason or "")]
        assert undecided and all("1 undecided" in r.reason for r in undecided)
        report = verify_kernel(TS.transpose.specialize(), prover=prover, replay=False, retries=2)
        assert report.verdict == "proved"
        assert set(log["seeds"]) == {0, 1}  # the split pass at seed 0; the first retry proved every part 1
        assert any("1 part(s) again alone in fresh solver processes, random seeds 1-1" in (r.reason or "")
                   for r in report.results)
    finally:
        prover.close()


def test_the_retry_budget_is_the_clock_of_the_parts_and_the_retries(monkeypatch):
    """``retry_budget`` reaches every fork of the split pass and of the retries; without it the
    forks keep the prover's clock."""
    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    clocks = []

    class Clocked(WholeGivesUp):
        seed = 0

        def fork(self, seed=None, wall_clock_s=None):
            clocks.append((seed, wall_clock_s))
            other = Clocked()
            other.seed = seed
            return other

        def check(self, query, guards):
            if not self.seed and "part 1/" in query.label:  # the split pass leaves part 1 to seed 1
                return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
            return super().check(query, guards)

    prover = Clocked()
    try:
        report = verify_kernel(TS.transpose.specialize(), prover=prover, replay=False, retries=1, retry_budget=321.0)
        assert report.verdict == "proved"
        # (a goal part that has cases on its ring offsets first gets the short clock)
        assert {s for s, _ in clocks} == {0, 1} and 321.0 in {c for _, c in clocks} <= {321.0, verify.CASES_AFTER_S}
        clocks.clear()
        assert verify_kernel(TS.transpose.specialize(), prover=prover, replay=False, retries=1).verdict == "proved"
        assert clocks and {c for _, c in clocks} == {None}
    finally:
        prover.close()


def test_the_cli_rejects_a_nonpositive_retry_budget(capsys):
    from argus.cli import main

    assert main(["verify", "--retry-budget", "0", "examples/vector_add.py"]) == 2
    assert "--retry-budget 0.0: must be positive" in capsys.readouterr().err


def test_proved_parts_are_cached_and_a_stopped_split_resumes(monkeypatch, tmp_path):
    """A part proved goes to the cache under its own query's hash: when one part of a VC stays
    undecided, the next run solves only that part."""
    from argus.proofs.record import VCCache

    monkeypatch.setattr(verify, "MIN_PARALLEL_QUERIES", 10**9)
    solved = []

    class Stubborn(WholeGivesUp):
        last_part_gives_up = True

        def fork(self, seed=None, wall_clock_s=None):
            return self

        def close(self):
            pass

        def check(self, query, guards):
            if "part" in query.label:
                solved.append(query.label)
                if self.last_part_gives_up and query.label.endswith(("part 2/2", "part 4/4")):
                    return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
            return super().check(query, guards)

    prover = Stubborn()
    cache = VCCache(tmp_path)
    kernel = TS.transpose.specialize()
    try:
        report = verify_kernel(kernel, prover=prover, replay=False, cache=cache)
        assert report.verdict == "unknown"
        first = list(solved)
        stuck = [x for x in first if x.endswith(("part 2/2", "part 4/4"))]
        assert stuck and len(first) > len(stuck)
        solved.clear()
        prover.last_part_gives_up = False
        report = verify_kernel(kernel, prover=prover, replay=False, cache=VCCache(tmp_path))
        assert report.verdict == "proved"
        assert sorted(solved) == sorted(stuck)  # the other parts came from the cache
        assert any("part(s) proved before, from the cache" in (r.reason or "") for r in report.results)
    finally:
        LocalProver.close(prover)


# --------------------------------------------------------------------------- cases on ring offsets


def _ring_vc(goal_of, more=()):
    """A staged read's shape: stage ``P`` of the element a thread reads, as seen from one TMA
    box's base, is ``(k + (4096·(t div 128) + t mod 64 + 4096) div 8192) mod 6``, whose
    quotient is ``t div 128`` (0 or 1 for 256 threads)."""
    t, k, p = T.int_var("t", 0, 255), T.int_var("k", 0, 1000), T.int_var("P", 0, 5)
    offset = T.div(T.add(T.mul(4096, T.div(t, 128)), T.mod(t, 64), 4096), 8192)
    hyps = [("stage", T.eq(p, T.mod(T.add(k, offset), 6))), *more]
    return vc_query(hyps, goal_of(t, k, p)), offset


def test_ring_offsets_are_the_small_quotients_inside_a_ring_position():
    from argus.proofs.provers import ring_offsets

    (query, _), offset = _ring_vc(lambda t, k, p: T.le(p, 5))
    assert ring_offsets(query) == [(offset, 0, 1)]
    # a quotient of many values, or one that is not a summand of a position modulo a constant,
    # is no case split
    t, k = T.int_var("t", 0, 255), T.int_var("k", 0, 1000)
    wide, _ = vc_query([("h", T.eq(T.mod(T.add(k, T.div(t, 16)), 6), 1))], T.ge(k, 0))
    bare, _ = vc_query([("h", T.eq(T.add(k, T.div(t, 128)), 1))], T.ge(k, 0))
    assert ring_offsets(wide) == [] and ring_offsets(bare) == []


def test_cases_cover_every_model_and_stay_within_the_limit():
    from argus.proofs.provers import cube_query

    (query, _), _ = _ring_vc(lambda t, k, p: T.le(p, 5))
    cubes = cube_query(query)
    assert len(cubes) == 2 and [c.label for c in cubes] == ["case 1/2", "case 2/2"]
    cases = [[a for a in c.assertions if a not in query.assertions] for c in cubes]
    assert all(len(x) == 1 and x[0][1] is None for x in cases)
    for t in range(256):  # every thread lies in exactly one case
        holds = [evaluate(x[0][0], {T.int_var("t", 0, 255): t}) for x in cases]
        assert holds.count(True) == 1
    # four offsets of two values each: 16 cases; a limit of 5 keeps two of them (4 cases)
    t, k = T.int_var("t", 0, 255), T.int_var("k", 0, 1000)
    offs = [T.div(T.add(T.mul(4096, T.div(t, 128)), T.mod(t, 64), 4096 + 8 * i), 8192) for i in range(4)]
    many, _ = vc_query([(f"h{i}", T.eq(T.mod(T.add(k, o), 6), i)) for i, o in enumerate(offs)], T.ge(k, 0))
    assert len(cube_query(many)) == 16 and len(cube_query(many, limit=5)) == 4
    plain, _ = vc_query([("h", T.ge(k, 1))], T.ge(k, 0))
    assert cube_query(plain) == [plain]


def test_the_cases_prove_what_holds_and_refute_what_does_not():
    from argus.proofs.provers import cube_query

    prover = LocalProver("z3")
    try:
        (query, guards), _ = _ring_vc(lambda t, k, p: T.eq(p, T.mod(T.add(k, T.div(t, 128)), 6)))
        assert all(isinstance(prover.check(c, guards), Proved) for c in cube_query(query))
        (wrong, guards), _ = _ring_vc(lambda t, k, p: T.eq(p, T.mod(k, 6)))  # false for t >= 128
        answers = [prover.check(c, guards) for c in cube_query(wrong)]
        assert isinstance(answers[0], Proved) and isinstance(answers[1], Refuted)
        model = dict(answers[1].model)
        assert all(evaluate(t, model) is True for t, _ in wrong.assertions)  # a model of the whole query
    finally:
        prover.close()


class CasesOnly(LocalProver):
    """z3 that gives up on every query but a case of a part (the shape of the GEMM operand
    lemmas' goal parts: z3 ran out on the part at most seeds and proves each case in seconds)."""

    seed = 0

    def __init__(self, log, clock=None):
        super().__init__("z3")
        self.log, self.clock, self.clocks = log, clock, {}

    def fork(self, seed=None, wall_clock_s=None):
        self.log.append(seed)
        other = type(self)(self.log, wall_clock_s)
        other.clocks = self.clocks
        return other

    def check(self, query, guards):
        self.clocks[query.label] = self.clock
        if "case" not in query.label:
            return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
        return super().check(query, guards)


def test_an_undecided_part_is_decided_by_its_cases(tmp_path):
    from argus.proofs.record import VCCache

    def parity(t, k, p):  # a second conjunct, which the cases prove too
        return T.eq(T.mod(p, 2), T.mod(T.add(k, T.div(t, 128)), 2))

    goals = {"holds": lambda t, k, p: T.and_(T.eq(p, T.mod(T.add(k, T.div(t, 128)), 6)), parity(t, k, p)),
             "wrong": lambda t, k, p: T.and_(T.eq(p, T.mod(k, 6)), parity(t, k, p))}
    todo = {name: _ring_vc(goal)[0] for name, goal in goals.items()}
    log, kept = [], []
    prover = CasesOnly(log)
    try:
        answers = {d: (prover.check(*todo[d]), 1.0) for d in todo}
        cache = VCCache(tmp_path)
        notes = verify._second_chances(todo, answers, prover, lambda d, a: kept.append(d), retries=0, split=True,
                                       cache=cache)
    finally:
        LocalProver.close(prover)
    from argus.proofs.provers import cube_query

    # every part (the two goal conjuncts) was replaced by its cases
    cases = {d: [c for p in split_query(*todo[d]) for c in cube_query(p)] for d in todo}
    assert all(len(c) > len(split_query(*todo[d])) == 2 for d, c in cases.items())
    assert isinstance(answers["holds"][0], Proved) and kept == ["holds"]
    assert notes["holds"].startswith(f"proved in {len(cases['holds'])} parts")
    assert f"; {len(cases['holds'])} of them cases of undecided parts on their ring offsets" in notes["holds"]
    assert isinstance(answers["wrong"][0], Refuted)
    assert notes["wrong"].startswith(f"refuted by one of {len(cases['wrong'])} parts")
    model = dict(answers["wrong"][0].model)
    assert all(evaluate(t, model) is True for t, _ in todo["wrong"][0].assertions)
    # every case proved is in the cache (all but the refuted one; the parity cases are the same
    # queries in both VCs), and no part is
    distinct = {verify.query_hash(c) for group in cases.values() for c in group}
    assert _proved_entries(tmp_path) == len(distinct) - 1
    assert log == [0] * (len(cases["holds"]) + len(cases["wrong"]) + 4)  # 4 parts, then their cases, seed 0


def test_a_goal_part_with_cases_gets_a_short_clock_before_its_cases(monkeypatch):
    t = T.int_var("t", 0, 255)
    todo = {"vc": _ring_vc(lambda t, k, p: T.and_(T.eq(p, T.mod(T.add(k, T.div(t, 128)), 6)),
                                                  T.ge(T.div(k, T.sub(t, 100)), -1000)),
                           [("not100", T.not_(T.eq(t, 100)))])[0]}
    assert todo["vc"][1]  # a guard (t - 100 != 0) besides the two goal conjuncts
    prover = CasesOnly([])
    try:
        answers = {"vc": (prover.check(*todo["vc"]), 1.0)}
        verify._second_chances(todo, answers, prover, lambda d, a: None, retries=0, split=True, budget=100.0)
    finally:
        LocalProver.close(prover)
    assert isinstance(answers["vc"][0], Proved)
    clocks = {label: c for label, c in prover.clocks.items() if label}
    parts = split_query(*todo["vc"])
    goal_parts = [p.label for p in parts if shown_guards(p, todo["vc"][1]) is None]
    assert len(goal_parts) == 2 and len(parts) == 3
    assert all(clocks[label] == verify.CASES_AFTER_S for label in goal_parts)
    assert all(c == 100.0 for label, c in clocks.items() if label not in goal_parts)
    assert any("case" in label for label in clocks)


def test_a_query_of_one_part_is_split_into_its_cases():
    todo = {"vc": _ring_vc(lambda t, k, p: T.eq(p, T.mod(T.add(k, T.div(t, 128)), 6)))[0]}
    assert len(split_query(*todo["vc"])) == 1
    prover = CasesOnly([])
    try:
        answers = {"vc": (prover.check(*todo["vc"]), 1.0)}
        notes = verify._second_chances(todo, answers, prover, lambda d, a: None, retries=0, split=True)
    finally:
        LocalProver.close(prover)
    from argus.proofs.provers import cube_query

    n = len(cube_query(todo["vc"][0]))
    assert n > 1 and isinstance(answers["vc"][0], Proved)
    assert notes["vc"].startswith(f"proved in {n} parts") and f"{n} of them cases" in notes["vc"]


def _five_offsets_vc(wrong=False):
    """Five ring offsets of two values each (each the warpgroup ``t div 128``, seen from five
    box bases): one more than the 16 cases of :func:`cube_query` take.  The goal (all five
    stages agree) holds; the ``wrong`` one (the fifth stage is ``k mod 6``) fails for the second
    warpgroup."""
    t, k = T.int_var("t", 0, 255), T.int_var("k", 0, 1000)
    offs = [T.div(T.add(T.mul(4096, T.div(t, 128)), T.mod(t, 64), 4096 + 8 * i), 8192) for i in range(5)]
    ps = [T.int_var(f"P{i}", 0, 5) for i in range(5)]
    hyps = [(f"stage{i}", T.eq(p, T.mod(T.add(k, o), 6))) for i, (p, o) in enumerate(zip(ps, offs))]
    goal = T.eq(ps[4], T.mod(k, 6)) if wrong else T.and_(*(T.eq(p, ps[0]) for p in ps[1:]))
    return vc_query(hyps, goal), offs


def test_a_case_is_split_again_on_the_offsets_its_cases_left_open():
    from argus.proofs.provers import cube_query, ring_offsets

    (query, _), offs = _five_offsets_vc()
    assert [q for q, _, _ in ring_offsets(query)] == offs
    cubes = cube_query(query)
    assert len(cubes) == 16
    for cube in cubes:  # the four offsets the cube fixes are no split any more; the fifth is
        assert ring_offsets(cube) == [(offs[4], 0, 1)]
        again = cube_query(cube)
        assert [c.label for c in again] == [f"{cube.label} case {j}/2" for j in (1, 2)]
        assert all(cube_query(c) == [c] for c in again)  # every offset fixed: nothing left
        for c in again:  # the cube's assertions, and the fifth offset's value
            extra = [a for a in c.assertions if a not in cube.assertions]
            assert len(extra) == 1 and extra[0][0].op == "=" and extra[0][0].args[0] is offs[4]


class DeepCasesOnly(CasesOnly):
    """z3 that decides only a case whose query fixes every ring offset (a case of a case)."""

    def check(self, query, guards):
        self.clocks[query.label] = self.clock
        if query.label.count("case") < 2:
            return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
        return LocalProver.check(self, query, guards)


@pytest.mark.parametrize("wrong", [False, True])
def test_an_undecided_case_is_decided_by_its_own_cases(tmp_path, wrong):
    from argus.proofs.provers import cube_query
    from argus.proofs.record import VCCache

    (query, guards), _ = _five_offsets_vc(wrong)
    todo = {"vc": (query, guards)}
    prover = DeepCasesOnly([])
    try:
        answers = {"vc": (prover.check(query, guards), 1.0)}
        notes = verify._second_chances(todo, answers, prover, lambda d, a: None, retries=0, split=True,
                                       budget=100.0, cache=VCCache(tmp_path))
    finally:
        LocalProver.close(prover)
    leaves = [c for p in split_query(query, guards) for cube in cube_query(p) for c in cube_query(cube)]
    assert all(c.label.count("case") == 2 for c in leaves)
    if wrong:
        assert isinstance(answers["vc"][0], Refuted)
        model = dict(answers["vc"][0].model)
        assert all(evaluate(t, model) is True for t, _ in query.assertions)  # a model of the whole query
        assert evaluate(T.div(T.int_var("t", 0, 255), 128), model) == 1
    else:
        assert isinstance(answers["vc"][0], Proved)
        assert notes["vc"].startswith(f"proved in {len(leaves)} parts")
        assert f"; {len(leaves)} of them cases of undecided parts on their ring offsets" in notes["vc"]
    # a case that could be split again had the short clock; a case of a case the whole budget
    clocks = {label: c for label, c in prover.clocks.items() if "case" in label}
    assert {c for label, c in clocks.items() if label.count("case") == 1} == {verify.CASES_AFTER_S}
    assert {c for label, c in clocks.items() if label.count("case") == 2} == {100.0}


def test_a_run_resumes_a_split_at_its_cached_pieces(tmp_path):
    """A part (or case) that an earlier run split goes to its pieces at once: no solver sees
    it again, and what its cached pieces proved is not solved again either."""
    from argus.proofs.record import VCCache

    (query, guards), _ = _five_offsets_vc()
    undecided = Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
    runs = []
    for _ in range(2):
        prover = DeepCasesOnly([])
        answers = {"vc": (undecided, 1.0)}
        try:
            notes = verify._second_chances({"vc": (query, guards)}, answers, prover, lambda d, a: None,
                                           retries=0, split=True, budget=100.0, cache=VCCache(tmp_path))
        finally:
            LocalProver.close(prover)
        assert isinstance(answers["vc"][0], Proved)
        runs.append((dict(prover.clocks), notes["vc"]))
    (first, _), (second, note) = runs
    parts = [p.label for p in split_query(query, guards)]
    assert len(parts) == 4 and all(label in first for label in parts)
    assert second == {}  # every part and case resumed, every last case from the cache
    assert "from the cache" in note


# --------------------------------------------------------------------------- single guards


def _guarded_vc(safe=True):
    """Three divisions by ``x`` on three paths (``y >= 1``, ``y <= -1``, ``y = 0``): one
    divisor, three guards.  Unsafe: ``x >= 1`` is known only off the path ``y = 0``."""
    x, y, z = T.int_var("x"), T.int_var("y"), T.int_var("z")
    known = T.ge(x, 1) if safe else T.implies(T.not_(T.eq(y, 0)), T.ge(x, 1))
    q = T.div(z, x)
    goal = T.and_(T.implies(T.ge(y, 1), T.ge(q, 0)),
                  T.implies(T.le(y, -1), T.le(T.mod(z, x), z)),
                  T.implies(T.eq(y, 0), T.or_(T.ge(q, 7), T.le(q, 9))))  # holds for any value of q
    return vc_query([("h", known), ("hz", T.ge(z, 0))], goal)


def test_single_guards_are_one_query_per_guard_of_a_part_of_guards():
    from argus.proofs.provers import single_guards

    query, guards = _guarded_vc()
    assert len(guards) == 3
    parts = split_query(query, guards)
    guard_part, goal_parts = parts[0], parts[1:]
    assert shown_guards(guard_part, guards) == tuple(guards)
    singles = single_guards(guard_part, guards)
    assert [_goal_of(s).args[0] for s in singles] == list(guards)
    assert [s.label for s in singles] == [f"part 1/4 guard {i}/3" for i in (1, 2, 3)]
    for s in singles:  # the hypotheses are the part's, unchanged
        assert [a for a in s.assertions if a[1] != "goal"] == [a for a in guard_part.assertions if a[1] != "goal"]
    # a goal part, or a part of one guard, is no split
    assert all(single_guards(p, guards) == [p] for p in goal_parts)
    assert single_guards(singles[0], guards) == [singles[0]]
    prover = LocalProver("z3")
    try:
        assert all(isinstance(prover.check(s, guards), Proved) for s in singles)
        wrong, wguards = _guarded_vc(safe=False)
        answers = [prover.check(s, wguards) for s in single_guards(split_query(wrong, wguards)[0], wguards)]
    finally:
        prover.close()
    assert [type(a) for a in answers] == [Proved, Proved, Refuted]
    model = dict(answers[2].model)
    assert all(evaluate(t, model) is True for t, _ in wrong.assertions)  # a model of the whole query


class GuardsApart(LocalProver):
    """z3 that gives up on every query whose goal shows more than one definedness guard, and on
    whole queries (the shape of the GEMM's tile-order guards: no answer for one divisor's guards
    together, each guard alone in seconds)."""

    seed = 0

    def __init__(self, clocks=None, clock=None):
        super().__init__("z3")
        self.clocks = {} if clocks is None else clocks
        self.clock = clock

    def fork(self, seed=None, wall_clock_s=None):
        return GuardsApart(self.clocks, wall_clock_s)

    def check(self, query, guards):
        self.clocks[query.label] = self.clock
        shown = _goal_of(query).args[0]
        if "part" not in query.label or (shown.op == "and" and sum(c in set(guards) for c in shown.args) > 1):
            return Unknown((SolverRun("z3", "unknown", "timeout", "", 1.0),))
        return super().check(query, guards)


def test_an_undecided_part_of_guards_is_decided_guard_by_guard(tmp_path):
    from argus.proofs.record import VCCache

    todo = {"safe": _guarded_vc(), "unsafe": _guarded_vc(safe=False)}
    prover, kept = GuardsApart(), []
    try:
        answers = {d: (prover.check(*todo[d]), 1.0) for d in todo}
        notes = verify._second_chances(todo, answers, prover, lambda d, a: kept.append(d), retries=0, split=True,
                                       budget=100.0, cache=VCCache(tmp_path))
    finally:
        LocalProver.close(prover)
    # the part of guards had the short clock, its single guards and the goal parts the full one
    clocks = {label: c for label, c in prover.clocks.items() if "part" in label}
    assert clocks["part 1/4"] == verify.CASES_AFTER_S
    assert {c for label, c in clocks.items() if label != "part 1/4"} == {100.0}
    assert sum("guard" in label for label in clocks) == 3
    assert isinstance(answers["safe"][0], Proved) and kept == ["safe"]
    assert notes["safe"].startswith("proved in 6 parts")  # three goal parts, three single guards
    assert "; 3 of them single guards of undecided parts of guards" in notes["safe"]
    assert "ring offsets" not in notes["safe"]
    assert isinstance(answers["unsafe"][0], Refuted)
    assert answers["unsafe"][0].violation == "definedness"
    assert notes["unsafe"].startswith("refuted by one of 6 parts")
    model = dict(answers["unsafe"][0].model)
    assert all(evaluate(t, model) is True for t, _ in todo["unsafe"][0].assertions)
    assert model["y"] == 0 and model["x"] == 0
    # every single guard and goal part proved is cached: 3 + 3 of the safe VC, 2 + 3 of the other
    # (the goal parts are the same queries in both only where the hypotheses are: they are not)
    assert _proved_entries(tmp_path) == 11
