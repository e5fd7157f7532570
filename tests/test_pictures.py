"""The peaks the reports read, the matmul picture, the roofline and the hardware picture, on real runs.

tests/data/run_cpu_quick_achievable.json is a real quick run of the matmul suite and the conv forward cases on
this CPU with the achievable-peak search on; the two-system pictures use the real 2-thread and 1-thread runs.
A GPU's datasheet peaks are tested on a copy whose machine_info gains a `gpu.peaks` entry, marked as a fixture.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from reports import device_peaks
from reports.__main__ import main
from reports.format.load import load
from reports.plots import effects, matmul, roofline, system_bars
from reports.sections import systems
from tests.resultfiles import DATA, RUN_A, RUN_B, converged_case, dated, read, scaled, write

pytestmark = pytest.mark.usefixtures("small_pictures")  # tests/conftest.py: content, not pixels

RUN = DATA / "run_cpu_quick_achievable.json"
RUN_1THREAD = DATA / "run_cpu_quick_1thread.json"
PNG = b"\x89PNG\r\n\x1a\n"


def test_peaks_are_the_runs_achievable_figures():
    info = read(RUN)["machine_info"]["achievable"]
    table = device_peaks.peaks(load([RUN]))
    assert set(table["kind"]) == {"achievable"}  # a CPU has no datasheet entry
    found = device_peaks.of(table, load([RUN])["device"].iloc[0], "achievable")
    assert found == {**{d: f["value"] for d, f in info["flops"].items()}, "bandwidth": info["bandwidth"]["value"]}


def test_a_gpu_runs_datasheet_peaks_are_read_and_the_best_achievable_over_runs_is_kept(tmp_path):
    copy = read(RUN)
    copy["machine_info"]["gpu"] = {"name": "fixture GPU", "peaks": {"bfloat16": {"value": 9.9e14, "source": "x"},
                                                                     "tf32": {"value": None, "source": "unknown"}}}
    copy["machine_info"]["achievable"]["flops"]["bfloat16"]["value"] = 8e14
    better = read(RUN)
    better["machine_info"]["gpu"] = copy["machine_info"]["gpu"]
    better["machine_info"]["achievable"]["flops"]["bfloat16"]["value"] = 8.5e14
    better["datetime"] = "2000-01-01T00:00:00+00:00"  # the older run has the better search
    frame = load([write(copy, tmp_path / "a.json"), write(better, tmp_path / "b.json")])
    table = device_peaks.peaks(frame)
    assert device_peaks.of(table, "fixture GPU", "datasheet") == {"bfloat16": 9.9e14}  # no value, no row
    assert device_peaks.of(table, "fixture GPU", "achievable")["bfloat16"] == 8.5e14
    shown = device_peaks.readable(table)
    assert "990 TFLOP/s" in set(shown["peak"]) and "850 TFLOP/s" in set(shown["peak"])


def test_every_measured_case_of_the_run_has_pct_achievable_at_most_100():
    frame = load([RUN])
    timed = frame[frame["median_s"].notna()]
    assert len(timed) >= 20 and timed["pct_achievable"].between(0, 100, inclusive="right").all()


def test_matmul_picture_one_per_device_with_percent_of_achievable_on_a_cpu(tmp_path):
    frame = load([RUN, RUN_1THREAD])
    written = matmul.plots(frame, tmp_path)
    assert len(written) == 2 and all(p.read_bytes().startswith(PNG) for p in written)
    rows = matmul.measured(load([RUN]))
    _, what = matmul._percent(rows)
    assert what.startswith("% of the achievable")
    assert matmul._percent(rows.assign(pct_peak=50.0))[1].startswith("% of the datasheet")


def test_roofline_places_the_cases_with_both_models(tmp_path):
    frame = load([RUN])
    points = roofline.points(frame)
    both = frame[frame["median_s"].notna() & frame["flops"].notna() & frame["bytes"].notna()]
    assert len(points) == len(both) and set(points["group"]) == {"matmul", "conv"}
    assert (points["intensity"] == points["flops"] / points["bytes"]).all()
    written = roofline.plots(frame, tmp_path)
    assert len(written) == 1 and written[0].name.startswith("roofline-")
    assert written[0].read_bytes().startswith(PNG)


def test_a_roofline_without_peaks_names_no_roof_and_keeps_its_title_lines():
    """Seen in the HTML page: a legend entry for a roof that is not drawn, and the title's lines run together."""
    frame = load([RUN_1THREAD])
    rows = roofline.points(frame)
    device = rows["device"].iloc[0]
    fig = roofline.draw(rows, device, device_peaks.peaks(frame), 0)
    assert not any("roof" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert fig._suptitle.get_text().split("\n")[:2] == [f"roofline on {device}", "no bandwidth peak recorded: no roofs"]


def test_lever_picture_needs_two_systems(tmp_path):
    rows, _ = systems.side_by_side(load([RUN_A, RUN_1THREAD]))
    assert effects.plot(rows, tmp_path).read_bytes().startswith(PNG)
    found = effects.effects(rows)
    assert found.groupby("comparison")["system"].nunique().eq(2).all()
    one, _ = systems.side_by_side(load([RUN_A]))
    assert effects.plot(one, tmp_path / "one") is None


def embeds_the_pictures(page: str, images: set[str], peaks: bool) -> None:
    names = set(re.findall(r'alt="([^"]+)\.png"', page))
    for prefix in images:
        assert any(name.startswith(prefix) for name in names), (prefix, names)
    assert ("Peaks: achievable and datasheet" in page) == peaks


def test_html_embeds_the_pictures(tmp_path, capsys):
    """The run with achievable peaks; the page of two systems is test_no_tick_label_of_any_figure_..., below."""
    assert main(["html", str(RUN), "-o", str(tmp_path)]) == 0
    embeds_the_pictures((tmp_path / "index.html").read_text(), {"matmul-", "roofline-"}, peaks=True)


def test_peaks_of_a_file_that_vanished_are_a_warning(tmp_path, capsys):
    path = write(read(RUN), tmp_path / "gone.json")
    frame = load([path])
    path.unlink()
    assert device_peaks.peaks(frame).empty
    assert "warning: peaks of" in capsys.readouterr().err


def test_hardware_bars_have_a_time_and_a_speedup_panel(tmp_path):
    rows, base = systems.side_by_side(load([RUN_A, RUN_1THREAD]))
    path = system_bars.bar_plot("matmul", systems.shared(rows[rows["group"] == "matmul"]), base, tmp_path)
    assert path.read_bytes().startswith(PNG)


def shown_tick_labels(figure: Figure) -> list[str]:
    """What each visible tick label of the figure shows: mathtext is rendered (its source is not shown), any
    other text as it is, `\\$` as a dollar sign (matplotlib's own rule, Text._preprocess_math)."""
    shown = []
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for label in [*axis.get_ticklabels(which="both")]:
                if label.get_visible() and label.get_text():
                    value, math = label._preprocess_math(label.get_text())
                    shown.append("(mathtext)" if math else value)
    return shown


def _history_dir(folder: Path) -> Path:
    """Twelve dated copies of the two real runs, one case 30 % slower from the seventh: `history` finds a step
    (the level before it rests on six nights, reports/judge.py SETTLED)."""
    a, b = read(RUN_A), read(RUN_B)
    case = converged_case(a)
    for i in range(12):
        data = scaled(a if i % 2 == 0 else b, case, 1.3) if i >= 6 else (a if i % 2 == 0 else b)
        write(dated(data, f"2026-11-{i + 1:02d}T03:00:00+00:00", f"{i:040x}"), folder / f"run_{i:02d}.json")
    return folder


def test_no_tick_label_of_any_figure_shows_mathtext_source(drawn, tmp_path, capsys):
    """Every figure of `plot`, `html` and `history -o`, drawn from real runs: log axes label their ticks with
    rendered powers, never `$\\mathdefault{10^{0}}$`. The page of the two systems draws the 1-thread run's pictures
    with `plot`'s plotters, and its devices side by side are `hardware -o`'s pictures of the same two runs (the same
    rows, reports/sections/systems.py, drawn by the same functions; the command itself draws them in
    tests/test_hardware_html.py); the page embeds every picture."""
    runs = [RUN, DATA / "batch_size_cpu_quick.json", DATA / "run_cpu_quick_rounds.json"]
    assert main(["plot", *map(str, runs), "-o", str(tmp_path / "plots")]) == 0
    assert main(["html", str(RUN_A), str(RUN_1THREAD), "-o", str(tmp_path / "html")]) == 0
    embeds_the_pictures((tmp_path / "html" / "index.html").read_text(),
                        {"matmul-", "roofline-", "hardware-levers", "hardware_matmul"}, peaks=False)
    assert main(["history", str(_history_dir(tmp_path / "runs")), "-o", str(tmp_path / "history")]) == 0
    names = {Path(p).name for p in tmp_path.rglob("*.png")}
    for prefix in ("roofline-", "matmul-", "conv-", "batch_size_", "hardware-levers", "hardware_matmul",
                   "history_step_", "history_"):
        assert any(name.startswith(prefix) for name in names), prefix
    assert len(drawn) >= 10
    for figure in drawn:
        labels = shown_tick_labels(figure)
        assert labels and not [t for t in labels if "mathdefault" in t or "$" in t], figure.get_suptitle()
    assert any("(mathtext)" in shown_tick_labels(f) for f in drawn)  # the log axes' powers of ten are rendered


def test_a_dollar_in_a_name_from_the_data_is_shown_as_a_dollar(drawn, tmp_path):
    data = read(RUN_A)
    for entry in data["benchmarks"]:
        entry["params"]["layer"] = "cost $a$ and $b$"  # would be mathtext if it were not escaped
        entry["extra_info"]["case"] = entry["extra_info"]["case"].replace("matmul/", "matmul/$x$/")
    other = read(RUN_1THREAD)
    for entry in other["benchmarks"]:
        entry["extra_info"]["case"] = entry["extra_info"]["case"].replace("matmul/", "matmul/$x$/")
    files = [write(data, tmp_path / "a.json"), write(other, tmp_path / "b.json")]
    assert main(["plot", str(files[0]), "-o", str(tmp_path / "plots")]) == 0
    titles = [ax.get_title() for f in drawn for ax in f.axes]
    assert r"cost \$a\$ and \$b\$" in titles  # escaped in the source, so shown as written
    assert main(["hardware", *map(str, files), "-o", str(tmp_path / "hw")]) == 0
    shown = [t for f in drawn for t in shown_tick_labels(f)]
    assert any(t.startswith("$x$/square/") for t in shown), shown
