"""`python -m reports plot RESULTS... -o DIR`: every suite's PNG plots (matplotlib, no display needed).

Each plotting module exposes `plots(frame, outdir) -> list[Path]`: it draws what the frame holds for its suite
and returns the files written (none when the frame has no rows of that suite). Add a module to PLOTTERS to
have its plots in this command and in the HTML report. Another project's results (cases without
`extra_info.suite`) get a plain chart of each group's median times (reports/plots/group_times.py).

Several runs of one device (a `.benchmarks` folder) are drawn run by run, each into a folder named after its
run and titled with it, never pooled into one picture; runs of different devices share the folder, since every
plot is per device anyway. Every title names its run, and a run cut short says so there.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from reports.format.load import load, output_dir
from reports.format.outputs import refuse_inputs
from reports.plots import attention, batch, conv, group_times, matmul, roofline
from reports.text import run_notes

PLOTTERS: list = [roofline, matmul, conv, attention, batch, group_times]


def by_run(frame: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """[(None, frame)] when no device has several runs; else one (run name, its rows) per run, oldest first."""
    if "file" not in frame or not frame.groupby("device")["file"].nunique().gt(1).any():
        return [(None, frame)]
    order = frame.groupby("file", sort=False)["datetime"].first().sort_values(kind="stable").index
    return [(Path(file).stem, frame[frame["file"] == file]) for file in order]


def run_folder(outdir: Path, run: str | None) -> Path:
    """Where a run's plots go: outdir itself for a single pass, else a folder named after the run."""
    return output_dir(outdir if run is None else outdir / (re.sub(r"[^A-Za-z0-9._-]+", "-", run).strip("-") or "run"))


def write_all(frame: pd.DataFrame, outdir: Path) -> list[Path]:
    """Every registered plot of the frame, written under outdir (run by run where a device has several runs)."""
    output_dir(outdir)
    return [path for run, part in by_run(frame) for module in PLOTTERS
            for path in module.plots(part, run_folder(outdir, run))]


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
