"""The history page (`python -m reports html DIR`): what it draws, read from the data behind each picture.

The history is made from real quick runs of this machine (tests/histories.py): 14 nights of the 2-thread CPU
cycling through three real main-job runs, one steady matmul case 1.25x slower from night 9 on (and a numerics
case 1.6x), one conv case 3x slower on night 5 only (a spike), night 6 a real killed run's journal, night 11 a
real run stopped by SIGTERM after 45 of its 207 cases; six nights of the 1-thread CPU (three real runs, another
compute device) from night 8; one real run of a third machine (two ranks) on the last night. Each machine's newest
night is judged as the nightly gate judges it (compare over the history, reports/judge.py).
"""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from reports import acceptances, history_html, timeline
from reports.__main__ import main
from reports.format.load import load
from reports.history_html import NEWS_ORDER, History, anchor, build
from reports.nights import levels as run_levels
from reports.noise import level
from reports.plots import levels, style
from reports.text import file_stem
from tests.conftest import draw_small, draw_without_layout
from tests.histories import KILLED_JOURNAL, QUICK, STOPPED, Nights, night, real_runs, steady_case
from tests.resultfiles import DATA, ROUNDS_A, ROUNDS_B, only, read, write

# tests/conftest.py: the data behind each picture and the page's text, never a pixel nor where an artist lies
pytestmark = pytest.mark.usefixtures("small_pictures", "no_layout")

NIGHTS, STEP_NIGHT, SPIKE_NIGHT, KILLED_NIGHT, STOPPED_NIGHT = 14, 9, 5, 6, 11
STEP = steady_case(real_runs(), "matmul")  # 1.02x across the three real runs
SPIKE = steady_case(real_runs(), "conv")  # 1.15x
SECOND_STEP = steady_case(real_runs(), "numerics")  # 1.01x: 1.6x slower from STEP_NIGHT on, a larger step
ONE_THREAD = sorted(QUICK.glob("quick_1thread_*.json"))
MATMUL = frozenset({"matmul"})  # one suite, for a test that needs a page and not every suite's pictures
TWO_RANKS = DATA / "dist_cpu_quick.json"  # a real run of another machine (1 thread x 2 ranks): one run only


def two_threads(history: dict) -> str:
    return next(t.machine for t in history["trends"] if t.device == "AMD EPYC (2 threads)")


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> dict:
    """The history's folder: runs/, every night of every machine."""
    root = tmp_path_factory.mktemp("history")
    runs = root / "runs"
    written = Nights(real_runs(), NIGHTS, steps={STEP: (STEP_NIGHT, 1.25), SECOND_STEP: (STEP_NIGHT, 1.6)},
                     spikes={SPIKE: (SPIKE_NIGHT, 3.0)},
                     cut={KILLED_NIGHT: KILLED_JOURNAL, STOPPED_NIGHT: STOPPED}).write(runs, "a")
    Nights(ONE_THREAD, NIGHTS - 8, first=8).write(runs, "b")
    third = read(TWO_RANKS)
    third["datetime"], third["commit_info"]["id"] = night(NIGHTS - 1).isoformat(), "c" * 40
    write(third, runs / f"c{NIGHTS - 1:03d}.json")
    return {"root": root, "runs": runs, "files": written}


@pytest.fixture(scope="module")
def page(nights, tmp_path_factory) -> dict:
    """The page over the history, as the command writes it (tens of seconds), and the data it drew: the History
    the command built (history_html.build, recorded as it returns). Its pictures are drawn small and without a
    layout engine (tests/conftest.py): the tests read the data behind each picture and the page's text, never a
    pixel, and the history's pictures have fixed axes (plots/levels.py Canvas)."""
    out = tmp_path_factory.mktemp("page")
    built = []

    def recorded(*args, **kwargs) -> History:
        built.append(build(*args, **kwargs))
        return built[-1]

    with pytest.MonkeyPatch.context() as patch:
        draw_small(patch)
        draw_without_layout(patch)
        patch.setattr(history_html, "build", recorded)
        assert main(["html", str(nights["runs"]), "-o", str(out)]) == 0
    (history,) = built
    return {"html": (out / "index.html").read_text(), "history": history, "trends": history.trends,
            "out": out}


