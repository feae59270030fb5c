"""A shipped buggy kernel: a dependent launch that reads its input before its grid-dependency wait.

``grid_dependency_wait()`` makes the kernel a dependent launch: its blocks may start while the
kernel before it in the stream is still writing ``x``.  Only the wait orders this thread after
that kernel, and here the load of ``x`` comes first, so it may read the old values.  ``argus
verify`` refutes the launch-order VC at the load (block, thread, program point) and the
reference interpreter, which checks the same order as it runs, reproduces it.
"""

import argus.spec as A


@A.kernel(threads=128, grid=lambda n: (A.cdiv(n, 128),), assume=lambda n: [n >= 1])
def dependent_early_read(x: A.Global(A.f32, "n"), y: A.Global(A.f32, "n"), n: A.Index):
    mine = x.tile((128,), (A.block_id(0),)).tile((1,), (A.thread_id(),))
    v = A.load(mine)  # planted bug: read before the wait below
    A.grid_dependency_wait()
    A.store(v + v, y.tile((128,), (A.block_id(0),)).tile((1,), (A.thread_id(),)))
