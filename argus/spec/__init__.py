"""The argus DSL: kernels, tensors, atoms, tags.

``import argus.spec as A`` and write::

    @A.kernel(threads=128, grid=lambda n, BLOCK: (A.cdiv(n, BLOCK),))
    def vector_add(a: A.Global[A.f32, "n"], b: A.Global[A.f32, "n"], c: A.Global[A.f32, "n"],
                   BLOCK: A.const = 128):
        i = A.block_id(0) * BLOCK + A.thread_id()
        ...

The body is traced once on symbolic values into the tile IR (:mod:`argus.ir`).
"""

from argus.ir.dtypes import (
    BF16 as bf16,
)
from argus.ir.dtypes import (
    BOOL as bool_,
)
from argus.ir.dtypes import (
    E4M3FN as e4m3fn,
)
from argus.ir.dtypes import (
    E4M3FNUZ as e4m3fnuz,
)
from argus.ir.dtypes import (
    E5M2 as e5m2,
)
from argus.ir.dtypes import (
    E5M2FNUZ as e5m2fnuz,
)
from argus.ir.dtypes import (
    F16 as f16,
)
from argus.ir.dtypes import (
    F32 as f32,
)
from argus.ir.dtypes import (
    I8 as i8,
)
from argus.ir.dtypes import (
    I32 as i32,
)
from argus.ir.dtypes import (
    U32 as u32,
)
from argus.spec.async_ops import (
    AsyncGroup,
    Mbarrier,
    Stage,
    arrive,
    arrive_expect_tx,
    cluster_barrier,
    cp_async,
    cp_async_commit,
    cp_async_wait,
    expect_tx,
    fence_proxy_async,
    grid_dependency_wait,
    launch_dependents,
    mapa,
    mbarrier,
    mbarrier_init,
    named_barrier,
    tma_load,
    tma_store,
    tma_store_commit,
    tma_store_wait,
    transaction_bytes,
    wait,
    warp_role,
    wgmma_commit,
    wgmma_fence,
    wgmma_wait,
)
from argus.spec.builder import SpecError
from argus.spec.kernel import (
    Global,
    Index,
    Kernel,
    aligned,
    const,
    divisible,
    eq,
    ids_in_range,
    kernel,
    kernel_hash,
    monotone,
    no_alias,
)
from argus.spec.mma_ops import (
    atomic_add,
    broadcast,
    ldmatrix,
    mma,
    mma_atom,
    mma_fragment,
    mma_partition,
    reduce,
    retile,
    shuffle,
    stmatrix,
    warp_reduce,
)
from argus.spec.ops import (
    assert_bank_conflicts,
    assert_tag,
    assert_tag_eq,
    barrier,
    block_id,
    cdiv,
    cluster_rank,
    convert,
    copy,
    elementwise,
    exp2,
    fma,
    fragment,
    full,
    lane_id,
    load,
    maximum,
    minimum,
    range,
    reset_tags,
    select,
    shared,
    store,
    tag,
    thread_id,
    warp_id,
    warpgroup_id,
    zeros,
)
from argus.spec.tensor import Tensor

__all__ = [
    "Global",
    "Index",
    "Kernel",
    "SpecError",
    "Tensor",
    "aligned",
    "assert_bank_conflicts",
    "assert_tag",
    "assert_tag_eq",
    "barrier",
    "bf16",
    "block_id",
    "bool_",
    "cdiv",
    "cluster_rank",
    "const",
    "convert",
    "copy",
    "divisible",
    "e4m3fn",
    "e4m3fnuz",
    "e5m2",
    "e5m2fnuz",
    "elementwise",
    "eq",
    "exp2",
    "f16",
    "f32",
    "fma",
    "fragment",
    "full",
    "i8",
    "i32",
    "ids_in_range",
    "kernel",
    "kernel_hash",
    "lane_id",
    "load",
    "maximum",
    "minimum",
    "monotone",
    "no_alias",
    "range",
    "reset_tags",
    "select",
    "shared",
    "store",
    "tag",
    "thread_id",
    "u32",
    "warp_id",
    "warpgroup_id",
    "zeros",
]
__all__ += [
    "atomic_add", "broadcast", "ldmatrix", "mma", "mma_atom", "mma_fragment", "mma_partition", "reduce",
    "retile", "shuffle", "stmatrix", "warp_reduce",
]
__all__ += [
    "AsyncGroup", "Mbarrier", "Stage", "arrive", "arrive_expect_tx", "cluster_barrier", "cp_async",
    "cp_async_commit", "cp_async_wait", "expect_tx", "fence_proxy_async", "grid_dependency_wait",
    "launch_dependents", "mapa", "mbarrier", "mbarrier_init", "named_barrier", "tma_load", "tma_store", "tma_store_commit", "tma_store_wait", "transaction_bytes",
    "wait", "warp_role", "wgmma_commit", "wgmma_fence", "wgmma_wait",
]
