"""Persistent, warp-specialized Hopper GEMM: ``C = act(A · Bᵀ + bias)``.

``A`` is ``M x K`` and ``B`` is ``N x K``, both K-contiguous (``torch.matmul(a, b.T)``), in bf16 or
fp16; accumulation is fp32; ``C`` is ``M x N`` in bf16, fp16 or fp32.  The kernel is written in
the DSL and specialized by ``const`` parameters:

* ``BN`` (the block tile is ``128 x BN``; each of the two consumer warpgroups owns 64 rows and
  issues ``wgmma.m64n{BN}k16``), ``BK`` (64: one 128-byte swizzle row of 16-bit elements),
  ``STAGES`` (shared-memory ring depth), ``GROUP_M`` (tile-order grouping), ``SMS`` (the
  number of persistent blocks, normally the device's SM count), ``RELEASE`` (how consumers
  give a stage back), ``EPILOGUE`` (``"tma"``, ``"deferred"``, ``"direct"`` or ``"auto"``) and ``CLUSTER``
  (1, or 2: blocks in clusters of two compute vertically adjacent tiles, and each loads half of
  their common B box and multicasts it into both blocks' stage; a stage is refilled once the
  consumers of both blocks released it, by a local and a remote arrive).

Structure (384 threads, three warpgroups):

* **Scheduler.**  Block ``p`` visits tiles ``p, p + SMS, p + 2·SMS, ...`` of the
  ``cdiv(M, 128) x cdiv(N, BN)`` tile grid, in grouped order: tiles are numbered down columns
  of ``GROUP_M`` tile rows, so consecutive blocks share A rows and B columns in L2.  The
  map tile number → ``(tm, tn)`` is a bijection on the valid tiles (the last group is
  ``min(GROUP_M, tiles_m - first)`` rows high).
* **Producer** (warpgroup 0, ``setmaxnreg`` 40).  One thread streams k-blocks of every tile the
  block visits through a ``STAGES``-deep ring: wait until stage ``s = it % STAGES`` is empty
  (phase ``it // STAGES - 1``; the first round passes on the initial phase), declare the
  stage's bytes on ``full[s]`` and issue two TMA loads into 128B-swizzled shared memory.
  ``it`` counts k-blocks over all the block's tiles, so the ring runs ahead across tile
  boundaries and the next tile's loads overlap the current tile's epilogue.  Edges of M, N
  and K arrive zero-filled (TMA bounds).  ``L2="stream"`` gives the loads L2 eviction
  priorities (A's boxes evict-last, B's evict-first).
* **Consumers** (warpgroups 1 and 2, ``setmaxnreg`` 232).  Per k-block: wait for ``full[s]``,
  issue ``BK / 16`` wgmmas on the stage, commit, then ``wgmma_wait(1)`` — the previous
  k-block's group retired — and release the previous stage (the 256 consumer threads meet at
  named barrier 1 and one of them arrives).  One group stays in flight, so tensor cores never
  wait on the release.  With ``INFLIGHT=0`` a consumer instead waits for its own k-block's
  group and releases that stage at once (every consumer thread arrives, no barrier joins the
  two warpgroups): while one warpgroup waits, the other's wgmmas run, and the two alternate on
  the tensor cores — the faster schedule on an H200.  After the last k-block: ``wgmma_wait(0)``, release, and the epilogue:
  bias, activation, conversion, then the tile leaves in boxes 128 bytes wide (``BN / 64`` boxes
  of 128 x 64 for a 16-bit C, ``BN / 32`` of 128 x 32 for fp32) through two 128B-swizzled
  staging buffers and TMA stores (written from registers, ``fence_proxy_async``, barrier, one
  thread stores; a buffer is rewritten only after the store that used it has read it), so the
  next tile's main loop overlaps the writes.  ``EPILOGUE="direct"`` (and ``"auto"`` where BN is
  not a multiple of the box width) stores from registers instead (unpredicated on interior
  tiles); its tag assertion, on C itself, is beyond the verifier (the writer of an element of C
  is found by inverting the grouped tile order, whose last group's height is not a constant).
  ``EPILOGUE="deferred"`` (a plain epilogue of more than two boxes) stores a tile's first boxes
  so, and holds its last two, converted, in registers (packed 16-bit pairs) until the next
  tile's first k-block: they are written and stored there, under that k-block's wgmmas, and
  the block's last tile's after its tile loop — the tensor cores idle for two boxes fewer.

Operand layouts: ``gemm_kernel(a_major="m")`` takes A as ``K x M`` (M contiguous: a column-major A)
and ``b_major="n"`` B as ``K x N`` (N contiguous: ``torch.matmul(a, b)``).  Such an operand's
stage is ``BM / 64`` (``BN / 64``) TMA boxes of ``BK x 64`` (64 elements = 128 bytes, the widest
box of the 128B swizzle); each wgmma reads the boxes' 16 K-rows of its K step as one MN-major
operand (a ``permute`` view; the instruction's transpose bit), and the kernel name gets a
``_kn`` / ``_mk`` / ``_mn`` suffix (A's major, then B's).  The K-major kernel is unchanged.

Invariants (tags and assertions): ``a`` carries ``(i, k)`` and ``b`` ``(j, k)``; when its wait
returns, stage ``s`` holds k-block ``kt`` of the current tile for both operands (asserted on the
tile's interior); every wgmma pairs A and B elements of equal ``k`` (the MMA semantics); the
accumulator element stored for ``c[i, j]`` (in the staging box, or in C) carries ``(i, j)``.

Assumptions: every operand's row pitch is a multiple of 16 bytes (TMA's stride rule), and C's
(the vector epilogue): ``K`` and ``N`` are multiples of 8, ``M`` too for a ``K x M`` A (``K``
need not be when both operands are MN-major); M, N and K need not be multiples of the tile.

Measured on an H200 (benchmarks/RESULTS.md, cycle timestamps per tile): the main loop runs at
91-92% of the tensor cores' per-clock peak (1110-1121 cycles per 128 x 256 x 64 k-block against
1024), about 4% behind cuBLAS's; the epilogue and tile transition cost ~2300 cycles per tile (3%
of a tile at K = 4096), during which the tensor cores idle.
"""

