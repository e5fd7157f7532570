"""Warm-up, and how many calls one sample batches (`calibrate`).

A call shorter than the rule's `min_sample_s` (1 ms) is batched, `reps` calls back to back in one sample (on CUDA
between one pair of events, as nvbench's batch measurement does), so that the clock reads and synchronizations
around a sample stay under 1 % of it (`MAX_OVERHEAD_SHARE`; an empty sample's time is measured,
`sample_overhead_s`). The batch is grown from warm-up's fastest call until a trial batch, the fastest of three,
lasts the target, as timeit's autorange and pytest-benchmark's calibration do: a call that was preempted, or that
waited for a descheduled thread of torch's pool, is only slower, so it cannot shrink the batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from suites.core.backends import Backend
from suites.core.samplers import WallSampler, repeat
from suites.core.stopping import StopRule


@dataclass(frozen=True)
class WarmUp:
    """What warm-up learned: calls made, the fastest call's wall time (synchronized; a call that was preempted or
    waited for a descheduled thread is only slower, so the fastest is the call's own time and one bad call cannot
    size the batches) and the last call's host enqueue time (which sizes the hold)."""

    calls: int
    call_s: float
    enqueue_s: float


def warm_up(fn: Callable[[], object], backend: Backend, warmup_s: float, least: int = 2) -> WarmUp:
    """Run `fn` for at least `warmup_s` and `least` calls (never under two: the first call pays for lazy init)."""
    calls, fastest, start = 0, math.inf, backend.now()
    while True:
        t0 = backend.now()
        fn()
        t1 = backend.now()
        backend.synchronize()
        t2 = backend.now()
        calls += 1
        if calls >= 2:  # the first call's lazy init is not the call's time
            fastest = min(fastest, t2 - t0)
            if t2 - start >= warmup_s and calls >= least:
                return WarmUp(calls, fastest, t1 - t0)


# A sample's own cost (its clock reads and synchronizations) is kept under this share of it. pytest-benchmark asks
# a round for 10 times the timer's precision, torch.utils.benchmark a block for 1e4 times an empty one's time; the
# profiles' `min_sample_s` (1 ms) is a hundred to a thousand times an empty sample on any host this runs on, so the
# bound only lengthens the samples of a host whose clock or synchronize is slow.
MAX_OVERHEAD_SHARE = 0.01
OVERHEAD_TRIES = 5  # empty samples timed; their median is the overhead (as torch.utils.benchmark takes it)
# Trial samples per batch size; the fastest counts. A trial preempted by another process, or stalled on a thread
# that another process holds, is only slower: the fastest of three is the batch's own time unless all three were.
CALIBRATION_TRIES = 3
CALIBRATION_AIM = 1.25  # a batch is grown to this many times the target, so that the next trial clears it
MAX_CALLS_PER_SAMPLE = 10_000_000  # a no-op takes ~30 ns: 1 ms of them is 33 000 calls
# A cold sample's calls each bring a flush and two events: 64 of them are about 256 launches, a quarter of CUDA's
# launch queue (about 1024), and at a 25-50 us flush (an H100's or H200's L2) a sample of 1.6-3.2 ms.
MAX_COLD_CALLS_PER_SAMPLE = 64


@dataclass(frozen=True)
class Calibration:
    """How many calls one sample batches (`calls_per_sample`) and what decided it."""

    calls: int
    overhead_s: float  # an empty sample's wall time: the clock reads and synchronizations around every sample


def sample_overhead(backend: Backend) -> float:
    """The wall time of an empty sample, timed as every wall sample is (median of OVERHEAD_TRIES)."""
    empty = WallSampler(repeat(lambda: None, 0), backend, 1)
    return float(np.median([empty().per_call_s for _ in range(OVERHEAD_TRIES)]))


def calibrate(fn: Callable[[], object], backend: Backend, rule: StopRule, warm: WarmUp,
              most: int = MAX_CALLS_PER_SAMPLE) -> Calibration:
    """The calls per sample (at most `most`) that make a sample last at least the target, found as timeit's
    autorange and pytest-benchmark's calibration find theirs: time a batch, grow it until it lasts long enough.

    The first size comes from warm-up's fastest call; each size is timed CALIBRATION_TRIES times and the fastest
    counts, so that neither a preempted warm-up call nor a preempted trial can leave the samples short (one call
    per sample on a busy host made a 0.5 us function read 1.1 us: the sample was mostly its clock reads). Under a
    rule without `min_sample_s` (a count: ranks in lockstep must call `fn` equally often), one call per sample.
    Calls are timed on the wall clock between synchronizations, which on a GPU is at least their device time; a
    cold call is timed with the flush before it, which its sample also holds."""
    overhead = sample_overhead(backend)
    if rule.calls is not None:  # asked for (pytest-benchmark's pedantic iterations)
        return Calibration(rule.calls, overhead)
    target = max(rule.min_sample_s, overhead / MAX_OVERHEAD_SHARE)
    if rule.min_sample_s <= 0 or warm.call_s >= target:
        return Calibration(1, overhead)
    calls = min(most, math.ceil(target / warm.call_s))
    while True:
        trial = WallSampler(repeat(fn, calls), backend, calls)
        took = min(trial().per_call_s for _ in range(CALIBRATION_TRIES)) * calls
        if took >= target or calls >= most:
            return Calibration(calls, overhead)
        calls = min(most, math.ceil(calls * CALIBRATION_AIM * target / max(took, 1e-9)))
