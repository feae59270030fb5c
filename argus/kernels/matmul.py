"""``matmul``: C = A·B (+ bias, + ReLU) on torch tensors through the proved Hopper GEMM.

The call a user makes where they would call ``torch.matmul``.  It

* reads each operand's layout from its strides and hands it over in place to the kernel variant
  of that layout (``a_major`` / ``b_major`` of :func:`argus.kernels.gemm.gemm_kernel`): a
  row-major A (M x K) and a B that is the transposed view of a row-major N x K are read K-major,
  a transposed view of a row-major K x M as A and a row-major B (K x N) MN-major;
* picks the specialization: ``config=`` if given, else the fastest candidate timed on the
  caller's device for this shape (``autotune=True``, remembered per variant, shape and device),
  else :func:`argus.kernels.gemm.tuned_config`;
* compiles it through the verification gate once per specialization (``argus.compile``: a
  proof record, or the verifier on this machine; an unproved specialization is refused, never
  run) and launches it on the current torch stream.  ``proofs/`` holds the records of every
  autotuner candidate of the plain bf16 GEMM (K-major, at 132 persistent blocks, and its 4096³
  picks at 128) and of both default picks of the fp16, fp32-C, bias + ReLU and transposed-layout
  variants; another combination (a bias without ReLU, say) goes to the verifier on its first
  call where z3 or cvc5 is installed (minutes; it runs only if proved) and is refused with a
  hint where neither is (``argus verify "argus.kernels.gemm:gemm_kernel('bf16', 'bf16', True)"
  --consts ... --rlimit 1000000000`` proves one with the GEMM's budgets, as in the README).

What the kernel cannot read in place is staged: an operand with neither its rows nor its columns
dense, a base address off 16 bytes, or a row pitch TMA cannot describe (a multiple of 16 bytes:
K, or M / N for an MN-major operand, a multiple of 8).  Then both operands are copied K-major
into zero-padded buffers (K and N rounded up to 8: zeros in K add nothing to C, padded rows of
B give columns of C that are dropped), and C, when N was padded, is computed into a padded
buffer and copied out.  :func:`plan_matmul` says what a call will do without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argus.kernels.gemm import (
    ACTIVATIONS,
    CANDIDATES,
    GemmConfig,
    GemmError,
    gemm_kernel,
    tuned_config,
)
from argus.runtime.launch import TORCH_DTYPES

__all__ = ["MatmulPlan", "autotune_candidates", "linear", "matmul", "plan_matmul"]

PROVED_SMS = 132
"""The persistent grid every autotuner candidate's proof record is for (an H100/H200's SM count)."""

_DTYPE_NAMES = {f"torch.{TORCH_DTYPES[name]}": name for name in ("bf16", "f16", "f32")}
"""The operand and result types the GEMM takes, by the name of their torch dtype."""


@dataclass(frozen=True)
class MatmulPlan:
    """What :func:`matmul` runs for one call: the kernel variant and the extents it sees."""

    in_dtype: str
    out_dtype: str
    bias: bool
    activation: str | None
    a_major: str  # "k": A read as M x K; "m": as K x M (a transposed view, in place)
    b_major: str  # "k": B read as N x K (a transposed view of K x N); "n": as K x N, in place
    m: int
    n: int
    k: int
    staged: bool  # both operands copied K-major into zero-padded buffers
    k_kernel: int  # K as the kernel sees it (rounded up to 8 when staged)
    n_kernel: int  # N of the kernel's C (rounded up to 8 when staged)

    def kernel(self) -> Any:
        return gemm_kernel(self.in_dtype, self.out_dtype, self.bias, self.activation, self.a_major, self.b_major)


def _name(dtype: Any, what: str) -> str:
    name = _DTYPE_NAMES.get(str(dtype))
    if name is None:
        raise GemmError(f"matmul: {what} has dtype {dtype}", hint="use torch.bfloat16 or torch.float16 operands")
    return name


def _dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major with no gaps (a size-1 dimension's stride does not matter)."""
    expect = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size > 1 and stride != expect:
            return False
        expect *= size
    return True


def _layout(t: Any, in_place: str, transposed: str) -> str | None:
    """``in_place`` when ``t`` is dense row-major, ``transposed`` when its transpose is, else None."""
    shape, strides = tuple(t.shape), tuple(t.stride())
    if _dense(shape, strides):
        return in_place
    if _dense(shape[::-1], strides[::-1]):
        return transposed
    return None


def _pitch_ok(a_major: str, b_major: str, m: int, n: int, k: int) -> bool:
    """The kernel's declared assumptions (``gemm._assumptions``): 16-byte row pitches of A, B, C."""
    if a_major == "k":
        return k % 8 == 0 and n % 8 == 0
    if b_major == "k":
        return m % 8 == 0 and k % 8 == 0 and n % 8 == 0
    return m % 8 == 0 and n % 8 == 0


