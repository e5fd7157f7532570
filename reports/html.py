"""`python -m reports html RESULTS... -o DIR`: one self-contained page, DIR/index.html, for a CI artifact.

The page holds the runs it was built from, what each lever of the recipe is worth on each device (levers.py),
the result tables per suite and device (reports/sections/group_tables.py), the devices side by side when there
are several (reports/sections/systems.py), and every suite's PNG plot (reports/plots/registry.py) embedded as a
base64 data URI, so the one file can be mailed or opened from a downloaded artifact without its folder. Every
name and param is HTML-escaped.

It says what it knows: a run cut short is named at the top and in the runs table; several runs of one device
are shown run by run (levers per run, a `run` column in the tables, plots per run), never pooled; a lever
figure levers.py marks uncertain is shown pale, with its interval and why. It says how each figure was taken: the
top counts each run's disturbed cases (reports/marks.py), their rows are shaded with their marks in the tables,
and the plots draw them hollow or hatched.
"""

from __future__ import annotations

import argparse
import base64
import html
import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from reports import acceptances, change, device_peaks, history_html, levers, marks
from reports.format.load import load, output_dir, runs, warn
from reports.format.outputs import refuse_inputs, write_text
from reports.plots import effects, registry, system_bars
from reports.sections import systems
from reports.sections.group_tables import group_table, with_run
from reports.text import constant_columns, not_measured, run_notes, times_are

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1300px; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f2f2f2; } td.num { text-align: right; }
.muted { color: #777; } img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
tr.uncertain td { color: #999; font-style: italic; }
tr.disturbed td { background: #fdf0e0; } p.legend { font-size: 12px; color: #555; margin-top: -1em; }
.scroll { overflow-x: auto; } .scroll td { white-space: nowrap; }
.warning { background: #fff3cd; border: 1px solid #e0c060; padding: 0.5em 1em; }
"""


def esc(value: object) -> str:
    return html.escape(str(value))


def cell_html(value: object) -> str:
    """One cell: escaped text, a float to four significant digits, blank for a missing value (NaN or None, which
    reports/sections/group_tables.py uses for a param a case lacks)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.4g}" if isinstance(value, float) else esc(value)


def frame_html(frame: pd.DataFrame, classes: list[str] | None = None) -> str:
    """A DataFrame as an HTML table, every header and cell escaped; `classes` gives each row a CSS class (empty:
    none), e.g. `disturbed` for a row with a mark, `uncertain` for a lever that says little."""
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    body = "".join(f"<tr{f' class={c}' if c else ''}>" + "".join(f"<td>{cell_html(v)}</td>" for v in row) + "</tr>"
                   for row, c in zip(frame.itertuples(index=False), classes or [""] * len(frame), strict=True))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def marked_html(table: pd.DataFrame) -> str:
    """A results table whose rows with a mark (reports/marks.py) are shaded, with the legend of its marks under
    it."""
    column = table.get(marks.COLUMN)
    classes = None if column is None else ["disturbed" if isinstance(m, str) else "" for m in column]
    key = marks.legend_of(column)
    return frame_html(table, classes) + (f"<p class='legend'>{esc(key)}</p>" if key else "")


def image_html(path: Path) -> str:
    """A PNG embedded as a data URI, captioned with its file name."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{esc(path.name)}" src="data:image/png;base64,{data}">'
            f'<figcaption class="muted">{esc(path.name)}</figcaption></figure>')


def runs_section(frame: pd.DataFrame) -> str:
    listed = runs(frame)
    cut = frame.groupby("file")["incomplete_reason"].first() if "incomplete_reason" in frame else pd.Series()
    listed["complete"] = listed["file"].map(lambda f: f"no: {cut[f]}" if isinstance(cut.get(f), str) else "yes")
    listed["file"] = listed["file"].map(lambda f: Path(f).name)
    listed["commit"] = listed["commit"].map(lambda c: str(c)[:10] if isinstance(c, str) else "")
    listed["datetime"] = listed["datetime"].dt.strftime("%Y-%m-%d %H:%M UTC")
    return "<h2>Runs</h2>" + frame_html(listed[["file", "datetime", "commit", "machine", "device", "complete"]])


def warnings_html(frame: pd.DataFrame) -> str:
    """A run cut short, named first: its tables and plots hold only the cases it finished."""
    return "".join(f"<p class='warning'><b>{esc(line)}</b></p>" for line in run_notes(frame))


def disturbed_html(frame: pd.DataFrame) -> str:
    """How many timed cases of each run carry a mark and which (reports/marks.py), at the top of the page: a
    reader learns whether the figures below are results before reading one; then what each mark means."""
    lines = "".join(f"<p class='{'warning' if c.disturbed else 'muted'}'>{esc(c.text)}</p>"
                    for c in marks.counts(frame))
    key = marks.legend_of(marks.symbols(frame[frame["median_s"].notna()]) if "median_s" in frame else None)
    return lines + (f"<p class='muted'>{esc(key)}. Marked rows are shaded in the tables; marked figures are "
                    "hollow or hatched in the plots.</p>" if key else "")


def per_run(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One device's rows as ('', rows) for one run, else (', run NAME', its rows) per run, oldest first."""
    if rows["file"].nunique() < 2:
        return [("", rows)]
    order = rows.groupby("file", sort=False)["datetime"].first().sort_values(kind="stable").index
    return [(f", run {Path(file).name}", rows[rows["file"] == file]) for file in order]


def peaks_section(frame: pd.DataFrame) -> str:
    """What each device's percentages divide by: the achievable peaks searched on it and its datasheet's."""
    table = device_peaks.readable(device_peaks.peaks(frame))
    if table.empty:
        return ""
    return ("<h2>Peaks: achievable and datasheet</h2><p class='muted'>pct_achievable divides by the achievable "
            "roofline (best gemm per dtype and best copy/triad bandwidth searched on the device); pct_peak by the "
            "datasheet.</p>" + frame_html(table))


def levers_html(table: pd.DataFrame) -> str:
    """The levers table with its uncertain rows marked (pale, italic), every cell escaped."""
    return frame_html(table[levers.COLUMNS], ["uncertain" if u else "" for u in table["uncertain"]])


NO_LEVER_CASES = f"no case of a suite whose cases pair into levers ({', '.join(levers.GROUPS)})"


def levers_section(frame: pd.DataFrame) -> str:
    """What each lever is worth, per device and run; where the results hold no case of a suite the levers pair
    (another project's files), one line that says so instead of every lever "not measured"."""
    parts = ["<h2>Levers: what each one is worth here</h2>",
             "<p class='muted'>Cases that differ only in the lever are paired; the effect is the geometric mean "
             "of the ratio over the pairs, with its 95 % interval (from each case's run-to-run noise: its rounds, "
             f"or {change.ASSUMED_NOISE_PCT:g} % assumed without them, and the spread of the pairs) and its range "
             "over the pairs, and the verdict of the rule "
             "<code>compare</code> uses. Speed-up above 1 means the lever makes it faster; a memory or TFLOP/s "
             "ratio reads variant / baseline. Pairs with a case that did not converge, ran throttled or under "
             "host contention are left out; <i>pale rows are uncertain</i>: every pair was doubtful, the verdict "
             "cannot tell, or the interval spans more than a factor of "
             f"{levers.WIDE_FACTOR:g}.</p>"]
    if not levers.holds_lever_cases(frame):  # another project: 21 levers "not measured" per machine said nothing
        return parts[0] + f"<p class='muted'>The files hold {esc(NO_LEVER_CASES)}: no lever to show.</p>"
    for device, rows in frame.groupby("device", sort=True):
        for run, part in per_run(rows):
            shown = levers_html(levers.table(part)) if levers.holds_lever_cases(part) else \
                f"<p class='muted'>This run holds {esc(NO_LEVER_CASES)}.</p>"
            parts.append(f"<h3>{esc(device)}{esc(run)}</h3>" + shown)
    return "".join(parts)


def timed(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with a time."""
    return frame[frame["median_s"].notna()] if "median_s" in frame else frame.iloc[:0]


def groups_of(frame: pd.DataFrame) -> pd.core.groupby.DataFrameGroupBy:
    """The frame by (group, device), the results tables' order."""
    return frame.groupby([frame["group"].fillna("(no group)"), "device"], sort=True)


def times_said(frame: pd.DataFrame) -> set[str]:
    """What the times of each group of the results are (reports/text.py, `times_are`), once each."""
    return {times_are(rows) for _, rows in groups_of(timed(frame))}


def times_html(frame: pd.DataFrame) -> str:
    """What the page's times are, said once where every group's timer says the same (`device time per call (CUDA
    events)`, or pytest-benchmark's wall-clock timer for another project's files); else that each group says."""
    said = times_said(frame)
    if len(said) == 1:
        return f"Times are medians of {said.pop()}."
    return "Times are medians per call, taken by different timers: each group of the results says which." if said \
        else ""


def results_section(frame: pd.DataFrame) -> str:
    parts = ["<h2>Results</h2>"]
    mixed = len(times_said(frame)) > 1  # then each group says what its times are
    for (group, device), part in groups_of(frame):
        parts.append(f"<h3>{esc(group)} on {esc(device)}</h3>")
        measured = timed(part)
        if not measured.empty:
            table, same = constant_columns(with_run(group_table(measured), measured))
            parts.append((f"<p class='muted'>Times are medians of {esc(times_are(measured))}.</p>" if mixed else "")
                         + (f"<p class='muted'>{esc(same)}</p>" if same else "")
                         + f"<div class='scroll'>{marked_html(table)}</div>")
        skipped = not_measured(part)
        if skipped:
            items = "".join(f"<li>{esc(line.removeprefix('- '))}</li>" for line in skipped.splitlines())
            parts.append(f"<p>Not measured:</p><ul>{items}</ul>")
    return "".join(parts)


def hardware_section(frame: pd.DataFrame, baseline: str | None, outdir: Path) -> str:
    """The devices side by side, only when the results hold more than one: what each lever is worth on each,
    then per suite the picture of the same cases beside their table."""
    if "median_s" not in frame or frame["median_s"].isna().all():
        return ""  # nothing timed: the page still lists what failed and why
    rows, base = systems.side_by_side(frame, baseline)
    common = systems.shared(rows)
    if common.empty:
        return ""
    output_dir(outdir)
    parts = [f"<h2>Devices side by side</h2><p>Speed-up against {esc(base)} (baseline time / time), for the "
             f"cases measured on more than one system.</p>"]
    if levers_png := effects.plot(rows, outdir):
        parts.append(image_html(levers_png))
    for group, part in common.groupby(common["group"].fillna("(no group)"), sort=True):
        parts.append(f"<h3>{esc(group)}</h3>")
        if bars := system_bars.bar_plot(str(group), part, base, outdir):
            parts.append(image_html(bars))
        parts.append(marked_html(systems.table(part)))
    return "".join(parts)


def suite_plots(frame: pd.DataFrame, outdir: Path) -> tuple[list[tuple[str | None, list[Path]]], list[str]]:
    """Every plot of registry.PLOTTERS, run by run as registry.write_all draws them, but one plotter at a
    time, so that a plotter that fails costs the page its own plots only: the nightly report is most needed when
    something broke. Returns the PNGs per run (None: one pass) and one line per failed plotter (also warned)."""
    output_dir(outdir)
    images, failures = [], []
    for run, part in registry.by_run(frame):
        drawn = []
        for module in registry.PLOTTERS:
            try:
                drawn += module.plots(part, registry.run_folder(outdir, run))
            except Exception as exc:  # a plotter's bug is reported on the page, the rest of the report stands
                failures.append(f"{module.__name__}: {type(exc).__name__}: {exc}")
                warn(f"html: plots of {failures[-1]}")
        images.append((run, drawn))
    return images, failures


def plots_html(images: list[tuple[str | None, list[Path]]], failures: list[str]) -> str:
    parts = [(f"<h3>Run {esc(run)}</h3>" if run else "") + "".join(image_html(p) for p in drawn)
             for run, drawn in images if drawn]
    shown = "".join(parts) or "<p class='muted'>No plot for these suites.</p>"
    return shown + "".join(f"<p><b>Plot failed</b>: {esc(line)}</p>" for line in failures)


def page(frame: pd.DataFrame, outdir: Path, baseline: str | None = None,
         accepted: list[acceptances.Record] | None = None) -> str:
    """The whole report as one HTML string; its plots are written under outdir and embedded. Over a history
    (reports/history_html.py) the history section comes first and the other sections show each machine's newest
    run."""
    history, runs = "", frame["file"].nunique()
    if history_html.applies(frame):
        history = history_html.section(frame, accepted or [], outdir / "history", baseline)
        frame = history_html.snapshot(frame)
        history += (f"<h2>Newest run of each machine</h2><p class='muted'>The sections below show the newest run of "
                    f"each machine ({frame['file'].nunique()} of the {runs} runs above).</p>")
    plot_html = plots_html(*suite_plots(frame, outdir / "plots"))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (f"<h1>GPU efficiency levers: benchmark report</h1><p class='muted'>Generated {stamp} from "
            f"{runs} run(s). {esc(times_html(frame))}</p>"
            + history + warnings_html(frame) + disturbed_html(frame) + runs_section(frame) + levers_section(frame)
            + hardware_section(frame, baseline, outdir / "plots") + peaks_section(frame)
            + "<h2>Plots</h2>" + plot_html + results_section(frame))
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Benchmark report</title>"
            f"<style>{STYLE}{history_html.STYLE if history else ''}</style></head><body>{body}</body></html>")


def write(frame: pd.DataFrame, outdir: Path, baseline: str | None = None,
          accepted: list[acceptances.Record] | None = None) -> Path:
    return write_text(output_dir(outdir) / "index.html", page(frame, outdir, baseline, accepted))


def run(args: argparse.Namespace) -> int:
    refuse_inputs("-o", [args.out, Path(args.out) / "index.html"], args.results)
    output_dir(args.out)
    print(write(load(args.results, samples=False), Path(args.out), args.baseline, acceptances.of_paths(args.results)))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("html", help="one self-contained HTML report page")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("-o", "--out", default="report", help="output directory (default: report)")
    parser.add_argument("--baseline", help="device the side-by-side speed-ups (and a history's pictures across "
                        "machines) are measured against")
    parser.set_defaults(func=run)
