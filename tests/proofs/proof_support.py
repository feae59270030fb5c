"""Helpers of the verifier tests (a uniquely named module: every tests/ folder shares sys.path)."""

import inspect


def source_line(kernel, text: str) -> int:
    """The line of ``kernel``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def assert_mutation_refuted(name, kernel, good, bad, prop, kind, marker, *, same_thread=True):
    """The original (``good`` consts; ``None``: not checked) is proved and the mutant (``bad``)
    refuted by ``prop`` at the line containing ``marker`` (or with the other access there),
    with a counterexample the interpreter reproduces as a violation of ``kind``."""
    from argus.proofs import verify_kernel

    if good is not None:
        proved = verify_kernel(kernel.specialize(**good))
        assert proved.verdict == "proved", proved.human()
    refuted = verify_kernel(kernel.specialize(**bad))
    assert refuted.verdict == "refuted", refuted.human()
    line = source_line(kernel, marker)
    found = [c for c in refuted.counterexamples if c.property == prop]
    assert found, refuted.human()
    cx = found[0]
    assert cx.position.line == line or (cx.other or {}).get("line") == line, cx.human()
    assert cx.replay.status == "reproduced", cx.human()
    assert cx.replay.violation["kind"] == kind
    if same_thread:
        assert cx.replay.thread_matches, cx.human()
    print(f"\n{name:<48} {prop:<15} refuted  replayed: {cx.replay.detail}")
