"""Loading cubins and launching them through cuda-python's driver API, on torch tensors.

:class:`CompiledKernel` is what :func:`argus.compile` returns: calling it with tensors checks
the kernel's declared assumptions and the facts the compiler relied on (dtypes, shapes,
strides, base alignment, sizes below ``2**31``, no overlapping tensors), builds the TMA tensor
maps, and launches on the caller's current torch stream.  Every check failure is an
:class:`LaunchError` naming the argument and the declaration.

torch and cuda-bindings are imported on first use; without them the error says what to install.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import sympy

from argus import symbolic
from argus.errors import ArgusError
from argus.ir import nodes as N
from argus.ir.lowering import SIZE_LIMIT
from argus.toolchain import INSTALL_NVIDIA, INSTALL_TORCH

__all__ = ["CompiledKernel", "LaunchError", "bind_arguments"]


class LaunchError(ArgusError):
    """Arguments that break what the kernel declares, or a failing driver call."""


def _torch():
    try:
        import torch
    except ImportError:
        raise LaunchError("launching a kernel needs torch", hint=INSTALL_TORCH) from None
    return torch


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise LaunchError("launching a kernel needs cuda-bindings", hint=INSTALL_NVIDIA) from None
    return driver


def _check(result: Any, what: str) -> Any:
    driver = _driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", str(err))
        _, text = driver.cuGetErrorString(err)
        raise LaunchError(f"{what} failed: {name} ({text.decode() if isinstance(text, bytes) else text})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


TORCH_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i32": "int32",
                "i64": "int64", "i16": "int16", "i8": "int8", "u8": "uint8", "e4m3": "float8_e4m3fn",
                "e5m2": "float8_e5m2", "bool": "bool"}


def _tma_dtype(dt: Any) -> Any:
    driver = _driver()
    enum = driver.CUtensorMapDataType
    table = {"f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
             "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
             "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32", "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
             "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64", "u64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
             "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
             "e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "u16": "CU_TENSOR_MAP_DATA_TYPE_UINT16"}
    return getattr(enum, table[dt.name])


# --------------------------------------------------------------------------- arguments


@dataclass
class BoundArguments:
    """Tensors and sizes of one launch, after every check."""

    tensors: dict[str, Any]
    sizes: dict[sympy.Symbol, int]
    scalars: dict[str, float] = field(default_factory=dict)


def _as_tensor(value: Any, name: str) -> Any:
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value
    if hasattr(value, "__dlpack__"):
        return torch.from_dlpack(value)
    raise LaunchError(f"argument {name}: expected a torch tensor or a DLPack producer, got {type(value).__name__}")


def bind_arguments(kernel: N.Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                   require_cuda: bool = True) -> BoundArguments:
    """Match arguments to parameters and check everything the kernel declares about them
    (``require_cuda=False`` checks host tensors too: for tests of the checks themselves)."""
    torch = _torch()
    params = list(kernel.params)
    if len(args) > len(params):
        raise LaunchError(f"{kernel.name} takes {len(params)} arguments, got {len(args)}")
    values: dict[str, Any] = {}
    for p, a in zip(params, args):
        values[p.name] = a
    for name, a in kwargs.items():
        if name not in {p.name for p in params}:
            raise LaunchError(f"{kernel.name} has no parameter {name!r}")
        if name in values:
            raise LaunchError(f"{kernel.name}: argument {name!r} given twice")
        values[name] = a
    missing = [p.name for p in params if p.name not in values]
    if missing:
        raise LaunchError(f"{kernel.name}: missing argument(s) {', '.join(missing)}")
    sizes: dict[sympy.Symbol, int] = {}
    tensors: dict[str, Any] = {}
    scalars: dict[str, float] = {}

    def bind(sym: sympy.Symbol, value: int, why: str) -> None:
        if sym in sizes and sizes[sym] != value:
            raise LaunchError(f"size {sym} is {sizes[sym]} from one argument and {value} from {why}")
        sizes[sym] = value

    for p in params:
        if p.kind == "index":
            bind(p.symbol, int(values[p.name]), f"argument {p.name}")
        elif p.kind == "scalar":
            scalars[p.name] = float(values[p.name])
    for p in params:
        if p.kind != "tensor":
            continue
        t = _as_tensor(values[p.name], p.name)
        buffer = p.buffer
        want = getattr(torch, TORCH_DTYPES.get(buffer.dtype.name, ""), None)
        if want is None or t.dtype != want:
            raise LaunchError(f"argument {p.name}: dtype {t.dtype}, the kernel declares {buffer.dtype}")
        if require_cuda and not t.is_cuda:
            raise LaunchError(f"argument {p.name}: a {t.device} tensor; kernels run on CUDA tensors")
        layout = buffer.layout
        shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
        if t.dim() != len(shape):
            raise LaunchError(f"argument {p.name}: {t.dim()} dimensions, the kernel declares {len(shape)} ({layout})")
        for d, (extent, actual) in enumerate(zip(shape, t.shape)):
            if isinstance(extent, sympy.Symbol):
                bind(extent, int(actual), f"dimension {d} of {p.name}")
        tensors[p.name] = t
    for p in params:
        if p.kind != "tensor":
            continue
        t, layout = tensors[p.name], p.buffer.layout
        shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
        strides = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
        for d, (extent, stride) in enumerate(zip(shape, strides)):
            want_extent = symbolic.evaluate(extent, sizes)
            if want_extent != t.shape[d]:
                raise LaunchError(f"argument {p.name}: dimension {d} is {t.shape[d]}, the kernel expects {want_extent}")
            want_stride = symbolic.evaluate(stride, sizes)
            if t.shape[d] > 1 and t.stride(d) != want_stride:
                raise LaunchError(f"argument {p.name}: stride {t.stride(d)} in dimension {d}, the kernel declares "
                                  f"{want_stride} ({layout})", hint="pass a contiguous tensor (x.contiguous())")
        if t.data_ptr() % p.buffer.alignment:
            raise LaunchError(f"argument {p.name}: base address is not {p.buffer.alignment}-byte aligned",
                              hint="pass a tensor that starts at an allocation (not an unaligned slice)")
    for sym, value in sizes.items():
        if not 0 <= value <= SIZE_LIMIT:
            raise LaunchError(f"size {sym} = {value} is outside [0, 2**31): argus kernels index with 32-bit sizes")
    _check_assumptions(kernel, tensors, sizes)
    _check_overlap(kernel, tensors)
    return BoundArguments(tensors, sizes, scalars)


def _span(t: Any) -> tuple[int, int]:
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())


def _check_overlap(kernel: N.Kernel, tensors: dict[str, Any]) -> None:
    """Distinct tensor parameters are distinct buffers in the proof: their memory must not overlap."""
    names = list(tensors)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (a0, a1), (b0, b1) = _span(tensors[a]), _span(tensors[b])
            if a0 < b1 and b0 < a1:
                raise LaunchError(f"arguments {a} and {b} overlap in memory; the kernel was proved for distinct tensors",
                                  hint="pass separate tensors (clone one of them)")


def _check_assumptions(kernel: N.Kernel, tensors: dict[str, Any], sizes: dict[sympy.Symbol, int]) -> None:
    torch = _torch()
    subs = {s: sympy.Integer(v) for s, v in sizes.items()}
    for a in kernel.assumptions:
        where = f" (declared at {a.loc})" if a.loc else ""
        match a.kind:
            case "predicate":
                if not isinstance(a.predicate, sympy.Basic) or a.predicate is sympy.true:
                    continue
                holds = a.predicate.xreplace(subs)
                if holds.free_symbols:
                    continue
                if not bool(holds):
                    raise LaunchError(f"declared assumption {a.text} does not hold for sizes "
                                      f"{ {str(k): v for k, v in sizes.items()} }{where}")
            case "aligned":
                t = tensors[a.tensors[0]]
                if t.data_ptr() % int(a.bound[0]):
                    raise LaunchError(f"declared assumption {a.text} does not hold: {a.tensors[0]} is at "
                                      f"{t.data_ptr():#x}{where}")
            case "no_alias":
                spans = [(n, _span(tensors[n])) for n in a.tensors]
                for i, (n, (s0, s1)) in enumerate(spans):
                    for m, (t0, t1) in spans[i + 1:]:
                        if s0 < t1 and t0 < s1:
                            raise LaunchError(f"declared assumption {a.text} does not hold: {n} and {m} overlap{where}")
            case "ids_in_range":
                t = tensors[a.tensors[0]]
                low, high = (symbolic.evaluate(b, sizes) for b in a.bound)
                if t.numel() and not bool(((t >= low) & (t < high)).all()):
                    raise LaunchError(f"declared assumption {a.text} does not hold: an element of {a.tensors[0]} "
                                      f"is outside [{low}, {high}){where}")
            case "monotone":
                t = tensors[a.tensors[0]].reshape(-1)
                if t.numel() > 1 and not bool((t[1:] >= t[:-1]).all()):
                    raise LaunchError(f"declared assumption {a.text} does not hold: {a.tensors[0]} decreases{where}")
    del torch


# --------------------------------------------------------------------------- modules


_modules: dict[tuple[int, str], Any] = {}
_lock = threading.Lock()


def _current_context() -> Any:
    torch = _torch()
    driver = _driver()
    if not torch.cuda.is_available():
        raise LaunchError("no CUDA device is available to torch")
    torch.cuda.init()
    _check(driver.cuInit(0), "cuInit")
    ctx = _check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        device = _check(driver.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        ctx = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def _function(image: bytes, key: str, name: str, dynamic_shared: int) -> Any:
    driver = _driver()
    ctx = _current_context()
    with _lock:
        entry = _modules.get((int(ctx), key))
        if entry is None:
            module = _check(driver.cuModuleLoadData(image), "cuModuleLoadData")
            fn = _check(driver.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")
            if dynamic_shared > 48 * 1024:
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(driver.cuFuncSetAttribute(fn, attr, dynamic_shared), "cuFuncSetAttribute")
            entry = _modules[(int(ctx), key)] = (module, fn)
    return entry[1]


_L2_PROMOTIONS = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}


def encode_tensor_map(spec: Any, tensor: Any, l2_promotion: int = 128) -> bytes:
    """The 128-byte ``CUtensorMap`` of a tiled TMA copy of ``tensor`` with ``spec``'s box and swizzle.

    ``l2_promotion`` (bytes: 0, 64, 128 or 256) is how far the L2 widens a copy's miss; it changes
    no value a kernel computes (128 and 256 timed the same for the Hopper GEMM, benchmarks/RESULTS.md)."""
    if l2_promotion not in _L2_PROMOTIONS:
        raise LaunchError(f"l2_promotion={l2_promotion!r}: use 0, 64, 128 or 256 (bytes)")
    driver = _driver()
    promotion = getattr(driver.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2_PROMOTIONS[l2_promotion]}")
    rank = tensor.dim()
    itemsize = tensor.element_size()
    dims = [int(n) for n in reversed(tensor.shape)]
    strides = [int(s) * itemsize for s in reversed(tensor.stride())][1:]
    if tensor.data_ptr() % 16 or any(s % 16 for s in strides):
        raise LaunchError(f"a TMA copy of {spec.param} needs a 16-byte aligned base and row strides that are "
                          f"multiples of 16 bytes (strides {strides} bytes)",
                          hint="pad the inner dimension to a multiple of 16 bytes")
    swizzle = driver.CUtensorMapSwizzle(spec.swizzle.tma_code)
    tmap = _check(driver.cuTensorMapEncodeTiled(
        _tma_dtype(spec.dtype), rank, tensor.data_ptr(), [driver.cuuint64_t(d) for d in dims],
        [driver.cuuint64_t(s) for s in strides], [driver.cuuint32_t(b) for b in spec.box],
        [driver.cuuint32_t(1)] * rank, driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        promotion, driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tmap.getPtr(), 128)


@dataclass
class CompiledKernel:
    """A proved, compiled kernel specialization; call it with tensors (and index arguments).

    ``kernel`` is the IR after policies, ``proof`` the record that satisfied the gate, ``ptx``
    the emitted module and ``cubin`` its assembled image.
    """

    kernel: N.Kernel
    proof: Any
    ptx: Any
    cubin: Any

    @property
    def name(self) -> str:
        return self.ptx.name

    def grid(self, sizes: dict[sympy.Symbol, int]) -> tuple[int, int, int]:
        dims = [int(symbolic.evaluate(g, sizes)) for g in self.kernel.launch.grid]
        dims += [1] * (3 - len(dims))
        return (dims[0], dims[1], dims[2])

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Check the arguments and launch on the current torch stream (asynchronously)."""
        torch = _torch()
        driver = _driver()
        key = _launch_key(self.kernel, args, kwargs)
        cache = self.__dict__.setdefault("_launches", {})
        dependent = self.ptx.dependent_launch and _dependent_launches()
        if key is not None:
            launch = cache.get(key)  # the same tensors, shapes and sizes: checked already
            if (launch is not None and launch.dependent == dependent
                    and launch.ctx == int(_check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent") or 0)):
                launch(_current_stream(torch))
                return
        bound = bind_arguments(self.kernel, args, kwargs)
        grid = self.grid(bound.sizes)
        if 0 in grid:
            return
        fn = _function(self.cubin.image, self.cubin.key, self.ptx.name, self.ptx.dynamic_shared_bytes)
        keep: list[Any] = []
        for kind, name in self.ptx.params:
            if kind == "tensor":
                keep.append(ctypes.c_uint64(bound.tensors[name].data_ptr()))
            elif kind == "size":
                sym = next(s for s in self.ptx.lowered.sizes if s.name == name)
                keep.append(ctypes.c_int32(bound.sizes[sym]))
            elif kind == "scalar":
                keep.append(ctypes.c_float(bound.scalars[name]))
            else:
                spec = self.ptx.lowered.tensor_maps[int(name[len("tmap"):])]
                raw = encode_tensor_map(spec, bound.tensors[spec.param])
                keep.append((ctypes.c_uint8 * 128).from_buffer_copy(raw))
        launch = _Launch(driver, fn, grid, self.kernel.launch.threads, self.ptx.dynamic_shared_bytes,
                         tuple(self.kernel.launch.cluster), dependent, keep, int(_current_context()))
        if key is not None:
            if len(cache) >= _LAUNCH_CACHE:
                cache.pop(next(iter(cache)))
            cache[key] = launch
        launch(_current_stream(torch))


class _Launch:
    """One checked argument set of a compiled kernel, ready to launch: its parameter buffers and,
    for a launch with attributes (a cluster shape, a dependent launch), its driver launch
    configuration, built once.  A call sets only the stream: the host's time per launch is what
    back-to-back small kernels wait on."""

    def __init__(self, driver: Any, fn: Any, grid: tuple[int, int, int], threads: int, shared: int,
                 cluster: tuple[int, int, int], dependent: bool, keep: list[Any], ctx: int) -> None:
        self.driver, self.fn, self.grid, self.threads, self.shared, self.keep, self.ctx = (
            driver, fn, grid, threads, shared, keep, ctx)
        self.dependent = dependent
        self.pointers = (ctypes.c_void_p * max(len(keep), 1))(*[ctypes.addressof(v) for v in keep])
        self.address = ctypes.addressof(self.pointers)
        self.stream: int | None = None  # the stream of the last call, and its driver handle
        self.handle: Any = None
        attrs = []
        if any(c > 1 for c in cluster):
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
            attrs.append(attr)
        if dependent:
            # the kernel waits on the grid dependency before any global access (proved), so it
            # may start while the previous kernel of the stream finishes
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            attrs.append(attr)
        self.config = None
        if attrs:
            config = driver.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = grid
            config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
            config.sharedMemBytes = shared
            config.attrs = attrs
            config.numAttrs = len(attrs)
            self.config = config

    def __call__(self, stream: int) -> None:
        driver = self.driver
        if stream != self.stream:
            self.stream, self.handle = stream, driver.CUstream(stream)
            if self.config is not None:
                self.config.hStream = self.handle
        if self.config is not None:
            _check(driver.cuLaunchKernelEx(self.config, self.fn, self.address, 0), "cuLaunchKernelEx")
        else:
            _check(driver.cuLaunchKernel(self.fn, *self.grid, self.threads, 1, 1, self.shared, self.handle,
                                         self.address, 0), "cuLaunchKernel")


def _current_stream(torch: Any) -> int:
    """The raw handle of torch's current stream on the current device (torch's internal accessor
    where it has one: building a ``torch.cuda.Stream`` object per launch costs microseconds)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(torch.cuda.current_device()))
    return int(torch.cuda.current_stream().cuda_stream)


def _dependent_launches() -> bool:
    """Programmatic dependent launch is on unless ``ARGUS_DEPENDENT_LAUNCH=0`` (a kernel that waits
    on the grid dependency then runs fully serialized, as any other: for comparisons and triage)."""
    return os.environ.get("ARGUS_DEPENDENT_LAUNCH", "1") != "0"


_LAUNCH_CACHE = 8
"""Argument sets per compiled kernel whose checked parameter buffers are kept for reuse."""


def _launch_key(kernel: N.Kernel, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """What the launch checks and parameters depend on: each tensor's address, shape, strides
    and type, and the index values.  ``None`` (no reuse) when an assumption reads tensor
    contents (``ids_in_range``, ``monotone``) or an argument is not a plain tensor or number."""
    if any(a.kind in ("ids_in_range", "monotone") for a in kernel.assumptions):
        return None
    key: list[Any] = []
    for value in (*args, *(kwargs[k] for k in sorted(kwargs))):
        if hasattr(value, "data_ptr") and hasattr(value, "stride"):
            key.append((value.data_ptr(), value.shape, value.stride(), value.dtype, value.device))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            key.append(value)
        else:
            return None
    return (tuple(key), tuple(sorted(kwargs)))
