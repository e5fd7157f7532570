"""Conv plots: median time per layer, NCHW against channels-last, one panel per dtype, one figure per pass.

The bars of a layer side by side show what channels-last buys it in each dtype; the panels side by side show what
the 16-bit formats buy. The y axis is logarithmic: the layers' times span orders of magnitude. A disturbed figure
(reports/marks.py) is a hatched bar, named in the legend.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from reports import marks
from reports.dtypes import dtypes_in_order
from reports.format.outputs import save_figure
from reports.plots.style import hatch_bar, hatched_entry, text, title

GROUP = "conv"
FORMAT_ORDER = ["contiguous", "channels_last"]
FORMAT_COLORS = {"contiguous": "C0", "channels_last": "C1"}  # one colour per format in every panel


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The conv rows that have a time."""
    needed = {"group", "device", "layer", "shape", "dtype", "memory_format", "pass", "median_s"}
    if not needed <= set(frame.columns):
        return pd.DataFrame(columns=sorted(needed))
    return frame[(frame["group"] == GROUP) & frame["median_s"].notna()]


def _draw(part: pd.DataFrame, what: str) -> Figure:
    """One pass's figure; a disturbed figure's bar (reports/marks.py) is hatched."""
    found = marks.per_row(part)
    cases = part[["dtype", "memory_format", "median_s"]].assign(label=part["layer"] + "\n" + part["shape"],
                                                                   disturbed=found.map(bool).astype(int))
    dtypes = dtypes_in_order(cases["dtype"].unique())
    layers = list(dict.fromkeys(cases["label"]))  # in the order the suite ran them
    fig = Figure(figsize=(max(8.0, max(6.0, 1.1 * len(layers)) * len(dtypes) / 2 + 2), 5), layout="constrained")
    axes = fig.subplots(1, len(dtypes), sharey=True, squeeze=False)[0]
    for ax, dtype in zip(axes, dtypes, strict=True):
        rows = cases[cases["dtype"] == dtype]
        table, flagged = (rows.pivot_table(index="label", columns="memory_format", values=column, aggfunc=how)
                          for column, how in (("median_s", "median"), ("disturbed", "max")))
        table = table.reindex(index=[x for x in layers if x in table.index],
                              columns=[f for f in FORMAT_ORDER if f in table.columns])
        flagged = flagged.reindex_like(table).fillna(0).astype(bool)
        table = (table * 1e3).rename(index=text)  # pandas labels the ticks with these
        table.plot.bar(ax=ax, logy=True, rot=60, width=0.8, legend=False, color=FORMAT_COLORS)
        for container, column in zip(ax.containers, flagged.columns, strict=True):
            for bar, disturbed in zip(container, flagged[column], strict=True):
                if disturbed:
                    hatch_bar(bar)
        ax.set_title(text(dtype))
        ax.set_xlabel("")
        ax.set_ylabel("median time per call (ms)")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    shown = [f for f in FORMAT_ORDER if f in set(cases["memory_format"])]
    handles = [Patch(color=FORMAT_COLORS[f], label=f) for f in shown] + hatched_entry(list(found))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(title(what, part))
    return fig


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One PNG per device and pass."""
    written = []
    for (device, pass_), part in measured(frame).groupby(["device", "pass"], sort=True):
        path = outdir / (re.sub(r"[^A-Za-z0-9.]+", "-", f"conv-{device}-{pass_}").strip("-") + ".png")
        written.append(save_figure(_draw(part, f"conv on {device}, {pass_}: time per memory format and dtype"), path,
                                   dpi=110))
    return written
