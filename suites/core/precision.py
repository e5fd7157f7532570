"""The float32 math mode a case runs in: IEEE float32 or TF32 on the tensor cores.

PyTorch's defaults differ between matmul (IEEE unless asked) and cuDNN convolutions (TF32 allowed), so every
case states its mode and this context sets both and restores what was there: a case can never inherit the
previous case's mode.

Two APIs hold the mode. The legacy one (`torch.set_float32_matmul_precision`, `torch.backends.cudnn.allow_tf32`)
is all torch 2.6-2.8 has. torch 2.9 added per-backend `fp32_precision` attributes (`torch.backends.cuda.matmul`,
`torch.backends.cudnn.conv`, ...), which are what the kernels read there; its legacy getters then raise "mix of
the legacy and new APIs" whenever the two disagree, e.g. after a user's conftest set
`torch.backends.cuda.matmul.fp32_precision = "tf32"`. So where torch has the new attributes (asked with hasattr,
never by version) the state is saved from them, the mode is set through the legacy setters (which keep both APIs
in agreement, so that code still reading the legacy getters inside the case, as Inductor's autotuning cache does,
gets an answer) and then stated again in the new API's terms (a `none` there would inherit a global
`torch.backends.fp32_precision`), and on exit the new attributes are restored exactly, after the legacy values
they had beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

# The new API's `fp32_precision` attributes (torch 2.9+) that the legacy setters below write, under torch.backends.
NEW_API_SITES = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul")
# The legacy values torch starts with, restored where the user's state was one the legacy getters refuse: a
# new-API setting beside the untouched legacy defaults is how that state arises.
LEGACY_MATMUL_DEFAULT, LEGACY_CUDNN_DEFAULT = "highest", True


def _backend(path: str) -> object:
    module: object = torch.backends
    for part in path.split("."):
        module = getattr(module, part)
    return module


def has_new_api() -> bool:
    """Whether this torch has the per-backend `fp32_precision` attributes (torch 2.9+), asked of torch itself."""
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def _legacy_or_none(read: Callable[[], object]) -> object | None:
    """A legacy getter's answer, or None where torch refuses it (the two APIs disagree)."""
    try:
        return read()
    except RuntimeError:
        return None


@dataclass(frozen=True)
class Float32State:
    """The float32 math settings as the user had them: the legacy values (None: torch refused to give them) and,
    where torch has it, every new-API attribute the mode touches."""

    matmul: str | None
    cudnn_tf32: bool | None
    new_api: dict[str, str]

    @classmethod
    def read(cls) -> Float32State:
        new = {path: _backend(path).fp32_precision for path in NEW_API_SITES} if has_new_api() else {}
        return cls(_legacy_or_none(torch.get_float32_matmul_precision),
                   _legacy_or_none(lambda: torch.backends.cudnn.allow_tf32), new)

    def restore(self) -> None:
        """Legacy values first (their setters also write the new attributes), then the new attributes exactly."""
        torch.set_float32_matmul_precision(self.matmul or LEGACY_MATMUL_DEFAULT)
        torch.backends.cudnn.allow_tf32 = LEGACY_CUDNN_DEFAULT if self.cudnn_tf32 is None else self.cudnn_tf32
        for path, value in self.new_api.items():
            _backend(path).fp32_precision = value


def _apply(tf32: bool) -> None:
    """TF32 or IEEE for float32 matmuls and cuDNN convolutions, in both APIs where torch has both."""
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    if has_new_api():
        mode = "tf32" if tf32 else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode


@contextmanager
def float32_mode(tf32: bool | None) -> Iterator[None]:
    """TF32 for float32 matmuls and convolutions when `tf32`, IEEE float32 when False; None leaves the modes as the
    caller set them (a user's own function timed by the `device_bench` fixture runs as the user's code does)."""
    if tf32 is None:
        yield
        return
    saved = Float32State.read()
    _apply(tf32)
    try:
        yield
    finally:
        saved.restore()


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
