"""reports.noise: a case's run-to-run noise between a candidate and one or two baseline runs, from rounds and from all
the cases of the runs pooled, on rows of real runs with rounds."""

from __future__ import annotations

import numpy as np
import pytest

from reports.format.load import load
from reports.noise import (
    MIN_POOLED_CASES,
    WHOLE_RUN_FLOOR_PCT,
    estimate,
    level,
    pooled,
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


def test_a_run_without_rounds_has_one_value():
    row = rows(RUN_A)[0]
    assert list(round_medians(row)) == [row["median_s"]]
    assert level(row) == row["median_s"]


def test_within_runs_pools_the_log_spread_of_every_run():
    a, b = rows(ROUNDS_A)[0], rows(ROUNDS_B)[0]
    ya, yb = np.log(a["round_medians_s"]), np.log(b["round_medians_s"])
    pooled = np.sqrt((np.sum((ya - ya.mean()) ** 2) + np.sum((yb - yb.mean()) ** 2)) / 4)
    assert within_runs([a, b]) == (pytest.approx(pooled), 4)
    assert within_runs([rows(RUN_A)[0]]) == (0.0, 0)


def real_ratios() -> np.ndarray:
    """The log ratios of levels of every case the two real quick runs with rounds share."""
    a = {r["case"]: level(r) for r in rows(ROUNDS_A)}
    b = {r["case"]: level(r) for r in rows(ROUNDS_B)}
    return np.array([np.log(b[c] / a[c]) for c in a if c in b])


def test_pooled_is_the_median_ratio_and_the_robust_spread_about_it_of_one_run():
    ratios = real_ratios()
    found = pooled(ratios)
    assert found.cases == len(ratios) >= MIN_POOLED_CASES
    assert found.shift == pytest.approx(float(np.median(ratios)))
    spread = 1.4826 * np.median(np.abs(ratios - np.median(ratios)))
    assert found.sigma == pytest.approx(spread / np.sqrt(2))  # a ratio is the difference of two runs' levels
    assert pooled(ratios[:MIN_POOLED_CASES - 1]) is None  # the median of a few cases is one of them
    assert pooled(np.array([np.nan] * 20)) is None


def test_a_pooled_estimate_takes_the_shift_out_and_never_judges_below_the_cases_spread():
    a, b = rows(ROUNDS_A)[0], rows(ROUNDS_B)[0]
    pool = pooled(real_ratios())
    found = estimate([a], b, noise_floor_pct=0.0, pool=pool)
    assert found.ratio == pytest.approx(level(b) / level(a) / np.exp(pool.shift))
    assert found.noise_pct >= np.expm1(pool.sigma) * 100 - 1e-9 and f"{pool.cases} cases pooled" in found.basis
    # where the cases were pooled, the assumed whole-run floor gives way to what they measured
    quiet = a.copy()
    quiet["round_medians_s"] = [a["median_s"]] * 3
    calm = pooled(np.full(20, 0.0) + np.linspace(-0.001, 0.001, 20))
    assert estimate([quiet], quiet, noise_floor_pct=0.5, pool=calm).noise_pct == pytest.approx(0.5)


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