import functools
from dataclasses import dataclass
from typing import Any

import sympy
from sympy import Eq

import argus.spec as A
from argus import symbolic
from argus.errors import ArgusError
from argus.layout_algebra.hopper import SwizzleMode

__all__ = ["ACTIVATIONS", "CANDIDATES", "EARLIER", "TUNED", "GemmConfig", "GemmError", "gemm_kernel", "kernel_named", "tile_of",
           "tuned_config"]

BM = 128  # two consumer warpgroups x 64 rows
ACTIVATIONS = (None, "relu")
_DTYPES = {"bf16": A.bf16, "f16": A.f16, "f32": A.f32}


class GemmError(ArgusError):
    """A GEMM configuration argus does not build (with a hint)."""


@dataclass(frozen=True)
class GemmConfig:
    """One specialization the autotuner may pick (the kernel's ``const`` parameters)."""

    BN: int = 256
    BK: int = 64
    STAGES: int = 4
    GROUP_M: int = 8
    CLUSTER: int = 1
    INFLIGHT: int = 1
    RELEASE: str = "warpgroups"
    EPILOGUE: str = "auto"
    L2: str = "normal"
    PDL: bool = True

    def consts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"BN": self.BN, "BK": self.BK, "STAGES": self.STAGES, "GROUP_M": self.GROUP_M,
                               "CLUSTER": self.CLUSTER}
        if self.INFLIGHT != 1:  # defaults stay implicit (a caller may override them)
            out["INFLIGHT"] = self.INFLIGHT
        if self.RELEASE != "warpgroups":
            out["RELEASE"] = self.RELEASE
        if self.EPILOGUE != "auto":
            out["EPILOGUE"] = self.EPILOGUE
        if self.L2 != "normal":
            out["L2"] = self.L2
        if self.PDL:  # the kernel's own default is False: a dependent launch is asked for
            out["PDL"] = True
        return out

    def shared_bytes(self, itemsize: int = 2, tma_epilogue: bool = True) -> int:
        """The shared memory of the ring (and of the epilogue's two BM-row x 128-byte staging boxes)."""
        return self.STAGES * (BM + self.BN) * self.BK * itemsize + (2 * BM * 128 if tma_epilogue else 0)


CANDIDATES = (
    GemmConfig(BN=256, STAGES=4, GROUP_M=8, INFLIGHT=0, RELEASE="threads"),
    GemmConfig(BN=256, STAGES=4, GROUP_M=16, INFLIGHT=0, RELEASE="threads"),
    GemmConfig(BN=128, STAGES=6, GROUP_M=8, INFLIGHT=0, RELEASE="threads"),
    GemmConfig(BN=256, STAGES=4, GROUP_M=16, INFLIGHT=0, RELEASE="threads", EPILOGUE="deferred"),
    GemmConfig(BN=128, STAGES=6, GROUP_M=8, INFLIGHT=0, RELEASE="threads", L2="stream"),
)
"""The autotuner's search space, each specialization (with ``SMS=132``) proved by ``argus verify``
with its record in ``proofs/``: every entry fits 227 KB of shared memory and 232 registers, and
retires each k-block's wgmmas before the next (``INFLIGHT=0``, per-thread release), so the two
consumer warpgroups alternate on the tensor cores.

The fourth is the second with C's last two boxes deferred to the next tile's first k-block
(``EPILOGUE="deferred"``); the fifth, the third with L2 priorities on the loads (``L2="stream"``:
A evict-last, B evict-first; the pick for one tile row, ``M <= 128``).  Each is a dependent launch
(``PDL=True``, proved ``launch-order``): its setup overlaps the previous kernel's end.

``CLUSTER=2`` (B's box multicast to a pair of blocks) builds, runs and matches the reference, but
on an H200 it measured the same speed as the unclustered kernel at every benchmarked shape
(benchmarks/RESULTS.md): it does not pay there, so the autotuner does not pick it."""

