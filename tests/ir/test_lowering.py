"""The target-independent lowering (argus.ir.lowering).

Oracles: exhaustive evaluation over small domains for the expression facts (intervals,
divisors, simplification, truncating division), and the IR's own per-element semantics
(``swizzle(offset + layout(c))`` under ``valid ∧ pred``) for every transfer of every example.
"""

from __future__ import annotations

import importlib
import itertools
import random
import sys
from pathlib import Path

import pytest
import sympy
from sympy import Eq

import argus.spec as A
from argus import symbolic
from argus.ir import nodes as N
from argus.ir.lowering import (
    Branch,
    CopyStmt,
    Facts,
    Loop,
    LoweringError,
    MemoryRun,
    MmaStmt,
    Reg,
    TensorCopy,
    lower_kernel,
)
from argus.ir.uniformity import Uniformity
from argus.spec.kernel import Kernel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

NVIDIA_EXAMPLES = ["vector_add", "transpose_swizzled", "row_softmax", "gemm_mma_sync", "gemm_cp_async",
                   "gemm_tma_wgmma", "gemm_warp_specialized"]

x, y = sympy.symbols("x y", integer=True)


def _kernel(module_name: str) -> N.Kernel:
    module = importlib.import_module(module_name)
    (k,) = [v for v in vars(module).values() if isinstance(v, Kernel)]
    return k.specialize()


# --------------------------------------------------------------------------- facts


EXPRESSIONS = [
    symbolic.FloorDiv(x, 4),
    sympy.Mod(x, 8),
    sympy.Mod(symbolic.FloorDiv(sympy.Mod(x, 32), 4), 8),
    symbolic.FloorDiv(x - 5, 3),
    sympy.Mod(x - 7, 5),
    sympy.Mod(sympy.Mod(x, 32), 8),
    3 * symbolic.FloorDiv(x + 2 * y, 4) - y,
    symbolic.xor(x, symbolic.shr(symbolic.bit_and(x, 0b111000), 3)),
    sympy.floor(x / 16) + sympy.floor((y + 1) / 2),
]


@pytest.mark.parametrize("expr", EXPRESSIONS, ids=str)
@pytest.mark.parametrize("x_range", [(0, 63), (-9, 9)])
def test_facts_are_exact_on_a_small_domain(expr, x_range):
    """interval() bounds every value, simplify() and truncating() keep every value."""
    facts = Facts(ranges={x: x_range, y: (0, 5)})
    lo, hi = facts.interval(facts.simplify(expr))
    simplified = facts.simplify(expr)
    lowered = facts.truncating(simplified)
    for xv, yv in itertools.product(range(x_range[0], x_range[1] + 1), range(6)):
        env = {x: xv, y: yv}
        value = symbolic.evaluate(expr.xreplace({x: sympy.Integer(xv), y: sympy.Integer(yv)}))
        assert symbolic.evaluate(simplified.xreplace({k: sympy.Integer(v) for k, v in env.items()})) == value
        assert symbolic.evaluate(lowered.xreplace({k: sympy.Integer(v) for k, v in env.items()})) == value
        assert lo is None or lo <= value
        assert hi is None or value <= hi


def test_truncating_forms_only_where_the_dividend_is_non_negative():
    facts = Facts(ranges={x: (0, 127), y: (-4, 4)})
    assert facts.truncating(symbolic.FloorDiv(x, 32)) == symbolic.TruncDiv(x, 32)
    assert facts.truncating(sympy.Mod(x, 32)) == symbolic.TruncMod(x, 32)
    assert facts.truncating(symbolic.FloorDiv(y, 2)) == symbolic.FloorDiv(y, 2)
    assert facts.truncating(sympy.Mod(y, 3)) == sympy.Mod(y, 3)


def test_range_decided_mods_and_divisions_disappear():
    facts = Facts(ranges={x: (0, 31)})
    assert facts.simplify(sympy.Mod(x, 32)) == x
    assert facts.simplify(symbolic.FloorDiv(x, 32)) == 0
    assert facts.simplify(sympy.Mod(x + 32, 32)) == x
    assert facts.simplify_predicate(sympy.And(x < 32, x + 5 < y)) == (x + 5 < y)
    assert facts.simplify_predicate(x >= 32) is sympy.false


@pytest.mark.parametrize("expr,divisor", [
    (16 * x + 32 * y, 16), (x * y, 1), (sympy.Integer(0), 0), (64 * sympy.Mod(x, 4) + 8, 8),
])
def test_divisor_divides_every_value(expr, divisor):
    facts = Facts(ranges={x: (0, 40), y: (0, 40)})
    assert facts.divisor(expr) == divisor
    if divisor:
        for xv, yv in itertools.product(range(0, 41, 3), range(0, 41, 5)):
            assert symbolic.evaluate(expr.xreplace({x: xv, y: yv})) % divisor == 0


