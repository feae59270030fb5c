"""Counterexamples: a refuted VC's model, made small, explained, and replayed.

From the model of a refuted VC (:func:`build`):

1. :func:`minimize` re-solves the VC's query with each variable pushed to its smallest
   value, in the order sizes → block → loop iterations → thread → element (→ the other
   thread), so sizes come out small (a few tiles) and the counterexample is the first
   violation the reference interpreter meets (it scans blocks, warps, lanes and elements
   in that order);
2. the VC's roles are evaluated on the model: consts, sizes, block, thread(s), element in
   the view and in the tensor's own coordinates, loop iterations, expected and actual tag
   values, the program point and the path taken;
3. :func:`replay` runs the kernel on the reference interpreter (only the counterexample's
   blocks, tensors of the counterexample's sizes) and checks that it reports a violation of
   the same kind at the same op, in the same block (and which thread).

:meth:`Counterexample.to_json` is the versioned feedback format (``"argus.counterexample"``,
:data:`FORMAT_VERSION`); :meth:`Counterexample.human` shows the source line.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from argus import symbolic
from argus.abstract_interp.analysis import Analysis
from argus.abstract_interp.tags import TagValue
from argus.abstract_interp.vc import VC
from argus.errors import ArgusError, SourcePosition
from argus.ir import nodes as N
from argus.smt import terms as T
from argus.smt.diff import check_assertions
from argus.smt.evaluate import EvaluationError, evaluate

FORMAT = "argus.counterexample"
FORMAT_VERSION = 1

#: the interpreter's violation kinds for each property
INTERPRETER_KINDS: dict[str, frozenset[str]] = {
    "in-bounds": frozenset({"out-of-bounds"}),
    "uninitialized": frozenset({"uninitialized"}),
    "race": frozenset({"race"}),
    "write-conflict": frozenset({"write-conflict"}),
    "barrier": frozenset({"barrier", "deadlock"}),
    "tag": frozenset({"tag"}),
    "collective": frozenset({"collective", "deadlock"}),
    "async": frozenset({"async", "race", "parity", "expect-tx", "deadlock"}),
    "mbarrier": frozenset({"mbarrier", "deadlock"}),
    "expect-tx": frozenset({"expect-tx", "deadlock", "async"}),
    "phase": frozenset({"deadlock", "parity"}),
    "proxy": frozenset({"proxy"}),
    "registers": frozenset({"collective"}),
    "wgmma": frozenset({"async"}),
    "coverage": frozenset({"coverage"}),
    "cluster": frozenset({"cluster"}),
    "launch-order": frozenset({"launch-order"}),
}

#: replay refuses launches whose tensors hold more elements than this
REPLAY_ELEMENT_LIMIT = 1 << 22


@dataclass(frozen=True)
class Replay:
    """What the reference interpreter said.

    ``status``: ``reproduced`` (same kind, op and block), ``different`` (it stopped at another
    violation first), ``not-reproduced`` (it ran clean), ``not-replayable`` (the interpreter
    does not check this property), ``skipped`` or ``error``.
    """

    status: str
    detail: str = ""
    violation: dict[str, Any] | None = None
    thread_matches: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "violation": self.violation,
                "thread_matches": self.thread_matches}


@dataclass
class Counterexample:
    """A concrete violation of one VC (see the module docstring)."""

    kernel: str
    consts: dict[str, Any]
    property: str
    message: str
    vc: str
    position: SourcePosition | None
    op: str | None
    sizes: dict[str, int]
    block: tuple[int, ...] | None = None
    thread: int | None = None
    element: tuple[int, ...] | None = None
    tensor_element: tuple[int, ...] | None = None
    buffer: str | None = None
    iteration: dict[str, int] = field(default_factory=dict)
    unrolled: dict[str, int] = field(default_factory=dict)
    path: list[dict[str, Any]] = field(default_factory=list)
    other: dict[str, Any] | None = None
    actual_tag: tuple[int, ...] | str | None = "n/a"
    expected_tag: Any = "n/a"
    index_reads: dict[str, dict[int, int]] = field(default_factory=dict)
    inserted_by: SourcePosition | None = None
    replay: Replay | None = None

    # ---------------------------------------------------------------- formats

    def to_json(self) -> dict[str, Any]:
        def pos(p: SourcePosition | None) -> dict[str, Any] | None:
            return None if p is None else {"file": p.file, "line": p.line}

        out: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kernel": self.kernel,
            "consts": {k: _plain(v) for k, v in self.consts.items()},
            "sizes": self.sizes,
            "property": self.property,
            "message": self.message,
            "vc": self.vc,
            "program_point": {**(pos(self.position) or {}), "op": self.op, "source": self.source_line(),
                              "inserted_by": pos(self.inserted_by)},
            "block": list(self.block) if self.block is not None else None,
            "thread": self.thread,
            "element": None if self.element is None else {
                "buffer": self.buffer, "view": list(self.element),
                "tensor": list(self.tensor_element) if self.tensor_element is not None else None},
            "iteration": self.iteration,
            "unrolled": self.unrolled,
            "path": self.path,
            "other": self.other,
            "tags": None if self.actual_tag == "n/a" else {
                "actual": None if self.actual_tag is None else list(self.actual_tag),
                "expected": _expected_json(self.expected_tag)},
            "index_reads": {k: {str(a): v for a, v in t.items()} for k, t in self.index_reads.items()},
            "replay": self.replay.to_json() if self.replay else None,
        }
        return out

    def source_line(self) -> str | None:
        if self.position is None:
            return None
        text = linecache.getline(self.position.file, self.position.line)
        return text.rstrip("\n") if text else None

    def human(self) -> str:
        lines = [f"refuted: {self.property} at {self.position or '?'} ({self.op})"]
        src = self.source_line()
        if src is not None:
            lines.append(f"  {self.position.line:>5} | {src.strip()}")
        if self.inserted_by is not None:
            lines.append(f"  (inserted by the policy at {self.inserted_by})")
        lines.append(f"  violated: {self.message}")
        facts = []
        if self.consts:
            facts.append("consts " + ", ".join(f"{k}={v}" for k, v in self.consts.items()))
        if self.sizes:
            facts.append("sizes " + ", ".join(f"{k}={v}" for k, v in self.sizes.items()))
        if facts:
            lines.append("  " + "; ".join(facts))
        who = []
        if self.block is not None:
            who.append(f"block {self.block}")
        if self.thread is not None:
            who.append(f"thread {self.thread}")
        if self.element is not None:
            where = f"element {self.element} of %{self.buffer}" if self.buffer else f"element {self.element}"
            if self.tensor_element is not None and self.tensor_element != self.element:
                where += f" (tensor coordinate {self.tensor_element})"
            who.append(where)
        if self.iteration:
            who.append("iteration " + ", ".join(f"{k}={v}" for k, v in self.iteration.items()))
        if self.unrolled:
            who.append("unrolled " + ", ".join(f"{k}={v}" for k, v in self.unrolled.items()))
        if who:
            lines.append("  " + ", ".join(who))
        if self.other:
            o = self.other
            text = f"  conflicts with thread {o.get('thread')}"
            if o.get("block") is not None and o.get("block") != (list(self.block) if self.block else None):
                text += f" of block {tuple(o['block'])}"
            if o.get("element") is not None:
                text += f", element {tuple(o['element'])}"
            if o.get("iteration"):
                text += ", iteration " + ", ".join(f"{k}={v}" for k, v in o["iteration"].items())
            if o.get("position"):
                text += f", at {o['position']} ({o.get('op')})"
            lines.append(text)
        if self.actual_tag != "n/a":
            actual = "⊥ (untagged)" if self.actual_tag is None else str(tuple(self.actual_tag))
            lines.append(f"  actual tag {actual}; expected {_show_expected(self.expected_tag)}")
        if self.path:
            lines.append("  path: " + "; ".join(
                f"{p['branch']} of {p['condition']} at {p['at']}" if p["branch"] != "loop"
                else f"loop {p['condition']} at {p['at']}" for p in self.path))
        if self.index_reads:
            lines.append("  index tensors read: " + "; ".join(
                f"{k}{dict(sorted(t.items()))}" for k, t in self.index_reads.items()))
        if self.replay is not None:
            lines.append(f"  replay: {self.replay.status}" + (f" — {self.replay.detail}" if self.replay.detail else ""))
        return "\n".join(lines)


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def _expected_json(expected: Any) -> Any:
    """A record as a list; a partial one (only some fields constrained) as ``{"tag[i]": v}``."""
    if isinstance(expected, dict):
        if expected and sorted(expected) == list(range(len(expected))):
            return [expected[i] for i in range(len(expected))]
        return {f"tag[{i}]": v for i, v in sorted(expected.items())}
    return _plain(expected)


def _show_expected(expected: Any) -> str:
    if expected is None:
        return "⊥"
    if isinstance(expected, dict) and expected and sorted(expected) == list(range(len(expected))):
        return str(tuple(expected[i] for i in range(len(expected))))
    if isinstance(expected, dict):
        return ", ".join(f"tag[{i}] = {v}" for i, v in sorted(expected.items())) or "the assertion to hold"
    if isinstance(expected, (tuple, list)):
        return str(tuple(expected))
    return str(expected)


# --------------------------------------------------------------------------- models


def _value(term: Any, model: dict) -> Any:
    if term is None:
        return None
    try:
        return evaluate(term, model)
    except EvaluationError:
        return None


def complete(model: dict, terms: list[T.Term]) -> dict:
    """The model with every variable of ``terms`` bound (unmentioned ones at their lower bound)."""
    out = dict(model)
    for name, var in T.variables(*terms).items():
        if name not in out:
            if var.sort.is_bool:
                out[name] = False
            elif var.sort.is_int:
                lo, hi = var.bounds
                out[name] = lo if lo is not None else (min(0, hi) if hi is not None else 0)
    return out


#: wall-clock seconds :func:`minimize` spends narrowing one model (then it keeps the smallest so far)
MINIMIZE_BUDGET_S = 60.0


def minimize(vc: VC, analysis: Analysis, model: dict, *, solver: str = "z3", rlimit: int = 20_000_000,
             budget_s: float | None = None) -> dict:
    """A model of the VC's negation with sizes, block, iterations, thread and element each as
    small as possible (lexicographically, in that order), within ``budget_s`` seconds (default
    :data:`MINIMIZE_BUDGET_S`): past it the smallest model found so far is returned — a valid
    model, only less small (each check of the narrowing gets the time that is left)."""
    import time

    from argus.proofs.provers import vc_query
    from argus.smt.session import Session

    query, _ = vc_query(vc.hypotheses, vc.goal)
    terms = list(query.domain) + list(query.terms)
    variables = T.variables(*terms)
    order: list[str] = []

    def push(term: Any) -> None:
        if isinstance(term, T.Term) and term.is_var and term.name in variables and term.name not in order:
            order.append(term.name)

    for var in sorted(analysis.encoder.sizes.values(), key=lambda v: v.name):
        push(var)
    for prefix in ("", "other_"):
        for b in reversed(vc.roles.get(f"{prefix}block", ()) or ()):
            push(b)
        for it in (vc.roles.get(f"{prefix}iteration") or {}).values():
            push(it)
        push(vc.roles.get(f"{prefix}thread"))
        for c in vc.roles.get(f"{prefix}element", ()) or ():
            push(c)
    for name in sorted(variables):
        if name not in order and variables[name].sort.is_int and variables[name].bounds[0] is not None:
            order.append(name)
    best = complete(model, terms)
    deadline = time.monotonic() + (MINIMIZE_BUDGET_S if budget_s is None else budget_s)
    if time.monotonic() >= deadline:
        return best
    try:
        session = Session(solver, logic=query.logic, rlimit=rlimit)
    except ArgusError:
        return best
    with session:
        session.add_query(query)
        for name in order:
            var = variables[name]
            lo = var.bounds[0]
            hi = best.get(name)
            if lo is None or not isinstance(hi, int) or isinstance(hi, bool):
                continue
            while lo < hi:
                left = deadline - time.monotonic()
                if left <= 0:
                    return best
                mid = (lo + hi) // 2
                answer = session.check([T.le(var, mid)], timeout_s=left)
                if answer.status == "sat" and answer.model is not None:
                    candidate = complete(answer.model, terms)
                    if check_assertions(terms, candidate).status != "valid":
                        break
                    best = candidate
                    hi = best[name]
                elif answer.status == "unsat":
                    lo = mid + 1
                else:
                    break
            session.add(T.eq(var, best[name]))
    return best


# --------------------------------------------------------------------------- building


def _tag_value(tag: TagValue | None, model: dict) -> tuple[int, ...] | None:
    if tag is None:
        return None
    length = _value(tag.length, model)
    if length is None or length < 0:
        return None
    return tuple(_value(f, model) for f in tag.fields[:length])


def _ints(terms: Any, model: dict) -> tuple[int, ...] | None:
    if terms is None:
        return None
    return tuple(_value(t, model) for t in terms)


def _role_terms(value: Any, out: list[T.Term]) -> None:
    if isinstance(value, T.Term):
        out.append(value)
    elif isinstance(value, TagValue):
        out.append(value.length)
        out.extend(value.fields)
    elif isinstance(value, dict):
        for v in value.values():
            _role_terms(v, out)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _role_terms(v, out)


def build(vc: VC, analysis: Analysis, model: dict) -> Counterexample:
    """The counterexample of ``model`` (already minimized, if wanted) for ``vc``."""
    kernel = analysis.kernel
    mentioned: list[T.Term] = [vc.goal, *(h for _, h in vc.hypotheses), *analysis.encoder.sizes.values()]
    _role_terms(vc.roles, mentioned)
    model = complete(model, mentioned)
    roles = vc.roles
    site = vc.site
    sizes = {v.name: _value(v, model) for v in analysis.encoder.sizes.values()}
    sizes = {k: v for k, v in sizes.items() if v is not None}
    view = roles.get("view")
    if roles.get("whole") is not None:
        roles = {**roles, "actual": roles["whole"]["actual"]}
    cx = Counterexample(
        kernel=kernel.name, consts=dict(kernel.consts), property=vc.property, message=vc.message, vc=vc.id,
        position=vc.position, op=vc.op, sizes=sizes,
        block=_ints(roles.get("block"), model) if roles.get("block") else None,
        thread=_value(roles.get("thread"), model),
        element=_ints(roles.get("element"), model),
        tensor_element=_ints(roles.get("logical"), model),
        buffer=view.buffer.name if isinstance(view, N.View) else roles.get("buffer"),
        iteration={k: _value(t, model) for k, t in (roles.get("iteration") or {}).items()},
        inserted_by=site.op.inserted_by if site is not None else None,
    )
    if site is not None:
        cx.unrolled = {str(op.var): v for op, v in site.unrolled}
        inst_values = {}
        for key, sym in (("thread", analysis.tid),):
            if roles.get(key) is not None:
                inst_values[sym] = roles[key]
        for sym, b in zip(analysis.block_ids, roles.get("block") or ()):
            if b is not None:
                inst_values[sym] = b
        for lp in site.loops:
            t = (roles.get("iteration") or {}).get(lp.var.name)
            if t is not None:
                inst_values[lp.var] = t
        for cond in site.conditions:
            value = None
            try:
                value = _value(analysis.encoder.term(site.expr(cond.expr), inst_values), model)
            except ArgusError:
                pass
            cx.path.append({"condition": str(cond.expr if cond.what != "else" else cond.expr.args[0]),
                            "at": str(cond.op.loc) if cond.op.loc else None, "branch": cond.what,
                            "value": value})
    for alternative, info in roles.get("alternatives", ()):
        if _value(alternative, model) is True:
            other_site = info["other_site"]
            cx.other = {
                "thread": _value(info.get("other_thread"), model),
                "block": list(_ints(info.get("other_block"), model) or ()) or None,
                "element": list(_ints(info.get("other_element"), model) or ()) or None,
                "tensor_element": list(_ints(info.get("other_logical"), model) or ()) or None,
                "iteration": {k: _value(t, model) for k, t in (info.get("other_iteration") or {}).items()},
                "position": str(other_site.op.loc) if other_site.op.loc else None,
                "line": other_site.op.loc.line if other_site.op.loc else None,
                "file": other_site.op.loc.file if other_site.op.loc else None,
                "op": other_site.op.kind,
                "access": info["other_access"].role,
                "kind": info["other_access"].kind,
            }
            break
    if "other_thread" in roles and cx.other is None:
        cx.other = {"thread": _value(roles["other_thread"], model), "block": list(cx.block or ()) or None}
    if vc.property == "tag":
        cx.actual_tag = _tag_value(roles.get("actual"), model)
        if "expected" in roles:
            cx.expected_tag = _tag_value(roles["expected"], model)
        else:
            cx.expected_tag = {i: _value(t, model) for i, t in (roles.get("expected_fields") or {}).items()}
    for name, table in model.items():
        if isinstance(name, str) and name.startswith("mem.") and isinstance(table, dict):
            cx.index_reads[name[4:]] = {k[0]: v for k, v in table.items() if k is not None}
    return cx


# --------------------------------------------------------------------------- replay


def _linear(block: tuple[int, ...], grid: tuple[int, ...]) -> int:
    x, y, z = ((*tuple(block), 0, 0, 0))[:3]
    return x + grid[0] * (y + grid[1] * z)


def replay(kernel: N.Kernel, cx: Counterexample) -> Replay:
    """Run ``kernel`` on the reference interpreter at the counterexample (see the module docstring)."""
    from argus.ir.interpreter import Interpreter, InterpreterError

    if cx.property not in INTERPRETER_KINDS:
        return Replay("not-replayable", f"the reference interpreter does not check {cx.property}")
    if cx.other is not None and cx.property == "race" and cx.other.get("block") not in (None, list(cx.block or ())):
        return Replay("not-replayable", "the reference interpreter runs blocks one after another and does not "
                      "report reads of memory another block writes")
    rng = np.random.default_rng(0)
    inputs: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = dict(cx.sizes)
    try:
        for p in kernel.params:
            if p.kind != "tensor":
                continue
            symbols = symbolic.free_symbols(p.buffer.size)
            for s in symbols:
                sizes.setdefault(s.name, 1)
            n = int(symbolic.evaluate(p.buffer.size, {s: sizes[s.name] for s in symbols}))
            if n > REPLAY_ELEMENT_LIMIT:
                return Replay("skipped", f"tensor {p.name} would hold {n} elements")
            if getattr(p.buffer.dtype, "is_float", False):
                array = rng.standard_normal(n).astype(np.float32)
                array[array == 0] = 1.0
            else:
                array = np.zeros(n, np.int64)
                for address, value in cx.index_reads.get(p.buffer.name, {}).items():
                    if 0 <= address < n:
                        array[address] = value
            inputs[p.name] = array
        grid = tuple(int(symbolic.evaluate(g, {s: sizes[s.name] for s in symbolic.free_symbols(g)}))
                     for g in kernel.launch.grid)
    except (ArgusError, KeyError, TypeError) as err:
        return Replay("error", f"cannot build the launch: {err}")
    grid = ((*grid, 1, 1, 1))[:3]
    blocks = [tuple(cx.block or (0, 0, 0))]
    other_block = tuple(cx.other["block"]) if cx.other and cx.other.get("block") else None
    if other_block is not None and other_block != blocks[0]:
        blocks.append(other_block)
    blocks.sort(key=lambda b: _linear(b, grid))
    try:
        Interpreter(kernel).run(inputs, sizes, blocks=blocks)
    except InterpreterError as err:
        return _compare(cx, err.violation, blocks)
    except ArgusError as err:
        return Replay("error", f"the interpreter failed: {err}")
    return Replay("not-reproduced", "the reference interpreter ran the counterexample without a violation")


def _compare(cx: Counterexample, v: Any, blocks: list[tuple[int, ...]]) -> Replay:
    places = set()
    if cx.position is not None:
        places.add((cx.position.file, cx.position.line))
    if cx.other and cx.other.get("file"):
        places.add((cx.other["file"], cx.other["line"]))
    here = (v.position.file, v.position.line) if v.position is not None else None
    threads = {t for t in (cx.thread, (cx.other or {}).get("thread")) if t is not None}
    violation = {"kind": v.kind, "message": v.message, "block": list(v.block) if v.block else None,
                 "thread": v.thread, "other_thread": v.other_thread,
                 "element": list(v.element) if v.element is not None else None,
                 "position": str(v.position) if v.position else None, "op": v.op}
    thread_matches = v.thread in threads or v.other_thread in threads
    if v.kind in INTERPRETER_KINDS[cx.property] and here in places and tuple(v.block or ()) in blocks:
        detail = f"{v.kind} at {v.position}, block {v.block}, thread {v.thread}"
        return Replay("reproduced", detail, violation, thread_matches)
    return Replay("different", f"the interpreter stopped first at: {v}", violation, thread_matches)
