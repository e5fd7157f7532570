"""`python -m reports hardware RESULTS... [--baseline DEVICE]`: the same cases on several machines, side by side.

Per case and system: median device time, TFLOP/s, percent of that device's own peak (from its run's
`pct_peak`, which divides by the peak of the dtype on that device), and the speed-up against a baseline device
(baseline time / time: 2.0 means twice as fast). A system is a device; when one device model ran on several
machines, the machine name is added so the runs stay apart. Each system's latest run of a case is used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import ticker
from tabulate import tabulate

from reports.errors import InputError
from reports.history import slug
from reports.load import load, output_dir
from reports.table import axes_of, format_time

matplotlib.rcParams["text.parse_math"] = False  # names from the data are text: `$x$` is not mathtext

FIGURES = ["system", "time", "tflops", "pct_peak", "speedup"]


def systems(frame: pd.DataFrame) -> pd.Series:
    """The label of each row's system: the device, plus the machine when one device name ran on several."""
    machines = frame.groupby("device")["machine"].nunique()
    shared = machines[machines > 1].index
    label = frame["device"].astype(str)
    many = frame["device"].isin(shared)
    return label.where(~many, label + " @ " + frame["machine"].astype(str))


def latest(frame: pd.DataFrame) -> pd.DataFrame:
    """Timed rows only, with a `system` column, keeping each system's most recent run of each case."""
    timed = frame[frame["median_s"].notna()].copy() if "median_s" in frame else frame.iloc[:0].copy()
    if timed.empty:
        raise InputError("hardware: the results hold no timed case")
    timed["system"] = systems(timed)
    timed = timed.sort_values(["datetime", "file"], kind="stable")
    return timed.drop_duplicates(["system", "case"], keep="last")


def side_by_side(frame: pd.DataFrame, baseline: str | None = None) -> tuple[pd.DataFrame, str]:
    """One row per (case, system) with time, TFLOP/s, % of peak and speed-up vs the baseline system."""
    timed = latest(frame)
    names = list(dict.fromkeys(timed.sort_index()["system"]))  # in the order the files were given
    if baseline is None:
        baseline = names[0]
    elif baseline not in names:
        matches = [n for n in names if baseline.lower() in n.lower()]
        if len(matches) != 1:
            raise InputError(f"--baseline {baseline!r}: expected one of {', '.join(map(repr, names))}")
        baseline = matches[0]
    base_time = timed[timed["system"] == baseline].set_index("case")["median_s"]
    out = timed.copy()
    out["speedup"] = out["case"].map(base_time) / out["median_s"]
    if "tflops" not in out:
        out["tflops"] = np.nan
    if "flops" in out:
        out["tflops"] = out["tflops"].fillna(out["flops"] / out["median_s"] / 1e12)
    if "pct_peak" not in out:
        out["pct_peak"] = np.nan
    order = {name: i for i, name in enumerate(names)}
    out = out.assign(_order=out["system"].map(order)).sort_values(["group", "case", "_order"], kind="stable")
    return out.drop(columns="_order"), baseline


def shared(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of cases measured on more than one system: the ones a comparison can say something about."""
    return rows[rows.groupby("case")["system"].transform("nunique") > 1]


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """The readable columns of side_by_side for one group: its axes, the system, and the figures."""
    axes = axes_of(rows)
    shown = rows.assign(time=rows["median_s"].map(format_time))
    figures = [c for c in FIGURES if c in shown and shown[c].notna().any()]
    result = shown[axes + figures].astype(object)
    return result.where(result.notna(), None)


def bar_plot(group: str, rows: pd.DataFrame, baseline: str, outdir: Path) -> Path | None:
    """Speed-up against the baseline per case, one bar per system (log scale: 2x and 0.5x look alike).

    None when no case of the group ran on the baseline system too (no speed-up to draw).
    """
    pivot = rows.pivot_table(index="case", columns="system", values="speedup", sort=False).dropna(how="all")
    if pivot.empty:
        return None
    height = max(3.0, 0.28 * len(pivot) * max(1, len(pivot.columns) / 2) + 1.5)
    fig, ax = plt.subplots(figsize=(10, height))
    pivot.plot.barh(ax=ax, logx=True, width=0.8)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.axvline(1, color="k", lw=0.8)
    ax.set(xlabel=f"speed-up vs {baseline} (baseline time / time)", ylabel="",
           title=f"{group}: the same cases on each system")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = outdir / f"hardware_{slug(group)}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plots(rows: pd.DataFrame, baseline: str, outdir: Path) -> list[Path]:
    """One bar plot per group, of the cases measured on more than one system."""
    output_dir(outdir)
    rows = shared(rows)
    groups = rows.groupby(rows["group"].fillna("no-group"), sort=True)
    drawn = [bar_plot(str(group), part, baseline, outdir) for group, part in groups]
    return [path for path in drawn if path is not None]


def render(rows: pd.DataFrame, baseline: str, fmt: str) -> str:
    parts = [f"baseline: {baseline}; speedup = baseline time / time"]
    for group, part in rows.groupby(rows["group"].fillna("(no group)"), sort=True):
        parts.append(f"## {group}\n\n" + tabulate(table(part), headers="keys", tablefmt=fmt, showindex=False,
                                                  floatfmt=".4g", missingval=""))
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    if args.out:
        output_dir(args.out)  # checked before any work: an unusable folder is not found after the report
    rows, baseline = side_by_side(load(args.results), args.baseline)
    if rows["system"].nunique() < 2:
        print(f"note: only one system ({baseline}) in the results; nothing to set side by side")
    print(render(rows, baseline, "github" if args.markdown else "simple"))
    if args.out:
        for path in plots(rows, baseline, Path(args.out)):
            print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("hardware", help="the same cases on several devices side by side")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories, from any machines")
    parser.add_argument("--baseline", help="system the speed-up is measured against (default: the first file's)")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown tables")
    parser.add_argument("-o", "--out", help="write bar plots (PNG) into this directory")
    parser.set_defaults(func=run)
