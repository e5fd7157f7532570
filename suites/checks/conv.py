"""gpu_check rows for the conv suite: what channels-last and bfloat16 buy the 3x3 layers at 56x56.

Reads `conv.json`, written by gpu_check's pytest run `conv` (3x3 layers at 56x56, forward and backward, float32 and
bfloat16, both memory formats: ResNet-50's 64 channels, VGG-16's 256, and 63, 65, 72 channels). One row per layer:
the speed-up of channels-last over NCHW in bfloat16, and of bfloat16 channels-last over float32 NCHW (the default
a user starts from). Figures to read, not pass or fail: what a layout buys depends on the cuDNN version.
"""

from __future__ import annotations

import json
from pathlib import Path

from suites.checks.gpu_check import Row


def _medians(path: Path) -> dict[tuple[str, str, str], float]:
    """(shape, dtype, memory_format) -> median seconds of the measured fwd_bwd cases."""
    runs = json.loads(path.read_text())["benchmarks"]
    return {(b["params"]["shape"], b["params"]["dtype"], b["params"]["memory_format"]): b["stats"]["median"]
            for b in runs if b["group"] == "conv" and b["params"]["pass"] == "fwd_bwd"}


def speedups(medians: dict[tuple[str, str, str], float], shape: str) -> str:
    """`channels_last` over `contiguous` in bfloat16, and bfloat16 channels-last over float32 NCHW, for one shape."""
    def get(dtype: str, fmt: str) -> float | None:
        return medians.get((shape, dtype, fmt))

    nchw, nhwc, fp32 = get("bfloat16", "contiguous"), get("bfloat16", "channels_last"), get("float32", "contiguous")
    parts = []
    if nchw and nhwc:
        parts.append(f"bf16 channels_last {nchw / nhwc:.2f}x NCHW ({nhwc * 1e3:.3g} vs {nchw * 1e3:.3g} ms)")
    if fp32 and nhwc:
        parts.append(f"{fp32 / nhwc:.2f}x float32 NCHW")
    return "; ".join(parts) or "cases missing"


def formats_and_dtypes(out: Path) -> list[Row]:
    path = out / "conv.json"
    if not path.exists():
        return [Row("conv formats", "conv.json not written", "run left out or failed", "", None)]
    medians = _medians(path)
    return [Row("conv fwd_bwd", shape, speedups(medians, shape), "", None)
            for shape in sorted({shape for shape, _, _ in medians})]