def trend_of(page: dict, case: str, device: str = "AMD EPYC (2 threads)") -> timeline.Trend:
    return next(t for t in page["trends"] if t.case == case and t.device == device)


def figure_of(page: dict, case: str, device: str = "AMD EPYC (2 threads)") -> levels.Panel:
    wanted = anchor(device, case)
    return next(f for figs in page["history"].figures.values() for f in figs if f.anchor == wanted)


def summary(html: str) -> str:
    return html.split("<h2>History per suite</h2>")[0]


def test_the_page_names_the_injected_step_and_the_run_where_it_started(page, nights):
    """The issue's first must-show: a picture per group of the machine, and the 1.25x step named in the summary
    with the run where it started (date, commit, file)."""
    html, history = page["html"], page["history"]
    for group in ("matmul", "conv", "attention", "train_step", "numerics"):
        heading = f"{group} on AMD EPYC (2 threads)"
        assert f"<h3>{heading}</h3>" in html and history.figures[heading], group
    (stepped,) = [t for t in history.steps if t.case == STEP]
    step = stepped.steps[-1]
    assert step.ratio == pytest.approx(1.25, rel=0.08)
    started = nights["files"][STEP_NIGHT].name
    assert stepped.runs["file"].iloc[step.at].endswith(started)
    label = f"{night(STEP_NIGHT):%Y-%m-%d %H:%M} {STEP_NIGHT:08x} ({started})"
    assert stepped.run_label(step.at) == label
    top = summary(html)
    row = next(r for r in top.split("<tr") if f"#{anchor('AMD EPYC (2 threads)', STEP)}" in r and "runs since" not in r
               and label in r)
    assert "+2" in row  # +2x.x %: the step's size
    ratios = {t.case: t.steps[-1].ratio for t in history.steps}
    assert list(ratios.values()) == sorted(ratios.values(), reverse=True)  # worst first, whatever the suite
    assert ratios[SECOND_STEP] == pytest.approx(1.6, rel=0.08)
    assert list(ratios).index(SECOND_STEP) < list(ratios).index(STEP)  # numerics' 1.6x before matmul's 1.25x


def test_the_newest_run_is_judged_as_the_gate_judges_it(page, nights):
    """The newest night against the machine's complete nights before it, by compare itself; the picture rings the
    nights whose levels are the case's reference (before its open step) and draws that level."""
    history = page["history"]
    gate = next(g for g in history.gates if g.device == "AMD EPYC (2 threads)")
    complete = [i for i in range(NIGHTS - 1) if i not in (KILLED_NIGHT, STOPPED_NIGHT)]
    assert [Path(f).name for f in gate.reference] == [nights["files"][i].name for i in complete]
    assert "as the nightly gate judges them" in gate.basis
    moved = {v.case: v for g, v in history.moved if g is gate}
    # the last night is the real run quick_2, whose STEP case ran contended: the gate cannot judge it (re-run)
    assert moved[STEP].ratio == pytest.approx(1.25, rel=0.08) and moved[STEP].looks == "slower"
    assert moved[STEP].not_judged.startswith("candidate host contention")
    assert moved[STEP] is gate.verdicts[STEP]  # the gate's own verdict (reports/compare.py), not a second rule
    worst_first(history.moved)
    table = history.runs.set_index(history.runs["file"].map(lambda f: Path(f).name))
    table = table[table["machine_id"] == gate.machine]
    assert set(table.index[table["reference"]]) == {nights["files"][i].name for i in complete}
    panel = figure_of(page, STEP).panel
    trend = trend_of(page, STEP)
    ringed = trend.runs["file"][panel.reference].map(lambda f: Path(f).name)
    assert ringed.tolist() and all(name < nights["files"][STEP_NIGHT].name for name in ringed)  # before the step
    assert panel.verdict == "not judged"
    _, scale = style.time_unit(float(np.median(trend.levels)))
    assert panel.reference_level * scale == pytest.approx(float(np.median(trend.levels[panel.reference])))
    moved_table = summary(page["html"]).split("Moved in the newest run")[1].split("<h3>Steps")[0]
    assert f"#{anchor('AMD EPYC (2 threads)', STEP)}" in moved_table and "candidate host contention" in moved_table


