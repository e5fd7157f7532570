"""Conv plots: median time per layer, NCHW against channels-last, one panel per dtype, one figure per pass.

The bars of a layer side by side show what channels-last buys it in each dtype; the panels side by side show what
the 16-bit formats buy. The y axis is logarithmic: the layers' times span orders of magnitude.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from reports.dtypes import dtypes_in_order
from reports.plots.style import text, title

GROUP = "conv"
FORMAT_ORDER = ["contiguous", "channels_last"]


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The conv rows that have a time."""
    needed = {"group", "device", "layer", "shape", "dtype", "memory_format", "pass", "median_s"}
    if not needed <= set(frame.columns):
        return pd.DataFrame(columns=sorted(needed))
    return frame[(frame["group"] == GROUP) & frame["median_s"].notna()]


def _draw(part: pd.DataFrame, what: str) -> Figure:
    dtypes = dtypes_in_order(part["dtype"].unique())
    layers = list(dict.fromkeys(part["layer"] + "\n" + part["shape"]))  # in the order the suite ran them
    fig = Figure(figsize=(max(8.0, max(6.0, 1.1 * len(layers)) * len(dtypes) / 2 + 2), 5), layout="constrained")
    axes = fig.subplots(1, len(dtypes), sharey=True, squeeze=False)[0]
    for ax, dtype in zip(axes, dtypes, strict=True):
        rows = part[part["dtype"] == dtype].assign(label=lambda r: r["layer"] + "\n" + r["shape"])
        table = rows.pivot_table(index="label", columns="memory_format", values="median_s", aggfunc="median") * 1e3
        table = table.reindex(index=[x for x in layers if x in table.index],
                              columns=[f for f in FORMAT_ORDER if f in table.columns])
        table = table.rename(index=text, columns=text)  # pandas labels the bars and ticks with these
        table.plot.bar(ax=ax, logy=True, rot=60, width=0.8, legend=ax is axes[0])
        ax.set_title(text(dtype))
        ax.set_xlabel("")
        ax.set_ylabel("median time per call (ms)")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    if axes[0].get_legend():
        axes[0].legend(fontsize=8, framealpha=0.6)
    fig.suptitle(title(what, part))
    return fig


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One PNG per device and pass."""
    written = []
    for (device, pass_), part in measured(frame).groupby(["device", "pass"], sort=True):
        path = outdir / (re.sub(r"[^A-Za-z0-9.]+", "-", f"conv-{device}-{pass_}").strip("-") + ".png")
        _draw(part, f"conv on {device}, {pass_}: time per memory format and dtype").savefig(path, dpi=110)
        written.append(path)
    return written
