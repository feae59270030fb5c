"""Thread-value layouts of the hardware instruction atoms, as data.

An atom is one hardware instruction that a group of threads executes together (a warp's
``mma.sync``, a warpgroup's ``wgmma``, a wavefront's MFMA, a warp's ``ldmatrix``).  Its
operands are spread over the threads' registers; a *TV layout* says where:

    ``tv(thread, value) == column-major offset of the element in the operand tile``

where ``value`` is the index of the element in the thread's fragment (registers in order,
low half first inside a packed register).  Tile conventions, the same for every MMA atom:

==========  =============  ==========================================================
operand     tile shape     offset of element ``(i, j)``
==========  =============  ==========================================================
``a``       ``(M, K)``     ``m + M * k``
``b``       ``(N, K)``     ``n + N * k``   (B is viewed N x K, like A is M x K)
``c``       ``(M, N)``     ``m + M * n``   (accumulator C and result D)
==========  =============  ==========================================================

``atom_tv_layouts(name)`` returns an :class:`MmaAtom` or a :class:`MatrixCopyAtom`; every TV
layout here is a bijection onto its tile (checked exhaustively by the tests), and each
definition cites the vendor section it transcribes.  The DSL's atom registry, the reference
interpreter, the verifier and the backends all read these objects, so they hold layouts only,
no behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from argus.layout_algebra.int_tuple import idx2crd
from argus.layout_algebra.layout import Layout, LayoutError
from argus.layout_algebra.tiling import ThreadValueLayout

__all__ = [
    "MatrixCopyAtom",
    "MmaAtom",
    "atom_names",
    "atom_tv_layouts",
    "ldmatrix_atom",
    "mfma_atom",
    "mma_sync_m16n8k16",
    "stmatrix_atom",
    "wgmma_m64nNk16",
]


@dataclass(frozen=True)
class MmaAtom:
    """The operand layouts of one matrix multiply-accumulate instruction ``D = A * B + C``.

    ``a``, ``b``, ``c`` are TV layouts ``(thread, value) -> tile offset`` (see the module
    docstring for the tile conventions).  An operand read from shared memory through a
    descriptor (``wgmma``'s B, and A in the ``.ss`` form) has no TV layout: its entry is
    ``None`` and ``*_in_shared_memory`` is true.  ``source`` names the vendor document sections
    the layouts transcribe.
    """

    name: str
    arch: str
    m: int
    n: int
    k: int
    threads: int
    a: Layout | None
    b: Layout | None
    c: Layout
    a_type: str
    b_type: str
    c_type: str
    source: str

    @property
    def mnk(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def a_tile(self) -> tuple[int, int]:
        """``(M, K)``."""
        return (self.m, self.k)

    @property
    def b_tile(self) -> tuple[int, int]:
        """``(N, K)``: B is viewed N x K."""
        return (self.n, self.k)

    @property
    def c_tile(self) -> tuple[int, int]:
        """``(M, N)``."""
        return (self.m, self.n)

    @property
    def a_in_shared_memory(self) -> bool:
        return self.a is None

    @property
    def b_in_shared_memory(self) -> bool:
        return self.b is None

    def operand(self, which: str) -> Layout | None:
        """The TV layout of operand ``"a"``, ``"b"`` or ``"c"`` (``"d"`` is the same as c)."""
        match which:
            case "a":
                return self.a
            case "b":
                return self.b
            case "c" | "d":
                return self.c
            case _:
                raise LayoutError(f"{self.name}: no operand {which!r}", hint="use a, b, c or d")

    def tile(self, which: str) -> tuple[int, int]:
        """The tile shape of operand ``which``."""
        match which:
            case "a":
                return self.a_tile
            case "b":
                return self.b_tile
            case "c" | "d":
                return self.c_tile
            case _:
                raise LayoutError(f"{self.name}: no operand {which!r}", hint="use a, b, c or d")

    def tv(self, which: str) -> ThreadValueLayout:
        """Operand ``which`` as a :class:`ThreadValueLayout` over its tile (to partition tensors)."""
        layout = self.operand(which)
        if layout is None:
            raise LayoutError(f"{self.name}: operand {which} is read from shared memory")
        return ThreadValueLayout(layout, self.tile(which))

    def values_per_thread(self, which: str) -> int:
        """Fragment length of one thread for operand ``which`` (0 for shared-memory operands)."""
        layout = self.operand(which)
        return 0 if layout is None else layout.size // self.threads

    def coordinate(self, which: str, thread: Any, value: Any) -> tuple[Any, Any]:
        """The tile coordinate ``(row, column)`` of a thread's value; symbolic inputs allowed."""
        layout = self.operand(which)
        if layout is None:
            raise LayoutError(f"{self.name}: operand {which} is read from shared memory")
        return idx2crd(layout(thread, value), self.tile(which))


@dataclass(frozen=True)
class MatrixCopyAtom:
    """A warp-wide 8x8 matrix load/store (``ldmatrix`` / ``stmatrix``, 16-bit elements).

    The tile is the stack of ``matrices`` 8x8 matrices, shape ``(8, 8, matrices)`` =
    ``(row, column, matrix)``, offset ``row + 8 * column + 64 * matrix``.  Each matrix row is 16
    contiguous bytes in shared memory whose address one thread supplies.

    * ``fragment``: TV layout ``(thread, value) -> tile offset`` of the registers (value
      ``e + 2 * j`` is half ``e`` of register ``j``, register ``j`` holding matrix ``j``);
    * ``row_addresses``: ``thread -> tile offset of the row start`` for the ``8 * matrices``
      threads that supply addresses (thread ``8 * j + r`` gives row ``r`` of matrix ``j``).
    """

    name: str
    arch: str
    direction: str  # "load" (shared -> registers) or "store" (registers -> shared)
    matrices: int
    transposed: bool
    threads: int
    fragment: Layout
    row_addresses: Layout
    element_bytes: int
    source: str

    @property
    def tile(self) -> tuple[int, int, int]:
        return (8, 8, self.matrices)

    @property
    def values_per_thread(self) -> int:
        return self.fragment.size // self.threads

    def coordinate(self, thread: Any, value: Any) -> tuple[Any, Any, Any]:
        """``(row, column, matrix)`` of a thread's value."""
        return idx2crd(self.fragment(thread, value), self.tile)


# --------------------------------------------------------------------------- NVIDIA mma.sync

_MMA_SYNC_SOURCE = (
    "PTX ISA 9.7.14.5.8 'Matrix Fragments for mma.m16n8k16 with floating point type' "
    "(A: a0..a7, B: b0..b3, C/D: c0..c3; groupID = laneid >> 2, threadID_in_group = laneid % 4)"
)


def mma_sync_m16n8k16(input_type: str) -> MmaAtom:
    """``mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32`` on one warp.

    PTX ISA 9.7.14.5.8: with ``g = lane >> 2`` and ``t = lane % 4``,
    ``a_i`` sits at row ``g + 8 * ((i >> 1) & 1)``, column ``2t + (i & 1) + 8 * (i >> 2)``;
    ``b_i`` at row (k) ``2t + (i & 1) + 8 * (i >> 1)``, column (n) ``g``;
    ``c_i`` at row ``g + 8 * (i >> 1)``, column ``2t + (i & 1)``.
    The thread mode is ``(t, g)`` = ``(4, 8)``.
    """
    if input_type not in ("bf16", "f16"):
        raise LayoutError(f"mma.sync.m16n8k16: input type {input_type!r} is not bf16 or f16")
    return MmaAtom(
        name=f"mma.sync.m16n8k16.{input_type}",
        arch="sm_80",
        m=16,
        n=8,
        k=16,
        threads=32,
        a=Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
        b=Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))),
        c=Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))),
        a_type=input_type,
        b_type=input_type,
        c_type="f32",
        source=_MMA_SYNC_SOURCE,
    )


