"""The one gemm that every matmul measurement runs: C = A @ B in a `dtype` of docs/results.md, on random inputs.

The matmul suite times it per shape and the achievable-peak search times it over a grid of shapes; both must
run the same kernel path, so it lives here once. float8 is torch._scaled_mm with per-tensor scales (A row-major,
B column-major, bfloat16 out: what cuBLASLt's float8 kernels take); tf32 is float32 storage, and the caller
sets the math mode (suites.core.precision.float32_mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from suites.core.cases import Unsupported
from suites.core.precision import DTYPES, tf32_unsupported

# float8 accumulates at full precision (`use_fast_accum=False`, what a training step's gradients want); cuBLASLt's
# fast accumulation, common in inference and forward passes, is faster at some accuracy. The cases record which
# (`fast_accum`), so the figure is never read as the fastest float8 this GPU does.
FP8_FAST_ACCUM = False


@dataclass
class Gemm:
    """`fn` computes A @ B in the dtype; `reference` computes the same product in float64 from the same inputs."""

    fn: Callable[[], torch.Tensor]
    reference: Callable[[], torch.Tensor]


def fp8_support(device: torch.device) -> str | None:
    """None when torch._scaled_mm can run float8 here, else why not."""
    if device.type != "cuda":
        return "float8_e4m3fn matmul needs a CUDA GPU of compute capability 8.9 or newer (torch._scaled_mm)"
    cap = torch.cuda.get_device_capability(device)
    if cap < (8, 9):
        return f"float8_e4m3fn needs compute capability 8.9 or newer; this GPU is {cap[0]}.{cap[1]}"
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm"
    return None


def support(dtype: str, device: torch.device) -> str | None:
    """None when the gemm runs in this dtype on this device, else why not."""
    if dtype == "tf32":
        return tf32_unsupported(device)
    if dtype == "float8_e4m3fn":
        return fp8_support(device)
    return None


def _random(rows: int, cols: int, device: torch.device, generator: torch.Generator | None) -> torch.Tensor:
    """Standard-normal float32 values: made on the CPU with a fixed seed, so every device sees the same inputs,
    or (no generator) made on the device itself, which is much faster for the large shapes of a peak search."""
    if generator is None:
        return torch.randn(rows, cols, device=device)
    return torch.randn(rows, cols, generator=generator).to(device)


def _generator(seeded: bool) -> torch.Generator | None:
    return torch.Generator().manual_seed(0) if seeded else None


def _dense(m: int, n: int, k: int, dtype: str, device: torch.device, seeded: bool) -> Gemm:
    gen = _generator(seeded)
    a = _random(m, k, device, gen).to(DTYPES[dtype])
    b = _random(k, n, device, gen).to(DTYPES[dtype])
    return Gemm(fn=lambda: a @ b, reference=lambda: a.double() @ b.double())


def _fp8(m: int, n: int, k: int, device: torch.device, seeded: bool) -> Gemm:
    gen = _generator(seeded)
    a32, b32 = _random(m, k, device, gen), _random(k, n, device, gen)
    fmax = torch.finfo(torch.float8_e4m3fn).max
    scale_a, scale_b = a32.abs().max() / fmax, b32.abs().max() / fmax
    a = (a32 / scale_a).to(torch.float8_e4m3fn)
    # column-major B; clone(contiguous_format) is contiguous()'s copy, in a form FakeTensorMode runs on a CPU build
    # with fake CUDA tensors (where CI checks this call against torch's own _scaled_mm rules)
    b = (b32 / scale_b).to(torch.float8_e4m3fn).t().clone(memory_format=torch.contiguous_format).t()
    del a32, b32

    def run() -> torch.Tensor:
        out = torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                               use_fast_accum=FP8_FAST_ACCUM)
        return out[0] if isinstance(out, tuple) else out  # torch < 2.5 returned (out, amax)

    try:
        run()
    except torch.OutOfMemoryError:
        raise
    except RuntimeError as exc:  # e.g. dimensions not multiples of 16
        raise Unsupported(f"torch._scaled_mm rejects {m}x{n}x{k}: {str(exc).splitlines()[0]}") from exc
    return Gemm(fn=run, reference=lambda: (a.double() * scale_a.double()) @ (b.double() * scale_b.double()))


def build(m: int, n: int, k: int, dtype: str, device: torch.device, seeded: bool = True) -> Gemm:
    """An MxK by KxN gemm in `dtype` on `device`; Unsupported (with the reason) where it cannot run.

    `seeded`: the same inputs on every device (the suite's cases); False draws them on the device (the search).
    """
    reason = support(dtype, device)
    if reason:
        raise Unsupported(reason)
    if dtype == "float8_e4m3fn":
        return _fp8(m, n, k, device, seeded)
    return _dense(m, n, k, dtype, device, seeded)
