"""The timing harness without a GPU: a stand-in ``torch`` records what it is asked to do."""

import sys
import types

import pytest

from argus.runtime import timing


class _Event:
    clock = 0.0

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        _Event.clock += 1.0
        self.t = _Event.clock

    def elapsed_time(self, end):
        return end.t - self.t


@pytest.fixture
def fake_torch(monkeypatch):
    log = {"flush": [], "zeroed": 0}

    class _Buffer:
        def __init__(self, n):
            log["flush"].append(4 * n)

        def zero_(self):
            log["zeroed"] += 1

    cuda = types.SimpleNamespace(
        Event=_Event, synchronize=lambda: None, current_device=lambda: 0,
        get_device_properties=lambda d: types.SimpleNamespace(L2_cache_size=log.get("l2", 60 << 20)))
    torch = types.SimpleNamespace(cuda=cuda, int32="int32", empty=lambda n, dtype, device: _Buffer(n))
    monkeypatch.setitem(sys.modules, "torch", torch)
    return log


def test_flush_covers_l2_twice_and_a_launch_path(fake_torch):
    calls = []
    out = timing.benchmark({"a": lambda x: calls.append(("a", x)), "b": lambda x: calls.append(("b", x))},
                           lambda i: (i,), rotations=2, warmup=1, repeat=6)
    assert fake_torch["flush"] == [timing.MIN_FLUSH_BYTES]  # 2 x 60 MiB is less than 256 MiB
    assert fake_torch["zeroed"] == 12  # before every timed call of every candidate
    assert calls[:4] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]  # warm-up on every input set
    timed = calls[4:]
    assert [c[0] for c in timed] == ["a", "b"] * 6  # interleaved
    assert [c[1] for c in timed[::2]] == [0, 1, 0, 1, 0, 1]  # inputs rotated
    assert out["a"].samples == 6 and out["a"].median == 1.0


def test_flush_grows_with_a_large_l2(fake_torch):
    fake_torch["l2"] = 200 << 20
    timing.benchmark({"a": lambda x: None}, lambda i: (i,), rotations=1, warmup=0, repeat=1)
    assert fake_torch["flush"] == [400 << 20]
