"""reports.judge, the one judgement of change over time, on seeded series with known steps, spikes, bimodal cases
and whole-run shifts (the real series of other projects are replayed in tests/test_real_series.py)."""

from __future__ import annotations

import numpy as np
import pytest

from reports import judge

NIGHTS, CASES = 40, 30


def quiet(noise: float = 0.01, seed: int = 0, nights: int = NIGHTS, cases: int = CASES) -> np.ndarray:
    """Levels (seconds) of `cases` cases over `nights` nights with log-normal run-to-run noise."""
    rng = np.random.default_rng(seed)
    base = np.exp(rng.uniform(-9, -3, size=(cases, 1)))
    return base * np.exp(rng.normal(0, noise, size=(cases, nights)))


def judged(levels: np.ndarray, acceptances=(), threshold: float = 0.05) -> judge.Judgement:
    return judge.judge(levels, [f"case{i}" for i in range(len(levels))], threshold, 0.01, list(acceptances))


def last(found: judge.Judgement, row: int = 0, night: int | None = None) -> judge.Outcome:
    night = found.nights - 1 if night is None else night
    return judge.outcome(found.tracks, row, night, found.threshold[row], found.shifts[night])


def statuses(levels: np.ndarray, row: int = 0) -> list[str]:
    """The status of one case on every night, each judged as the nightly meets it (on the nights up to it)."""
    return [last(judged(levels[:, :n + 1]), row).status for n in range(levels.shape[1])]


def test_quiet_nights_name_no_step_and_end_the_same():
    found = judged(quiet())
    assert not any(found.tracks.steps) and not found.shift.steps[0]
    assert {last(found, r).status for r in range(CASES)} == {judge.SAME}
    sigma = found.tracks.sigma_at[:, -1]  # the noise read off the series, widened for the nights it rests on
    assert np.all((sigma >= np.log1p(0.01)) & (sigma < 0.01 * 1.8))


def test_a_step_is_named_on_its_third_night_at_its_first_and_fails_until_accepted():
    levels = quiet()
    levels[3, 25:] *= 1.20
    seen = statuses(levels, 3)
    assert seen[25:27] == [judge.MOVED, judge.MOVED]  # one night, two: re-run, not yet a regression
    assert seen[27:] == [judge.SLOWER] * (NIGHTS - 27)  # a change that held: open until fixed or accepted
    (step,) = judged(levels).tracks.steps[3]
    assert (step.at, step.confirmed, step.accepted) == (25, 27, "") and step.ratio == pytest.approx(1.2, rel=0.02)
    accepted = judged(levels, [judge.Acceptance(27, "meant", frozenset({"case3"}))])
    assert accepted.tracks.steps[3][0].accepted == "meant" and last(accepted, 3).status == judge.SAME
    assert last(accepted, 3).ratio == pytest.approx(1.0, abs=0.03)  # the new level is the reference


def test_a_step_within_each_nights_noise_is_named_once_it_has_held_long_enough():
    """A 3.5-noise step (within what one night may do) is named within five nights, though no single night of it
    moved: each adds evidence, a noisier night less."""
    levels = quiet(noise=0.02)
    levels[5, 20:] *= np.exp(0.07)
    seen = statuses(levels, 5)
    first = seen.index(judge.SLOWER)
    assert judge.MOVED not in seen and 22 <= first <= 24 and seen[first:] == [judge.SLOWER] * (NIGHTS - first)
    assert judge.UNDONE not in seen  # a noisy night of the new level is not one back at the old


def test_spikes_of_one_or_two_nights_are_no_step_and_never_fail():
    levels = quiet()
    levels[7, 20] *= 3.0
    levels[8, 30:32] *= 1.5
    seen7, seen8 = statuses(levels, 7), statuses(levels, 8)
    assert seen7[20] == judge.MOVED and seen7[21:] == [judge.SAME] * (NIGHTS - 21)
    assert seen8[30:32] == [judge.MOVED, judge.MOVED] and set(seen8[32:]) == {judge.SAME}
    found = judged(levels)
    assert not found.tracks.steps[7] and not found.tracks.steps[8]


