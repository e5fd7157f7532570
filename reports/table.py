"""`python -m reports table RESULTS...`: one readable table per suite (benchmark group) and device.

A table fits the terminal: a column whose value is the same on every row is said once above the table, long
text wraps, and where that is not enough the least telling figures are left out, named under the table;
`--wide` shows every column as it is. Several runs get a `run` column, and a run cut short says so first. A figure
taken under conditions that can have moved it carries its symbols in a `mark` column (reports/marks.py), which
fitting never leaves out, with a legend line under the table.
"""

from __future__ import annotations

import argparse
import textwrap

import pandas as pd

from reports.format.load import load
from reports.sections.group_tables import FIGURES, group_table, with_run
from reports.text import (
    MARKDOWN,
    fit,
    fitted,
    markdown_text,
    not_measured,
    run_notes,
    terminal_width,
    with_legend,
)

# The figures left out first when a table must fit the terminal (the axes, the run, the time and its mark stay).
DROP_ORDER = ["status", "rel_iqr", "stop_reason", "error_rel", "enqueue", "host_bound", "busy", "algbw_gbps", "gbps",
              "bytes_per_param", "peak_mem_bytes", "pct_peak", "samples_per_s", "scaling_efficiency", "world_size"]


def section(measured: pd.DataFrame, fmt: str, width: int | None, extra: tuple[str, ...] = (),
            wide: bool = False) -> str:
    """One group's table on one device: every column as it is when `wide`, else fitted to `width`."""
    table = with_run(group_table(measured, extra), measured)
    if wide:
        return with_legend(fit(table, fmt, None, floatfmt=".4g"), table, None)
    return fitted(table, measured, fmt, width, {c: 28 for c in table.columns if c not in FIGURES and c != "run"},
                  DROP_ORDER)


def render(frame: pd.DataFrame, fmt: str, extra: tuple[str, ...] = (), width: int | None = None,
           wide: bool = False) -> str:
    """All groups and devices of the frame as text tables under a heading each, after a note per run cut short
    (wrapped at `width`, as the tables are). Markdown (fmt `github`) is never cut to a width: a browser wraps it."""
    width = None if fmt == MARKDOWN else width
    parts = [textwrap.fill(line, width) if width is not None else line for line in run_notes(frame)]
    for (group, device), part in frame.groupby([frame["group"].fillna("(no group)"), "device"], sort=True):
        measured = part[part["median_s"].notna()] if "median_s" in part else part.iloc[0:0]
        heading = f"{group} on {device}"
        text = f"## {markdown_text(heading) if fmt == MARKDOWN else heading}\n\n"
        if not measured.empty:
            text += section(measured, fmt, width, extra, wide)
        skipped = not_measured(part)
        if fmt == MARKDOWN:
            skipped = "\n".join(markdown_text(line) for line in skipped.splitlines())
        if skipped and width is not None:
            skipped = "\n".join(textwrap.fill(line, width, subsequent_indent="  ") for line in skipped.splitlines())
        parts.append(text + (f"\n\nNot measured:\n{skipped}" if skipped else ""))
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    frame = load(args.results, samples=False)
    if args.group:
        frame = frame[frame["group"] == args.group]
    print(render(frame, MARKDOWN if args.markdown else "simple", ("torch",) if args.torch else (), terminal_width(),
                 args.wide))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("table", help="print results as tables, one per suite and device")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown instead of plain text")
    parser.add_argument("--group", help="only this suite (benchmark group)")
    parser.add_argument("--torch", action="store_true", help="add the torch version of each run as a column")
    parser.add_argument("--wide", action="store_true",
                        help="every column on every row, however wide (default: fit the terminal)")
    parser.set_defaults(func=run)