def worst_first(moved: list) -> None:
    """Slower first, then what the gate could not judge, then faster; the largest change first within each."""
    rank = [{"slower": 0, "faster": 2}.get(v.verdict, 1) for _, v in moved]
    assert rank == sorted(rank)
    for r in set(rank):
        sizes = [abs(np.log(v.ratio)) for (_, v), k in zip(moved, rank, strict=True) if k == r]
        assert sizes == sorted(sizes, reverse=True)


def test_both_machines_newest_runs_are_judged_in_one_list(page):
    history = page["history"]
    assert len({g.device for g, _ in history.moved}) == 2  # both machines' newest runs judged: one list
    worst_first(history.moved)


def test_one_spike_does_not_flatten_the_axis_and_is_drawn_at_its_edge(page, nights):
    """The 3x night, and the real killed night's journal, whose run beside two busy neighbours took this case
    about 500x its usual time: both lie beyond the axis, drawn at its top edge, and the axis holds the level."""
    trend, figure = trend_of(page, SPIKE), figure_of(page, SPIKE)
    panel = figure.panel
    files = list(trend.runs["file"].map(lambda f: Path(f).name))
    spike_run, killed_run = files.index(nights["files"][SPIKE_NIGHT].name), files.index(
        nights["files"][KILLED_NIGHT].name)
    beyond = {int(np.flatnonzero(panel.lines[0].x == x)[0]): (y, ratio) for x, y, ratio in panel.beyond}
    assert sorted(beyond) == sorted([spike_run, killed_run])
    assert beyond[spike_run][1] == pytest.approx(3.0, rel=0.35) and beyond[killed_run][1] > 100
    assert all(y == panel.limits[1] for y, _ in beyond.values())
    level = float(np.median(panel.lines[0].y))
    assert panel.limits[1] < 1.6 * level < panel.lines[0].y[spike_run]  # the axis holds the level, not the spike
    ax = Figure().add_subplot()
    levels.draw(ax, panel)
    assert ax.get_ylim() == pytest.approx(panel.limits)
    edge = [line for line in ax.get_lines() if line.get_marker() == "^"]
    assert len(edge) == 2 and {line.get_ydata()[0] for line in edge} == {panel.limits[1]}
    assert not any(line.get_clip_on() for line in edge)
    assert "2 beyond the axis" in panel.note and trend.steps == []  # one night is never a step


def test_a_killed_nights_journal_and_contended_runs_are_marked_apart(page, nights):
    """The killed night (a real journal) is an orange x in the conv pictures it reached, a disturbed run (the
    real runs' own contention and convergence flags) a hollow point; the run list says which night was cut."""
    journal = nights["files"][KILLED_NIGHT].name
    reached = [t for t in page["trends"] if t.runs["file"].str.endswith(journal).any()]
    assert reached and {t.group for t in reached} == {"conv"}
    for trend in reached:
        line = figure_of(page, trend.case).panel.lines[0]
        assert list(line.incomplete) == list(trend.runs["file"].str.endswith(journal))
    trend = reached[0]
    line = figure_of(page, trend.case).panel.lines[0]
    assert list(line.disturbed) == list(trend.runs["marks"].map(bool))
    assert line.disturbed.any() and (line.disturbed & ~line.incomplete).any()
    ax = Figure().add_subplot()
    levels.draw(ax, figure_of(page, trend.case).panel)
    crosses = [ln for ln in ax.get_lines() if ln.get_marker() == "x"]
    hollow = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and ln.get_markerfacecolor() == "white"]
    assert len(crosses) == 1 and len(crosses[0].get_xdata()) == 1
    assert len(hollow[0].get_xdata()) == int((line.disturbed & ~line.incomplete).sum())
    runs = page["history"].runs
    cut = runs[runs["file"].str.endswith(journal)]
    assert cut["incomplete_reason"].iloc[0].startswith("the run ended without writing its results")
    stopped = runs[runs["file"].str.endswith(nights["files"][STOPPED_NIGHT].name)]
    assert stopped["incomplete_reason"].iloc[0] == "stopped by SIGTERM; 45 of 207 selected cases finished"
    assert "2 cut short" in page["html"]
    attention = [t for t in page["trends"] if t.group == "attention" and t.device == "AMD EPYC (2 threads)"]
    assert attention and all(figure_of(page, t.case).panel.lines[0].incomplete.sum() == 1 for t in attention)