# --------------------------------------------------------------------------- NVIDIA wgmma

_WGMMA_SOURCE = (
    "PTX ISA 9.7.15.5.1.1.1 'Matrix Fragments for wgmma.mma_async.m64nNk16' (Figure 148: A in "
    "registers, Figure 149: accumulator D); warp w of the warpgroup owns rows 16w..16w+15 with "
    "the m16n8k16 pattern of 9.7.14.5.8"
)


def wgmma_m64nNk16(n: int, input_type: str, a_in_registers: bool = False) -> MmaAtom:
    """``wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}`` on one warpgroup (128 threads).

    Accumulator D (PTX ISA 9.7.15.5.1.1.1, Figure 149): thread ``T`` = ``32w + 4g + t`` holds
    ``d_i`` at row ``16w + g + 8 * ((i >> 1) & 1)``, column ``8 * (i >> 2) + 2t + (i & 1)``,
    ``N / 2`` values.  A from registers (Figure 148): ``a_i`` at row ``16w + g + 8*((i>>1)&1)``,
    column ``2t + (i & 1) + 8 * (i >> 2)``.  B, and A in the ``.ss`` form, come from shared memory
    through descriptors (see :mod:`argus.layout_algebra.hopper`).
    """
    if input_type not in ("bf16", "f16"):
        raise LayoutError(f"wgmma.m64nNk16: input type {input_type!r} is not bf16 or f16")
    if not (isinstance(n, int) and 8 <= n <= 256 and n % 8 == 0):
        raise LayoutError(
            f"wgmma.m64nNk16: N = {n!r} is not a multiple of 8 in [8, 256]",
            hint="PTX ISA 9.7.15.5.1.1.1: N = 8 * i for i = 1..32",
        )
    a = Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512))) if a_in_registers else None
    suffix = ".rs" if a_in_registers else ""
    return MmaAtom(
        name=f"wgmma.m64n{n}k16.{input_type}{suffix}",
        arch="sm_90a",
        m=64,
        n=n,
        k=16,
        threads=128,
        a=a,
        b=None,
        c=Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512))),
        a_type=input_type,
        b_type=input_type,
        c_type="f32",
        source=_WGMMA_SOURCE,
    )


