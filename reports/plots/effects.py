"""The hardware picture of the levers: what each lever is worth on each system, bars side by side.

Each row is one comparison of reports.levers (dtype float32 -> bfloat16 on matmul, channels-last on conv, ...),
each bar a system; the bar is the geometric-mean ratio over the pairs and the whisker its 95 % interval (its range
over the pairs for exact counts such as memory). A figure reports.levers marks `uncertain` is drawn hatched and
pale, its number followed by `?`: it is there, and it says little. The x axis is logarithmic and centred on 1 (no
effect), so 2x and 0.5x are as far from it; each row says how its ratio reads (a speed-up or TFLOP/s ratio above
1 helps, a memory ratio below 1 helps).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from reports import levers
from reports.format.outputs import save_figure
from reports.plots.style import file_name, text

SHORT = {"speed-up (baseline time / time)": "speed-up", "TFLOP/s ratio (variant / baseline)": "TFLOP/s ratio",
         "peak memory ratio (variant / baseline)": "memory ratio"}


def effects(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (comparison, system) with a measured effect: ratio, the whisker's low and high (the 95 %
    interval, else the range over the pairs) and whether the figure is uncertain."""
    found = []
    for system, part in rows.groupby("system", sort=False):
        for effect in levers.effects(part):
            if effect.pairs and effect.unit == "x":
                what, _, reading = effect.comparison.rpartition(", ")
                low, high = (effect.ci_low, effect.ci_high) if effect.ci_low is not None else (effect.low, effect.high)
                found.append({"comparison": f"{what}\n({SHORT.get(reading, reading)})", "system": system,
                              "ratio": effect.ratio, "low": low, "high": high, "uncertain": effect.uncertain})
    return pd.DataFrame(found, columns=["comparison", "system", "ratio", "low", "high", "uncertain"])


def plot(rows: pd.DataFrame, outdir: Path) -> Path | None:
    """The lever bars of every system in `rows` (with its `system` column); None with fewer than two systems
    or no comparison measured on two."""
    table = effects(rows)
    table = table[table.groupby("comparison")["system"].transform("nunique") > 1]
    if table.empty:
        return None
    comparisons = list(dict.fromkeys(table["comparison"]))
    systems = list(dict.fromkeys(table["system"]))  # a system none of whose levers another measured has no bar
    height = 0.8 / len(systems)
    fig = Figure(figsize=(11, 1.2 + 0.32 * len(comparisons) * len(systems)), layout="constrained")
    ax = fig.subplots()
    handles = []
    for i, system in enumerate(systems):
        part = table[table["system"] == system].set_index("comparison")
        ys = [j + (i - (len(systems) - 1) / 2) * height for j, c in enumerate(comparisons) if c in part.index]
        found = part.reindex([c for c in comparisons if c in part.index])
        errors = np.vstack([found["ratio"] - found["low"], found["high"] - found["ratio"]])
        bars = ax.barh(ys, found["ratio"] - 1, height, left=1, xerr=errors,
                       error_kw={"lw": 0.8, "capsize": 2, "ecolor": "#444"})
        handles.append(Patch(color=bars.patches[0].get_facecolor(), label=text(system)))  # solid, as measured
        for bar, doubt in zip(bars, found["uncertain"], strict=True):
            if doubt:
                bar.set(alpha=0.35, hatch="///")
        for y, value, low, high, doubt in zip(ys, found["ratio"], found["low"], found["high"], found["uncertain"],
                                              strict=True):
            end = high if value >= 1 else low  # beyond the whisker, on the side the bar grows
            ax.annotate(f"{value:.3g}x" + ("?" if doubt else ""), (end, y), xytext=(4 if value >= 1 else -4, 0),
                        textcoords="offset points", ha="left" if value >= 1 else "right", va="center", fontsize=7)
    ax.set_xscale("log")
    ax.margins(x=0.08)
    ax.axvline(1, color="k", lw=0.8)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_yticks(range(len(comparisons)), [text(c) for c in comparisons], fontsize=8)
    ax.invert_yaxis()
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set_xlabel("effect of the lever: geometric mean over the case pairs, log scale\n"
                  "whisker: its 95 % interval (memory: the range over the pairs); hatched, with ?: uncertain\n"
                  "speed-up and TFLOP/s ratio: above 1x the lever helps; memory ratio: below 1x it helps")
    ax.legend(handles=handles, fontsize=8, loc="best")
    fig.suptitle("what each lever is worth on each system")
    path = outdir / file_name("hardware", "levers")
    return save_figure(fig, path, dpi=110)
