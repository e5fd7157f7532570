"""gpu_check rows for the training-step suite: GPT-2 124M steps per second and MFU in four precisions, compile off
and on, and the measured AdamW bytes per parameter.

`gpt2_grid` reads the JSON of gpu_check's `train_step` step (the full profile's GPT-2 124M baseline and precision
cases, eager, and bf16 compiled), and of `train_step_compiled` (the other precisions compiled) when that step ran,
and gives one row per precision and compile setting found in them.
"""

from __future__ import annotations

import json
from pathlib import Path

from suites.checks.gpu_check import Row
from suites.training.recipe import PRECISIONS

MODEL = "gpt2-124m"
BYTES_PER_PARAM_RANGE = (14.0, 20.0)


def _entries(out: Path) -> list[dict]:
    """The measured and not-measured entries of every train_step JSON in `out`."""
    found = []
    for path in sorted(out.glob("train_step*.json")):
        data = json.loads(path.read_text())
        found += data["benchmarks"] + data.get("not_measured", [])
    return found


def _grid_entry(entries: list[dict], precision: str, compiled: bool) -> dict | None:
    for e in entries:
        p = e["params"]
        setting = (p.get("model"), p.get("precision"), p.get("compile"))
        if setting == (MODEL, precision, "on" if compiled else "off") and p.get("lever") in ("baseline", "precision"):
            return e
    return None


def describe(entry: dict) -> tuple[str, bool]:
    """The value and verdict of one grid row: steps/s, tokens/s, MFU (formula and counted), compile seconds."""
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
    """One row per precision x compile of GPT-2 124M that the check ran, then the bf16 baseline's bytes/param."""
    entries = _entries(out)
    if not entries:
        return [Row("train_step GPT-2 124M", "no train_step JSON written", "run left out or failed", "", None)]
    rows = []
    for precision in PRECISIONS:
        for compiled in (False, True):
            entry = _grid_entry(entries, precision, compiled)
            if entry is None:
                continue
            value, ok = describe(entry)
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


def steps_and_hosts(out: Path) -> list[Row]:
    """Every measured step of the run: wall time per step, the device's busy share and whether it was host-bound.

    Reads whichever train_step JSON the step wrote (`train_step.json` or `train_step_compiled.json`)."""
    rows = []
    for path in sorted(out.glob("train_step*.json")):
        for entry in json.loads(path.read_text())["benchmarks"]:
            info = entry["extra_info"]
            if "step_wall_s" not in info:
                continue
            busy = info.get("device_busy_share")
            value = (f"{info['step_wall_s'] * 1e3:.1f} ms/step, enqueue {info.get('enqueue_s', 0) * 1e3:.1f} ms"
                     + (f", device busy {busy:.0%}" if busy is not None else "")
                     + (", host-bound" if info.get("host_bound") else "")
                     + (f", compile {info['compile_s']:.0f} s" if "compile_s" in info else ""))
            rows.append(Row("train_step wall vs busy", info["case"], value, "", None))
    return rows or [Row("train_step wall vs busy", "no train_step JSON with steps", "", "", False)]
