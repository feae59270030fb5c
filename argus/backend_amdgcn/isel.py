"""Instruction selection for gfx942 from the lowered IR (:mod:`argus.ir.lowering`).

Every target-independent decision (per-element addresses and predicates, vector runs,
truncating division, uniformity, loop structure, the shared arena) is made by
:func:`argus.ir.lowering.lower_kernel`; this module only chooses gfx942 instructions:

* **Values.**  Block-uniform index expressions live in SGPRs (scalar ALU), per-lane ones in
  VGPRs (vector ALU); 64-bit address arithmetic where the facts do not prove 32 bits.  A
  register buffer of the IR is one virtual register tuple (16-bit elements packed two per
  dword, 8-bit four); MMA accumulators go to AGPRs (policy ``accumulators="agpr"``) or VGPRs.
* **Global memory.**  ``global_load``/``global_store`` with the tensor base (plus the uniform
  part of the address, in SGPRs) as ``saddr`` and a 32-bit per-lane byte offset, or a 64-bit
  per-lane address when the offset is not proved to fit; the ``buffer.load`` atom uses a
  buffer resource whose range is the tensor's size in **bytes** (a lane whose offset is out
  of range reads 0, which is how its masked-off elements are zero-filled).
* **LDS.**  ``ds_read``/``ds_write`` ``_b32/_b64/_b96/_b128`` with constant offsets folded into
  the instruction; the buffer's byte offset in the arena is the lowering's.
* **Predicates.**  A transfer's predicate becomes a lane mask (``v_cmp`` into an SGPR pair,
  ``s_cselect`` for uniform conjuncts) and an ``exec`` region (``s_and_saveexec_b64`` …
  ``s_mov_b64 exec``): lanes outside it neither read nor write, which is the IR's semantics
  of a masked copy (nothing written).  Divergent ``if``s are ``exec`` regions with an
  ``s_cbranch_execz`` skip, uniform ones scalar branches, loops scalar loops.
* **Cross-lane.**  Butterfly reductions use DPP ``quad_perm`` for lane masks 1, 2, 3,
  ``ds_swizzle`` (bit mode) for masks below 32 and ``ds_bpermute`` otherwise; shuffles use
  ``ds_bpermute``.
* **MFMA** ``v_mfma_f32_*`` with A/B in VGPRs and C/D in AGPRs or VGPRs.

Policies (:class:`Policy`): accumulator file, ``s_setprio`` around MFMA runs, a
scheduling hint that issues the LDS reads of a run of MFMAs before the MFMAs, and buffer
loads (out of range reads 0) in place of zero fills + exec-masked global loads.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from argus import symbolic
from argus.backend_amdgcn.descriptor import KernelArgument, kernel_arguments
from argus.backend_amdgcn.isa import (
    EMITTED_MNEMONICS,
    Imm,
    Inst,
    Item,
    Label,
    LabelRef,
    RegFile,
    RegRef,
    Special,
    VirtualReg,
    inst_class,
)
from argus.backend_amdgcn.program import MachineKernel
from argus.errors import ArgusError
from argus.ir import dtypes as D
from argus.ir import lowering as L
from argus.ir import nodes as N
from argus.ir.interpreter import _Compiled
from argus.ir.uniformity import Uniformity

__all__ = ["Policy", "UnsupportedError", "select"]

S, V, A = RegFile.SGPR, RegFile.VGPR, RegFile.AGPR
EXEC = Special("exec")
VCC = Special("vcc")
BUFFER_DWORD3 = 0x00020000  # gfx9 raw buffer: DATA_FORMAT=32, no swizzle, no stride
OUT_OF_RANGE = 0x80000000  # a buffer offset past any num_records
WAVE = 64  # lanes of a gfx942 wavefront
LDS_DIRECT = ("buffer.load.lds", "lds.direct")
M0 = Special("m0")


class UnsupportedError(ArgusError):
    """The kernel uses something the gfx942 backend does not emit (yet)."""


@dataclass(frozen=True)
class Policy:
    """Target policies of the gfx942 emitter.

    ``accumulators``: register file of MMA accumulators (``"agpr"`` or ``"vgpr"``);
    ``mfma_priority``: wave priority (``s_setprio``) raised around each run of MFMAs, then
    reset to 0 (None: never changed); ``hoist_lds_reads``: issue the LDS reads that feed a
    straight run of MFMAs before the first of them (more LDS latency hidden, more VGPRs);
    ``masked_loads``: how a register load from global memory with a predicate, after a fill
    with zeros of the same registers (``A.load`` of a partial tile), is selected —
    ``"exec"``: the fill, then ``global_load`` in an ``exec`` region; ``"buffer"``: one
    ``buffer_load`` whose masked-off lanes read out of range (0), no fill and no ``exec``
    change, when the lane offsets are proved to fit 32 bits (else as ``"exec"``).
    """

    accumulators: str = "agpr"
    mfma_priority: int | None = None
    hoist_lds_reads: bool = False
    masked_loads: str = "exec"

    def __post_init__(self) -> None:
        if self.accumulators not in ("agpr", "vgpr"):
            raise ArgusError(f"policy accumulators={self.accumulators!r}", hint="use 'agpr' or 'vgpr'")
        if self.masked_loads not in ("exec", "buffer"):
            raise ArgusError(f"policy masked_loads={self.masked_loads!r}", hint="use 'exec' or 'buffer'")
        if self.mfma_priority is not None and not 0 <= self.mfma_priority <= 3:
            raise ArgusError(f"policy mfma_priority={self.mfma_priority}", hint="s_setprio takes 0..3")


# --------------------------------------------------------------------------- operands


def _inline_int(v: int) -> bool:
    return -16 <= v <= 64


_INLINE_FLOATS = {0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0}


def _kind(op: Any) -> str:
    """'v', 's', 'a' for registers; 'i' inline constant; 'l' literal; 'x' special."""
    if isinstance(op, RegRef):
        return op.file.prefix
    if isinstance(op, Imm):
        v = op.value
        if isinstance(v, float):
            return "i" if v in _INLINE_FLOATS else "l"
        return "i" if _inline_int(int(v)) else "l"
    return "x"


def _f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", np.float32(value)))[0]


def _pow2(c: int) -> int | None:
    return c.bit_length() - 1 if c > 0 and c & (c - 1) == 0 else None


def _magic(d: int) -> tuple[int, int]:
    """(m, s) with ``n // d == (n * m) >> (32 + s)`` for every ``0 <= n < 2**31``."""
    for s in range(0, 32):
        m = -(-(1 << (32 + s)) // d)
        if m >= 1 << 32:
            break
        if (m * d - (1 << (32 + s))) < (1 << (s + 1)):
            return m, s
    raise UnsupportedError(f"no 32-bit magic multiplier for division by {d}")


_REL = {sympy.StrictLessThan: "lt", sympy.LessThan: "le", sympy.StrictGreaterThan: "gt",
        sympy.GreaterThan: "ge", sympy.Equality: "eq", sympy.Unequality: "ne"}
_SCALAR_REL = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "lg"}


@dataclass
class _Scope:
    """A structured region (kernel, loop body, exec region, branch arm).

    ``cache``: index expressions computed for it; ``start``: where in the item list the region
    begins (before its control instructions); ``preheader``: code hoisted out of the region —
    values of enclosing scopes first needed inside it — spliced at ``start`` when it closes.
    """

    cache: dict
    start: int
    preheader: list


# --------------------------------------------------------------------------- selector


