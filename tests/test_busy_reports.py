"""Every `python -m reports` command over every real run taken on a busy host (tests/data/busy, whose README says
how each was taken): each exits 0, writes what it was asked for, and marks the figures the run says were disturbed.

What a report should mark is counted here from the raw JSON, by the rule docs/reports.md states (contended where
the timer includes the host, `converged` false, `telemetry.throttled`, a figure above a peak, flags that their own
figures contradict), not through reports/marks.py: the reports are checked against the files, not against
themselves.

`plot`'s pictures are drawn by `html`, which runs the same plotters run by run (reports/plots/registry.py) and
names a plotter that fails: each run's pictures are drawn once (the command itself runs in tests/test_pictures.py
and tests/test_hardware_html.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from reports import marks
from reports.format.load import load
from tests.resultfiles import DATA
from tests.runs import run_reports_in_process

# tests/conftest.py: what the reports say and draw, never a pixel nor where an artist lies
pytestmark = pytest.mark.usefixtures("small_pictures", "no_layout")

BUSY = DATA / "busy"
# ... and the GPU check's matmul step run on the same box under load, whose plateau cases say `converged` beside a
# spread of 13 and 14 % (tests/data/gpu_check_cpu/README.md)
RUNS = [*sorted(p for p in BUSY.iterdir() if p.name.endswith((".json", ".json.journal"))),
        DATA / "gpu_check_cpu" / "matmul.json"]
RUN_1THREAD = DATA / "run_cpu_quick_1thread.json"  # a quiet run of another system (1 thread): hardware's other side
MAIN = BUSY / "main_cpu_quick_busy.json"  # the whole quick main job beside two CPU-bound neighbours
PNG = b"\x89PNG\r\n\x1a\n"
DEVICE_TIMERS = ("cuda_event", "cuda_graph")
ABOVE_PEAK = ("tflops_above_peak", "gbps_above_peak", "above_achievable")
PEAK_PERCENTS = ("pct_peak", "pct_achievable")
WIDEST_CONVERGED = 0.10  # twice quick's 5 % target: the widest spread a plateau or pooled rounds converge at


@dataclass
class Expected:
    """What the raw file says of its timed cases: how many, and how many carry each mark."""

    timed: int
    by_mark: Counter
    disturbed: int


def entries(path: Path) -> tuple[list[dict], list[dict]]:
    """The measured and the not-measured entries of a results file or a journal (a later line of a case
    supersedes an earlier one: rounds)."""
    if path.name.endswith(".journal"):
        lines = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
        latest = {(kind, e[kind]["name"]): e[kind] for e in lines for kind in ("benchmarks", "not_measured")
                  if kind in e}
        return ([e for (kind, _), e in latest.items() if kind == "benchmarks"],
                [e for (kind, _), e in latest.items() if kind == "not_measured"])
    data = json.loads(path.read_text())
    return data["benchmarks"], data.get("not_measured", [])


def conditions(entry: dict) -> list[str]:
    """The marks one measured entry should carry, read from its own fields."""
    info = entry.get("extra_info", {})
    share = (info.get("contention") or {}).get("share")
    found = {"contended": info.get("contended") is True and info.get("timer") not in DEVICE_TIMERS,
             "unconverged": info.get("converged") is False,
             "throttled": (info.get("telemetry") or {}).get("throttled") is True,
             "above peak": any(info.get(f) is True for f in ABOVE_PEAK) or any(
                 (info.get(f) or 0) > 100 for f in PEAK_PERCENTS),
             "contradictory": (info.get("converged") is True and (info.get("rel_iqr") or 0) > WIDEST_CONVERGED)
             or (info.get("contended") is True and share == 0)}
    return [name for name, held in found.items() if held]


def expected(path: Path) -> Expected:
    measured, _ = entries(path)
    timed = [e for e in measured if (e.get("stats") or {}).get("median") is not None]
    found = [conditions(e) for e in timed]
    return Expected(len(timed), Counter(name for names in found for name in names), sum(map(bool, found)))


def test_the_busy_runs_hold_every_condition_the_reports_must_survive():
    """The test data covers every way a busy host disturbs a run: contended, unconverged, throttled and above-peak
    cases, oom and unsupported ones, rounds, a killed run's journal, and a throttled stand-in that says it is one."""
    names = {p.name for p in RUNS}
    assert MAIN.name in names and any(n.endswith(".json.journal") for n in names)
    marked = sum((expected(p).by_mark for p in RUNS), Counter())
    assert all(marked[m.name] > 0 for m in marks.MARKS), marked
    statuses = Counter(e["extra_info"].get("status") for p in RUNS for e in entries(p)[1])
    assert statuses["oom"] > 0 and statuses["unsupported"] > 0
    assert any("round_medians_s" in e["extra_info"] for p in RUNS for e in entries(p)[0])
    stand_ins = [p for p in RUNS if "STANDIN" in p.name]
    assert stand_ins and all("stand_in" in json.loads(p.read_text())["machine_info"] for p in stand_ins)
    assert expected(MAIN).timed >= 100 and expected(MAIN).by_mark["contended"] >= 20


