"""`python -m reports hardware RESULTS... [--baseline DEVICE]`: the same cases on several machines, side by side.

Per case and system: median device time, TFLOP/s, percent of that device's own peak (from its run's
`pct_peak`, which divides by the peak of the dtype on that device), and the speed-up against a baseline device
(baseline time / time: 2.0 means twice as fast); what a system is and which of its runs counts is in
reports/sections/systems.py, which the HTML page shares. A figure taken under conditions that can have moved it
carries its marks (reports/marks.py): a `mark` column in the tables, hatched bars in the pictures
(reports/plots/system_bars.py: a speed-up is as disturbed as either of its two times).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from reports.format.load import load, output_dir
from reports.format.outputs import refuse_inputs
from reports.plots import effects
from reports.plots.system_bars import bar_plot
from reports.sections.systems import FIGURES, shared, side_by_side, table
from reports.text import fit, fitted, run_notes, terminal_width, with_legend

DROP_ORDER = ["scaling_efficiency", "busbw_gbps", "pct_peak", "tflops"]  # left out first to fit a terminal


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
