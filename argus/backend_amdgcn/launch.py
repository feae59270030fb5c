"""Loading and launching gfx942 code objects with hip-python (import-guarded).

:class:`Gfx942Kernel` holds a proved, emitted and assembled specialization.  Calling it
checks the arguments exactly as the NVIDIA runtime does (:func:`argus.runtime.launch.
bind_arguments`: dtypes, shapes, strides, alignment, sizes, declared assumptions, no
overlap), packs the kernel arguments in the order of the descriptor
(:func:`argus.backend_amdgcn.descriptor.kernel_arguments`), loads the module once per
process and launches it with ``hipModuleLaunchKernel`` on the current torch stream.
Without hip-python or ROCm the call raises :class:`LaunchError` saying what is missing;
the rest of the backend (emission, assembly, checks) needs neither.

This path has not run on an MI300X in argus's CI (no AMD GPU there): see ``docs/amdgcn.md``.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from argus import symbolic
from argus.errors import ArgusError
from argus.ir import nodes as N
from argus.toolchain import INSTALL_HIP

__all__ = ["Gfx942Kernel", "LaunchError", "pack_arguments"]


class LaunchError(ArgusError):
    """A gfx942 launch cannot happen here (no hip-python/ROCm) or the driver refused it."""


def _hip() -> Any:
    try:
        from hip import hip
    except ImportError as err:
        raise LaunchError(f"launching gfx942 kernels needs hip-python and a ROCm installation ({err})",
                          hint=f"install it: {INSTALL_HIP}; compiling and checking work without it") from None
    return hip


def _check(result: Any, what: str) -> Any:
    status, *rest = result if isinstance(result, tuple) else (result,)
    code = int(getattr(status, "value", status))
    if code != 0:
        raise LaunchError(f"{what} failed: {status}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def pack_arguments(arguments: tuple, bound: Any) -> list[Any]:
    """ctypes values of the kernel arguments, in descriptor order."""
    out: list[Any] = []
    for arg in arguments:
        if arg.kind == "pointer":
            out.append(ctypes.c_void_p(bound.tensors[arg.name].data_ptr()))
        elif arg.kind == "i32":
            out.append(ctypes.c_int32(bound.sizes[arg.symbol]))
        else:
            out.append(ctypes.c_float(bound.scalars[arg.name]))
    return out


_modules: dict[int, Any] = {}
_lock = threading.Lock()


@dataclass
class Gfx942Kernel:
    """A proved gfx942 kernel: ``kernel`` (IR after policies), the ``proof`` record that passed
    the gate, the ``emitted`` assembly and the linked ``hsaco``."""

    kernel: N.Kernel
    proof: Any
    emitted: Any
    hsaco: bytes

    @property
    def name(self) -> str:
        return self.emitted.name

    def grid(self, sizes: dict) -> tuple[int, int, int]:
        dims = [int(symbolic.evaluate(g, sizes)) for g in self.kernel.launch.grid]
        dims += [1] * (3 - len(dims))
        return (dims[0], dims[1], dims[2])

    def _function(self, hip: Any) -> Any:
        key = id(self)
        with _lock:
            if key not in _modules:
                module = _check(hip.hipModuleLoadData(self.hsaco), "hipModuleLoadData")
                _modules[key] = _check(hip.hipModuleGetFunction(module, self.name.encode()), "hipModuleGetFunction")
            return _modules[key]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Check the arguments and launch on the current torch stream (asynchronously)."""
        from argus.runtime.launch import bind_arguments

        hip = _hip()
        bound = bind_arguments(self.kernel, args, kwargs, require_cuda=True)
        grid = self.grid(bound.sizes)
        if 0 in grid:
            return
        import torch

        stream = torch.cuda.current_stream().cuda_stream
        function = self._function(hip)
        values = tuple(pack_arguments(self.emitted.final.resources.arguments, bound))
        _check(hip.hipModuleLaunchKernel(function, *grid, self.kernel.launch.threads, 1, 1, 0, stream, None,
                                         extra=values), "hipModuleLaunchKernel")