EARLIER = (
    GemmConfig(BN=256, STAGES=4, GROUP_M=8),
    GemmConfig(BN=256, STAGES=3, GROUP_M=8),
    GemmConfig(BN=256, STAGES=4, GROUP_M=16),
    GemmConfig(BN=192, STAGES=4, GROUP_M=8),
    GemmConfig(BN=128, STAGES=6, GROUP_M=8),
)
"""Specializations with one wgmma group in flight across k-blocks (``INFLIGHT=1``): supported,
built and tested, and no faster on an H200 than the candidates at any benchmarked shape
(benchmarks/RESULTS.md), so not in the autotuner's search space."""

TUNED = {
    (4096, 4096, 4096): CANDIDATES[1],
    (8192, 8192, 8192): CANDIDATES[1],
    (4096, 14336, 4096): CANDIDATES[1],
    (16384, 4096, 4096): CANDIDATES[1],
    (2048, 2048, 2048): CANDIDATES[1],
    (128, 14336, 4096): CANDIDATES[4],
}
"""The candidate ``benchmarks/gemm.py`` timed fastest per shape on an H200 (2026-12-03,
benchmarks/RESULTS.md; the skinny shape's L2 priorities on an H100, 2026-12-07);
``tuned_config`` generalizes it."""


def tuned_config(m: int, n: int, k: int) -> "GemmConfig":
    """The recorded best candidate for ``(m, n, k)``, else the one recorded for its shape class:
    a skinny ``m`` (one 128-row tile) wants narrower tiles so that more blocks get work."""
    if (m, n, k) in TUNED:
        return TUNED[(m, n, k)]
    return CANDIDATES[4] if m <= BM else CANDIDATES[1]


