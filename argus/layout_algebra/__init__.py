"""The CuTe layout algebra over ints and sympy size symbols.

A :class:`Layout` is a function from coordinates to offsets (``shape:stride``).  The algebra
(composition, complement, inverses, divides, products) builds tilings and thread partitions out
of layouts; every operation states its post-condition and checks its preconditions, handing
those it cannot decide to the verifier as :class:`SideCondition` objects.
"""

from argus.layout_algebra.algebra import (
    Tiler,
    blocked_product,
    complement,
    composition,
    flat_divide,
    flat_product,
    left_inverse,
    logical_divide,
    logical_product,
    raked_product,
    right_inverse,
    tiled_divide,
    tiled_product,
    zipped_divide,
    zipped_product,
)
from argus.layout_algebra.conditions import (
    Fact,
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
from argus.layout_algebra.tiling import (
    ModeCoordinate,
    ThreadValueLayout,
    Tile,
    local_partition,
    local_tile,
    make_layout_tv,
)

__all__ = [
    "Fact",
    "Layout",
    "LayoutError",
    "ModeCoordinate",
    "SideCondition",
    "ThreadValueLayout",
    "Tile",
    "Tiler",
    "blocked_product",
    "coalesce",
    "collect_side_conditions",
    "compatible",
    "complement",
    "composition",
    "congruent",
    "cosize",
    "crd2idx",
    "depth",
    "filter",
    "flat_divide",
    "flat_product",
    "flatten",
    "idx2crd",
    "inner_product",
    "left_inverse",
    "local_partition",
    "local_tile",
    "logical_divide",
    "logical_product",
    "make_layout",
    "make_layout_tv",
    "prefix_product",
    "product",
    "product_each",
    "raked_product",
    "rank",
    "right_inverse",
    "shape_div",
    "size",
    "tiled_divide",
    "tiled_product",
    "zipped_divide",
    "zipped_product",
]

# ---------------------------------------------------------------------------------------------
# Swizzles, ComposedLayout, atom TV layouts, Hopper descriptors and inverses of composed layouts
# (swizzle.py, atoms.py, hopper.py, inverse.py) re-export below this line: append only.
# ---------------------------------------------------------------------------------------------

from argus.layout_algebra.atoms import (
    MatrixCopyAtom,
    MmaAtom,
    atom_names,
    atom_tv_layouts,
    ldmatrix_atom,
    mfma_atom,
    mma_sync_m16n8k16,
    stmatrix_atom,
    wgmma_m64nNk16,
)
from argus.layout_algebra.swizzle import (
    SWIZZLE_32B,
    SWIZZLE_64B,
    SWIZZLE_128B,
    SWIZZLE_NONE,
    ComposedLayout,
    Swizzle,
    bank_conflict_degree,
    evaluate_all,
    hopper_swizzle,
    image,
    is_bijective_onto,
    is_injective,
    lds_swizzle,
    lds_tile_layout,
)

__all__ += [
    "SWIZZLE_32B",
    "SWIZZLE_64B",
    "SWIZZLE_128B",
    "SWIZZLE_NONE",
    "ComposedLayout",
    "MatrixCopyAtom",
    "MmaAtom",
    "Swizzle",
    "atom_names",
    "atom_tv_layouts",
    "bank_conflict_degree",
    "evaluate_all",
    "hopper_swizzle",
    "image",
    "is_bijective_onto",
    "is_injective",
    "ldmatrix_atom",
    "lds_swizzle",
    "lds_tile_layout",
    "mfma_atom",
    "mma_sync_m16n8k16",
    "stmatrix_atom",
    "wgmma_m64nNk16",
]
