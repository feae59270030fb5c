"""PTX emission for sm_90a (and sm_80 for kernels without Hopper atoms).

:func:`emit_ptx` takes a :class:`~argus.ir.lowering.LoweredKernel` — every target-independent
decision already made — and selects PTX instructions for it:

* typed virtual registers (``%p`` predicates, ``%rs`` 16-bit, ``%r`` 32-bit, ``%rd`` 64-bit,
  ``%f`` f32, ``%fd`` f64; register fragments get one named register per element,
  ``%v<buffer>_<i>``, except a 16-bit fragment that is only ever converted into, copied,
  stored, loaded or fed to an MMA in aligned pairs: it is held as packed 32-bit pairs
  ``%vp<buffer>_<j>`` (elements ``2j`` low, ``2j + 1`` high), as the hardware holds it — one
  16-bit virtual register per element costs a 32-bit physical one where the value lives
  across a loop iteration); ptxas allocates the physical registers;
* index arithmetic in 32 bits where the lowering proved it fits, else 64; common
  subexpressions are computed once per scope (a loop body or branch opens a scope) and the
  divisions, remainders, min and max a loop body needs that do not change in the loop are
  computed before it; unsigned ``div``/``rem``/shifts where the lowering proved
  non-negativity (64-bit division by a constant as a multiply-high, run-time 64-bit division
  through 32 bits when both operands fit), a sign correction elsewhere;
* structured control flow with ``bra.uni`` for uniform branches and loops;
* vector ``ld``/``st`` of the lowering's aligned runs (16-bit elements travel packed in 32-bit
  containers), ``cp.async`` with its zero-fill source size, ``mma.sync``, ``wgmma`` with
  shared-memory descriptors (one fence / commit / wait around each run of synchronous
  wgmmas, or a fence before a run whose group the kernel commits and waits for itself, so a
  group can stay in flight across k-blocks), ``ldmatrix``/``stmatrix``, mbarriers, TMA tensor
  copies (loads and stores) through host-built tensor maps, shuffles and butterfly
  reductions, named barriers, proxy fences and ``setmaxnreg``.

The output is readable: each statement is preceded by its source ``// file:line`` when that
changes.  Floating-point arithmetic carries explicit rounding (``add.rn`` ...) so ptxas does not
contract it into FMAs the reference interpreter does not perform.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

import argus
from argus import symbolic
from argus.errors import ArgusError
from argus.ir import dtypes as D
from argus.ir import lowering as L
from argus.ir import nodes as N
from argus.ir.uniformity import Uniformity

__all__ = ["DEFAULT_PTX_VERSION", "PtxError", "PtxKernel", "emit_ptx"]

DEFAULT_PTX_VERSION = "8.0"
"""ISA version of emitted modules: what sm_90a's wgmma, TMA and setmaxnreg need, and what the
H200 driver (which JITs PTX up to 9.0) and every ptxas since CUDA 12.0 accept."""

TARGETS = ("sm_90a", "sm_80")
WARP_FULL = "0xffffffff"


class PtxError(ArgusError):
    """Something the PTX backend cannot emit (with the op's position and a hint)."""


@dataclass(frozen=True)
class PtxKernel:
    """An emitted module and what launching it needs.

    ``params``: the entry's parameters in order, each ``(kind, name)`` with kind ``tensor``
    (a u64 global pointer), ``size`` (an s32 size or index value), ``scalar`` (f32) or
    ``tensor_map`` (128 bytes, by value).  ``dynamic_shared_bytes``: the dynamic shared memory
    to request at launch (the arena plus alignment slack).
    """

    name: str
    target: str
    version: str
    text: str
    params: tuple[tuple[str, str], ...]
    dynamic_shared_bytes: int
    threads: int
    lowered: L.LoweredKernel = field(repr=False, compare=False)

    @functools.cached_property  # read at every launch: the text is searched once
    def dependent_launch(self) -> bool:
        """Launch with programmatic stream serialization: the kernel waits on the grid
        dependency (``griddepcontrol.wait``) before it touches global memory, as the verifier
        proves, so it may start while the previous kernel of the stream is running."""
        return "griddepcontrol.wait;" in self.text


# --------------------------------------------------------------------------- types

_REG_PREFIX = {"pred": "%p", "b16": "%rs", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}


def _reg_class(dt: D.DType) -> str:
    if dt.is_bool:
        return "pred"
    if dt.is_float and dt.bits == 32:
        return "f32"
    if dt.is_float and dt.bits == 64:
        return "f64"
    return {1: "b16", 2: "b16", 4: "b32", 8: "b64"}[dt.itemsize]


def _mem_type(dt: D.DType) -> str:
    """The PTX type of one element in ld/st (16/8-bit floats move as bits)."""
    if dt.is_float and dt.bits in (32, 64):
        return dt.ptx
    if dt.is_float:
        return f".b{dt.bits}"
    if dt.itemsize == 1:
        return ".u8" if not dt.is_signed else ".s8"
    return dt.ptx


def _float_literal(dt: D.DType, value: float) -> str:
    """A PTX immediate of ``value`` rounded to ``dt`` (hex bit patterns)."""
    from argus.ir import numerics

    bits = int(numerics.to_bits(dt, np.asarray([value], np.float64))[0])
    if dt.bits == 32:
        return f"0f{bits:08X}"
    if dt.bits == 64:
        return f"0d{bits:016X}"
    return f"0x{bits:04X}"


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# --------------------------------------------------------------------------- scopes


class _Scope:
    """Values already computed at this program point (common subexpressions), chained."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.values: dict[Any, Any] = {}  # registers, or a floor division's (q, r, fix) triple

    def get(self, key: Any) -> Any:
        scope: _Scope | None = self
        while scope is not None:
            found = scope.values.get(key)
            if found is not None:
                return found
            scope = scope.parent
        return None


# --------------------------------------------------------------------------- emitter


class _Emitter:
    def __init__(self, lowered: L.LoweredKernel, target: str, version: str, root: str | None) -> None:
        if target not in TARGETS:
            raise PtxError(f"PTX target {target!r} is not supported", hint=f"use one of {', '.join(TARGETS)}")
        self.lowered = lowered
        self.kernel = lowered.kernel
        self.facts = lowered.facts
        self.target = target
        self.version = version
        self.root = root
        self.lines: list[str] = []
        self.counts: dict[str, int] = {k: 0 for k in _REG_PREFIX}
        self.labels = 0
        self.scope = _Scope()
        self.symbols: dict[sympy.Symbol, tuple[str, int]] = {}
        self.tensor_base: dict[str, str] = {}
        self.tensor_map_reg: dict[int, str] = {}
        self.policies: dict[str, str] = {}  # L2 eviction priority -> its cache-policy register
        self.smem_base: str | None = None
        self.last_loc: Any = None
        self.uses_setmaxnreg = any(isinstance(s, L.SetMaxNRegStmt) for s in lowered.walk())
        self.paired = _paired_buffers(lowered)

    # ------------------------------------------------------------ basics
    def reg(self, cls: str) -> str:
        self.counts[cls] += 1
        return f"{_REG_PREFIX[cls]}{self.counts[cls]}"

    def emit(self, text: str) -> None:
        self.lines.append(f"\t{text}")

    def label(self, stem: str) -> str:
        self.labels += 1
        return f"$L_{stem}_{self.labels}"

    def place(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def where(self, stmt: L.Stmt) -> None:
        loc = stmt.loc
        if loc is None or loc == self.last_loc:
            return
        self.last_loc = loc
        path = loc.file
        if self.root and path.startswith(self.root.rstrip("/") + "/"):
            path = path[len(self.root.rstrip("/")) + 1:]
        self.lines.append(f"\t// {path}:{loc.line}")

    def error(self, stmt: L.Stmt, message: str, hint: str | None = None) -> PtxError:
        return PtxError(message, position=stmt.loc, hint=hint)

    def push(self) -> None:
        self.scope = _Scope(self.scope)

    def pop(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    def frag(self, r: L.Reg) -> str:
        if r.buffer in self.paired:
            raise PtxError(f"internal: element {r} of a fragment held in packed pairs read alone")
        return f"%v{r.buffer}_{r.index}"

    def pairs(self, regs: Sequence[L.Reg]) -> list[str] | None:
        """``regs`` as the packed 32-bit registers of their fragment, where the fragment is
        held in pairs (``regs`` then come in aligned pairs, low element first); else ``None``."""
        if not regs or regs[0].buffer not in self.paired:
            return None
        return [f"%vp{regs[i].buffer}_{regs[i].index // 2}" for i in range(0, len(regs), 2)]

    def frag_dtype(self, r: L.Reg) -> D.DType:
        return self.lowered.registers[r.buffer].dtype

    # ------------------------------------------------------------ integer expressions
    def value(self, expr: Any, bits: int) -> str:
        """An operand (register or immediate) holding integer ``expr`` in ``bits`` bits."""
        expr = sympy.sympify(expr)
        if isinstance(expr, sympy.Integer):
            return str(int(expr))
        key = ("int", expr, bits)
        found = self.scope.get(key)
        if found is not None:
            return found
        result = self._compute(expr, bits)
        self.scope.values[key] = result
        return result

    def register(self, expr: Any, bits: int) -> str:
        """Like :meth:`value` but always a register."""
        operand = self.value(expr, bits)
        if operand.startswith("%"):
            return operand
        r = self.reg("b32" if bits == 32 else "b64")
        self.emit(f"mov.b{bits} {r}, {operand};")
        return r

    def _width(self, expr: Any, bits: int) -> int:
        return max(bits, self.facts.bits(expr))

    def _compute(self, expr: sympy.Expr, bits: int) -> str:
        t = f"s{bits}"
        cls = "b32" if bits == 32 else "b64"
        if isinstance(expr, sympy.Symbol):
            if expr not in self.symbols:
                raise PtxError(f"index symbol {expr} has no value here")
            reg, have = self.symbols[expr]
            if have == bits:
                return reg
            out = self.reg(cls)
            self.emit(f"cvt.{t}.s{have} {out}, {reg};")
            return out
        if bits == 32 and self.facts.bits(expr) == 64:
            wide = self.value(expr, 64)
            out = self.reg(cls)
            self.emit(f"cvt.u32.u64 {out}, {wide};")  # the consumer asked for 32 bits: the value fits
            return out
        if isinstance(expr, sympy.Add):
            const, rest = expr.as_coeff_Add()
            # a term with a coefficient after the first becomes a multiply-add: those go last
            terms = sorted(_canonical(sympy.Add.make_args(rest)), key=lambda term: term.as_coeff_Mul()[0] != 1)
            acc: str | None = None
            for term in terms:
                coeff, factor = term.as_coeff_Mul()
                if acc is not None and isinstance(coeff, sympy.Integer) and coeff != 1 and factor != 1:
                    out = self.reg(cls)
                    self.emit(f"mad.lo.{t} {out}, {self.register(factor, bits)}, {int(coeff)}, {acc};")
                    acc = out
                    continue
                operand = self.value(term, bits)
                if acc is None:
                    acc = operand if operand.startswith("%") else self.register(term, bits)
                else:
                    out = self.reg(cls)
                    self.emit(f"add.{t} {out}, {acc}, {operand};")
                    acc = out
            if const != 0:
                out = self.reg(cls)
                self.emit(f"add.{t} {out}, {acc}, {int(const)};")
                acc = out
            assert acc is not None
            return acc
        if isinstance(expr, sympy.Mul):
            coeff, rest = expr.as_coeff_Mul()
            factors = _canonical(sympy.Mul.make_args(rest))
            acc = self.register(factors[0], bits)
            for f in factors[1:]:
                out = self.reg(cls)
                self.emit(f"mul.lo.{t} {out}, {acc}, {self.value(f, bits)};")
                acc = out
            if coeff != 1:
                out = self.reg(cls)
                c = int(coeff)
                if _is_pow2(c):
                    self.emit(f"shl.b{bits} {out}, {acc}, {c.bit_length() - 1};")
                else:
                    self.emit(f"mul.lo.{t} {out}, {acc}, {c};")
                acc = out
            return acc
        if isinstance(expr, (symbolic.FloorDiv, sympy.Mod)):
            a, b = expr.args
            if isinstance(b, sympy.Integer) and b > 0 and self.facts.nonnegative(a):
                # a floor form that reached the emitter without the lowering's rewrite: on a
                # non-negative dividend it is the truncating one, so both spellings share one
                # register (a value hoisted out of a loop under one is found under the other)
                # and the cheaper unsigned division
                truncating = symbolic.TruncDiv if isinstance(expr, symbolic.FloorDiv) else symbolic.TruncMod
                return self.value(truncating(a, b), bits)
        if isinstance(expr, (symbolic.TruncDiv, symbolic.TruncMod, symbolic.FloorDiv, sympy.Mod)):
            return self._division(expr, bits)
        if isinstance(expr, (symbolic.BitXor, symbolic.BitAnd, symbolic.BitOr)):
            op = {symbolic.BitXor: "xor", symbolic.BitAnd: "and", symbolic.BitOr: "or"}[type(expr)]
            a, b = expr.args
            out = self.reg(cls)
            self.emit(f"{op}.b{bits} {out}, {self.register(a, bits)}, {self.value(b, bits)};")
            return out
        if isinstance(expr, (sympy.Min, sympy.Max)):
            op = "min" if isinstance(expr, sympy.Min) else "max"
            args = _canonical(expr.args)
            acc = self.register(args[0], bits)
            for a in args[1:]:
                out = self.reg(cls)
                self.emit(f"{op}.{t} {out}, {acc}, {self.value(a, bits)};")
                acc = out
            return acc
        raise PtxError(f"index expression {expr} ({type(expr).__name__}) has no PTX lowering")

    def _division(self, expr: Any, bits: int) -> str:
        t, cls = f"s{bits}", ("b32" if bits == 32 else "b64")
        a, b = expr.args
        num = self.register(a, bits)
        out = self.reg(cls)
        constant = int(b) if isinstance(b, sympy.Integer) else None
        is_div = isinstance(expr, (symbolic.TruncDiv, symbolic.FloorDiv))
        if constant is not None and constant > 0 and _is_pow2(constant):
            # an arithmetic shift is floor division and a mask is floor modulo (two's
            # complement): right for the truncating forms too, whose dividend is non-negative
            k = constant.bit_length() - 1
            if is_div:
                self.emit(f"shr.{t} {out}, {num}, {k};")
            else:
                self.emit(f"and.b{bits} {out}, {num}, {constant - 1};")
            return out
        den = self.value(b, bits)
        if isinstance(expr, (symbolic.TruncDiv, symbolic.TruncMod)):
            # the truncating forms have a non-negative dividend (the lowering proved it): with a
            # positive constant divisor the unsigned instruction is the same function, and
            # ptxas turns it into a multiply-high where the signed 64-bit one is a subroutine call
            unsigned = constant is not None and constant > 0
            if unsigned and bits == 64:
                return self._divide_u64_by_constant(num, constant, isinstance(expr, symbolic.TruncDiv))
            kind = f"u{bits}" if unsigned else t
            self.emit(f"{'div' if isinstance(expr, symbolic.TruncDiv) else 'rem'}.{kind} {out}, {num}, {den};")
            return out
        # floor forms: truncate, then correct where the remainder's sign differs from the
        # divisor's; one division serves both the floor quotient and the floor modulo of a pair
        pair = ("floor-divrem", a, b, bits)
        found = self.scope.get(pair)
        if found is not None:
            q, r, fix = found
        else:
            q, r, fix = self.reg(cls), self.reg(cls), self.reg("pred")
            if bits == 64:
                self._divrem_s64(num, den, q, r)
            else:
                self.emit(f"div.{t} {q}, {num}, {den};")
                self.emit(f"rem.{t} {r}, {num}, {den};")
            if constant is not None and constant > 0:
                self.emit(f"setp.lt.{t} {fix}, {r}, 0;")
            else:
                sign = self.reg(cls)
                nz = self.reg("pred")
                self.emit(f"xor.b{bits} {sign}, {r}, {self.register(b, bits)};")
                self.emit(f"setp.lt.{t} {fix}, {sign}, 0;")
                self.emit(f"setp.ne.{t} {nz}, {r}, 0;")
                self.emit(f"and.pred {fix}, {fix}, {nz};")
            self.scope.values[pair] = (q, r, fix)
        if is_div:
            self.emit(f"selp.{t} {out}, 1, 0, {fix};")
            self.emit(f"sub.{t} {out}, {q}, {out};")
        else:
            self.emit(f"selp.{t} {out}, {den}, 0, {fix};")
            self.emit(f"add.{t} {out}, {r}, {out};")
        return out

    def _divrem_s64(self, num: str, den: str, q: str, r: str) -> None:
        """Truncating 64-bit ``q, r = num / den, num % den``, through 32-bit unsigned division
        when both operands lie in ``[0, 2**31)`` at run time (where the two agree), which is
        the common case of tile arithmetic whose bounds the lowering could not narrow; ptxas
        lowers the 64-bit instructions to a subroutine call of a few hundred cycles."""
        wide, small = self.reg("b64"), self.reg("pred")
        n32, d32, q32, r32 = (self.reg("b32") for _ in range(4))
        slow, done = self.label("div64"), self.label("div64_done")
        self.emit(f"or.b64 {wide}, {num}, {den};")
        self.emit(f"setp.lt.u64 {small}, {wide}, 2147483648;")
        self.emit(f"@!{small} bra {slow};")
        self.emit(f"cvt.u32.u64 {n32}, {num};")
        self.emit(f"cvt.u32.u64 {d32}, {den};")
        self.emit(f"div.u32 {q32}, {n32}, {d32};")
        self.emit(f"rem.u32 {r32}, {n32}, {d32};")
        self.emit(f"cvt.u64.u32 {q}, {q32};")
        self.emit(f"cvt.u64.u32 {r}, {r32};")
        self.emit(f"bra {done};")
        self.place(slow)
        self.emit(f"div.s64 {q}, {num}, {den};")
        self.emit(f"rem.s64 {r}, {num}, {den};")
        self.place(done)

    def _divide_u64_by_constant(self, num: str, d: int, quotient: bool) -> str:
        """``num // d`` or ``num % d`` for a non-negative 64-bit ``num`` and a constant ``d > 1``
        that is not a power of two, by a multiply-high (ptxas calls a division subroutine).

        With ``e = ceil(log2 d)`` and ``m = ceil(2**(63 + e) / d)`` (below ``2**64``),
        ``floor(x * m / 2**(63 + e)) == x // d`` for every ``0 <= x < 2**63``: the error
        ``m*d - 2**(63 + e)`` is below ``d <= 2**e``."""
        m, e = u64_division_magic(d)
        high, q = self.reg("b64"), self.reg("b64")
        self.emit(f"mul.hi.u64 {high}, {num}, {m};")
        self.emit(f"shr.u64 {q}, {high}, {e - 1};")
        if quotient:
            return q
        product, r = self.reg("b64"), self.reg("b64")
        self.emit(f"mul.lo.u64 {product}, {q}, {d};")
        self.emit(f"sub.u64 {r}, {num}, {product};")
        return r

    # ------------------------------------------------------------ predicates
    def predicate(self, cond: Any) -> str | bool:
        """A predicate register for ``cond``, or a Python bool when it is constant."""
        if cond is None or cond is True or cond is sympy.true:
            return True
        if cond is False or cond is sympy.false:
            return False
        key = ("pred", cond)
        found = self.scope.get(key)
        if found is not None:
            return found
        out = self._predicate(cond)
        if isinstance(out, str):
            self.scope.values[key] = out
        return out

    def _predicate(self, cond: Any) -> str | bool:
        if isinstance(cond, (sympy.And, sympy.Or)):
            parts = [self.predicate(a) for a in cond.args]
            is_and = isinstance(cond, sympy.And)
            regs = [p for p in parts if isinstance(p, str)]
            consts = [p for p in parts if isinstance(p, bool)]
            if is_and and False in consts:
                return False
            if not is_and and True in consts:
                return True
            if not regs:
                return is_and
            acc = regs[0]
            for p in regs[1:]:
                out = self.reg("pred")
                self.emit(f"{'and' if is_and else 'or'}.pred {out}, {acc}, {p};")
                acc = out
            return acc
        if isinstance(cond, sympy.Not):
            inner = self.predicate(cond.args[0])
            if isinstance(inner, bool):
                return not inner
            out = self.reg("pred")
            self.emit(f"not.pred {out}, {inner};")
            return out
        if isinstance(cond, sympy.core.relational.Relational):
            ops = {sympy.StrictLessThan: "lt", sympy.LessThan: "le", sympy.StrictGreaterThan: "gt",
                   sympy.GreaterThan: "ge", sympy.Eq: "eq", sympy.Ne: "ne"}
            op = ops[type(cond)]
            lhs, rhs = cond.args
            bits = max(self.facts.bits(lhs), self.facts.bits(rhs))
            a, b = self.value(lhs, bits), self.value(rhs, bits)
            if not a.startswith("%"):
                swap = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
                a, b, op = b, a, swap[op]
                if not a.startswith("%"):
                    a = self.register(lhs, bits)
            out = self.reg("pred")
            self.emit(f"setp.{op}.s{bits} {out}, {a}, {b};")
            return out
        raise PtxError(f"predicate {cond} has no PTX lowering")

    def guard(self, cond: Any) -> str | bool | None:
        """``@%p `` prefix text for an instruction under ``cond`` (False: never executes)."""
        p = self.predicate(cond)
        if p is True:
            return ""
        if p is False:
            return False
        return f"@{p} "

    # ------------------------------------------------------------ addresses
    def address(self, buffer: N.Buffer, index: Any) -> str:
        """``[reg+imm]`` byte address of element ``index`` of ``buffer`` (global: 64-bit
        generic-global address, shared: 32-bit shared-window address)."""
        itemsize = buffer.dtype.itemsize
        index = sympy.expand(sympy.sympify(index))
        const, rest = index.as_coeff_Add() if isinstance(index, sympy.Add) else (
            (index, sympy.Integer(0)) if isinstance(index, sympy.Integer) else (sympy.Integer(0), index))
        imm = int(const) * itemsize
        if buffer.space is N.MemorySpace.SHARED:
            imm += self.lowered.shared_offset(buffer)
            base = self.smem()
            if rest == 0:
                return f"[{base}+{imm}]" if imm else f"[{base}]"
            key = ("saddr", rest, itemsize)
            found = self.scope.get(key)
            if found is None:
                found = self.reg("b32")
                self.emit(f"mad.lo.s32 {found}, {self.register(rest, 32)}, {itemsize}, {base};")
                self.scope.values[key] = found
            return f"[{found}+{imm}]" if imm else f"[{found}]"
        if buffer.space is N.MemorySpace.GLOBAL:
            base = self.tensor_base[buffer.name]
            if rest == 0:
                return f"[{base}+{imm}]" if imm else f"[{base}]"
            key = ("gaddr", buffer.name, rest)
            found = self.scope.get(key)
            if found is None:
                found = self.reg("b64")
                if self.facts.bits(rest) == 32:
                    self.emit(f"mad.wide.s32 {found}, {self.register(rest, 32)}, {itemsize}, {base};")
                else:
                    self.emit(f"mad.lo.s64 {found}, {self.register(rest, 64)}, {itemsize}, {base};")
                self.scope.values[key] = found
            return f"[{found}+{imm}]" if imm else f"[{found}]"
        raise PtxError(f"%{buffer.name}: no addresses in {buffer.space.value} memory")

    def shared_address(self, buffer: N.Buffer, index: Any) -> str:
        """A register holding the 32-bit shared address of element ``index`` of ``buffer``."""
        text = self.address(buffer, index)[1:-1]
        if "+" not in text:
            return text
        base, imm = text.split("+")
        key = ("sabs", text)
        found = self.scope.get(key)
        if found is None:
            found = self.reg("b32")
            self.emit(f"add.s32 {found}, {base}, {imm};")
            self.scope.values[key] = found
        return found

    def smem(self) -> str:
        if self.smem_base is None:
            raise PtxError("shared memory is used but the kernel allocates none")
        return self.smem_base

    # ------------------------------------------------------------ register moves
    def space(self, run: L.MemoryRun) -> str:
        space = {N.MemorySpace.GLOBAL: ".global", N.MemorySpace.SHARED: ".shared"}.get(run.space)
        if space is None:
            raise PtxError(f"loads and stores in {run.space.name} memory have no PTX lowering yet "
                           "(mbarrier arrivals and TMA multicast into peer blocks do)")
        return space

    def load(self, run: L.MemoryRun, regs: Sequence[str], prefix: str, packed: bool = False) -> None:
        self._access("ld", run, regs, prefix, packed)

    def store(self, run: L.MemoryRun, regs: Sequence[str], prefix: str, packed: bool = False) -> None:
        self._access("st", run, regs, prefix, packed)

    def _access(self, kind: str, run: L.MemoryRun, regs: Sequence[str], prefix: str, packed: bool = False) -> None:
        """``packed``: ``regs`` are the 32-bit pairs of 16-bit elements (a fragment held in pairs)."""
        dt = run.dtype
        width, size = run.width, dt.itemsize
        address = self.address(run.buffer, run.address)
        space = self.space(run)
        if packed:
            vec = "" if len(regs) == 1 else f".v{len(regs)}"
            operands = regs[0] if len(regs) == 1 else "{" + ", ".join(regs) + "}"
            if kind == "ld":
                self.emit(f"{prefix}ld{space}{vec}.b32 {operands}, {address};")
            else:
                self.emit(f"{prefix}st{space}{vec}.b32 {address}, {operands};")
            return
        if width == 1 or size >= 4:
            vec = "" if width == 1 else f".v{width}"
            operands = regs[0] if width == 1 else "{" + ", ".join(regs) + "}"
            if width > 4:
                raise PtxError(f"a vector of {width} {dt} elements is wider than PTX allows")
            if kind == "ld":
                self.emit(f"{prefix}ld{space}{vec}{_mem_type(dt)} {operands}, {address};")
            else:
                self.emit(f"{prefix}st{space}{vec}{_mem_type(dt)} {address}, {operands};")
            return
        if size == 2:  # 16-bit elements travel in 32-bit containers, low half first
            containers = [self.reg("b32") for _ in range(width // 2)]
            vec = "" if len(containers) == 1 else f".v{len(containers)}"
            operands = containers[0] if len(containers) == 1 else "{" + ", ".join(containers) + "}"
            if kind == "ld":
                self.emit(f"{prefix}ld{space}{vec}.b32 {operands}, {address};")
                for i, c in enumerate(containers):  # under the same guard: masked elements keep their value
                    self.emit(f"{prefix}mov.b32 {{{regs[2 * i]}, {regs[2 * i + 1]}}}, {c};")
            else:
                for i, c in enumerate(containers):
                    self.emit(f"mov.b32 {c}, {{{regs[2 * i]}, {regs[2 * i + 1]}}};")
                self.emit(f"{prefix}st{space}{vec}.b32 {address}, {operands};")
            return
        raise PtxError(f"vector access of {width} {size}-byte elements is not supported")

    # ------------------------------------------------------------ statements
    def stmts(self, stmts: Sequence[L.Stmt]) -> None:
        i = 0
        while i < len(stmts):
            s = stmts[i]
            if isinstance(s, L.MmaStmt) and s.atom.family == "wgmma" and not s.asynchronous:
                j = i
                while j < len(stmts) and isinstance(stmts[j], L.MmaStmt) and stmts[j].atom.family == "wgmma" \
                        and not stmts[j].asynchronous:
                    j += 1
                committed = j < len(stmts) and isinstance(stmts[j], L.AsyncCommitStmt) \
                    and stmts[j].group is N.HandleKind.WGMMA_GROUP
                self.wgmma_group(stmts[i:j], own_commit=not committed)
                i = j
                continue
            if isinstance(s, L.AsyncWaitStmt) and s.group is N.HandleKind.WGMMA_GROUP and s.pending == 0:
                # the warps block here until the tensor cores finish: index arithmetic the rest of
                # the region needs (an epilogue's tile coordinates) runs in that shadow instead of
                # on the critical path after it
                self.hoist_from(stmts[i + 1:], set())
            self.stmt(s)
            i += 1

    def stmt(self, s: L.Stmt) -> None:
        self.where(s)
        match s:
            case L.CopyStmt():
                self.copy(s)
            case L.TensorCopy():
                self.tensor_copy(s)
            case L.MatrixCopyStmt():
                self.matrix_copy(s)
            case L.FillStmt(dst=dst, value=value):
                for r in dst:
                    dt = self.frag_dtype(r)
                    self.emit(f"mov{self.move_type(dt)} {self.frag(r)}, {self.literal(dt, value)};")
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
            case L.AtomicStmt():
                self.atomic(s)
            case L.ReadIndexStmt():
                self.read_index(s)
            case L.Barrier(id=bid, participants=participants):
                if participants is None or (participants == self.kernel.launch.threads and bid == 0):
                    self.emit(f"bar.sync {bid};")
                else:
                    self.emit(f"bar.sync {bid}, {participants};")
            case L.ClusterBarrierStmt():
                self.emit("barrier.cluster.arrive.aligned;")
                self.emit("barrier.cluster.wait.aligned;")
            case L.FenceStmt(fence=fence) if fence.startswith("griddep."):
                # programmatic dependent launch exists from sm_90 on; an sm_80 module is never
                # launched as a dependent (the launcher keys on the instruction), so there the
                # previous kernel has completed before the block starts and both are no-ops
                if self.target == "sm_90a":
                    self.emit("griddepcontrol.wait;" if fence == "griddep.wait" else "griddepcontrol.launch_dependents;")
            case L.FenceStmt(fence=fence):
                text = {"proxy.async": "fence.proxy.async.shared::cta;",
                        "mbarrier_init": "fence.mbarrier_init.release.cluster;",
                        "acq_rel": "fence.acq_rel.cta;", "sc": "fence.sc.cta;",
                        "wgmma": "wgmma.fence.sync.aligned;"}.get(fence)
                if text is None:
                    raise self.error(s, f"fence {fence!r} has no PTX lowering")
                self.emit(text)
            case L.MbarrierInitStmt(buffer=buffer, address=address, count=count):
                self.emit(f"mbarrier.init.shared::cta.b64 {self.address(buffer, address)}, {count};")
            case L.MbarrierArriveStmt(buffer=buffer, address=address, count=count, rank=rank) if rank is not None:
                # a peer block's mbarrier, by its shared::cluster address.  The arrive releases at
                # CTA scope (the instruction's default): what it orders before the peer's later
                # writes (a multicast refill) are this thread's accesses of its own block's shared
                # memory — its wgmma reads retired at a wait_group, its loads performed at CTA
                # scope — since generic DSMEM accesses are refused below.  A cluster-scope release
                # also waits for the thread's writes to become visible cluster-wide: on an H200 it
                # made the 2-block cluster GEMM 1.66x slower (benchmarks/RESULTS.md).
                self.require_sm90(s, "a remote mbarrier arrive")
                remote = self.reg("b32")
                self.emit(f"mapa.shared::cluster.u32 {remote}, {self.shared_address(buffer, address)}, "
                          f"{self.value(rank, 32)};")
                tail = "" if count == 1 else f", {count}"
                self.emit(f"mbarrier.arrive.shared::cluster.b64 _, [{remote}]{tail};")
            case L.MbarrierArriveStmt(buffer=buffer, address=address, expect_tx=tx, count=count):
                where = self.address(buffer, address)
                if tx != 0:
                    if count != 1:
                        raise self.error(s, "an expect-tx arrival counts one arrival")
                    self.emit(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, {where}, {self.value(tx, 32)};")
                elif count == 1:
                    self.emit(f"mbarrier.arrive.shared::cta.b64 _, {where};")
                else:
                    self.emit(f"mbarrier.arrive.shared::cta.b64 _, {where}, {count};")
            case L.MbarrierWaitStmt(buffer=buffer, address=address, parity=parity):
                where = self.address(buffer, address)
                par = self.value(parity, 32)
                again = self.label("wait")
                done = self.reg("pred")
                self.place(again)
                self.emit(f"mbarrier.try_wait.parity.shared::cta.b64 {done}, {where}, {par};")
                self.emit(f"@!{done} bra {again};")
            case L.AsyncCommitStmt(group=group):
                self.emit({N.HandleKind.CP_ASYNC_GROUP: "cp.async.commit_group;",
                           N.HandleKind.WGMMA_GROUP: "wgmma.commit_group.sync.aligned;",
                           N.HandleKind.TMA_STORE_GROUP: "cp.async.bulk.commit_group;"}[group])
            case L.AsyncWaitStmt(group=group, pending=pending, read=read):
                if group is N.HandleKind.CP_ASYNC_GROUP:
                    self.emit(f"cp.async.wait_group {pending};")
                elif group is N.HandleKind.WGMMA_GROUP:
                    self.emit(f"wgmma.wait_group.sync.aligned {pending};")
                elif group is N.HandleKind.TMA_STORE_GROUP:
                    self.emit(f"cp.async.bulk.wait_group{'.read' if read else ''} {pending};")
                else:
                    raise self.error(s, f"no wait for {group}")
            case L.SetMaxNRegStmt(registers=registers, increase=increase):
                self.require_sm90(s, "setmaxnreg")
                self.emit(f"setmaxnreg.{'inc' if increase else 'dec'}.sync.aligned.u32 {registers};")
            case L.Loop():
                self.loop(s)
            case L.Branch():
                self.branch(s)
            case _:
                raise self.error(s, f"statement {type(s).__name__} has no PTX lowering")

    def require_sm90(self, s: L.Stmt, what: str) -> None:
        if self.target != "sm_90a":
            raise self.error(s, f"{what} needs sm_90a (target {self.target})", hint="compile with --target sm_90a")

    def move_type(self, dt: D.DType) -> str:
        cls = _reg_class(dt)
        return {"f32": ".f32", "f64": ".f64", "b16": ".b16", "b32": ".b32", "b64": ".b64", "pred": ".pred"}[cls]

    def literal(self, dt: D.DType, value: Any) -> str:
        if dt.is_float:
            return _float_literal(dt, float(value))
        return str(int(value))

    # ------------------------------------------------------------ copies
    def copy(self, s: L.CopyStmt) -> None:
        if s.atom.startswith("cp.async"):
            self.require_cp_async(s)
            for t in s.transfers:
                self.cp_async(s, t)
            return
        if s.atom.startswith(("ldmatrix", "stmatrix")):
            raise self.error(s, f"{s.atom}: matrix copy atoms are not emitted yet",
                             hint="load fragments with plain copies (A.load of an mma_partition)")
        moves = _register_moves(s)
        paired = any(a.buffer in self.paired or b.buffer in self.paired for a, (b, _) in moves.items())
        if paired:  # 16-bit element pairs, one 32-bit move each
            for a, (b, predicate) in moves.items():
                prefix = self.guard(predicate)
                if a.index % 2 == 0 and prefix is not False:
                    self.pair_copy((a, _partner(a)), (b, _partner(b)), prefix)
        for t in s.transfers:
            prefix = self.guard(t.predicate)
            if prefix is False or (paired and isinstance(t.src, tuple) and isinstance(t.dst, tuple)):
                continue
            src, dst = t.src, t.dst
            if isinstance(src, L.MemoryRun) and isinstance(dst, tuple):
                containers = self.pairs(dst)
                self.load(src, containers or [self.frag(r) for r in dst], prefix, containers is not None)
            elif isinstance(src, tuple) and isinstance(dst, L.MemoryRun):
                containers = self.pairs(src)
                self.store(dst, containers or [self.frag(r) for r in src], prefix, containers is not None)
            elif isinstance(src, L.MemoryRun) and isinstance(dst, L.MemoryRun):
                cls = _reg_class(src.dtype)
                temps = [self.reg(cls) for _ in range(src.width)]
                self.load(src, temps, prefix)
                self.store(dst, temps, prefix)
            elif isinstance(src, tuple) and isinstance(dst, tuple):
                for a, b in zip(src, dst):
                    self.emit(f"{prefix}mov{self.move_type(self.frag_dtype(b))} {self.frag(b)}, {self.frag(a)};")
            else:
                raise self.error(s, "unsupported copy operands")

    def pair_copy(self, src: Sequence[L.Reg], dst: Sequence[L.Reg], prefix: str) -> None:
        """A register copy of 16-bit elements in aligned pairs, either side held in packed pairs."""
        froms, tos = self.pairs(src), self.pairs(dst)
        for j in range(len(src) // 2):
            if froms is not None and tos is not None:
                self.emit(f"{prefix}mov.b32 {tos[j]}, {froms[j]};")
            elif tos is not None:
                self.emit(f"{prefix}mov.b32 {tos[j]}, {{{self.frag(src[2 * j])}, {self.frag(src[2 * j + 1])}}};")
            else:
                self.emit(f"{prefix}mov.b32 {{{self.frag(dst[2 * j])}, {self.frag(dst[2 * j + 1])}}}, {froms[j]};")

    def matrix_copy(self, s: L.MatrixCopyStmt) -> None:
        """``ldmatrix``/``stmatrix``: this lane's row address; register ``j`` of the instruction
        packs fragment values ``2j`` (low half) and ``2j + 1``."""
        op = "ldmatrix" if s.load else "stmatrix"
        if op == "stmatrix":
            self.require_sm90(s, "stmatrix")
        elif self.target not in ("sm_80", "sm_90a"):
            raise self.error(s, "ldmatrix needs sm_80 or later")
        parts = s.atom.split(".")  # ldmatrix.m8n8.x4[.trans].b16
        count = int(parts[2][1:])
        trans = ".trans" if "trans" in parts else ""
        where = self.address(s.buffer, s.address)
        packed = [self.reg("b32") for _ in range(count)]
        regs = "{" + ", ".join(packed) + "}"
        pairs = [(self.frag(s.regs[2 * j]), self.frag(s.regs[2 * j + 1])) for j in range(count)]
        if s.load:
            self.emit(f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {regs}, {where};")
            for p, (lo, hi) in zip(packed, pairs):
                self.emit(f"mov.b32 {{{lo}, {hi}}}, {p};")
        else:
            for p, (lo, hi) in zip(packed, pairs):
                self.emit(f"mov.b32 {p}, {{{lo}, {hi}}};")
            self.emit(f"stmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {where}, {regs};")

    def require_cp_async(self, s: L.Stmt) -> None:
        if self.target not in ("sm_80", "sm_90a"):
            raise self.error(s, "cp.async needs sm_80 or later")

    def cp_async(self, s: L.CopyStmt, t: L.Transfer) -> None:
        prefix = self.guard(t.predicate)
        if prefix is False:
            return
        src, dst = t.src, t.dst
        assert isinstance(src, L.MemoryRun) and isinstance(dst, L.MemoryRun)
        nbytes = src.nbytes
        if nbytes not in (4, 8, 16):
            raise self.error(s, f"cp.async of {nbytes} bytes (4, 8 or 16 allowed)")
        cache = "cg" if nbytes == 16 else "ca"
        d = self.shared_address(dst.buffer, dst.address)
        g = self.address(src.buffer, src.address)
        source = self.predicate(t.source_predicate)
        if source is True or t.source_predicate is None:
            self.emit(f"{prefix}cp.async.{cache}.shared.global [{d}], {g}, {nbytes};")
        elif source is False:
            self.emit(f"{prefix}cp.async.{cache}.shared.global [{d}], {g}, {nbytes}, 0;")
        else:
            size = self.reg("b32")
            self.emit(f"selp.b32 {size}, {nbytes}, 0, {source};")
            self.emit(f"{prefix}cp.async.{cache}.shared.global [{d}], {g}, {nbytes}, {size};")

    def tensor_copy(self, s: L.TensorCopy) -> None:
        self.require_sm90(s, "TMA")
        spec = self.lowered.tensor_maps[s.tensor_map]
        tmap = self.tensor_map_reg[s.tensor_map]
        coords = ", ".join(self.register(c, 32) for c in s.coords)
        smem = self.shared_address(s.smem, s.smem_address)
        rank = len(spec.box)
        if s.load:
            assert s.mbarrier is not None
            bar = self.shared_address(*s.mbarrier)
            hint, policy = ("", "") if s.l2 is None else (".L2::cache_hint", f", {self.policies[s.l2]}")
            if s.multicast is not None:
                # the box lands at the same offset in every block of the mask, and completes
                # bytes on the mbarrier at the same offset in each of them
                mask = self.reg("b16")
                bits = self.value(s.multicast, 32)
                if bits.lstrip("-").isdigit():
                    self.emit(f"mov.b16 {mask}, {int(bits) & 0xFFFF};")
                else:
                    self.emit(f"cvt.u16.u32 {mask}, {bits};")
                self.emit(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                          f".multicast::cluster{hint} [{smem}], [{tmap}, {{{coords}}}], [{bar}], {mask}{policy};")
                return
            self.emit(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{hint} "
                      f"[{smem}], [{tmap}, {{{coords}}}], [{bar}]{policy};")
        else:
            self.emit(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group "
                      f"[{tmap}, {{{coords}}}], [{smem}];")

    # ------------------------------------------------------------ arithmetic
    def operand(self, x: Any, dt: D.DType) -> str:
        if isinstance(x, L.Reg):
            return self.frag(x)
        if dt.is_float and dt.bits < 32:
            r = self.reg("b16")
            self.emit(f"mov.b16 {r}, {_float_literal(dt, float(x))};")
            return r
        return self.literal(dt, x)

    def elementwise(self, s: L.ElementwiseStmt) -> None:
        dt = s.dtype
        for d, srcs in zip(s.dst, s.srcs):
            args = [self.operand(x, dt) for x in srcs]
            self.emit(self.arith(s, s.fn, dt, self.frag(d), args))

    def arith(self, s: L.Stmt, fn: str, dt: D.DType, out: str, args: list[str]) -> str:
        if dt.is_float and dt.bits == 32:
            table = {"add": "add.rn.f32", "sub": "sub.rn.f32", "mul": "mul.rn.f32", "div": "div.rn.f32",
                     "max": "max.f32", "min": "min.f32", "exp2": "ex2.approx.f32", "fma": "fma.rn.f32",
                     "neg": "neg.f32", "sqrt": "sqrt.rn.f32"}
        elif dt.is_float and dt.bits == 64:
            table = {"add": "add.rn.f64", "sub": "sub.rn.f64", "mul": "mul.rn.f64", "div": "div.rn.f64",
                     "max": "max.f64", "min": "min.f64", "fma": "fma.rn.f64", "neg": "neg.f64", "sqrt": "sqrt.rn.f64"}
        elif dt.is_float and dt.name in ("bf16", "f16"):
            n = dt.name
            table = {"add": f"add.rn.{n}", "sub": f"sub.rn.{n}", "mul": f"mul.rn.{n}", "fma": f"fma.rn.{n}",
                     "max": f"max.{n}", "min": f"min.{n}", "neg": f"neg.{n}"}
        elif dt.is_int and dt.bits in (32, 64):
            p = dt.ptx
            table = {"add": f"add{p}", "sub": f"sub{p}", "mul": f"mul.lo{p}", "max": f"max{p}", "min": f"min{p}"}
        else:
            table = {}
        op = table.get(fn)
        if op is None:
            raise self.error(s, f"elementwise {fn} on {dt} has no PTX lowering")
        return f"{op} {out}, {', '.join(args)};"

    def convert(self, s: L.ConvertStmt) -> None:
        src_t, dst_t = s.src_dtype, s.dst_dtype
        if src_t.name == "f32" and dst_t.name in ("bf16", "f16") and not s.satfinite and s.rounding == "rn":
            # destination registers 2k and 2k+1 at once (cvt.rn.{bf16,f16}x2.f32: the first operand
            # goes to the upper half), unpacked low half first: the packing of the pair a 16-bit
            # store does next folds away
            source = dict(zip(s.dst, s.src))
            rest = []
            for d, r in zip(s.dst, s.src):
                if d.index % 2 == 0 and L.Reg(d.buffer, d.index + 1) in source:
                    hi_dst = L.Reg(d.buffer, d.index + 1)
                    pair = self.pairs((d, hi_dst))
                    packed = pair[0] if pair is not None else self.reg("b32")
                    self.emit(f"cvt.rn.{dst_t.name}x2.f32 {packed}, {self.frag(source[hi_dst])}, {self.frag(r)};")
                    if pair is None:
                        self.emit(f"mov.b32 {{{self.frag(d)}, {self.frag(hi_dst)}}}, {packed};")
                elif not (d.index % 2 == 1 and L.Reg(d.buffer, d.index - 1) in source):
                    rest.append((d, r))
        else:
            rest = list(zip(s.dst, s.src))
        for d, r in rest:
            if src_t == dst_t:
                self.emit(f"mov{self.move_type(dst_t)} {self.frag(d)}, {self.frag(r)};")
                continue
            rounding = ""
            if dst_t.is_float and (src_t.is_int or dst_t.bits < src_t.bits):
                rounding = f".{s.rounding}"
            elif src_t.is_float and dst_t.is_int:
                rounding = f".{ {'rn': 'rni', 'rz': 'rzi', 'rm': 'rmi', 'rp': 'rpi'}.get(s.rounding, s.rounding)}"
            sat = ".satfinite" if s.satfinite else ""
            self.emit(f"cvt{rounding}{sat}{dst_t.ptx}{src_t.ptx} {self.frag(d)}, {self.frag(r)};")

    # ------------------------------------------------------------ MMA
    def packed(self, regs: Sequence[L.Reg]) -> list[str]:
        """Fragment registers as the 32-bit operands an MMA takes (16-bit pairs packed)."""
        dt = self.frag_dtype(regs[0])
        if dt.bits == 32:
            return [self.frag(r) for r in regs]
        held = self.pairs(regs)
        if held is not None:
            return held
        if dt.bits == 16:
            out = []
            for i in range(0, len(regs), 2):
                p = self.reg("b32")
                self.emit(f"mov.b32 {p}, {{{self.frag(regs[i])}, {self.frag(regs[i + 1])}}};")
                out.append(p)
            return out
        raise PtxError(f"MMA operands of {dt} are not supported")

    def mma(self, s: L.MmaStmt) -> None:
        spec = s.atom
        if spec.family == "mma.sync":
            a, b = self.packed(s.a), self.packed(s.b)
            c = [self.frag(r) for r in s.c]
            d = [self.frag(r) for r in s.d]
            self.emit(f"{spec.lowering.mnemonic} {{{', '.join(d)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, "
                      f"{{{', '.join(c)}}};")
            return
        if spec.family == "wgmma":
            self.require_sm90(s, "wgmma")
            self.wgmma_issue(s)
            return
        raise self.error(s, f"{spec.name} is not a PTX MMA atom")

    def wgmma_group(self, group: Sequence[L.MmaStmt], own_commit: bool = True) -> None:
        """A run of wgmmas without handles in the IR: one fence, the MMAs, then one commit and
        wait 0 of their own — unless the kernel's explicit ``wgmma_commit`` follows the run
        (``own_commit=False``), whose group and later ``wgmma_wait`` complete them.

        Either way each wgmma is preceded by a ``wgmma.fence`` with no register write in
        between, the semantics the interpreter gives a wgmma without a handle; leaving the
        completion to the explicit wait lets a group stay in flight across k-blocks
        (``wgmma_wait(1)``), which is what keeps the tensor cores busy."""
        self.require_sm90(group[0], "wgmma")
        self.where(group[0])
        for s in group:
            if s.c != s.d:
                for c, d in zip(s.c, s.d):
                    self.emit(f"mov.f32 {self.frag(d)}, {self.frag(c)};")
        # A operands in registers are packed into their 32-bit registers before the fence: a
        # register write between the fence and a wgmma reading it makes ptxas insert a fence of
        # its own and serialize the run (its C7519 note)
        packed_a = {id(s): self.packed(s.a) for s in group if not isinstance(s.a, L.SharedOperand)}
        self.emit("wgmma.fence.sync.aligned;")
        for s in group:
            self.where(s)
            self.wgmma_issue(s, packed_a.get(id(s)))
        if own_commit:
            self.emit("wgmma.commit_group.sync.aligned;")
            self.emit("wgmma.wait_group.sync.aligned 0;")

    def descriptor(self, operand: L.SharedOperand) -> str:
        from argus.layout_algebra.hopper import encode_wgmma_descriptor

        desc = operand.descriptor
        constant = encode_wgmma_descriptor(0, desc.leading_byte_offset, desc.stride_byte_offset, desc.mode,
                                           desc.base_offset)
        key = ("desc", operand.buffer.name, operand.address, constant)
        found = self.scope.get(key)
        if found is not None:
            return found
        start = self.shared_address(operand.buffer, sympy.sympify(operand.address))
        field_bits, wide, out = self.reg("b32"), self.reg("b64"), self.reg("b64")
        self.emit(f"bfe.u32 {field_bits}, {start}, 4, 14;")
        self.emit(f"cvt.u64.u32 {wide}, {field_bits};")
        self.emit(f"or.b64 {out}, {wide}, 0x{constant:016X};")
        self.scope.values[key] = out
        return out

    def wgmma_issue(self, s: L.MmaStmt, packed_a: list[str] | None = None) -> None:
        spec = s.atom
        d = [self.frag(r) for r in s.d]
        if isinstance(s.a, L.SharedOperand):
            a = self.descriptor(s.a)
            trans_a = 1 if s.a.descriptor.major.value == "MN" else 0
        else:
            a = "{" + ", ".join(packed_a if packed_a is not None else self.packed(s.a)) + "}"
            trans_a = None
        assert isinstance(s.b, L.SharedOperand)
        b = self.descriptor(s.b)
        trans_b = 1 if s.b.descriptor.major.value == "MN" else 0
        scale = self.scope.get(("scale-d",))
        if scale is None:
            scale = self.reg("pred")
            self.emit(f"setp.ne.b32 {scale}, 1, 0;")
            self.scope.values[("scale-d",)] = scale
        tail = f"{scale}, 1, 1, {trans_a}, {trans_b}" if trans_a is not None else f"{scale}, 1, 1, {trans_b}"
        self.emit(f"{spec.lowering.mnemonic} {{{', '.join(d)}}}, {a}, {b}, {tail};")

    # ------------------------------------------------------------ collectives
    def combine(self, s: L.Stmt, fn: str, dt: D.DType, a: str, b: str) -> str:
        cls = _reg_class(dt)
        out = self.reg(cls)
        self.emit(self.arith(s, {"add": "add", "max": "max", "min": "min", "mul": "mul"}.get(fn, fn), dt, out, [a, b]))
        return out

    def reduce(self, s: L.ReduceStmt) -> None:
        dt = s.dtype
        if dt.bits != 32:
            raise self.error(s, f"reductions of {dt} are not emitted (32-bit types only)")
        for d, group in zip(s.dst, s.groups):
            acc = self.frag(group[0])
            for r in group[1:]:
                acc = self.combine(s, s.fn, dt, acc, self.frag(r))
            for mask in s.across_lanes:
                other = self.reg(_reg_class(dt))
                self.emit(f"shfl.sync.bfly.b32 {other}, {acc}, {mask}, 0x1f, {WARP_FULL};")
                acc = self.combine(s, s.fn, dt, acc, other)
            self.emit(f"mov{self.move_type(dt)} {self.frag(d)}, {acc};")

    def shuffle(self, s: L.ShuffleStmt) -> None:
        if s.dtype.bits != 32:
            raise self.error(s, f"shuffles of {s.dtype} are not emitted (32-bit types only)")
        mode = {"xor": "bfly", "idx": "idx", "up": "up", "down": "down"}[s.mode]
        clamp = 0 if s.mode == "up" else 0x1F
        c = ((32 - s.width) << 8) | clamp if s.width < 32 else clamp
        lane = self.value(s.lane, 32)
        temps = []
        for r in s.src:  # read every source before writing (dst may alias src)
            t = self.reg(_reg_class(s.dtype))
            self.emit(f"shfl.sync.{mode}.b32 {t}, {self.frag(r)}, {lane}, {c:#x}, {WARP_FULL};")
            temps.append(t)
        for d, t in zip(s.dst, temps):
            self.emit(f"mov{self.move_type(s.dtype)} {self.frag(d)}, {t};")

    def atomic(self, s: L.AtomicStmt) -> None:
        for run, src, cond in zip(s.dst, s.src, s.predicates):
            prefix = self.guard(cond)
            if prefix is False:
                continue
            dt = run.dtype
            if s.fn not in ("add", "max", "min") or (dt.is_float and s.fn != "add"):
                raise self.error(s, f"atomic {s.fn} on {dt} has no PTX lowering")
            space = self.space(run)
            self.emit(f"{prefix}red{space}.{s.fn}{dt.ptx} {self.address(run.buffer, run.address)}, {self.frag(src)};")

    def read_index(self, s: L.ReadIndexStmt) -> None:
        dt = s.src.dtype
        if not dt.is_int or dt.bits not in (32, 64):
            raise self.error(s, f"index tensors of {dt} are not supported (32 or 64-bit integers)")
        bits = dt.bits
        out = self.reg("b32" if bits == 32 else "b64")
        self.emit(f"mov.b{bits} {out}, 0;")
        prefix = self.guard(s.predicate)
        if prefix is not False:
            self.emit(f"{prefix}ld{self.space(s.src)}{dt.ptx} {out}, {self.address(s.src.buffer, s.src.address)};")
        self.symbols[s.result] = (out, bits)

    # ------------------------------------------------------------ control flow
    def loop(self, s: L.Loop) -> None:
        bits = max(self.facts.bits(s.var), self.facts.bits(s.start), self.facts.bits(s.stop))
        t = f"s{bits}"
        var = self.reg("b32" if bits == 32 else "b64")
        stop = self.value(s.stop, bits)
        self.emit(f"mov.b{bits} {var}, {self.value(s.start, bits)};")
        self.hoist(s)
        uni = ".uni" if s.uniformity <= Uniformity.WARP else ""
        head, end = self.label("loop"), self.label("end")
        skip = self.reg("pred")
        self.emit(f"setp.ge.{t} {skip}, {var}, {stop};")
        self.emit(f"@{skip} bra{uni} {end};")
        self.place(head)
        self.symbols[s.var] = (var, bits)
        self.push()
        self.stmts(s.body)
        self.pop()
        again = self.reg("pred")
        self.emit(f"add.{t} {var}, {var}, {s.step};")
        self.emit(f"setp.lt.{t} {again}, {var}, {stop};")
        self.emit(f"@{again} bra{uni} {head};")
        self.place(end)

    def hoist(self, s: L.Loop | L.Branch) -> None:
        """Code motion for index arithmetic: every division, remainder, min and max in the body
        whose operands are defined here and not bound inside is computed once, here, in the
        enclosing scope (the body, and what follows in this scope, find it there).

        Out of a loop: loop-invariant values — a persistent kernel's tile coordinates, say, are
        divisions by run-time sizes: per tile, not per k-block.  Out of an elected branch: the
        branch splits a warp's lanes, not its work (the warp runs it for its one lane), and
        the values become reusable after it — a tile's four TMA stores, each issued by one
        thread in its own branch, then share one computation of the tile's coordinates
        instead of each repeating the chain of divisions on the epilogue's critical path.
        Not out of a loop what only a branch taken on one of its iterations (``k == c``) needs:
        that runs once either way, and inside the branch it is off the path to the first one.
        Hoisting is safe because integer division does not trap in PTX and the values are pure."""
        if isinstance(s, L.Loop):
            self.hoist_from(s.body, {s.var}, once=s.var)
        else:
            self.hoist_from(s.then + s.orelse, set())

    def hoist_from(self, stmts: Sequence[L.Stmt], bound: set[sympy.Symbol], once: sympy.Symbol | None = None) -> None:
        """Compute, in the current scope, the divisions, remainders, mins and maxes of
        ``stmts`` whose symbols are defined here and not bound inside (nor in ``bound``); with
        ``once``, not those of branches taken on one value of it (:func:`_loop_expressions`)."""
        exprs, inner = _loop_expressions(stmts, once)
        bound = bound | inner
        defined = set(self.symbols) - bound
        seen: set[Any] = set()
        for expr in exprs:
            for node in sympy.preorder_traversal(expr, keys=True):
                if not isinstance(node, _HOISTED) or node in seen:
                    continue
                seen.add(node)
                free = node.free_symbols
                if free and free <= defined:
                    for bits in sorted({max(32, self.facts.bits(node)), 64}):
                        self.value(node, bits)

    def branch(self, s: L.Branch) -> None:
        cond = self.predicate(s.cond)
        if cond is True:
            self.push()
            self.stmts(s.then)
            self.pop()
            return
        if cond is False:
            self.push()
            self.stmts(s.orelse)
            self.pop()
            return
        uni = ".uni" if s.uniformity <= Uniformity.WARP else ""
        if s.kind == "elected":
            self.hoist(s)
        otherwise, end = self.label("else"), self.label("endif")
        self.emit(f"@!{cond} bra{uni} {otherwise if s.orelse else end};")
        self.push()
        self.stmts(s.then)
        self.pop()
        if s.orelse:
            self.emit(f"bra{uni} {end};")
            self.place(otherwise)
            self.push()
            self.stmts(s.orelse)
            self.pop()
        self.place(end)

    # ------------------------------------------------------------ module
    def params(self) -> list[tuple[str, str, str]]:
        """(kind, name, PTX declaration) of every entry parameter."""
        out = []
        for p in self.lowered.tensors:
            out.append(("tensor", p.name, f".param .u64 .ptr .global .align 16 p_{p.name}"))
        for s in self.lowered.sizes:
            out.append(("size", s.name, f".param .s32 p_{s.name}"))
        for p in self.lowered.scalars:
            out.append(("scalar", p.name, f".param .f32 p_{p.name}"))
        for i, _ in enumerate(self.lowered.tensor_maps):
            out.append(("tensor_map", f"tmap{i}", f".param .align 64 .b8 p_tmap{i}[128]"))
        return out

    def prologue(self) -> None:
        k = self.kernel
        tid = self.reg("b32")
        self.emit(f"mov.u32 {tid}, %tid.x;")
        self.symbols[k.thread_id] = (tid, 32)
        for d, sym in enumerate(k.block_ids):
            r = self.reg("b32")
            self.emit(f"mov.u32 {r}, %ctaid.{'xyz'[d]};")
            self.symbols[sym] = (r, 32)
        if any(c > 1 for c in k.launch.cluster):
            r = self.reg("b32")
            self.emit(f"mov.u32 {r}, %cluster_ctarank;")
            self.symbols[N.CLUSTER_RANK] = (r, 32)
        for p in self.lowered.tensors:
            raw, base = self.reg("b64"), self.reg("b64")
            self.emit(f"ld.param.u64 {raw}, [p_{p.name}];")
            self.emit(f"cvta.to.global.u64 {base}, {raw};")
            self.tensor_base[p.name] = base
        for s in self.lowered.sizes:
            r = self.reg("b32")
            self.emit(f"ld.param.s32 {r}, [p_{s.name}];")
            self.symbols[s] = (r, 32)
        for p in self.lowered.scalars:
            r = self.reg("f32")
            self.emit(f"ld.param.f32 {r}, [p_{p.name}];")
        for i, _ in enumerate(self.lowered.tensor_maps):
            raw, generic = self.reg("b64"), self.reg("b64")
            self.emit(f"mov.b64 {raw}, p_tmap{i};")
            self.emit(f"cvta.param.u64 {generic}, {raw};")
            self.tensor_map_reg[i] = generic
        # the cache policies of the TMA loads' L2 hints, made once at entry
        for priority in sorted({s.l2 for s in self.lowered.walk() if isinstance(s, L.TensorCopy) and s.l2}):
            policy = self.reg("b64")
            self.emit(f"createpolicy.fractional.L2::{priority}.b64 {policy}, 1.0;")
            self.policies[priority] = policy
        if self.lowered.shared_bytes:
            raw = self.reg("b32")
            self.emit(f"mov.u32 {raw}, argus_smem;")
            align = self.lowered.shared_alignment
            if align > 16:  # round the dynamic arena up to its strictest alignment
                base = self.reg("b32")
                self.emit(f"add.u32 {base}, {raw}, {align - 1};")
                self.emit(f"and.b32 {base}, {base}, {-align};")
                raw = base
            self.smem_base = raw

    def module(self) -> tuple[str, tuple[tuple[str, str], ...], int]:
        k = self.kernel
        self.prologue()
        self.stmts(self.lowered.body)
        self.emit("ret;")
        body = self.lines
        consts = ", ".join(f"{n}={v!r}" for n, v in k.consts)
        header = [
            "//",
            f"// argus {argus.__version__}: kernel {k.name}" + (f" [{consts}]" if consts else ""),
            f"// target {self.target}; generated from the verified tile IR, do not edit",
            "//",
            f".version {self.version}",
            f".target {self.target}",
            ".address_size 64",
            "",
        ]
        dynamic = 0
        if self.lowered.shared_bytes:
            header.append(".extern .shared .align 16 .b8 argus_smem[];")
            header.append("")
            align = self.lowered.shared_alignment
            dynamic = self.lowered.shared_bytes + (align - 16 if align > 16 else 0)
        params = self.params()
        header.append(f".visible .entry {_entry_name(k)}(")
        header.append(",\n".join(f"\t{decl}" for _, _, decl in params))
        header.append(")")
        header.append(f".maxntid {k.launch.threads}, 1, 1")
        if self.uses_setmaxnreg:
            header.append(".minnctapersm 1")
        if any(c > 1 for c in k.launch.cluster):
            header.append(f".reqnctapercluster {k.launch.cluster[0]}, {k.launch.cluster[1]}, {k.launch.cluster[2]}")
        header.append("{")
        for cls, prefix in _REG_PREFIX.items():
            if self.counts[cls]:
                header.append(f"\t.reg .{cls} {prefix}<{self.counts[cls] + 1}>;")
        for name, rf in self.lowered.registers.items():
            if rf.size and name in self.paired:
                header.append(f"\t.reg .b32 %vp{name}_<{rf.size // 2}>;")
            elif rf.size:
                header.append(f"\t.reg .{_reg_class(rf.dtype)} %v{name}_<{rf.size}>;")
        header.append("")
        text = "\n".join(header + body + ["}", ""])
        return text, tuple((kind, name) for kind, name, _ in params), dynamic


def u64_division_magic(d: int) -> tuple[int, int]:
    """``(m, e)`` with ``x // d == (x * m) >> (63 + e)`` for every ``0 <= x < 2**63`` (``d > 1``
    not a power of two): ``e = ceil(log2 d)``, ``m = ceil(2**(63 + e) / d) < 2**64``."""
    e = (d - 1).bit_length()
    return -(-(1 << (63 + e)) // d), e


_HOISTED = (symbolic.FloorDiv, symbolic.TruncDiv, symbolic.TruncMod, sympy.Mod, sympy.Min, sympy.Max)


def _canonical(args: Any) -> list[Any]:
    """``args`` of an Add, Mul, Min or Max in a fixed order: sympy orders some of them by hash,
    which varies with ``PYTHONHASHSEED``, and the emitted PTX must not."""
    return sorted(args, key=sympy.default_sort_key)


def _paired_buffers(lowered: L.LoweredKernel) -> frozenset[str]:
    """The 16-bit register fragments of even size that every statement touches in aligned
    pairs ``(2j, 2j + 1)``, low element first, in a way the emitter moves as one 32-bit
    register: the destination of a paired ``cvt.rn.{bf16,f16}x2.f32``, either side of a
    register copy, the registers of a vector load or store of 16-bit elements, an MMA's A or
    B operand.  Any other use (arithmetic, a conversion from 16 bits, a single element)
    keeps the fragment one register per element."""
    candidates = {name for name, rf in lowered.registers.items()
                  if rf.size and rf.size % 2 == 0 and not rf.dtype.is_bool and rf.dtype.itemsize == 2}

    def aligned(regs: Sequence[L.Reg]) -> bool:
        return len(regs) % 2 == 0 and all(
            regs[i].index % 2 == 0 and regs[i + 1] == L.Reg(regs[i].buffer, regs[i].index + 1)
            for i in range(0, len(regs), 2))

    def every(x: Any) -> list[L.Reg]:
        out: list[L.Reg] = []

        def visit(y: Any) -> None:
            if isinstance(y, L.Reg):
                out.append(y)
            elif isinstance(y, (list, tuple)):
                for z in y:
                    visit(z)
            elif dataclasses.is_dataclass(y) and type(y).__module__ == L.__name__ and not isinstance(y, L.Stmt):
                for f in dataclasses.fields(y):
                    visit(getattr(y, f.name))

        for f in dataclasses.fields(x):
            if f.name not in ("op", "body", "then", "orelse"):
                visit(getattr(x, f.name))
        return out

    for st in lowered.walk():
        pairable: set[L.Reg] = set()  # this statement's elements the emitter moves as part of a pair
        if isinstance(st, L.ConvertStmt):
            if (st.src_dtype.name == "f32" and st.dst_dtype.name in ("bf16", "f16") and not st.satfinite
                    and st.rounding == "rn"):
                dst = set(st.dst)
                pairable.update(d for d in st.dst
                                if L.Reg(d.buffer, d.index ^ 1) in dst)
        elif isinstance(st, L.CopyStmt) and not st.atom.startswith(("cp.async", "ldmatrix", "stmatrix")):
            for t in st.transfers:
                src, dst = t.src, t.dst
                if isinstance(src, L.MemoryRun) and isinstance(dst, tuple):
                    ok = src.dtype.itemsize == 2 and aligned(dst) and len({r.buffer for r in dst}) == 1
                    pairable.update(dst if ok else ())
                elif isinstance(src, tuple) and isinstance(dst, L.MemoryRun):
                    ok = dst.dtype.itemsize == 2 and aligned(src) and len({r.buffer for r in src}) == 1
                    pairable.update(src if ok else ())
            moves = _register_moves(st)  # a register copy: element pairs moved alike, in any transfers
            for a, (b, guard) in moves.items():
                if a.index % 2 == b.index % 2 and moves.get(_partner(a)) == (_partner(b), guard):
                    pairable.update((a, b))
        elif isinstance(st, L.MmaStmt):
            for operand in (st.a, st.b):
                if isinstance(operand, tuple) and aligned(operand):
                    pairable.update(operand)
        for r in every(st):
            if r not in pairable:
                candidates.discard(r.buffer)
    return frozenset(candidates)


def _partner(r: L.Reg) -> L.Reg:
    """The other element of ``r``'s aligned pair."""
    return L.Reg(r.buffer, r.index ^ 1)


