"""`python -m reports plot RESULTS... -o DIR`: every suite's PNG plots (matplotlib, no display needed).

The plotters and how a frame is drawn run by run are reports/plots/registry.py's, which the HTML page shares:
several runs of one device are drawn run by run, each into a folder named after its run, never pooled into one
picture. Every title names its run, and a run cut short says so there and in a line printed first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from reports.format.load import load, output_dir
from reports.format.outputs import refuse_inputs
from reports.plots.registry import write_all
from reports.text import run_notes


def run(args: argparse.Namespace) -> int:
    refuse_inputs("-o", [args.out], args.results)
    output_dir(args.out)
    frame = load(args.results, samples=False)
    for note in run_notes(frame):  # also in the title of each of its plots
        print(note)
    written = write_all(frame, Path(args.out))
    for path in written:
        print(path)
    if not written:
        print("no plots: the results hold no timed case")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plot", help="write PNG plots of the results")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("-o", "--out", default="plots", help="output directory (default: plots)")
    parser.set_defaults(func=run)
