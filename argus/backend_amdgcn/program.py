"""From selected instructions to an assembly file: allocation, waits, wait states, descriptor.

:class:`MachineKernel` is what instruction selection produces (virtual registers, no waits);
:func:`finalize` allocates registers (:mod:`~argus.backend_amdgcn.regalloc`), inserts the
``s_waitcnt`` (:mod:`~argus.backend_amdgcn.waitcnt`) and ``s_nop`` wait states
(:mod:`~argus.backend_amdgcn.waitstates`) and computes the descriptor's resources;
:func:`assembly` prints one code object's source with the kernel descriptors and the
metadata note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argus.backend_amdgcn.descriptor import (
    CODE_OBJECT_VERSION,
    TARGET,
    KernelArgument,
    KernelResources,
    kernel_descriptor,
    metadata,
)
from argus.backend_amdgcn.isa import Item, RegFile, render
from argus.backend_amdgcn.regalloc import Allocation, Budget, allocate, budget_for
from argus.backend_amdgcn.waitcnt import insert_waitcnts
from argus.backend_amdgcn.waitstates import insert_wait_states

__all__ = ["FinalKernel", "MachineKernel", "assembly", "finalize"]

LDS_LIMIT = 65536  # bytes of LDS one workgroup may allocate on gfx942


@dataclass
class MachineKernel:
    """A selected kernel body: instructions over virtual registers, ending in ``s_endpgm``."""

    name: str
    threads: int
    items: list[Item]
    arguments: tuple[KernelArgument, ...] = ()
    lds_bytes: int = 0
    workgroup_ids: tuple[bool, bool, bool] = (True, False, False)
    notes: list[str] = field(default_factory=list)


@dataclass
class FinalKernel:
    """A kernel after allocation, ``s_waitcnt`` and wait-state insertion."""

    name: str
    items: list[Item]
    allocation: Allocation
    resources: KernelResources

    @property
    def body(self) -> str:
        return render(self.items, self.allocation.assignment)


def finalize(kernel: MachineKernel, budget: Budget | None = None) -> FinalKernel:
    budget = budget or budget_for(kernel.threads)
    if kernel.lds_bytes > LDS_LIMIT:
        from argus.errors import ArgusError

        raise ArgusError(f"{kernel.name}: {kernel.lds_bytes} bytes of LDS, more than the {LDS_LIMIT} a gfx942 "
                         "workgroup may allocate", hint="use smaller shared tiles or fewer stages")
    allocation = allocate(kernel.items, budget, kernel=kernel.name)
    items = insert_waitcnts(kernel.items, allocation.assignment)
    items = insert_wait_states(items, allocation.assignment)
    resources = KernelResources(
        name=kernel.name, threads=kernel.threads, vgprs=allocation.count(RegFile.VGPR),
        agprs=allocation.count(RegFile.AGPR), sgprs=allocation.count(RegFile.SGPR),
        lds_bytes=kernel.lds_bytes, arguments=kernel.arguments, workgroup_ids=kernel.workgroup_ids)
    return FinalKernel(kernel.name, items, allocation, resources)


def assembly(kernels: list[FinalKernel], *, header: str = "") -> str:
    """The assembly source of one code object holding ``kernels``."""
    out = []
    if header:
        out += [f"; {line}" if line else ";" for line in header.splitlines()]
    out += [f'.amdgcn_target "{TARGET}"', f".amdhsa_code_object_version {CODE_OBJECT_VERSION}", ".text"]
    for k in kernels:
        out += [f".globl {k.name}", ".p2align 8", f".type {k.name},@function", f"{k.name}:"]
        out.append(k.body.rstrip("\n"))
        out += [f".L{k.name}_end:", f".size {k.name}, .L{k.name}_end-{k.name}", ""]
    out += [".rodata"]
    for k in kernels:
        out += [".p2align 6", kernel_descriptor(k.resources)]
    out.append(metadata([k.resources for k in kernels]))
    return "\n".join(out)
