"""A case's run-to-run noise between one candidate run and one or two baseline runs (`compare A.json B.json`),
and how far the candidate lies from the baseline in units of that noise. A history of three runs or more is judged
by reports/judge.py instead, which reads the noise off the whole series.

The question is how much a case moves between runs, not how much its samples scatter within one run: samples
taken a second apart share the machine's state of that second (clocks, neighbours' load, memory placement), and an
interval computed from them as if they were independent is far too narrow (on a shared 2-core CPU, a case moved
+21 % between runs a minute apart while each run's own 95 % interval was a few percent wide). Two sources of
between-run spread are used, each in log space so that a spread means the same relative change at any time scale:

- rounds (`--bench-rounds N`): the medians of a case's N interleaved passes in one run (`round_medians_s`);
  the pooled standard deviation of the log round medians around each run's mean, over baseline and candidate,
  as it is, not divided by sqrt(N): rounds cannot see an effect that holds a whole run (a neighbour's job running
  throughout), so this is cautious on purpose (on this machine's A/A pairs, dividing by sqrt(N) put 14 % of the
  cases beyond 1.96 standard errors, where 5 % belong);
- all the cases of the two runs (`Pooled`, where they share `MIN_POOLED_CASES` or more): the median of the cases'
  log ratios is the shift the whole candidate run shares (the machine's state that run, or a change every case
  shares), taken out of every case; and the robust spread of the ratios about it is the whole-run noise one case
  shows, which no single case's rounds can see. This is what lets a single baseline run see a 1.10x change of one
  case at 1 % noise while an A/A pair stays clean, and it replaces the assumed `WHOLE_RUN_FLOOR_PCT` where enough
  cases are shared.

Sigma, the noise of one run's level, is the largest of these and a floor, `noise_floor_pct`. The candidate's level
minus the baseline's (the mean of K <= 2 runs' levels), less the shift, d, has a standard error
sigma x sqrt(1 + 1/K); its 95 % interval and a two-sided p-value use Student's t with the degrees of freedom of
the estimate (few rounds give wide intervals, as they should). A run's level is the median of its round medians
(one odd round does not move it), or the median of its samples when it has no rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

DEFAULT_NOISE_FLOOR_PCT = 1.0  # identical reruns of a quiet GPU agree closer than this; no verdict trusts less
# What holds a whole run (the process's memory placement, a neighbour's job) is invisible to its rounds. On this
# 2-core CPU, six quiet A/A runs of one commit put the float32 GPT-2 head gemm at 26.3 to 28.7 ms from run to run
# while each run's three rounds agreed within 1-2 %: where too few cases are shared to measure it (Pooled), a
# baseline run assumes at least this much noise, so one such move is `unsure`, not `slower`.
WHOLE_RUN_FLOOR_PCT = 2.5
MIN_POOLED_CASES = 8  # cases two runs must share before their median and spread say anything of the whole run
ROBUST = 1.4826  # median absolute deviation -> standard deviation for normal noise


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


def within_runs(rows: list[pd.Series]) -> tuple[float, int]:
    """Pooled standard deviation of log round medians around each run's mean, and its degrees of freedom."""
    squares, dof = 0.0, 0
    for row in rows:
        y = np.log(round_medians(row))
        if len(y) > 1:
            squares += float(np.sum((y - y.mean()) ** 2))
            dof += len(y) - 1
    return (float(np.sqrt(squares / dof)), dof) if dof else (0.0, 0)


@dataclass(frozen=True)
class Pooled:
    """What all the cases of two runs say together (module docstring): the shift the whole candidate run shares
    (the median of the cases' log ratios) and one run's level noise that the cases show about it."""

    shift: float  # log units
    sigma: float  # log units, one run's level
    cases: int

    @property
    def shift_pct(self) -> float:
        return float(np.expm1(self.shift) * 100)


def pooled(ratios: np.ndarray) -> Pooled | None:
    """The shift and noise of the cases' log ratios (candidate / baseline level), or None with fewer than
    MIN_POOLED_CASES: the median of a few cases is one of them."""
    ratios = np.asarray(ratios, dtype=float)
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios) < MIN_POOLED_CASES:
        return None
    shift = float(np.median(ratios))
    spread = ROBUST * float(np.median(np.abs(ratios - shift)))  # of a difference of two runs' levels
    return Pooled(shift, spread / np.sqrt(2), len(ratios))


def estimate(base: list[pd.Series], cand: pd.Series, noise_floor_pct: float = DEFAULT_NOISE_FLOOR_PCT,
             pool: Pooled | None = None) -> ChangeEstimate:
    """The candidate run against one or two baseline runs of the same case, judged by run-to-run noise; `pool`:
    what all the cases of the runs say (their shared shift is taken out, their noise is a floor of this case's)."""
    within, within_dof = within_runs([*base, cand])
    rounds = max(len(round_medians(r)) for r in [*base, cand])
    if pool is None:
        noise_floor_pct = max(noise_floor_pct, WHOLE_RUN_FLOOR_PCT)
    floor = np.log1p(noise_floor_pct / 100)
    across = (pool.sigma, pool.cases - 1) if pool is not None else (0.0, 0)
    sigma, dof = max((within, within_dof), across, (floor, 0), key=lambda s: s[0])
    parts = []
    if within_dof:
        parts.append(f"{rounds} rounds x {len(base) + 1} runs")
    if pool is not None:
        parts.append(f"{pool.cases} cases pooled")
    basis = " and ".join(parts) or "noise floor"
    if sigma == floor:
        basis += f" (floor {noise_floor_pct:g} %)"
    k = len(base)
    shift = pool.shift if pool is not None else 0.0
    diff = np.log(level(cand)) - float(np.median(np.log([level(r) for r in base]))) - shift
    error = sigma * np.sqrt(1 + 1 / k)
    # With no estimate behind the floor (dof 0), the floor is taken as known: the normal distribution.
    shape = (dof,) if dof else ()  # the distribution's own methods: freezing one costs each case 0.25 ms
    dist = stats.t if dof else stats.norm
    half = float(dist.ppf(0.975, *shape)) * error
    p = float(2 * dist.sf(abs(diff) / error, *shape))
    return ChangeEstimate(ratio=float(np.exp(diff)), ci_low=float(np.exp(diff - half)),
                          ci_high=float(np.exp(diff + half)), p_value=p, noise_pct=float(np.expm1(sigma) * 100),
                          basis=basis)
