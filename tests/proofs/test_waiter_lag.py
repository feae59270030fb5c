"""A waiter more than one phase behind: an mbarrier wait tests a parity only, so a barrier two
phases ahead shows the waited parity again.  The ``phase`` property proves that every arrival
of the round after the awaited one is ordered after the wait; a producer that never waits for
its consumer is refuted, and the interpreter reproduces the lag."""

from async_kernels_support import line_of, verify_properties

import argus.spec as A


@A.kernel(threads=64, grid=lambda M: (1,))
def signals(x: A.Global(A.f32, "M"), THROTTLED: A.const = True):
    """Warp 0 signals ``ready`` once per iteration; warp 1 waits for each phase in turn and
    (throttled) hands it back on ``done`` before warp 0 may signal again."""
    ready = A.mbarrier(32)
    done = A.mbarrier(32)
    A.mbarrier_init(ready, done)
    n = x.shape[0]
    with A.warp_role("producer", warps=range(0, 1)):
        for kt in A.range(n):
            if THROTTLED:
                A.wait(done, phase=kt - 1)
            A.arrive(ready)
    with A.warp_role("consumer", warps=range(1, 2)):
        for kt in A.range(n):
            A.wait(ready, phase=kt)
            A.arrive(done)


PHASE = {"phase"}


def test_a_throttled_producer_keeps_every_waiter_within_one_phase():
    results = verify_properties(signals.specialize(), PHASE)
    lag = [r for r in results if "can come before the wait" in r.vc.message]
    assert lag and all(r.verdict == "proved" for r in results), \
        [(r.vc.id, r.verdict, r.reason) for r in results if r.verdict != "proved"]


def test_a_producer_running_two_phases_ahead_is_refuted_and_replayed():
    results = verify_properties(signals.specialize(THROTTLED=False), PHASE)
    refuted = [r for r in results if r.verdict == "refuted" and r.counterexample
               and "can come before the wait" in r.vc.message]
    assert refuted, [(r.vc.id, r.verdict, r.reason) for r in results]
    cx = refuted[0].counterexample
    assert cx.position.line == line_of(signals, "A.wait(ready, phase=kt)")
    assert cx.thread >= 32  # a consumer
    assert cx.replay.status == "reproduced", cx.human()
    assert "phase" in cx.replay.violation["message"]
