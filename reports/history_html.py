"""The history section of the HTML page: what moved, and every case's level over the runs, per suite and machine.

`python -m reports html DIR` over a history (a machine with `HISTORY_RUNS` runs or more: a nightly history
directory, or several machines' directories) puts this section first. Its top answers the morning's question:
per machine, how the newest run fared against the runs the nightly gate judges it by (reports/timeline.py
`Gate`, which is reports/comparison.py itself), the cases that moved in it (slower, not judged, faster; worst first)
and the open steps (each series' latest step, the largest slowdown first), each linking to its picture. Then per
machine and suite, small multiples: one picture per case (reports/plots/levels.py), the cases with news first,
each in its own figure so that a summary row links to it and a browser's find reaches it by its name; a suite
with a single run on a machine says so instead. With several machines, each case they share is drawn once more
with every machine on one picture, normalised to one machine (`--baseline`, else the first).

The judgement is the gate's (reports/judge.py) over every run of each machine, with the acceptances kept in the
folders given (reports/accept.py): the page lists them, with the step each closed, so that a reader sees why a
level that rose is the reference now.

Speed (a year of nightly runs, a few hundred cases): the files are loaded without raw samples, levels and marks
are worked out column-wise, and the pictures are drawn on one reused figure; `tools/bench_history_page.py`
measures it.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reports import acceptances, judge, timeline
from reports.format.load import output_dir
from reports.plots import levels
from reports.plots.levels import Panel
from reports.sections.systems import choose
from reports.text import file_stem, format_time
from reports.verdicts import Verdict

HISTORY_RUNS = 3  # a page over a machine with this many runs is a history page


def esc(value: object) -> str:
    return html.escape(str(value))


def applies(frame: pd.DataFrame) -> bool:
    """Whether the results are a history: some machine has HISTORY_RUNS runs or more (copies counted once)."""
    runs = timeline.without_copies(frame).groupby("machine_id")["file"].nunique()
    return bool((runs >= HISTORY_RUNS).any())


@dataclass
class Figure:
    """One picture of the section: its anchor on the page (and its file's name), its caption and what it draws."""

    anchor: str
    caption: str
    panel: Panel
    news: str = ""  # `slower` / `not judged` / `faster` / `step`: why it is shown first and framed
    size: float = 0.0  # how far it moved (|log ratio| of the gate's verdict, else of its latest step)


@dataclass
class History:
    """Everything the section shows, worked out before any HTML is written (tests read it)."""

    rows: pd.DataFrame  # timeline.prepared
    runs: pd.DataFrame  # timeline.run_table, with `reference`
    trends: list[timeline.Trend]
    gates: list[timeline.Gate]
    moved: list[tuple[timeline.Gate, Verdict]]
    steps: list[timeline.Trend]
    figures: dict[str, list[Figure]]  # per (machine label, group) heading: its pictures, or none
    single: dict[str, str]  # heading -> why it has no picture (one run)
    across: dict[str, list[Figure]]  # per group: the cases several machines share
    reference_machine: str | None
    accepted: list[acceptances.Record]


def anchor(device: str, case: str) -> str:
    """The id of a case's picture on the page (and its file name): unique, and safe in a URL."""
    return "h-" + file_stem(device, case)


def heading_id(heading: str) -> str:
    return "s-" + file_stem(heading)


def news(trend: timeline.Trend, verdict: Verdict | None) -> tuple[str, float]:
    """Why a picture is shown first (the gate's verdict on the newest run, else a step) and how large the news is."""
    found = levels.verdict_name(verdict)
    if found:
        return found, abs(math.log(verdict.ratio))
    return ("step", abs(math.log(trend.steps[-1].ratio))) if trend.steps else ("", 0.0)


NEWS_ORDER = {"slower": 0, "not judged": 1, "step": 2, "faster": 3, "": 4}


def build(frame: pd.DataFrame, accepted: list[acceptances.Record], baseline: str | None = None,
          min_effect_pct: float = 5.0) -> History:
    """The section's data and what each picture draws; `draw` writes the pictures (most of the section's time: a
    reader of the data alone, as the tests are, does not pay it)."""
    rows = timeline.prepared(frame)
    found = timeline.series(rows, min_effect_pct, accepted)
    gates = timeline.gate(frame, accepted)
    used = timeline.reference_files(gates)
    verdicts = {(g.machine, case): v for g in gates for case, v in g.verdicts.items()}
    figures: dict[str, list[Figure]] = {}
    single: dict[str, str] = {}
    runs_of = rows.groupby(["series", "group"])["file"].unique()
    for (device, group), files in runs_of.items():
        heading = f"{group} on {device}"
        part = [t for t in found if t.device == device and t.group == group]
        if len(files) < 2:
            when = rows.loc[rows["file"] == files[0], "datetime"].iloc[0]
            single[heading] = (f"One run of this suite on this machine ({Path(files[0]).name}, "
                               f"{timeline.stamp(when)} UTC): no history to draw yet; its figures are in the "
                               "results below.")
            continue
        drawn = []
        for t in part:
            verdict = verdicts.get((t.machine, t.case))
            drawn.append(Figure(anchor(t.device, t.case), t.case, levels.case_panel(t, verdict),
                                *news(t, verdict)))
        figures[heading] = sorted(drawn, key=lambda f: (NEWS_ORDER[f.news], -f.size, f.caption))
    across, reference = machines(found, baseline)
    table = timeline.run_table(rows)
    table["reference"] = table["file"].isin(used)
    return History(rows, table, found, gates, timeline.moved(gates), timeline.open_steps(found), figures, single,
                   across, reference, accepted)


def machines(found: list[timeline.Trend], baseline: str | None) -> tuple[dict[str, list[Figure]], str | None]:
    """Per group, a picture of each case measured on several machines, normalised to the reference machine."""
    labels = list(dict.fromkeys(t.device for t in found))
    if len(labels) < 2:
        return {}, None
    reference = choose(labels, baseline)
    by_case: dict[str, list[timeline.Trend]] = {}
    for t in found:
        by_case.setdefault(t.case, []).append(t)
    across: dict[str, list[Figure]] = {}
    for case, part in sorted(by_case.items()):
        base = next((t for t in part if t.device == reference), None)
        if base is None or len(part) < 2:
            continue
        part = [base, *(t for t in part if t is not base)]
        figure = Figure("x-" + file_stem(case), case, levels.machines_panel(part, base))
        across.setdefault(str(base.group), []).append(figure)
    return across, reference


def draw(history: History, outdir: Path) -> dict[str, Path]:
    """Every picture of the section written under outdir, by its anchor (one canvas for all: levels.Canvas)."""
    output_dir(outdir)
    canvas = levels.Canvas()
    shown = [f for figures in [*history.figures.values(), *history.across.values()] for f in figures]
    return {f.anchor: canvas.write(f.panel, outdir / f"{f.anchor}.png") for f in shown}


def image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def figure_html(figure: Figure, pictures: dict[str, Path]) -> str:
    framed = f" class='news {figure.news.replace(' ', '-')}'" if figure.news else ""
    return (f"<figure id='{figure.anchor}'{framed}>{image(pictures[figure.anchor], figure.caption)}<figcaption><b>"
            f"{esc(figure.caption)}</b><br><span class='muted'>{esc(figure.panel.note)}</span></figcaption></figure>")


def link(device: str, case: str) -> str:
    return f"<a href='#{anchor(device, case)}'>{esc(case)}</a>"


def gate_line(gate: timeline.Gate, runs: pd.DataFrame) -> str:
    """What the newest run of a machine was judged against, and the count of each verdict."""
    run = runs.set_index("file").loc[gate.last] if gate.last in set(runs["file"]) else None
    when = f"{timeline.stamp(run['datetime'])} UTC, commit {timeline.short_commit(run['commit'])}" if run is not None \
        else ""
    head = f"<b>{esc(gate.device)}</b>: newest run {esc(Path(gate.last).name)} ({esc(when)})"
    if run is not None and isinstance(run["incomplete_reason"], str):
        head += f", <b>cut short</b>: {esc(run['incomplete_reason'])}"
    if gate.comparison is None:
        return f"<p>{head}: not judged, {esc(gate.note)}.</p>"
    result = gate.comparison
    counts = ", ".join(f"{result.count(v)} {v}" for v in ("slower", "faster", "unsure", "same"))
    extra = f"; {len(result.unjudged)} could not be judged (re-run)" if result.unjudged else ""
    broken = f"; no longer timed: {esc('; '.join(result.broken))}" if result.broken else ""
    return (f"<p>{head}: judged as the nightly gate does, against {esc(gate.basis)} "
            f"({len(gate.reference)} run{'s' if len(gate.reference) != 1 else ''}): {counts}{extra}{broken}.</p>")


def change_text(ratio: float) -> str:
    """A change as a percentage, or as a factor beyond 2x either way: `273x` reads better than `+27200.0 %`."""
    return f"{ratio:.3g}x" if ratio >= 2 or ratio <= 0.5 else f"{(ratio - 1) * 100:+.1f} %"


def verdict_rows(found: list[tuple[timeline.Gate, Verdict]]) -> str:
    """A table of verdicts, each case linking to its picture."""
    rows = []
    for gate, v in found:
        verdict = "not judged" if v.not_judged else v.verdict
        rows.append(f"<tr class='{verdict.replace(' ', '-')}'><td>{esc(gate.device)}</td><td>{esc(v.group)}</td>"
                    f"<td>{link(gate.device, v.case)}</td><td>{esc(verdict)}</td>"
                    f"<td class='num'>{change_text(v.ratio)}</td>"
                    f"<td class='num'>{change_text(v.ci_low)} to {change_text(v.ci_high)}</td>"
                    f"<td class='num'>{format_time(v.baseline_s)} -> {format_time(v.candidate_s)}</td>"
                    f"<td class='num'>{v.noise_pct:.1f} %</td><td>{esc(v.not_judged or v.note)}</td></tr>")
    head = ("<tr><th>machine</th><th>suite</th><th>case</th><th>verdict</th><th>change</th><th>95 % interval</th>"
            "<th>level: reference -> newest</th><th>noise</th><th>note</th></tr>")
    return f"<div class='scroll'><table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>"


def moved_html(history: History) -> str:
    """The cases the gate called slower or faster, worst first; then, folded, the changes towards slower it could
    not judge (on a loaded machine, most of a run: listed apart so that they do not bury a regression)."""
    judged = [(g, v) for g, v in history.moved if not v.not_judged]
    unjudged = [(g, v) for g, v in history.moved if v.not_judged]
    parts = [verdict_rows(judged) if judged else
             "<p>No case was judged slower or faster than its reference in the newest run of any machine.</p>"]
    if unjudged:
        parts.append(f"<details><summary>{len(unjudged)} change{'s' if len(unjudged) != 1 else ''} towards slower "
                     "the gate could not judge (re-run when the machine is quiet; the note says why)</summary>"
                     f"{verdict_rows(unjudged)}</details>")
    return "".join(parts)


def steps_html(history: History) -> str:
    if not history.steps:
        return ("<p>No step: no series changed level by at least the minimum effect for "
                f"{judge.PERSIST} runs or more.</p>")
    rows = []
    for t in history.steps:
        step = t.steps[-1]
        since = len(t.runs) - step.at
        rows.append(f"<tr class='{'slower' if step.ratio > 1 else 'faster'}'><td>{esc(t.device)}</td>"
                    f"<td>{esc(t.group)}</td><td>{link(t.device, t.case)}</td>"
                    f"<td class='num'>{(step.ratio - 1) * 100:+.1f} %</td>"
                    f"<td class='num'>{format_time(step.before)} -> {format_time(step.after)}</td>"
                    f"<td>{esc(t.run_label(step.at))}{esc(t.software_change(step.at))}</td>"
                    f"<td class='num'>{since}</td><td>{esc(step.accepted or ('open' if step.ratio > 1 else ''))}"
                    "</td></tr>")
    head = ("<tr><th>machine</th><th>suite</th><th>case</th><th>step</th><th>level before -> after</th>"
            "<th>started at the run</th><th>runs since</th><th>accepted</th></tr>")
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def runs_html(history: History) -> str:
    """Every run of the history, newest first, folded: a year is 365 rows."""
    table = history.runs.iloc[::-1]
    body = "".join(
        f"<tr><td>{timeline.stamp(r.datetime)}</td><td>{esc(Path(r.file).name)}</td>"
        f"<td>{esc(timeline.short_commit(r.commit))}</td><td>{esc(r.series)}</td>"
        f"<td>{'no: ' + esc(r.incomplete_reason) if isinstance(r.incomplete_reason, str) else 'yes'}</td>"
        f"<td>{'yes' if r.reference else ''}</td>"
        f"<td class='num'>{r.timed}</td><td class='num'>{r.disturbed}</td></tr>" for r in table.itertuples())
    cut = int(history.runs["incomplete_reason"].notna().sum())
    head = ("<tr><th>date (UTC)</th><th>file</th><th>commit</th><th>machine</th><th>complete</th>"
            "<th>gate's reference</th><th>timed cases</th><th>disturbed</th></tr>")
    return (f"<details><summary>All {len(table)} runs ({cut} cut short)</summary><div class='scroll'>"
            f"<table><thead>{head}</thead><tbody>{body}</tbody></table></div></details>")


def accepted_html(history: History) -> str:
    """The acceptances the judgement applied, newest first: which run's level, for what, and why."""
    if not history.accepted:
        return ("<p>None: a regression stays open until it is fixed or accepted "
                "(<code>python -m reports accept RUN --history DIR --reason TEXT</code>).</p>")
    rows = "".join(f"<tr><td>{esc(r.accepted_at)}</td><td>{esc(r.file)}</td><td>{esc(r.machine)}</td>"
                   f"<td>{esc(', '.join(r.cases) or 'every case and the whole run')}</td><td>{esc(r.reason)}</td>"
                   f"<td>{esc(r.by)}</td></tr>" for r in reversed(history.accepted))
    head = "<tr><th>when</th><th>run</th><th>machine</th><th>cases</th><th>reason</th><th>by</th></tr>"
    return f"<table><thead>{head}</thead><tbody>{rows}</tbody></table>"


def grid(figures: list[Figure], pictures: dict[str, Path]) -> str:
    return "<div class='grid'>" + "".join(figure_html(f, pictures) for f in figures) + "</div>"


def section_html(history: History, pictures: dict[str, Path], key: Path | None) -> str:
    """The section as HTML (pictures embedded: `draw`'s files by anchor)."""
    first, last = (timeline.stamp(history.runs["datetime"].agg(end), "%Y-%m-%d") for end in ("min", "max"))
    parts = [f"<h2 id='history'>History: what moved</h2><p class='muted'>{len(history.runs)} runs of "
             f"{history.runs['series'].nunique()} machine(s), {first} to {last}; {len(history.accepted)} "
             "acceptance(s). A level is the median of a run's round medians, the figure the gate judges.</p>",
             "".join(gate_line(g, history.runs) for g in history.gates),
             "<h3>Moved in the newest run</h3>", moved_html(history),
             "<h3>Steps</h3><p class='muted'>Each series' latest change of level that held for "
             f"{judge.PERSIST} nights or more (reports/judge.py, the gate's own judgement), largest slowdown first; "
             "a slower one is open until it is fixed or accepted.</p>",
             steps_html(history), "<h3>Accepted levels</h3>", accepted_html(history), runs_html(history),
             "<h2>History per suite</h2><p class='muted'>One picture per case; cases with news first "
             "(framed). The scale is robust: a spike is drawn at the edge as a triangle.</p>",
             image(key, "key") if key else ""]
    headings = sorted({*history.figures, *history.single})
    parts.append("<p>" + " | ".join(f"<a href='#{heading_id(h)}'>{esc(h)}</a>" for h in headings) + "</p>")
    for heading in headings:
        parts.append(f"<h3 id='{heading_id(heading)}'>{esc(heading)}</h3>")
        parts.append(f"<p>{esc(history.single[heading])}</p>" if heading in history.single
                     else grid(history.figures[heading], pictures))
    if history.across:
        parts.append(f"<h2>Across machines</h2><p class='muted'>Each case measured on several machines, every run's "
                     f"level divided by the current level of {esc(history.reference_machine)} (log scale).</p>")
        for group, figures in sorted(history.across.items()):
            parts.append(f"<h3>{esc(group)}</h3>" + grid(figures, pictures))
    return "".join(parts)


def section(frame: pd.DataFrame, accepted: list[acceptances.Record], outdir: Path, baseline: str | None = None) -> str:
    """The history section of the page, its pictures written under outdir."""
    history = build(frame, accepted, baseline)
    pictures = draw(history, outdir)
    drawn = [f.panel for figures in history.figures.values() for f in figures]
    return section_html(history, pictures, levels.write_key(drawn, outdir / "key.png") if drawn else None)


STYLE = """
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(400px, 1fr)); gap: 8px; }
.grid figure { margin: 0; padding: 4px; border: 1px solid #eee; }
.grid img { border: 0; margin: 0; } .grid figcaption { font-size: 12px; overflow-wrap: anywhere; }
figure.news { border: 2px solid #c44e52; } figure.faster { border-color: #2e8b57; }
figure.step { border-color: #999; } figure.not-judged { border-color: #e08a00; }
tr.slower td { background: #fbe5e6; } tr.faster td { background: #e3f3e8; } tr.not-judged td { background: #fff3cd; }
figure:target { outline: 3px solid #4c72b0; }
"""


def snapshot(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows the page's other sections show on a history page: each machine's newest run."""
    return timeline.newest(timeline.without_copies(frame))
