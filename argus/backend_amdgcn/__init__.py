"""The gfx942 (MI300X) backend: direct AMDGCN assembly, HSA code objects, hip-python launch.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``isa``            registers, operands, instructions, the instruction-class table
``isel``           instruction selection from :mod:`argus.ir.lowering` (the shared lowering)
``cfg``            basic blocks and loops of an emitted body
``regalloc``       live intervals and linear-scan allocation of SGPRs/VGPRs/AGPRs, budgets
``waitcnt``        ``s_waitcnt`` insertion from outstanding vmcnt/lgkmcnt tracking
``waitstates``     ``s_nop`` for the hazards the hardware does not interlock (MFMA, VALU→SGPR)
``descriptor``     kernel arguments, ``.amdhsa_kernel`` descriptor, code-object-v5 metadata
``program``        selected kernel → finalized assembly file
``assemble``       llvm-mc + ld.lld → ``.hsaco``; readobj notes, objdump, descriptor decoding
=================  ==========================================================================
"""
