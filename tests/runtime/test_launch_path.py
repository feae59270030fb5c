"""The host's launch path of a checked argument set (``argus.runtime.launch._Launch``), against a
stand-in for cuda-bindings' driver module and torch: the launch configuration is built once, a call
sets only the stream, a dependent launch and a cluster shape travel as launch attributes, a failing
launch raises :class:`LaunchError`; a repeated call of a compiled kernel is checked once and
launched on the stream current at each call, and ``ARGUS_DEPENDENT_LAUNCH=0`` applies to an
argument set launched before.  No GPU, torch or cuda-bindings needed."""

from __future__ import annotations

import ctypes
import enum
import types

import pytest

from argus.runtime import launch as L


class _Result(enum.Enum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701


class _Attribute:
    def __init__(self):
        self.id = None
        self.value = types.SimpleNamespace(clusterDim=types.SimpleNamespace(x=0, y=0, z=0),
                                           programmaticStreamSerializationAllowed=0)


class _Config:
    built = 0

    def __init__(self):
        type(self).built += 1
        self.hStream = None


class _Stream:
    def __init__(self, handle):
        self.handle = int(handle)

    def __int__(self):
        return self.handle


def _driver(fail: bool = False):
    calls = []

    def launch_ex(config, fn, params, extra):
        calls.append(("ex", int(config.hStream), [(a.id, a.value) for a in config.attrs], params))
        return (_Result.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES if fail else _Result.CUDA_SUCCESS,)

    def launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        calls.append(("plain", int(stream), (gx, gy, gz, bx, shared), params))
        return _Result.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES if fail else _Result.CUDA_SUCCESS  # a bare result

    ids = types.SimpleNamespace(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION="cluster",
                                CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION="pdl")
    driver = types.SimpleNamespace(CUresult=_Result, CUlaunchAttribute=_Attribute, CUlaunchAttributeID=ids,
                                   CUlaunchConfig=_Config, CUstream=_Stream, cuLaunchKernelEx=launch_ex,
                                   cuLaunchKernel=launch,
                                   cuGetErrorString=lambda err: (_Result.CUDA_SUCCESS, b"too many resources"))
    return driver, calls


def _launch(driver, cluster=(1, 1, 1), dependent=False):
    keep = [ctypes.c_uint64(7), ctypes.c_int32(3)]
    return L._Launch(driver, "fn", (128, 1, 1), 384, 200_000, cluster, dependent, keep, ctx=1), keep


def test_a_dependent_launch_builds_its_configuration_once_and_sets_only_the_stream(monkeypatch):
    driver, calls = _driver()
    monkeypatch.setattr(L, "_driver", lambda: driver)  # the results are checked against its codes
    before = _Config.built
    launch, keep = _launch(driver, dependent=True)
    for stream in (5, 5, 9, 9, 5):
        launch(stream)
    assert _Config.built == before + 1
    assert [c[1] for c in calls] == [5, 5, 9, 9, 5]  # each launch on the stream it was given
    assert all(c[0] == "ex" for c in calls)
    _, _, attrs, params = calls[0]
    assert [a[0] for a in attrs] == ["pdl"] and attrs[0][1].programmaticStreamSerializationAllowed == 1
    # the parameter array points at the kept buffers, which stay alive with the launch
    array = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p * 2)).contents
    assert list(array) == [ctypes.addressof(k) for k in keep]
    config = launch.config
    assert (config.gridDimX, config.blockDimX, config.sharedMemBytes, config.numAttrs) == (128, 384, 200_000, 1)


def test_a_cluster_shape_is_an_attribute_and_a_plain_kernel_takes_the_plain_launch(monkeypatch):
    driver, calls = _driver()
    monkeypatch.setattr(L, "_driver", lambda: driver)  # the results are checked against its codes
    clustered, _ = _launch(driver, cluster=(2, 1, 1), dependent=True)
    clustered(3)
    attrs = calls[-1][2]
    assert [a[0] for a in attrs] == ["cluster", "pdl"]
    dims = attrs[0][1].clusterDim
    assert (dims.x, dims.y, dims.z) == (2, 1, 1)
    plain, _ = _launch(driver)
    assert plain.config is None
    plain(4)
    plain(6)
    assert calls[-2:] == [("plain", 4, (128, 1, 1, 384, 200_000), plain.address),
                          ("plain", 6, (128, 1, 1, 384, 200_000), plain.address)]


