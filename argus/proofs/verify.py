"""Verify one kernel specialization: VCs → prover → verdicts, counterexamples, proof record.

:func:`verify_kernel` generates the VCs (:mod:`argus.abstract_interp`), discharges the
witness lemmas first and then every property VC, and turns each answer into a verdict:

* ``proved`` — the solver proved it (or a cached proof of the same query hash exists, or the
  uniformity analysis proved a barrier structurally), and every witness lemma it relies on
  is proved too;
* ``refuted`` — a model, minimized and explained as a :class:`Counterexample`, that the
  reference interpreter reproduces; a model of an exact encoding (no approximation, lemmas
  proved) that the interpreter cannot check, or that it reaches only after an earlier
  violation, is still a refutation (the replay status says so);
* ``unknown`` — with its reason: an unsupported op or loop, a solver that gave up (after
  ``retries`` further attempts, each in freshly started solver processes), a lemma
  that failed (``loop at L needs an invariant`` when iterations of a loop write one address),
  a model of an over-approximated encoding that does not replay;
* ``error`` — an exact model that does not replay: an internal error, reported loudly.

The kernel's verdict is ``refuted`` if any VC is, else ``unknown``/``error`` if any VC is,
else ``proved``.

Retries.  A solver's answer to one query is reproducible under its resource limit only for one
history of its process: z3 keeps process-wide state across contexts, and the same query has
taken it 2.5 s after 43 others, 33 s alone and over 900 s after some 200 others in one worker.
With ``retries=n`` a query that every solver gave up on (resource limit, timeout, crash) is
checked again, up to ``n`` times, alone in a prover of freshly started workers (the prover's
``fork``) under the same limits; the last attempt's answer counts. Alone in a fresh process is
the one history that any machine can reproduce.  Attempt ``k`` (``k`` = 1 .. n) runs the
solvers with random seed ``k``: their run time on the hard nonlinear lemmas is heavy-tailed in
the seed (:func:`argus.proofs.provers.seed_options`), and an unchanged seed would only repeat
the search that ran out.  With ``race=True``, lanes that fewer open queries than
:data:`PARALLEL` would leave idle run the next seeds of the same queries at once, and the first
seed that decides a query stops its other seeds (those running have their workers killed).

Splitting.  Before the retries (``split=True``, the default; ``argus verify --no-split`` turns
it off), a query every solver gave up on is split into parts whose conjunction is equivalent to
it (:func:`argus.proofs.provers.split_query`): the goal's conjuncts, and the definedness guards
grouped by divisor.  The VC is proved when every part is and refuted when one part is (a model
of a part is one of the whole query); the retries then work on the undecided parts.  The VC's
hash stays that of the whole query: splitting is how it is solved, not what is proved.  The
GEMM operand lemmas of transposed operands are the case in point: z3 gave up on the whole query
in 150 s at five seeds, and proved its 18 parts in about a minute together.

``retry_budget`` sets the wall-clock safety net of the parts and the retries apart from the
first pass's (the prover's): a short first pass sorts out the few hard queries, and only they
get the long clock.  The resource limits, which decide verdicts, are the same in every pass.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from argus.abstract_interp import Analysis, generate_vcs
from argus.abstract_interp.vc import VC
from argus.ir import nodes as N
from argus.proofs import counterexample as CX
from argus.proofs.provers import LocalProver, Prover, resource_limits, vc_query
from argus.proofs.record import ProofRecord, VCCache, VCEntry
from argus.smt.evaluate import EvaluationError, evaluate
from argus.smt.results import Proved, Refuted, SolverRun, Unknown


@dataclass
class VCResult:
    """A VC and what became of it."""

    vc: VC
    verdict: str
    hash: str
    solver: str | None = None
    resources: int | None = None
    seconds: float = 0.0
    reason: str | None = None
    counterexample: CX.Counterexample | None = None
    cached: bool = False
    model: dict | None = None

    def entry(self) -> VCEntry:
        position = self.vc.position
        where = f"{os.path.basename(position.file)}:{position.line}" if position else None  # stable across checkouts
        return VCEntry(self.vc.id, self.hash, self.vc.property, self.vc.op, where, self.verdict, self.solver,
                       self.resources, round(self.seconds, 4),
                       _PATH_DIRS.sub("", self.reason) if self.reason else self.reason, self.cached)


@dataclass
class KernelReport:
    """The verification of one kernel specialization."""

    kernel: N.Kernel
    analysis: Analysis
    results: list[VCResult]
    record: ProofRecord
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return self.record.verdict

    @property
    def counterexamples(self) -> list[CX.Counterexample]:
        return [r.counterexample for r in self.results if r.verdict == "refuted" and r.counterexample]

    def by_verdict(self, verdict: str) -> list[VCResult]:
        return [r for r in self.results if r.verdict == verdict]

    def title(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self.kernel.consts)
        return f"{self.kernel.name}" + (f" [{consts}]" if consts else "")

    def human(self) -> str:
        counts = Counter(r.verdict for r in self.results)
        summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        lines = [f"{self.title()}: {self.verdict} ({len(self.results)} VCs: {summary}; {self.seconds:.2f} s)"]
        seen: dict[tuple, int] = {}
        for r in self.results:
            if r.verdict == "refuted" and r.counterexample is not None:
                lines.append(_indent(r.counterexample.human()))
                same = [x for x in self.results if x.verdict == "refuted" and x.counterexample is None
                        and x.vc.property == r.vc.property and x.vc.position == r.vc.position]
                if same:
                    lines.append(f"    (and {len(same)} more refuted VCs of the same property at this line)")
            elif r.verdict in ("unknown", "error"):
                key = (r.verdict, str(r.vc.position), r.vc.property, r.reason)
                if key in seen:
                    seen[key] += 1
                    continue
                seen[key] = 1
                where = f"{r.vc.position}: " if r.vc.position else ""
                lines.append(f"  {r.verdict}: {where}{r.vc.property}: {r.reason}")
        repeated = sum(n - 1 for n in seen.values())
        if repeated:
            lines.append(f"  ({repeated} more with the same reason at the same place: unrolled copies)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel.name,
            "consts": self.record.to_json()["consts"],
            "kernel_hash": self.record.kernel_hash,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 3),
            "vcs": [asdict(r.entry()) for r in self.results],
            "counterexamples": [c.to_json() for c in self.counterexamples],
            "unknown": [{"vc": r.vc.id, "property": r.vc.property,
                         "position": str(r.vc.position) if r.vc.position else None, "reason": r.reason,
                         "verdict": r.verdict} for r in self.results if r.verdict in ("unknown", "error")],
        }


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


#: properties whose VCs are lemmas other VCs rely on (solved first)
LEMMAS = ("witness", "coordinates", "mma-operands")


_PATH_DIRS = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[^\s:'\"()]*[/\\](?=[^/\\\s:'\"()]+\.py\b)")
"""The directories of the source paths a reason names (the file name is kept)."""


def vc_hash(vc: VC, query: Any = None) -> str:
    """sha256 of the VC's SMT-LIB query (or of its reason, for a VC that could not be stated)."""
    if vc.unknown is not None or vc.structural is not None:
        # no query: the claim is its property, place and (stable) statement
        where = f"{os.path.basename(vc.position.file)}:{vc.position.line}" if vc.position else ""
        # reasons name source positions: only file names enter the hash, so that a record
        # made in one checkout holds in another
        reason = _PATH_DIRS.sub("", vc.unknown or vc.structural)
        text = f"{vc.property}|{where}|{vc.id}|{reason}"
        return hashlib.sha256(text.encode()).hexdigest()
    if query is None:
        query, _ = vc_query(vc.hypotheses, vc.goal)
    return query_hash(query)