def test_the_band_is_the_noise_the_gate_judged_the_case_by(page):
    history = page["history"]
    gate = next(g for g in history.gates if g.device == "AMD EPYC (2 threads)")
    verdict = gate.verdicts[STEP]
    panel = figure_of(page, STEP).panel
    assert panel.sigma_pct == pytest.approx(verdict.noise_pct)
    low, high = panel.band
    assert high / panel.fitted == pytest.approx(np.exp(2 * np.log1p(verdict.noise_pct / 100)))
    assert low / panel.fitted == pytest.approx(np.exp(-2 * np.log1p(verdict.noise_pct / 100)))


def test_machines_are_kept_apart_and_drawn_together_normalised(page, nights):
    history = page["history"]
    assert {t.device for t in history.trends} == {"AMD EPYC (2 threads)", "AMD EPYC (1 thread)",
                                                  "AMD EPYC (1 thread) x 2 ranks"}
    one = trend_of(page, STEP, "AMD EPYC (1 thread)")
    assert len(one.runs) == NIGHTS - 8 and not one.steps  # the step was injected on the 2-thread machine only
    assert history.reference_machine == "AMD EPYC (2 threads)"  # the first machine, by default
    across = {f.caption: f for figs in history.across.values() for f in figs}
    panel = across[STEP].panel
    assert [line.label for line in panel.lines] == ["AMD EPYC (2 threads)", "AMD EPYC (1 thread)"]
    two = trend_of(page, STEP)
    current = timeline.fitted(two.levels, two.steps)[-1]  # the reference machine's current level
    assert panel.lines[0].y[-1] * current == pytest.approx(two.levels[-1])
    assert np.median(panel.lines[1].y) == pytest.approx(np.median(one.levels) / current)
    again = build(load([nights["runs"]], samples=False), [], baseline="AMD EPYC (1 thread)")
    assert again.reference_machine == "AMD EPYC (1 thread)"
    panel = {f.caption: f for figs in again.across.values() for f in figs}[STEP].panel
    assert panel.lines[0].label == "AMD EPYC (1 thread)"


def test_a_suite_with_a_single_run_on_a_machine_says_so(page):
    history = page["history"]
    heading = "collectives on AMD EPYC (1 thread) x 2 ranks"
    assert heading in history.single and heading not in history.figures
    assert "One run of this suite on this machine" in history.single[heading]
    assert "One run of this suite on this machine (c013.json" in page["html"]


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids, self.hrefs = set(), []

    def handle_starttag(self, tag, attrs) -> None:
        found = dict(attrs)
        if "id" in found:
            self.ids.add(found["id"])
        if tag == "a" and found.get("href", "").startswith("#"):
            self.hrefs.append(found["href"][1:])


def test_every_summary_link_reaches_its_picture(page):
    parser = Links()
    parser.feed(page["html"])
    assert len(parser.hrefs) >= len(page["history"].steps) + len(page["history"].moved)
    assert set(parser.hrefs) <= parser.ids