@pytest.mark.parametrize("dependent", [False, True])
def test_a_failing_launch_is_a_launch_error(monkeypatch, dependent):
    driver, _ = _driver(fail=True)
    monkeypatch.setattr(L, "_driver", lambda: driver)
    launch, _ = _launch(driver, dependent=dependent)
    with pytest.raises(L.LaunchError, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"):
        launch(0)


def test_the_current_stream_comes_from_torch():
    raw = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x1000 + device)
    cuda = types.SimpleNamespace(current_device=lambda: 2, current_stream=lambda: pytest.fail("not needed"))
    assert L._current_stream(types.SimpleNamespace(_C=raw, cuda=cuda)) == 0x1002
    # a torch without the raw accessor: the stream object's handle
    cuda = types.SimpleNamespace(current_device=lambda: 0,
                                 current_stream=lambda: types.SimpleNamespace(cuda_stream=0x2000))
    assert L._current_stream(types.SimpleNamespace(_C=types.SimpleNamespace(), cuda=cuda)) == 0x2000


class _Tensor:
    def __init__(self, address):
        self.address, self.shape, self.dtype, self.device = address, (64, 64), "bf16", "cuda:0"

    def data_ptr(self):
        return self.address

    def stride(self):
        return (64, 1)


def _compiled(monkeypatch, dependent=True):
    """A compiled kernel over the stand-in driver and torch, counting the argument checks."""
    driver, calls = _driver()
    driver.cuCtxGetCurrent = lambda: (_Result.CUDA_SUCCESS, 1)
    checks = []

    def bind(kernel, args, kwargs):
        checks.append(args)
        return types.SimpleNamespace(sizes={}, tensors={}, scalars={})

    streams = iter(range(100, 200))
    torch = types.SimpleNamespace(_C=types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: next(streams)),
                                  cuda=types.SimpleNamespace(current_device=lambda: 0))
    monkeypatch.setattr(L, "_driver", lambda: driver)
    monkeypatch.setattr(L, "_torch", lambda: torch)
    monkeypatch.setattr(L, "bind_arguments", bind)
    monkeypatch.setattr(L, "_function", lambda *a: "fn")
    monkeypatch.setattr(L, "_current_context", lambda: 1)
    kernel = types.SimpleNamespace(assumptions=[], launch=types.SimpleNamespace(grid=(132,), threads=384,
                                                                                cluster=(1, 1, 1)))
    ptx = types.SimpleNamespace(params=[], dependent_launch=dependent, dynamic_shared_bytes=1024, name="k")
    return L.CompiledKernel(kernel, None, ptx, types.SimpleNamespace(image=b"", key="k")), calls, checks


def test_a_repeated_call_reuses_its_checked_launch_on_the_current_stream(monkeypatch):
    compiled, calls, checks = _compiled(monkeypatch)
    a, b = _Tensor(0x1000), _Tensor(0x2000)
    for _ in range(3):
        compiled(a, b)
    assert len(checks) == 1  # checked once
    assert [c[1] for c in calls] == [100, 101, 102]  # each launch on the stream current at its call
    assert all(c[0] == "ex" and [x[0] for x in c[2]] == ["pdl"] for c in calls)
    compiled(_Tensor(0x3000), b)  # another tensor: checked again
    assert len(checks) == 2


def test_turning_dependent_launches_off_takes_effect_on_a_cached_argument_set(monkeypatch):
    compiled, calls, checks = _compiled(monkeypatch)
    a, b = _Tensor(0x1000), _Tensor(0x2000)
    compiled(a, b)
    monkeypatch.setenv("ARGUS_DEPENDENT_LAUNCH", "0")
    compiled(a, b)
    assert len(checks) == 2 and calls[-1][0] == "plain"
    monkeypatch.delenv("ARGUS_DEPENDENT_LAUNCH")
    compiled(a, b)
    assert calls[-1][0] == "ex"


def test_the_per_call_configuration_experiment_applies_to_this_launch_path(tmp_path):
    """``benchmarks/gpu_round.sh`` times the kept launch against the per-call configuration of
    ``benchmarks/experiments/launch_per_call_config.patch``: the patch must apply here and undo."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "argus" / "runtime").mkdir(parents=True)
    shutil.copy(root / "argus" / "runtime" / "launch.py", tmp_path / "argus" / "runtime" / "launch.py")
    patch = root / "benchmarks" / "experiments" / "launch_per_call_config.patch"
    subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, check=True)
    patched = (tmp_path / "argus" / "runtime" / "launch.py").read_text()
    assert "class _Launch" not in patched and "config.hStream = stream" in patched
    subprocess.run(["git", "apply", "-R", str(patch)], cwd=tmp_path, check=True)
    assert (tmp_path / "argus" / "runtime" / "launch.py").read_text() == (root / "argus/runtime/launch.py").read_text()
