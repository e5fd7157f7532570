"""`python -m reports history DIR`: each case's level over the stored runs, the steps in it, and trend plots.

The series are reports/timeline.py's: runs ordered by their `datetime`, one series per machine identity
(`machine_id`: a GPU's UUID, so two boxes of one GPU model are two histories, as are a 1-thread and a 2-thread
CPU run), labelled by the device name, with the machine beside it when one device name has several; a run's level
is the figure the nightly gate judges (the median of its round medians). Steps are the gate's own judgement
(reports/judge.py) replayed night by night, with the acceptances kept in the directories given
(reports/accept.py), so that `history`, the gate and the history page name the same steps: each is named by the
run where the new level starts (its date, commit and file, what a person bisecting needs, and the torch upgrade
when one happened there) and, where it was accepted, why. A change is a step once it has held `judge.PERSIST`
nights (more for a case that has come back from longer moves) after a level of as many: a one-night spike is none.
A run whose figure of the case carries a mark (reports/marks.py: contended, unconverged, throttled, above peak) is
counted in the table's `mark` column and drawn hollow in the plots: a step that starts on a busy night reads as
such.

`-o` draws the pictures of the HTML page's history section (reports/plots/levels.py: legend, noise band,
robust scale with spikes at the edge): one figure of small multiples per group and machine, and one figure per
case with a step. A group with a single run on a machine has no trend to draw, and the command says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from reports import acceptances, judge, marks
from reports.format.load import load, output_dir
from reports.format.outputs import refuse_inputs
from reports.plots import levels
from reports.text import MARKDOWN, file_stem, fit, format_time, percent
from reports.timeline import Trend, trends


def table_rows(found: list[Trend]) -> list[dict]:
    return [{"case": t.case, "device": t.device, "runs": len(t.runs),
             "first": format_time(t.levels[0]), "last": format_time(t.levels[-1]),
             marks.COLUMN: t.marked, "steps": t.describe_steps() or "none"} for t in found]


def legend(found: list[Trend]) -> str:
    """The legend of the marks the listed cases' runs carry, under the table."""
    key = marks.legend(marks.present(m for t in found for m in t.runs["marks"]))
    return f"{key} (a mark counts the case's runs that carry one)" if key else ""



def plots(found: list[Trend], outdir: Path) -> tuple[list[Path], list[str]]:
    """A picture of small multiples per group and machine and one per case with a step; and a line for each group
    with a single run on its machine, which has no trend to draw."""
    output_dir(outdir)
    written = [levels.write_figure(levels.case_panel(t), f"{t.case} on {t.device}: {t.describe_steps()}",
                                     outdir / f"history_step_{file_stem(t.device, t.case)}.png")
               for t in found if t.steps]
    keyed: dict[tuple[str, str], list[Trend]] = {}
    for t in found:
        keyed.setdefault((str(t.group), t.device), []).append(t)
    single = []
    for (group, device), part in sorted(keyed.items()):
        files = {f for t in part for f in t.runs["file"]}
        if len(files) < 2:
            single.append(f"{group} on {device}: one run ({Path(next(iter(files))).name}), no trend to draw")
            continue
        panels = [(t.case, levels.case_panel(t)) for t in sorted(part, key=lambda t: t.case)]
        written.append(levels.write_grid(panels, f"{group} on {device}: level per run over {len(files)} runs",
                                           outdir / f"history_{file_stem(group, device)}.png"))
    return written, single


def run(args: argparse.Namespace) -> int:
    if args.out:
        refuse_inputs("-o", [args.out], args.results)
        output_dir(args.out)  # checked before any work: an unusable folder is not found after the report
    frame = load(args.results, samples=False)
    if args.group:
        frame = frame[frame["group"] == args.group]
    found = trends(frame, args.min_effect, acceptances.of_paths(args.results))
    stepped = sum(bool(t.steps) for t in found)
    runs = frame["file"].nunique()
    print(f"{len(found)} case histories over {runs} runs; {stepped} with a step of at least {args.min_effect:g} % "
          f"that held {judge.PERSIST} runs or more\n")
    longest = max(len(t.runs) for t in found)
    if longest < judge.SETTLED + judge.PERSIST:
        print(f"no step can be named: a step needs {judge.SETTLED} runs before it and {judge.PERSIST} after, and the "
              "longest history here has "
              f"{longest} run{'s' if longest != 1 else ''} (compare two runs with `python -m reports compare`)\n")
    shown = found if args.all else [t for t in found if t.steps]
    if shown:
        print(fit(pd.DataFrame(table_rows(shown)), MARKDOWN if args.markdown else "simple", None))
        if key := legend(shown):
            print(f"\n{key}")
    if args.out:
        written, single = plots(found, Path(args.out))
        for line in [*single, *map(str, written)]:
            print(line)
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
