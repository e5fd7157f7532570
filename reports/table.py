"""`python -m reports table RESULTS...`: one readable table per suite (benchmark group) and device."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from reports.load import load

# A suite's axes are its cases' params (in the order the cases name them), then the figures below that the
# group has; absent columns are left out, never filled in.
FIGURES = ["world_size", "time", "enqueue", "host_bound", "busy", "tflops", "pct_peak", "pct_achievable", "gbps",
           "algbw_gbps", "busbw_gbps", "samples_per_s", "tokens_per_s", "scaling_efficiency", "mfu", "peak_mem_bytes",
           "bytes_per_param", "error_rel", "stop_reason", "rel_iqr", "status"]


def axes_of(frame: pd.DataFrame) -> list[str]:
    """The param columns of the group's cases, first-seen order; `name` first when some case records no params
    (other projects' files), so every row stays identifiable."""
    names: dict[str, None] = {}
    for text in frame.get("param_names", pd.Series(dtype=object)).dropna():
        names.update(dict.fromkeys(n for n in str(text).split(",") if n))
    axes = [n for n in names if n in frame and frame[n].notna().any()]
    if not axes or frame[axes].isna().all(axis=1).any():
        return ["name", *axes]
    return axes


def format_time(seconds: float) -> str:
    """A duration with a unit that keeps three to four significant digits readable."""
    if pd.isna(seconds):
        return ""
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def group_table(frame: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """The columns worth showing for one group: its axes, the `extra` run columns asked for (e.g. `torch`), the
    median time (device time of an op, wall time of a step), the host's enqueue time and whether the host was the
    bottleneck, and figures."""
    out = frame.copy()
    if "median_s" in out:
        out["time"] = out["median_s"].map(format_time)
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


def not_measured(frame: pd.DataFrame) -> str:
    """Cases without a timing, counted by status and reason (the reason is the same for whole dtypes)."""
    if "median_s" in frame:
        frame = frame[frame["median_s"].isna()]
    if frame.empty:
        return ""
    reasons = frame.get("reason", pd.Series(None, index=frame.index)).fillna("no reason recorded")
    counts = frame.assign(reason=reasons).groupby(["status", "reason"]).size()
    return "\n".join(f"- {status} ({n} cases): {reason}" for (status, reason), n in counts.items())


def render(frame: pd.DataFrame, fmt: str, extra: tuple[str, ...] = ()) -> str:
    """All groups and devices of the frame as text tables under a heading each."""
    parts = []
    for (group, device), part in frame.groupby([frame["group"].fillna("(no group)"), "device"], sort=True):
        measured = part[part["median_s"].notna()] if "median_s" in part else part.iloc[0:0]
        text = f"## {group} on {device}\n\n"
        if not measured.empty:
            text += tabulate(with_run(group_table(measured, extra), measured), headers="keys", tablefmt=fmt,
                             showindex=False, floatfmt=".4g", missingval="")
        skipped = not_measured(part)
        parts.append(text + (f"\n\nNot measured:\n{skipped}" if skipped else ""))
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    frame = load(args.results, samples=False)
    if args.group:
        frame = frame[frame["group"] == args.group]
    print(render(frame, "github" if args.markdown else "simple", ("torch",) if args.torch else ()))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("table", help="print results as tables, one per suite and device")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown instead of plain text")
    parser.add_argument("--group", help="only this suite (benchmark group)")
    parser.add_argument("--torch", action="store_true", help="add the torch version of each run as a column")
    parser.set_defaults(func=run)
