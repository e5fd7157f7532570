"""Attention plots: time and peak memory against sequence length, one line per implementation, log-log.

A series is every measured sequence length at one setting of the other axes, either at a fixed batch (the memory
sweep: naive's memory grows with s^2, the fused kernels' with s) or at a constant token count batch x seq (the
work per token grows with s). Dashed guides with slopes 1 and 2 make the O(s) and O(s^2) growth readable; a case
that ran out of memory is named in its line's label. A time taken under conditions that can have moved it
(reports/marks.py) is a hollow point; peak memory is a count, which they do not move.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from reports import marks
from reports.format.outputs import save_figure
from reports.format.validate import warn
from reports.plots.style import hollow_entry, hollow_points, text, title

GROUP = "attention"
AXES = ["device", "dtype", "heads", "head_dim", "causal", "pass"]
NUMERIC = ["batch", "heads", "seq", "head_dim"]
MIB = 2**20


def _prepared(frame: pd.DataFrame) -> pd.DataFrame:
    needed = {"group", "device", "impl", *AXES, *NUMERIC}
    if not needed <= set(frame.columns):
        return pd.DataFrame(columns=sorted(needed | {"tokens", "median_s", "peak_mem_bytes"}))
    rows = frame[frame["group"] == GROUP].copy()
    for column in NUMERIC:
        rows[column] = pd.to_numeric(rows[column], errors="coerce")
    unusable = rows[NUMERIC].isna().any(axis=1)
    for _, row in rows[unusable].iterrows():
        warn(f"{row['file']}: case {row['case']!r:.120}: a non-numeric {'/'.join(NUMERIC)} param; left out of the "
             "attention plots")
    rows = rows[~unusable]
    rows["tokens"] = rows["batch"] * rows["seq"]
    for column in ("median_s", "peak_mem_bytes"):
        if column not in rows:
            rows[column] = np.nan
    return rows


def series(frame: pd.DataFrame) -> list[tuple[str, int, pd.DataFrame]]:
    """(kind, value, rows) for every fixed-batch and constant-token series with two or more sequence lengths."""
    rows = _prepared(frame)
    found = []
    for kind in ("batch", "tokens"):
        for key, part in rows.groupby([*AXES, kind], sort=True):
            if part["seq"].nunique() >= 2:
                found.append((kind, int(key[-1]), part))
    return found


def _guides(ax, seqs: np.ndarray, first: pd.Series) -> None:
    """Dashed lines growing as s from the smallest memory at the shortest sequence and as s^2 from the largest."""
    for power, anchor, label in ((1, first.min(), "∝ s"), (2, first.max(), "∝ s²")):
        ax.plot(seqs, anchor * (seqs / seqs[0]) ** power, color="grey", linestyle="--", linewidth=0.8, label=label)


def _draw(part: pd.DataFrame, what: str) -> Figure:
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    time_ax, mem_ax = fig.subplots(1, 2)
    found = marks.per_row(part)
    cases = part[["impl", "seq", "status", "median_s", "peak_mem_bytes"]].assign(disturbed=found.map(bool).astype(int))
    for impl, lines in cases.groupby("impl", sort=True):
        by_seq = lines.groupby("seq")[["median_s", "peak_mem_bytes", "disturbed"]].agg(
            {"median_s": "median", "peak_mem_bytes": "median", "disturbed": "max"}).sort_index()
        oom = sorted(lines.loc[lines["status"] == "oom", "seq"].unique())
        label = text(f"{impl} (oom at s={', '.join(map(str, oom))})" if oom else impl)
        measured = by_seq.dropna(subset=["median_s"])
        if measured.empty:
            continue
        drawn = time_ax.plot(measured.index, measured["median_s"] * 1e3, marker="o", label=label)
        hollow_points(time_ax, drawn[0], measured["disturbed"] > 0)
        memory = by_seq["peak_mem_bytes"][by_seq["peak_mem_bytes"] > 0]  # a log axis: 0 bytes has no place
        if not memory.empty:
            mem_ax.plot(memory.index, memory / MIB, marker="o", label=label)
    seqs = np.array(sorted(part["seq"].unique()), dtype=float)
    first = part.loc[part["seq"] == seqs[0], "peak_mem_bytes"]
    first = first[first > 0]
    if not first.empty:
        _guides(mem_ax, seqs, first / MIB)
    for ax, ylabel in ((time_ax, "median time per call (ms)"), (mem_ax, "peak memory above inputs (MiB)")):
        if not ax.has_data():  # e.g. no peak memory recorded: say so, a log axis of nothing cannot be drawn
            ax.text(0.5, 0.5, f"{ylabel}: not recorded", ha="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqs, labels=[str(int(s)) for s in seqs], minor=False)
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(handles=[*ax.get_legend_handles_labels()[0], *(hollow_entry(list(found)) if ax is time_ax else [])],
                  fontsize=8)
    fig.suptitle(title(what, part))
    return fig


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One PNG per series: time and peak memory against sequence length."""
    written = []
    for kind, value, part in series(frame):
        first = part.iloc[0]
        mask = "causal" if str(first["causal"]).lower() == "true" else "no mask"
        what = f"batch {value}" if kind == "batch" else f"batch x seq = {value} tokens"
        heading = (f"attention on {first['device']}: {first['dtype']}, {what}, {first['heads']} heads of "
                   f"{first['head_dim']}, {mask}, {first['pass']}")
        name = _slug(f"attention-{first['device']}-{first['dtype']}-{kind}{value}-h{first['heads']}"
                     f"-d{first['head_dim']}-{'causal' if mask == 'causal' else 'nomask'}-{first['pass']}")
        path = outdir / f"{name}.png"
        written.append(save_figure(_draw(part, heading), path, dpi=110))
    return written
