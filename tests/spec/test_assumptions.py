"""Declared assumptions: recorded in the IR, checked by the interpreter on concrete inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import sympy

import argus.spec as A
from argus.errors import ArgusError
from argus.ir.interpreter import Interpreter

sys.path.insert(0, str(Path(__file__).parent))
import assumption_kernels as K


def test_assumptions_are_recorded_with_kinds():
    k = K.gather_rows.specialize()
    kinds = [a.kind for a in k.assumptions]
    assert kinds == ["predicate", "ids_in_range", "aligned"]
    n = next(p.symbol for p in k.params if p.name == "n")
    assert k.assumptions[0].predicate == sympy.Eq(sympy.Mod(n, 4), 0)
    assert k.assumptions[1].tensors == ("ids",)
    assert A.kernel_hash(k) != A.kernel_hash(K.segments.specialize())


def test_inputs_satisfying_the_assumptions_run():
    ids = np.array([3, 0, 1, 2, 2, 1, 0, 3], np.int32)
    out = Interpreter(K.gather_rows.specialize()).run({"ids": ids, "out": np.zeros(8, np.int32)}, {"n": 8, "E": 4})
    np.testing.assert_array_equal(out["out"], ids)


def test_an_id_out_of_range_is_refused():
    ids = np.array([3, 0, 1, 7, 2, 1, 0, 3], np.int32)
    with pytest.raises(ArgusError, match=r"ids_in_range.*element 3 is 7, outside \[0, 4\)"):
        Interpreter(K.gather_rows.specialize()).run({"ids": ids, "out": np.zeros(8, np.int32)}, {"n": 8, "E": 4})


def test_a_size_predicate_is_refused():
    ids = np.zeros(6, np.int32)
    with pytest.raises(ArgusError, match="does not hold"):
        Interpreter(K.gather_rows.specialize()).run({"ids": ids, "out": np.zeros(6, np.int32)}, {"n": 6, "E": 4})


def test_python_equality_in_assumptions_gets_a_hint():
    @A.kernel(threads=32, assume=lambda n: [n % 4 == 0])
    def k(x: A.Global(A.f32, "n")):
        pass

    with pytest.raises(A.SpecError, match="statically false") as err:
        k.specialize()
    assert "A.eq" in str(err.value)


def test_monotone_offsets():
    k = K.segments.specialize()
    good = np.array([0, 2, 2, 5, 9, 9, 10, 12], np.int32)
    Interpreter(k).run({"offsets": good, "out": np.zeros(8, np.int32)}, {"S": 8})
    bad = good.copy()
    bad[4] = 4
    with pytest.raises(ArgusError, match=r"monotone\(offsets\) element 4"):
        Interpreter(k).run({"offsets": bad, "out": np.zeros(8, np.int32)}, {"S": 8})