class _Selector:
    def __init__(self, lk: L.LoweredKernel, policy: Policy) -> None:
        self.lk = lk
        self.kernel = lk.kernel
        self.policy = policy
        self.items: list[Item] = []
        self.target: list[Item] = self.items  # where emit() appends (a preheader while hoisting)
        self.scopes: list[_Scope] = [_Scope({}, 0, [])]
        self.context = 0  # depth of the scope code is emitted for
        self.symbol_depth: dict[sympy.Symbol, int] = {}
        self.labels = 0
        self.symbols: dict[sympy.Symbol, RegRef] = {}
        self.tensor_base: dict[str, RegRef] = {}
        self.tensor_bytes: dict[str, Any] = {}
        self.buffers: dict[str, VirtualReg] = {}
        self.dtypes: dict[str, D.DType] = {}
        self.loc: str = ""
        self.arguments: tuple[KernelArgument, ...] = kernel_arguments(lk)
        self._wave_cache: dict[Any, bool] = {}
        self.accumulators = {r.buffer for s in lk.walk() if isinstance(s, L.MmaStmt) for r in (*s.c, *s.d)}
        grid = self.kernel.launch.grid
        self.workgroup_ids = tuple(d < len(grid) for d in range(3))

    # ------------------------------------------------------------ emission
    def reg(self, file: RegFile, size: int = 1, name: str = "", align: int | None = None) -> VirtualReg:
        if align is None:
            align = 1 if size == 1 else (4 if file is S and size >= 4 else 2)
        return VirtualReg(file, size, name or "temporary", align)

    def emit(self, opcode: str, *operands: Any, defs: tuple[int, ...] = (0,), modifiers: str = "",
             implicit_defs: tuple[str, ...] = (), implicit_uses: tuple[str, ...] = (),
             lds: tuple[int, int] | None = None) -> Inst:
        inst = Inst(opcode, tuple(operands), defs, modifiers, implicit_defs, implicit_uses, self.loc, lds)
        if opcode not in EMITTED_MNEMONICS:
            raise AssertionError(f"internal: {opcode} is missing from isa.EMITTED_MNEMONICS")
        inst_class(opcode, modifiers)  # every opcode has a class: fail early on a typo
        self.target.append(inst)
        return inst

    def label(self, kind: str) -> str:
        self.labels += 1
        return f".L{self.kernel.name}_{kind}{self.labels}"

    def place(self, name: str) -> None:
        self.items.append(Label(name))

    # ------------------------------------------------------------ scopes and hoisting
    def open_scope(self, start: int | None = None) -> None:
        """Enter a region; call before emitting the region's own control instructions (or pass
        ``start``, the position its hoisted code goes to)."""
        self.scopes.append(_Scope({}, len(self.items) if start is None else start, []))
        self.context = len(self.scopes) - 1

    def position(self, inst: Inst) -> int:
        return next(i for i, item in enumerate(self.items) if item is inst)

    def close_scope(self) -> None:
        scope = self.scopes.pop()
        self.items[scope.start:scope.start] = scope.preheader
        self.context = len(self.scopes) - 1

    def depth(self, *exprs: Any) -> int:
        """The innermost scope defining a symbol of ``exprs`` (0: the kernel's own values)."""
        d = 0
        for e in exprs:
            if isinstance(e, sympy.Basic):
                for sym in e.free_symbols:
                    d = max(d, self.symbol_depth.get(sym, 0))
        return d

    def lookup(self, key: Any) -> Any:
        for scope in reversed(self.scopes[:self.context + 1]):
            if key in scope.cache:
                return scope.cache[key]
        return None

    def cached(self, key: Any, depth: int, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per region of ``depth``: code for a value of an enclosing scope
        goes to the preheader of the region entered from it (hoisted out of loops and exec
        regions, where every lane computes it)."""
        hit = self.lookup(key)
        if hit is not None:
            return hit
        depth = min(depth, self.context)
        if depth == self.context:
            value = compute()
        else:
            saved = (self.target, self.context)
            self.target, self.context = self.scopes[depth + 1].preheader, depth
            try:
                value = compute()
            finally:
                self.target, self.context = saved
        self.scopes[depth].cache[key] = value
        return value

    def error(self, stmt: L.Stmt | None, message: str, hint: str | None = None) -> UnsupportedError:
        return UnsupportedError(f"gfx942: {message}", position=None if stmt is None else stmt.loc, hint=hint)

    # ------------------------------------------------------------ operand legality
    def to_vgpr(self, op: Any) -> RegRef:
        if isinstance(op, RegRef) and op.file is V:
            return op
        dst = self.reg(V, name="materialized operand")[0]
        if isinstance(op, RegRef) and op.file is A:
            self.emit("v_accvgpr_read_b32", dst, op)
        else:
            self.emit("v_mov_b32", dst, op)
        return dst

    def to_sgpr(self, op: Any) -> RegRef:
        if isinstance(op, RegRef) and op.file is S:
            return op
        dst = self.reg(S, name="materialized constant")[0]
        self.emit("s_mov_b32", dst, op)
        return dst

    def legal(self, srcs: list[Any], encoding: str, commutative: bool = False,
              extra_bus: tuple[Any, ...] = ()) -> list[Any]:
        """Operands a VALU instruction can take: VOP2 src1 in a VGPR, no literal in VOP3, at
        most one SGPR or literal on the constant bus (gfx9), AGPRs read through VGPRs."""
        srcs = [self.to_vgpr(s) if _kind(s) == "a" else s for s in srcs]
        if encoding == "vop2" and len(srcs) == 2 and _kind(srcs[1]) != "v":
            if commutative and _kind(srcs[0]) == "v":
                srcs = [srcs[1], srcs[0]]
            elif _kind(srcs[1]) == "l":
                srcs[1] = self.to_vgpr(srcs[1])
        if encoding == "vop3":
            srcs = [self.to_vgpr(s) if _kind(s) == "l" else s for s in srcs]

        def bus(ops: list[Any]) -> int:
            sgprs = {(id(o.reg), o.offset) for o in [*ops, *extra_bus] if isinstance(o, RegRef) and o.file is S}
            return len(sgprs) + sum(1 for o in ops if _kind(o) == "l")

        i = len(srcs) - 1
        while bus(srcs) > 1 and i >= 0:
            if _kind(srcs[i]) in ("s", "l"):
                srcs[i] = self.to_vgpr(srcs[i])
            i -= 1
        return srcs

    def valu(self, opcode: str, srcs: list[Any], *, encoding: str = "vop2", commutative: bool = False,
             dst: RegRef | None = None, name: str = "") -> RegRef:
        srcs = self.legal(srcs, encoding, commutative)
        dst = dst or self.reg(V, name=name or opcode)[0]
        self.emit(opcode, dst, *srcs)
        return dst

    def salu(self, opcode: str, srcs: list[Any], *, dst: RegRef | None = None, name: str = "") -> RegRef:
        literals = [i for i, s in enumerate(srcs) if _kind(s) == "l"]
        for i in literals[1:]:
            srcs[i] = self.to_sgpr(srcs[i])
        dst = dst or self.reg(S, name=name or opcode)[0]
        self.emit(opcode, dst, *srcs, implicit_defs=("scc",))
        return dst

    # ------------------------------------------------------------ prologue
    def prologue(self) -> None:
        kernarg = VirtualReg(S, 2, "kernarg segment address", 2, fixed=0)
        next_sgpr = 2
        self.workgroup_regs: dict[int, RegRef] = {}
        for d, enabled in enumerate(self.workgroup_ids):
            if enabled:
                reg = VirtualReg(S, 1, f"workgroup id {'xyz'[d]}", 1, fixed=next_sgpr)
                self.workgroup_regs[d] = reg[0]
                next_sgpr += 1
        ids = VirtualReg(V, 1, "work-item ids (packed)", 1, fixed=0)
        self.loc = "prologue"
        for arg in self.arguments:
            if arg.kind == "pointer":
                dst = self.reg(S, 2, f"address of %{arg.name}")
                self.emit("s_load_dwordx2", dst.all, kernarg.all, hex(arg.offset), defs=(0,))
                self.tensor_base[arg.buffer.name] = dst.all
                self.tensor_bytes[arg.buffer.name] = arg.buffer.size * arg.buffer.dtype.itemsize
            else:
                dst = self.reg(S, 1, f"argument {arg.name}")
                self.emit("s_load_dword", dst[0], kernarg.all, hex(arg.offset), defs=(0,))
                if arg.symbol is not None:
                    self.symbols[arg.symbol] = dst[0]
        tid = self.valu("v_and_b32", [Imm(0x3FF), ids[0]], name="thread id")
        self.symbols[self.kernel.thread_id] = tid
        for d, reg in self.workgroup_regs.items():
            self.symbols[self.kernel.block_ids[d]] = reg

    # ------------------------------------------------------------ uniformity
    def uniform(self, e: Any) -> bool:
        return self.lk.uniformity(e) is Uniformity.BLOCK

    def wave_uniform(self, e: Any) -> bool:
        """One value per 64-lane wavefront (``tid // 64``...), by the shared uniformity analysis.

        The lowering writes ``//`` and ``%`` as ``TruncDiv``/``TruncMod`` only where the dividend
        is proved non-negative, where they equal the floor forms the analysis reasons about."""
        if not isinstance(e, sympy.Basic) or self.kernel.thread_id not in e.free_symbols:
            return False
        key = ("wave-uniform", e)
        hit = self._wave_cache.get(key)
        if hit is None:
            floor = e.replace(lambda x: isinstance(x, symbolic.TruncDiv), lambda x: symbolic.FloorDiv(*x.args)) \
                .replace(lambda x: isinstance(x, symbolic.TruncMod), lambda x: sympy.Mod(*x.args))
            hit = self._wave_cache[key] = self.lk.uniformity_info.uniform_within(floor, WAVE)
        return hit

    def scalar(self, e: Any) -> bool:
        """Does ``e`` live in an SGPR: block-uniform, or uniform per wavefront?"""
        return self.uniform(e) or self.wave_uniform(e)

    def symbol(self, s: sympy.Symbol) -> RegRef:
        ref = self.symbols.get(s)
        if ref is None:
            raise self.error(None, f"index symbol {s} has no value here (an unsupported construct defines it)")
        return ref

    # ------------------------------------------------------------ scalar expressions (32-bit)
    def sexpr(self, e: Any) -> RegRef | Imm:
        e = sympy.sympify(e)
        if isinstance(e, sympy.Integer):
            return Imm(int(e))
        if isinstance(e, sympy.Symbol):
            return self.symbol(e)
        return self.cached(("s", e), self.depth(e), lambda: self._sexpr(e))

    def _sexpr(self, e: sympy.Basic) -> RegRef:
        if not self.uniform(e) and any(not self.scalar(arg) for arg in e.args if arg.free_symbols):
            # a wave-uniform value computed from per-lane ones (``tid // 64``): every lane computes
            # it, the first active one hands it to an SGPR, and what is built on it is scalar code
            lanes = self.to_vgpr(self._vexpr(e))
            out = self.reg(S, name=f"wave-uniform {e}")[0]
            self.emit("v_readfirstlane_b32", out, lanes)
            return out
        if isinstance(e, sympy.Add):
            const, rest = e.as_coeff_Add()
            terms = list(sympy.Add.make_args(rest))
            acc = self.sexpr(terms[0])
            for t in terms[1:]:
                coeff, body = t.as_coeff_Mul()
                if coeff == -1:
                    acc = self.salu("s_sub_i32", [acc, self.sexpr(body)])
                else:
                    acc = self.salu("s_add_i32", [acc, self.sexpr(t)])
            if const != 0:
                acc = self.salu("s_add_i32", [acc, Imm(int(const))])
            return self._as_reg(acc)
        if isinstance(e, sympy.Mul):
            coeff, rest = e.as_coeff_Mul()
            factors = list(sympy.Mul.make_args(rest))
            acc = self.sexpr(factors[0])
            for f in factors[1:]:
                acc = self.salu("s_mul_i32", [acc, self.sexpr(f)])
            if coeff != 1:
                k = _pow2(int(coeff))
                acc = (self.salu("s_lshl_b32", [acc, Imm(k)]) if k is not None
                       else self.salu("s_mul_i32", [acc, Imm(int(coeff))]))
            return self._as_reg(acc)
        return self._as_reg(self._division_like(e, scalar=True))

    def _as_reg(self, op: Any) -> RegRef:
        return op if isinstance(op, RegRef) else self.to_sgpr(op)

    # ------------------------------------------------------------ vector expressions (32-bit)
    def vexpr(self, e: Any) -> RegRef | Imm:
        """The 32-bit value of ``e`` in each lane: a VGPR, or an SGPR/constant when uniform."""
        e = sympy.sympify(e)
        if isinstance(e, sympy.Integer):
            return Imm(int(e))
        if self.scalar(e):
            return self.sexpr(e)
        if isinstance(e, sympy.Symbol):
            return self.symbol(e)
        return self.cached(("v", e), self.depth(e), lambda: self._vexpr(e))

    def _vexpr(self, e: sympy.Basic) -> RegRef:
        if isinstance(e, sympy.Add):
            const, rest = e.as_coeff_Add()
            terms = list(sympy.Add.make_args(rest))
            uniform = [t for t in terms if self.scalar(t)]
            varying = [t for t in terms if not self.scalar(t)]
            acc = self._vterm(varying[0], None)
            for t in varying[1:]:
                acc = self._vterm(t, acc)
            scalar_part = sympy.Add(*uniform) + const
            if scalar_part != 0:
                acc = self.valu("v_add_u32", [self.sexpr(scalar_part), acc], commutative=True)
            return acc
        if isinstance(e, sympy.Mul):
            return self._vterm(e, None)
        return self._division_like(e, scalar=False)

    def _vterm(self, t: sympy.Expr, acc: RegRef | None) -> RegRef:
        """``t`` (plus ``acc`` when given) in a VGPR."""
        coeff, rest = t.as_coeff_Mul()
        coeff = int(coeff)
        factors = list(sympy.Mul.make_args(rest))
        uniform = sympy.Mul(*[f for f in factors if self.scalar(f)])
        varying = [f for f in factors if not self.scalar(f)]
        if not varying:
            value = self.sexpr(t)
            return value if acc is None else self.valu("v_add_u32", [value, acc], commutative=True)
        value = self.vexpr(varying[0])
        for f in varying[1:]:
            value = self.valu("v_mul_lo_u32", [value, self.vexpr(f)], encoding="vop3")
        scale: Any = None
        if uniform != 1:
            scale = self.sexpr(uniform * coeff) if coeff != -1 else self.sexpr(uniform)
        elif coeff not in (1, -1):
            scale = Imm(coeff)
        if scale is not None:
            k = _pow2(scale.value) if isinstance(scale, Imm) else None
            if k is not None and acc is not None:
                return self.valu("v_lshl_add_u32", [value, Imm(k), acc], encoding="vop3")
            if k is not None:
                value = self.valu("v_lshlrev_b32", [Imm(k), value])
            else:
                value = self.valu("v_mul_lo_u32", [value, scale], encoding="vop3")
        if coeff == -1:
            return self.valu("v_sub_u32", [acc if acc is not None else Imm(0), value])
        return value if acc is None else self.valu("v_add_u32", [value, acc], commutative=True)

    def _division_like(self, e: sympy.Basic, *, scalar: bool) -> Any:
        """``//``, ``%``, bitwise ops, min/max (scalar or vector)."""
        ev = self.sexpr if scalar else self.vexpr
        pre = "s_" if scalar else "v_"

        def op2(vop: str, sop: str, a: Any, b: Any, commutative: bool = False) -> RegRef:
            if scalar:
                return self.salu(sop, [a, b])
            return self.valu(vop, [a, b], commutative=commutative)

        facts = self.lk.facts
        match e:
            case symbolic.TruncDiv(args=(a, b)) | symbolic.FloorDiv(args=(a, b)) if isinstance(b, sympy.Integer):
                d = int(b)
                k = _pow2(d)
                truncating = isinstance(e, symbolic.TruncDiv) or facts.nonnegative(a)
                if k is not None:
                    if truncating and facts.nonnegative(a):
                        return op2("v_lshrrev_b32", "s_lshr_b32", *((Imm(k), ev(a)) if not scalar else (ev(a), Imm(k))))
                    if isinstance(e, symbolic.FloorDiv):  # arithmetic shift is floor division
                        return op2("v_ashrrev_i32", "s_ashr_i32", *((Imm(k), ev(a)) if not scalar else (ev(a), Imm(k))))
                if not facts.nonnegative(a):
                    raise self.error(None, f"division of {a} (not proved non-negative) by {d}",
                                     hint="state an assumption that makes the dividend non-negative")
                m, s = _magic(d)
                if scalar:
                    hi = self.salu("s_mul_hi_u32", [ev(a), self.to_sgpr(Imm(m))])
                    return self.salu("s_lshr_b32", [hi, Imm(s)]) if s else hi
                hi = self.valu("v_mul_hi_u32", [ev(a), self.to_sgpr(Imm(m))], encoding="vop3")
                return self.valu("v_lshrrev_b32", [Imm(s), hi]) if s else hi
            case symbolic.TruncMod(args=(a, b)) | sympy.Mod(args=(a, b)) if isinstance(b, sympy.Integer):
                d = int(b)
                k = _pow2(d)
                if k is not None and (isinstance(e, sympy.Mod) or facts.nonnegative(a)):
                    return op2("v_and_b32", "s_and_b32", Imm(d - 1) if not scalar else ev(a),
                               ev(a) if not scalar else Imm(d - 1), commutative=True)
                if not facts.nonnegative(a):
                    raise self.error(None, f"remainder of {a} (not proved non-negative) by {d}")
                q = ev(symbolic.TruncDiv(a, b))
                if scalar:
                    return self.salu("s_sub_i32", [ev(a), self.salu("s_mul_i32", [q, Imm(d)])])
                prod = self.valu("v_mul_lo_u32", [q, self.to_sgpr(Imm(d)) if not _inline_int(d) else Imm(d)],
                                 encoding="vop3")
                return self.valu("v_sub_u32", [ev(a), prod])
            case symbolic.BitXor(args=(a, b)):
                return op2("v_xor_b32", "s_xor_b32", ev(a), ev(b), True)
            case symbolic.BitAnd(args=(a, b)):
                return op2("v_and_b32", "s_and_b32", ev(a), ev(b), True)
            case symbolic.BitOr(args=(a, b)):
                return op2("v_or_b32", "s_or_b32", ev(a), ev(b), True)
            case sympy.Min() | sympy.Max():
                name = "min" if isinstance(e, sympy.Min) else "max"
                args = [ev(x) for x in e.args]
                acc = args[0]
                for x in args[1:]:
                    acc = op2(f"v_{name}_i32", f"s_{name}_i32", acc, x, True)
                return acc
        raise self.error(None, f"index expression {e} ({type(e).__name__}) has no {pre}ALU lowering")

    # ------------------------------------------------------------ 64-bit arithmetic
    def _small(self, t: Any) -> bool:
        return self.lk.bits(t) == 32 and self.lk.facts.nonnegative(t)

    def _split64(self, e: Any) -> tuple[list[Any], list[Any]]:
        """Terms of ``e`` that fit a non-negative int32 (summed in 32 bits) and the others."""
        terms = list(sympy.Add.make_args(e)) if e != 0 else []
        small = [t for t in terms if self._small(t)]
        if small and not self._small(sympy.Add(*small)):
            small = []
        big = [t for t in terms if t not in small]
        for t in big:
            if t.as_coeff_Mul()[0] < 0:
                raise self.error(None, f"64-bit address term {t} is negative")
        return small, big

    def _head_tail(self, term: Any) -> tuple[Any, list[Any]]:
        """``term`` = ``head * prod(tail)``, ``head`` and each tail factor non-negative int32s,
        with the fewest tail factors (one when possible: a single 32 x 32 -> 64-bit multiply)."""
        if self._small(term):
            return term, []
        coeff, rest = term.as_coeff_Mul()
        factors = sorted(sympy.Mul.make_args(rest) if rest != 1 else [], key=str)
        for f in factors:
            head = sympy.expand(term / f)
            if self._small(head) and self._small(f):
                return head, [f]
        head = sympy.Integer(int(coeff))
        tail: list[Any] = []
        for f in factors:
            if not tail and self._small(head * f):
                head = head * f
            elif self._small(f):
                tail.append(f)
            else:
                raise self.error(None, f"64-bit address term {term}: factor {f} is not a non-negative int32")
        return head, tail

    def sexpr64(self, e: Any) -> RegRef:
        """``e`` (block-uniform, a sum of products of non-negative int32 values) in an SGPR pair."""
        e = sympy.expand(sympy.sympify(e))
        return self.cached(("s64", e), self.depth(e), lambda: self._sexpr64(e))

    def _sexpr64(self, e: Any) -> RegRef:
        small, big = self._split64(e)
        lo: Any = self.sexpr(sympy.Add(*small)) if small else Imm(0)
        hi: Any = Imm(0)
        for term in big:
            head, tail = self._head_tail(term)
            plo: Any = self.sexpr(head)
            phi: Any = Imm(0)
            for f in tail:
                x = self._as_reg(self.sexpr(f))
                carry = self.salu("s_mul_hi_u32", [self._as_reg(plo), x])
                new_lo = self.salu("s_mul_i32", [plo, x])
                phi = carry if phi == Imm(0) else self.salu("s_add_i32", [carry, self.salu("s_mul_i32", [phi, x])])
                plo = new_lo
            if lo == Imm(0) and hi == Imm(0):
                lo, hi = plo, phi
                continue
            lo = self.salu("s_add_u32", [lo, plo])
            high = self.reg(S, name="64-bit sum (high)")[0]
            self.emit("s_addc_u32", high, hi, phi, implicit_defs=("scc",), implicit_uses=("scc",))
            hi = high
        pair = self.reg(S, 2, f"64-bit {e}")
        self.emit("s_mov_b32", pair[0], lo)
        self.emit("s_mov_b32", pair[1], hi)
        return pair.all

    def vexpr64(self, e: Any) -> RegRef:
        """``e`` (a sum of products of non-negative int32 values) as a 64-bit VGPR pair."""
        e = sympy.expand(sympy.sympify(e))
        return self.cached(("v64", e), self.depth(e), lambda: self._vexpr64(e))

    def _vexpr64(self, e: Any) -> RegRef:
        small, big = self._split64(e)
        acc = self.reg(V, 2, "64-bit lane offset")
        self.emit("v_mov_b32", acc[0], self.vexpr(sympy.Add(*small)) if small else Imm(0))
        self.emit("v_mov_b32", acc[1], Imm(0))
        current = acc.all
        for term in big:
            head, tail = self._head_tail(term)
            if len(tail) != 1:
                raise self.error(None, f"64-bit lane offset term {term} needs more than a 32 x 32-bit product")
            a = self.legal([self.vexpr(head), self.vexpr(tail[0])], "vop3")
            out = self.reg(V, 2, "64-bit lane offset")
            carry = self.reg(S, 2, "carry (unused)")
            self.emit("v_mad_u64_u32", out.all, carry.all, a[0], a[1], current, defs=(0, 1))
            current = out.all
        return current

    # ------------------------------------------------------------ predicates
    def mask(self, pred: Any) -> RegRef | bool:
        """A lane mask (SGPR pair) of the lanes where ``pred`` holds, or a constant."""
        if pred is None or pred is True or pred is sympy.true:
            return True
        if pred is False or pred is sympy.false:
            return False
        return self.cached(("m", pred), self.depth(pred), lambda: self._mask(pred))

    def _mask(self, pred: sympy.Basic) -> RegRef:
        if isinstance(pred, (sympy.And, sympy.Or)):
            parts = [self.mask(a) for a in pred.args]
            regs = [p for p in parts if isinstance(p, RegRef)]
            acc = regs[0]
            for r in regs[1:]:
                out = self.reg(S, 2, "lane mask")
                self.emit("s_and_b64" if isinstance(pred, sympy.And) else "s_or_b64", out.all, acc, r,
                          implicit_defs=("scc",))
                acc = out.all
            return acc
        if isinstance(pred, sympy.Not):
            inner = self.mask(pred.args[0])
            out = self.reg(S, 2, "lane mask")
            self.emit("s_not_b64", out.all, inner, implicit_defs=("scc",))
            return out.all
        rel = _REL.get(type(pred))
        if rel is None:
            raise self.error(None, f"predicate {pred} has no lowering")
        lhs, rhs = pred.lhs, pred.rhs
        bits = max(self.lk.bits(lhs), self.lk.bits(rhs))
        if bits != 32:
            diff = self.lk.facts.interval(sympy.expand(lhs - rhs))
            if diff[0] is None or diff[1] is None or diff[0] < -(2**31) or diff[1] >= 2**31:
                raise self.error(None, f"comparison {pred} needs 64-bit arithmetic")
            lhs, rhs = sympy.expand(lhs - rhs), sympy.Integer(0)
        out = self.reg(S, 2, f"mask of {pred}")
        if self.scalar(lhs) and self.scalar(rhs):  # one answer per wavefront: all lanes or none
            a, b = self.sexpr(lhs), self.sexpr(rhs)
            if isinstance(a, Imm) and isinstance(b, Imm):
                raise self.error(None, f"constant predicate {pred} not folded")
            if isinstance(a, Imm):
                a = self.to_sgpr(a)
            self.emit(f"s_cmp_{_SCALAR_REL[rel]}_i32", a, b, defs=(), implicit_defs=("scc",))
            self.emit("s_cselect_b64", out.all, Imm(-1), Imm(0), implicit_uses=("scc",))
            return out.all
        a, b = self.legal([self.vexpr(lhs), self.vexpr(rhs)], "vop3")
        self.emit(f"v_cmp_{rel}_i32_e64", out.all, a, b)
        return out.all

    def masked(self, pred: Any, body: Callable[[], None], *, skip: bool = False) -> None:
        """Run ``body`` on the lanes where ``pred`` holds (an exec region)."""
        m = self.mask(pred)
        if m is False:
            return
        if m is True:
            body()
            return
        saved = self.reg(S, 2, "saved exec")
        self.open_scope()
        self.emit("s_and_saveexec_b64", saved.all, m, implicit_defs=("exec", "scc"), implicit_uses=("exec",))
        end = self.label("masked") if skip else None
        if end:
            self.emit("s_cbranch_execz", LabelRef(end), defs=(), implicit_uses=("exec",))
        body()
        self.close_scope()
        if end:
            self.place(end)
        self.emit("s_mov_b64", EXEC, saved.all, defs=(), implicit_defs=("exec",))

    # ------------------------------------------------------------ register buffers
    def buffer(self, name: str) -> VirtualReg:
        reg = self.buffers.get(name)
        if reg is None:
            file_ = self.lk.registers.get(name)
            if file_ is None:
                raise self.error(None, f"register buffer %{name} is not declared")
            dtype = file_.dtype
            dwords = max(1, -(-file_.size * dtype.bits // 32))
            rf = A if (name in self.accumulators and self.policy.accumulators == "agpr") else V
            reg = VirtualReg(rf, dwords, f"%{name} ({file_.size} x {dtype.name}{', accumulator' if rf is A else ''})",
                             2 if dwords > 1 else 1)
            self.buffers[name] = reg
            self.dtypes[name] = dtype
        return reg

    def element(self, r: L.Reg) -> tuple[RegRef, int, int]:
        """(dword, bit offset, bits) of a register element."""
        reg = self.buffer(r.buffer)
        bits = self.dtypes[r.buffer].bits
        start = r.index * bits
        if bits > 32:
            return RegRef(reg, start // 32, bits // 32), 0, bits
        return reg[start // 32], start % 32, bits

    def packed(self, regs: tuple[L.Reg, ...]) -> RegRef:
        """The dwords holding consecutive elements ``regs`` (a contiguous, dword-aligned run)."""
        first = regs[0]
        bits = self.dtypes[first.buffer].bits if first.buffer in self.dtypes else self.lk.registers[first.buffer].dtype.bits
        reg = self.buffer(first.buffer)
        contiguous = all(r.buffer == first.buffer and r.index == first.index + i for i, r in enumerate(regs))
        start = first.index * bits
        total = len(regs) * bits
        if not contiguous or start % 32 or total % 32:
            raise self.error(None, f"fragment {', '.join(map(str, regs[:4]))}... is not a contiguous, dword-aligned "
                             "run of one register buffer")
        return RegRef(reg, start // 32, total // 32)

    def read_element(self, r: L.Reg) -> RegRef:
        """A 32-bit VGPR holding element ``r`` (sub-dword elements shifted down, zero-extended)."""
        ref, offset, bits = self.element(r)
        if ref.file is A:
            ref = self.to_vgpr(ref)
        if bits == 32:
            return ref
        return self.valu("v_bfe_u32", [ref, Imm(offset), Imm(bits)], encoding="vop3")

    def write_element(self, r: L.Reg, value: Any) -> None:
        """Write a 32-bit value (its low ``bits`` for sub-dword elements) into element ``r``."""
        ref, offset, bits = self.element(r)
        if bits == 32:
            if ref.file is A:
                src = value if _kind(value) in ("v", "i") else self.to_vgpr(value)
                self.emit("v_accvgpr_write_b32", ref, src)
            else:
                self.emit("v_mov_b32", ref, value)
            return
        if ref.file is A:
            raise self.error(None, "sub-dword elements in AGPRs")
        mask = ((1 << bits) - 1) << offset
        shifted = self.valu("v_lshlrev_b32", [Imm(offset), self.to_vgpr(value)]) if offset else value
        self.emit("v_bfi_b32", ref, *self.legal([self.to_sgpr(Imm(mask)), shifted, ref], "vop3"))

    # ------------------------------------------------------------ statements
    def body(self, stmts: tuple[L.Stmt, ...]) -> None:
        stmts = list(stmts)
        i = 0
        while i < len(stmts):
            if self.policy.hoist_lds_reads and isinstance(stmts[i], L.MmaStmt):
                j = i
                while j < len(stmts) and isinstance(stmts[j], (L.MmaStmt, L.CopyStmt, L.FillStmt)):
                    j += 1
                group = stmts[i:j]
                feeders = [s for s in group if not isinstance(s, L.MmaStmt)]
                mfmas = [s for s in group if isinstance(s, L.MmaStmt)]
                if feeders and self._reads_only_lds(feeders) and self._hoistable(group):
                    for s in feeders:
                        self.stmt(s)
                    self._mfma_run(mfmas)
                    i = j
                    continue
            if self._overwritten(stmts, i):
                i += 1
                continue
            if self._zero_filled_load(stmts, i):
                # fill with zeros + predicated load = a buffer load whose masked-off lanes read
                # out of range (0): no exec region, no fill
                copy = stmts[i + 1]
                self.loc = str(copy.loc) if copy.loc else ""
                for t in copy.transfers:
                    self.buffer_load(copy, t.src, t.dst, t.predicate)
                i += 2
                continue
            if isinstance(stmts[i], L.MmaStmt):
                j = i
                while j < len(stmts) and isinstance(stmts[j], L.MmaStmt):
                    j += 1
                self._mfma_run(stmts[i:j])
                i = j
                continue
            self.stmt(stmts[i])
            i += 1

    @staticmethod
    def _overwritten(stmts: list[L.Stmt], i: int) -> bool:
        """Is ``stmts[i]`` a fill whose every register the next statement, an unpredicated copy
        that does not read them, writes again?  (A fill before a full load is dead.)"""
        fill = stmts[i]
        nxt = stmts[i + 1] if i + 1 < len(stmts) else None
        if not isinstance(fill, L.FillStmt) or not isinstance(nxt, L.CopyStmt) or nxt.atom == "buffer.load":
            return False
        written: set[L.Reg] = set()
        for t in nxt.transfers:
            if t.predicate is not sympy.true or not isinstance(t.dst, tuple):
                return False
            if isinstance(t.src, tuple) and set(t.src) & set(fill.dst):
                return False
            written |= set(t.dst)
        return set(fill.dst) <= written

    def _zero_filled_load(self, stmts: list[L.Stmt], i: int) -> bool:
        """Is ``stmts[i]`` a fill with zero whose every register the next statement, a predicated
        ``sync`` load from global memory that a buffer instruction can address, loads?"""
        fill = stmts[i]
        nxt = stmts[i + 1] if i + 1 < len(stmts) else None
        if self.policy.masked_loads != "buffer":
            return False
        if not isinstance(fill, L.FillStmt) or not isinstance(nxt, L.CopyStmt) or nxt.atom != "sync":
            return False
        if fill.value != 0 or math.copysign(1.0, float(fill.value)) < 0:
            return False
        written: set[L.Reg] = set()
        for t in nxt.transfers:
            if not (isinstance(t.src, L.MemoryRun) and t.src.space is N.MemorySpace.GLOBAL and isinstance(t.dst, tuple)):
                return False
            if self.buffer_split(t.src) is None:
                return False
            written |= set(t.dst)
        predicated = any(t.predicate is not sympy.true for t in nxt.transfers)
        return predicated and set(fill.dst) == written

    @staticmethod
    def _hoistable(group: list[L.Stmt]) -> bool:
        """Can the fills and loads of ``group`` move above its MFMAs?  Only when none of them
        writes a register buffer that an earlier MFMA of the group reads or writes."""
        touched: set[str] = set()
        for s in group:
            if isinstance(s, L.MmaStmt):
                touched |= {r.buffer for part in (s.a, s.b, s.c, s.d) if isinstance(part, tuple) for r in part}
                continue
            written = {r.buffer for r in s.dst} if isinstance(s, L.FillStmt) else {
                r.buffer for t in s.transfers if isinstance(t.dst, tuple) for r in t.dst}
            if written & touched:
                return False
        return True

    def _reads_only_lds(self, stmts: list[L.Stmt]) -> bool:
        for s in stmts:
            if isinstance(s, L.FillStmt):
                continue
            if not isinstance(s, L.CopyStmt):
                return False
            for t in s.transfers:
                if not (isinstance(t.src, L.MemoryRun) and t.src.space is N.MemorySpace.SHARED
                        and isinstance(t.dst, tuple)):
                    return False
        return True

    def _mfma_run(self, stmts: list[L.Stmt]) -> None:
        if self.policy.mfma_priority is not None:
            self.emit("s_setprio", Imm(self.policy.mfma_priority), defs=())
        for s in stmts:
            self.stmt(s)
        if self.policy.mfma_priority is not None:
            self.emit("s_setprio", Imm(0), defs=())

    def stmt(self, s: L.Stmt) -> None:
        self.loc = str(s.loc) if s.loc else ""
        match s:
            case L.FillStmt():
                self.fill(s)
            case L.CopyStmt():
                self.copy(s)
            case L.ElementwiseStmt():
                self.elementwise(s)
            case L.ConvertStmt():
                self.convert(s)
            case L.MmaStmt():
                self.mma(s)
            case L.ReduceStmt():
                self.reduce(s)
            case L.ShuffleStmt():
                self.shuffle(s)
            case L.Barrier(participants=participants):
                if participants not in (None, self.kernel.launch.threads) or s.id != 0:
                    raise self.error(s, "named barriers (a subset of the block) do not exist on gfx942",
                                     hint="use the block barrier A.barrier()")
                self.emit("s_barrier", defs=())
            case L.Loop():
                self.loop(s)
            case L.Branch():
                self.branch(s)
            case L.ReadIndexStmt():
                self.read_index(s)
            case L.AtomicStmt():
                self.atomic(s)
            case L.FenceStmt(fence=fence) if fence in ("acq_rel", "cta", "block"):
                self.emit("s_waitcnt", "vmcnt(0) lgkmcnt(0)", defs=())
            case L.FenceStmt(fence=fence) if fence.startswith("griddep."):
                pass  # gfx942 launches a kernel after the previous one in its queue completes
            case _:
                raise self.error(s, f"{type(s).__name__} has no gfx942 lowering",
                                 hint="TMA, mbarriers, cp.async, wgmma and register budgets are NVIDIA-only")

    # ------------------------------------------------------------ fill / elementwise / convert
    def fill(self, s: L.FillStmt) -> None:
        by_dword: dict[tuple[int, int], list[L.Reg]] = {}
        for r in s.dst:
            ref, _, _ = self.element(r)
            by_dword.setdefault((id(ref.reg), ref.offset), []).append(r)
        for regs in by_dword.values():
            ref, _, bits = self.element(regs[0])
            dtype = self.dtypes[regs[0].buffer]
            pattern = self._bits_of(s.value, dtype)
            per = 32 // bits if bits <= 32 else 1
            if bits >= 32 or len(regs) == per:
                word = 0
                for i in range(per if bits < 32 else 1):
                    word |= pattern << (i * bits) if bits < 32 else pattern
                dwords = [RegRef(ref.reg, ref.offset + i, 1) for i in range(ref.size)]
                for j, dw in enumerate(dwords):
                    value = (word >> (32 * j)) & 0xFFFFFFFF if bits > 32 else word & 0xFFFFFFFF
                    self._set_dword(dw, value)
            else:
                for r in regs:
                    self.write_element(r, Imm(pattern))

    def _set_dword(self, dw: RegRef, value: int) -> None:
        imm = Imm(value if value < 2**31 else value - 2**32)
        if dw.file is A:
            self.emit("v_accvgpr_write_b32", dw, imm if _inline_int(imm.value) else self.to_vgpr(imm))
        else:
            self.emit("v_mov_b32", dw, imm)

    @staticmethod
    def _bits_of(value: float | int, dtype: D.DType) -> int:
        if dtype.is_float:
            from argus.ir import numerics

            return int(np.asarray(numerics.to_bits(dtype, np.asarray([value], np.float64))).reshape(-1)[0])
        return int(value) & ((1 << dtype.bits) - 1)

    def _float_operand(self, x: Any, dtype: D.DType) -> Any:
        if isinstance(x, L.Reg):
            return self.read_element(x)
        if dtype.is_float:
            value = float(np.float32(x))
            return Imm(value) if value in _INLINE_FLOATS else Imm(_f32_bits(value))
        return Imm(int(x))

    def elementwise(self, s: L.ElementwiseStmt) -> None:
        dtype = s.dtype
        if dtype.bits != 32:
            raise self.error(s, f"elementwise {s.fn} on {dtype.name} (only 32-bit types are computed)",
                             hint="convert to f32 first, compute, and convert back")
        f = dtype.is_float
        for dst, srcs in zip(s.dst, s.srcs):
            ops = [self._float_operand(x, dtype) for x in srcs]
            ref, _, _ = self.element(dst)
            direct = ref if (ref.file is V and s.fn not in ("div", "exp2")) else None
            result = self._apply(s, s.fn, f, dtype, ops, direct)
            if result is not direct:
                self.write_element(dst, result)

    def _apply(self, s: L.Stmt, fn: str, is_float: bool, dtype: D.DType, ops: list[Any],
               dst: RegRef | None = None) -> RegRef:
        """``fn(ops)`` in a VGPR (``dst`` when given and the result takes one instruction)."""
        if is_float:
            two = {"add": ("v_add_f32", True), "sub": ("v_sub_f32", False), "mul": ("v_mul_f32", True),
                   "max": ("v_max_f32", True), "min": ("v_min_f32", True)}
            one = {"exp2": "v_exp_f32", "sqrt": "v_sqrt_f32", "rcp": "v_rcp_f32", "rsqrt": "v_rsq_f32",
                   "log2": "v_log_f32"}
            if fn in two:
                opcode, commutative = two[fn]
                return self.valu(opcode, ops, commutative=commutative, dst=dst)
            if fn == "exp2":
                return self._exp2(ops[0])
            if fn in one:
                return self.valu(one[fn], ops, encoding="vop1", dst=dst)
            if fn == "neg":
                return self.valu("v_xor_b32", [Imm(0x80000000), ops[0]], commutative=True, dst=dst)
            if fn == "abs":
                return self.valu("v_and_b32", [Imm(0x7FFFFFFF), ops[0]], commutative=True, dst=dst)
            if fn == "fma":
                return self.valu("v_fma_f32", ops, encoding="vop3", dst=dst)
            if fn == "div":
                return self._divide(ops[0], ops[1])
        else:
            signed = dtype.name.startswith("i")
            table = {"add": "v_add_u32", "sub": "v_sub_u32", "mul": "v_mul_lo_u32",
                     "max": "v_max_i32" if signed else "v_max_u32", "min": "v_min_i32" if signed else "v_min_u32"}
            if fn in table:
                return self.valu(table[fn], ops, encoding="vop3" if fn == "mul" else "vop2",
                                 commutative=fn != "sub", dst=dst)
        raise self.error(s, f"elementwise {fn} on {dtype.name} has no gfx942 lowering")

    def _exp2(self, x: Any) -> RegRef:
        """``2**x`` with ``v_exp_f32`` (about 1 ulp), keeping subnormal results: inputs below
        -126 are raised by 64 and the result scaled by 2**-64."""
        x = self.to_vgpr(x)
        low = self.reg(S, 2, "exp2 inputs below -126")
        self.emit("v_cmp_gt_f32_e64", low.all, self.to_sgpr(Imm(_f32_bits(-126.0))), x)
        shift = self.reg(V, name="exp2 input shift")[0]
        self.emit("v_cndmask_b32_e64", shift, Imm(0), self.to_vgpr(Imm(_f32_bits(64.0))), low.all)
        scale = self.reg(V, name="exp2 result scale")[0]
        self.emit("v_cndmask_b32_e64", scale, Imm(1.0), self.to_vgpr(Imm(_f32_bits(2.0**-64))), low.all)
        raised = self.valu("v_add_f32", [x, shift], commutative=True)
        power = self.valu("v_exp_f32", [raised], encoding="vop1")
        return self.valu("v_mul_f32", [power, scale], commutative=True)

    def _divide(self, a: Any, b: Any) -> RegRef:
        """Correctly rounded f32 division (the div_scale / rcp / fma refinement / div_fmas /
        div_fixup sequence, denormals enabled)."""
        a, b = self.to_vgpr(a), self.to_vgpr(b)
        den = self.reg(V, name="scaled denominator")[0]
        flag = self.reg(S, 2, "div_scale flag (unused)")
        self.emit("v_div_scale_f32", den, flag.all, b, b, a, defs=(0, 1))
        num = self.reg(V, name="scaled numerator")[0]
        self.emit("v_div_scale_f32", num, VCC, a, b, a, defs=(0, 1))
        r = self.valu("v_rcp_f32", [den], encoding="vop1")
        t = self.reg(V, name="division error")[0]
        self.emit("v_fma_f32", t, den.negated(), r, Imm(1.0))
        r2 = self.valu("v_fma_f32", [t, r, r], encoding="vop3")
        q = self.valu("v_mul_f32", [num, r2])
        e = self.reg(V, name="division error")[0]
        self.emit("v_fma_f32", e, den.negated(), q, num)
        q2 = self.valu("v_fma_f32", [e, r2, q], encoding="vop3")
        e2 = self.reg(V, name="division error")[0]
        self.emit("v_fma_f32", e2, den.negated(), q2, num)
        q3 = self.reg(V, name="quotient")[0]
        self.emit("v_div_fmas_f32", q3, e2, r2, q2, implicit_uses=("vcc",))
        return self.valu("v_div_fixup_f32", [q3, b, a], encoding="vop3")

    def convert(self, s: L.ConvertStmt) -> None:
        src_t, dst_t = s.src_dtype, s.dst_dtype
        if src_t.bits == 32 and src_t.is_float and dst_t.name in ("e4m3fnuz", "e5m2fnuz"):
            for i in range(0, len(s.dst)):
                self.write_element(s.dst[i], self._to_fp8(self.read_element(s.src[i]), dst_t, s.satfinite))
            return
        for d, x in zip(s.dst, s.src):
            v = self.read_element(x)
            self.write_element(d, self._convert_one(s, v, src_t, dst_t))

    def _convert_one(self, s: L.ConvertStmt, v: RegRef, src_t: D.DType, dst_t: D.DType) -> Any:
        names = (src_t.name, dst_t.name)
        if src_t.name == dst_t.name:
            return v
        if names == ("f32", "bf16") and s.rounding == "rn":
            # round to nearest even on the bit pattern; NaN -> canonical quiet NaN 0x7fff
            lsb = self.valu("v_bfe_u32", [v, Imm(16), Imm(1)], encoding="vop3")
            biased = self.valu("v_add3_u32", [v, lsb, self.to_sgpr(Imm(0x7FFF))], encoding="vop3")
            nan = self.reg(S, 2, "NaN lanes")
            self.emit("v_cmp_u_f32_e64", nan.all, v, v)
            canonical = self.to_vgpr(Imm(0x7FFF0000))
            picked = self.reg(V, name="bf16 bits")[0]
            self.emit("v_cndmask_b32_e64", picked, biased, canonical, nan.all)
            return self.valu("v_lshrrev_b32", [Imm(16), picked])
        if names == ("bf16", "f32"):
            return self.valu("v_lshlrev_b32", [Imm(16), v])
        if names == ("f32", "f16") and s.rounding == "rn":
            return self.valu("v_cvt_f16_f32", [v], encoding="vop1")
        if names == ("f16", "f32"):
            return self.valu("v_cvt_f32_f16", [v], encoding="vop1")
        if src_t.name in ("e4m3fnuz", "e5m2fnuz") and dst_t.name == "f32":
            op = "v_cvt_f32_fp8" if src_t.name == "e4m3fnuz" else "v_cvt_f32_bf8"
            return self.valu(op, [v], encoding="vop1")
        if names == ("i32", "f32") and s.rounding == "rn":
            return self.valu("v_cvt_f32_i32", [v], encoding="vop1")
        if names == ("f32", "i32") and s.rounding in ("rz", "rzi"):
            return self.valu("v_cvt_i32_f32", [v], encoding="vop1")
        if names == ("f32", "i32") and s.rounding in ("rn", "rni"):
            return self.valu("v_cvt_i32_f32", [self.valu("v_rndne_f32", [v], encoding="vop1")], encoding="vop1")
        raise self.error(s, f"conversion {src_t.name} -> {dst_t.name} ({s.rounding}) has no gfx942 lowering")

    def _to_fp8(self, v: RegRef, dst_t: D.DType, satfinite: bool) -> RegRef:
        """f32 -> FNUZ fp8/bf8 (round to nearest even).  ``satfinite``: clamp to ±max_finite
        first; otherwise a magnitude that rounds past max_finite becomes NaN (0x80)."""
        top = float(dst_t.max_finite)
        opcode = "v_cvt_pk_fp8_f32" if dst_t.name == "e4m3fnuz" else "v_cvt_pk_bf8_f32"
        clamped = self.valu("v_med3_f32", [v, self.to_sgpr(Imm(_f32_bits(-top))), self.to_vgpr(Imm(_f32_bits(top)))],
                            encoding="vop3")
        packed = self.valu(opcode, [clamped, Imm(0)], encoding="vop3")
        # NaN stays NaN (0x80): v_med3_f32 may return a bound for a NaN input
        bad = self.reg(S, 2, "NaN lanes")
        self.emit("v_cmp_u_f32_e64", bad.all, v, v)
        if not satfinite:
            # the rounding boundary above max_finite: a magnitude there or beyond overflows to NaN
            boundary = top + math.ldexp(1.0, math.frexp(top)[1] - 2 - dst_t.fmt.mantissa_bits)
            magnitude = self.valu("v_and_b32", [Imm(0x7FFFFFFF), v], commutative=True)
            over = self.reg(S, 2, "overflow lanes")
            self.emit("v_cmp_ge_f32_e64", over.all, magnitude, self.to_sgpr(Imm(_f32_bits(boundary))))
            either = self.reg(S, 2, "NaN results")
            self.emit("s_or_b64", either.all, bad.all, over.all, implicit_defs=("scc",))
            bad = either
        out = self.reg(V, name="fp8 bits")[0]
        self.emit("v_cndmask_b32_e64", out, packed, self.to_vgpr(Imm(0x80)), bad.all)
        return out

    # ------------------------------------------------------------ MFMA
    def mma(self, s: L.MmaStmt) -> None:
        spec = s.atom
        if spec.family != "mfma":
            raise self.error(s, f"{spec.name} is not a gfx942 MFMA", hint="use v_mfma_f32_* atoms on gfx942")
        if isinstance(s.a, L.SharedOperand) or isinstance(s.b, L.SharedOperand):
            raise self.error(s, "MFMA operands come from VGPRs")
        a, b = self.packed(s.a), self.packed(s.b)
        c, d = self.packed(s.c), self.packed(s.d)
        a, b = (self.to_vgpr_tuple(x) for x in (a, b))
        if c != d:
            for i in range(d.size):
                src = RegRef(c.reg, c.offset + i, 1)
                dst = RegRef(d.reg, d.offset + i, 1)
                if dst.file is A:
                    self.emit("v_accvgpr_mov_b32" if src.file is A else "v_accvgpr_write_b32", dst, src)
                else:
                    self.emit("v_accvgpr_read_b32" if src.file is A else "v_mov_b32", dst, src)
        self.emit(spec.lowering.mnemonic, d, a, b, d)

    def to_vgpr_tuple(self, ref: RegRef) -> RegRef:
        if ref.file is V:
            return ref
        tmp = self.reg(V, ref.size, "MFMA operand")
        for i in range(ref.size):
            self.emit("v_accvgpr_read_b32", tmp[i], RegRef(ref.reg, ref.offset + i, 1))
        return tmp.all

    # ------------------------------------------------------------ reductions and shuffles
    def reduce(self, s: L.ReduceStmt) -> None:
        dtype = s.dtype
        if dtype.bits != 32:
            raise self.error(s, f"reduce on {dtype.name}")
        is_float = dtype.is_float
        for dst, group in zip(s.dst, s.groups):
            acc = self.read_element(group[0])
            for x in group[1:]:
                acc = self._apply(s, s.fn, is_float, dtype, [acc, self.read_element(x)])
            for m in s.across_lanes:
                acc = self._butterfly(s, acc, m, is_float, dtype)
            self.write_element(dst, acc)

    def _butterfly(self, s: L.ReduceStmt, value: RegRef, m: int, is_float: bool, dtype: D.DType) -> RegRef:
        """``fn(value, value of lane ^ m)``."""
        quad = {1: "[1,0,3,2]", 2: "[2,3,0,1]", 3: "[3,2,1,0]"}
        opcodes = {"max": "v_max_f32" if is_float else "v_max_i32", "min": "v_min_f32" if is_float else "v_min_i32",
                   "add": "v_add_f32" if is_float else "v_add_u32"}
        if s.fn not in opcodes:
            raise self.error(s, f"cross-lane {s.fn}")
        if m in quad:
            out = self.reg(V, name=f"butterfly ^{m}")[0]
            self.emit(f"{opcodes[s.fn]}_dpp", out, value, value,
                      modifiers=f"quad_perm:{quad[m]} row_mask:0xf bank_mask:0xf")
            return out
        other = self.lane_xor(value, m)
        return self.valu(opcodes[s.fn], [other, value], commutative=True)

    def lane_xor(self, value: RegRef, m: int) -> RegRef:
        out = self.reg(V, name=f"lane ^ {m}")[0]
        if m < 32:
            if _pow2(m) is not None:  # swap neighbouring groups of m lanes: lane ^ m
                mode = f"swizzle(SWAP,{m})"
            else:
                mode = 'swizzle(BITMASK_PERM,"' + "".join("i" if m >> bit & 1 else "p" for bit in range(4, -1, -1)) + '")'
            self.emit("ds_swizzle_b32", out, value, modifiers=f"offset:{mode}")
            return out
        address = self.valu("v_lshlrev_b32", [Imm(2), self.valu("v_xor_b32", [Imm(m), self.lane_id()])])
        self.emit("ds_bpermute_b32", out, address, value)
        return out

    def lane_id(self) -> RegRef:
        def compute() -> RegRef:
            lo = self.reg(V, name="lane id")[0]
            self.emit("v_mbcnt_lo_u32_b32", lo, Imm(-1), Imm(0))
            lane = self.reg(V, name="lane id")[0]
            self.emit("v_mbcnt_hi_u32_b32", lane, Imm(-1), lo)
            return lane
        return self.cached("lane", 0, compute)

    def shuffle(self, s: L.ShuffleStmt) -> None:
        width = s.width
        if s.dtype.bits != 32:
            raise self.error(s, f"shuffle of {s.dtype.name}")
        tid = self.symbol(self.kernel.thread_id)
        group = 64 if width > 32 else 32
        lane = self.valu("v_and_b32", [Imm(group - 1), tid], commutative=True)
        operand = self.vexpr(s.lane)
        start = self.valu("v_and_b32", [Imm(~(width - 1) & 0xFFFFFFFF), lane], commutative=True)
        match s.mode:
            case "idx":
                inside = self.valu("v_and_b32", [Imm(width - 1), self.to_vgpr(operand)], commutative=True)
                source = self.valu("v_add_u32", [start, inside], commutative=True)
            case "xor" | "up" | "down":
                op = {"xor": "v_xor_b32", "up": "v_sub_u32", "down": "v_add_u32"}[s.mode]
                source = self.valu(op, [lane, operand] if s.mode == "up" else [operand, lane],
                                   commutative=s.mode != "up")
                base = self.valu("v_and_b32", [Imm(~(width - 1) & 0xFFFFFFFF), source], commutative=True)
                same = self.reg(S, 2, "source inside the segment")
                self.emit("v_cmp_eq_u32_e64", same.all, *self.legal([base, start], "vop3"))
                picked = self.reg(V, name="shuffle source")[0]
                self.emit("v_cndmask_b32_e64", picked, lane, source, same.all)
                source = picked
            case _:
                raise self.error(s, f"shuffle mode {s.mode}")
        # the wave lane of the source: this thread's wave lane with the group lane replaced
        wave_lane = self.valu("v_and_b32", [Imm(63), tid], commutative=True)
        if group == 32:
            upper = self.valu("v_and_b32", [Imm(32), wave_lane], commutative=True)
            source = self.valu("v_or_b32", [upper, source], commutative=True)
        address = self.valu("v_lshlrev_b32", [Imm(2), source])
        for d, x in zip(s.dst, s.src):
            out = self.reg(V, name="shuffled value")[0]
            self.emit("ds_bpermute_b32", out, address, self.read_element(x))
            self.write_element(d, out)

    # ------------------------------------------------------------ control flow
    def loop(self, s: L.Loop) -> None:
        if s.uniformity is not Uniformity.BLOCK:
            raise self.error(s, "a loop whose trip count differs between the threads of a block",
                             hint="loop bounds must be block-uniform on gfx942 (scalar loops)")
        counter = self.reg(S, 1, f"loop counter {s.var}")[0]
        start, stop = self.sexpr(s.start), self.sexpr(s.stop)
        stop = self.to_sgpr(stop) if isinstance(stop, Imm) and not _inline_int(stop.value) else stop
        self.open_scope()
        self.symbols[s.var] = counter
        self.symbol_depth[s.var] = self.context
        self.emit("s_mov_b32", counter, start)
        head, end = self.label("loop"), self.label("loop_end")
        self.emit("s_cmp_ge_i32", counter, stop, defs=(), implicit_defs=("scc",))
        self.emit("s_cbranch_scc1", LabelRef(end), defs=(), implicit_uses=("scc",))
        self.place(head)
        self.body(s.body)
        self.loc = str(s.loc) if s.loc else ""
        self.emit("s_add_i32", counter, counter, Imm(s.step), implicit_defs=("scc",))
        self.emit("s_cmp_lt_i32", counter, stop, defs=(), implicit_defs=("scc",))
        self.emit("s_cbranch_scc1", LabelRef(head), defs=(), implicit_uses=("scc",))
        self.place(end)
        self.close_scope()

    def branch(self, s: L.Branch) -> None:
        if s.kind == "warp_role" and s.registers is not None:
            raise self.error(s, "warp roles with register budgets (setmaxnreg) are NVIDIA-only")
        if s.uniformity is Uniformity.BLOCK or self.wave_uniform(s.cond):
            # every lane of a wavefront takes the same side: a scalar branch
            m = self.mask(s.cond)
            if m is True or m is False:
                self.body(s.then if m else s.orelse)
                return
            other, end = self.label("else"), self.label("endif")
            self.open_scope()
            test = self.emit("s_cmp_lg_u64", m, Imm(0), defs=(), implicit_defs=("scc",))
            self.emit("s_cbranch_scc0", LabelRef(other), defs=(), implicit_uses=("scc",))
            self.body(s.then)
            self.close_scope()
            if s.orelse:
                self.emit("s_branch", LabelRef(end), defs=())
            self.place(other)
            if s.orelse:
                self.open_scope(self.position(test))
                self.body(s.orelse)
                self.close_scope()
                self.place(end)
            return
        m = self.mask(s.cond)
        if m is True or m is False:
            self.body(s.then if m else s.orelse)
            return
        saved = self.reg(S, 2, "saved exec")
        self.open_scope()
        enter = self.emit("s_and_saveexec_b64", saved.all, m, implicit_defs=("exec", "scc"), implicit_uses=("exec",))
        skip = self.label("then_end")
        self.emit("s_cbranch_execz", LabelRef(skip), defs=(), implicit_uses=("exec",))
        self.body(s.then)
        self.close_scope()
        self.place(skip)
        if s.orelse:
            self.open_scope(self.position(enter))
            self.emit("s_andn2_b64", EXEC, saved.all, m, implicit_defs=("exec", "scc"))
            skip_else = self.label("else_end")
            self.emit("s_cbranch_execz", LabelRef(skip_else), defs=(), implicit_uses=("exec",))
            self.body(s.orelse)
            self.close_scope()
            self.place(skip_else)
        self.emit("s_mov_b64", EXEC, saved.all, defs=(), implicit_defs=("exec",))

    # ------------------------------------------------------------ memory
    def copy(self, s: L.CopyStmt) -> None:
        if s.atom in LDS_DIRECT:
            for pred, transfers in self._by_predicate(s.transfers):
                # masked-off lanes must not write LDS (the IR leaves those elements alone): exec
                prepared = [self.lds_direct_operands(s, t) for t in transfers]
                self.masked(pred, lambda prepared=prepared: [self.lds_direct(*x) for x in prepared])
            return
        if s.atom not in ("sync", "reg", "buffer.load"):
            raise self.error(s, f"copy atom {s.atom!r} has no gfx942 lowering",
                             hint="gfx942 copies: 'sync' (global/LDS loads and stores), 'buffer.load', "
                                  "'buffer.load.lds', 'reg'")
        groups: list[tuple[Any, list[L.Transfer]]] = []
        for t in s.transfers:
            pred = t.predicate
            if s.atom == "buffer.load":
                pred = sympy.true  # masked-off lanes read out of range: zeros
            if groups and groups[-1][0] == pred:
                groups[-1][1].append(t)
            else:
                groups.append((pred, [t]))
        for pred, transfers in groups:
            # addresses do not depend on the mask: computed outside the exec region, they are
            # shared by every region of the copy (lanes outside it compute but never access)
            prepared = [self.addresses(t) for t in transfers]

            def run(transfers=transfers, prepared=prepared) -> None:
                for t, addresses in zip(transfers, prepared):
                    self.transfer(s, t, addresses)
            self.masked(pred, run)

    @staticmethod
    def _by_predicate(transfers: tuple[L.Transfer, ...]) -> list[tuple[Any, list[L.Transfer]]]:
        groups: list[tuple[Any, list[L.Transfer]]] = []
        for t in transfers:
            if groups and groups[-1][0] == t.predicate:
                groups[-1][1].append(t)
            else:
                groups.append((t.predicate, [t]))
        return groups

    # -- direct-to-LDS loads
    def lds_direct_operands(self, s: L.CopyStmt, t: L.Transfer) -> tuple[RegRef, RegRef, Any, tuple[int, int]]:
        """(lane byte offset, buffer resource, M0 value, LDS region) of one ``buffer.load.lds`` transfer.

        The instruction writes lane ``l``'s dword at LDS byte ``M0 + 4*l``: the destination must
        be one dword per lane, at a wave-uniform base plus 4 bytes per lane — checked for every
        thread of the block by evaluating the address (the base is then the address of the
        wavefront's lane 0, a wave-uniform expression that selection keeps in SGPRs)."""
        src, dst = t.src, t.dst
        if not (isinstance(src, L.MemoryRun) and src.space is N.MemorySpace.GLOBAL
                and isinstance(dst, L.MemoryRun) and dst.space is N.MemorySpace.SHARED):
            raise self.error(s, "buffer.load.lds copies global memory into LDS")
        if src.nbytes != 4 or dst.nbytes != 4:
            raise self.error(s, f"buffer.load.lds moves one dword per lane on gfx942; this transfer moves "
                             f"{dst.nbytes} bytes of %{dst.buffer.name}",
                             hint="tile the copy so that each thread moves 4 bytes (one f32, two bf16)")
        tid = self.kernel.thread_id
        byte = sympy.expand(sympy.sympify(dst.address) * dst.dtype.itemsize)
        terms = sympy.Add.make_args(byte) if byte != 0 else ()
        lane_part = sympy.Add(*[x for x in terms if x.has(tid)])
        rest = sympy.Add(*[x for x in terms if not x.has(tid)])
        where = f"the LDS destination %{dst.buffer.name}[{dst.address}]"
        if lane_part.free_symbols - {tid} or not self.uniform(rest):
            raise self.error(s, f"buffer.load.lds: {where} mixes the thread id with other per-thread values",
                             hint="the destination must be a block-uniform base plus a function of the thread id")
        wave = sympy.Dummy("wave", integer=True, nonnegative=True)
        wave_base = sympy.expand(lane_part.subs(tid, WAVE * wave))
        tids = np.arange(self.kernel.launch.threads, dtype=np.int64)
        got = np.broadcast_to(_Compiled(lane_part)({tid: tids}), tids.shape)
        want = np.broadcast_to(_Compiled(wave_base)({wave: tids // WAVE}), tids.shape) + 4 * (tids % WAVE)
        if not np.array_equal(got, want):
            bad = int(np.flatnonzero(got != want)[0])
            raise self.error(s, f"buffer.load.lds: lane l of a wavefront writes the dword at M0 + 4*l, but "
                             f"{where} of thread {bad} is byte {int(got[bad])}, not its wavefront's base "
                             f"{int(want[bad] - 4 * (bad % WAVE))} + {4 * (bad % WAVE)}",
                             hint="lay the copy out so that consecutive lanes write consecutive dwords")
        m0 = sympy.expand(wave_base.subs(wave, symbolic.FloorDiv(tid, WAVE)) + rest
                          + self.lk.shared_offset(dst.buffer))
        offset, rsrc = self.buffer_operands(s, src)
        return offset, rsrc, m0, self.lds_region(dst.buffer)

    def lds_direct(self, offset: RegRef, rsrc: RegRef, m0: Any, region: tuple[int, int]) -> None:
        const, rest = sympy.expand(m0).as_coeff_Add()
        if rest != 0 and const != 0:  # the chunk's constant offset added on the way into M0
            self.emit("s_add_i32", M0, self.sexpr(rest), Imm(int(const)), defs=(), implicit_defs=("m0", "scc"))
        else:
            self.emit("s_mov_b32", M0, self.sexpr(m0), defs=(), implicit_defs=("m0",))
        self.emit("buffer_load_dword", offset, rsrc, Imm(0), defs=(), modifiers="offen lds",
                  implicit_uses=("m0",), implicit_defs=("lds",), lds=region)

    def addresses(self, t: L.Transfer) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for side, operand in (("src", t.src), ("dst", t.dst)):
            if isinstance(operand, L.MemoryRun) and operand.space in (N.MemorySpace.GLOBAL, N.MemorySpace.SHARED):
                out[side] = self.address(operand)
        return out

    def address(self, run: L.MemoryRun) -> tuple:
        if run.space is N.MemorySpace.SHARED:
            return ("lds", *self.lds_address(run))
        return self.global_address(run)

    def transfer(self, s: L.CopyStmt, t: L.Transfer, addresses: dict[str, Any] | None = None) -> None:
        addresses = addresses or {}
        src, dst = t.src, t.dst
        if isinstance(src, L.MemoryRun) and isinstance(dst, tuple):
            if s.atom == "buffer.load":
                self.buffer_load(s, src, dst, t.predicate)
            else:
                self.load_into_registers(s, src, dst, addresses.get("src"))
        elif isinstance(src, tuple) and isinstance(dst, L.MemoryRun):
            self.store_from_registers(s, src, dst, addresses.get("dst"))
        elif isinstance(src, L.MemoryRun) and isinstance(dst, L.MemoryRun):
            data = self.reg(V, max(1, -(-src.nbytes // 4)), f"staging of %{src.buffer.name} -> %{dst.buffer.name}")
            self.memory_load(s, src, data.all, addresses.get("src"))
            self.memory_store(s, dst, data.all, addresses.get("dst"))
        elif isinstance(src, tuple) and isinstance(dst, tuple):
            for x, y in zip(src, dst):
                self.write_element(y, self.read_element(x))
        else:  # a constant source
            for y in dst:
                dtype = self.dtypes.get(y.buffer) or self.lk.registers[y.buffer].dtype
                self.write_element(y, Imm(self._bits_of(src, dtype)))

    def _register_run(self, regs: tuple[L.Reg, ...]) -> RegRef | None:
        """The dwords of ``regs`` when they are a contiguous dword-aligned run, else None."""
        try:
            return self.packed(regs)
        except UnsupportedError:
            return None

    def load_into_registers(self, s: L.CopyStmt, run: L.MemoryRun, regs: tuple[L.Reg, ...],
                            address: tuple | None = None) -> None:
        for r in regs:
            self.buffer(r.buffer)
        direct = self._register_run(regs)
        if direct is not None and run.nbytes >= 4:
            self.memory_load(s, run, direct, address)
            return
        staging = self.reg(V, max(1, -(-run.nbytes // 4)), f"staging of %{run.buffer.name}")
        self.memory_load(s, run, staging.all, address)
        bits = run.dtype.bits
        for i, r in enumerate(regs):
            word = staging[(i * bits) // 32]
            offset = (i * bits) % 32
            value = word if bits == 32 else self.valu("v_bfe_u32", [word, Imm(offset), Imm(bits)], encoding="vop3")
            self.write_element(r, value)

    def store_from_registers(self, s: L.CopyStmt, regs: tuple[L.Reg, ...], run: L.MemoryRun,
                             address: tuple | None = None) -> None:
        for r in regs:
            self.buffer(r.buffer)
        direct = self._register_run(regs)
        if direct is not None and run.nbytes >= 4:
            self.memory_store(s, run, direct, address)
            return
        bits = run.dtype.bits
        staging = self.reg(V, max(1, -(-run.nbytes // 4)), f"staging for %{run.buffer.name}")
        if bits < 32:
            for w in range(staging.size):
                self.emit("v_mov_b32", staging[w], Imm(0))
        for i, r in enumerate(regs):
            value = self.read_element(r)
            word, offset = staging[(i * bits) // 32], (i * bits) % 32
            if bits == 32:
                self.emit("v_mov_b32", word, value)
            else:
                shifted = self.valu("v_lshlrev_b32", [Imm(offset), value]) if offset else value
                self.emit("v_bfi_b32", word, *self.legal([self.to_sgpr(Imm(((1 << bits) - 1) << offset)), shifted,
                                                          word], "vop3"))
        self.memory_store(s, run, staging.all, address)

    # -- addresses
    def _split(self, address: Any, itemsize: int, max_offset: int, min_offset: int = 0) -> tuple[Any, int]:
        """(address without its constant part, constant byte offset) when the offset fits."""
        address = sympy.expand(sympy.sympify(address))
        const, rest = address.as_coeff_Add() if isinstance(address, sympy.Add) else (
            (address, sympy.Integer(0)) if isinstance(address, sympy.Integer) else (sympy.Integer(0), address))
        byte = int(const) * itemsize
        if min_offset <= byte <= max_offset:
            return rest, byte
        return address, 0

    def global_address(self, run: L.MemoryRun) -> tuple[str, Any, int]:
        """('saddr', (voffset, sbase), imm) or ('vaddr', vaddr pair, imm) for a global run."""
        name = run.buffer.name
        base = self.tensor_base.get(name)
        if base is None:
            raise self.error(None, f"%{name} is not a tensor parameter")
        itemsize = run.dtype.itemsize
        address, imm = self._split(run.address, itemsize, 4095, -4096)
        terms = sympy.Add.make_args(address) if address != 0 else ()
        uniform = sympy.Add(*[t for t in terms if self.uniform(t)])
        varying = sympy.Add(*[t for t in terms if not self.uniform(t)])
        sbase = base
        if uniform != 0:
            sbase = self.scaled_base(base, uniform, itemsize)
        if varying == 0:
            return "saddr", (self.zero_vgpr(), sbase), imm
        lo, hi = self.lk.facts.interval(varying * itemsize)
        if self.lk.bits(varying) == 32 and lo is not None and hi is not None and lo >= 0 and hi < 2**32:
            voffset = self.to_vgpr(self.byte_offset32(varying, itemsize))
            return "saddr", (voffset, sbase), imm
        offset64 = self.vexpr64(varying)

        def compute() -> RegRef:
            pair = self.reg(V, 2, f"address in %{name}").all
            self.emit("v_lshl_add_u64", pair, offset64, Imm(int(math.log2(itemsize))), sbase)
            return pair
        pair = self.cached(("vaddr", offset64, sbase, itemsize), self.depth(address), compute)
        return "vaddr", pair, imm

    def zero_vgpr(self) -> RegRef:
        return self.cached("zero", 0, lambda: self.to_vgpr(Imm(0)))

    def scaled_base(self, base: RegRef, uniform: Any, itemsize: int) -> RegRef:
        """The 64-bit address ``base + uniform * itemsize`` in an SGPR pair."""
        return self.cached(("base", id(base.reg), uniform, itemsize), self.depth(uniform),
                           lambda: self._scaled_base(base, uniform, itemsize))

    def _scaled_base(self, base: RegRef, uniform: Any, itemsize: int) -> RegRef:
        if self._small(sympy.expand(uniform * itemsize)):
            offset: Any = self.sexpr(sympy.expand(uniform * itemsize))
            hi: Any = Imm(0)
        else:
            pair = self.sexpr64(uniform)
            k = int(math.log2(itemsize))
            if k:
                shifted = self.reg(S, 2, "byte offset")
                self.emit("s_lshl_b64", shifted.all, pair, Imm(k), implicit_defs=("scc",))
                pair = shifted.all
            offset, hi = RegRef(pair.reg, pair.offset, 1), RegRef(pair.reg, pair.offset + 1, 1)
        out = self.reg(S, 2, "tensor address + uniform offset")
        self.emit("s_add_u32", out[0], RegRef(base.reg, base.offset, 1), offset, implicit_defs=("scc",))
        self.emit("s_addc_u32", out[1], RegRef(base.reg, base.offset + 1, 1), hi, implicit_defs=("scc",),
                  implicit_uses=("scc",))
        return out.all

    def byte_offset32(self, address: Any, itemsize: int) -> RegRef:
        value = self.vexpr(address)
        k = int(math.log2(itemsize))
        if k == 0:
            return self.to_vgpr(value)
        return self.cached(("bytes", address, itemsize), self.depth(address),
                           lambda: self.valu("v_lshlrev_b32", [Imm(k), self.to_vgpr(value)]))

    def lds_region(self, buffer: N.Buffer) -> tuple[int, int]:
        """The arena bytes of a shared buffer (every access to it is proved in bounds)."""
        alloc = next(a for a in self.lk.shared if a.buffer is buffer or a.buffer.name == buffer.name)
        return alloc.offset, alloc.offset + alloc.nbytes

    def lds_address(self, run: L.MemoryRun) -> tuple[RegRef, int]:
        itemsize = run.dtype.itemsize
        base = self.lk.shared_offset(run.buffer)
        address, imm = self._split(run.address, itemsize, 65535 - base)
        imm += base
        if imm > 65535:
            address, imm = run.address, 0
        if address == 0:
            return self.to_vgpr(Imm(0)), imm
        return self.byte_offset32(address, itemsize), imm

    # -- instructions by width
    @staticmethod
    def _suffix(nbytes: int, kind: str) -> str:
        if kind == "ds":
            return {1: "b8", 2: "b16", 4: "b32", 8: "b64", 12: "b96", 16: "b128"}[nbytes]
        return {1: "byte", 2: "short", 4: "dword", 8: "dwordx2", 12: "dwordx3", 16: "dwordx4"}[nbytes]

    def memory_load(self, s: L.Stmt, run: L.MemoryRun, data: RegRef, where_: tuple | None = None) -> None:
        nbytes = run.nbytes
        where_ = where_ or self.address(run)
        if run.space is N.MemorySpace.SHARED:
            _, address, imm = where_
            if nbytes in (1, 2):
                op = "ds_read_u8" if nbytes == 1 else "ds_read_u16"
            else:
                op = "ds_read_" + self._suffix(nbytes, "ds")
            self.emit(op, RegRef(data.reg, data.offset, max(1, nbytes // 4)), address,
                      modifiers=f"offset:{imm}" if imm else "", lds=self.lds_region(run.buffer))
            return
        if run.space is not N.MemorySpace.GLOBAL:
            raise self.error(s, f"load from {run.space.value} memory")
        mode, where, imm = where_
        op = {1: "global_load_ubyte", 2: "global_load_ushort"}.get(nbytes) or "global_load_" + self._suffix(nbytes, "g")
        dst = RegRef(data.reg, data.offset, max(1, nbytes // 4))
        mods = f"offset:{imm}" if imm else ""
        if mode == "saddr":
            voffset, sbase = where
            self.emit(op, dst, self.to_vgpr(voffset), sbase, modifiers=mods)
        else:
            self.emit(op, dst, where, "off", modifiers=mods)

    def memory_store(self, s: L.Stmt, run: L.MemoryRun, data: RegRef, where_: tuple | None = None) -> None:
        nbytes = run.nbytes
        src = RegRef(data.reg, data.offset, max(1, nbytes // 4))
        where_ = where_ or self.address(run)
        if run.space is N.MemorySpace.SHARED:
            _, address, imm = where_
            self.emit("ds_write_" + self._suffix(nbytes, "ds"), address, src, defs=(),
                      modifiers=f"offset:{imm}" if imm else "", lds=self.lds_region(run.buffer))
            return
        if run.space is not N.MemorySpace.GLOBAL:
            raise self.error(s, f"store to {run.space.value} memory")
        mode, where, imm = where_
        op = "global_store_" + self._suffix(nbytes, "g")
        mods = f"offset:{imm}" if imm else ""
        if mode == "saddr":
            voffset, sbase = where
            self.emit(op, self.to_vgpr(voffset), src, sbase, defs=(), modifiers=mods)
        else:
            self.emit(op, where, src, "off", defs=(), modifiers=mods)

    # -- buffer loads (out of range -> 0)
    def resource(self, buffer: N.Buffer, uniform: Any = 0) -> RegRef:
        """A buffer resource for the elements of ``buffer`` from index ``uniform`` (block-uniform)
        on: base = tensor address + ``uniform`` elements, no stride, ``num_records`` = the bytes
        left in the tensor from there (0 when none, clamped to 32 bits)."""
        uniform = sympy.expand(sympy.sympify(uniform))
        return self.cached(("rsrc", buffer.name, uniform), self.depth(uniform),
                           lambda: self._resource(buffer, uniform))

    def _resource(self, buffer: N.Buffer, uniform: Any) -> RegRef:
        itemsize = buffer.dtype.itemsize
        elements = sympy.expand(buffer.size)
        base = self.tensor_base[buffer.name] if uniform == 0 else self.scaled_base(
            self.tensor_base[buffer.name], uniform, itemsize)
        rsrc = self.reg(S, 4, f"buffer resource of %{buffer.name}", align=4)
        self.emit("s_mov_b32", rsrc[0], RegRef(base.reg, base.offset, 1))
        self.emit("s_and_b32", rsrc[1], RegRef(base.reg, base.offset + 1, 1), self.to_sgpr(Imm(0xFFFF)),
                  implicit_defs=("scc",))
        if uniform == 0 and self._small(sympy.expand(elements * itemsize)):
            self.emit("s_mov_b32", rsrc[2], self.sexpr(sympy.expand(elements * itemsize)))
        else:
            left = self.reg(S, 2, "elements left")
            total, start = self.sexpr64(elements), self.sexpr64(uniform) if uniform != 0 else None
            if start is None:
                self.emit("s_mov_b64", left.all, total)
            else:
                self.emit("s_sub_u32", left[0], RegRef(total.reg, total.offset, 1), RegRef(start.reg, start.offset, 1),
                          implicit_defs=("scc",))
                self.emit("s_subb_u32", left[1], RegRef(total.reg, total.offset + 1, 1),
                          RegRef(start.reg, start.offset + 1, 1), implicit_defs=("scc",), implicit_uses=("scc",))
            nbytes = self.reg(S, 2, "bytes left")
            self.emit("s_lshl_b64", nbytes.all, left.all, Imm(int(math.log2(itemsize))), implicit_defs=("scc",))
            clamped = self.reg(S, 1, "bytes left (32-bit)")[0]
            self.emit("s_cmp_lg_u32", nbytes[1], Imm(0), defs=(), implicit_defs=("scc",))
            self.emit("s_cselect_b32", clamped, Imm(-1), nbytes[0], implicit_uses=("scc",))
            self.emit("s_cmp_lt_i32", nbytes[1], Imm(0), defs=(), implicit_defs=("scc",))
            self.emit("s_cselect_b32", rsrc[2], Imm(0), clamped, implicit_uses=("scc",))
        self.emit("s_mov_b32", rsrc[3], self.to_sgpr(Imm(BUFFER_DWORD3)))
        return rsrc.all

    def buffer_split(self, run: L.MemoryRun) -> tuple[Any, Any] | None:
        """(resource start, lane offset) in elements of a buffer access of ``run``, or None when
        no split gives a lane offset proved to fit 32 bits."""
        itemsize = run.dtype.itemsize
        address = sympy.expand(run.address)
        terms = sympy.Add.make_args(address) if address != 0 else ()
        blocks = set(self.kernel.block_ids)

        def fits(varying: Any) -> bool:
            lo, hi = self.lk.facts.interval(sympy.expand(varying * itemsize))
            return lo is not None and hi is not None and lo >= 0 and hi < 2**32 and self.lk.bits(varying) == 32

        # the resource starts at the block's base (the terms with a block id, outside loops), so
        # that the copies of a block share one resource across chunks and loop iterations; the
        # rest (loop counters, constants, lanes) is the lane offset.  When that offset is not
        # proved to fit 32 bits, every block-uniform term goes to the resource instead.
        for in_base in (lambda t: self.uniform(t) and bool(t.free_symbols & blocks) and self.depth(t) == 0,
                        lambda t: self.uniform(t) and not t.is_Number):
            uniform = sympy.Add(*[t for t in terms if in_base(t)])
            varying = sympy.Add(*[t for t in terms if not in_base(t)])
            if fits(varying):
                return uniform, varying
        return None

    def buffer_operands(self, s: L.Stmt, run: L.MemoryRun) -> tuple[RegRef, RegRef]:
        """(32-bit lane byte offset, resource) of a buffer access of ``run``."""
        if run.space is not N.MemorySpace.GLOBAL:
            raise self.error(s, "buffer loads read global memory")
        itemsize = run.dtype.itemsize
        split = self.buffer_split(run)
        if split is None:
            raise self.error(s, f"buffer.load of %{run.buffer.name}: the per-lane byte offset of {run.address} is "
                             "not proved to fit 32 bits", hint="use the 'sync' atom (64-bit addresses) for this access")
        uniform, varying = split
        rsrc = self.resource(run.buffer, uniform)
        offset = self.to_vgpr(self.byte_offset32(varying, itemsize)) if varying != 0 else self.zero_vgpr()
        return offset, rsrc

    def buffer_load(self, s: L.CopyStmt, run: L.MemoryRun, regs: tuple[L.Reg, ...], pred: Any) -> None:
        offset, rsrc = self.buffer_operands(s, run)
        m = self.mask(pred)
        if m is not True:
            picked = self.reg(V, name="offset or out of range")[0]
            if m is False:
                self.emit("v_mov_b32", picked, self.to_sgpr(Imm(OUT_OF_RANGE)))
            else:
                past = self.cached("out of range", 0, lambda: self.to_vgpr(Imm(OUT_OF_RANGE)))
                self.emit("v_cndmask_b32_e64", picked, past, offset, m)
            offset = picked
        direct = self._register_run(regs)
        nbytes = run.nbytes
        op = {1: "buffer_load_ubyte", 2: "buffer_load_ushort"}.get(nbytes) or "buffer_load_" + self._suffix(nbytes, "g")
        target = direct if (direct is not None and nbytes >= 4) else self.reg(V, max(1, nbytes // 4), "staging").all
        self.emit(op, target, offset, rsrc, Imm(0), modifiers="offen")
        if target is not direct:
            bits = run.dtype.bits
            for i, r in enumerate(regs):
                word, off = RegRef(target.reg, target.offset + (i * bits) // 32, 1), (i * bits) % 32
                value = word if bits == 32 else self.valu("v_bfe_u32", [word, Imm(off), Imm(bits)], encoding="vop3")
                self.write_element(r, value)

    # ------------------------------------------------------------ other memory statements
    def read_index(self, s: L.ReadIndexStmt) -> None:
        run = s.src
        if run.space is not N.MemorySpace.GLOBAL or run.dtype.bits != 32:
            raise self.error(s, "read_index of a non-32-bit or non-global value")
        if self.uniform(run.address) and self.mask(s.predicate) is True:
            base = self.scaled_base(self.tensor_base[run.buffer.name], run.address, 4) if run.address != 0 \
                else self.tensor_base[run.buffer.name]
            dst = self.reg(S, 1, f"index {s.result}")[0]
            self.emit("s_load_dword", dst, base, "0x0")
            self.symbols[s.result] = dst
            self.symbol_depth[s.result] = self.context
            return
        dst = self.reg(V, 1, f"index {s.result}")[0]
        self.emit("v_mov_b32", dst, Imm(0))
        self.masked(s.predicate, lambda: self.memory_load(s, run, dst))
        self.symbols[s.result] = dst
        self.symbol_depth[s.result] = self.context

    def atomic(self, s: L.AtomicStmt) -> None:
        for run, r, pred in zip(s.dst, s.src, s.predicates):
            dtype = run.dtype
            if s.fn == "add" and dtype.name == "f32":
                op = "global_atomic_add_f32"
            elif s.fn in ("add", "max", "min", "exch") and dtype.bits == 32 and not dtype.is_float:
                signed = dtype.name.startswith("i")
                op = {"add": "global_atomic_add", "exch": "global_atomic_swap",
                      "max": "global_atomic_smax" if signed else "global_atomic_umax",
                      "min": "global_atomic_smin" if signed else "global_atomic_umin"}[s.fn]
            else:
                raise self.error(s, f"atomic {s.fn} on {dtype.name} has no gfx942 instruction")

            def one(run=run, r=r, op=op) -> None:
                mode, where, imm = self.global_address(run)
                value = self.read_element(r)
                mods = f"offset:{imm}" if imm else ""
                if mode == "saddr":
                    self.emit(op, self.to_vgpr(where[0]), value, where[1], defs=(), modifiers=mods)
                else:
                    self.emit(op, where, value, "off", defs=(), modifiers=mods)
            self.masked(pred, one)

    # ------------------------------------------------------------ driver
    def run(self) -> MachineKernel:
        self.prologue()
        self.body(self.lk.body)
        self.loc = ""
        self.emit("s_endpgm", defs=())
        return MachineKernel(self.kernel.name, self.kernel.launch.threads, self.items, self.arguments,
                             self.lk.shared_bytes, self.workgroup_ids)


def select(kernel: N.Kernel, policy: Policy | None = None) -> MachineKernel:
    """Instruction selection for one kernel specialization (IR after policies)."""
    lk = L.lower_kernel(kernel, "gfx942")
    return _Selector(lk, policy or Policy()).run()


