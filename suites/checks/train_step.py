"""gpu_check rows for the training-step suite: GPT-2 124M steps per second and MFU in four precisions, compile off
and on, and the measured AdamW bytes per parameter.

`gpt2_grid` reads `train_step.json`, written by gpu_check's pytest run `train_step` (the full profile's GPT-2 124M
baseline and precision cases), and gives one row per precision and compile setting.
"""

from __future__ import annotations

import json
from pathlib import Path

from suites.checks.gpu_check import Row
from suites.training.train_step import PRECISIONS

MODEL = "gpt2-124m"
BYTES_PER_PARAM_RANGE = (14.0, 20.0)


def _entries(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return data["benchmarks"] + data.get("not_measured", [])


def _grid_entry(entries: list[dict], precision: str, compiled: bool) -> dict | None:
    for e in entries:
        p = e["params"]
        setting = (p.get("model"), p.get("precision"), p.get("compile"))
        if setting == (MODEL, precision, "on" if compiled else "off") and p.get("lever") in ("baseline", "precision"):
            return e
    return None


def describe(entry: dict | None) -> tuple[str, bool]:
    """The value and verdict of one grid row: steps/s, tokens/s, MFU (formula and counted), compile seconds."""
    if entry is None:
        return "case missing from train_step.json", False
    info = entry["extra_info"]
    if info.get("status") != "ok":
        return f"{info.get('status')}: {info.get('reason')}", False
    steps = 1 / entry["stats"]["median"]
    mfu = info.get("mfu")
    if mfu is None:
        return f"{steps:.2f} steps/s; no peak FLOP/s known, so no MFU", False
    text = (f"{steps:.2f} steps/s, {info['tokens_per_s'] / 1e3:.0f}k tokens/s, MFU {100 * mfu:.1f} % "
            f"(counted {100 * info.get('mfu_counted', float('nan')):.1f} %), "
            f"loss after {info['n_steps']} steps {info['loss_after_n']:.3f}")
    if "compile_s" in info:
        text += f", compile {info['compile_s']:.0f} s, {info.get('recompiles', 0)} recompiles"
    return text, 0 < mfu < 1


def gpt2_grid(out: Path) -> list[Row]:
    """One row per precision x compile for GPT-2 124M, then the measured bytes/param of the bf16 baseline."""
    path = out / "train_step.json"
    if not path.exists():
        return [Row("train_step GPT-2 124M", "train_step.json not written", "run left out or failed", "", None)]
    entries = _entries(path)
    rows = []
    for precision in PRECISIONS:
        for compiled in (False, True):
            value, ok = describe(_grid_entry(entries, precision, compiled))
            rows.append(Row("train_step GPT-2 124M", f"{precision} compile {'on' if compiled else 'off'}", value,
                            "0 < MFU < 1", ok))
    base = _grid_entry(entries, "amp_bf16", False)
    if base is not None and "bytes_per_param" in base["extra_info"]:
        info = base["extra_info"]
        parts = ", ".join(f"{k} {info[f'bytes_per_param_{k}']:.2f}" for k in ("weights", "grads", "master", "moments"))
        low, high = BYTES_PER_PARAM_RANGE
        rows.append(Row("train_step memory", "AdamW amp_bf16 bytes/param", f"{info['bytes_per_param']:.2f} ({parts}); "
                        f"step peak {info.get('step_peak_alloc_bytes', 0) / 2**30:.1f} GiB",
                        "16-18 rule, 14-20", low <= info["bytes_per_param"] <= high))
    return rows
