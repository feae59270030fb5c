"""The tile IR: what the verifier and both backends consume.

* :mod:`argus.ir.nodes` — ops, views, buffers, kernels (frozen dataclasses).
* :mod:`argus.ir.dtypes`, :mod:`argus.ir.numerics` — element types and their exact semantics.
* :mod:`argus.ir.printer` — the stable text form (golden tests, kernel hashes).
* :mod:`argus.ir.check` — well-formedness; :mod:`argus.ir.uniformity` — the one divergence analysis.
* :mod:`argus.ir.interpreter` — the reference interpreter (ground truth; counterexample replay).
"""

from argus.ir.nodes import Buffer, Kernel, MemorySpace, Op, Region, Scope, View, walk

__all__ = ["Buffer", "Kernel", "MemorySpace", "Op", "Region", "Scope", "View", "walk"]
