"""Tuned kernels written in the argus DSL: ``argus.kernels.gemm`` (the Hopper GEMM),
``argus.kernels.matmul`` (its call on torch tensors) and ``argus.kernels.gemm_gfx942``."""
