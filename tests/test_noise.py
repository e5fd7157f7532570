"""reports.noise: a case's run-to-run noise from rounds and from a history, on rows of real runs with rounds."""

from __future__ import annotations

import numpy as np
import pytest

from reports.format.load import load
from reports.noise import (
    MIN_HISTORY,
    WHOLE_RUN_FLOOR_PCT,
    between_runs,
    estimate,
    has_between_run_data,
    level,
    round_medians,
    within_runs,
)
from tests.resultfiles import ROUNDS_A, ROUNDS_B, RUN_A


def rows(path) -> list:
    frame = load([path])
    return [row for _, row in frame[frame["median_s"].notna()].iterrows()]


def test_round_medians_and_level_of_a_run_with_rounds():
    for row in rows(ROUNDS_A):
        assert len(round_medians(row)) == row["bench_rounds"] == 3
        assert level(row) == pytest.approx(float(np.median(row["round_medians_s"])))


def test_a_run_without_rounds_has_one_value_and_no_between_run_data():
    row = rows(RUN_A)[0]
    assert list(round_medians(row)) == [row["median_s"]]
    assert not has_between_run_data([row], row)
    assert has_between_run_data([row] * MIN_HISTORY, row)
    assert has_between_run_data([row], rows(ROUNDS_A)[0])


def test_within_runs_pools_the_log_spread_of_every_run():
    a, b = rows(ROUNDS_A)[0], rows(ROUNDS_B)[0]
    ya, yb = np.log(a["round_medians_s"]), np.log(b["round_medians_s"])
    pooled = np.sqrt((np.sum((ya - ya.mean()) ** 2) + np.sum((yb - yb.mean()) ** 2)) / 4)
    assert within_runs([a, b]) == (pytest.approx(pooled), 4)
    assert within_runs([rows(RUN_A)[0]]) == (0.0, 0)


def test_between_runs_needs_a_history():
    history = rows(ROUNDS_A)[:1] + rows(ROUNDS_B)[:1]
    assert between_runs(history) == (0.0, 0)
    history.append(rows(ROUNDS_A)[0])
    sigma, dof = between_runs(history)
    assert dof == 2 and sigma == pytest.approx(np.std(np.log([level(r) for r in history]), ddof=1))


def test_estimate_uses_the_largest_noise_and_the_floor_when_runs_agree():
    a, b = rows(ROUNDS_A)[0], rows(ROUNDS_B)[0]
    found = estimate([a], b)
    assert found.ratio == pytest.approx(level(b) / level(a))
    assert found.ci_low < found.ratio < found.ci_high and "3 rounds x 2 runs" in found.basis
    within = np.expm1(within_runs([a, b])[0]) * 100
    assert found.noise_pct == pytest.approx(max(within, WHOLE_RUN_FLOOR_PCT))
    quiet = a.copy()
    quiet["round_medians_s"] = [a["median_s"]] * 3  # three identical rounds: no spread at all
    floor = estimate([quiet], quiet, noise_floor_pct=4.0)
    assert floor.ratio == 1.0 and floor.noise_pct == pytest.approx(4.0) and "floor 4 %" in floor.basis
    assert floor.ci_high == pytest.approx(np.exp(1.96 * np.log1p(0.04) * np.sqrt(2)), rel=1e-3)
    # one baseline run cannot see what holds a whole run: it never assumes less than the whole-run floor
    assert estimate([quiet], quiet, noise_floor_pct=0.5).noise_pct == pytest.approx(WHOLE_RUN_FLOOR_PCT)


def test_with_a_history_the_run_levels_spread_and_the_rounds_mean_noise_judge():
    a, b = rows(ROUNDS_A), rows(ROUNDS_B)
    history, cand = [a[0], b[0], a[1]], b[1]
    found = estimate(history, cand, noise_floor_pct=0.0)
    within = within_runs([*history, cand])[0] / np.sqrt(3)
    assert found.noise_pct == pytest.approx(np.expm1(max(between_runs(history)[0], within)) * 100)
    assert "3 baseline runs" in found.basis
