"""The float32 math mode a case runs in: IEEE float32 or TF32 on the tensor cores.

PyTorch's defaults differ between matmul (IEEE unless asked) and cuDNN convolutions (TF32 allowed), so every
case states its mode and this context sets both and restores what was there: a case can never inherit the
previous case's mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def float32_mode(tf32: bool | None) -> Iterator[None]:
    """TF32 for float32 matmuls and convolutions when `tf32`, IEEE float32 when False; None leaves the modes as the
    caller set them (a user's own function timed by the `device_bench` fixture runs as the user's code does)."""
    if tf32 is None:
        yield
        return
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]


def tf32_unsupported(device: torch.device) -> str | None:
    """None where TF32 runs (NVIDIA tensor cores, compute capability 8.0+), else why a tf32 case cannot."""
    if device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 0):
        return "tf32 is a tensor-core mode of NVIDIA GPUs of compute capability 8.0 or newer"
    return None


# The `dtype` axis names (stable: docs/results.md), and the storage dtype each runs in (tf32 stores float32).
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
}

# Relative error (Frobenius norm, against float64 on the same inputs) that a correct kernel stays under.
# float32 ~ sqrt(K) x 2^-24 in practice far less; tf32 has a 10-bit mantissa; 16-bit outputs round at
# 2^-11 (float16) and 2^-8 (bfloat16); float8 products are accumulated at reduced precision on Hopper.
TOLERANCE: dict[str, float] = {
    "float32": 1e-5,
    "tf32": 2e-3,
    "float16": 2e-3,
    "bfloat16": 1e-2,
    "float8_e4m3fn": 3e-2,
}


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN or inf in `out` yields inf, which fails every tolerance."""
    diff = out.double() - ref
    err = float(torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref))
    return err if err == err else float("inf")
