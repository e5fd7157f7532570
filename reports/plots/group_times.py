"""Plain time charts: the median time per call of each case, for the groups no picture of this suite draws.

Any pytest-benchmark file is read by the reports, and the suite's pictures (matmul, conv, attention, the batch
sweep, the roofline) draw only this suite's cases: another project's results got no picture at all, and `plot`
said only that no suite had one. So the cases of another project (a row without `extra_info.suite`, which every
case of this suite records) get one chart per group and device: a bar per case in the natural order of its id
(numbers in it compared as numbers), its median on a log axis with the IQR as a whisker where the file gives
quartiles, the axis naming what the time is (pytest-benchmark's wall-clock timer, or the timer the file names).
A disturbed figure (reports/marks.py) is a hatched bar, named in the legend.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.figure import Figure

from reports import marks
from reports.format.outputs import save_figure
from reports.plots.style import file_name, hatch_bar, hatched_entry, log_axis, text, time_unit, title
from reports.text import natural_key, times_are

LABEL_CHARS = 60  # a case's label on the axis, its end kept (the table holds the whole id)


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The timed rows that are not this suite's (no `suite` field): the ones no other picture draws."""
    if "median_s" not in frame or "device" not in frame:
        return frame.iloc[:0]
    ours = frame["suite"].notna() if "suite" in frame else pd.Series(False, index=frame.index)
    return frame[frame["median_s"].notna() & ~ours]


def labels(rows: pd.DataFrame) -> list[str]:
    """Each case's name where the names tell the cases apart, else its id; its last LABEL_CHARS characters, where a
    test's name and params are."""
    names = rows["name"] if "name" in rows and rows["name"].notna().all() and rows["name"].is_unique else rows["case"]
    return [text(n if len(n) <= LABEL_CHARS else "..." + n[3 - LABEL_CHARS:]) for n in names.astype(str)]


def draw(rows: pd.DataFrame, group: str, device: str) -> Figure:
    """One group's chart on one device."""
    rows = rows.iloc[sorted(range(len(rows)), key=lambda i: natural_key(rows["case"].iloc[i]))]
    name, scale = time_unit(float(rows["median_s"].median()))
    median = rows["median_s"].to_numpy(float) / scale
    errors = None
    if {"q1_s", "q3_s"} <= set(rows.columns) and rows[["q1_s", "q3_s"]].notna().all().all():
        errors = np.vstack([median - rows["q1_s"].to_numpy(float) / scale,
                            rows["q3_s"].to_numpy(float) / scale - median]).clip(min=0)
    found = marks.per_row(rows)
    fig = Figure(figsize=(10, max(3.0, 0.22 * len(rows) + 1.8)), layout="constrained")
    ax = fig.subplots()
    ys = np.arange(len(rows))
    bars = ax.barh(ys, median, 0.7, xerr=errors, color="C0", error_kw={"elinewidth": 0.8, "capsize": 2})
    for bar, disturbed in zip(bars, found, strict=True):
        if disturbed:
            hatch_bar(bar)
    log_axis(ax, median)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}"))
    ax.set_yticks(ys, labels(rows), fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first case on top, no margin of empty rows
    whisker = ", whisker: IQR" if errors is not None else ""
    ax.set_xlabel(text(textwrap.fill(f"median {times_are(rows)} ({name}, log scale{whisker})", 80)))
    if handles := hatched_entry(list(found)):
        ax.legend(handles=handles, loc="lower right", fontsize=8)
    fig.suptitle(title(f"{group} on {device}: median time per case", rows), fontsize=10)
    return fig


def plots(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """One PNG per group and device of the rows no picture of this suite draws."""
    rows = measured(frame)
    written = []
    for (group, device), part in rows.groupby([rows["group"].fillna("(no group)"), "device"], sort=True):
        path = outdir / file_name("times", str(group), str(device))
        written.append(save_figure(draw(part, str(group), str(device)), path, dpi=100))
    return written