def reports(*args: object) -> str:
    """`python -m reports ARGS` in this process: its stdout, after asserting exit 0 and no traceback."""
    run = run_reports_in_process(*map(str, args))
    assert run.returncode == 0 and "Traceback" not in run.output, run.tail()
    return run.stdout


def markdown_marks(text: str) -> list[str]:
    """The `mark` cell of every row of every markdown table of a report (blank for a clean row, and for every row
    of a table without a mark column)."""
    cells, column = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            column = row.index(marks.COLUMN) if marks.COLUMN in row else -1
        elif not set(line) <= set("|-: "):
            cells.append(row[column] if column >= 0 else "")
    return cells


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_table_marks_every_disturbed_case(path, monkeypatch):
    want = expected(path)
    cells = markdown_marks(reports("table", path, "--markdown"))
    assert len(cells) == want.timed
    assert sum(bool(c) for c in cells) == want.disturbed
    assert Counter(s for c in cells for s in c) == Counter({m.symbol: want.by_mark[m.name] for m in marks.MARKS
                                                            if want.by_mark[m.name]})
    monkeypatch.setenv("COLUMNS", "80")
    fitted = reports("table", path)
    assert max(map(len, fitted.splitlines())) <= 80
    lines = fitted.splitlines()
    headers = [lines[i - 1].split() for i, line in enumerate(lines) if re.fullmatch(r"-+( +-+)*", line)]
    legends = [line for line in lines if line.startswith("marks: ")]
    if want.disturbed:
        assert any(marks.COLUMN in h for h in headers) and legends  # the mark column survives fitting to 80
    else:
        assert not any(marks.COLUMN in h for h in headers) and not legends
    assert (marks.COLUMN in reports("table", path, "--wide").split()) == bool(want.disturbed)


