"""The kernel's ABI on gfx942: kernel arguments, the ``.amdhsa_kernel`` descriptor and the
code-object-v5 ``.amdgpu_metadata`` note.

**Kernel arguments** (the kernarg segment, read with ``s_load`` through ``s[0:1]``), in the
lowering's order (:class:`~argus.ir.lowering.LoweredKernel`): the 8-byte global address of
every tensor parameter, then every size as a 4-byte ``i32`` (index parameters first, then
the size symbols of tensor shapes in order of appearance: ``M``, ``K``, ``N`` for
``a: "M K"``, ``b: "N K"``), then float scalars as 4-byte ``f32``.  Each argument is aligned
to its size; the segment is 8-byte aligned.

**Initial state** the descriptor requests: ``s[0:1]`` = kernarg segment address (the only
user SGPRs), then the workgroup ids x, y, z that the kernel reads in the next SGPRs, and the
work-item ids packed in ``v0`` (x in bits 0..9; gfx90a+ packs them).

**Metadata** is code object v5 (``amdhsa.version: [1, 2]``) and pinned by
``.amdhsa_code_object_version 5``; register counts are the allocator's: ``.vgpr_count`` is
the unified count ``accum_offset + agprs`` when AGPRs are used.  Names carry the YAML tag
``!str`` (an argument called ``n`` or ``y`` would otherwise read as a boolean).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from argus.ir import nodes as N

__all__ = [
    "CODE_OBJECT_VERSION",
    "TARGET",
    "KernelArgument",
    "KernelResources",
    "kernel_arguments",
    "kernel_descriptor",
    "metadata",
]

TARGET = "amdgcn-amd-amdhsa--gfx942"
CODE_OBJECT_VERSION = 5
#: SGPRs the hardware adds to ``next_free_sgpr`` (VCC, FLAT_SCRATCH, XNACK_MASK on gfx9)
EXTRA_SGPRS = 6


@dataclass(frozen=True)
class KernelArgument:
    """One kernarg: ``kind`` is ``"pointer"``, ``"i32"`` or ``"f32"``; ``param`` is the IR
    parameter (None for a size symbol); ``symbol`` the index symbol it defines (sizes and
    index parameters)."""

    name: str
    kind: str
    offset: int
    size: int
    param: N.Param | None = None
    symbol: sympy.Symbol | None = None
    buffer: N.Buffer | None = None

    def metadata(self) -> dict:
        entry: dict = {".name": f"!str {self.name}", ".offset": self.offset, ".size": self.size}
        if self.kind == "pointer":
            entry.update({".value_kind": "global_buffer", ".address_space": "global"})
        else:
            entry[".value_kind"] = "by_value"
        return entry


def kernel_arguments(lowered: Any) -> tuple[KernelArgument, ...]:
    """The kernarg layout of a :class:`~argus.ir.lowering.LoweredKernel` (see the module docstring)."""
    args: list[KernelArgument] = []
    offset = 0

    def add(name: str, kind: str, size: int, **extra) -> None:
        nonlocal offset
        offset = -(-offset // size) * size
        args.append(KernelArgument(name, kind, offset, size, **extra))
        offset += size

    for p in lowered.tensors:
        add(p.name, "pointer", 8, param=p, buffer=p.buffer)
    params = {p.symbol: p for p in lowered.kernel.params if p.symbol is not None}
    for s in lowered.sizes:
        add(s.name, "i32", 4, param=params.get(s), symbol=s)
    for p in lowered.scalars:
        add(p.name, "f32", 4, param=p, symbol=p.symbol)
    return tuple(args)


def kernarg_size(args: tuple[KernelArgument, ...]) -> int:
    end = max((a.offset + a.size for a in args), default=0)
    return -(-end // 8) * 8


@dataclass(frozen=True)
class KernelResources:
    """What the descriptor and the metadata state about one kernel."""

    name: str
    threads: int
    vgprs: int  # architected VGPRs used (next free)
    agprs: int
    sgprs: int  # next free SGPR
    lds_bytes: int
    arguments: tuple[KernelArgument, ...]
    workgroup_ids: tuple[bool, bool, bool] = (True, False, False)
    workitem_id_dims: int = 1

    @property
    def accum_offset(self) -> int:
        return max(4, -(-self.vgprs // 4) * 4)

    @property
    def unified_vgprs(self) -> int:
        """``.amdhsa_next_free_vgpr`` on gfx90a+: VGPRs up to accum_offset, then the AGPRs."""
        if self.agprs:
            return self.accum_offset + self.agprs
        return max(1, self.vgprs)

    @property
    def kernarg_size(self) -> int:
        return kernarg_size(self.arguments)

    @property
    def sgpr_count(self) -> int:
        return self.sgprs + EXTRA_SGPRS


def kernel_descriptor(res: KernelResources) -> str:
    """The ``.amdhsa_kernel`` block (the assembler builds the 64-byte descriptor from it)."""
    x, y, z = res.workgroup_ids
    lines = [
        f".amdhsa_kernel {res.name}",
        f"  .amdhsa_group_segment_fixed_size {res.lds_bytes}",
        "  .amdhsa_private_segment_fixed_size 0",
        f"  .amdhsa_kernarg_size {res.kernarg_size}",
        "  .amdhsa_user_sgpr_count 2",
        "  .amdhsa_user_sgpr_kernarg_segment_ptr 1",
        "  .amdhsa_uses_dynamic_stack 0",
        "  .amdhsa_enable_private_segment 0",
        f"  .amdhsa_system_sgpr_workgroup_id_x {int(x)}",
        f"  .amdhsa_system_sgpr_workgroup_id_y {int(y)}",
        f"  .amdhsa_system_sgpr_workgroup_id_z {int(z)}",
        f"  .amdhsa_system_vgpr_workitem_id {res.workitem_id_dims - 1}",
        f"  .amdhsa_next_free_vgpr {res.unified_vgprs}",
        f"  .amdhsa_next_free_sgpr {max(res.sgprs, 1)}",
        f"  .amdhsa_accum_offset {res.accum_offset}",
        "  .amdhsa_reserve_vcc 1",
        "  .amdhsa_float_denorm_mode_32 3",
        "  .amdhsa_float_denorm_mode_16_64 3",
        "  .amdhsa_dx10_clamp 1",
        "  .amdhsa_ieee_mode 1",
        "  .amdhsa_tg_split 0",
        ".end_amdhsa_kernel",
    ]
    return "\n".join(lines) + "\n"


def metadata(kernels: list[KernelResources]) -> str:
    """The ``.amdgpu_metadata`` block (code object v5) for the kernels of one code object."""
    out = [".amdgpu_metadata", "---", "amdhsa.kernels:"]
    for res in kernels:
        out += [
            f"  - .name: !str {res.name}",
            f"    .symbol: !str {res.name}.kd",
            f"    .kernarg_segment_size: {res.kernarg_size}",
            "    .kernarg_segment_align: 8",
            f"    .group_segment_fixed_size: {res.lds_bytes}",
            "    .private_segment_fixed_size: 0",
            "    .wavefront_size: 64",
            f"    .sgpr_count: {res.sgpr_count}",
            f"    .vgpr_count: {res.unified_vgprs}",
            f"    .agpr_count: {res.agprs}",
            "    .sgpr_spill_count: 0",
            "    .vgpr_spill_count: 0",
            "    .uses_dynamic_stack: false",
            f"    .max_flat_workgroup_size: {res.threads}",
            f"    .reqd_workgroup_size: [{res.threads}, 1, 1]",
        ]
        if res.arguments:
            out.append("    .args:")
            for arg in res.arguments:
                entry = arg.metadata()
                first = True
                for key in (".name", ".offset", ".size", ".value_kind", ".address_space"):
                    if key in entry:
                        out.append(f"      {'- ' if first else '  '}{key}: {entry[key]}")
                        first = False
        else:
            out.append("    .args: []")
    out += [f"amdhsa.target: {TARGET}", "amdhsa.version:", "  - 1", "  - 2", "...", ".end_amdgpu_metadata"]
    return "\n".join(out) + "\n"
