"""reports/marks.py on real rows: what each mark reads, and what the counts say of a run that records nothing."""

from __future__ import annotations

import pytest

from reports import marks
from reports.format.load import load
from tests.resultfiles import DATA

BUSY = DATA / "busy"


@pytest.fixture(scope="module")
def main_run():
    return load([BUSY / "main_cpu_quick_busy.json"], samples=False)


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
