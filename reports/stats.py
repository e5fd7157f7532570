"""Step detection in a series of run medians: a penalized piecewise-constant fit, in the spirit of asv.

asv (airspeed velocity) finds regressions in nightly history by fitting a piecewise-constant function to the
per-run results and reporting the jumps between pieces. This module does the same with the classic exact
method for that fit, optimal partitioning (Jackson et al., 2005): over all ways to cut the series into
segments, minimize

    sum over segments of sum (y_i - mean of segment)^2  +  penalty x (number of segments)

by dynamic programming in O(n^2). It works on log(median) so that a step means the same relative change at
any time scale. The penalty is `6 sigma^2 log(n)`, with sigma the run-to-run noise estimated robustly from the
median absolute first difference (a step moves one difference only, so it barely moves the estimate). A segment
of L runs shifted by d is then kept when L (d / sigma)^2 > 6 log(n): a 30 % step over 2 % noise is named on
the very run it happens, a 5 % one after about three runs, and two unlucky runs at 2.7 sigma are not a step
(BIC's factor 2 let those through in tests on simulated noise).

A change must last before it is a step: a segment of fewer than MIN_RUNS runs is no level, and is merged into
the neighbour whose level is closer to its own, shortest first. So every step has MIN_RUNS runs or more on each
side: a one-night spike (a neighbour's job, a throttled GPU) or a two-night one is never a step, a change in
the newest runs is named once it has held for MIN_RUNS of them (a single night is `compare`'s to judge), and a
series of fewer than 2 x MIN_RUNS runs has no step at all. Finally, steps smaller than the minimum effect are
merged away, smallest first, so only changes a user would care about (default 5 %) are named.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

NOISE_FLOOR = 0.005  # log units (0.5 %): identical reruns must not make every wiggle a step
PENALTY = 6.0
MIN_RUNS = 3  # runs on each side of a step


@dataclass(frozen=True)
class LevelShift:
    """A jump between two fitted levels: at run index `at` the level goes from `before` to `after` (seconds)."""

    at: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        return self.after / self.before


def noise(y: np.ndarray) -> float:
    """Robust run-to-run standard deviation: 1.4826 x median |first difference| / sqrt(2), floored.

    The differences are not centred on their median: a series alternating between two levels (two machines
    taking turns, or a bimodal kernel choice) has differences +d, -d, whose median-centred spread is 0.
    """
    if len(y) < 3:
        return NOISE_FLOOR
    return max(1.4826 * float(np.median(np.abs(np.diff(y)))) / np.sqrt(2), NOISE_FLOOR)


def partition(y: np.ndarray, penalty: float) -> list[int]:
    """Start indices of the segments (0 first) of the optimal penalized least-squares partition of y."""
    n = len(y)
    s1 = np.concatenate([[0.0], np.cumsum(y)])
    s2 = np.concatenate([[0.0], np.cumsum(y * y)])
    best = np.zeros(n + 1)
    start = np.zeros(n + 1, dtype=int)
    best[0] = -penalty
    for end in range(1, n + 1):
        begin = np.arange(end)
        length = end - begin
        cost = (s2[end] - s2[begin]) - (s1[end] - s1[begin]) ** 2 / length
        total = best[begin] + cost + penalty
        start[end] = int(np.argmin(total))
        best[end] = total[start[end]]
    cuts, end = [], n
    while end > 0:
        cuts.append(int(start[end]))
        end = start[end]
    return sorted(cuts)


def _levels(medians: np.ndarray, cuts: list[int]) -> list[float]:
    """Each segment's level: the median of its run medians (robust to one odd run inside a segment)."""
    bounds = [*cuts, len(medians)]
    return [float(np.median(medians[a:b])) for a, b in itertools.pairwise(bounds)]


def lasting(medians: np.ndarray, cuts: list[int], min_runs: int) -> list[int]:
    """The cuts with every segment at least min_runs long: the shortest shorter one is merged into the neighbour
    whose level is closer to its own (the only one at either end of the series), until none is left."""
    cuts = list(cuts)
    while len(cuts) > 1:
        lengths = np.diff([*cuts, len(medians)])
        short = int(np.argmin(lengths))
        if lengths[short] >= min_runs:
            break
        levels = np.log(_levels(medians, cuts))
        if short == 0:
            del cuts[1]
        elif short == len(cuts) - 1 or abs(levels[short] - levels[short - 1]) <= abs(levels[short] -
                                                                                     levels[short + 1]):
            del cuts[short]  # into the segment before it
        else:
            del cuts[short + 1]  # into the segment after it
    return cuts


def steps(medians: list[float] | np.ndarray, min_effect: float = 0.05, penalty_scale: float = PENALTY,
          min_runs: int = MIN_RUNS) -> list[LevelShift]:
    """The steps of a series of run medians (seconds, oldest first) whose size is at least min_effect, each with
    min_runs runs or more on either side."""
    if not (np.isfinite(min_effect) and min_effect >= 0):
        raise ValueError(f"min_effect {min_effect!r}: must be a finite fraction >= 0")
    medians = np.asarray(medians, dtype=float)
    if len(medians) < 2 * min_runs or not np.all(medians > 0):
        return []
    y = np.log(medians)
    penalty = penalty_scale * noise(y) ** 2 * np.log(len(y))
    cuts = lasting(medians, partition(y, penalty), min_runs)
    while len(cuts) > 1:
        levels = _levels(medians, cuts)
        sizes = [abs(np.log(b / a)) for a, b in itertools.pairwise(levels)]
        smallest = int(np.argmin(sizes))
        if sizes[smallest] >= np.log1p(min_effect):
            break
        del cuts[smallest + 1]
    levels = _levels(medians, cuts)
    return [LevelShift(int(at), before, after) for at, before, after in zip(cuts[1:], levels, levels[1:], strict=False)]


def fitted(medians: list[float] | np.ndarray, found: list[LevelShift]) -> np.ndarray:
    """The piecewise-constant fit drawn under the data: each run's segment level."""
    medians = np.asarray(medians, dtype=float)
    cuts = [0, *(s.at for s in found)]
    levels = _levels(medians, cuts)
    out = np.empty(len(medians))
    for a, b, level in zip(cuts, [*cuts[1:], len(medians)], levels, strict=False):
        out[a:b] = level
    return out