def query_hash(query: Any) -> str:
    """sha256 of a query's SMT-LIB text (of its term DAG, past :data:`TREE_HASH_LIMIT`)."""
    from argus.smt.smtlib import query_to_smtlib

    assertions = list(query.all_assertions())
    if _tree_size([t for t, _ in assertions]) > TREE_HASH_LIMIT:
        return _dag_hash(query.logic, assertions)
    return hashlib.sha256(query_to_smtlib(query, share=False).encode()).hexdigest()  # the tree text: stable


#: a query whose terms, written out as trees, exceed this many nodes is hashed over its term DAG
#: (each distinct subterm once): its SMT-LIB text would take gigabytes where shared subterms
#: (a resolution's write conditions, in every field of a tag) repeat at every use
TREE_HASH_LIMIT = 2_000_000


def _tree_size(roots: list[Any]) -> int:
    """Nodes of the terms written out as trees (saturating just above the limit)."""
    from argus.smt import terms as T

    size: dict[int, int] = {}
    for t in T.subterms(*roots):
        size[id(t)] = min(TREE_HASH_LIMIT + 1, 1 + sum(size[id(a)] for a in t.args))
    return min(TREE_HASH_LIMIT + 1, sum(size[id(r)] for r in roots))


def _dag_hash(logic: str, assertions: list[tuple[Any, Any]]) -> str:
    """sha256 of the query as a numbered list of its distinct subterms (children first) and its
    named assertions: the same query gives the same hash, and it is as small as the DAG."""
    from argus.smt import terms as T

    digest = hashlib.sha256(f"dag|{logic}\n".encode())
    number: dict[int, int] = {}
    for t in T.subterms(*(a for a, _ in assertions)):
        number[id(t)] = len(number)
        children = " ".join(str(number[id(a)]) for a in t.args)
        digest.update(f"{t.op}|{t.params!r}|{t.sort}|{children}\n".encode())
    for t, name in assertions:
        digest.update(f"assert {number[id(t)]} {name}\n".encode())
    return digest.hexdigest()


