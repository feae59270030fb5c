"""The atom registry: one table of hardware instruction atoms that every layer reads.

An *atom* is one hardware instruction the DSL exposes: a matrix multiply-accumulate
(``mma.sync``, ``wgmma``, MFMA) or a copy (plain loads and stores, ``cp.async``, TMA,
``buffer_load``, ``ldmatrix``/``stmatrix``, direct-to-LDS loads).  For each atom name the
registry states, once:

* **layouts** — the thread-value layouts of its operands (from
  :mod:`argus.layout_algebra.atoms`; ``None`` for copies without a fixed fragment layout);
* **scope** — who executes it together (a thread, a warp of 32, a warpgroup of 128, an AMD
  wavefront of 64) and whether one elected thread issues it;
* **async class** — how its completion is observed (synchronous, the issuing thread's
  cp.async group, an mbarrier's transaction count, a wgmma group, a bulk async group);
* **types and numerics** — operand element types and the accumulation type of an MMA
  (the reference semantics is :func:`argus.ir.numerics.mma`: a k-ordered chain of fused
  multiply-adds rounded to the accumulator type);
* **lowering facts** per target — the PTX or AMDGCN mnemonic, the alignment argus proves
  for every access, and the widths one thread moves per instruction.

The DSL front end checks operands against these entries, the reference interpreter executes
them, the verifier emits their side conditions and the backends select instructions from
them: no layer keeps its own copy of these facts.

>>> copy_atom("cp.async.16").async_class
<AsyncClass.CP_ASYNC_GROUP: 'cp.async.group'>
>>> mma_atom("mma.sync.m16n8k16.bf16").mnk
(16, 8, 16)
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from argus.errors import ArgusError
from argus.ir import dtypes as D
from argus.ir.nodes import HandleKind, MemorySpace, Scope
from argus.layout_algebra.atoms import MatrixCopyAtom, MmaAtom, atom_tv_layouts
from argus.layout_algebra.atoms import atom_names as _layout_atom_names

__all__ = [
    "AsyncClass",
    "AtomError",
    "AtomScope",
    "CopyAtomSpec",
    "Lowering",
    "MmaAtomSpec",
    "atom",
    "atom_names",
    "copy_atom",
    "mma_atom",
]

G, S, R = MemorySpace.GLOBAL, MemorySpace.SHARED, MemorySpace.REGISTER


class AtomError(ArgusError):
    """An atom name that the registry does not know, or an atom used in the wrong role."""


class AtomScope(enum.Enum):
    """The threads that execute one instance of an atom together."""

    THREAD = "thread"
    WARP = "warp"  # 32 threads (NVIDIA)
    WARPGROUP = "warpgroup"  # 4 consecutive warps, 128 threads, first warp a multiple of 4
    WAVE64 = "wave64"  # an AMD wavefront of 64 lanes (gfx942)

    @property
    def threads(self) -> int:
        return {"thread": 1, "warp": 32, "warpgroup": 128, "wave64": 64}[self.value]

    @property
    def ir_scope(self) -> Scope:
        """The IR's :class:`~argus.ir.nodes.Scope` (a wavefront is the AMD warp)."""
        return {"thread": Scope.THREAD, "warp": Scope.WARP, "warpgroup": Scope.WARPGROUP,
                "wave64": Scope.WARP}[self.value]


class AsyncClass(enum.Enum):
    """How the completion of an atom is observed."""

    SYNC = "sync"  # complete when the instruction returns (program order)
    CP_ASYNC_GROUP = "cp.async.group"  # the issuing thread's commit / wait_group
    MBARRIER_TX = "mbarrier.tx"  # bytes counted on an mbarrier phase (complete_tx)
    WGMMA_GROUP = "wgmma.group"  # wgmma.commit_group / wgmma.wait_group
    BULK_GROUP = "bulk.group"  # cp.async.bulk.commit_group / wait_group (TMA stores)

    @property
    def handle_kind(self) -> HandleKind | None:
        """The IR handle kind that completes it (``None`` for synchronous atoms)."""
        return {
            "sync": None,
            "cp.async.group": HandleKind.CP_ASYNC_GROUP,
            "mbarrier.tx": HandleKind.MBARRIER_PHASE,
            "wgmma.group": HandleKind.WGMMA_GROUP,
            "bulk.group": HandleKind.TMA_STORE_GROUP,
        }[self.value]


