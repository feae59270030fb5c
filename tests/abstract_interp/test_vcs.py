"""VC generation: which properties each op yields, with provenance; unsupported ops stay unknown."""

import dataclasses
import inspect
import sys
from collections import Counter
from pathlib import Path

from argus.abstract_interp import PROPERTIES, generate_vcs
from argus.ir import nodes as N

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "ir"))
sys.path.insert(0, str(ROOT / "tests" / "proofs"))
import interp_kernels as K  # noqa: E402
import vector_add as VA  # noqa: E402
import verifier_kernels as V  # noqa: E402


def _line(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_vector_add_vcs_cover_every_access_with_provenance():
    _, vcs = generate_vcs(VA.vector_add.specialize())
    assert {vc.property for vc in vcs} <= set(PROPERTIES)
    counts = Counter(vc.property for vc in vcs)
    assert counts["tag"] == 2 and counts["write-conflict"] == 1 and counts["uninitialized"] == 3
    assert all(vc.position is not None and vc.position.file.endswith("vector_add.py") for vc in vcs)
    tags = [vc for vc in vcs if vc.property == "tag"]
    assert [vc.position.line for vc in tags] == [_line(VA.vector_add, "A.assert_tag(s"),
                                                 _line(VA.vector_add, "A.assert_tag(out")]
    for vc in vcs:
        if vc.property != "witness":
            assert vc.roles["thread"].name == "tid" and vc.roles["block"][0].name == "bid_x"
    assert all(vc.exact for vc in vcs)


def test_reads_rely_on_the_witnesses_of_their_writers():
    analysis, vcs = generate_vcs(VA.vector_add.specialize())
    lemmas = {vc.site.index for vc in vcs if vc.property == "witness"}
    used = set().union(*(vc.lemmas for vc in vcs))
    assert used == lemmas
    final = next(vc for vc in vcs if vc.property == "tag" and vc.position.line == _line(VA.vector_add, "A.assert_tag(out"))
    kinds = {analysis.program.sites[i].op.kind for i in final.lemmas}
    assert kinds == {"Tag", "Copy", "Fill", "Elementwise"}


def test_block_uniform_barriers_are_proved_structurally():
    _, vcs = generate_vcs(K.rotate_through_shared.specialize())
    barrier = next(vc for vc in vcs if vc.property == "barrier")
    assert barrier.structural and "uniform" in barrier.structural
    _, vcs = generate_vcs(K.warp_zero_barrier.specialize())
    barrier = next(vc for vc in vcs if vc.property == "barrier")
    assert barrier.structural is None and barrier.roles["other_thread"].name == "tid'"


def test_barriers_separate_accesses_into_epochs():
    _, synced = generate_vcs(K.rotate_through_shared.specialize())
    _, racy = generate_vcs(K.rotate_through_shared.specialize(SYNC=False))
    line = _line(K.rotate_through_shared, "A.copy(s.tile((1,), ((t + 1) % 64,))")
    assert not [vc for vc in synced if vc.property == "race" and vc.position.line == line
                and vc.roles["access"].buffer.space is N.MemorySpace.SHARED]
    racy_vc = next(vc for vc in racy if vc.property == "race" and vc.position.line == line
                   and vc.roles["access"].buffer.space is N.MemorySpace.SHARED)
    assert len(racy_vc.roles["alternatives"]) == 1


def test_asynchronous_copies_are_modelled_and_their_reads_ordered_by_async_vcs():
    _, vcs = generate_vcs(V.async_copy.specialize())
    assert not [vc for vc in vcs if vc.unknown]
    read = _line(V.async_copy, "A.copy(s.tile((1,), (A.thread_id(),)), y.tile(")
    assert [vc for vc in vcs if vc.property == "async" and vc.position.line == read]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scramble(N.Op):
    """An op kind no table of the verifier knows."""

    dst: N.View


def test_unknown_op_kinds_are_never_silently_accepted():
    base = K.tiled_copy.specialize()
    copy = next(op for op in base.body.ops if isinstance(op, N.Copy))
    kernel = N.Kernel(base.name, base.params, base.consts, base.launch, base.assumptions,
                      N.Region((*base.body.ops, Scramble(dst=copy.dst, loc=copy.loc))), base.loc)
    _, vcs = generate_vcs(kernel)
    unknown = [vc for vc in vcs if vc.unknown]
    assert len(unknown) == 1 and unknown[0].unknown.startswith("unsupported operation Scramble at ")


def test_reused_registers_in_loops_resolve_to_the_latest_iteration():
    analysis, vcs = generate_vcs(V.grid_stride_copy.specialize())
    assert not [vc for vc in vcs if vc.unknown]
    copies = [w for ws in analysis.writers.values() for w in ws if w.site.loops and
              w.view.buffer.space is N.MemorySpace.REGISTER]
    assert copies and all(analysis.witness(w).latest for w in copies)


def test_alternating_stages_need_an_invariant_and_say_so():
    analysis, _ = generate_vcs(V.double_buffered.specialize())
    shared = next(w for ws in analysis.writers.values() for w in ws if w.view.buffer.space is N.MemorySpace.SHARED)
    assert not analysis.witness(shared).latest  # the address depends on k % 2
