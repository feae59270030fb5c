"""Index tensors: a ReadIndex value is an uninterpreted function of the address it reads; a
gather through it is bounds-checked, and the counterexample carries the index contents that
make the interpreter replay it."""

import sympy

from argus import symbolic
from argus.errors import SourcePosition
from argus.ir import dtypes as D
from argus.ir import nodes as N
from argus.layout_algebra import Layout
from argus.proofs import verify_kernel

C0 = N.COORDS[0]
TID = N.THREAD_ID
ONE = Layout((1,), (1,))


def _gather(predicated: bool) -> N.Kernel:
    """``y[t] = x[idx[t]]`` for 64 threads; ``predicated`` masks indices outside x."""
    n = symbolic.size_symbol("n")
    j = sympy.Symbol("j", integer=True)
    idx = N.Buffer("idx", N.MemorySpace.GLOBAL, D.I32, 64, Layout((64,), (1,)), param_index=0)
    x = N.Buffer("x", N.MemorySpace.GLOBAL, D.F32, n, Layout((n,), (1,)), param_index=1)
    y = N.Buffer("y", N.MemorySpace.GLOBAL, D.F32, 64, Layout((64,), (1,)), param_index=2)
    r = N.Buffer("r0", N.MemorySpace.REGISTER, D.F32, 1, ONE)

    def at(line: int) -> SourcePosition:
        return SourcePosition("gather.py", line)

    def element(buffer: N.Buffer, offset) -> N.View:
        return N.View(buffer, ONE, offset, (C0,), (offset + C0,))

    body = N.Region((
        N.ReadIndex(result=j, src=element(idx, TID), loc=at(1)),
        N.Alloc(buffer=r, loc=at(2)),
        N.Fill(dst=N.View(r, ONE, 0, (C0,)), value=0, loc=at(2)),
        N.Copy(src=element(x, j), dst=N.View(r, ONE, 0, (C0,)), pred=sympy.And(sympy.Le(0, j), sympy.Lt(j, n)) if predicated else None,
               loc=at(3)),
        N.Copy(src=N.View(r, ONE, 0, (C0,)), dst=element(y, TID), loc=at(4)),
    ))
    params = (N.Param("idx", "tensor", buffer=idx), N.Param("x", "tensor", buffer=x),
              N.Param("y", "tensor", buffer=y), N.Param("n", "index", symbol=n))
    return N.Kernel("gather", params, (), N.LaunchConfig(64, (1,)), (), body, at(0))


def test_a_gather_through_an_unchecked_index_is_out_of_bounds_and_replays():
    report = verify_kernel(_gather(predicated=False))
    assert report.verdict == "refuted", report.human()
    cx = next(c for c in report.counterexamples if c.property == "in-bounds")
    assert cx.position.line == 3 and cx.thread == 0
    index = cx.index_reads["idx"][0]
    assert index >= cx.sizes["n"] or index < 0  # the index tensor's content that breaks it
    assert cx.replay.status == "reproduced" and cx.replay.violation["kind"] == "out-of-bounds"


def test_a_predicated_gather_is_proved():
    report = verify_kernel(_gather(predicated=True))
    assert report.verdict == "proved", report.human()


def test_an_index_is_not_assumed_non_negative():
    """``j < n`` alone is not enough: the index tensor may hold a negative value."""
    kernel = _gather(predicated=True)
    copy = kernel.body.ops[3]
    j = copy.src.offset
    n = kernel.params[3].symbol
    weaker = N.Region((*kernel.body.ops[:3], N.Copy(src=copy.src, dst=copy.dst, pred=sympy.Lt(j, n), loc=copy.loc),
                       kernel.body.ops[4]))
    report = verify_kernel(N.Kernel(kernel.name, kernel.params, (), kernel.launch, (), weaker, kernel.loc))
    cx = next(c for c in report.counterexamples if c.property == "in-bounds")
    assert cx.index_reads["idx"][cx.thread] < 0 and cx.replay.status == "reproduced"
