"""`python -m reports hardware RESULTS... [--baseline DEVICE]`: the same cases on several machines, side by side.

Per case and system: median device time, TFLOP/s, percent of that device's own peak (from its run's
`pct_peak`, which divides by the peak of the dtype on that device), and the speed-up against a baseline device
(baseline time / time: 2.0 means twice as fast). A system is a device; when one device model ran on several
machines, the machine name is added so the runs stay apart. Each system's latest run of a case is used; cases come
in the natural order of their ids, numbers in them compared as numbers (`size-500` before `size-4500`). A figure
taken under conditions that can have moved it carries its marks (reports/marks.py): a `mark` column in the
tables, hatched bars in the pictures (a speed-up is as disturbed as either of its two times).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from reports import marks
from reports.format.errors import InputError
from reports.format.load import load, output_dir
from reports.format.outputs import refuse_inputs, save_figure
from reports.plots import effects
from reports.plots.style import hatch_bar, hatched_entry, log_axis, text
from reports.text import (
    axes_of,
    fit,
    fitted,
    format_time,
    natural_key,
    run_notes,
    slug,
    terminal_width,
    with_legend,
)

FIGURES = ["system", "time", marks.COLUMN, "tflops", "pct_peak", "pct_achievable", "busbw_gbps", "scaling_efficiency",
           "speedup"]
DROP_ORDER = ["scaling_efficiency", "busbw_gbps", "pct_peak", "tflops"]  # left out first to fit a terminal


def systems(frame: pd.DataFrame) -> pd.Series:
    """The label of each row's system: the device, plus the machine when one device name ran on several machines
    (by identity: two boxes of one GPU model are two systems), named by its node, or its identity when the
    nodes share a name."""
    key = "machine_id" if "machine_id" in frame else "machine"
    machines = frame.groupby("device")[key].nunique()
    nodes = frame.groupby("device")["machine"].nunique()
    label = frame["device"].astype(str)
    many = frame["device"].isin(machines[machines > 1].index)
    by_node = frame["device"].map(nodes) == frame["device"].map(machines)
    suffix = (" @ " + frame["machine"].astype(str)).where(by_node, " [" + frame[key].astype(str) + "]")
    return label.where(~many, label + suffix)


def latest(frame: pd.DataFrame) -> pd.DataFrame:
    """Timed rows only, with a `system` column, keeping each system's most recent run of each case."""
    timed = frame[frame["median_s"].notna()].copy() if "median_s" in frame else frame.iloc[:0].copy()
    if timed.empty:
        raise InputError("hardware: the results hold no timed case")
    timed["system"] = systems(timed)
    timed = timed.sort_values(["datetime", "file"], kind="stable")
    return timed.drop_duplicates(["system", "case"], keep="last")


def choose(names: list[str], wanted: str | None) -> str:
    """The system `--baseline` names among these: the first when none is asked, else the one whose name it is or
    the one it is part of (case-insensitive); anything else is an InputError listing the names."""
    if wanted is None:
        return names[0]
    matches = [wanted] if wanted in names else [n for n in names if wanted.lower() in n.lower()]
    if len(matches) != 1:
        raise InputError(f"--baseline {wanted!r}: expected one of {', '.join(map(repr, names))}")
    return matches[0]


def side_by_side(frame: pd.DataFrame, baseline: str | None = None) -> tuple[pd.DataFrame, str]:
    """One row per (case, system) with time, TFLOP/s, % of peak and speed-up vs the baseline system."""
    timed = latest(frame)
    names = list(dict.fromkeys(timed.sort_index()["system"]))  # in the order the files were given
    baseline = choose(names, baseline)
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
    out = out.assign(_order=out["system"].map(order), _case=out["case"].map(natural_key))
    out = out.sort_values(["group", "_case", "_order"], kind="stable")  # sizes in a case id compared as numbers
    return out.drop(columns=["_order", "_case"]), baseline


def shared(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of cases measured on more than one system: the ones a comparison can say something about."""
    return rows[rows.groupby("case")["system"].transform("nunique") > 1]


def table(rows: pd.DataFrame, torch: bool = False) -> pd.DataFrame:
    """The readable columns of side_by_side for one group: its axes, the system (and with `torch` the torch
    version of its run), and the figures."""
    axes = axes_of(rows)
    shown = rows.assign(time=rows["median_s"].map(format_time), **{marks.COLUMN: marks.symbols(rows)})
    if torch and "torch_version" in shown:
        shown["torch"] = shown["torch_version"]
    figures = [c for c in FIGURES if c in shown and shown[c].notna().any()]
    if "torch" in shown:
        figures.insert(1, "torch")
    result = shown[axes + figures].astype(object)
    return result.where(result.notna(), None)


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


def plots(rows: pd.DataFrame, baseline: str, outdir: Path) -> list[Path]:
    """What each lever is worth on each system, then one bar plot per group of the cases measured on more than
    one system."""
    output_dir(outdir)
    drawn = [effects.plot(rows, outdir)]
    rows = shared(rows)
    groups = rows.groupby(rows["group"].fillna("no-group"), sort=True)
    drawn += [bar_plot(str(group), part, baseline, outdir) for group, part in groups]
    return [path for path in drawn if path is not None]


def render(rows: pd.DataFrame, baseline: str, fmt: str, torch: bool = False, width: int | None = None,
           wide: bool = False) -> str:
    """The tables per group, each with the legend of its marks, after a line per run cut short; plain text fits
    `width` (None: every column)."""
    notes = [*run_notes(rows), f"baseline: {baseline}; speedup = baseline time / time"]
    parts = [textwrap.fill(line, width) if width is not None else line for line in notes]
    for group, part in rows.groupby(rows["group"].fillna("(no group)"), sort=True):
        shown = table(part, torch)
        wrap = {c: 28 for c in shown.columns if c not in FIGURES or c == "system"}
        text = (with_legend(fit(shown, fmt, None, floatfmt=".4g"), shown, None) if wide
                else fitted(shown, part, fmt, width, wrap, DROP_ORDER))
        parts.append(f"## {group}\n\n{text}")
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    if args.out:
        refuse_inputs("-o", [args.out], args.results)
        output_dir(args.out)  # checked before any work: an unusable folder is not found after the report
    rows, baseline = side_by_side(load(args.results, samples=False), args.baseline)
    if rows["system"].nunique() < 2:
        print(f"note: only one system ({baseline}) in the results; nothing to set side by side")
    width = None if args.wide or args.markdown else terminal_width()
    print(render(rows, baseline, "github" if args.markdown else "simple", args.torch, width, args.wide))
    if args.out:
        for path in plots(rows, baseline, Path(args.out)):
            print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("hardware", help="the same cases on several devices side by side")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories, from any machines")
    parser.add_argument("--baseline", help="system the speed-up is measured against (default: the first file's)")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown tables")
    parser.add_argument("--torch", action="store_true", help="add the torch version of each system's run as a column")
    parser.add_argument("-o", "--out", help="write bar plots (PNG) into this directory")
    parser.add_argument("--wide", action="store_true", help="every column, however wide (default: fit the terminal)")
    parser.set_defaults(func=run)
