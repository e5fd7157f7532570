"""The results table of one group (a suite on a device): the columns worth showing, in the order a reader wants
them. `python -m reports table` fits it to a terminal; the HTML page shows it whole.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports import marks
from reports.text import axes_of, format_time

# A suite's axes are its cases' params (in the order the cases name them), then the figures below that the
# group has; absent columns are left out, never filled in.
FIGURES = ["world_size", "time", marks.COLUMN, "enqueue", "host_bound", "busy", "tflops", "pct_peak", "pct_achievable",
           "gbps", "algbw_gbps", "busbw_gbps", "samples_per_s", "tokens_per_s", "scaling_efficiency", "mfu",
           "peak_mem_bytes", "bytes_per_param", "error_rel", "stop_reason", "rel_iqr", "status"]


def group_table(frame: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """The columns worth showing for one group: its axes, the `extra` run columns asked for (e.g. `torch`), the
    median time (device time of an op, wall time of a step) and its marks, the host's enqueue time and whether
    the host was the bottleneck, and figures."""
    out = frame.copy()
    if "median_s" in out:
        out["time"] = out["median_s"].map(format_time)
    out[marks.COLUMN] = marks.symbols(out)
    if "torch_version" in out:
        out["torch"] = out["torch_version"]
    if "enqueue_s" in out:
        out["enqueue"] = out["enqueue_s"].map(format_time)  # host time to issue one call (or step)
    if "device_busy_share" in out:
        out["busy"] = out["device_busy_share"]  # share of a step's wall time the device worked
    axes = axes_of(out) + [c for c in extra if c in out]
    figures = [c for c in FIGURES if c in out and out[c].notna().any()]
    table = out[axes + figures].astype(object)
    return table.where(table.notna(), None)


def with_run(table: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The table with a first `run` column when it mixes several runs, so that repeated cases can be told apart."""
    files = measured["file"]
    if files.nunique() < 2:
        return table
    names = files.map(lambda f: Path(f).name)
    return table.assign(run=(names if names.nunique() == files.nunique() else files).to_numpy())[
        ["run", *table.columns]]
