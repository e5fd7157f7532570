"""gpu_check rows for the conv suite: what channels-last and bfloat16 buy the 3x3 layers.

Reads `conv.json` (gpu_check's `conv` step: on CUDA the 3x3 layers at 56x56, forward and backward, bfloat16 in
both memory formats and float32 NCHW: ResNet-50's 64 channels, VGG-16's 256, and 63, 65, 72 channels) through
reports.format.load. One row per layer: the speed-up of channels-last over NCHW in bfloat16, and of bfloat16
channels-last over float32 NCHW (the default a user starts from). Figures to read, not pass or fail: what a
layout buys depends on the cuDNN version; a case not measured is named with its reason.
"""

from __future__ import annotations

from pathlib import Path

from suites.gpu_check.rows import Row, number, read_step, sourced, status_text

# The three settings a row compares: (dtype, memory_format), forward and backward.
NCHW_BF16, NHWC_BF16, NCHW_FP32 = ("bfloat16", "contiguous"), ("bfloat16", "channels_last"), ("float32", "contiguous")
SETTINGS = (NCHW_BF16, NHWC_BF16, NCHW_FP32)


def by_shape(entries: list[dict]) -> dict[str, dict[tuple[str, str], dict]]:
    """The fwd_bwd entries of each layer shape by (dtype, memory_format)."""
    found: dict[str, dict[tuple[str, str], dict]] = {}
    for entry in entries:
        setting = (entry.get("dtype"), entry.get("memory_format"))
        if entry.get("pass") == "fwd_bwd" and setting in SETTINGS:
            found.setdefault(str(entry.get("shape")), {})[setting] = entry
    return found


def format_gaps(cases: list[dict]) -> list[str]:
    """Layer shapes of a selection that lack one of the three settings, or no shape at all."""
    found = by_shape(cases)
    gaps = [f"{shape}: no {' '.join(setting)} fwd_bwd case" for shape, settings in found.items()
            for setting in SETTINGS if setting not in settings]
    return gaps if found else ["no fwd_bwd case in bfloat16 or float32"]


def speedups(settings: dict[tuple[str, str], dict]) -> str:
    """`channels_last` over `contiguous` in bfloat16, and bfloat16 channels-last over float32 NCHW, for one shape."""
    medians = {s: number(e, "median_s") if e.get("status") == "ok" else None for s, e in settings.items()}
    nchw, nhwc, fp32 = (medians.get(s) for s in SETTINGS)
    parts = []
    if nchw and nhwc:
        parts.append(f"bf16 channels_last {nchw / nhwc:.2f}x NCHW ({nhwc * 1e3:.3g} vs {nchw * 1e3:.3g} ms)")
    if fp32 and nhwc:
        parts.append(f"{fp32 / nhwc:.2f}x float32 NCHW")
    parts += [f"{' '.join(s)} {status_text(settings[s])}" for s in SETTINGS if s in settings and not medians[s]]
    parts += [f"{' '.join(s)} missing" for s in SETTINGS if s not in settings]
    return "; ".join(parts)


def formats_and_dtypes(out: Path, step: str) -> list[Row]:
    run = read_step(out, step)
    rows = [Row("conv fwd_bwd", shape, speedups(settings), "", None)
            for shape, settings in sorted(by_shape(run.cases).items())]
    return sourced(run, rows or [Row("conv fwd_bwd", "cases", "no fwd_bwd case recorded", "some", False)])
