"""Control flow of an emitted body: basic blocks, successors and loops.

A body is a list of :class:`~argus.backend_amdgcn.isa.Inst` and ``Label`` items.  A block
starts at a label or after a branch and ends at a branch, ``s_endpgm`` or before the next
label.  ``s_branch L`` has the single successor ``L``; ``s_cbranch_* L`` has ``L`` and the
fall-through; ``s_endpgm`` has none.  A *loop* is a branch to a label at or before it (the
emitter produces structured code only, so every cycle has this form).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argus.backend_amdgcn.isa import Inst, Item, Label, LabelRef

__all__ = ["Block", "blocks", "branch_target", "loops"]


@dataclass
class Block:
    """Items ``start .. end-1`` of the body; ``succs`` are block indices."""

    start: int
    end: int
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)


def branch_target(inst: Inst) -> str | None:
    """The label a branch jumps to (``None`` for other instructions)."""
    if inst.opcode.startswith(("s_branch", "s_cbranch_")):
        for op in inst.operands:
            if isinstance(op, LabelRef):
                return op.name
            if isinstance(op, str):
                return op
    return None


def blocks(items: list[Item]) -> list[Block]:
    """The basic blocks of a body in program order, with successors and predecessors."""
    starts = {0}
    for i, item in enumerate(items):
        if isinstance(item, Label):
            starts.add(i)
        elif isinstance(item, Inst) and (branch_target(item) is not None or item.opcode == "s_endpgm"):
            starts.add(i + 1)
    ordered = sorted(s for s in starts if s < len(items))
    out = [Block(s, e) for s, e in zip(ordered, [*ordered[1:], len(items)])]
    label_block = {}
    for b, block in enumerate(out):
        if isinstance(items[block.start], Label):
            label_block[items[block.start].name] = b
    for b, block in enumerate(out):
        last = items[block.end - 1] if block.end > block.start else None
        target = branch_target(last) if isinstance(last, Inst) else None
        falls = not (isinstance(last, Inst) and (last.opcode in ("s_branch", "s_endpgm")))
        if target is not None:
            if target not in label_block:
                raise ValueError(f"branch to undefined label {target}")
            block.succs.append(label_block[target])
        if falls and b + 1 < len(out):
            block.succs.append(b + 1)
    for b, block in enumerate(out):
        for s in block.succs:
            out[s].preds.append(b)
    return out


def loops(items: list[Item]) -> list[tuple[int, int]]:
    """``(label position, branch position)`` of every backward branch, innermost first."""
    where = {item.name: i for i, item in enumerate(items) if isinstance(item, Label)}
    found = []
    for j, item in enumerate(items):
        if isinstance(item, Inst):
            target = branch_target(item)
            if target is not None and target in where and where[target] <= j:
                found.append((where[target], j))
    return sorted(found, key=lambda loop: loop[1] - loop[0])