def test_a_copy_given_beside_its_original_is_one_run_and_an_acceptance_is_listed(nights, tmp_path):
    """The history folder given with a copy of three nights under another name (a backup beside the runs): each
    night is drawn once, not twice. An acceptance kept beside the runs closes the step it names, and the page lists
    it with its reason."""
    copies = tmp_path / "copies"
    copies.mkdir()
    for i in (0, 1, 2):
        shutil.copy(nights["files"][i], copies / f"backup_{i}.json")
    history = build(load([nights["runs"], copies], samples=False), [])
    assert len(history.runs) == len(list(nights["runs"].iterdir()))
    assert len(trend_of({"trends": history.trends}, STEP).runs) == NIGHTS - 2  # the cut nights have no matmul
    runs = tmp_path / "runs"
    shutil.copytree(nights["runs"], runs)
    step_night = runs / nights["files"][STEP_NIGHT + 1].name
    assert main(["accept", str(step_night), "--history", str(runs), "--reason", "exact softmax, slower",
                 "--case", STEP]) == 0
    history = build(load([runs], samples=False), acceptances.of_paths([runs]))
    (accepted,) = history.accepted
    assert accepted.cases == (STEP,) and accepted.reason == "exact softmax, slower"
    step = trend_of({"trends": history.trends}, STEP).steps[-1]
    assert step.accepted == "exact softmax, slower"


