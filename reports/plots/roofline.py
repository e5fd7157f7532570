"""The roofline of each device: every case with a FLOP and a byte model as a point, under its roofs.

x is arithmetic intensity (FLOP per byte of the case's minimal traffic model), y the attained FLOP/s (FLOP over
the median device time); both log. A roof per dtype is min(peak FLOP/s, intensity x bandwidth): solid for the
achievable peaks searched on that device (best gemm per dtype, best copy/triad bandwidth), dashed for the
datasheet's (GPUs). Points are coloured by suite and shaped by dtype; each roof is labelled on its flat part,
in the colour of its dtype. A point's height under the roof of its dtype is its `pct_achievable`. A disturbed
figure (reports/marks.py) is a hollow point, in the legend with the marks it carries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports import device_peaks, marks
from reports.dtypes import dtypes_in_order
from reports.format.outputs import save_figure
from reports.plots.style import DTYPE_COLORS, file_name, flops_unit, hollow_entry, text, title

MARKERS = {"float32": "o", "tf32": "D", "float16": "s", "bfloat16": "^", "float8_e4m3fn": "P"}
# Suite colours stay clear of the dtype colours of the roofs (reports.plots.style).
SUITE_COLORS = {"matmul": "#303030", "conv": "#17becf", "attention": "#e7298a", "train_step": "#bcbd22"}
OTHER_SUITE_COLORS = ["#8c564b", "#7f7f7f", "#9edae5", "#f7b6d2"]


def points(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured cases with both models: intensity (FLOP/byte) and attained FLOP/s."""
    needed = {"group", "device", "median_s", "flops", "bytes"}
    if not needed <= set(frame.columns):
        return pd.DataFrame(columns=sorted(needed | {"intensity", "rate"}))
    rows = frame[frame["median_s"].notna() & frame["flops"].notna() & frame["bytes"].notna()].copy()
    rows = rows[(rows["flops"] > 0) & (rows["bytes"] > 0)]
    rows["intensity"] = rows["flops"] / rows["bytes"]
    rows["rate"] = rows["flops"] / rows["median_s"]
    if "dtype" not in rows:
        rows["dtype"] = "unknown"
    return rows


def _roofs(ax, xs: np.ndarray, values: dict[str, float], dtypes: list[str], scale: float, unit: str, kind: str,
           style: str) -> None:
    """The bandwidth roof once (grey, up to the highest ridge), then each dtype's flat roof from its ridge on."""
    bandwidth = values.get("bandwidth")
    flat = [d for d in dtypes if d in values]
    if not bandwidth or not flat:
        return
    top = max(values[d] for d in flat)
    slope = xs[xs * bandwidth <= top]
    ax.plot(slope, slope * bandwidth / scale, color="#666", linestyle=style, lw=1.3)
    at = slope[int(len(slope) * 0.8)]  # high on the slope, right of it: under the roof, clear of the flat roofs
    ax.annotate(f"{kind} bandwidth\n{bandwidth / 1e9:.4g} GB/s", (at, at * bandwidth / scale), xytext=(8, -4),
                textcoords="offset points", ha="left", va="top", fontsize=7, color="#444")
    for dtype in flat:
        color = DTYPE_COLORS.get(dtype, "grey")
        run = xs[xs >= values[dtype] / bandwidth]
        ax.plot(run, np.full(len(run), values[dtype] / scale), color=color, linestyle=style, lw=1.3)
        ax.annotate(text(f"{dtype} {kind} {values[dtype] / scale:.4g} {unit}"), (xs[-1], values[dtype] / scale),
                    xytext=(-4, 3), textcoords="offset points", ha="right", va="bottom", fontsize=7, color=color)


def draw(rows: pd.DataFrame, device: str, table: pd.DataFrame, unplaced: int) -> Figure:
    """The roofline figure of one device."""
    dtypes = dtypes_in_order(rows["dtype"].dropna())
    roofs = {kind: device_peaks.of(table, device, kind) for kind in ("achievable", "datasheet")}
    tops = [v for kind in roofs.values() for d, v in kind.items() if d in dtypes]
    unit, scale = flops_unit(max([rows["rate"].max(), *tops]))
    lo, hi = rows["intensity"].min(), rows["intensity"].max()
    for kind in roofs.values():  # show each ridge point (where the bandwidth roof meets the flat one)
        if kind.get("bandwidth"):
            ridges = [kind[d] / kind["bandwidth"] for d in dtypes if d in kind]
            lo, hi = min([lo, *ridges]), max([hi, *ridges])
    xs = np.geomspace(lo / 3, hi * 3, 200)
    fig = Figure(figsize=(10, 6), layout="constrained")
    ax = fig.subplots()
    for kind, style in (("datasheet", "--"), ("achievable", "-")):
        _roofs(ax, xs, roofs[kind], dtypes, scale, unit, kind, style)
    suites = sorted(rows["group"].dropna().unique())
    others = iter(OTHER_SUITE_COLORS * len(suites))
    colors = {s: SUITE_COLORS.get(s) or next(others) for s in suites}
    found = marks.per_row(rows)
    hollow = found.map(bool)
    for (suite, dtype), part in rows.groupby(["group", "dtype"], sort=True):
        clean, disturbed = part[~hollow[part.index]], part[hollow[part.index]]
        ax.scatter(clean["intensity"], clean["rate"] / scale, color=colors[suite], marker=MARKERS.get(dtype, "X"),
                   s=28, edgecolors="k", linewidths=0.4, zorder=3)
        ax.scatter(disturbed["intensity"], disturbed["rate"] / scale, facecolors="white",
                   edgecolors=colors[suite], marker=MARKERS.get(dtype, "X"), s=28, linewidths=1.2, zorder=3)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte of the case's traffic model)",
           ylabel=f"attained {unit} (FLOP / median device time)")
    ax.grid(True, which="both", alpha=0.25)
    handles = [Line2D([], [], marker="o", linestyle="none", color=colors[s], label=text(f"suite: {s}"))
               for s in suites]
    handles += [Line2D([], [], marker=MARKERS.get(d, "X"), linestyle="none", color="grey", label=text(f"dtype: {d}"))
                for d in dtypes]
    handles += hollow_entry(list(found))
    bandwidths = ", ".join(f"{kind} {v['bandwidth'] / 1e9:.4g} GB/s" for kind, v in roofs.items()
                           if v.get("bandwidth"))
    if roofs["achievable"]:
        handles += [Line2D([], [], color="k", linestyle="-", label="achievable roof (searched here)")]
    if roofs["datasheet"]:
        handles += [Line2D([], [], color="k", linestyle="--", label="datasheet roof")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", framealpha=0.9)  # above the bandwidth roof: empty
    subtitle = f"memory roof: {bandwidths}" if bandwidths else "no bandwidth peak recorded: no roofs"
    if unplaced:
        subtitle += f"; {unplaced} timed case(s) have no byte model and are not placed"
    fig.suptitle(title(f"roofline on {device}\n{subtitle}", rows), fontsize=11)
    return fig


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One PNG per device that has cases with both models."""
    rows = points(frame)
    if rows.empty:
        return []
    table = device_peaks.peaks(frame[frame["device"].isin(rows["device"])])
    timed = frame[frame["median_s"].notna()] if "median_s" in frame else frame.iloc[:0]
    written = []
    for device, part in rows.groupby("device", sort=True):
        unplaced = int((timed["device"] == device).sum()) - len(part)
        path = outdir / file_name("roofline", str(device))
        written.append(save_figure(draw(part, str(device), table, unplaced), path, dpi=110))
    return written