@dataclass(frozen=True)
class Lowering:
    """How one target implements an atom.

    ``mnemonic`` is the instruction (``{v}`` stands for the vector suffix chosen from
    ``vector_bytes``, e.g. ``.v4`` / ``x4``); ``alignment`` is the byte alignment argus
    proves for every access (0: not an addressed access; ``"width"`` rules are written as
    ``alignment == -1``: each access is aligned to its own width); ``vector_bytes`` are the
    widths one thread moves per instruction; ``registers`` the 32-bit registers per thread
    of MMA operands ``(a, b, c)`` (0 for an operand read from shared memory).
    """

    target: str  # "sm_90a" or "gfx942"
    mnemonic: str
    alignment: int = 0
    vector_bytes: tuple[int, ...] = ()
    registers: tuple[int, int, int] | None = None
    min_arch: str = ""

    WIDTH = -1  # alignment sentinel: aligned to the access width


@dataclass(frozen=True)
class MmaAtomSpec:
    """A matrix multiply-accumulate atom ``D = A·B + C`` (C and D share registers).

    Tile conventions are those of :mod:`argus.layout_algebra.atoms`: A is M×K (offset
    ``m + M*k``), B is viewed N×K (offset ``n + N*k``), C/D is M×N (offset ``m + M*n``).
    ``a_source``/``b_source`` say where each operand lives (``"registers"``, or ``"shared"``
    for wgmma operands read through a shared-memory descriptor).
    """

    name: str
    layouts: MmaAtom
    scope: AtomScope
    async_class: AsyncClass
    a_dtype: D.DType
    b_dtype: D.DType
    acc_dtype: D.DType
    a_source: str
    b_source: str
    lowering: Lowering
    family: str  # "mma.sync", "wgmma", "mfma"

    kind = "mma"

    @property
    def target(self) -> str:
        return self.lowering.target

    @property
    def m(self) -> int:
        return self.layouts.m

    @property
    def n(self) -> int:
        return self.layouts.n

    @property
    def k(self) -> int:
        return self.layouts.k

    @property
    def mnk(self) -> tuple[int, int, int]:
        return self.layouts.mnk

    @property
    def threads(self) -> int:
        return self.layouts.threads

    def dtype(self, which: str) -> D.DType:
        """Element type of operand ``"a"``, ``"b"``, ``"c"`` or ``"d"``."""
        return {"a": self.a_dtype, "b": self.b_dtype, "c": self.acc_dtype, "d": self.acc_dtype}[which]

    def source(self, which: str) -> str:
        return {"a": self.a_source, "b": self.b_source}.get(which, "registers")

    def values_per_thread(self, which: str) -> int:
        """Fragment length of one thread (0 for a shared-memory operand)."""
        return self.layouts.values_per_thread(which)

    def tile(self, which: str) -> tuple[int, int]:
        return self.layouts.tile(which)