def _register_moves(s: L.CopyStmt) -> dict[L.Reg, tuple[L.Reg, Any]]:
    """A register-to-register copy's moves: source element -> (destination, predicate)."""
    return {a: (b, t.predicate) for t in s.transfers if isinstance(t.src, tuple) and isinstance(t.dst, tuple)
            for a, b in zip(t.src, t.dst)}


def _loop_expressions(stmts: Sequence[L.Stmt], once: sympy.Symbol | None = None
                      ) -> tuple[list[Any], set[sympy.Symbol]]:
    """Every index expression and predicate in ``stmts`` (nested bodies included), and the
    symbols bound inside them (loop counters, values read from index tensors).  With ``once``
    (a loop's counter), not those of a branch taken on one iteration (``once == c``): hoisting
    them out of the loop saves nothing and puts them before its first iteration."""
    exprs: list[Any] = []
    bound: set[sympy.Symbol] = set()

    def visit(x: Any) -> None:
        if once is not None and isinstance(x, L.Branch) and _pins(x.cond, once):
            return
        if isinstance(x, sympy.Basic):
            exprs.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                visit(y)
        elif dataclasses.is_dataclass(x) and type(x).__module__ == L.__name__:
            if isinstance(x, L.Loop):
                bound.add(x.var)
            elif isinstance(x, L.ReadIndexStmt):
                bound.add(x.result)
            for f in dataclasses.fields(x):
                if f.name != "op":
                    visit(getattr(x, f.name))

    visit(list(stmts))
    return exprs, bound