def test_a_bimodal_case_that_keeps_coming_back_is_no_step():
    """A case at +18 % on one night in four, runs of up to two nights: its longest run sets how long a move must
    last, and a visit to its other mode is within what its series has shown."""
    levels = quiet()
    rng = np.random.default_rng(5)
    visits = [n for n in range(NIGHTS) if rng.random() < 0.25]
    levels[2, visits] *= 1.18
    levels[2, [33, 34]] *= 1.18
    found = judged(levels)
    assert not found.tracks.steps[2]
    assert judge.SLOWER not in statuses(levels, 2)


def test_a_whole_run_that_moves_for_a_night_is_not_judged_case_by_case():
    levels = quiet()
    levels[:, 30] *= 1.25  # the machine, not the code
    shift = judge.outcome(judged(levels[:, :31]).shift, 0, 30, 0.05)
    assert shift.status == judge.MOVED and shift.ratio == pytest.approx(1.25, rel=0.02)
    assert {last(judged(levels[:, :31]), r).status for r in range(CASES)} == {judge.SHIFTED}
    found = judged(levels)
    assert not any(found.tracks.steps) and last(found).status == judge.SAME


def test_a_whole_run_shift_that_holds_is_a_step_of_the_machine():
    levels = quiet()
    levels[:, 30:] *= 1.15
    found = judged(levels[:, :33])
    assert judge.outcome(found.shift, 0, 32, 0.05).status == judge.SLOWER
    (step,) = found.shift.steps[0]
    assert step.at == 30 and step.ratio == pytest.approx(1.15, rel=0.02)


def test_an_improvement_becomes_the_reference_so_losing_it_is_a_regression():
    levels = quiet()
    levels[4, 15:] /= 1.3
    levels[4, 30:] *= 1.3
    found = judged(levels)
    first, second = found.tracks.steps[4]
    assert first.accepted == "improvement" and second.accepted == "" and second.ratio == pytest.approx(1.3, rel=0.03)
    assert last(found, 4).status == judge.SLOWER


def test_a_regression_that_is_fixed_is_closed_by_the_step_back():
    levels = quiet()
    levels[6, 15:25] *= 1.3
    found = judged(levels)
    assert [s.accepted for s in found.tracks.steps[6]] == ["", "improvement"]
    assert last(found, 6).status == judge.SAME
    back = judged(levels[:, :26])  # the first night back: the regression is open, this night looks fixed
    assert last(back, 6).status == judge.UNDONE


def test_the_first_nights_only_set_the_level():
    levels = quiet()
    levels[1, 3:] *= 1.3  # before the level rests on SETTLED nights: no step, no open regression
    found = judged(levels)
    assert not found.tracks.steps[1] and last(found, 1).status == judge.SAME


def test_a_case_that_did_not_share_the_runs_improvement_is_no_regression():
    """Most cases 3x faster from night 20 (a new stack), one unchanged: against the run it is 3x slower; in itself
    it did not move, so no step is named, no regression opens, and its reference follows it."""
    levels = quiet()
    levels[1:, 20:] /= 3.0
    found = judged(levels)
    assert not found.tracks.steps[0]
    assert last(found, 0).status == judge.SAME and last(found, 0).ratio == pytest.approx(1.0, abs=0.05)
    assert {last(found, r).status for r in range(1, CASES)} == {judge.SAME}


def test_a_heavy_tailed_machine_moves_the_one_night_limit_out():
    """One case in a hundred lies 8 noises out on some night: after TAIL_NIGHTS, such a night has not moved."""
    rng = np.random.default_rng(9)
    levels = quiet()
    outliers = rng.random(levels.shape) < 0.01
    levels[outliers] *= np.exp(8 * 0.01)
    found = judged(levels)
    assert found.tracks.tail(NIGHTS, judge.NIGHTS_PER_ALARM) > judge.MOVED_SIGMA
    late = [n for n in range(judge.TAIL_NIGHTS + 5, NIGHTS) for r in range(CASES)
            if found.tracks.moved[r, n]]
    assert len(late) <= 2
