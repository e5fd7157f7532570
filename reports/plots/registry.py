"""Every suite's picture module, and drawing a frame with all of them run by run: what `python -m reports plot`
writes and the HTML page embeds.

Each plotting module exposes `plots(frame, outdir) -> list[Path]`: it draws what the frame holds for its suite
and returns the files written (none when the frame has no rows of that suite). Add a module to PLOTTERS to
have its plots in the command and in the HTML report. Another project's results (cases without
`extra_info.suite`) get a plain chart of each group's median times (reports/plots/group_times.py).

Several runs of one device (a `.benchmarks` folder) are drawn run by run, each into a folder named after its
run and titled with it, never pooled into one picture; runs of different devices share the folder, since every
plot is per device anyway.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reports.format.load import output_dir
from reports.plots import attention, batch, conv, group_times, matmul, roofline

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
