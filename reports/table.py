"""`python -m reports table RESULTS...`: one readable table per suite (benchmark group) and device.

A table fits the terminal: a column whose value is the same on every row is said once above the table, long
text wraps, and where that is not enough the least telling figures are left out, named under the table;
`--wide` shows every column as it is. Several runs get a `run` column, and a run cut short says so first. A figure
taken under conditions that can have moved it carries its symbols in a `mark` column (reports/marks.py), which
fitting never leaves out, with a legend line under the table.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from reports import marks
from reports.format.load import load

# A suite's axes are its cases' params (in the order the cases name them), then the figures below that the
# group has; absent columns are left out, never filled in.
FIGURES = ["world_size", "time", marks.COLUMN, "enqueue", "host_bound", "busy", "tflops", "pct_peak", "pct_achievable",
           "gbps", "algbw_gbps", "busbw_gbps", "samples_per_s", "tokens_per_s", "scaling_efficiency", "mfu",
           "peak_mem_bytes", "bytes_per_param", "error_rel", "stop_reason", "rel_iqr", "status"]
# The figures left out first when a table must fit the terminal (the axes, the run, the time and its mark stay).
DROP_ORDER = ["status", "rel_iqr", "stop_reason", "error_rel", "enqueue", "host_bound", "busy", "algbw_gbps", "gbps",
              "bytes_per_param", "peak_mem_bytes", "pct_peak", "samples_per_s", "scaling_efficiency", "world_size"]
SOFT_WRAP = 24  # narrowest a wrapped text column gets before columns are left out
MIN_WRAP = 12  # narrowest it gets at all


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


def terminal_width() -> int:
    """The terminal's width in characters (COLUMNS when set; 120 when the output is not a terminal, e.g. a CI log)."""
    return shutil.get_terminal_size((120, 24)).columns


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fit(table: pd.DataFrame, fmt: str, width: int | None, wrap: dict[str, int | tuple[int, int]] | None = None,
        drop_order: list[str] | tuple[str, ...] = (), **options: object) -> str:
    """The table as text no wider than `width` (None: as wide as it comes). Until it fits: the `wrap` columns
    (text) wrap at their width, narrowing down to their soft minimum (`(width, soft)`, else SOFT_WRAP), then the
    `drop_order` columns are left out one by one (named under the table), then the wrapped columns narrow down
    to MIN_WRAP."""
    options = {"headers": "keys", "tablefmt": fmt, "showindex": False, "missingval": ""} | options

    def draw(frame: pd.DataFrame, limits: dict[str, int]) -> str:
        widths = [limits.get(c) for c in frame.columns]
        return tabulate(frame, maxcolwidths=widths if any(widths) else None, **options)

    def narrower(limits: dict[str, int], floors: dict[str, int]) -> dict[str, int] | None:
        if all(w <= floors[c] for c, w in limits.items()):
            return None
        return {c: max(floors[c], w * 3 // 4) for c, w in limits.items()}

    if width is None:
        return draw(table, {})
    given = {c: w if isinstance(w, tuple) else (w, min(w, SOFT_WRAP)) for c, w in (wrap or {}).items() if c in table}
    limits = {c: w for c, (w, _) in given.items()}
    soft, hard = {c: s for c, (_, s) in given.items()}, dict.fromkeys(given, MIN_WRAP)
    droppable = [c for c in drop_order if c in table]
    shown, dropped = table, []
    text = draw(shown, limits)
    while _widest(text) > width:
        if (smaller := narrower(limits, soft)) is not None:
            limits = smaller
        elif droppable:
            dropped.append(droppable.pop(0))
            shown = shown.drop(columns=dropped[-1])
        elif (smaller := narrower(limits, hard)) is not None:
            limits = smaller
        else:
            break
        text = draw(shown, limits)
    if dropped:
        text += "\n" + textwrap.fill(f"(left out to fit {width} characters: {', '.join(dropped)}; --wide shows every "
                                     "column)", width)
    return text


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


KEEP = ("time", marks.COLUMN, "run")  # columns kept as columns even when one value fills them


def constant_columns(table: pd.DataFrame, keep: tuple[str, ...] = KEEP) -> tuple[pd.DataFrame, str]:
    """The table without the columns that hold one value on every row, and that value of each as one line
    (`same on every row: model gpt-tiny, compile off`); a table of one row is left as it is."""
    if len(table) < 2:
        return table, ""
    same = [c for c in table.columns if c not in keep and table[c].notna().all()
            and table[c].astype(str).nunique() == 1]
    if not same:
        return table, ""
    said = ", ".join(f"{c} {table[c].iloc[0]}" for c in same)
    return table.drop(columns=same), f"same on every row: {said}"


def run_notes(frame: pd.DataFrame) -> list[str]:
    """One line per run that was cut short: a table of it holds only the cases it finished."""
    if "incomplete_reason" not in frame:
        return []
    cut = frame[frame["incomplete_reason"].notna()].groupby("file", sort=False)["incomplete_reason"].first()
    return [f"INCOMPLETE run {Path(file).name}: {reason}; it holds only the cases it finished"
            for file, reason in cut.items()]


def not_measured(frame: pd.DataFrame) -> str:
    """Cases without a timing, counted by status and reason (the reason is the same for whole dtypes)."""
    if "median_s" in frame:
        frame = frame[frame["median_s"].isna()]
    if frame.empty:
        return ""
    reasons = frame.get("reason", pd.Series(None, index=frame.index)).fillna("no reason recorded")
    counts = frame.assign(reason=reasons).groupby(["status", "reason"]).size()
    return "\n".join(f"- {status} ({n} cases): {reason}" for (status, reason), n in counts.items())


def by_case(table: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The table with its axes replaced by one `case` column (the case id without its group), for a suite with
    more axes than a terminal holds (train_step's levers)."""
    axes = [c for c in axes_of(measured) if c in table]
    group = measured["group"].fillna("").astype(str) + "/"
    cases = [str(c).removeprefix(g) for c, g in zip(measured["case"], group, strict=True)]
    shown = table.drop(columns=axes)
    shown.insert(1 if "run" in shown else 0, "case", cases)
    return shown


def with_legend(text: str, table: pd.DataFrame, width: int | None) -> str:
    """The table's text with the legend of its marks under it (none for a clean table)."""
    key = marks.legend_of(table.get(marks.COLUMN), width)
    return f"{text}\n\n{key}" if key else text


def fitted(table: pd.DataFrame, rows: pd.DataFrame, fmt: str, width: int | None, wrap: dict[str, int],
           drop_order: list[str]) -> str:
    """One group's table fitted to `width` (None: markdown, which a browser wraps): the constant columns said once
    above it, then `fit` with the `wrap` and `drop_order` columns; where the axes alone are too wide, the case id
    of `rows` (the table's rows, in its order) stands in for them, and the table says so. The legend of its marks
    goes under it."""
    shown, head = constant_columns(table)
    text = fit(shown, fmt, width, wrap={c: w for c, w in wrap.items() if c in shown}, drop_order=drop_order,
               floatfmt=".4g")
    if width is not None and _widest(text) > width:
        text = fit(by_case(shown, rows), fmt, width, wrap={"case": (48, 32)}, drop_order=drop_order,
                   floatfmt=".4g") + "\n" + textwrap.fill("(each case named by its id: its params do not fit; --wide "
                                                          "shows them)", width)
    text = with_legend(text, table, width)
    head = textwrap.fill(head, width) if head and width is not None else head
    return f"{head}\n\n{text}" if head else text


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
    width = None if fmt == "github" else width
    parts = [textwrap.fill(line, width) if width is not None else line for line in run_notes(frame)]
    for (group, device), part in frame.groupby([frame["group"].fillna("(no group)"), "device"], sort=True):
        measured = part[part["median_s"].notna()] if "median_s" in part else part.iloc[0:0]
        text = f"## {group} on {device}\n\n"
        if not measured.empty:
            text += section(measured, fmt, width, extra, wide)
        skipped = not_measured(part)
        if skipped and width is not None:
            skipped = "\n".join(textwrap.fill(line, width, subsequent_indent="  ") for line in skipped.splitlines())
        parts.append(text + (f"\n\nNot measured:\n{skipped}" if skipped else ""))
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    frame = load(args.results, samples=False)
    if args.group:
        frame = frame[frame["group"] == args.group]
    print(render(frame, "github" if args.markdown else "simple", ("torch",) if args.torch else (), terminal_width(),
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
