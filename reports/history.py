"""`python -m reports history DIR`: each case's median over the stored runs, the steps in it, and trend plots.

Runs are ordered by their `datetime`; a case's series is kept per machine identity (`machine_id`: a GPU's UUID,
so two boxes of one GPU model are two histories, as are a 1-thread and a 2-thread CPU run), labelled by the
device name, with the machine beside it when one device name has several. Steps come from `reports.stats.steps`
(a penalized piecewise-constant fit, as asv does) and are named by the run where the new level starts: its date,
commit and file, which is what a person bisecting needs, and the torch upgrade when one happened there. A change
is a step once it has lasted `stats.MIN_RUNS` runs, with as many before it: a one-night spike is none, and a
history too short to hold one says so rather than naming every difference between two runs. A run whose figure
of the case carries a mark (reports/marks.py: contended, unconverged, throttled, above peak) is counted in the
table's `mark` column and drawn as a hollow point in the plots: a step that starts on a busy night reads as such.
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from tabulate import tabulate

from reports import marks
from reports.format.errors import InputError
from reports.format.load import load, output_dir
from reports.plots.style import hollow_entry, hollow_points, text
from reports.stats import MIN_RUNS, LevelShift, fitted, steps
from reports.text import format_time, percent, slug


@dataclass
class Trend:
    """One case's history on one device: the runs in order, their medians, and the steps found."""

    case: str
    group: str | None
    device: str
    runs: pd.DataFrame  # datetime, commit, file, median_s, q1_s, q3_s, marks (reports/marks.py); oldest first
    steps: list[LevelShift]

    @property
    def marked(self) -> str | None:
        """The symbols of the marks the case's runs carry and in how many runs (`cu in 3 of 8 runs`), None when
        no run of it was disturbed."""
        found = self.runs["marks"]
        if not found.map(bool).any():
            return None
        symbols = "".join(m.symbol for m in marks.present(found))
        return f"{symbols} in {int(found.map(bool).sum())} of {len(found)} runs"

    def run_label(self, index: int) -> str:
        run = self.runs.iloc[index]
        when = run["datetime"].strftime("%Y-%m-%d %H:%M") if pd.notna(run["datetime"]) else "no date"
        commit = str(run["commit"])[:8] if isinstance(run["commit"], str) else "no commit"
        return f"{when} {commit} ({Path(run['file']).name})"

    def software_change(self, index: int) -> str:
        """` (torch A -> B)` when the torch version changed at this run, a likely cause of a step there."""
        if "torch_version" not in self.runs or index == 0:
            return ""
        before, after = self.runs["torch_version"].iloc[index - 1], self.runs["torch_version"].iloc[index]
        return f" (torch {before} -> {after})" if before != after else ""

    def describe_steps(self) -> str:
        return "; ".join(f"{(s.ratio - 1) * 100:+.1f} % at {self.run_label(s.at)}{self.software_change(s.at)}"
                         for s in self.steps)


def series_labels(frame: pd.DataFrame) -> pd.Series:
    """Each row's series label: its device, plus the machine when one device name ran on several machines."""
    machines = frame.groupby("device")["machine_id"].nunique()
    shared = frame["device"].isin(machines[machines > 1].index)
    return frame["device"].where(~shared, frame["device"] + " [" + frame["machine_id"].astype(str) + "]")


def trends(frame: pd.DataFrame, min_effect_pct: float = 5.0) -> list[Trend]:
    """A Trend per (machine, case) with at least one timing; cases with steps first, then by group and case."""
    measured = frame[frame["median_s"] > 0] if "median_s" in frame else frame.iloc[:0]
    if measured.empty:
        raise InputError("history: the results hold no timed case")
    columns = [c for c in ("datetime", "commit", "file", "median_s", "q1_s", "q3_s", "torch_version") if c in measured]
    measured = measured[["machine_id", "case", "group", *columns]].assign(
        series=series_labels(measured), marks=marks.per_row(measured))  # the columns a trend keeps, and its marks
    columns.append("marks")
    out = []
    for (_, case), part in measured.groupby(["machine_id", "case"], sort=True):
        series = part.sort_values(["datetime", "file"], kind="stable")[columns].reset_index(drop=True)
        out.append(Trend(case, part["group"].iloc[0], part["series"].iloc[0], series,
                         steps(series["median_s"].to_numpy(), min_effect_pct / 100)))
    return sorted(out, key=lambda t: (not t.steps, str(t.group), t.case, t.device))


def table_rows(found: list[Trend]) -> list[dict]:
    return [{"case": t.case, "device": t.device, "runs": len(t.runs),
             "first": format_time(t.runs["median_s"].iloc[0]), "last": format_time(t.runs["median_s"].iloc[-1]),
             marks.COLUMN: t.marked, "steps": t.describe_steps() or "none"} for t in found]


def legend(found: list[Trend]) -> str:
    """The legend of the marks the listed cases' runs carry, under the table."""
    key = marks.legend(marks.present(m for t in found for m in t.runs["marks"]))
    return f"{key} (a mark counts the case's runs that carry one)" if key else ""


