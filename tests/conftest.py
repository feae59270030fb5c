"""Test-suite configuration: markers, hypothesis profiles, per-module time budgets.

* ``gpu`` tests run only where a CUDA driver and device answer; elsewhere they are skipped
  with the reason the probe gave.
* ``slow`` tests run with ``--slow`` (or ``ARGUS_SLOW=1``), which also selects the thorough
  hypothesis profile.
* Every test module has a wall-clock budget (``[tool.argus.test-budget]`` in pyproject.toml);
  a module that overruns it fails the session, so the default suite keeps its ~15 minute
  bound on 2 cores as it grows.  ``ARGUS_TEST_BUDGET=off`` disables the check.  The budgets
  are seconds of the machine they were set on; on a slower one they stretch by the ratio of a
  fixed pure-Python loop's time there to :data:`REFERENCE_LOOP_S` (never shrinking below 1x).
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)  # the default run is reproducible; the thorough profile (--slow) keeps searching at random
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=20, deadline=None)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def gemm_benchmark():
    """``benchmarks/gemm.py`` loaded as a fresh module (a test may patch its functions)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gemm_benchmark", ROOT / "benchmarks" / "gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slow_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--slow")) or os.environ.get("ARGUS_SLOW") == "1"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", help="also run tests marked slow")


def pytest_configure(config: pytest.Config) -> None:
    profile = os.environ.get("HYPOTHESIS_PROFILE") or ("thorough" if _slow_enabled(config) else "ci")
    settings.load_profile(profile)
    config._argus_module_time = defaultdict(float)  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_slow = _slow_enabled(config)
    gpu_reason: str | None = None
    gpu_checked = False
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --slow or ARGUS_SLOW=1"))
        if "gpu" in item.keywords:
            if not gpu_checked:
                from argus.toolchain import cuda_device

                probe = cuda_device()
                gpu_reason = None if probe.ok else f"no CUDA device: {probe.detail}"
                gpu_checked = True
            if gpu_reason:
                item.add_marker(pytest.mark.skip(reason=gpu_reason))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    cfg = _CONFIG.get("config")
    if cfg is not None:
        cfg._argus_module_time[module] += report.duration  # type: ignore[attr-defined]


_CONFIG: dict[str, pytest.Config] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config
    session.config._argus_started = time.monotonic()  # type: ignore[attr-defined]


#: seconds of :func:`_calibration_loop` on the 2-core machine the budgets were set on (derived
#: from two full runs of the same suite: 525 s there, 1347 s on a machine where the loop took
#: 0.116 s, 2.57x slower)
REFERENCE_LOOP_S = 0.045


def _calibration_loop() -> float:
    """The best of three runs of a fixed pure-Python loop (10^6 iterations), in seconds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        sum(i * i for i in range(10**6))
        best = min(best, time.perf_counter() - start)
    return best


def _slowdown() -> float:
    """How much slower this machine runs Python than the budgets' machine (at least 1)."""
    return max(1.0, _calibration_loop() / REFERENCE_LOOP_S)


#: how much longer a test takes when every core runs a test worker (``pytest -n``) than alone: the
#: workers share caches and memory bandwidth (measured on the 2-core machine: the slowest proof
#: module 65 s alone, 75 s beside a second worker)
PARALLEL_STRETCH = 1.25


def _parallel_workers(config: pytest.Config) -> int:
    """The number of pytest-xdist workers of this run (1 without xdist)."""
    workers = getattr(config.option, "numprocesses", None)
    return workers if isinstance(workers, int) and workers > 1 else 1


def _budgets() -> dict[str, float]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data.get("tool", {}).get("argus", {}).get("test-budget", {"default": 60})


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("ARGUS_TEST_BUDGET") == "off" or _slow_enabled(session.config):
        return
    budgets = _budgets()
    workers = _parallel_workers(session.config)
    stretch = _slowdown() * (PARALLEL_STRETCH if workers > 1 else 1.0)
    over, near = [], []
    for module, seconds in session.config._argus_module_time.items():  # type: ignore[attr-defined]
        limit = float(budgets.get(module, budgets.get("default", 60))) * stretch
        if seconds > limit:
            over.append(f"{module}: {seconds:.1f}s > budget {limit:.0f}s")
        elif seconds > 0.75 * limit:
            near.append(f"{module}: {seconds:.1f}s of {limit:.0f}s")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if stretch > 1.0 and reporter is not None:
        beside = f" ({workers} workers sharing the cores)" if workers > 1 else ""
        reporter.write_line(f"argus test budget: tests here run {stretch:.2f}x slower than on the budgets' "
                            f"machine{beside}; budgets stretched as much")
    if near and reporter is not None:
        reporter.write_line("argus test budget: modules above 75% of their budget:", yellow=True)
        for line in near:
            reporter.write_line("  " + line, yellow=True)
    if over:
        if reporter is not None:
            reporter.write_line("argus test budget exceeded:", red=True)
            for line in over:
                reporter.write_line("  " + line, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