def verify_kernel(kernel: N.Kernel, *, prover: Prover | None = None, cache: VCCache | None = None,
                  smtlib_dir: str | Path | None = None, replay: bool = True, minimize: bool = True,
                  unroll_limit: int | None = None, retries: int = 0, split: bool = True,
                  retry_budget: float | None = None, race: bool = False,
                  progress: Callable[[int, int, VC], None] | None = None) -> KernelReport:
    """Verify one specialization (see the module docstring)."""
    from argus.spec.kernel import kernel_hash

    start = time.perf_counter()
    own = prover is None
    prover = prover or LocalProver("z3")
    try:
        analysis, vcs = generate_vcs(kernel, unroll_limit=unroll_limit)
        lemmas = [vc for vc in vcs if vc.property in LEMMAS]
        others = [vc for vc in vcs if vc.property not in LEMMAS]
        results: dict[str, VCResult] = {}
        lemma_results: dict[Any, list[VCResult]] = {}
        pending: dict[tuple, list] = {}  # refuted VCs by property, place and trust
        prepared: dict[str, tuple | None] = {}
        for i, vc in enumerate(lemmas + others):
            if progress is not None:
                progress(i, len(vcs), vc)
            prepared[vc.id] = _prepare(vc, smtlib_dir, kernel)
        # every distinct query not in the cache, solved before any is judged (on two provers
        # at once where the prover can fork): unrolled copies repeat queries, solved once
        todo: dict[str, tuple] = {}
        for item in prepared.values():
            if item is not None and item[2] not in todo and (cache is None or cache.get(item[2]) is None):
                todo[item[2]] = item[:2]
        properties = {item[2]: vc.property for vc in lemmas + others if (item := prepared[vc.id]) is not None}

        def keep(digest: str, answer: Any) -> None:
            # a query proved valid goes to the cache at once: a run stopped halfway resumes there
            # (the cache records validity; lemmas a VC relies on are judged on every run)
            if cache is not None and isinstance(answer, Proved):
                cache.put(digest, _cache_entry(answer, properties[digest]))

        answers = _solve(todo, prover, keep)
        notes = _second_chances(todo, answers, prover, keep, retries=retries, split=split, budget=retry_budget,
                                cache=cache, race=race)
        for vc in lemmas + others:
            result = _verdict(vc, prepared[vc.id], answers, cache, notes)
            if vc.property in LEMMAS:
                _judge_lemma(result, analysis)
                lemma_results.setdefault(vc.roles.get("lemma_key"), []).append(result)
            else:
                _judge(result, lemma_results, pending,
                       complete=not (analysis.unsupported or analysis.program.unsupported))
            results[vc.id] = result
        for (_, _, trusted), group in pending.items():
            _explain(group, trusted, analysis, kernel, replay, minimize, prover)
        ordered = [results[vc.id] for vc in vcs]
        verdicts = {r.verdict for r in ordered}
        verdict = ("refuted" if "refuted" in verdicts else "error" if "error" in verdicts
                   else "unknown" if "unknown" in verdicts else "proved")
        try:
            versions = prover.versions()
        except Exception:
            versions = {}
        seconds = round(time.perf_counter() - start, 3)
        record = ProofRecord(kernel.name, dict(kernel.consts), kernel_hash(kernel),
                             [a.text for a in kernel.assumptions], verdict, [r.entry() for r in ordered],
                             versions, seconds=seconds,
                             source=_source(kernel), rlimits=resource_limits(prover) or None)
        return KernelReport(kernel, analysis, ordered, record, seconds)
    finally:
        if own:
            prover.close()


def _source(kernel: N.Kernel) -> str | None:
    """Where a record's kernel is defined: a module path for a kernel of the argus package
    (``argus/kernels/gemm.py``), else the file's base name (an example or a user's file)."""
    if not kernel.loc:
        return None
    path = Path(kernel.loc.file).resolve()
    package = Path(__file__).resolve().parents[1]
    if path.is_relative_to(package):
        return str(path.relative_to(package.parent))
    return os.path.basename(kernel.loc.file)


#: provers solving the VCs of one kernel at once (the prover's ``fork``; one per core, at most 2)
PARALLEL = max(1, min(2, os.cpu_count() or 1))
#: fewer distinct queries than this are solved on the one prover (a fork costs a worker start)
MIN_PARALLEL_QUERIES = 24


def _prepare(vc: VC, smtlib_dir: str | Path | None, kernel: N.Kernel) -> tuple | None:
    """``(query, guards, hash)`` of a VC the solvers decide (``None``: unknown or structural)."""
    if vc.unknown is not None or vc.structural is not None:
        return None
    query, guards = vc_query(vc.hypotheses, vc.goal)
    digest = vc_hash(vc, query)
    if smtlib_dir is not None:
        _write_smtlib(vc, digest, query, kernel, Path(smtlib_dir))
    return query, guards, digest


