"""The one timing harness: benchmarks, the agent and KernelBench time kernels with it.

:func:`benchmark` times several candidates (argus and its baselines) *in the same run*,
interleaved repetition by repetition so that clock and thermal drift hit all of them alike:

* warm-up calls first (module loading, autotuning, caches of the frameworks);
* each timed call between two CUDA events on the current stream;
* the L2 cache flushed before every timed call (a write over a buffer larger than L2), so a
  kernel does not time a warm cache; the buffer is also at least 256 MiB, so that the flush
  outlasts the host's launch path of the call (tens of microseconds for a Python launcher):
  otherwise the event pair of a short kernel times the GPU idling until the launch arrives,
  and a slower launcher reads as a slower kernel (measured on an H200: a 2048 x 2048 x 64 GEMM
  timed 14.9 µs behind a 2·L2 flush and 8.8 µs behind a 512 MiB one, cuBLAS 8.9 / 8.4 µs);
* inputs rotated among ``rotations`` independent sets (``make_inputs(i)``), for the same reason;
* the median and the spread (10th–90th percentile, min, max) per candidate.

>>> results = benchmark({"argus": run_argus, "torch": run_torch}, make_inputs)   # doctest: +SKIP
>>> print(format_results(results, baseline="torch"))                            # doctest: +SKIP
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MIN_FLUSH_BYTES", "Timing", "benchmark", "format_results"]

MIN_FLUSH_BYTES = 256 << 20
"""The smallest L2 flush: its memset (~80 µs on an H200) covers a Python launch path."""


@dataclass(frozen=True)
class Timing:
    """Milliseconds per call of one candidate."""

    name: str
    median: float
    p10: float
    p90: float
    minimum: float
    maximum: float
    samples: int

    @property
    def spread(self) -> float:
        """Relative spread ``(p90 - p10) / median``."""
        return (self.p90 - self.p10) / self.median if self.median else 0.0


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    position = q * (len(sorted_values) - 1)
    lo = int(position)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def benchmark(candidates: dict[str, Callable[..., Any]], make_inputs: Callable[[int], tuple[Any, ...]], *,
              rotations: int = 4, warmup: int = 3, repeat: int = 30, flush_l2: bool = True,
              l2_flush_bytes: int | None = None) -> dict[str, Timing]:
    """Time each candidate ``fn(*make_inputs(i))`` (see the module docstring)."""
    import torch

    inputs = [make_inputs(i) for i in range(rotations)]
    flush = None
    if flush_l2:
        size = l2_flush_bytes
        if size is None:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            size = max(2 * int(getattr(props, "L2_cache_size", 64 << 20) or (64 << 20)), MIN_FLUSH_BYTES)
        flush = torch.empty(size // 4, dtype=torch.int32, device="cuda")
    for _ in range(warmup):
        for fn in candidates.values():
            for args in inputs:
                fn(*args)
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    pairs: list[tuple[str, Any, Any]] = []
    for r in range(repeat):
        args = inputs[r % rotations]
        for name, fn in candidates.items():
            if flush is not None:
                flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            pairs.append((name, start, end))
    torch.cuda.synchronize()
    for name, start, end in pairs:
        samples[name].append(start.elapsed_time(end))
    out = {}
    for name, values in samples.items():
        ordered = sorted(values)
        out[name] = Timing(name, statistics.median(ordered), _percentile(ordered, 0.1), _percentile(ordered, 0.9),
                           ordered[0], ordered[-1], len(ordered))
    return out


def format_results(results: dict[str, Timing], baseline: str | None = None, *, work: float | None = None,
                   unit: str = "") -> str:
    """A side-by-side table: median, spread, and the ratio to ``baseline`` (baseline / candidate:
    above 1 is faster than the baseline); ``work`` (e.g. FLOP or bytes per call) adds a rate."""
    lines = [f"{'candidate':<16}{'median ms':>12}{'p10-p90 ms':>20}{'vs ' + (baseline or '-'):>14}"
             + (f"{unit + '/s':>14}" if work else "")]
    base = results.get(baseline) if baseline else None
    for name, t in results.items():
        ratio = f"{base.median / t.median:.3f}x" if base and t.median else "-"
        rate = f"{work / (t.median * 1e-3) / 1e12:.2f}T" if work else ""
        lines.append(f"{name:<16}{t.median:>12.4f}{f'{t.p10:.4f}-{t.p90:.4f}':>20}{ratio:>14}"
                     + (f"{rate:>14}" if work else ""))
    return "\n".join(lines)