def test_few_runs_keep_the_page_as_it_was(tmp_path):
    """Two runs of one machine (their matmul cases) are a comparison, not a history: no history section, every
    run shown."""
    for i, path in enumerate(real_runs()[:2]):
        write(only(read(path), MATMUL), tmp_path / f"{i}.json")
    assert main(["html", str(tmp_path), "-o", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "index.html").read_text()
    assert "History: what moved" not in html and "run 0.json" in html and "run 1.json" in html


def test_history_o_draws_the_same_pictures_and_names_a_single_run_group(nights, tmp_path, capsys):
    """`history -o` over the step's suite on its machine and the one run of the third machine (every suite's
    pictures of every machine are the page's, above): the step's own figure, and a line for each suite with a
    single run instead of a picture."""
    runs = tmp_path / "runs"
    Nights(real_runs(), NIGHTS, steps={STEP: (STEP_NIGHT, 1.25)}, groups=MATMUL).write(runs, "a")
    shutil.copy(nights["runs"] / f"c{NIGHTS - 1:03d}.json", runs)
    assert main(["history", str(runs), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "collectives on AMD EPYC (1 thread) x 2 ranks: one run (c013.json), no trend to draw" in out
    names = [p.name for p in (tmp_path / "out").glob("*.png")]
    assert f"history_step_{file_stem('AMD EPYC (2 threads)', STEP)}.png" in names
    assert not any("collectives" in n for n in names)
    found = timeline.trends(load([nights["runs"]], samples=False))
    panel = levels.case_panel(next(t for t in found if t.case == SPIKE and t.device == "AMD EPYC (2 threads)"))
    assert len(panel.beyond) == 2  # the same robust scale as the page's: the spike and the killed night
    labels = [h.get_label() for h in levels.key([panel], own=True)]
    assert labels[1].startswith("fitted level +- 2 sigma (sigma ") and "run beyond the axis (a spike)" in labels
    assert "run cut short (incomplete)" in labels
    assert "runs whose level is the reference now, and that level" in labels  # the page's very pictures


def test_the_newest_runs_never_leave_the_axis(nights, tmp_path):
    """A change on the last night is not yet a step (it needs judge.PERSIST nights) and no spike either: it is the
    morning's news, drawn inside the axis and first among its suite's levels. (The gate cannot judge it: the case
    ran contended, as on most nights of this loaded machine, and its timer includes the host.)"""
    runs = tmp_path / "runs"
    Nights(real_runs(), 10, steps={STEP: (9, 3.0)}).write(runs)
    history = build(load([runs], samples=False), [])
    panel = figure_of({"history": history}, STEP).panel
    assert not panel.beyond and panel.limits[1] > panel.lines[0].y[-1]
    assert panel.verdict == "not judged" and not trend_of({"trends": history.trends}, STEP).steps
    shown = history.figures["matmul on AMD EPYC (2 threads)"]
    order = [NEWS_ORDER[f.news] for f in shown]
    assert order == sorted(order)  # news first: slower, not judged, a step, faster, then the rest
    first = next(f for f in shown if f.news == "not judged")
    assert first.caption == STEP and first.size == pytest.approx(np.log(3.0), rel=0.05)  # the largest first


def test_a_case_whose_runs_lie_tens_of_times_apart_is_drawn_on_a_log_axis(page):
    """On this loaded machine some cases moved 30x between the real runs: on a linear axis the faster nights lie
    flat on zero; past LOG_SPAN the axis is logarithmic, and only there."""
    panels = [f.panel for figs in page["history"].figures.values() for f in figs]
    spans = [p.limits[1] / p.limits[0] for p in panels]
    assert any(s > levels.LOG_SPAN for s in spans) and any(s <= levels.LOG_SPAN for s in spans)
    assert [p.log_scale for p in panels] == [s > levels.LOG_SPAN for s in spans]
    ax = Figure().add_subplot()
    levels.draw(ax, next(p for p in panels if p.log_scale))
    assert ax.get_yscale() == "log"
    levels.draw(ax, next(p for p in panels if not p.log_scale))  # the reused axes goes back to linear
    assert ax.get_yscale() == "linear"


def test_a_runs_level_is_the_median_of_its_round_medians_as_the_gate_reads_it(tmp_path):
    """Real runs with --bench-rounds 3 (tests/data/run_cpu_quick_rounds*.json): each night's level of a case is
    the median of its three round medians (reports/noise.py `level`), not the median of all its samples."""
    Nights([ROUNDS_A, ROUNDS_B], 6).write(tmp_path)
    frame = load([tmp_path], samples=False)
    for trend in timeline.trends(frame):
        rows = frame[frame["case"] == trend.case].sort_values("datetime")
        assert list(trend.levels) == [level(row) for _, row in rows.iterrows()]
    rows = frame[frame["round_medians_s"].notna()]
    assert (run_levels(rows) != rows["median_s"]).any()


def test_runs_without_a_readable_date_make_the_page_by_run_number(tmp_path, capsys):
    """Three real runs (their matmul cases) whose `datetime` cannot be read (left out with a warning by the
    loader): drawn by run number, listed with `no date`, never a traceback."""
    for i, path in enumerate(real_runs()):
        data = only(read(path), MATMUL)
        data["datetime"] = "last tuesday"
        write(data, tmp_path / "runs" / f"{i}.json")
    assert main(["html", str(tmp_path / "runs"), "-o", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "index.html").read_text()
    assert "History: what moved" in html and "<td>no date</td>" in html
    history = build(load([tmp_path / "runs"], samples=False), [])
    panel = next(iter(history.figures.values()))[0].panel
    assert list(panel.lines[0].x) == [0.0, 1.0, 2.0]


def test_another_projects_files_without_groups_have_their_history_drawn(tmp_path):
    """pytest-benchmark 3.x files of another project (no `group`, naive datetimes), three nights each: their cases
    are drawn under `(no group)`, not dropped."""
    for name in ("pb3_other_project.json", "pb4_other_project.json"):
        for i in range(3):
            data = read(DATA / name)
            data["datetime"] = f"2026-01-0{i + 1}T03:00:00"
            write(data, tmp_path / "runs" / f"{name}_{i}.json")
    history = build(load([tmp_path / "runs"], samples=False), [])
    no_group = [h for h in history.figures if h.startswith("(no group) on ")]
    assert no_group and all(len(f.panel.lines[0].x) == 3 for h in no_group for f in history.figures[h])
    assert sum(map(len, history.figures.values())) == len(history.trends)  # every case has its picture