def baseline_of(path: Path) -> Path:
    """A run sharing cases with `path`: the main busy run, which holds every suite (for itself, the earlier busy
    ops run)."""
    return BUSY / "ops_cpu_quick_contended.json" if path == MAIN else MAIN


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_compare_judges_the_busy_run(path, tmp_path):
    reports("compare", baseline_of(path), path, "--json", tmp_path / "verdicts.json")
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())["verdicts"]
    assert verdicts


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_history_counts_the_disturbed_runs_of_each_case(path, tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / path.name).write_bytes(path.read_bytes())
    out = reports("history", folder, "--all", "-o", tmp_path / "plots")
    assert len(re.findall(r" in 1 of 1 runs ", out)) == expected(path).disturbed
    assert ("marks: " in out) == bool(expected(path).disturbed)
    # one run has no trend: each group says so instead of an empty picture
    groups = load([path], samples=False).dropna(subset=["median_s"])["group"].unique()
    assert all(f"{group} on " in out and f"one run ({path.name}), no trend to draw" in out for group in groups)
    assert not list((tmp_path / "plots").glob("history_*.png"))


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_hardware_marks_and_hatches_the_disturbed_figures(path, tmp_path, drawn, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = reports("hardware", path, RUN_1THREAD, "-o", tmp_path)
    assert max(map(len, out.splitlines())) <= 100
    assert ("marks: " in out) == bool(expected(path).disturbed)
    shared = set(load([path], samples=False)["case"]) & set(load([RUN_1THREAD], samples=False)["case"])
    pictures = [Path(p) for p in out.splitlines() if p.endswith(".png")]
    assert all(p.read_bytes().startswith(PNG) for p in pictures)
    bars = [f for f in drawn if "the same cases on each system" in f.get_suptitle()]
    assert bool(bars) == bool(shared)
    for figure in bars:
        hatched = [p for ax in figure.axes for p in ax.patches if p.get_hatch()]
        legend = [t.get_text() for t in figure.legends[0].get_texts()]
        assert bool(hatched) == any("disturbed (" in t for t in legend)
        assert not any(h.get_hatch() for h in figure.legends[0].legend_handles[:2])  # the systems' entries solid


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_html_counts_and_shades_the_disturbed_cases_and_draws_them_hollow_or_hatched(path, tmp_path, drawn):
    """The page, and its plots: the plotters of `plot` (reports/plots/registry.py), run by run as `plot` runs them,
    so the page's pictures are the command's (tests/test_hostile_inputs.py's reasoning); the page catches a
    plotter's exception, so a plotter that failed is a warning here where `plot` would end in a traceback."""
    want = expected(path)
    run = run_reports_in_process("html", str(path), "-o", str(tmp_path))
    assert run.returncode == 0 and "Traceback" not in run.output, run.tail()
    assert "html: plots of " not in run.stderr, run.stderr  # every plotter drew
    page = (tmp_path / "index.html").read_text()
    named = ", ".join(f"{want.by_mark[m.name]} {m.name}" for m in marks.MARKS if want.by_mark[m.name])
    summary = f"{want.disturbed} of {want.timed} timed cases of run {path.name} disturbed" + (f": {named}" if named
                                                                                              else "")
    assert summary in page
    results = page[page.index("<h2>Results</h2>"):]
    assert results.count("<tr class=disturbed>") == want.disturbed
    assert re.findall(r'alt="[^"]+\.png"', page)
    assert "Devices side by side" not in page  # a single run
    written = list((tmp_path / "plots").rglob("*.png"))
    assert written and all(p.read_bytes().startswith(PNG) for p in written)
    keys = [t.get_text() for f in drawn for leg in [*f.legends, *(ax.get_legend() for ax in f.axes)] if leg
            for t in leg.get_texts() if "disturbed (" in t.get_text()]
    assert bool(keys) == bool(want.disturbed)
    in_legends = {name for key in keys for name in key.split("(", 1)[1].rstrip(")").split(", ")}
    assert in_legends <= set(want.by_mark)  # a legend names only marks the run's figures carry
    if path == MAIN:
        hollow_points_keep_each_lines_colour(drawn)


def hollow_points_keep_each_lines_colour(drawn: list) -> None:
    """Seen in the batch picture of the busy main run: the hollow points of one line took the next colour of the
    axes' cycle, so fp32 was green in the throughput panel and orange in the memory panel beside it."""
    pictures = [f for f in drawn if f.get_suptitle().startswith(("gpt-tiny", "cnn-tiny", "attention"))]
    assert len(pictures) >= 3
    for figure in pictures:
        first, second = ({line.get_label(): line.get_color() for line in ax.get_lines()
                          if not line.get_label().startswith("_")} for ax in figure.axes[:2])
        hollow = [line for line in figure.axes[0].get_lines() if line.get_markerfacecolor() == "white"]
        assert hollow and set(first) & set(second), figure.get_suptitle()
        assert all(first[name] == second[name] for name in set(first) & set(second)), figure.get_suptitle()


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_export_carries_the_marks(path, tmp_path):
    want = expected(path)
    reports("export", path, "-o", tmp_path / "r.csv")
    back = pd.read_csv(tmp_path / "r.csv", keep_default_na=False)
    named = [n for cell in back["marks"] for n in cell.split(",") if n]
    assert Counter(named) == +want.by_mark
    assert sum(bool(c) for c in back["marks"]) == want.disturbed
