"""The same cases on several machines, side by side: one row per case and system, with its time, TFLOP/s, percent of
that device's own peak and the speed-up against a baseline system. `python -m reports hardware` prints it and
draws it; the HTML page shows it when the results hold more than one device, and the history page normalises its
pictures across machines to the system `choose` picks.

A system is a device; when one device model ran on several machines, the machine name is added so the runs stay
apart. Each system's latest run of a case is used; cases come in the natural order of their ids, numbers in them
compared as numbers (`size-500` before `size-4500`). The percent of peak is its run's `pct_peak`, which divides by
the peak of the dtype on that device; the speed-up is baseline time / time (2.0 means twice as fast). A figure
taken under conditions that can have moved it carries its marks (reports/marks.py) in a `mark` column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reports import marks
from reports.format.errors import InputError
from reports.text import axes_of, format_time, natural_key

FIGURES = ["system", "time", marks.COLUMN, "tflops", "pct_peak", "pct_achievable", "busbw_gbps", "scaling_efficiency",
           "speedup"]


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