def _solve(todo: dict[Any, tuple], prover: Prover,
           on_answer: Callable[[Any, Any], None] | None = None, *, fresh: bool = False,
           seed: int = 0, budget: float | None = None, seeds: dict[Any, int] | None = None,
           race: Callable[[Any], Any] | None = None, budgets: dict[Any, float] | None = None) -> dict[Any, tuple]:
    """``{hash: (answer, seconds)}`` for the ``{hash: (query, guards)}`` to solve; with a
    prover that can ``fork``, on :data:`PARALLEL` provers at once (each query is answered
    the same whichever solves it: every check runs under its own resource limit).  ``fresh``:
    each query alone in a fork of ``prover`` (workers started for it and closed after it), with
    the solvers' random seed ``seed`` and wall-clock safety net ``budget`` (default: the
    prover's); a prover that cannot fork (in-process) checks them itself.  ``on_answer(hash,
    answer)`` is called as each answer arrives.  ``seeds``: a key's own seed in place of
    ``seed``; ``budgets``: likewise a key's own wall clock.  ``race(key)``: the race a key runs in
    (``fresh`` only): the first proof or refutation in a race stops the race's other checks
    (their forks closed) and its keys not yet started; those keys get no answer."""
    import queue
    import threading

    out: dict[str, tuple] = {}
    fork = getattr(prover, "fork", None)
    fresh = fresh and fork is not None
    lanes: list[Prover | None] = [prover]
    if fresh:
        lanes = [None] * min(PARALLEL, len(todo))
    elif fork is not None and PARALLEL > 1 and len(todo) >= MIN_PARALLEL_QUERIES:
        lanes += [fork() for _ in range(PARALLEL - 1)]
    work: queue.SimpleQueue = queue.SimpleQueue()
    for item in todo.items():
        work.put(item)
    errors: list[BaseException] = []
    lock = threading.Lock()
    won: set[Any] = set()  # races decided
    running: dict[Any, Prover] = {}  # key -> its fork, while it checks
    stopped: set[Any] = set()  # keys whose check a decided race stopped

    def run(p: Prover | None) -> None:
        while not errors:
            try:
                digest, (query, guards) = work.get_nowait()
            except queue.Empty:
                return
            own = seed if seeds is None else seeds.get(digest, seed)
            if race is not None and race(digest) in won:
                continue
            clock = budget if budgets is None else budgets.get(digest, budget)
            checker = p if p is not None else fork(seed=own) if clock is None else fork(seed=own, wall_clock_s=clock)
            try:
                with lock:
                    if race is not None and race(digest) in won:
                        continue
                    running[digest] = checker
                t0 = time.perf_counter()
                answer = checker.check(query, guards)
                rivals = []
                with lock:
                    running.pop(digest, None)
                    if digest in stopped:
                        continue
                    out[digest] = (answer, time.perf_counter() - t0)
                    if race is not None and p is None and isinstance(answer, (Proved, Refuted)):
                        won.add(race(digest))
                        rivals = [(k, c) for k, c in running.items() if race(k) == race(digest)]
                        stopped.update(k for k, _ in rivals)
                for _, rival in rivals:
                    rival.close()  # its check returns at once: its workers are stopped
                if on_answer is not None:
                    on_answer(digest, answer)
            except BaseException as err:  # re-raised in the calling thread
                errors.append(err)
                return
            finally:
                if p is None:
                    checker.close()

    try:
        if len(lanes) == 1 and not fresh:
            run(prover)
        else:
            threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in lanes]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for p in lanes[1:]:
            if p is not None:
                p.close()
    if errors:
        raise errors[0]
    return out


#: solver failures that another attempt in a fresh process may turn into an answer
RETRYABLE = frozenset({"resource_limit", "timeout", "unknown", "crash", "cancelled"})


def _retryable(answer: Any) -> bool:
    return isinstance(answer, Unknown) and any((r.reason or r.status) in RETRYABLE for r in answer.runs)


#: the answer of a part that an earlier run split (one of its pieces is in the cache): it is
#: split again at once, with no attempt of its own
RESUMED = Unknown((SolverRun("cache", "unknown", "unknown", "split by an earlier run: resumed at its pieces"),))

#: the wall clock, in seconds, of a part's first attempt in a split when it has single guards
#: (:func:`argus.proofs.provers.single_guards`) or cases (:func:`argus.proofs.provers.cube_query`)
#: to be split into: those get the full budget
CASES_AFTER_S = 30.0