def plan_matmul(a: Any, b: Any, bias: Any = None, activation: str | None = None, out_dtype: str | None = None,
                out: Any = None) -> MatmulPlan:
    """The plan of ``matmul(a, b, bias=..., activation=..., out_dtype=..., out=...)``; raises
    :class:`GemmError` (with a hint) for arguments it does not take.  Reads only shapes,
    strides, dtypes and addresses: no GPU needed."""
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise GemmError(f"matmul: A and B must be 2-D (got {len(a.shape)}-D and {len(b.shape)}-D)",
                        hint="batch the calls, or reshape the leading dimensions into M")
    (m, k), (k_b, n) = tuple(a.shape), tuple(b.shape)
    if k != k_b:
        raise GemmError(f"matmul: A is {m} x {k} and B is {k_b} x {n}: the inner dimensions differ")
    in_dtype = _name(a.dtype, "A")
    if in_dtype == "f32" or _name(b.dtype, "B") != in_dtype:
        raise GemmError(f"matmul: A is {a.dtype} and B is {b.dtype}",
                        hint="both operands torch.bfloat16, or both torch.float16 (fp32 accumulation)")
    if activation not in ACTIVATIONS:
        raise GemmError(f"matmul: activation {activation!r} is not supported", hint=f"use one of {ACTIVATIONS}")
    if out is not None:
        named = _DTYPE_NAMES.get(str(out.dtype))
        if named is None or (out_dtype is not None and out_dtype != named):
            raise GemmError(f"matmul: out has dtype {out.dtype}, the result is {out_dtype or in_dtype}")
        out_dtype = named
        if tuple(out.shape) != (m, n) or not _dense((m, n), tuple(out.stride())):
            raise GemmError(f"matmul: out must be a dense row-major {m} x {n} tensor (got shape "
                            f"{tuple(out.shape)}, strides {tuple(out.stride())})", hint="pass out=None for a new one")
    out_dtype = out_dtype or in_dtype
    if out_dtype not in _DTYPE_NAMES.values():
        raise GemmError(f"matmul: out_dtype {out_dtype!r} is not supported", hint="use 'bf16', 'f16' or 'f32'")
    if bias is not None and (len(bias.shape) != 1 or bias.shape[0] != n):
        raise GemmError(f"matmul: bias must be a vector of N = {n} values (got shape {tuple(bias.shape)})")
    a_major = _layout(a, "k", "m")
    b_major = _layout(b, "n", "k")
    aligned = all(t.data_ptr() % 16 == 0 for t in (a, b))
    if a_major and b_major and aligned and k >= 1 and _pitch_ok(a_major, b_major, m, n, k):
        return MatmulPlan(in_dtype, out_dtype, bias is not None, activation, a_major, b_major, m, n, k,
                          False, k, n)
    return MatmulPlan(in_dtype, out_dtype, bias is not None, activation, "k", "k", m, n, k, True,
                      max(-(-k // 8) * 8, 8), -(-n // 8) * 8)


def autotune_candidates(plan: MatmulPlan) -> list[tuple[GemmConfig, int]]:
    """``(config, SMS)`` pairs ``autotune=True`` times for ``plan``: each autotuner candidate at
    the proved grid and at 128 persistent blocks, where the variant admits it and a proof record
    lets it through the gate without the verifier."""
    from argus.runtime import VerificationRequired, require_proof

    kernel = plan.kernel()
    picks = []
    for config in CANDIDATES:
        for sms in (PROVED_SMS, 128):
            try:
                require_proof(kernel.specialize(**{**config.consts(), "SMS": sms}), verify=False)
            except (GemmError, VerificationRequired):
                continue
            picks.append((config, sms))
    return picks


_COMPILED: dict[tuple[Any, ...], Any] = {}
_PICKED: dict[tuple[Any, ...], tuple[GemmConfig, int]] = {}


def _compiled(plan: MatmulPlan, config: GemmConfig, sms: int) -> Any:
    from argus.runtime import compile

    kernel = plan.kernel()
    consts = {**config.consts(), "SMS": sms}
    key = (kernel.name, tuple(sorted(consts.items())))
    if key not in _COMPILED:
        _COMPILED[key] = compile(kernel, **consts)
    return _COMPILED[key]


def _stage(t: Any, rows: int, cols: int) -> Any:
    """``t`` (rows' x cols', dense or not) copied into a zero-filled dense ``rows`` x ``cols`` buffer."""
    buf = t.new_zeros((rows, cols))
    buf[: t.shape[0], : t.shape[1]] = t
    return buf


def _autotuned(plan: MatmulPlan, args: tuple[Any, ...]) -> tuple[GemmConfig, int]:
    import torch

    from argus.runtime.timing import benchmark

    key = (plan.kernel().name, plan.m, plan.n, plan.k, torch.cuda.get_device_name())
    if key not in _PICKED:
        candidates = {f"{i}": (config, sms) for i, (config, sms) in enumerate(autotune_candidates(plan))}
        if not candidates:
            _PICKED[key] = (tuned_config(plan.m, plan.n, plan.k), PROVED_SMS)
        else:
            built = {name: _compiled(plan, *pick) for name, pick in candidates.items()}
            runs = {name: (lambda c=c: c(*args)) for name, c in built.items()}
            timings = benchmark(runs, lambda i: (), rotations=1, warmup=2, repeat=10)
            _PICKED[key] = candidates[min(timings, key=lambda name: timings[name].median)]
    return _PICKED[key]


def matmul(a: Any, b: Any, *, bias: Any = None, activation: str | None = None, out_dtype: str | None = None,
           out: Any = None, config: GemmConfig | None = None, sms: int | None = None,
           autotune: bool = False) -> Any:
    """``activation(a @ b + bias)`` with fp32 accumulation, as ``out_dtype`` (default: the
    operands' type; ``out=`` to write into a dense M x N tensor).  ``a``: M x K and ``b``: K x N
    CUDA tensors, both bf16 or both fp16; ``bias``: N values (any float type, added in fp32);
    ``activation``: None or ``"relu"``.  ``config`` / ``sms`` fix the specialization (the gate
    still decides whether it runs); ``autotune=True`` times the proved candidates on first use of
    a shape.  See the module docstring for layouts and staging."""
    import torch

    plan = plan_matmul(a, b, bias, activation, out_dtype, out)
    for name, t in (("A", a), ("B", b), ("bias", bias), ("out", out)):
        if t is not None and not t.is_cuda:
            raise GemmError(f"matmul: {name} is a {t.device} tensor", hint="the kernel runs on CUDA tensors")
    m, n = plan.m, plan.n
    tout = getattr(torch, TORCH_DTYPES[plan.out_dtype])
    if out is None:
        out = torch.empty((m, n), dtype=tout, device=a.device)
    if m == 0 or n == 0:
        return out
    if plan.k == 0:  # an empty sum: the epilogue alone
        zero = torch.zeros((m, n), dtype=torch.float32, device=a.device)
        value = zero + bias.float() if bias is not None else zero
        out.copy_(torch.relu(value) if activation == "relu" else value)
        return out
    if plan.staged:
        a_arg = _stage(a, m, plan.k_kernel)
        b_arg = _stage(b.t(), plan.n_kernel, plan.k_kernel)
    else:
        a_arg = a if plan.a_major == "k" else a.t()
        b_arg = b.t() if plan.b_major == "k" else b
    c = out  # a C the kernel cannot store into in place: computed aside and copied out
    if plan.n_kernel != n or out.data_ptr() % 16:
        c = torch.empty((m, plan.n_kernel), dtype=tout, device=a.device)
    args: tuple[Any, ...] = (a_arg, b_arg, c)
    if bias is not None:
        vector = bias.to(torch.float32).contiguous()
        if plan.n_kernel != n or vector.data_ptr() % 16:
            vector = _stage(vector.view(1, n), 1, plan.n_kernel).view(plan.n_kernel)
        args += (vector,)
    if config is None and autotune:
        config, picked_sms = _autotuned(plan, args)
        sms = sms or picked_sms
    config = config or tuned_config(m, n, plan.k)
    _compiled(plan, config, sms or PROVED_SMS)(*args)
    if c is not out:
        out.copy_(c[:, :n])
    return out


def linear(x: Any, weight: Any, bias: Any = None, *, activation: str | None = None, out_dtype: str | None = None,
           autotune: bool = False) -> Any:
    """``torch.nn.functional.linear(x, weight, bias)`` (and ReLU) through :func:`matmul`: ``x`` of
    shape ``(..., K)``, ``weight`` ``N x K`` (a layer's weight as stored: read K-major in place),
    the result ``(..., N)``.  The leading dimensions of ``x`` are one M (a view where ``x`` is
    dense, a copy otherwise)."""
    if len(weight.shape) != 2:
        raise GemmError(f"linear: the weight must be N x K (got shape {tuple(weight.shape)})")
    if len(x.shape) == 0 or x.shape[-1] != weight.shape[1]:
        raise GemmError(f"linear: x has shape {tuple(x.shape)}, the weight {tuple(weight.shape)}: "
                        "the last dimension of x must be K = weight.shape[1]")
    rows = x.reshape(-1, x.shape[-1])
    y = matmul(rows, weight.t(), bias=bias, activation=activation, out_dtype=out_dtype, autotune=autotune)
    return y.view(*x.shape[:-1], weight.shape[0])
