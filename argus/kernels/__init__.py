"""Tuned kernels written in the argus DSL (``argus.kernels.gemm``: the Hopper GEMM)."""