def test_assumptions_give_divisors_and_lower_bounds():
    lowered = lower_kernel(_kernel("gemm_mma_sync"))
    K = next(s for s in lowered.sizes if s.name == "K")
    assert lowered.facts.divisors[K] == 32
    assert lowered.facts.ranges[K][0] == 32


# --------------------------------------------------------------------------- accesses


@A.kernel(threads=32, grid=lambda n: (A.cdiv(n, 128),))
def _quad_copy(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n")):
    v = A.load(x.tile((128,), (A.block_id(0),)).tile((4,), (A.thread_id(),)))
    A.store(v, y.tile((128,), (A.block_id(0),)).tile((4,), (A.thread_id(),)))


@A.kernel(threads=32, grid=lambda n: (A.cdiv(n, 128),), assume=lambda n: [Eq(n % 4, 0)])
def _quad_copy_divisible(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n")):
    v = A.load(x.tile((128,), (A.block_id(0),)).tile((4,), (A.thread_id(),)))
    A.store(v, y.tile((128,), (A.block_id(0),)).tile((4,), (A.thread_id(),)))


def _copies(lowered):
    return [s for s in lowered.walk() if isinstance(s, CopyStmt)]


def test_a_tail_mask_splits_a_vector_unless_the_bound_is_a_multiple_of_its_width():
    ragged = _copies(lower_kernel(_quad_copy.specialize()))
    divisible = _copies(lower_kernel(_quad_copy_divisible.specialize()))
    assert [len(c.transfers) for c in ragged] == [4, 4]
    assert all(t.width == 1 for c in ragged for t in c.transfers)
    assert [len(c.transfers) for c in divisible] == [1, 1]
    (load, _store) = divisible
    run = load.transfers[0].src
    assert isinstance(run, MemoryRun) and run.width == 4 and run.alignment == 16
    assert load.transfers[0].dst == tuple(Reg(load.transfers[0].dst[0].buffer, i) for i in range(4))


def test_vector_add_predicate_is_simplified_by_the_thread_range():
    (load_a, _load_b, store) = _copies(lower_kernel(_kernel("vector_add")))
    (t,) = load_a.transfers
    n = sympy.Symbol("n", integer=True, nonnegative=True)
    assert str(t.predicate) == "128*bid_x + tid < n"
    assert t.src.width == 1 and t.src.address == 128 * N.BLOCK_IDS[0] + N.THREAD_ID
    assert n.name in str(store.transfers[0].predicate)


def test_row_softmax_moves_16_byte_vectors():
    copies = _copies(lower_kernel(_kernel("row_softmax")))
    for c in copies:
        (t,) = c.transfers
        assert t.width == 4
        memory = t.src if isinstance(t.src, MemoryRun) else t.dst
        assert memory.alignment == 16


def test_cp_async_16_moves_exactly_16_bytes_with_a_zero_fill_predicate():
    for c in _copies(lower_kernel(_kernel("gemm_cp_async"))):
        if c.atom != "cp.async.16":
            continue
        for t in c.transfers:
            assert t.src.nbytes == 16 and t.dst.nbytes == 16
            assert t.src.alignment == 16 and t.dst.alignment == 16
            assert t.source_predicate is not None


def test_register_fragment_indexed_at_run_time_is_refused():
    import dataclasses

    kernel = _kernel("vector_add")
    ops = list(kernel.body.ops)
    i = next(i for i, op in enumerate(ops) if isinstance(op, N.Copy))
    bad = dataclasses.replace(ops[i], dst=dataclasses.replace(ops[i].dst, offset=N.THREAD_ID))
    ops[i] = bad
    with pytest.raises(LoweringError, match="run-time value"):
        lower_kernel(dataclasses.replace(kernel, body=N.Region(tuple(ops))))


# --------------------------------------------------------------------------- per-element oracle


def _environments(kernel: N.Kernel, lowered, count: int = 6):
    """Random concrete environments (sizes satisfying the assumptions, ids in range)."""
    rng = random.Random(7)
    sizes = list(lowered.sizes)
    for _ in range(count * 20):
        env = {}
        for s in sizes:
            g = lowered.facts.divisors.get(s, 1)
            lo = lowered.facts.ranges.get(s, (0, None))[0] or 0
            env[s] = max(lo, g * rng.randint(1, 6) + (0 if g > 1 else rng.randint(0, 40)))
        if not all(bool(a.predicate.xreplace({k: sympy.Integer(v) for k, v in env.items()}))
                   for a in kernel.assumptions if a.kind == "predicate" and isinstance(a.predicate, sympy.Basic)):
            continue
        env[kernel.thread_id] = rng.randrange(kernel.launch.threads)
        for _d, b in enumerate(kernel.block_ids):
            env[b] = rng.randint(0, 3)
        for stmt in lowered.walk():
            if isinstance(stmt, Loop):
                env[stmt.var] = rng.randint(0, 2)
        yield env
        count -= 1
        if count == 0:
            return


def _value(expr, env):
    if isinstance(expr, (bool, int)):
        return expr
    if expr is sympy.true or expr is sympy.false:
        return bool(expr)
    value = expr.xreplace({k: sympy.Integer(v) for k, v in env.items()})
    if isinstance(value, sympy.Integer):
        return int(value)
    if value in (sympy.true, sympy.false):
        return bool(value)
    return symbolic.evaluate(value) if not value.is_Boolean else bool(sympy.simplify(value))


def _reference_elements(op: N.Copy, view: N.View, pred, env):
    """(address, exists) of every element of ``view`` by the IR's definition."""
    from argus.ir.lowering import _coords, _shape

    out = []
    for coord in _coords(_shape(view.layout)):
        subs = {s: sympy.Integer(c) for s, c in zip(view.coord_symbols, coord)}
        linear = sympy.sympify(view.offset) + sympy.sympify(view.layout(coord if len(coord) != 1 else coord[0]))
        address = view.swizzle(linear) if view.swizzle is not None else linear
        ok = True
        for p in (view.valid, pred):
            if p is not None:
                ok = ok and _value(p.xreplace(subs), env)
        out.append((_value(address, env), ok))
    return out


@pytest.mark.parametrize("module_name", NVIDIA_EXAMPLES)
def test_transfers_move_exactly_the_elements_the_ir_defines(module_name):
    kernel = _kernel(module_name)
    lowered = lower_kernel(kernel)
    copies = [s for s in lowered.walk() if isinstance(s, CopyStmt)]
    assert copies or module_name in ("gemm_tma_wgmma", "gemm_warp_specialized")
    for env in _environments(kernel, lowered):
        for stmt in copies:
            op = stmt.op
            zero_fill = stmt.atom.startswith("cp.async")
            for side, view, pred in (("src", op.src, op.pred), ("dst", op.dst, None if zero_fill else op.pred)):
                if view.space is N.MemorySpace.REGISTER:
                    continue
                reference = _reference_elements(op, view, pred, env)
                seen = {}
                for t in stmt.transfers:
                    run = getattr(t, side)
                    guard = _value(t.predicate, env)
                    if side == "src" and zero_fill:
                        guard = guard and _value(t.source_predicate, env)
                    base = _value(run.address, env)
                    assert base * run.dtype.itemsize % run.alignment == 0, "alignment is not what was proved"
                    for j, element in enumerate(run.elements):
                        seen[element] = (base + j, guard)
                for i, (address, ok) in enumerate(reference):
                    if ok:
                        assert seen.get(i, (None, False)) == (address, True), (stmt.loc, side, i, env)
                    else:
                        assert i not in seen or not seen[i][1], (stmt.loc, side, i, env)


# --------------------------------------------------------------------------- structure


def test_elected_operations_share_one_branch_and_tma_copies_name_their_tensor_maps():
    lowered = lower_kernel(_kernel("gemm_tma_wgmma"))
    elected = [s for s in lowered.walk() if isinstance(s, Branch) and s.kind == "elected"]
    assert elected and all(s.cond == sympy.Eq(N.THREAD_ID, 0) for s in elected)
    tma = [s for s in lowered.walk() if isinstance(s, TensorCopy)]
    assert {lowered.tensor_maps[t.tensor_map].param for t in tma} == {"a", "b"}
    assert all(lowered.tensor_maps[t.tensor_map].box == (64, 64) for t in tma)
    assert all(t.nbytes == 8192 for t in tma)
    # every TMA copy sits inside an elected branch
    inside = {id(s) for b in elected for s in b.then}
    assert all(id(t) in inside for t in tma)
    smem = {a.buffer.name: a for a in lowered.shared}
    assert smem["smem0"].offset % 1024 == 0 and smem["smem1"].offset % 1024 == 0


def test_wgmma_operands_carry_descriptors_and_accumulators_in_value_order():
    lowered = lower_kernel(_kernel("gemm_tma_wgmma"))
    mma = next(s for s in lowered.walk() if isinstance(s, MmaStmt))
    assert mma.a.descriptor.mode.name == "B128" and mma.a.descriptor.stride_byte_offset == 1024
    assert [r.index for r in mma.d] == list(range(32))  # (2,2,8):(1,2,4) is the identity in value order


def test_warp_roles_are_warp_uniform_branches():
    lowered = lower_kernel(_kernel("gemm_warp_specialized"))
    roles = [s for s in lowered.walk() if isinstance(s, Branch) and s.kind == "warp_role"]
    assert [r.registers for r in roles] == [40, 232]
    assert all(r.uniformity is Uniformity.WARP for r in roles)


def test_tags_are_erased():
    lowered = lower_kernel(_kernel("transpose_swizzled"))
    assert not any(isinstance(s.op, (N.Tag, N.AssertTag)) for s in lowered.walk())