def tile_of(t: Any, tiles_m: Any, tiles_n: Any, group_m: int) -> tuple[Any, Any]:
    """``(tm, tn)`` of tile number ``t`` in grouped order (columns of ``group_m`` tile rows).

    Works on ints (host-side checks) and on index expressions (inside the kernel)."""
    if isinstance(t, int) and isinstance(tiles_m, int) and isinstance(tiles_n, int):
        div, mod, smaller = (lambda x, y: x // y), (lambda x, y: x % y), min
    else:
        div, mod, smaller = symbolic.floordiv, symbolic.mod, sympy.Min
    per_group = group_m * tiles_n
    first = div(t, per_group) * group_m
    height = smaller(tiles_m - first, group_m)
    r = mod(t, per_group)
    return first + mod(r, height), div(r, height)


def _check(in_dtype: str, out_dtype: str, activation: str | None) -> None:
    if in_dtype not in ("bf16", "f16"):
        raise GemmError(f"gemm inputs of {in_dtype!r} are not supported", hint="use 'bf16' or 'f16'")
    if out_dtype not in _DTYPES:
        raise GemmError(f"gemm output of {out_dtype!r} is not supported", hint="use 'bf16', 'f16' or 'f32'")
    if activation not in ACTIVATIONS:
        raise GemmError(f"activation {activation!r} is not supported", hint=f"use one of {ACTIVATIONS}")


MAJORS = {"a": ("k", "m"), "b": ("k", "n")}
"""Which index of each operand is contiguous in memory: ``k`` (A is ``M x K``, B is ``N x K``) or
``m`` / ``n`` (A is ``K x M``, B is ``K x N``)."""


def _check_majors(a_major: str, b_major: str) -> tuple[str, str]:
    for operand, major in (("a", a_major), ("b", b_major)):
        if major not in MAJORS[operand]:
            raise GemmError(f"{operand}_major={major!r} is not supported",
                            hint=f"use {' or '.join(repr(m) for m in MAJORS[operand])} (the contiguous index)")
    return a_major, b_major


def _assumptions(a_major: str, b_major: str) -> Any:
    """16-byte row pitches (TMA's stride rule) of A and B, and N (the vector epilogue)."""
    if a_major == "k":
        return lambda K, N: [Eq(K % 8, 0), Eq(N % 8, 0), K >= 1]
    if b_major == "k":
        return lambda M, K, N: [Eq(M % 8, 0), Eq(K % 8, 0), Eq(N % 8, 0), K >= 1]
    return lambda M, K, N: [Eq(M % 8, 0), Eq(N % 8, 0), K >= 1]


@functools.cache
def gemm_kernel(in_dtype: str = "bf16", out_dtype: str = "bf16", bias: bool = False,
                activation: str | None = None, a_major: str = "k", b_major: str = "k") -> A.Kernel:
    """The GEMM kernel for one operand/result type pair, epilogue and operand layout (specialize
    it with :meth:`GemmConfig.consts` and ``SMS``).  ``a_major``: ``"k"`` (A is ``M x K``) or
    ``"m"`` (``K x M``); ``b_major``: ``"k"`` (B is ``N x K``) or ``"n"`` (``K x N``); the kernel
    name tells the layouts apart (``_kn`` / ``_mk`` / ``_mn`` suffixes, none for K-major)."""
    _check(in_dtype, out_dtype, activation)
    majors = _check_majors(a_major, b_major)
    a_dims, b_dims = ("M K" if a_major == "k" else "K M"), ("N K" if b_major == "k" else "K N")
    tin, tout = _DTYPES[in_dtype], _DTYPES[out_dtype]
    grid = lambda SMS: (SMS,)  # noqa: E731
    assume = _assumptions(a_major, b_major)
    name = f"gemm_{in_dtype}_{out_dtype}" + ("_bias" if bias else "") + (f"_{activation}" if activation else "")
    if majors != ("k", "k"):
        name += f"_{'k' if a_major == 'k' else 'm'}{'k' if b_major == 'k' else 'n'}"
    if bias:
        def gemm(a: A.Global(tin, a_dims), b: A.Global(tin, b_dims), c: A.Global(tout, "M N"),
                 bias: A.Global(A.f32, "N"), BN: A.const = 256, BK: A.const = 64, STAGES: A.const = 4,
                 GROUP_M: A.const = 8, SMS: A.const = 132, RELEASE: A.const = "warpgroups", EPILOGUE: A.const = "auto",
                 CLUSTER: A.const = 1, INFLIGHT: A.const = 1, L2: A.const = "normal", PDL: A.const = False):
            _traced_body()(a, b, c, bias, BN, BK, STAGES, GROUP_M, SMS, RELEASE, _epilogue(EPILOGUE, tout, BN), in_dtype, tout,
                           activation, _cluster(CLUSTER, SMS, GROUP_M), majors=majors,
                           inflight=_inflight(INFLIGHT, RELEASE), l2=_l2(L2), pdl=_pdl(PDL))
    else:
        def gemm(a: A.Global(tin, a_dims), b: A.Global(tin, b_dims), c: A.Global(tout, "M N"),
                 BN: A.const = 256, BK: A.const = 64, STAGES: A.const = 4, GROUP_M: A.const = 8,
                 SMS: A.const = 132, RELEASE: A.const = "warpgroups", EPILOGUE: A.const = "auto", CLUSTER: A.const = 1,
                 INFLIGHT: A.const = 1, L2: A.const = "normal", PDL: A.const = False):
            _traced_body()(a, b, c, None, BN, BK, STAGES, GROUP_M, SMS, RELEASE, _epilogue(EPILOGUE, tout, BN), in_dtype, tout,
                           activation, _cluster(CLUSTER, SMS, GROUP_M), majors=majors,
                           inflight=_inflight(INFLIGHT, RELEASE), l2=_l2(L2), pdl=_pdl(PDL))
    gemm.__name__ = gemm.__qualname__ = name
    return A.kernel(threads=384, grid=grid, cluster=lambda CLUSTER: (CLUSTER, 1, 1), assume=assume)(gemm)


def kernel_named(name: str) -> A.Kernel:
    """The variant of :func:`gemm_kernel` whose kernel name is ``name`` (``gemm_bf16_bf16``,
    ``gemm_f16_f16_bias_relu_kn``, ...): how a proof record finds its kernel again."""
    for in_dtype in ("bf16", "f16"):
        for out_dtype in _DTYPES:
            for bias in (False, True):
                for activation in ACTIVATIONS:
                    for a_major in MAJORS["a"]:
                        for b_major in MAJORS["b"]:
                            kernel = gemm_kernel(in_dtype, out_dtype, bias, activation, a_major, b_major)
                            if kernel.name == name:
                                return kernel
    raise GemmError(f"no GEMM variant is named {name!r}", hint="names are gemm_{in}_{out}[_bias][_relu][_kn|_mk|_mn]")


def _gemm_body(a, b, c, bias_t, BN, BK, STAGES, GROUP_M, SMS, RELEASE, EPILOGUE, in_dtype, tout, activation, CLUSTER,
               majors=("k", "k"), inflight=1, l2=(None, None), pdl=False):
    """The kernel body shared by every variant (traced inside the variant's kernel)."""
    swizzle = SwizzleMode.B128.element_swizzle(2)
    tin = _DTYPES[in_dtype]
    atom = f"wgmma.m64n{BN}k16.{in_dtype}"
    a_major, b_major = majors
    la, lb = l2  # the operand loads' L2 eviction priorities (None: the cache's default)
    if a_major == "k":
        A.tag(a, lambda i, k: (i, k), "A")
        M, K = a.shape
    else:  # K x M
        A.tag(a, lambda k, i: (i, k), "A")
        K, M = a.shape
    if b_major == "k":
        A.tag(b, lambda j, k: (j, k), "B")
        N = b.shape[0]
    else:  # K x N
        A.tag(b, lambda k, j: (j, k), "B")
        N = b.shape[1]
    _check_boxes(BN, b_major, CLUSTER)
    tiles_m, tiles_n = A.cdiv(M, BM), A.cdiv(N, BN)
    nk = A.cdiv(K, BK)
    pid = A.block_id(0)
    if CLUSTER == 1:
        mine = A.cdiv(tiles_m * tiles_n - pid, SMS)  # tiles pid, pid + SMS, ... (grid = SMS blocks)
    else:  # cluster u = pid // 2 visits tile pairs u, u + SMS/2, ...; the block of rank r takes row 2·pm + r
        rank = A.cluster_rank()
        peer = 1 - rank
        mine = A.cdiv(A.cdiv(tiles_m, 2) * tiles_n - pid // 2, SMS // 2)  # the same for both blocks of a cluster
    tile = functools.partial(_tile, pid=pid, tiles_m=tiles_m, tiles_n=tiles_n, group_m=GROUP_M, sms=SMS,
                             cluster=CLUSTER)
    # a K-major stage is one box of BM (BN) rows x BK; an MN-major one BM / 64 (BN / 64) boxes of BK x 64
    sa = A.shared(tin, (STAGES, BM, BK) if a_major == "k" else (STAGES, BM // 64, BK, 64), swizzle=swizzle)
    sb = A.shared(tin, (STAGES, BN, BK) if b_major == "k" else (STAGES, BN // 64, BK, 64), swizzle=swizzle)
    bw = _box_width(tout)  # a box of C is 128 bytes wide: 64 16-bit or 32 fp32 columns
    late = 2 if EPILOGUE == "deferred" else 0  # a tile's last boxes, stored during the next tile's first k-block
    _check_late(late, bias_t is None and activation is None, BN, bw)
    if EPILOGUE != "direct":  # two 128 x bw boxes of C
        staging = A.shared(tout, (2, BM, bw), swizzle=SwizzleMode.B128.element_swizzle(tout.itemsize))
    box_atom = f"wgmma.m64n{bw}k16.{in_dtype}"
    full = A.mbarrier(1, stages=STAGES)
    # a stage is free once the consumers of every block it is multicast into released it
    empty = A.mbarrier((256 if RELEASE == "threads" else 1) * CLUSTER, stages=STAGES)
    if CLUSTER == 1:
        A.mbarrier_init(full, empty)
    else:
        A.mbarrier_init(full, empty, sync=False)
        A.cluster_barrier()  # both blocks' mbarriers exist before a peer's multicast or remote arrive
    if pdl:  # a dependent launch: the setup above overlaps the previous kernel's end
        A.grid_dependency_wait()
    remote = A.mapa(empty, peer) if CLUSTER > 1 else None
    with A.warp_role("producer", warps=range(0, 4), registers=40):
        for i in A.range(mine):
            tm, tn = tile(i)
            for kt in A.range(nk):
                it = i * nk + kt
                s = it % STAGES
                A.wait(empty[s], phase=it // STAGES - 1, elected=0)
                A.arrive_expect_tx(full[s], A.transaction_bytes(sa[s]) + A.transaction_bytes(sb[s]))
                if a_major == "k":
                    A.tma_load(a.tile((BM, BK), (tm, kt)), sa[s], full[s], l2=la)
                else:
                    for qa in A.range(BM // 64, unroll=True):
                        A.tma_load(a.tile((BK, 64), (kt, tm * (BM // 64) + qa)), sa[s, qa], full[s], l2=la)
                if b_major == "n":
                    for qb in A.range(BN // 64 // CLUSTER, unroll=True):
                        if CLUSTER == 1:
                            A.tma_load(b.tile((BK, 64), (kt, tn * (BN // 64) + qb)), sb[s, qb], full[s], l2=lb)
                        else:  # this block's half of the boxes, into the same stage of both blocks
                            pb = rank * (BN // 128) + qb
                            A.tma_load(b.tile((BK, 64), (kt, tn * (BN // 64) + pb)), sb[s, pb], full[s],
                                       multicast=0b11, l2=lb)
                elif CLUSTER == 1:
                    A.tma_load(b.tile((BN, BK), (tn, kt)), sb[s], full[s], l2=lb)
                else:  # this block's half of B's box, into the same stage of both blocks
                    half = BN // 2
                    A.tma_load(b.tile((half, BK), (2 * tn + rank, kt)), sb[s].tile((half, BK), (rank, 0)), full[s],
                               multicast=0b11, l2=lb)
        if pdl:  # every load is issued: the next kernel may start its setup on SMs this one frees
            A.launch_dependents()
    with A.warp_role("consumer", warps=range(4, 12), registers=232):
        wg = A.warpgroup_id() - 1  # this consumer's 64 rows of the block tile
        if late:  # the previous tile's converted accumulator, whose last boxes are still to be stored
            held = A.mma_fragment(atom, "c") if tout is A.f32 else A.convert(A.mma_fragment(atom, "c"), tout)
        for j in A.range(mine):
            cm, cn = tile(j)
            acc = A.mma_fragment(atom, "c")
            for kc in A.range(nk):
                jt = j * nk + kc
                sc = jt % STAGES
                A.wait(full[sc], phase=jt // STAGES)
                if (cm + 1) * BM <= M and (kc + 1) * BK <= K:
                    _assert_stage(sa[sc], a_major, cm * BM, kc * BK, "stage holds k-block kt of A")
                if (cn + 1) * BN <= N and (kc + 1) * BK <= K:
                    _assert_stage(sb[sc], b_major, cn * BN, kc * BK, "stage holds k-block kt of B")
                for ks in A.range(BK // 16, unroll=True):
                    A.mma(atom, _k_step(sa[sc], a_major, 64, wg, ks), _k_step(sb[sc], b_major, BN, 0, ks), acc)
                A.wgmma_commit()
                if late:  # under the tile's first wgmmas: the previous tile's last boxes leave
                    if kc == 0:
                        if j > 0:
                            pm, pn = tile(j - 1)
                            for qp in A.range(BN // bw - late, BN // bw, unroll=True):
                                _box_writer()(held, qp, pm, pn, staging, c, wg, bw, BN, M, N, box_atom, True)
                if inflight == 0:  # this k-block's wgmmas retired: its stage may be refilled
                    A.wgmma_wait(0)
                    _release(empty, remote, jt % STAGES, RELEASE)
                else:
                    A.wgmma_wait(1)  # the previous k-block's wgmmas retired: its stage may be refilled
                    if kc > 0:
                        _release(empty, remote, (jt - 1) % STAGES, RELEASE)
            A.wgmma_wait(0)
            if inflight == 1:
                _release(empty, remote, (j * nk + nk - 1) % STAGES, RELEASE)
            if EPILOGUE != "direct":
                # 64-column boxes through two shared buffers: each box's bias, activation and
                # conversion are applied to its 32 accumulator values, which are written from
                # registers, made visible to the async proxy and stored by TMA (clipped at the
                # edges of C); the consumers go on to the next tile while the stores drain
                plain = bias_t is None and activation is None
                if plain:
                    converted = acc if tout is A.f32 else A.convert(acc, tout)  # the whole fragment at once
                for q in A.range(BN // bw - late, unroll=True):
                    if plain:
                        part = converted
                    else:  # box by box: the bias values of one box only are live
                        part = acc.tile((2, 2, bw // 8), (0, 0, q))
                        if bias_t is not None:
                            row = _broadcast_rows(bias_t, M).tile((BM, bw), (cm, cn * (BN // bw) + q))
                            part = part + A.load(A.mma_partition(box_atom, "c", row.tile((64, bw), (wg, 0))),
                                                 dtype=A.f32)
                        if activation == "relu":
                            part = A.maximum(part, 0.0)
                        part = part if tout is A.f32 else A.convert(part, tout)
                    _box_writer()(part, q, cm, cn, staging, c, wg, bw, BN, M, N, box_atom, plain)
                if late:
                    held = converted  # its last boxes leave during the next tile's first k-block
            else:
                out = A.mma_partition(atom, "c", c.tile((BM, BN), (cm, cn)).tile((64, BN), (wg, 0)))
                if bias_t is not None:
                    row = A.mma_partition(atom, "c", _broadcast_rows(bias_t, M).tile((BM, BN), (cm, cn))
                                          .tile((64, BN), (wg, 0)))
                    acc = acc + A.load(row, dtype=A.f32)
                if activation == "relu":
                    acc = A.maximum(acc, 0.0)
                result = acc if tout is A.f32 else A.convert(acc, tout)
                if (cm + 1) * BM <= M and (cn + 1) * BN <= N:
                    A.store(result, _unmasked(out))  # an interior tile: no element needs a bounds predicate
                else:
                    A.store(result, out)
                if bias_t is None and activation is None:  # an epilogue's arithmetic drops the tags
                    A.assert_tag(out, lambda r, col, tg: tg == (r, col), "c[i, j] = row i of A · row j of B")
        if late:  # the block's last tile's last boxes
            if mine > 0:
                lm, ln = tile(mine - 1)
                for ql in A.range(BN // bw - late, BN // bw, unroll=True):
                    _box_writer()(held, ql, lm, ln, staging, c, wg, bw, BN, M, N, box_atom, True)
        if EPILOGUE != "direct":
            A.tma_store_wait(0)  # every store of the block complete before it exits
    if CLUSTER > 1:
        A.cluster_barrier()  # no block exits while its peer may still arrive on its mbarriers


def _check_late(late: int, plain: bool, bn: int, bw: int) -> None:
    if late and (not plain or bn // bw <= late):
        raise GemmError(f"EPILOGUE='deferred' stores the last {late} of a tile's boxes from its converted "
                        f"accumulator: it needs a plain epilogue (no bias or activation) and more than {late} "
                        f"boxes (BN={bn} gives {bn // bw})", hint="use EPILOGUE='tma'")


def _store_box(part: Any, q: int, cm: Any, cn: Any, staging: Any, c: Any, wg: Any, bw: int, BN: int, M: Any,
               N: Any, box_atom: str, plain: bool) -> None:
    """Box ``q`` of tile ``(cm, cn)`` through staging buffer ``q % 2`` and a TMA store.  ``part``:
    the box's converted values, or (``plain``) the whole converted fragment, whose box ``q``
    is taken here."""
    if plain:
        part = part.tile((2, 2, bw // 8), (0, 0, q))  # columns bw·q .. bw·q + bw - 1
    buf = staging[q % 2]
    # the store that last used this buffer has read it (at a tile's first box: every
    # store of the previous tile, long read by then)
    A.tma_store_wait(1 if q > 0 else 0, read=True)
    A.named_barrier(1, 256)
    box = buf.tile((64, bw), (wg, 0))
    A.store(part, A.mma_partition(box_atom, "c", box))
    if plain and (cm + 1) * BM <= M and (cn + 1) * BN <= N:
        A.assert_tag(box, lambda _b, r, col, tg, cm=cm, cn=cn, q=q:
                     tg == (cm * BM + r, cn * BN + q * bw + col), "c[i, j] = row i of A · row j of B")
    A.fence_proxy_async()
    A.named_barrier(1, 256)
    A.tma_store(buf, c.tile((BM, bw), (cm, cn * (BN // bw) + q)))
    A.tma_store_commit()


def _tile(i: Any, *, pid: Any, tiles_m: Any, tiles_n: Any, group_m: int, sms: int, cluster: int) -> tuple[Any, Any]:
    """``(tm, tn)`` of the ``i``-th tile block ``pid`` visits.  Without clusters: tile number
    ``pid + i·sms`` in grouped order.  On 2-block clusters: cluster ``pid // 2`` visits tile pairs
    ``pid // 2 + i·sms/2`` of the ``cdiv(tiles_m, 2) x tiles_n`` pair grid (grouped order,
    ``group_m / 2`` pair rows per group) and the block of rank ``r`` takes tile row ``2·pm + r``;
    a block past the last tile row (odd ``tiles_m``) still loads and multicasts its half of B,
    its own A and C boxes lie outside the tensors (zero-filled loads, clipped stores)."""
    if cluster == 1:
        return tile_of(pid + i * sms, tiles_m, tiles_n, group_m)
    pm, tn = tile_of(pid // 2 + i * (sms // 2), symbolic.ceil_div(tiles_m, 2), tiles_n, group_m // 2)
    return 2 * pm + A.cluster_rank(), tn


_L2 = {"normal": (None, None), "stream": ("evict_last", "evict_first")}


def _pdl(pdl: Any) -> bool:
    """Programmatic dependent launch: every thread waits on the grid dependency once its
    mbarriers are set up and before any global access (the ``launch-order`` property), and the
    producer lets the next kernel launch once it has issued its last loads.  The kernel then
    starts while the previous kernel of the stream finishes."""
    if pdl not in (True, False):
        raise GemmError(f"PDL={pdl!r} is not a bool", hint="use PDL=True (a dependent launch) or False")
    return bool(pdl)


def _l2(how: str) -> tuple[str | None, str | None]:
    """The L2 eviction priorities of A's and B's TMA loads: ``"normal"`` (none given) or
    ``"stream"`` (A evict-last, B evict-first: B is read once, every block reads A — the case of
    one tile row, ``M <= 128``, where it measured 6–9% faster on an H100, benchmarks/RESULTS.md).
    A cache hint only: the copies, and the proofs, are the same."""
    if how not in _L2:
        raise GemmError(f"L2={how!r} is not an L2 policy of the GEMM", hint=f"use one of {tuple(_L2)}")
    return _L2[how]


def _inflight(inflight: int, release: str) -> int:
    """How many wgmma groups a consumer warpgroup keeps in flight across k-blocks: 1 (it waits for
    the previous k-block's group after issuing this one's, and releases the previous stage) or 0
    (it waits for this k-block's group and releases its stage at once; the other consumer
    warpgroup's wgmmas run meanwhile, so the two warpgroups alternate on the tensor cores — the
    faster schedule on an H200, benchmarks/RESULTS.md)."""
    if inflight not in (0, 1):
        raise GemmError(f"INFLIGHT={inflight!r}: use 1 (one wgmma group in flight across k-blocks) or 0")
    if inflight == 0 and release != "threads":
        raise GemmError("INFLIGHT=0 retires each k-block's wgmmas before the next; the two consumer warpgroups "
                        "must then not meet at a barrier every k-block (they would idle the tensor cores together)",
                        hint="use RELEASE='threads' (each consumer thread releases the stage)")
    return inflight


def _cluster(cluster: int, sms: int, group_m: int) -> int:
    """Check the cluster size of a specialization: 1, or 2 (a pair of vertically adjacent tiles
    shares B's box, each block loading half of it by TMA multicast)."""
    if cluster not in (1, 2):
        raise GemmError(f"CLUSTER={cluster!r}: use 1 or 2")
    if cluster == 2 and (sms % 2 or group_m % 2):
        raise GemmError(f"CLUSTER=2 needs an even SMS and GROUP_M (got SMS={sms}, GROUP_M={group_m})",
                        hint="clusters of 2 blocks walk tile pairs: the persistent grid and the tile groups come in pairs")
    return cluster


def _check_boxes(bn: int, b_major: str, cluster: int) -> None:
    """A K x N B arrives in boxes of 64 columns; on a 2-block cluster each block loads half of them."""
    if b_major == "n" and bn % (64 * cluster):
        raise GemmError(f"BN={bn}: a K x N B arrives in boxes of 64 columns (128 bytes, the 128B swizzle's "
                        f"widest)" + (", half of them from each block of the cluster" if cluster > 1 else ""),
                        hint=f"use a multiple of {64 * cluster} for BN")


def _assert_stage(stage: Any, major: str, row: Any, k: Any, message: str) -> None:
    """Assert that a stage holds rows ``row ..`` and k ``k ..`` of its operand (tags ``(row, k)``):
    K-major, the stage is ``rows x BK``; MN-major, it is ``rows / 64`` boxes of ``BK x 64``."""
    if major == "k":
        A.assert_tag(stage, lambda _s, r, kk, tg: tg == (row + r, k + kk), message)
    else:
        A.assert_tag(stage, lambda _s, q, kk, r, tg: tg == (row + 64 * q + r, k + kk), message)


def _k_step(stage: Any, major: str, rows: int, index: Any, ks: Any) -> Any:
    """Rows ``index·rows ..`` of K step ``ks`` (16 k) of a stage, the ``rows x 16`` wgmma operand.

    K-major: a tile of the ``rows x BK`` stage.  MN-major: the ``rows / 64`` boxes of ``BK x 64``
    that hold the rows, 16 K-rows of each, seen as one ``rows x 16`` view (row ``r`` is column
    ``r % 64`` of box ``r // 64``), which wgmma reads through an MN-major descriptor."""
    if major == "k":
        return stage.tile((rows, 16), (index, ks))
    return stage.tile((rows // 64, 16, 64), (index, ks, 0)).permute((2, 0), 1)


def _epilogue(how: str, tout: Any, bn: int) -> str:
    """The epilogue a specialization uses: ``"tma"`` (C through shared memory and TMA stores in
    boxes 128 bytes wide, overlapping the next tile) or ``"direct"`` (vector stores from
    registers); ``"auto"`` picks TMA where it applies (BN a multiple of the box width: 64
    16-bit or 32 fp32 columns)."""
    tma_ok = bn % _box_width(tout) == 0
    if how == "auto":
        return "tma" if tma_ok else "direct"
    if how == "tma" and not tma_ok:
        raise GemmError(f"EPILOGUE='tma' needs BN a multiple of {_box_width(tout)} (TMA boxes of C are "
                        "128 bytes wide)",
                        hint="use EPILOGUE='direct' or 'auto'")
    if how == "deferred" and not tma_ok:
        raise GemmError(f"EPILOGUE='deferred' needs BN a multiple of {_box_width(tout)} (TMA boxes of C are "
                        "128 bytes wide)", hint="use EPILOGUE='direct' or 'auto'")
    if how not in ("tma", "direct", "deferred"):
        raise GemmError(f"EPILOGUE={how!r}: use 'auto', 'tma', 'deferred' or 'direct'")
    return how


def _release(empty: Any, remote: Any, s: Any, how: str) -> None:
    """The consumers give stage ``s`` back to the producer once their wgmmas reading it retired
    (on a 2-block cluster, also to the peer's producer, whose multicast writes into this block's
    stage: ``remote`` is the peer's ``empty`` array).

    ``"threads"``: each of the 256 consumer threads arrives (the barrier counts 256 per block).
    ``"warpgroups"``: the consumer threads meet at named barrier 1 — every thread's
    ``wgmma_wait`` happens before it — and one thread arrives (the barrier counts 1 per block)."""
    if how == "threads":
        A.arrive(empty[s])
        if remote is not None:
            A.arrive(remote[s])
    elif how == "warpgroups":
        A.named_barrier(1, 256)
        A.arrive(empty[s], elected=128)
        if remote is not None:
            A.arrive(remote[s], elected=128)
    else:
        raise GemmError(f"RELEASE={how!r}: use 'threads' or 'warpgroups'")


@functools.cache
def _box_writer() -> Any:
    """``_store_box`` with its run-time ``if`` rewritten into a traced branch."""
    from argus.spec import ops
    from argus.spec.rewrite import rewrite_kernel_body

    return rewrite_kernel_body(_store_box, ops.REWRITE_HELPERS)


@functools.cache
def _traced_body() -> Any:
    """``_gemm_body`` with its run-time ``if`` statements rewritten into traced branches."""
    from argus.spec import ops
    from argus.spec.rewrite import rewrite_kernel_body

    return rewrite_kernel_body(_gemm_body, ops.REWRITE_HELPERS)


def _unmasked(t: Any) -> Any:
    """``t`` without its validity predicate: for a tile the enclosing branch proved interior
    (the bounds are then obligations of the verifier instead of run-time predicates)."""
    from argus.ir import nodes as N
    from argus.spec.tensor import Tensor

    v = t.view
    return Tensor(N.View(v.buffer, v.layout, v.offset, v.coord_symbols, v.coords, None, v.swizzle))


def _broadcast_rows(vector: Any, rows: Any) -> Any:
    """The ``rows x N`` view of an ``N`` vector in which every row is the vector (row stride 0)."""
    from argus.ir import nodes as N
    from argus.layout_algebra import Layout
    from argus.spec.tensor import COORDS, Tensor

    (n,) = vector.shape
    view = vector.view
    return Tensor(N.View(view.buffer, Layout((rows, n), (0, 1)), view.offset, COORDS[:2], (COORDS[1],), None,
                         view.swizzle))


def _box_width(tout: Any) -> int:
    """Columns of C in one TMA box of the epilogue: a box row is 128 bytes (the swizzle span)."""
    return 128 // tout.itemsize


def tuned_picks() -> list[GemmConfig]:
    """Every configuration :func:`tuned_config` may return (in ``CANDIDATES`` order): a shape's
    recorded pick or its class's (one tile row, or more).  The gate builds a specialization only
    from its proof record, so each of these needs one for every type, epilogue and layout."""
    picks = {*TUNED.values(), tuned_config(BM, 1, 1), tuned_config(BM + 1, 1, 1)}
    return [c for c in CANDIDATES if c in picks] + sorted((c for c in picks if c not in CANDIDATES), key=repr)
