"""Coverage in the reference interpreter: each k of an MMA chain's reduction reaches each
accumulator element exactly once (a key twice is reported at the MMA, a key never reached
where the sum leaves the chain).  Tags cannot see these bugs: every wrong kernel here still
gives ``c[i, j]`` the tag ``(i, j)``."""

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy

sys.path.insert(0, str(Path(__file__).parent))
from coverage_kernels import k_loop, partial_rows, split_k

from argus.ir import nodes as N
from argus.ir.interp_mma import reduction_domain
from argus.ir.interpreter import Interpreter, InterpreterError

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str, kernel: str):
    return runpy.run_path(str(ROOT / "examples" / name))[kernel]


def _line(kernel, text: str) -> int:
    """The first line at or after the kernel's definition that contains ``text``."""
    path = Path(kernel.position.file)
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                if i >= kernel.position.line and text in line)


def _inputs(m: int, n: int, k: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)  # small integers: every product and sum is exact in bf16 / f32
    a = rng.integers(-3, 4, (m, k)).astype(np.float32)
    b = rng.integers(-3, 4, (n, k)).astype(np.float32)
    return {"a": a, "b": b, "c": np.zeros((m, n), np.float32)}


def _violation(kernel, inputs: dict, sizes: dict):
    with pytest.raises(InterpreterError) as err:
        Interpreter(kernel).run(inputs, sizes)
    return err.value.violation


# --------------------------------------------------------------------------- the GEMM examples


EXAMPLES = [("gemm_mma_sync.py", "gemm", "A.mma(ATOM, fa, fb, acc[mi, ni])", "A.store(acc[mi, ni]"),
            ("gemm_mfma.py", "gemm_mfma", "A.mma(ATOM, fa, fb, acc)", "A.store(acc, "),
            ("gemm_cp_async.py", "gemm_cp_async", "A.mma(ATOM, fa, fb, acc[mi, ni])", "A.store(acc[mi, ni]")]


@pytest.mark.parametrize("file, name, mma_line, store_line", EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_a_skipped_k_block_is_reported_where_the_sum_is_stored(file, name, mma_line, store_line):
    kernel = _example(file, name)
    inputs = _inputs(64, 64, 96)
    out = Interpreter(kernel.specialize()).run(dict(inputs), {"M": 64, "N": 64, "K": 96})["c"]
    np.testing.assert_array_equal(out, inputs["a"] @ inputs["b"].T)
    v = _violation(kernel.specialize(KBLOCK_BUG="skip"), inputs, {"M": 64, "N": 64, "K": 96})
    assert v.kind == "coverage" and v.position.line == _line(kernel, store_line), v
    assert "k 64..95 never reached" in v.message and "0..95" in v.message, v.message
    assert v.block == (0, 0, 0) and v.thread == 0 and v.element == (0, 0)


@pytest.mark.parametrize("file, name, mma_line, store_line", EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_a_repeated_k_block_is_reported_at_the_mma(file, name, mma_line, store_line):
    kernel = _example(file, name)
    v = _violation(kernel.specialize(KBLOCK_BUG="repeat"), _inputs(64, 64, 64), {"M": 64, "N": 64, "K": 64})
    assert v.kind == "coverage" and v.position.line == _line(kernel, mma_line), v
    assert "k = 0 reaches this accumulator element a second time" in v.message, v.message
    assert v.thread == 0 and v.element == (0, 0)


def test_the_reduction_domain_comes_from_the_tag_of_the_operand_source():
    kernel = _example("gemm_mma_sync.py", "gemm").specialize()
    mma = next(op for op in N.walk(kernel.body) if isinstance(op, N.Mma))
    domain = reduction_domain(kernel, mma)
    assert (domain.tensor, domain.field, domain.dim, domain.offset) == ("a", 1, 1, 0)
    assert domain.extent == sympy.Symbol("K", integer=True, positive=True) or str(domain.extent) == "K"
    assert domain.bounds({s: 96 for s in domain.extent.free_symbols}) == (0, 96)


# --------------------------------------------------------------------------- one warp over K


SIZES = {"K": 64}


def _run(**consts):
    inputs = _inputs(16, 8, 64)
    return Interpreter(k_loop.specialize(**consts)).run(inputs, SIZES)["c"], inputs


@pytest.mark.parametrize("consts", [{}, {"RESCALE": True}, {"COMPUTED_A": True}],
                         ids=["plain", "rescaled", "computed-operand"])
def test_each_k_once_runs_clean(consts):
    out, inputs = _run(**consts)
    np.testing.assert_array_equal(out, inputs["a"] @ inputs["b"].T)


@pytest.mark.parametrize("consts", [{"STEPS": "twice"}, {"STEPS": "twice", "RESCALE": True},
                                    {"STEPS": "twice", "COMPUTED_A": True}],
                         ids=["plain", "rescaled", "computed-operand"])
def test_k_counted_twice_is_reported_at_the_mma(consts):
    v = _violation(k_loop.specialize(**consts), _inputs(16, 8, 64), SIZES)
    assert v.kind == "coverage" and v.position.line == _line(k_loop, "A.mma(ATOM, fa, fb, acc)"), v
    assert "k = 0 reaches this accumulator element a second time" in v.message


@pytest.mark.parametrize("consts, missing", [({"STEPS": "half"}, "k 32..63"),
                                             ({"STEPS": "half", "RESCALE": True}, "k 32..63"),
                                             ({"RESET": True}, "k 0..47")],
                         ids=["skipped", "skipped-rescaled", "reset-inside-the-loop"])
def test_k_never_reached_is_reported_where_the_sum_leaves_the_chain(consts, missing):
    v = _violation(k_loop.specialize(**consts), _inputs(16, 8, 64), SIZES)
    assert v.kind == "coverage" and v.position.line == _line(k_loop, "A.store(acc, A.mma_partition"), v
    assert f"{missing} never reached" in v.message, v.message


def test_without_a_derivable_domain_only_duplicates_are_checked():
    """A computed A operand: the domain of k is not derived, so a skipped half is not
    reported (the tag of c is (i, j) all the same) — the documented limit."""
    kernel = k_loop.specialize(STEPS="half", COMPUTED_A=True)
    mma = next(op for op in N.walk(kernel.body) if isinstance(op, N.Mma))
    assert reduction_domain(kernel, mma) is None
    Interpreter(kernel).run(_inputs(16, 8, 64), SIZES)


def test_partial_sums_of_disjoint_slices_add_up_to_the_whole_reduction():
    inputs = _inputs(16, 8, 64)
    out = Interpreter(split_k.specialize()).run(dict(inputs), SIZES)["c"]
    np.testing.assert_array_equal(out, inputs["a"] @ inputs["b"].T)
    v = _violation(split_k.specialize(OVERLAP=True), inputs, SIZES)
    assert v.kind == "coverage" and v.position.line == _line(split_k, "A.store(low + high"), v
    assert "both hold k 0..31" in v.message, v.message


def test_rows_past_m_are_zero_padding_of_every_k():
    """A row of A past M is zero-filled (a known zero standing for each k of the row): its
    products are the padding of those k, so the whole accumulator leaves the chain complete."""
    inputs = _inputs(10, 8, 48)
    out = Interpreter(partial_rows.specialize()).run(dict(inputs), {"M": 10, "K": 48})["c"]
    np.testing.assert_array_equal(out, inputs["a"] @ inputs["b"].T)
    v = _violation(partial_rows.specialize(STEPS="half"), inputs, {"M": 10, "K": 48})
    assert v.kind == "coverage" and "k 16..47 never reached" in v.message, v
