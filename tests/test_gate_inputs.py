"""The gate and the histories on inputs that used to mislead them: each finding of the issue, a test that failed
before its fix. Runs are real quick runs of this machine (tests/resultfiles.py), restamped or scaled as named."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from reports import judge, nights, timeline
from reports.__main__ import main
from reports.comparison import compare
from reports.format.load import load
from reports.gate import PASSED, gate_status
from tests.resultfiles import ROUNDS_A, RUN_A, converged_case, dated, measured, read, scaled, write


def night(data: dict, day: int) -> dict:
    return dated(data, f"2026-11-{day:02d}T03:00:00+00:00", f"{day:08x}".ljust(40, "0"))


def test_a_history_that_doubles_every_night_is_a_trend_not_noise():
    """Every night 2x the one before, then 5.7x: the night-to-night differences go one way, so the noise is read
    about the drift (judge.DRIFT_SHARE), not as 100 % per night; the last night is not passed."""
    rng = np.random.default_rng(0)
    levels = np.exp(rng.uniform(-9, -3, (20, 1))) * np.exp(rng.normal(0, 0.01, (20, 12)))
    levels[0] = 1e-3 * 2.0 ** np.arange(12)
    levels[0, -1] = levels[0, -2] * 5.7
    found = judge.judge(levels, [f"c{i}" for i in range(20)], 0.05, 0.01)
    last = judge.outcome(found.tracks, 0, 11, found.threshold[0], found.shifts[11])
    assert last.status in (judge.MOVED, judge.SLOWER) and last.sigma < 0.05


@pytest.mark.parametrize("value", ["1e308", "1001", "inf", "nan", "-1"])
def test_a_threshold_no_regression_can_cross_is_refused_like_inf(value, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(RUN_A), str(RUN_A), "--threshold", value])
    assert stop.value.code == 2 and "is not a percentage from 0 to 1000" in capsys.readouterr().err


def test_stats_that_contradict_their_round_medians_are_invalid_in_every_report(tmp_path, capsys):
    """`stats` 2x the round medians: table would show 2x, compare the round medians; the case is invalid in both."""
    data = read(ROUNDS_A)
    entry = min(measured(data), key=lambda e: max(e["extra_info"]["round_medians_s"]) /
                min(e["extra_info"]["round_medians_s"]))  # rounds that agree: 2x is outside every one of them
    for key in ("median", "mean", "min", "max", "q1", "q3"):
        entry["stats"][key] *= 2
    entry["stats"]["data"] = [x * 2 for x in entry["stats"]["data"]]
    path = write(data, tmp_path / "odd.json")
    frame = load([path])
    row = frame[frame["case"] == entry["extra_info"]["case"]].iloc[0]
    assert row["status"] == "invalid" and "lies outside its round medians" in row["reason"]
    assert "lies outside its round medians" in capsys.readouterr().err
    assert main(["compare", str(ROUNDS_A), str(path), "--fail-on-regression"]) == 1


def test_a_symlinked_machine_folder_is_read(tmp_path):
    """A machine's folder linked into the history (Path.rglob does not enter it before Python 3.13): read, and a
    link back up the tree is not read twice."""
    real = tmp_path / "elsewhere" / "box2"
    for day in (1, 2, 3):
        write(night(read(RUN_A), day), real / f"{day}.json")
    history = tmp_path / "history"
    history.mkdir()
    os.symlink(real, history / "box2")
    os.symlink(history, history / "loop")
    assert load([history])["file"].nunique() == 3


def test_runs_that_share_a_key_but_not_their_figures_are_kept_with_a_warning(tmp_path, capsys):
    data = night(read(RUN_A), 1)
    case = converged_case(data)
    write(data, tmp_path / "a.json")
    write(data, tmp_path / "a_copy.json")  # a true copy: one run
    write(scaled(data, case, 5.0), tmp_path / "b.json")  # same key, 5x one case: not a copy
    kept = timeline.without_copies(load([tmp_path]))
    assert sorted(p.rsplit("/", 1)[1] for p in kept["file"].unique()) == ["a.json", "b.json"]
    assert "share machine, datetime and commit but hold different figures" in capsys.readouterr().err


def test_a_run_dated_in_the_future_does_not_become_the_newest(tmp_path, capsys):
    """A wrong clock (2199): left out of the history with a warning, so the real newest night is still judged."""
    data = read(RUN_A)
    case = converged_case(data)
    for day in range(1, 5):
        write(night(data, day), tmp_path / f"{day}.json")
    write(night(scaled(data, case, 2.0), 5), tmp_path / "5.json")
    wrong = dated(data, "2199-01-01T03:00:00+00:00", "f" * 40)
    write(wrong, tmp_path / "wrong.json")
    gates = timeline.gate(load([tmp_path]))
    assert [g.last.rsplit("/", 1)[1] for g in gates] == ["5.json"]
    assert "dated after today" in capsys.readouterr().err and gates[0].verdicts[case].ratio > 1.5


def test_a_candidate_dated_before_some_history_runs_is_judged_on_the_nights_before_it(tmp_path, capsys):
    data = read(RUN_A)
    for day in (1, 2, 3, 9):
        write(night(data, day), tmp_path / "runs" / f"{day}.json")
    cand = write(night(data, 5), tmp_path / "cand.json")
    result = compare(load([tmp_path / "runs"]), load([cand]), directory=True)
    assert result.baseline.startswith("3 runs") and "dated after the candidate" in capsys.readouterr().err
    assert gate_status(result) == PASSED


def test_a_converged_flag_its_own_spread_contradicts_is_not_believed_by_the_gate(tmp_path):
    """`converged: true` beside a rel-IQR of 25 %: two single runs without rounds cannot judge a 2x change of it."""
    data = read(RUN_A)
    case = converged_case(data)
    slow = scaled(data, case, 2.0)
    entry = next(e for e in measured(slow) if e["extra_info"]["case"] == case)
    entry["extra_info"]["rel_iqr"] = 0.25
    few = {c["extra_info"]["case"] for c in measured(data)[:5]} | {case}
    for run in (data, slow):  # too few cases to pool: the run's noise is not measured
        run["benchmarks"] = [e for e in measured(run) if e["extra_info"]["case"] in few]
    result = compare(load([write(data, tmp_path / "a.json")]), load([write(slow, tmp_path / "b.json")]))
    verdict = next(v for v in result.verdicts if v.case == case)
    assert verdict.verdict == "unsure" and "converged flag contradicted by its spread" in verdict.not_judged


def test_a_throttled_figure_is_not_judged_however_its_flag_is_typed():
    """The nights read `throttled` as the marks do (trust.flagged): numpy's booleans, which a frame built by pandas
    holds, are the same flag; text is no flag."""
    frame = pd.DataFrame({"throttled": [True, np.True_, False, np.False_, "yes", None]})
    assert list(nights.figures_usable(frame)) == [False, False, True, True, True, True]