@dataclass(frozen=True)
class CopyAtomSpec:
    """A copy atom: moves elements from ``src_spaces`` to ``dst_spaces``.

    ``zero_fill``: elements that are masked off or out of range are written with zero (a
    predicated-off ``cp.async``, the out-of-bounds part of a TMA box, a ``buffer_load`` past
    the buffer's ``num_records``); otherwise they are not written.  ``elected``: one thread
    issues the copy for the whole tile (TMA).  ``matrix`` holds the fragment layout of
    ``ldmatrix``/``stmatrix``.

    In the IR a matrix copy is a :class:`~argus.ir.nodes.Copy` of scope ``warp`` whose ``atom`` is
    ``ldmatrix.m8n8.x{1,2,4}[.trans].b16`` (``src`` a shared ``rows x columns`` tile, warp-uniform,
    ``dst`` the lane's ``(2, matrices)`` fragment) or ``stmatrix...`` (the reverse).  Matrix ``m``
    is the 8x8 block at block row ``m % (rows / 8)``, block column ``m // (rows / 8)`` of the tile;
    fragment value ``e + 2 m`` of lane ``l`` is element ``matrix.fragment(l, e + 2 m)`` (an offset
    ``row + 8 * column + 64 * m`` in the atom's tile, ``row`` being the 16-byte memory row).  To
    lower it, lane ``8 j + r`` supplies the address of row ``r`` of matrix ``j`` (for ``.x1``/``.x2``
    the upper lanes' addresses are ignored) and register ``j`` packs values ``2 j`` and ``2 j + 1``.

    ``access_bytes`` are the per-thread access widths allowed
    (each access aligned to its width) — empty when the atom has no per-thread access.
    """

    name: str
    scope: AtomScope
    async_class: AsyncClass
    src_spaces: frozenset[MemorySpace]
    dst_spaces: frozenset[MemorySpace]
    access_bytes: tuple[int, ...]
    zero_fill: bool
    elected: bool
    lowerings: tuple[Lowering, ...]
    matrix: MatrixCopyAtom | None = None
    doc: str = ""

    kind = "copy"

    @property
    def is_async(self) -> bool:
        return self.async_class is not AsyncClass.SYNC

    def lowering(self, target: str) -> Lowering:
        for lowering in self.lowerings:
            if lowering.target == target:
                return lowering
        raise AtomError(f"copy atom {self.name!r} has no lowering for {target}",
                        hint=f"it exists on: {', '.join(sg.target for sg in self.lowerings)}")


# --------------------------------------------------------------------------- copy atoms

_W = Lowering.WIDTH


def _copy_atoms() -> dict[str, CopyAtomSpec]:
    atoms: dict[str, CopyAtomSpec] = {}

    def add(spec: CopyAtomSpec) -> None:
        atoms[spec.name] = spec

    add(CopyAtomSpec(
        "sync", AtomScope.THREAD, AsyncClass.SYNC, frozenset({G, S, R}), frozenset({G, S, R}),
        (1, 2, 4, 8, 16), False, False,
        (Lowering("sm_90a", "ld{.space}{v}.b32 / st{.space}{v}.b32", _W, (1, 2, 4, 8, 16)),
         Lowering("gfx942", "global_load_dword{v} / ds_read_b{bits} / ds_write_b{bits} / global_store_dword{v}",
                  _W, (1, 2, 4, 8, 12, 16))),
        doc="ordinary loads and stores, complete in program order",
    ))
    add(CopyAtomSpec(
        "reg", AtomScope.THREAD, AsyncClass.SYNC, frozenset({R}), frozenset({R}), (), False, False,
        (Lowering("sm_90a", "mov.b32"), Lowering("gfx942", "v_mov_b32")),
        doc="register to register move (no memory access)",
    ))
    for width in (4, 8, 16):
        cache_op = "cg" if width == 16 else "ca"
        add(CopyAtomSpec(
            f"cp.async.{width}", AtomScope.THREAD, AsyncClass.CP_ASYNC_GROUP, frozenset({G}), frozenset({S}),
            (width,), True, False,
            (Lowering("sm_90a", f"cp.async.{cache_op}.shared.global [dst], [src], {width}, src_size",
                      width, (width,), min_arch="sm_80"),),
            doc=f"asynchronous {width}-byte global -> shared copy; src_size 0 zero-fills a masked-off access",
        ))
    add(CopyAtomSpec(
        "cp.async", AtomScope.THREAD, AsyncClass.CP_ASYNC_GROUP, frozenset({G}), frozenset({S}),
        (4, 8, 16), True, False,
        (Lowering("sm_90a", "cp.async.{ca|cg}.shared.global [dst], [src], {4|8|16}, src_size",
                  _W, (4, 8, 16), min_arch="sm_80"),),
        doc="cp.async with the widest width (4, 8 or 16 bytes) the access allows",
    ))
    add(CopyAtomSpec(
        "tma.load", AtomScope.THREAD, AsyncClass.MBARRIER_TX, frozenset({G}), frozenset({S}),
        (), True, True,
        (Lowering("sm_90a", "cp.async.bulk.tensor.{d}d.shared::cluster.global.tile"
                  ".mbarrier::complete_tx::bytes [dst], [tensor_map, coords], [mbar]", 128, (),
                  min_arch="sm_90"),),
        doc="bulk tensor copy of a box; out-of-bounds box elements arrive as zero and count as bytes",
    ))
    add(CopyAtomSpec(
        "tma.store", AtomScope.THREAD, AsyncClass.BULK_GROUP, frozenset({S}), frozenset({G}),
        (), False, True,
        (Lowering("sm_90a", "cp.async.bulk.tensor.{d}d.global.shared::cta.tile.bulk_group "
                  "[tensor_map, coords], [src]", 128, (), min_arch="sm_90"),),
        doc="bulk tensor store of a box; out-of-bounds elements are not written",
    ))
    add(CopyAtomSpec(
        "buffer.load", AtomScope.THREAD, AsyncClass.SYNC, frozenset({G}), frozenset({R}),
        (1, 2, 4, 8, 12, 16), True, False,
        (Lowering("gfx942", "buffer_load_{ubyte|ushort|dword{v}} v, v_offset, s[rsrc:rsrc+3], 0 offen",
                  _W, (1, 2, 4, 8, 12, 16)),),
        doc="load through a buffer resource; an offset past num_records reads 0",
    ))
    add(CopyAtomSpec(
        "buffer.load.lds", AtomScope.WAVE64, AsyncClass.SYNC, frozenset({G}), frozenset({S}),
        (4,), True, False,
        (Lowering("gfx942", "buffer_load_dword v_offset, s[rsrc:rsrc+3], 0 offen lds", 4, (4,)),),
        doc="direct global -> LDS load: lane l writes the dword at M0 + 4*l; out-of-range reads 0",
    ))
    for op in ("ldmatrix", "stmatrix"):
        for count in (1, 2, 4):
            for trans in ("", ".trans"):
                name = f"{op}.m8n8.x{count}{trans}.b16"
                layouts = atom_tv_layouts(name)
                load = op == "ldmatrix"
                add(CopyAtomSpec(
                    name, AtomScope.WARP, AsyncClass.SYNC, frozenset({S} if load else {R}),
                    frozenset({R} if load else {S}), (16,), False, False,
                    (Lowering("sm_90a", f"{op}.sync.aligned.m8n8.x{count}{trans}.shared.b16", 16, (16,),
                              min_arch=layouts.arch),),
                    matrix=layouts,
                    doc=f"warp-wide {'load' if load else 'store'} of {count} 8x8 16-bit matrices; each row is "
                        "16 contiguous bytes whose address one thread supplies",
                ))
    atoms["lds.direct"] = atoms["buffer.load.lds"]
    return atoms