def _second_chances(todo: dict[str, tuple], answers: dict[str, tuple], prover: Prover,
                    keep: Callable[[str, Any], None], *, retries: int, split: bool,
                    budget: float | None = None, cache: VCCache | None = None,
                    race: bool = False) -> dict[str, str]:
    """What follows a first pass that left queries undecided (every solver gave up), in
    ``answers`` in place; returns a note per query on how it was decided or what was tried.

    1. ``split``: a query is split into parts (:func:`argus.proofs.provers.split_query`: the
       goal's conjuncts, the definedness guards by divisor), each solved alone in a fork of
       ``prover`` at its seed; it is proved when every part is, refuted when one is (a part's
       model is one of the whole query).  A query with one part is split into its cases at
       once.  A part of guards left undecided is split again into its single guards
       (:func:`argus.proofs.provers.single_guards`); any other part left undecided, into cases on
       the values of its ring offsets (:func:`argus.proofs.provers.cube_query`: which stage,
       seen from each TMA box, holds the element read), each solved alone the same way; a part
       that has single guards or such cases gets only :data:`CASES_AFTER_S` of a longer
       ``budget`` before.  A case left undecided whose query has offsets that the case limit
       left unsplit is split again on them, after the same short clock, until none is left.
    2. ``retries``: attempt ``k`` solves what is still undecided (the parts of a split query,
       else the whole query) alone in a fork of ``prover`` with random seed ``k``.  ``race``:
       when fewer queries are left than :data:`PARALLEL` lanes, each runs several seeds at once
       (``k``, ``k + 1``, ...: the lanes shared out among them), and the first seed that decides
       it ends its race.  z3's time on these queries is heavy-tailed in the seed (one part
       proved in 28 s at one seed, its siblings ran past 180 s), so a few hard parts on a
       machine of many cores finish in the time of their luckiest seed.

    ``budget``: the forks' wall-clock safety net (default: the prover's), so that a short first
    pass can sort out the hard queries and only they get the long clock.  ``cache``: a part
    proved goes there under the hash of its own query (``part:<sha256>``), and a part found
    there is not solved again, so a run stopped halfway through a split resumes where it was."""
    from argus.proofs.provers import (
        cube_query,
        ring_offsets,
        shown_guards,
        single_guards,
        split_query,
    )

    notes: dict[str, str] = {}
    failed = [d for d, (a, _) in answers.items() if _retryable(a)]
    if not failed:
        return notes
    seeded = getattr(prover, "fork", None) is not None  # retries run in seeded forks
    first = {d: answers[d][1] for d in failed}
    parts: dict[str, dict[str, tuple]] = {}
    if split:
        for d in failed:
            query, guards = todo[d]
            pieces = split_query(query, guards)
            if len(pieces) > 1:
                parts[d] = {f"{d}:{i}": (piece, guards) for i, piece in enumerate(pieces)}
            elif len(cases := cube_query(query)) > 1:  # nothing to split but its cases
                parts[d] = {f"{d}:0/{j}": (case, guards) for j, case in enumerate(cases)}
    part_answers: dict[str, tuple] = {}
    part_hashes: dict[str, str] = {}  # hashed only where there is a cache to look in
    if cache is not None:
        part_hashes = {k: "part:" + query_hash(piece) for group in parts.values() for k, (piece, _) in group.items()}
        for k, h in part_hashes.items():
            if (hit := cache.get(h)) is not None:
                part_answers[k] = (Proved(hit.get("solver") or "cache", hit.get("resources")), 0.0)
    cached = set(part_answers)

    def keep_part(k: str, answer: Any) -> None:
        if cache is not None and isinstance(answer, Proved):
            cache.put(part_hashes[k], _cache_entry(answer, "part"))
    last_seed: dict[str, int] = {}  # a part retried: the seed of its last attempt
    attempts = dict.fromkeys(failed, 1)

    def combine(d: str) -> None:
        got = [part_answers[k] for k in parts[d]]
        seconds = first[d] + sum(t for _, t in got)
        refuted = next((a for a, _ in got if isinstance(a, Refuted)), None)
        undecided = [a for a, _ in got if not isinstance(a, (Proved, Refuted))]
        seeds = sorted({last_seed[k] for k in parts[d] if k in last_seed})
        fresh = (f"; {sum(k in last_seed for k in parts[d])} part(s) again alone in fresh solver processes, "
                 f"random seeds 1-{seeds[-1]}") if seeds else ""
        if (singles := sum("/g" in k for k in parts[d])):
            fresh += f"; {singles} of them single guards of undecided parts of guards"
        if (cases := sum("/" in k and "/g" not in k for k in parts[d])):
            fresh += f"; {cases} of them cases of undecided parts on their ring offsets"
        if (hits := sum(k in cached for k in parts[d])):
            fresh += f"; {hits} part(s) proved before, from the cache"
        if refuted is not None:
            answers[d] = (refuted, seconds)
            notes[d] = f"refuted by one of {len(got)} parts{fresh}"
        elif undecided:
            answers[d] = (undecided[0], seconds)
            notes[d] = f"also split into {len(got)} parts, {len(undecided)} undecided{fresh}"
        else:
            proved = [a for a, _ in got]
            answers[d] = (Proved(",".join(sorted({a.solver for a in proved})),
                                 max((a.resources or 0 for a in proved), default=0) or None, seconds), seconds)
            notes[d] = f"proved in {len(got)} parts: the goal's conjuncts and the definedness guards apart{fresh}"
            keep(d, answers[d][0])

    if parts:
        subs: dict[str, tuple[list, bool]] = {}  # a part's (or case's) split: its pieces, single guards or not

        def split_of(k: str, piece: Any, guards: Any) -> tuple[list, bool]:
            if k not in subs:
                singles = single_guards(piece, guards)
                subs[k] = (singles, True) if len(singles) > 1 else (cube_query(piece), False)
            return subs[k]

        def hashed(key: str, piece: Any) -> str:
            if key not in part_hashes:
                part_hashes[key] = "part:" + query_hash(piece)
            return part_hashes[key]

        def split_note(k: str, piece: Any) -> str:
            # the cache key under which a run notes that it split this part or case
            return "split:" + hashed(k, piece).removeprefix("part:")

        def split_before(k: str, piece: Any, guards: Any) -> bool:
            # the cache notes that a run split it, or holds one of its pieces
            if cache.get(split_note(k, piece)) is not None:
                return True
            pieces, singles = split_of(k, piece, guards)
            keys = [f"{k}/g{j}" if singles else f"{k}/{j}" for j in range(len(pieces))]
            return len(pieces) > 1 and any(cache.get(hashed(key, sub)) is not None for key, sub in zip(keys, pieces))

        def attempt(pending: dict[str, tuple]) -> None:
            # each alone in a fresh fork, at the prover's own seed: a warm worker's history slows
            # z3 down on them (parts that take seconds alone ran out of 120 s there); one that
            # has single guards or cases gets a short clock before it is split into them, and
            # none at all when an earlier run split it already (one of its pieces is cached)
            short, resumed = {}, {}
            for k, (piece, guards) in pending.items():
                shown = shown_guards(piece, guards)
                if not (ring_offsets(piece) if shown is None else len(shown) > 1):
                    continue
                if cache is not None and split_before(k, piece, guards):
                    resumed[k] = (RESUMED, 0.0)
                    continue
                if budget is not None and budget > CASES_AFTER_S:
                    short[k] = CASES_AFTER_S
            part_answers.update(resumed)
            part_answers.update(_solve({k: v for k, v in pending.items() if k not in resumed}, prover, keep_part,
                                       fresh=True, seed=getattr(prover, "seed", 0), budget=budget, budgets=short))

        attempt({k: v for group in parts.values() for k, v in group.items() if k not in part_answers})
        # a part still undecided is split once more: a part of guards into its single guards
        # (:func:`argus.proofs.provers.single_guards`), any other into cases on its ring
        # offsets (:func:`argus.proofs.provers.cube_query`); a case still undecided that has
        # offsets the case limit left open is split again on those (a short clock first, as
        # for a part), until no offset is left; the retries then work on the last cases
        undecided = {d: [k for k in group if _retryable(part_answers[k][0])] for d, group in parts.items()}
        while undecided:
            cases: dict[str, tuple] = {}
            for d, keys in undecided.items():
                group = parts[d]
                for k in keys:
                    piece, guards = group[k]
                    pieces, singles = split_of(k, piece, guards)
                    if len(pieces) < 2:
                        continue
                    first[d] += part_answers.pop(k)[1]
                    del group[k]
                    if cache is not None:  # where the next run resumes
                        cache.put(split_note(k, piece), {"verdict": "split"})
                    for j, cube in enumerate(pieces):
                        key = f"{k}/g{j}" if singles else f"{k}/{j}"
                        group[key] = cases[key] = (cube, guards)
                        if cache is not None and (hit := cache.get(hashed(key, cube))) is not None:
                            part_answers[key] = (Proved(hit.get("solver") or "cache", hit.get("resources")), 0.0)
                            cached.add(key)
            attempt({k: v for k, v in cases.items() if k not in part_answers})
            # only a goal case can be split again (a single guard is one guard, and its part had
            # no cases to give)
            undecided = {d: keys for d, group in parts.items()
                         if (keys := [k for k in group if k in cases and _retryable(part_answers[k][0])
                                      and shown_guards(cases[k][0], cases[k][1]) is None
                                      and ring_offsets(cases[k][0])])}
        for d in parts:
            combine(d)
    tried: dict[str, int] = {}  # seeds 1..retries tried so far, per query or part
    won_with: dict[str, int] = {}  # the seed of the attempt that decided a query
    while True:
        again: dict[str, tuple] = {}
        for d in failed:
            if not _retryable(answers[d][0]):
                continue
            if d in parts:
                again.update({k: v for k, v in parts[d].items() if _retryable(part_answers[k][0])})
            else:
                again[d] = todo[d]
        again = {k: v for k, v in again.items() if tried.get(k, 0) < retries}
        if not again:
            break
        # one seed each per round; racing, the lanes a round leaves idle run more seeds of the
        # same queries at once, and the first that decides one spares the rest of its seeds
        width = max(1, PARALLEL // len(again)) if race else 1
        tasks: dict[tuple[str, int], tuple] = {}
        for key, item in again.items():
            first_seed = tried.get(key, 0) + 1
            tried[key] = min(first_seed + width - 1, retries)
            tasks.update({(key, s): item for s in range(first_seed, tried[key] + 1)})
        got = _solve(tasks, prover, fresh=True, budget=budget, seeds={t: t[1] for t in tasks},
                     race=lambda task: task[0])
        for key in again:
            runs = sorted((s, got[(key, s)]) for s in range(1, retries + 1) if (key, s) in got)
            if not runs:
                continue
            win = next(((s, r) for s, r in runs if isinstance(r[0], (Proved, Refuted))), runs[-1])
            answer, seconds = win[1][0], sum(r[1] for _, r in runs)
            if key in answers:
                answers[key] = (answer, answers[key][1] + seconds)
                attempts[key] += len(runs)
                won_with[key] = win[0]
                if isinstance(answer, Proved):
                    keep(key, answer)
            else:
                part_answers[key] = (answer, part_answers[key][1] + seconds)
                last_seed[key] = runs[-1][0]
                keep_part(key, answer)
        for d in parts:
            if any(k in again for k in parts[d]):
                combine(d)
    for d, tries in attempts.items():
        if tries > 1:
            if isinstance(answers[d][0], Proved):
                notes[d] = (f"proved at attempt {tries}, alone in fresh solver processes"
                            + (f" with random seed {won_with.get(d, tries - 1)}" if seeded else ""))
            else:
                notes[d] = (f"also in fresh solver processes, {tries} attempts"
                            + (f", random seeds 0-{tries - 1}" if seeded else ""))
    return notes


def _cache_entry(answer: Proved, prop: str) -> dict[str, Any]:
    """What the cache keeps of a proved query (or part of one)."""
    return {"verdict": "proved", "solver": answer.solver, "resources": answer.resources, "property": prop}


def _discharge(vc: VC, prover: Prover, cache: VCCache | None, smtlib_dir: str | Path | None,
               kernel: N.Kernel) -> VCResult:
    """One VC solved on its own (or taken from the cache)."""
    prepared = _prepare(vc, smtlib_dir, kernel)
    answers: dict[str, tuple] = {}
    if prepared is not None and (cache is None or cache.get(prepared[2]) is None):
        answers = _solve({prepared[2]: prepared[:2]}, prover)
    return _verdict(vc, prepared, answers, cache)


def _verdict(vc: VC, prepared: tuple | None, answers: dict[str, tuple], cache: VCCache | None,
             notes: dict[str, str] | None = None) -> VCResult:
    """The verdict of one VC from its answer (or the cache's; the solver time is counted at
    the first VC of a repeated query only, and sums every attempt); ``notes``: how a query
    was decided after its first attempt, or what was tried (:func:`_second_chances`)."""
    if vc.unknown is not None:
        return VCResult(vc, "unknown", vc_hash(vc), reason=vc.unknown)
    if vc.structural is not None:
        return VCResult(vc, "proved", vc_hash(vc), solver="structural", reason=vc.structural)
    assert prepared is not None
    _, _, digest = prepared
    got = answers.get(digest)
    if got is None:
        hit = cache.get(digest) if cache is not None else None
        if hit is None:
            raise AssertionError(f"no answer for {vc.id}")
        return VCResult(vc, "proved", digest, solver=hit.get("solver"), resources=hit.get("resources"),
                        cached=True)
    answer, seconds = got
    answers[digest] = (answer, 0.0)
    match answer:
        case Proved():
            note = (notes or {}).get(digest)
            return VCResult(vc, "proved", digest, answer.solver, answer.resources, seconds, note)
        case Refuted():
            reason = "division by zero reachable" if answer.violation == "definedness" else None
            note = (notes or {}).get(digest)  # e.g. refuted by one part of a split query
            if note is not None:
                reason = f"{reason} ({note})" if reason else note
            return VCResult(vc, "refuted", digest, answer.solver, answer.resources, seconds, reason,
                            model=dict(answer.model))
        case Unknown():
            again = f" ({notes[digest]})" if notes and digest in notes else ""
            return VCResult(vc, "unknown", digest, None, None, seconds, f"solvers gave up{again}: {answer.reason}")
    raise AssertionError(f"unexpected prover answer {answer!r}")


def _write_smtlib(vc: VC, digest: str, query: Any, kernel: N.Kernel, directory: Path) -> None:
    from argus.smt.smtlib import query_to_smtlib

    consts = "-".join(f"{k}={v}" for k, v in kernel.consts)
    folder = directory / (kernel.name + (f"[{consts}]" if consts else ""))
    folder.mkdir(parents=True, exist_ok=True)
    comment = f"{vc.id}: {vc.describe()} (sha256 {digest})"
    safe = vc.id.replace("#", "-").replace("@", "-L")
    (folder / f"{safe}.smt2").write_text(query_to_smtlib(query, model=True, comment=comment))


def _judge_lemma(result: VCResult, analysis: Analysis) -> None:
    """A lemma that fails says why reads through that write (or of that tensor) cannot be
    resolved; it is no property of the kernel by itself, so its verdict is ``unknown``."""
    if result.verdict != "refuted" or result.model is None:
        return
    vc, model = result.vc, result.model
    if vc.property == "mma-operands":
        result.verdict = "unknown"
        if vc.roles.get("lemma_key", ("",))[0] == "mma-acc":
            result.reason = (f"the accumulator of the MMA at {vc.position} may carry another record than the "
                             "product's: the result may be untagged")
        else:
            result.reason = (f"the operands of the MMA at {vc.position} do not carry one record per row of A / "
                             "column of B apart from k: the result's tag is not that of one element")
        return
    if vc.property == "coordinates":
        access = vc.roles["access"]
        result.verdict = "unknown"
        result.reason = (f"the {access.role} of %{access.buffer.name} at {vc.position} leaves a dimension of the "
                         f"tensor or its layout; reads of %{access.buffer.name} cannot be matched by coordinate")
        return
    writer = vc.roles.get("writer")
    differ = []
    for name, var in vc.roles.get("variables", {}).items():
        try:
            if evaluate(vc.roles["witness"][name], model) != evaluate(var, model):
                differ.append(name)
        except EvaluationError:
            differ.append(name)
    loops = {lp.var.name: lp for lp in vc.site.loops}
    if any(n in loops for n in differ):
        loop = loops[next(n for n in differ if n in loops)]
        reason = (f"loop at {loop.op.loc} needs an invariant: two iterations of {writer.describe()} "
                  f"write the same element of %{writer.view.buffer.name}")
    elif analysis.tid.name in differ:
        reason = (f"two threads write the same element of %{writer.view.buffer.name} at {writer.describe()} "
                  "(a write-write race); reads of it cannot be resolved")
    else:
        reason = (f"two elements written by {writer.describe()} land on one address of "
                  f"%{writer.view.buffer.name}; reads of it cannot be resolved")
    result.verdict, result.reason = "unknown", reason


def _judge(result: VCResult, lemmas: dict[Any, list[VCResult]], pending: dict[tuple, list],
           complete: bool = True) -> None:
    """Lemmas weaken proofs; refutations wait in ``pending`` (by property, place and trust)
    to be explained together.  In a kernel with ops the verifier does not model
    (``complete`` false) no refutation is trusted: the effects of those ops are missing."""
    vc = result.vc
    weak = [r for key in sorted(vc.lemmas, key=str) for r in lemmas.get(key, []) if r.verdict != "proved"]
    trusted = vc.exact and not weak and complete
    if result.verdict == "proved" and weak:
        first = weak[0]
        result.verdict = "unknown"
        result.reason = f"relies on {first.vc.id} ({first.verdict}): {first.reason}"
        return
    if result.verdict == "refuted" and result.model is not None:
        pending.setdefault((vc.property, vc.position, trusted), []).append((result, weak))


def _explain(group: list, trusted: bool, analysis: Analysis, kernel: N.Kernel, replay: bool,
             minimize: bool, prover: Prover) -> None:
    """One counterexample for the VCs refuted at one place: the smallest violation of any of
    them (the one the interpreter meets first), replayed; the others are the same violation."""
    results = [r for r, _ in group]
    _, weak = group[0]
    # the member whose violation comes first in the interpreter's order (block, thread, element)
    owner = min(results, key=lambda r: _order(r.vc, r.model))
    model = owner.model
    if minimize:
        solver = getattr(prover, "solver", None) or "z3"
        model = CX.minimize(owner.vc, analysis, model, solver=solver if solver in ("z3", "cvc5") else "z3")
    cx = CX.build(owner.vc, analysis, model)
    owner.counterexample = cx
    for r in results:
        if r is not owner:
            r.reason = f"the same violation as {owner.vc.id} (another element, case or unrolled copy)"
    if not replay:
        if not trusted:
            for r in results:
                r.verdict = "unknown"
                r.reason = "model of an approximated encoding (replay disabled): " + "; ".join(
                    r.vc.approximations or [w.reason or "" for w in weak])
        return
    cx.replay = CX.replay(kernel, cx)
    status = cx.replay.status
    if status == "reproduced" or (trusted and status in ("not-replayable", "different", "skipped")):
        return
    for r in results:
        if trusted:
            r.verdict = "error"
            r.reason = (f"internal error: the counterexample does not replay ({status}: {cx.replay.detail}); "
                        "please report this kernel")
        else:
            why = "; ".join(r.vc.approximations) or "; ".join(f"{w.vc.id}: {w.reason}" for w in weak)
            r.verdict = "unknown"
            r.reason = (f"a possible violation the interpreter does not confirm ({status}); "
                        f"the encoding approximates: {why}")


def _order(vc: VC, model: dict) -> tuple:
    def value(term: Any) -> int:
        try:
            v = evaluate(term, model) if term is not None else 0
        except EvaluationError:
            v = 0
        return v if isinstance(v, int) else 0

    roles = vc.roles
    block = tuple(value(b) for b in reversed(roles.get("block") or ()))
    return (block, value(roles.get("thread")), tuple(value(c) for c in roles.get("element") or ()))
