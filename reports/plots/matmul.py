"""The matmul picture: FLOP/s per shape for each dtype, the alignment classes side by side, peaks as lines.

One panel per layer (the square cubes, each model layer), so the 64 / 8 / odd classes of one layer sit next to
each other and the penalty of a misaligned shape reads off the bar heights; within a shape the bars climb the
dtype ladder (float32, tf32, float16, bfloat16, float8). A dashed line per dtype is its achievable peak (the
search's best gemm on that device), a dotted one its datasheet peak (GPUs); the number over a bar is its percent
of the datasheet peak where there is one (a GPU) and of the achievable peak otherwise (a CPU).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from reports import device_peaks, marks
from reports.dtypes import dtypes_in_order
from reports.format.outputs import save_figure
from reports.plots.style import ALIGN_LABEL, DTYPE_COLORS, file_name, flops_unit, hatch_bar, hatched_entry, text, title

GROUP = "matmul"


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The matmul rows with a time and a FLOP rate."""
    needed = {"group", "device", "layer", "shape", "align", "dtype", "median_s", "flops"}
    if not needed <= set(frame.columns):
        return pd.DataFrame(columns=sorted(needed))
    rows = frame[(frame["group"] == GROUP) & frame["median_s"].notna() & frame["flops"].notna()].copy()
    rows["rate"] = rows["flops"] / rows["median_s"]
    return rows


def _percent(rows: pd.DataFrame) -> tuple[pd.Series, str]:
    """Per row the percent written over its bar, and what it is a percent of."""
    if "pct_peak" in rows and rows["pct_peak"].notna().any():
        return rows["pct_peak"], "% of the datasheet peak of the dtype"
    if "pct_achievable" in rows and rows["pct_achievable"].notna().any():
        return rows["pct_achievable"], "% of the achievable peak (roofline at the case's intensity)"
    return pd.Series(np.nan, index=rows.index), ""


def _panel(ax, rows: pd.DataFrame, dtypes: list[str], scale: float, percent: pd.Series, found: pd.Series) -> None:
    """One layer's bars; a disturbed figure's bar is hatched, its symbols (reports/marks.py) after its percent."""
    shapes = list(dict.fromkeys(rows["shape"]))  # the order the suite ran them
    width = 0.8 / len(dtypes)
    for i, dtype in enumerate(dtypes):
        part = rows[rows["dtype"] == dtype].drop_duplicates("shape").set_index("shape")
        xs = [j + (i - (len(dtypes) - 1) / 2) * width for j, s in enumerate(shapes) if s in part.index]
        heights = [part.loc[s, "rate"] / scale for s in shapes if s in part.index]
        bars = ax.bar(xs, heights, width, color=DTYPE_COLORS.get(dtype, "grey"))
        for bar, x, s, h in zip(bars, xs, [s for s in shapes if s in part.index], heights, strict=True):
            row = part.loc[s, "_row"]
            symbols = "".join(m.symbol for m in found[row])
            if symbols:
                hatch_bar(bar)
            pct = percent.get(row)
            share = "" if pd.isna(pct) else f"{pct:.0f}%" if pct >= 10 else f"{pct:.1f}%"
            if share or symbols:
                ax.annotate(f"{share} {symbols}".strip(), (x, h), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6, rotation=90)
    aligns = rows.drop_duplicates("shape").set_index("shape")["align"]
    ax.set_xticks(range(len(shapes)), [text(f"{s}\n{ALIGN_LABEL.get(str(aligns[s]), aligns[s])}") for s in shapes],
                  fontsize=7)
    ax.set_xlim(-0.6, len(shapes) - 0.4)


def _roofs(axes, device: str, table: pd.DataFrame, dtypes: list[str], scale: float) -> list:
    handles = []
    for kind, style in (("achievable", "--"), ("datasheet", ":")):
        values = device_peaks.of(table, device, kind)
        shown = [d for d in dtypes if d in values]
        for dtype in shown:
            for ax in axes:
                ax.axhline(values[dtype] / scale, color=DTYPE_COLORS.get(dtype, "grey"), linestyle=style, lw=1)
        if shown:
            what = f"{kind} peak of the dtype of that colour" + (" (searched here)" if kind == "achievable" else "")
            handles.append(Line2D([], [], color="k", linestyle=style, lw=1, label=what))
    return handles


def draw(rows: pd.DataFrame, device: str, table: pd.DataFrame) -> Figure:
    """The matmul figure of one device."""
    rows = rows.assign(_row=rows.index)
    dtypes = dtypes_in_order(rows["dtype"])
    layers = list(dict.fromkeys(rows["layer"]))
    counts = [rows.loc[rows["layer"] == layer, "shape"].nunique() for layer in layers]
    roof_values = [v for kind in ("datasheet", "achievable") for d, v in device_peaks.of(table, device, kind).items()
                   if d in dtypes]
    unit, scale = flops_unit(max([rows["rate"].max(), *roof_values]))
    percent, percent_of = _percent(rows)
    found = marks.per_row(rows)
    fig = Figure(figsize=(12, 5.2), layout="constrained")
    axes = fig.subplots(1, len(layers), sharey=True, squeeze=False, width_ratios=[c + 0.6 for c in counts])[0]
    for ax, layer in zip(axes, layers, strict=True):
        _panel(ax, rows[rows["layer"] == layer], dtypes, scale, percent, found)
        ax.set_title(text(layer), fontsize=9)
        ax.set_yscale("log")
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel(f"{unit} (log scale; median device time)")
    low = rows["rate"].min() / scale
    axes[0].set_ylim(bottom=low / 2, top=max([rows["rate"].max(), *roof_values]) / scale * 3)
    handles = [Patch(color=DTYPE_COLORS.get(d, "grey"), label=text(d)) for d in dtypes]
    handles += _roofs(axes, device, table, dtypes, scale)
    handles += hatched_entry(list(found))
    letters = marks.letters(list(found))
    lines = [f"number over a bar: {percent_of}" if percent_of else "",
             f"letters over a bar: {letters}" if letters else ""]
    note = "\n".join(line for line in lines if line) or None
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False,
               title=note, title_fontsize=8)
    fig.suptitle(title(f"matmul on {device}: {unit} per shape (MxNxK) and dtype, alignment classes side by side", rows))
    return fig


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One PNG per device."""
    rows = measured(frame)
    if rows.empty:
        return []
    table = device_peaks.peaks(frame[frame["device"].isin(rows["device"])])
    written = []
    for device, part in rows.groupby("device", sort=True):
        path = outdir / file_name("matmul", str(device))
        written.append(save_figure(draw(part, str(device), table), path, dpi=110))
    return written