_COPY_ATOMS = _copy_atoms()

# --------------------------------------------------------------------------- MMA atoms

_MFMA = re.compile(r"v_mfma_f32_(\d+)x(\d+)x(\d+)_")


def _registers(layouts: MmaAtom, dtypes: tuple[D.DType, D.DType, D.DType]) -> tuple[int, int, int]:
    regs = []
    for which, dt in zip("abc", dtypes):
        values = layouts.values_per_thread(which)
        regs.append(values * dt.bits // 32)
    return (regs[0], regs[1], regs[2])


def _mma_spec(name: str) -> MmaAtomSpec:
    layouts = atom_tv_layouts(name)
    assert isinstance(layouts, MmaAtom)
    a, b, c = D.dtype(layouts.a_type), D.dtype(layouts.b_type), D.dtype(layouts.c_type)
    regs = _registers(layouts, (a, b, c))
    if name.startswith("mma.sync"):
        lowering = Lowering("sm_90a", f"mma.sync.aligned.m16n8k16.row.col.f32.{a.name}.{a.name}.f32",
                            registers=regs, min_arch="sm_80")
        return MmaAtomSpec(name, layouts, AtomScope.WARP, AsyncClass.SYNC, a, b, c, "registers", "registers",
                           lowering, "mma.sync")
    if name.startswith("wgmma"):
        a_source = "shared" if layouts.a_in_shared_memory else "registers"
        lowering = Lowering("sm_90a", f"wgmma.mma_async.sync.aligned.m64n{layouts.n}k16.f32.{a.name}.{b.name}",
                            alignment=16, registers=regs, min_arch="sm_90a")
        return MmaAtomSpec(name, layouts, AtomScope.WARPGROUP, AsyncClass.WGMMA_GROUP, a, b, c, a_source,
                           "shared", lowering, "wgmma")
    # gfx942 MFMA: A and B in VGPRs, C/D in AGPRs or VGPRs; completion is tracked by the
    # hardware's dependency checks and s_nop/s_waitcnt rules that the backend inserts.
    lowering = Lowering("gfx942", name, registers=regs, min_arch="gfx940")
    return MmaAtomSpec(name, layouts, AtomScope.WAVE64, AsyncClass.SYNC, a, b, c, "registers", "registers",
                       lowering, "mfma")


_MMA_NAMES = tuple(n for n in _layout_atom_names() if not n.startswith(("ldmatrix", "stmatrix")))


# --------------------------------------------------------------------------- lookup


def atom_names(kind: str | None = None) -> tuple[str, ...]:
    """Every registered atom name (``kind`` = ``"mma"`` or ``"copy"`` to select one kind)."""
    names: list[str] = []
    if kind in (None, "copy"):
        names += list(_COPY_ATOMS)
    if kind in (None, "mma"):
        names += list(_MMA_NAMES)
    return tuple(names)


@cache
def _mma_cached(name: str) -> MmaAtomSpec:
    return _mma_spec(name)


def mma_atom(name: str | MmaAtomSpec) -> MmaAtomSpec:
    """The MMA atom called ``name`` (``"mma.sync.m16n8k16.bf16"``, ``"wgmma.m64n128k16.bf16"``,
    ``"wgmma.m64n64k16.f16.rs"``, ``"v_mfma_f32_32x32x8_bf16"`` ...)."""
    if isinstance(name, MmaAtomSpec):
        return name
    if name in _MMA_NAMES:
        return _mma_cached(name)
    if name in _COPY_ATOMS:
        raise AtomError(f"{name!r} is a copy atom, not an MMA atom", hint="use A.copy(..., atom=...) for copies")
    raise AtomError(f"unknown MMA atom {name!r}", hint=_suggest(name, _MMA_NAMES))


def copy_atom(name: str | CopyAtomSpec) -> CopyAtomSpec:
    """The copy atom called ``name`` (``"sync"``, ``"cp.async.16"``, ``"tma.load"`` ...)."""
    if isinstance(name, CopyAtomSpec):
        return name
    spec = _COPY_ATOMS.get(name)
    if spec is None:
        if name in _MMA_NAMES:
            raise AtomError(f"{name!r} is an MMA atom, not a copy atom", hint="use A.mma(atom, a, b, acc)")
        raise AtomError(f"unknown copy atom {name!r}", hint=_suggest(name, tuple(_COPY_ATOMS)))
    return spec


def atom(name: str) -> MmaAtomSpec | CopyAtomSpec:
    """The registry entry called ``name``, of either kind."""
    return copy_atom(name) if name in _COPY_ATOMS else mma_atom(name)


def _suggest(name: str, names: tuple[str, ...]) -> str:
    head = str(name).split(".")[0].split("_")[0]
    close = [n for n in names if n.startswith(head)][:6] or list(names[:6])
    return "known atoms include: " + ", ".join(close) + " (argus.ir.atoms.atom_names() lists all)"


def describe(name: str) -> dict[str, Any]:
    """A plain-data summary of an atom (for reports and the knowledge base)."""
    spec = atom(name)
    if isinstance(spec, MmaAtomSpec):
        return {"name": spec.name, "kind": "mma", "scope": spec.scope.value, "async": spec.async_class.value,
                "mnk": spec.mnk, "types": (spec.a_dtype.name, spec.b_dtype.name, spec.acc_dtype.name),
                "sources": (spec.a_source, spec.b_source), "target": spec.target,
                "mnemonic": spec.lowering.mnemonic, "registers": spec.lowering.registers}
    return {"name": spec.name, "kind": "copy", "scope": spec.scope.value, "async": spec.async_class.value,
            "src": sorted(s.value for s in spec.src_spaces), "dst": sorted(s.value for s in spec.dst_spaces),
            "access_bytes": spec.access_bytes, "zero_fill": spec.zero_fill, "elected": spec.elected,
            "targets": {lw.target: lw.mnemonic for lw in spec.lowerings}}
