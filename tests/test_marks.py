"""reports/marks.py on real rows: what each mark reads, and what the counts say of a run that records nothing."""

from __future__ import annotations

import pandas as pd
import pytest

from reports import marks
from reports.format import trust
from reports.format.load import load
from tests.resultfiles import DATA, read, write

BUSY = DATA / "busy"


@pytest.fixture(scope="module")
def main_run():
    return load([BUSY / "main_cpu_quick_busy.json"], samples=False)


def symbols_of(row: pd.Series) -> str:
    return "".join(m.symbol for m in marks.of(row))


def test_symbols_and_names_are_one_each():
    assert len({m.symbol for m in marks.MARKS}) == len({m.name for m in marks.MARKS}) == len(marks.MARKS)
    assert all(len(m.symbol) == 1 for m in marks.MARKS)


def test_contention_marks_a_figure_only_where_its_timer_includes_the_host(main_run):
    """A busy CPU delays when a CUDA-event sample starts, not what the device takes (reports/change.py): the same
    contended row read as an event- or graph-timed GPU case carries no `c`."""
    row = main_run[(main_run["contended"] == True) & (main_run["timer"] == "wall")].iloc[0]  # noqa: E712
    assert "c" in "".join(m.symbol for m in marks.of(row))
    for timer in ("cuda_event", "cuda_graph"):
        device_timed = row.copy()
        device_timed["timer"] = timer
        assert "c" not in "".join(m.symbol for m in marks.of(device_timed))
    assert "c" in "".join(m.symbol for m in marks.of(row.drop("timer")))  # a file that does not say: the host


def test_a_flag_that_is_no_boolean_marks_nothing(main_run):
    row = main_run[main_run["contended"] == True].iloc[0].copy()  # noqa: E712
    row["contended"], row["converged"] = "yes", "no"
    assert not marks.of(row)


def test_each_runs_count_names_its_marks_and_what_it_does_not_record(main_run):
    (count,) = marks.counts(main_run)
    assert count.text.startswith(f"{count.disturbed} of 115 timed cases of run main_cpu_quick_busy.json disturbed: ")
    assert count.by_mark["contended"] == int(marks.per_row(main_run).map(lambda f: marks.MARKS[0] in f).sum())
    (other,) = marks.counts(load([DATA / "pb4_other_project.json"], samples=False))
    assert other.text == ("0 of 2 timed cases of run pb4_other_project.json disturbed (the run records no host "
                          "contention and no convergence)")


def test_a_legend_names_only_the_marks_shown(main_run):
    shown = marks.symbols(main_run)
    key = marks.legend_of(shown)
    assert key.startswith("marks: c contended: ") and "t throttled" not in key  # no GPU, no telemetry
    assert marks.legend_of(shown.map(lambda s: None)) == ""
    assert all(len(line) <= 60 for line in marks.legend_of(shown, 60).splitlines())


def test_a_converged_flag_beside_a_spread_no_rule_accepts_is_marked_contradictory():
    """The GPU check's real CPU run recorded `converged: true` beside a rel-IQR of 13 % to 9,300 % (a plateau on a
    loaded box): the figure contradicts the flag, so the row says so (`x`) rather than look clean."""
    frame = load([DATA / "gpu_check_cpu" / "matmul.json"], samples=False)
    row = frame[frame["case"] == "matmul/square/256x256x256/float32"].iloc[0]
    assert trust.flag(row, "converged") and row["rel_iqr"] > trust.MAX_CONVERGED_REL_IQR
    assert "x" in symbols_of(row)
    calm = row.copy()
    calm["rel_iqr"] = 0.25
    assert "x" in symbols_of(calm)
    calm["rel_iqr"] = trust.MAX_CONVERGED_REL_IQR  # the widest a plateau of the quick profile converges at
    assert symbols_of(calm) == symbols_of(row).replace("x", "")
    assert "x contradictory: its flags disagree with its own figures" in marks.legend([marks.MARKS[-1]])


def test_contended_with_no_contended_sample_says_the_flag_and_the_share_disagree(main_run):
    row = main_run[(main_run["contended"] == True) & (main_run["timer"] == "wall")].iloc[0].copy()  # noqa: E712
    assert "x" not in symbols_of(row)
    row["contention"] = {**row["contention"], "share": 0.0, "flagged": 0}
    assert symbols_of(row).count("c") == 1 and "x" in symbols_of(row)
    row["contention"] = {**row["contention"], "share": "0"}  # no number: nothing to contradict the flag
    assert "x" not in symbols_of(row)


def test_a_percentage_of_a_peak_above_100_is_above_peak_whatever_the_flags_say(main_run):
    """5000 TFLOP/s at 100,000 % of the achievable peak the same table prints is no speed, flagged or not."""
    row = main_run[main_run["pct_achievable"].notna()].iloc[0].copy()
    assert "p" not in symbols_of(row)
    for column, value in (("pct_achievable", 1e5), ("pct_peak", 100.5)):
        above = row.copy()
        above[column], above["tflops"] = value, 5000.0
        assert "p" in symbols_of(above), column
    row["pct_achievable"] = 100.0  # the suite's reading of a case that raised its roof: flagged, never above 100
    assert "p" not in symbols_of(row)


@pytest.mark.parametrize("value", ["yes", 1])
def test_a_contended_flag_that_is_no_boolean_is_warned_about_and_read_as_not_recorded(value, tmp_path, capsys):
    data = read(BUSY / "main_cpu_quick_busy.json")
    entry = next(e for e in data["benchmarks"] if e["extra_info"].get("contended") is True)
    entry["extra_info"]["contended"] = value
    path = write(data, tmp_path / "busy.json")
    frame = load([path], samples=False)
    warned = [line for line in capsys.readouterr().err.splitlines() if "extra_info.contended" in line]
    assert len(warned) == 1 and str(path) in warned[0] and repr(value) in warned[0]
    assert "left out what cannot be right" in warned[0] and "expected true or false" in warned[0]
    row = frame[frame["case"] == entry["extra_info"]["case"]].iloc[0]
    assert pd.isna(row["contended"]) and "c" not in symbols_of(row)  # not recorded: no mark, and said so above