# --------------------------------------------------------------------------- ldmatrix / stmatrix

_LDMATRIX_SOURCE = (
    "PTX ISA 9.7.14.5.15 'ldmatrix' (.m8n8 .b16: threads 8j..8j+7 supply the row addresses of "
    "matrix j; thread t receives row t/4, columns 2(t%4) and 2(t%4)+1 of each matrix, "
    "Figure 104; .trans loads the matrix in column-major order)"
)
_STMATRIX_SOURCE = (
    "PTX ISA 9.7.14.5.16 'stmatrix' (.m8n8 .b16: same address and fragment layout as ldmatrix, "
    "Figure 107; .trans stores in column-major order)"
)


def _matrix_copy(direction: str, matrices: int, transposed: bool) -> MatrixCopyAtom:
    if matrices not in (1, 2, 4):
        raise LayoutError(f"{direction} m8n8: .x{matrices} is not .x1, .x2 or .x4")
    if transposed:
        # thread t holds rows 2(t%4)+e of column t/4: offset (2(t%4)+e) + 8 * (t/4) + 64 j
        fragment = Layout(((4, 8), (2, matrices)), ((2, 8), (1, 64)))
    else:
        # thread t holds row t/4, columns 2(t%4)+e: offset t/4 + 8 * (2(t%4)+e) + 64 j
        fragment = Layout(((4, 8), (2, matrices)), ((16, 1), (8, 64)))
    op = "ldmatrix" if direction == "load" else "stmatrix"
    trans = ".trans" if transposed else ""
    return MatrixCopyAtom(
        name=f"{op}.m8n8.x{matrices}{trans}.b16",
        arch="sm_75" if direction == "load" else "sm_90",
        direction=direction,
        matrices=matrices,
        transposed=transposed,
        threads=32,
        fragment=fragment,
        row_addresses=Layout((8, matrices), (1, 64)),
        element_bytes=2,
        source=_LDMATRIX_SOURCE if direction == "load" else _STMATRIX_SOURCE,
    )


