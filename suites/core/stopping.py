"""When a measurement stops taking samples: the rule (`StopRule`), its criteria, and whether the spread it stopped
at is a measurement (`converged`).

nvbench's rules, plus its "the noise has stopped changing" exit: at least `min_samples` samples and `min_time_s`
of measured time, then stop when the relative interquartile range is at `target_rel_iqr` (`target`), or when the
spreads of the last `plateau_window` samples and of the `plateau_window` before them, two disjoint windows,
differ by less than `plateau_tol` of the larger (`plateau`: the spread is what it is, more samples would not
shrink it; a power-capped gemm or a host-bound op ends here), or at `timeout_s` (`timeout`). A rule with a
`count` takes exactly that many samples and stops with `count` (ranks in lockstep). A correctness experiment,
run once and never sampled, says `once` (suites/core/runner.py). `converged`: the spread met the target
(`target`; `count` with a rel-IQR at the target), or stopped changing near it (`plateau` with a rel-IQR within
`plateau_ceiling` times the target); a plateau farther out stops early but stays unconverged, with a note. A
training step of 1.5 s or more cannot take `min_samples` samples inside the timeout (an fp32 GPT-2 step at batch
64, a largest-batch step of 2-6 s): its `timeout` with at least `MIN_LONG_SAMPLES` samples at the target is
converged too (`long_samples`), and says on how many samples (suites/core/timing.py). A rule with
`min_time_on_wall` (the full profile's) also stops at the target once its samples span `min_time_s` on the wall
clock (`WallTimeTarget`): a host-bound op's device time sums to it several times slower.

As nvbench's stopping criteria are, each exit is an object fed every sample that says whether the samples so far
meet it (`Criterion`: `RelIqrTarget`, `Plateau`); `Stopping` holds a rule's criteria in the order they are asked
and the frame around them (the count, the least samples and time, the timeout), and names the reason it stops.
A criterion keeps what it needs as samples come, so that asking it after every sample costs what one sample
adds, not what all of them hold: the rel-IQR over all samples reads three order statistics of samples kept in
order (`SortedSamples`), where recomputing the percentiles of every sample after every sample made sampling
quadratic (up to `max_samples`, 100 000). The figures are numpy's: `rel_iqr` is np.percentile's (linear
interpolation) over the same samples, to the last bit (tests/test_stopping.py feeds both the same streams).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

STOP_REASONS = ("target", "plateau", "timeout", "once", "count")
# Warm-up calls of ranks in lockstep, as nccl-tests' -w 5: the first call meets the ranks wherever they were, the
# ones after it run aligned, so that the fastest of them is the call's own time (the calls per sample follow it).
LOCKSTEP_WARMUP_CALLS = 5


@dataclass(frozen=True)
class StopRule:
    """When to stop sampling. The defaults follow nvbench (10 samples, 0.5 s, 15 s timeout); the 1 % rel-IQR
    target is what event-timed kernels of a millisecond or more reach on a quiet GPU (about 0.75 % relative
    standard deviation for normal noise, nvbench's default max noise being 0.5 %), and the plateau exit ends the
    cases that cannot reach it well before the timeout. The profiles' rules are in suites/core/profiles.py."""

    min_samples: int = 10
    min_time_s: float = 0.5
    target_rel_iqr: float = 0.01
    timeout_s: float = 15.0
    max_samples: int = 100_000
    warmup_s: float = 0.1
    min_sample_s: float = 1e-3  # shorter calls are batched so that one sample lasts at least this long
    plateau_window: int = 20
    plateau_tol: float = 0.05
    # A plateau is converged only within this multiple of the target: a spread that stopped changing at twice the
    # target is what a power-capped GPU gives; one at 30 times it (random host delays) is not a measurement.
    plateau_ceiling: float = 2.0
    count: int | None = None  # exactly this many samples, whatever their spread (ranks in lockstep)
    # What a test may ask through pytest-benchmark's options (suites/harness/device_bench.py): samples taken before
    # any stop, the timeout's included (min_rounds: a slow call must not end with 2 samples); the calls of every
    # sample, not calibrated (pedantic's iterations); the fewest warm-up calls (pedantic's warmup_rounds; never
    # under two: the first call pays for lazy initialisation and is not the call's time).
    at_least: int = 0
    calls: int | None = None
    warmup_calls: int = 2
    # `min_time_s` may also be met on the wall clock once the spread is at the target (`WallTimeTarget`): a
    # host-bound op's samples hold a fraction of their wall time in device time.
    min_time_on_wall: bool = False

    def counted(self, samples: int) -> StopRule:
        """A rule every rank stops at together: LOCKSTEP_WARMUP_CALLS warm-up calls, calls per sample not
        calibrated (one, or the count the ranks agree on: suites/core/timing.py), exactly `samples`."""
        return dataclasses.replace(self, count=samples, warmup_s=0.0, min_sample_s=0.0,
                                   warmup_calls=max(self.warmup_calls, LOCKSTEP_WARMUP_CALLS))


def rel_iqr(samples: Sequence[float]) -> float:
    """Interquartile range over median; inf for fewer than two samples (nothing is known about the spread)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return iqr_over_median(float(q1), float(med), float(q3))


def iqr_over_median(q1: float, med: float, q3: float) -> float:
    """The rel-IQR of three quartiles; inf where the median is not positive (or NaN, as a NaN sample makes it)."""
    return (q3 - q1) / med if med > 0 else math.inf


# The fewest samples whose spread a long step's timeout may be judged on. Three samples give a rel-IQR of half
# their range over their median: at a 1 % target, three steps within 2 % of each other, which a step of seconds
# (thousands of kernels, its noise averaged over them) shows when it is steady and a step disturbed in one of
# them does not.
MIN_LONG_SAMPLES = 3


def converged(reason: str, spread: float, rule: StopRule, pooled: bool = False,
              long_samples: int | None = None) -> bool:
    """Whether a spread is a measurement: at the target, or (a plateau, or rounds pooled, whose spread includes
    their moves from round to round) within `plateau_ceiling` of it. `long_samples`: the samples of a training
    step, whose timeout with at least MIN_LONG_SAMPLES of them at the target is converged (a step of seconds has
    no time for `min_samples` inside the timeout, and its spread is known from fewer)."""
    if pooled or reason == "plateau":
        return spread <= rule.plateau_ceiling * rule.target_rel_iqr
    if reason == "timeout" and long_samples is not None:
        return long_samples >= MIN_LONG_SAMPLES and spread <= rule.target_rel_iqr
    return reason in ("target", "count") and spread <= rule.target_rel_iqr


QUARTILES = (0.25, 0.5, 0.75)


def places(n: int, q: float) -> tuple[int, int]:
    """The two places of an order of `n` values that quantile `q` reads (the last one twice at the top)."""
    below = min(math.floor((n - 1) * q), n - 1)
    return below, min(below + 1, n - 1)


def quantile(value_at: Callable[[int], float], n: int, q: float) -> float:
    """np.percentile's linear interpolation (its `_lerp`, operation for operation) of `n` values in order, of
    which it reads the two around the quantile (`places`)."""
    virtual = (n - 1) * q
    below, above = places(n, q)
    if virtual >= n - 1:
        return value_at(n - 1)
    a, b, t = value_at(below), value_at(above), virtual - below
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def window_rel_iqr(window: Sequence[float]) -> float:
    """`rel_iqr` of a few samples (a plateau's window), sorted here: the same figure as numpy's."""
    if len(window) < 2:
        return math.inf
    if any(math.isnan(x) for x in window):
        return math.inf
    ordered = sorted(window)
    return iqr_over_median(*(quantile(ordered.__getitem__, len(ordered), q) for q in QUARTILES))


class SortedSamples:
    """Samples kept in order as they come, in sorted blocks: adding one moves at most a block's items (a flat
    sorted list moves half of all of them), and reading the k-th finds its block from their running lengths."""

    BLOCK = 1024  # a block splits in two past twice this

    def __init__(self) -> None:
        self.blocks: list[list[float]] = []
        self.maxes: list[float] = []  # each block's largest value
        self.nans = 0  # NaN samples are counted apart: they have no place in an order (numpy's figure is NaN)
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def add(self, value: float) -> None:
        self.n += 1
        if math.isnan(value):
            self.nans += 1
            return
        if not self.blocks:
            self.blocks.append([value])
            self.maxes.append(value)
            return
        i = min(bisect.bisect_left(self.maxes, value), len(self.blocks) - 1)
        block = self.blocks[i]
        bisect.insort(block, value)
        self.maxes[i] = block[-1]
        if len(block) > 2 * self.BLOCK:
            self.blocks[i:i + 1] = [block[:self.BLOCK], block[self.BLOCK:]]
            self.maxes[i:i + 1] = [block[self.BLOCK - 1], block[-1]]

    def at(self, indices: Sequence[int]) -> list[float]:
        """The values at these places of the order."""
        ends = list(itertools.accumulate(map(len, self.blocks)))
        found = []
        for k in indices:
            b = bisect.bisect_right(ends, k)
            found.append(self.blocks[b][k - (ends[b - 1] if b else 0)])
        return found

    def rel_iqr(self) -> float:
        """`rel_iqr` of every sample added: three quartiles, each from the two values around it."""
        n = self.n
        if n < 2 or self.nans:
            return math.inf
        read = sorted({k for q in QUARTILES for k in places(n, q)})
        values = dict(zip(read, self.at(read), strict=True))
        return iqr_over_median(*(quantile(values.__getitem__, n, q) for q in QUARTILES))


class Criterion(Protocol):
    """An exit of sampling, as nvbench's stopping criteria are: fed every sample, it says whether the samples so far
    meet it; `reason` is the `stop_reason` it gives."""

    reason: str

    def add(self, sample_s: float) -> None: ...

    def met(self) -> bool: ...


class RelIqrTarget:
    """The spread of every sample so far is at the target."""

    reason = "target"

    def __init__(self, target: float) -> None:
        self.target = target
        self.samples = SortedSamples()

    def add(self, sample_s: float) -> None:
        self.samples.add(sample_s)

    def met(self) -> bool:
        return self.samples.rel_iqr() <= self.target


class Plateau:
    """The spread has stopped changing: the spreads of the last `window` samples and of the `window` before them
    agree within `tol` of the larger; two disjoint windows, so that the comparison is not of almost the same
    samples twice."""

    reason = "plateau"

    def __init__(self, window: int, tol: float) -> None:
        self.window, self.tol = window, tol
        self.recent: deque[float] = deque(maxlen=2 * window)

    def add(self, sample_s: float) -> None:
        self.recent.append(sample_s)

    def met(self) -> bool:
        if self.window <= 0 or len(self.recent) < 2 * self.window:
            return False
        both = list(self.recent)
        before, recent = window_rel_iqr(both[:self.window]), window_rel_iqr(both[self.window:])
        if not (math.isfinite(recent) and math.isfinite(before)):
            return False
        return abs(recent - before) <= self.tol * max(recent, before)


class WallTimeTarget:
    """The spread is at the target and the samples span the rule's `min_time_s` on the wall clock, although their
    device time does not sum to it yet: a host-bound op (its enqueue longer than its device time: attention at
    batch 1, conv layers of 14x14 images in bf16) holds the device for a third to a seventh of each sample's wall
    time, so summing `min_time_s` of device time took 3-7 times that on the clock. What `min_time_s` guards against,
    a median taken over too short a stretch of time to see the device's clocks and the host's noise move, is
    guarded on the wall clock as well, and the spread is the device time's, at the same target with at least
    `min_samples` samples: the same precision, for a fraction of the wall time. Asked before the frame of the
    other exits (`Stopping.reason`), since it replaces the device-time part of that frame."""

    reason = "target"

    def __init__(self, rule: StopRule) -> None:
        self.rule = rule
        self.spread = RelIqrTarget(rule.target_rel_iqr)

    def add(self, sample_s: float) -> None:
        self.spread.add(sample_s)

    def met_at(self, samples: int, elapsed_s: float) -> bool:
        return (samples >= self.rule.min_samples and elapsed_s >= self.rule.min_time_s
                and self.spread.met())


def criteria(rule: StopRule) -> list[Criterion]:
    """A rule's exits, in the order they are asked: its target, then its plateau."""
    return [RelIqrTarget(rule.target_rel_iqr), Plateau(rule.plateau_window, rule.plateau_tol)]


class Stopping:
    """A rule applied to samples as they come: `add` each one with the time it took on its clock, then `reason`
    says why sampling stops now (`target`, `plateau`, `timeout`, `count`), or None to go on.

    `measured_s` is the time the samples took on their own clock (a cold sample's flushes between its calls
    included: the device spent that time on the measurement); `elapsed_s`, asked of `reason`, the wall time
    since sampling began. The criteria are asked only once the rule has its least samples and time."""

    def __init__(self, rule: StopRule, exits: list[Criterion] | None = None) -> None:
        self.rule = rule
        self.exits = criteria(rule) if exits is None else exits
        self.on_wall = WallTimeTarget(rule) if rule.min_time_on_wall and rule.count is None else None
        self.samples = 0
        self.measured_s = 0.0

    def add(self, sample_s: float, span_s: float) -> None:
        self.samples += 1
        self.measured_s += span_s
        for criterion in self.exits:
            criterion.add(sample_s)
        if self.on_wall is not None:
            self.on_wall.add(sample_s)

    def reason(self, elapsed_s: float) -> str | None:
        rule, n = self.rule, self.samples
        if rule.count is not None:
            return "count" if n >= rule.count else None
        if n < rule.at_least:
            return None
        if self.on_wall is not None and self.measured_s < rule.min_time_s and self.on_wall.met_at(n, elapsed_s):
            return self.on_wall.reason
        if n >= rule.min_samples and self.measured_s >= rule.min_time_s:
            for criterion in self.exits:
                if criterion.met():
                    return criterion.reason
        if elapsed_s >= rule.timeout_s or n >= rule.max_samples:
            return "timeout"
        return None
