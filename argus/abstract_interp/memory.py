"""What each op does to memory: one table of accesses and writes per op kind.

The table follows the reference interpreter (:mod:`argus.ir.interpreter`), which defines the
semantics:

==============  ==========================================  ===============================
op              accesses (bounds-checked)                   writes (data / tags)
==============  ==========================================  ===============================
Copy            src read, dst write (both under ``pred``)   dst: src's data and tag
Fill            dst write                                   dst: data, ⊥
Elementwise     dst write, view operands read               dst: data, merged tag
Convert         dst write, src read                         dst: data, src's tag
ReadIndex       src read (its first element)                —
Tag             view (no data access)                       view: tag record
AssertTag       view, equal_to (no data access)             —
ResetTags       view (no data access)                       view: ⊥
==============  ==========================================  ===============================

A read's element is active when the thread's path holds, the element is valid in its view
(partial tiles) and the copy predicate holds; a write's element when the same holds for the
destination (and, for a copy, for the source).  ``Reduce``, ``Shuffle`` and ``Atomic`` have
their rows in :mod:`~argus.abstract_interp.collectives`; asynchronous copies (cp.async, TMA)
and the synchronisation ops (mbarriers, group commits and waits, fences, ``setmaxnreg``) in
:mod:`~argus.abstract_interp.asynchrony`.  Every other op kind is *unsupported* here: the
verifier answers ``unknown`` for it, never a silent pass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from argus.ir import nodes as N

#: copy atoms executed synchronously by one thread (program order, no handle).  The gfx942
#: buffer loads are among them because the reference interpreter runs them as plain copies:
#: ``buffer.load`` (into registers) and ``buffer.load.lds`` (direct-to-LDS, the instruction
#: being asynchronous is the backend's business: its wait-count pass waits on ``vmcnt``
#: before the wave reads the bytes and before every ``s_barrier``, and its hazard checker
#: verifies that on the assembly).  Neither zero-fills in the IR (the atoms are not
#: asynchronous, see :mod:`argus.ir.lowering`): a masked-off element is not written.
SYNC_COPY_ATOMS = frozenset({"sync", "reg", "buffer.load", "buffer.load.lds"})


@dataclass(frozen=True)
class Access:
    """One view an op touches: ``kind`` is ``"read"``, ``"write"`` or ``"tag"`` (a tag-only
    touch: bounds-checked, but neither a data access nor part of a race)."""

    view: N.View
    role: str
    kind: str
    pred: Any = None
    checks_init: bool = False

    @property
    def buffer(self) -> N.Buffer:
        return self.view.buffer


@dataclass(frozen=True)
class Write:
    """A write of ``view``: ``data`` writes count for initialization; ``sources`` are the
    views whose tags flow into it (``()`` with ``record`` for a tag op, ``()`` for ⊥)."""

    view: N.View
    data: bool
    guard: tuple[Any, ...]  # predicates over the view coordinates (validity, copy predicate)
    sources: tuple[N.View, ...] = ()
    record: tuple[tuple[str, Any], ...] | None = None
    #: ``(source, predicate)`` of a zero-filling copy: where the source element is not valid in
    #: its view (outside the tensor) or the predicate is false, a known zero lands instead
    zero_fill: tuple[N.View, Any] | None = None


class Unsupported(Exception):
    """An op (or op shape) this verifier does not handle yet."""


def _valid(view: N.View) -> tuple[Any, ...]:
    return (view.valid,) if view.valid is not None else ()


def accesses(op: N.Op) -> list[Access]:
    """The accesses of ``op`` in the order the interpreter checks them."""
    found = _accesses(op)
    for acc in found:
        if acc.view.space is N.MemorySpace.DSMEM and not isinstance(op, N.MbarrierArrive):
            # a remote arrive on a peer's mbarrier is modelled by the cluster rounds of
            # :mod:`~argus.abstract_interp.mbarrier`; other peer accesses are not
            raise Unsupported(f"access to distributed shared memory (%{acc.buffer.name}) by {op.kind}")
    return found


def _accesses(op: N.Op) -> list[Access]:
    match op:
        case N.Copy(src=src, dst=dst, pred=pred, atom=atom):
            if atom not in SYNC_COPY_ATOMS:
                return _asynchronous(op)
            return [Access(src, "src", "read", pred, True), Access(dst, "dst", "write", pred)]
        case N.Fill(dst=dst):
            return [Access(dst, "dst", "write")]
        case N.Elementwise(dst=dst, srcs=srcs):
            out = [Access(dst, "dst", "write")]
            out += [Access(s, f"srcs[{i}]", "read", None, True) for i, s in enumerate(srcs) if isinstance(s, N.View)]
            return out
        case N.Convert(dst=dst, src=src):
            return [Access(dst, "dst", "write"), Access(src, "src", "read", None, True)]
        case N.ReadIndex(src=src):
            return [Access(src, "src", "read", None, True)]
        case N.Tag(view=view) | N.ResetTags(view=view):
            return [Access(view, "view", "tag")]
        case N.AssertBankConflicts(view=view):
            return [Access(view, "view", "tag")]
        case N.AssertTag(view=view, equal_to=other):
            return [Access(view, "view", "tag")] + ([Access(other, "equal_to", "tag")] if other is not None else [])
        case N.Alloc() | N.Barrier():
            return []
        case (N.MbarrierInit() | N.MbarrierArrive() | N.MbarrierWait() | N.Fence() | N.AsyncCommit()
              | N.AsyncWait() | N.SetMaxNReg() | N.ClusterBarrier()):
            return _asynchronous(op)
        case N.Reduce() | N.Shuffle() | N.Atomic():
            from argus.abstract_interp import collectives

            return collectives.accesses(op)
        case N.Mma():
            from argus.abstract_interp import mma

            return mma.accesses(op)
    raise Unsupported(f"operation {op.kind}")


def _asynchronous(op: N.Op) -> list[Access]:
    from argus.abstract_interp import asynchrony

    found = asynchrony.accesses(op)
    if found is None:
        raise Unsupported(f"copy atom {op.atom!r}" if isinstance(op, N.Copy) else f"operation {op.kind}")
    return found


def writes(op: N.Op) -> list[Write]:
    """What ``op`` writes (data and tags)."""
    match op:
        case N.Copy(atom=atom) if atom not in SYNC_COPY_ATOMS:
            from argus.abstract_interp import asynchrony

            return asynchrony.writes(op)
        case N.Copy(src=src, dst=dst, pred=pred):
            guard = (*_valid(src), *_valid(dst), *((pred,) if pred is not None else ()))
            return [Write(dst, True, guard, (src,))]
        case N.Fill(dst=dst, value=value, tail=tail) if tail is not None and value == 0:
            # the zero fill of a load's elements outside its tensor (``load(..., other=0)``):
            # known zeros standing for the tags of the source's elements, as the interpreter
            # writes them; the copy that follows overwrites the valid ones
            return [Write(dst, True, _valid(dst), zero_fill=(tail, None))]
        case N.Fill(dst=dst):
            return [Write(dst, True, _valid(dst))]
        case N.Elementwise(dst=dst, srcs=srcs):
            return [Write(dst, True, _valid(dst), tuple(s for s in srcs if isinstance(s, N.View)))]
        case N.Convert(dst=dst, src=src):
            return [Write(dst, True, _valid(dst), (src,))]
        case N.Tag(view=view, fields=fields):
            return [Write(view, False, _valid(view), (), tuple(fields))]
        case N.ResetTags(view=view):
            return [Write(view, False, _valid(view))]
        case N.Reduce() | N.Shuffle() | N.Atomic():
            from argus.abstract_interp import collectives

            return collectives.writes(op)
        case N.Mma():
            from argus.abstract_interp import mma

            return mma.writes(op)
    return []


def views_in(op: N.Op) -> list[N.View]:
    """Every view an op mentions, nested regions included (for ops the verifier cannot model:
    what they might touch)."""
    out: list[N.View] = []

    def visit(value: Any) -> None:
        if isinstance(value, N.View):
            out.append(value)
        elif isinstance(value, (tuple, list)):
            for v in value:
                visit(v)
        elif isinstance(value, N.Region):
            for o in value.ops:
                visit(o)
        elif isinstance(value, N.Op):
            for f in dataclasses.fields(value):
                visit(getattr(value, f.name))

    visit(op)
    return out
