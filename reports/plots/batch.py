"""Batch-size scaling plots: throughput and peak memory against batch size, one line per precision.

Reads the `train_step` rows of the batch sweep (`lever` = `batch`): throughput is tokens/s where the model has
tokens (the GPT), else samples/s; peak memory is `step_peak_bytes`. The largest batch each precision's search
found (`lever` = `max_batch`, checkpointing off) and the memory budget (CPU runs) are marked on the memory panel
where the results hold them. One PNG per model and device. A throughput taken under conditions that can have
moved it (reports/marks.py) is a hollow point; peak memory is a count, which they do not move.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from reports import marks
from reports.format.outputs import save_figure
from reports.plots.style import hollow_entry, hollow_points, text, title

GROUP = "train_step"


def _sweep(frame: pd.DataFrame) -> pd.DataFrame:
    needed = {"group", "lever", "batch", "precision", "model", "step_peak_bytes"}
    if not needed <= set(frame.columns):
        return frame.iloc[0:0]
    rows = frame[(frame["group"] == GROUP) & (frame["lever"] == "batch") & (frame["status"] == "ok")].copy()
    rows["batch"] = pd.to_numeric(rows["batch"], errors="coerce")
    return rows[rows["batch"].notna()]


def _largest(frame: pd.DataFrame, model: str, device: str) -> dict[str, int]:
    if not {"lever", "max_batch", "checkpoint"} <= set(frame.columns):
        return {}
    rows = frame[(frame["group"] == GROUP) & (frame["lever"] == "max_batch") & (frame["model"] == model)
                 & (frame["device"] == device) & (frame["checkpoint"] == "off") & frame["max_batch"].notna()]
    return {p: int(v) for p, v in rows.groupby("precision")["max_batch"].max().items()}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def _draw(rows: pd.DataFrame, largest: dict[str, int], what: str, path: Path) -> Path:
    tokens = "tokens_per_s" in rows and rows["tokens_per_s"].notna().all()
    figure = "tokens_per_s" if tokens else "samples_per_s"
    unit, scale = ("GiB", 2**30) if rows["step_peak_bytes"].max() >= 2**30 else ("MiB", 2**20)
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    speed, memory = fig.subplots(1, 2)
    found = marks.per_row(rows)
    cases = rows[["precision", "batch", figure, "step_peak_bytes"]].assign(disturbed=found.map(bool).astype(int))
    for precision, line in cases.groupby("precision"):
        line = line.groupby("batch")[[figure, "step_peak_bytes", "disturbed"]].agg(
            {figure: "median", "step_peak_bytes": "median", "disturbed": "max"}).sort_index()
        hollow_points(speed, speed.plot(line.index, line[figure], marker="o", label=text(precision))[0],
                      line["disturbed"] > 0)
        drawn = memory.plot(line.index, line["step_peak_bytes"] / scale, marker="o", label=text(precision))
        if precision in largest:
            memory.axvline(largest[precision], color=drawn[0].get_color(), linestyle=":",
                           label=text(f"{precision}: largest batch {largest[precision]}"))
    if "mem_budget_bytes" in rows and rows["mem_budget_bytes"].notna().any():
        budget = rows["mem_budget_bytes"].max()
        memory.axhline(budget / scale, color="gray", linestyle="--", label=f"budget {budget / scale:.4g} {unit}")
    speed.set(xlabel="batch size (samples)", ylabel=figure.replace("_per_s", "/s"), title="throughput")
    memory.set(xlabel="batch size (samples)", ylabel=f"peak memory of a step ({unit})", title="peak memory")
    batches = sorted({int(b) for b in rows["batch"]} | set(largest.values()))
    for axes in (speed, memory):
        axes.set_xscale("log", base=2)
        axes.set_xticks(batches, labels=[str(b) for b in batches])  # batch sizes as numbers, not powers of two
        axes.minorticks_off()
        axes.grid(True, which="both", alpha=0.3)
    speed.legend(handles=[*speed.get_legend_handles_labels()[0], *hollow_entry(list(found))], fontsize=8)
    memory.legend(fontsize=8)
    fig.suptitle(title(what, rows))
    return save_figure(fig, path, dpi=120)


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One throughput-and-memory figure per (model, device) of the batch sweep."""
    sweep = _sweep(frame)
    if sweep.empty:
        return []
    written = []
    for (model, device), rows in sweep.groupby(["model", "device"]):
        path = outdir / f"batch_size_{_slug(model)}_{_slug(device)}.png"
        written.append(_draw(rows, _largest(frame, model, device), f"{model} on {device}: batch-size scaling", path))
    return written
