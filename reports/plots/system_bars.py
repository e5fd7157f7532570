"""The same cases on each system as bars: median time per call and the speed-up against the baseline system
(reports/sections/systems.py gives the rows), one picture per group, for `python -m reports hardware -o` and the
HTML page's devices side by side. A time with a mark (reports/marks.py) is hatched, and so is a speed-up whose
time or baseline time has one: a speed-up is as disturbed as either of its two times.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from reports import marks
from reports.format.outputs import save_figure
from reports.plots.style import hatch_bar, hatched_entry, log_axis, text
from reports.text import slug


def bar_plot(group: str, rows: pd.DataFrame, baseline: str, outdir: Path) -> Path | None:
    """The same cases on each system: median time per call (left) and speed-up against the baseline (right,
    bars grow from 1x, so slower reads left and faster right). Both log scale: 2x and 0.5x look alike. A time
    with a mark is hatched, and so is a speed-up whose time or baseline time has one.

    None when no case of the group ran on the baseline system too (no speed-up to draw).
    """
    speedup = rows.pivot_table(index="case", columns="system", values="speedup", sort=False).dropna(how="all")
    if speedup.empty:
        return None
    times = rows.pivot_table(index="case", columns="system", values="median_s", sort=False).reindex(speedup.index)
    found = marks.per_row(rows)
    flagged = (found.map(bool).set_axis(pd.MultiIndex.from_frame(rows[["case", "system"]])).unstack("system")
               .reindex(index=speedup.index, columns=speedup.columns).fillna(False).astype(bool))
    names = [s for s in dict.fromkeys(rows["system"]) if s in speedup.columns]
    labels = [text(str(case).removeprefix(f"{group}/")) for case in speedup.index]
    bar = 0.8 / len(names)
    fig = Figure(figsize=(12, max(3.0, 0.22 * len(labels) * len(names) + 1.8)), layout="constrained")
    time_ax, speed_ax = fig.subplots(1, 2, sharey=True)
    for i, name in enumerate(names):
        ys = np.arange(len(labels)) + (i - (len(names) - 1) / 2) * bar
        time_bars = time_ax.barh(ys, times[name] * 1e3, bar, color=f"C{i}")
        speed_bars = speed_ax.barh(ys, speedup[name] - 1, bar, left=1, color=f"C{i}")
        for time_bar, speed_bar, own, base in zip(time_bars, speed_bars, flagged[name], flagged[baseline],
                                                  strict=True):
            for drawn, disturbed in ((time_bar, own), (speed_bar, own or base)):
                if disturbed:
                    hatch_bar(drawn)
    log_axis(time_ax, times)
    log_axis(speed_ax, pd.concat([speedup, pd.DataFrame({"one": [1.0]})]))
    time_ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    speed_ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    speed_ax.axvline(1, color="k", lw=0.8)
    time_ax.set(xlabel="median time per call (ms)", yticks=range(len(labels)))
    time_ax.set_yticklabels(labels, fontsize=7)
    time_ax.invert_yaxis()
    speed_ax.set_xlabel(text(f"speed-up vs {baseline} (baseline time / time)"))
    handles = [*(Patch(color=f"C{i}", label=text(name)) for i, name in enumerate(names)), *hatched_entry(list(found))]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8,
               frameon=False)  # the title holds the top
    fig.suptitle(text(f"{group}: the same cases on each system"))
    path = outdir / f"hardware_{slug(group)}.png"
    return save_figure(fig, path, dpi=100)
