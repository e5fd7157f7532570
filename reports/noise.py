"""A case's run-to-run noise, and how far a candidate run lies from its baseline in units of that noise.

A nightly job compares one run with another, so the question is how much a case moves between runs, not how
much its samples scatter within one run: samples taken a second apart share the machine's state of that second
(clocks, neighbours' load, memory placement), and an interval computed from them as if they were independent
is far too narrow (on a shared 2-core CPU, a case moved +21 % between runs a minute apart while each run's own
95 % interval was a few percent wide). Two sources of between-run spread are used, each in log space so that a
spread means the same relative change at any time scale:

- rounds (`--bench-rounds N`): the medians of a case's N interleaved passes in one run (`round_medians_s`);
  the pooled standard deviation of the log round medians around each run's mean, over baseline and candidate;
- a history: with at least `MIN_HISTORY` baseline runs, the standard deviation of their per-run levels, which
  holds every effect that differs between runs, rounds included.

Without a history, the noise of one run's level, sigma, is the round spread as it is, not divided by sqrt(N):
rounds cannot see an effect that holds a whole run (a neighbour's job running throughout), so this is cautious
on purpose (on this machine's A/A pairs, dividing by sqrt(N) put 14 % of the cases beyond 1.96 standard
errors, where 5 % belong). With a history, the spread of the run levels measures exactly that noise, round
effects included; sigma is then the larger of it and the round spread divided by sqrt(N) (what rounds alone
put into a level). Either way sigma is never below a floor, `noise_floor_pct`. The candidate's level minus
the baseline's (the median of K runs' levels), d, then has a standard error sigma x sqrt(1 + c/K), c = 1 for
K <= 2 (the median is the mean) and pi/2 above (the median's efficiency); its 95 % interval and a
two-sided p-value use Student's t with the degrees of freedom of the estimate (few rounds give wide intervals,
as they should). A run's level is the median of its round medians (one odd round does not move it), or the
median of its samples when it has no rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

MIN_HISTORY = 3  # baseline runs needed before their own spread is trusted as the run-to-run noise
DEFAULT_NOISE_FLOOR_PCT = 1.0  # identical reruns of a quiet GPU agree closer than this; no verdict trusts less
# Without a history, what holds a whole run (the process's memory placement, a neighbour's job) is invisible to
# its rounds. On this 2-core CPU, six quiet A/A runs of one commit put the float32 GPT-2 head gemm at 26.3 to
# 28.7 ms from run to run while each run's three rounds agreed within 1-2 %: a single baseline run assumes at
# least this much noise, so one such move is `unsure`, not `slower`. A history measures it instead.
WHOLE_RUN_FLOOR_PCT = 2.5


@dataclass(frozen=True)
class ChangeEstimate:
    """The candidate's level against the baseline's, with the run-to-run noise that judges it."""

    ratio: float  # candidate level / baseline level
    ci_low: float
    ci_high: float
    p_value: float
    noise_pct: float  # sigma, the noise of one run's level, in percent
    basis: str  # what the noise was estimated from, e.g. "3 rounds x 2 runs" or "5 runs"


def round_medians(row: pd.Series) -> np.ndarray:
    """A run's per-round medians of one case, or its one median when it was measured in a single round."""
    rounds = row.get("round_medians_s")
    if isinstance(rounds, list | tuple | np.ndarray):
        values = np.asarray([x for x in rounds if isinstance(x, int | float) and x > 0], dtype=float)
        if len(values):
            return values
    return np.asarray([row["median_s"]], dtype=float)


def level(row: pd.Series) -> float:
    """A run's level for one case: the median of its round medians."""
    return float(np.median(round_medians(row)))


def has_between_run_data(base: list[pd.Series], cand: pd.Series) -> bool:
    """Whether anything beyond one run's samples is known: rounds on either side, or a history of runs."""
    return len(base) >= MIN_HISTORY or any(len(round_medians(r)) > 1 for r in [*base, cand])


def within_runs(rows: list[pd.Series]) -> tuple[float, int]:
    """Pooled standard deviation of log round medians around each run's mean, and its degrees of freedom."""
    squares, dof = 0.0, 0
    for row in rows:
        y = np.log(round_medians(row))
        if len(y) > 1:
            squares += float(np.sum((y - y.mean()) ** 2))
            dof += len(y) - 1
    return (float(np.sqrt(squares / dof)), dof) if dof else (0.0, 0)


def between_runs(base: list[pd.Series]) -> tuple[float, int]:
    """Standard deviation of the baseline runs' log levels and its degrees of freedom (0 below MIN_HISTORY)."""
    if len(base) < MIN_HISTORY:
        return 0.0, 0
    y = np.log([level(r) for r in base])
    return float(np.std(y, ddof=1)), len(y) - 1


def estimate(base: list[pd.Series], cand: pd.Series,
             noise_floor_pct: float = DEFAULT_NOISE_FLOOR_PCT) -> ChangeEstimate:
    """The candidate run against K >= 1 baseline runs of the same case, judged by run-to-run noise."""
    within, within_dof = within_runs([*base, cand])
    between, between_dof = between_runs(base)
    rounds = max(len(round_medians(r)) for r in [*base, cand])
    if between_dof:
        within /= np.sqrt(rounds)  # the history holds whole-run effects: rounds only add their mean's noise
    if not between_dof:
        noise_floor_pct = max(noise_floor_pct, WHOLE_RUN_FLOOR_PCT)
    floor = np.log1p(noise_floor_pct / 100)
    sigma, dof = max((within, within_dof), (between, between_dof), (floor, 0), key=lambda s: s[0])
    parts = []
    if within_dof:
        parts.append(f"{rounds} rounds x {len(base) + 1} runs")
    if between_dof:
        parts.append(f"{len(base)} baseline runs")
    basis = " and ".join(parts) or "noise floor"
    if sigma == floor:
        basis += f" (floor {noise_floor_pct:g} %)"
    k = len(base)
    diff = np.log(level(cand)) - float(np.median(np.log([level(r) for r in base])))
    error = sigma * np.sqrt(1 + (1 if k <= 2 else np.pi / 2) / k)
    # With no estimate behind the floor (dof 0), the floor is taken as known: the normal distribution.
    dist = stats.t(dof) if dof else stats.norm()
    half = float(dist.ppf(0.975)) * error
    p = float(2 * dist.sf(abs(diff) / error))
    return ChangeEstimate(ratio=float(np.exp(diff)), ci_low=float(np.exp(diff - half)),
                          ci_high=float(np.exp(diff + half)), p_value=p, noise_pct=float(np.expm1(sigma) * 100),
                          basis=basis)