def _pins(cond: Any, var: sympy.Symbol) -> bool:
    """Does ``cond`` hold on one value of ``var`` at most (``var == c`` with ``c`` free of it)?"""
    for part in sympy.And.make_args(sympy.sympify(cond)):
        if isinstance(part, sympy.Eq) and var in part.free_symbols:
            lhs, rhs = part.args
            if (lhs == var and var not in rhs.free_symbols) or (rhs == var and var not in lhs.free_symbols):
                return True
    return False


def _entry_name(kernel: N.Kernel) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)


def emit_ptx(kernel: N.Kernel | L.LoweredKernel, target: str = "sm_90a", *, version: str = DEFAULT_PTX_VERSION,
             root: str | None = None) -> PtxKernel:
    """PTX for one kernel specialization (IR after policies, or its lowering).

    ``root``: source paths under it are printed relative in ``// file:line`` comments (default:
    the current directory).  Raises :class:`PtxError` (or
    :class:`~argus.ir.lowering.LoweringError`) with the op's position for what cannot be emitted.
    """
    lowered = kernel if isinstance(kernel, L.LoweredKernel) else L.lower_kernel(kernel, "sm_90a")
    emitter = _Emitter(lowered, target, version, root if root is not None else os.getcwd())
    text, params, dynamic = emitter.module()
    return PtxKernel(_entry_name(lowered.kernel), target, version, text, params, dynamic,
                     lowered.kernel.launch.threads, lowered)

