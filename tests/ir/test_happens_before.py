"""The vector-clock race detector against an independent oracle: the transitive closure of
program order and synchronisation edges over random programs of a few threads."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from argus.ir import dtypes as D
from argus.ir import nodes as N
from argus.ir.happens_before import HappensBefore
from argus.ir.interpreter import InterpreterError

THREADS, ELEMENTS, CHANNELS = 3, 2, 2

_event = st.one_of(
    st.tuples(st.just("write"), st.integers(0, THREADS - 1), st.integers(0, ELEMENTS - 1)),
    st.tuples(st.just("read"), st.integers(0, THREADS - 1), st.integers(0, ELEMENTS - 1)),
    st.tuples(st.just("barrier"), st.sets(st.integers(0, THREADS - 1), min_size=2)),
    st.tuples(st.just("release"), st.integers(0, THREADS - 1), st.integers(0, CHANNELS - 1)),
    st.tuples(st.just("acquire"), st.integers(0, THREADS - 1), st.integers(0, CHANNELS - 1)),
)


def _oracle_first_race(events) -> int | None:
    """Index of the first access that conflicts with an earlier access it is not ordered after.

    Nodes are events (a barrier is one node for all its participants); edges: program order of
    each thread, and every release of a channel to each later acquire of that channel.
    """
    n = len(events)
    reach = np.eye(n, dtype=bool)
    last: dict[int, int] = {}
    releases: dict[int, list[int]] = {}
    for j, e in enumerate(events):
        threads = sorted(e[1]) if e[0] == "barrier" else [e[1]]
        preds = [last[t] for t in threads if t in last]
        if e[0] == "acquire":
            preds += releases.get(e[2], [])
        for p in preds:
            reach[:, j] |= reach[:, p]
        for t in threads:
            last[t] = j
        if e[0] == "release":
            releases.setdefault(e[2], []).append(j)
        if e[0] in ("read", "write"):
            for i in range(j):
                f = events[i]
                if f[0] in ("read", "write") and f[2] == e[2] and f[1] != e[1] and "write" in (e[0], f[0]) \
                        and not reach[i, j]:
                    return j
    return None


def _detector_first_race(events) -> int | None:
    hb = HappensBefore(THREADS, (0, 0, 0))
    buffer = N.Buffer("m", N.MemorySpace.SHARED, D.F32, ELEMENTS)
    mem = SimpleNamespace(buffer=buffer, values=np.zeros(ELEMENTS))
    run = SimpleNamespace(_elements=lambda view: (None, [(0,)]))
    op = N.Fence(fence="test")
    channels = {c: hb.zero() for c in range(CHANNELS)}
    for j, e in enumerate(events):
        match e:
            case ("read" | "write", t, x):
                try:
                    hb.access(run, op, None, mem, np.array([[x]]), np.ones((1, 1), bool), np.array([t]), e[0] == "write")
                except InterpreterError:
                    return j
            case ("barrier", threads):
                hb.barrier(np.array(sorted(threads)))
            case ("release", t, c):
                channels[c] = np.maximum(hb._widen(channels[c]), hb.release(np.array([t])))
            case ("acquire", t, c):
                hb.acquire(np.array([t]), channels[c])
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(_event, max_size=14))
def test_vector_clocks_find_exactly_the_races_the_closure_finds(events):
    assert _detector_first_race(events) == _oracle_first_race(events)


def test_a_release_orders_only_what_came_before_it():
    events = [("release", 0, 0), ("write", 0, 0), ("acquire", 1, 0), ("read", 1, 0)]
    assert _oracle_first_race(events) == 3 == _detector_first_race(events)
    events = [("write", 0, 0), ("release", 0, 0), ("acquire", 1, 0), ("read", 1, 0)]
    assert _oracle_first_race(events) is None is _detector_first_race(events)


def test_read_clocks_grow_with_the_elements_read_not_the_buffer():
    """A block reading a few elements of a large global tensor keeps read times for those only
    (a dense [size, readers] table made the interpreter quadratic in the tensor size), and
    the sparse table answers like a dense one."""
    from argus.ir.happens_before import Shadow

    sh = Shadow.create(1_000_000, shared=False)
    threads = np.arange(4)
    sh.reader_columns(threads, 4)
    rows = sh.read_rows(np.array([10, 999_999, 10, 5]), create=True)
    assert sh.read_clock.shape == (3, 4)
    assert rows[0] == rows[2] and len(set(rows.tolist())) == 3
    sh.read_clock[rows[1], 2] = 7
    got = sh.reads_at(np.array([999_999, 11]))
    assert got.tolist() == [[0, 0, 7, 0], [0, 0, 0, 0]]
    assert sh.reads_of(2)[999_999] == 7 and sh.reads_of(2).sum() == 7
    sh.clear_reads(np.array([999_999, 12]))
    assert sh.reads_of(2).sum() == 0
