"""Witnesses invert write address maps: checked exhaustively against the forward map."""

from __future__ import annotations

import itertools

import pytest
import sympy

from argus import symbolic
from argus.abstract_interp.witness import TARGET, NotInvertible, Variable, invert_address
from argus.layout_algebra import Layout

tid, c0, c1, k, b, n = sympy.symbols("tid c0 c1 k bid n", integer=True, nonnegative=True)


def _check_exhaustively(address, variables, params=None):
    """witness(address(d)) == d for every instance d of the (static) domain."""
    params = params or {}
    witness = invert_address(address, variables)
    ranges = [range(v.start, v.start + v.step * v.extent, v.step) for v in variables]
    for point in itertools.product(*ranges):
        env = {**dict(zip((v.symbol for v in variables), point)), **params}
        a = symbolic.evaluate(address, env)
        for v, value in zip(variables, point):
            got = symbolic.evaluate(witness[v.symbol], {**params, TARGET: a})
            assert got == value, (v.symbol, point, a, got)


def test_affine_thread_tile():
    _check_exhaustively(128 * b + tid + c0, [Variable(tid, 128), Variable(c0, 1)], {b: 3})


def test_hierarchical_layout_of_an_element():
    layout = Layout(((4, 8), 2), ((16, 1), 8))
    _check_exhaustively(layout((c0, c1)), [Variable(c0, 32), Variable(c1, 2)])


def test_thread_partition_with_floor_and_mod():
    # a 32-thread TV-style partition: lane % 4 picks the column pair, lane // 4 the row
    address = 8 * symbolic.floordiv(tid, 4) + 2 * symbolic.mod(tid, 4) + c0
    _check_exhaustively(address, [Variable(tid, 32), Variable(c0, 2)])


def test_loop_counter_with_start_and_step():
    _check_exhaustively(64 * k + tid, [Variable(tid, 64), Variable(k, 5, start=3, step=2)])


def test_symbolic_row_stride_is_peeled_largest_first():
    address = (n * c0 + c1) + 5 * n
    witness = invert_address(address, [Variable(c0, 4), Variable(c1, 8)])
    for size in (8, 9, 13):
        for i, j in itertools.product(range(4), range(8)):
            a = size * (i + 5) + j
            assert symbolic.evaluate(witness[c0], {TARGET: a, n: size}) == i
            assert symbolic.evaluate(witness[c1], {TARGET: a, n: size}) == j


def test_pinned_variables_come_from_the_guard():
    witness = invert_address(c0, [Variable(tid, 64), Variable(c0, 8)], pinned={tid: 0})
    assert witness[tid] == 0 and witness[c0] == symbolic.mod(TARGET, 8)


@pytest.mark.parametrize("address", [
    symbolic.mod(tid + 1, 64),          # a rotation is not a layout of digits
    tid * c0,                           # a product of two instance variables
    symbolic.floordiv(tid, 3) + symbolic.mod(tid, 4),  # breakpoints 3 and 4 do not nest
])
def test_shapes_without_a_witness_are_refused(address):
    with pytest.raises(NotInvertible):
        invert_address(address, [Variable(tid, 64), Variable(c0, 4)])


def test_overlapping_modes_are_refused():
    with pytest.raises(NotInvertible):
        invert_address(tid + c0, [Variable(tid, 64), Variable(c0, 4)])