def ldmatrix_atom(matrices: int, transposed: bool = False) -> MatrixCopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16``."""
    return _matrix_copy("load", matrices, transposed)


def stmatrix_atom(matrices: int, transposed: bool = False) -> MatrixCopyAtom:
    """``stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16`` (sm_90)."""
    return _matrix_copy("store", matrices, transposed)


# --------------------------------------------------------------------------- AMD MFMA (gfx942)

_MFMA_SOURCE = (
    "AMD Instinct MI300 (CDNA3) ISA, chapter 7 'Matrix Arithmetic Instructions' (MFMA operand "
    "layouts, wave64); A: lane l holds row l % M, k = kpl * (l // M) + v; B likewise with "
    "column l % N; D: column l % N, row (for 32x32) 8*(r//4) + 4*(l//32) + r%4, (for 16x16) "
    "4*(l//16) + r"
)

#: CDNA3 element type names: fp8 = E4M3FNUZ, bf8 = E5M2FNUZ.
_MFMA_TYPES = {"bf16": "bf16", "f16": "f16", "fp8": "e4m3fnuz", "bf8": "e5m2fnuz"}


def mfma_atom(name: str) -> MmaAtom:
    """A gfx942 MFMA by mnemonic, e.g. ``v_mfma_f32_32x32x8_bf16`` or ``v_mfma_f32_16x16x32_fp8_fp8``.

    Supported: ``32x32x8`` and ``16x16x16`` with ``bf16``/``f16`` inputs (4 per lane),
    ``32x32x16`` and ``16x16x32`` with ``fp8``/``bf8`` inputs (8 per lane, each operand type
    independent); f32 accumulators; single block (no CBSZ/ABID/BLGP broadcast).
    """
    match = re.fullmatch(r"v_mfma_f32_(\d+)x(\d+)x(\d+)_(bf16|f16|fp8|bf8)(?:_(fp8|bf8))?", name)
    if match is None:
        raise LayoutError(f"{name!r} is not a supported gfx942 MFMA mnemonic")
    m, n, k = (int(match.group(i)) for i in (1, 2, 3))
    a_type = match.group(4)
    b_type = match.group(5) or a_type
    eight_bit = a_type in ("fp8", "bf8")
    if eight_bit != (match.group(5) is not None) or (eight_bit and b_type not in ("fp8", "bf8")):
        raise LayoutError(f"{name!r}: fp8/bf8 MFMAs name both input types (e.g. _fp8_fp8)")
    per_lane = 8 if eight_bit else 4
    if (m, n, k) not in ((32, 32, 2 * per_lane), (16, 16, 4 * per_lane)):
        raise LayoutError(
            f"{name!r}: {m}x{n}x{k} is not a gfx942 shape for {a_type} inputs",
            hint="bf16/f16: 32x32x8, 16x16x16; fp8/bf8: 32x32x16, 16x16x32",
        )
    groups = 64 // m  # lane groups along K: 2 for 32x32, 4 for 16x16
    # A: lane l, value v -> (row l % M, k = per_lane * (l // M) + v): offset l%M + M*k
    operand = Layout(((m, groups), per_lane), ((1, m * per_lane), m))
    if m == 32:
        # D: lane l, value r -> (row 8*(r//4) + 4*(l//32) + r%4, column l%32)
        accumulator = Layout(((32, 2), (4, 4)), ((32, 4), (1, 8)))
    else:
        # D: lane l, value r -> (row 4*(l//16) + r, column l%16)
        accumulator = Layout(((16, 4), 4), ((16, 4), 1))
    return MmaAtom(
        name=name,
        arch="gfx942",
        m=m,
        n=n,
        k=k,
        threads=64,
        a=operand,
        b=operand,
        c=accumulator,
        a_type=_MFMA_TYPES[a_type],
        b_type=_MFMA_TYPES[b_type],
        c_type="f32",
        source=_MFMA_SOURCE,
    )


# --------------------------------------------------------------------------- registry

_WGMMA_NAME = re.compile(r"wgmma\.m64n(\d+)k16\.(bf16|f16)(\.rs)?")
_MATRIX_COPY_NAME = re.compile(r"(ldmatrix|stmatrix)\.m8n8\.x(\d)(\.trans)?\.b16")

_MFMA_NAMES = (
    "v_mfma_f32_32x32x8_bf16",
    "v_mfma_f32_32x32x8_f16",
    "v_mfma_f32_16x16x16_bf16",
    "v_mfma_f32_16x16x16_f16",
    *(
        f"v_mfma_f32_{shape}_{a}_{b}"
        for shape in ("32x32x16", "16x16x32")
        for a in ("fp8", "bf8")
        for b in ("fp8", "bf8")
    ),
)


def atom_names() -> tuple[str, ...]:
    """Every name :func:`atom_tv_layouts` accepts."""
    names = [f"mma.sync.m16n8k16.{t}" for t in ("bf16", "f16")]
    names += [
        f"wgmma.m64n{n}k16.{t}{rs}"
        for t in ("bf16", "f16")
        for rs in ("", ".rs")
        for n in range(8, 257, 8)
    ]
    names += [
        f"{op}.m8n8.x{q}{trans}.b16"
        for op in ("ldmatrix", "stmatrix")
        for q in (1, 2, 4)
        for trans in ("", ".trans")
    ]
    names += list(_MFMA_NAMES)
    return tuple(names)


def _build(name: str) -> MmaAtom | MatrixCopyAtom:
    builders: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Any]]] = [
        (re.compile(r"mma\.sync\.m16n8k16\.(bf16|f16)"), lambda m: mma_sync_m16n8k16(m.group(1))),
        (
            _WGMMA_NAME,
            lambda m: wgmma_m64nNk16(int(m.group(1)), m.group(2), m.group(3) is not None),
        ),
        (
            _MATRIX_COPY_NAME,
            lambda m: _matrix_copy(
                "load" if m.group(1) == "ldmatrix" else "store",
                int(m.group(2)),
                m.group(3) is not None,
            ),
        ),
    ]
    for pattern, build in builders:
        match = pattern.fullmatch(name)
        if match is not None:
            return build(match)
    if name in _MFMA_NAMES:
        return mfma_atom(name)
    raise LayoutError(
        f"unknown instruction atom {name!r}",
        hint="argus.layout_algebra.atom_names() lists the known atoms",
    )


@cache
def atom_tv_layouts(name: str) -> MmaAtom | MatrixCopyAtom:
    """The layouts of the atom called ``name`` (see :func:`atom_names`).

    Examples: ``"mma.sync.m16n8k16.bf16"``, ``"wgmma.m64n128k16.bf16"`` (A and B in shared
    memory), ``"wgmma.m64n128k16.bf16.rs"`` (A in registers), ``"ldmatrix.m8n8.x4.trans.b16"``,
    ``"v_mfma_f32_32x32x8_bf16"``, ``"v_mfma_f32_16x16x32_fp8_fp8"``.
    """
    return _build(name)
