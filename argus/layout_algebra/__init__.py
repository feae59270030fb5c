"""The CuTe layout algebra over ints and sympy size symbols.

A :class:`Layout` is a function from coordinates to offsets (``shape:stride``).  The algebra
(composition, complement, inverses, divides, products) builds tilings and thread partitions out
of layouts; every operation states its post-condition and checks its preconditions, handing
those it cannot decide to the verifier as :class:`SideCondition` objects.
"""

from argus.layout_algebra.conditions import (
    LayoutError,
    SideCondition,
    collect_side_conditions,
)
from argus.layout_algebra.int_tuple import (
    compatible,
    congruent,
    crd2idx,
    idx2crd,
    inner_product,
    prefix_product,
    product,
    product_each,
    shape_div,
)
from argus.layout_algebra.layout import (
    Layout,
    coalesce,
    cosize,
    depth,
    filter,
    flatten,
    make_layout,
    rank,
    size,
)

__all__ = [
    "Layout",
    "LayoutError",
    "SideCondition",
    "coalesce",
    "collect_side_conditions",
    "compatible",
    "congruent",
    "cosize",
    "crd2idx",
    "depth",
    "filter",
    "flatten",
    "idx2crd",
    "inner_product",
    "make_layout",
    "prefix_product",
    "product",
    "product_each",
    "rank",
    "shape_div",
    "size",
]
