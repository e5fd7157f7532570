"""`python -m reports plot RESULTS... -o DIR`: every suite's PNG plots (matplotlib, no display needed).

Each plotting module exposes `plots(frame, outdir) -> list[Path]`: it draws what the frame holds for its suite
and returns the files written (none when the frame has no rows of that suite). Add a module to PLOTTERS to
have its plots in this command and in the HTML report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from reports.load import load, output_dir
from reports.plots import attention as plot_attention
from reports.plots import batch as plot_batch
from reports.plots import conv as plot_conv
from reports.plots import matmul as plot_matmul
from reports.plots import roofline as plot_roofline

matplotlib.rcParams["text.parse_math"] = False  # names from the data are text: `$x$` is not mathtext

PLOTTERS: list = [plot_roofline, plot_matmul, plot_conv, plot_attention, plot_batch]


def write_all(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """Every registered plot of the frame, written under outdir."""
    output_dir(outdir)
    return [path for module in PLOTTERS for path in module.plots(frame, outdir)]


def run(args: argparse.Namespace) -> int:
    output_dir(args.out)
    written = write_all(load(args.results, samples=False), Path(args.out))
    for path in written:
        print(path)
    if not written:
        print("no plots: the results hold no suite with a plot")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plot", help="write PNG plots of the results")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("-o", "--out", default="plots", help="output directory (default: plots)")
    parser.set_defaults(func=run)