def file_stem(*names: str) -> str:
    """A file name for these names that no other names get: slugs (lossy: `a/b` and `a:b` give one slug, and
    are cut at 120 characters) joined, then a short hash of the names themselves."""
    digest = hashlib.sha1("\0".join(names).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return "_".join(slug(n)[:100] for n in names) + f"_{digest}"


def plot_step(trend: Trend, outdir: Path) -> Path:
    """One case: the run medians with their IQR, the fitted levels, and each step marked with its run."""
    runs = trend.runs
    x = np.arange(len(runs))
    fig, ax = plt.subplots(figsize=(9, 4))
    if "q1_s" in runs and runs["q1_s"].notna().all():
        ax.fill_between(x, runs["q1_s"], runs["q3_s"], alpha=0.2, label="IQR of the run's samples")
    hollow_points(ax, ax.plot(x, runs["median_s"], "o-", ms=4, label="median per run")[0], runs["marks"].map(bool))
    ax.step(x, fitted(runs["median_s"], trend.steps), where="post", color="k", lw=1, label="fitted levels")
    for s in trend.steps:
        ax.axvline(s.at - 0.5, color="r", ls="--", lw=1)
        ax.annotate(text(f"{(s.ratio - 1) * 100:+.0f} %\n{trend.run_label(s.at)}"), (s.at - 0.5, ax.get_ylim()[1]),
                    fontsize=7, va="top", ha="right", color="r")
    ax.set(xlabel="run (oldest first)", ylabel="median time (s)", title=text(f"{trend.case} on {trend.device}"))
    ax.legend(handles=[*ax.get_legend_handles_labels()[0], *hollow_entry(list(runs["marks"]))], fontsize=7,
              loc="lower left")
    fig.tight_layout()
    path = outdir / f"history_step_{file_stem(trend.device, trend.case)}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_group(group: str, device: str, found: list[Trend], outdir: Path) -> Path:
    """Every case of a group on a device, each relative to its first run, so drifts and steps stand out."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for t in found:
        times = t.runs["datetime"] if t.runs["datetime"].notna().all() else np.arange(len(t.runs))
        line = ax.plot(times, t.runs["median_s"] / t.runs["median_s"].iloc[0], "-", lw=1, marker="o", ms=3.5,
                       alpha=1.0 if t.steps else 0.35, label=text(t.case) if t.steps else None)[0]
        hollow_points(ax, line, t.runs["marks"].map(bool))
    ax.axhline(1, color="k", lw=0.5)
    ax.set(ylabel="median / first run's median", title=text(f"{group} on {device}: trend per case (cases with a step "
           "in colour)"))
    handles = [*ax.get_legend_handles_labels()[0], *hollow_entry([m for t in found for m in t.runs["marks"]])]
    if handles:
        ax.legend(handles=handles, fontsize=6, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    path = outdir / f"history_{file_stem(group, device)}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plots(found: list[Trend], outdir: Path) -> list[Path]:
    """A trend plot per group and device, and one plot per case with a step."""
    output_dir(outdir)
    written = [plot_step(t, outdir) for t in found if t.steps]
    keyed: dict[tuple[str, str], list[Trend]] = {}
    for t in found:
        keyed.setdefault((str(t.group), t.device), []).append(t)
    return written + [plot_group(g, d, ts, outdir) for (g, d), ts in sorted(keyed.items())]


def run(args: argparse.Namespace) -> int:
    if args.out:
        output_dir(args.out)  # checked before any work: an unusable folder is not found after the report
    frame = load(args.results, samples=False)
    if args.group:
        frame = frame[frame["group"] == args.group]
    found = trends(frame, args.min_effect)
    stepped = sum(bool(t.steps) for t in found)
    runs = frame["file"].nunique()
    print(f"{len(found)} case histories over {runs} runs; {stepped} with a step of at least {args.min_effect:g} % "
          f"lasting {MIN_RUNS} runs or more\n")
    longest = max(len(t.runs) for t in found)
    if longest < 2 * MIN_RUNS:
        print(f"no step can be named: a step needs {MIN_RUNS} runs on each side, and the longest history here has "
              f"{longest} run{'s' if longest != 1 else ''} (compare two runs with `python -m reports compare`)\n")
    shown = found if args.all else [t for t in found if t.steps]
    if shown:
        print(tabulate(table_rows(shown), headers="keys", tablefmt="github" if args.markdown else "simple"))
        if key := legend(shown):
            print(f"\n{key}")
    if args.out:
        for path in plots(found, Path(args.out)):
            print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("history", help="trend per case over stored runs, with step detection")
    parser.add_argument("results", nargs="+", help="directory of stored runs (e.g. .benchmarks/) or JSON files")
    parser.add_argument("--min-effect", type=percent, default=5.0,
                        help="smallest step to report, percent (default 5)")
    parser.add_argument("--group", help="only this suite (benchmark group)")
    parser.add_argument("--all", action="store_true", help="list every case, not only those with a step")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown table")
    parser.add_argument("-o", "--out", help="write trend plots (PNG) into this directory")
    parser.set_defaults(func=run)
