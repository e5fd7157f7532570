"""The record of one measurement (`Measurement`: the samples and how they were taken) and the pooling of a
case's rounds into one (`pool_rounds`).

An event-timed sample reads its device time in the events' steps of 0.5 us: a kernel of a few microseconds timed
cold (one pair of events per call) spreads by that alone, whatever the GPU does. `resolution_rel_iqr` is the
spread the steps alone give, and `resolution_limited` says when it, not the op's noise, is most of the spread of a
measurement that did not converge.

Every sample also records the host's time to enqueue its calls (`enqueue_s` per call), so each case says whether
the host or the device is the bottleneck (`host_bound`: enqueueing a call takes longer than running it; unknown,
None, where nothing compares the two: a step or an op timed on the wall clock of a GPU). Every sample is also
probed for a busy host (suites/core/host_load.py): `contention`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from suites.core import host_load
from suites.core.samplers import EVENT_RESOLUTION_S
from suites.core.stopping import StopRule, converged, rel_iqr

IQR_PER_SIGMA = 1.349  # the interquartile range of a normal distribution, in standard deviations


@dataclass
class Measurement:
    """Per-call times in seconds (device time for CUDA ops, wall time otherwise) and how they were obtained."""

    samples_s: list[float]
    timer: str  # cuda_event, cuda_graph or wall
    calls_per_sample: int
    stop_reason: str  # one of STOP_REASONS
    rule: StopRule  # what judged it
    warmup_calls: int = 0
    l2_flush: bool = False
    device_type: str = "cpu"
    enqueues_s: list[float] = field(default_factory=list)  # per sample: host time to enqueue one call
    hold_s: float | None = None  # CUDA ops: how long the stream was held before each sample's start event
    dropped_samples: int = 0  # CUDA ops: samples whose hold ran out before the host had enqueued them
    notes: list[str] = field(default_factory=list)
    contention: host_load.Contention | None = None
    rounds: list[Measurement] = field(default_factory=list)  # when pooled: each round's own measurement
    sample_overhead_s: float | None = None  # an empty sample's wall time, kept under 1 % of a sample (calibrate)
    gc_disabled: bool = False  # the garbage collector was off while the samples were taken (sample_until_stopped)
    kind: str = "op"  # the case's kind (suites/core/cases.py): a `step`'s timeout may converge on few samples

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples_s))

    @property
    def enqueue_s(self) -> float | None:
        """The median host time to enqueue one call (None when no sample recorded it)."""
        return float(np.median(self.enqueues_s)) if self.enqueues_s else None

    @property
    def rel_iqr(self) -> float:
        return rel_iqr(self.samples_s)

    @property
    def converged(self) -> bool:
        """The spread met the rule (suites/core/stopping.py), and the samples are the op's: a CPU case on several
        threads whose threads waited on the scheduler (`host_load.pool_waited`) is not, whatever its spread."""
        if host_load.pool_waited(self.contention, self.device_type):
            return False
        return converged(self.stop_reason, self.rel_iqr, self.rule, pooled=bool(self.rounds),
                         long_samples=len(self.samples_s) if self.kind == "step" else None)

    @property
    def resolution_rel_iqr(self) -> float | None:
        """The most rel-IQR the events' resolution alone can give these samples (None: not timed by events).

        A window's reading is the difference of two timestamps each rounded down to EVENT_RESOLUTION_S. A window
        of a fraction f of a step past a whole number of them, at a random phase against the clock, reads one
        step short or long by f or 1 - f: a variance of f(1 - f) steps squared, at most a quarter, which is taken
        (the fraction of a jittering window is not known from its median). A hot sample is one window around its
        calls (the error divides by the calls), a cold one the mean of a window per call (it divides by their
        square root); the IQR of a normal spread is 1.349 standard deviations."""
        if self.timer not in ("cuda_event", "cuda_graph") or not self.median_s > 0:
            return None
        windows, calls_per_window = (self.calls_per_sample, 1) if self.l2_flush else (1, self.calls_per_sample)
        sigma = EVENT_RESOLUTION_S / 2 / math.sqrt(windows) / calls_per_window
        return IQR_PER_SIGMA * sigma / self.median_s

    @property
    def resolution_limited(self) -> bool:
        """An unconverged event-timed measurement whose spread is mostly the events' resolution: the steps alone
        can account for more than half of its variance (spreads add as their squares), so more samples or a
        quieter GPU would not converge it. A kernel of under about 5 us timed cold ends so: its samples of a few dozen
        windows spread by 2-4 % from the steps alone, past the 1 % target."""
        floor = self.resolution_rel_iqr
        return (floor is not None and not self.converged and math.isfinite(self.rel_iqr)
                and floor**2 > 0.5 * self.rel_iqr**2)

    @property
    def host_bound(self) -> bool | None:
        """Whether the host needs longer to enqueue a call than the device needs to run it (a loop of these calls
        would leave the device idle). On a CPU the host is the device: both times are the same work, never more.
        On a GPU only device time compares with enqueue time: a wall-clock sample there holds both (None)."""
        if self.enqueue_s is None or (self.device_type == "cuda" and self.timer == "wall"):
            return None
        return self.device_type == "cuda" and self.enqueue_s > self.median_s


def pool_rounds(rounds: Sequence[Measurement]) -> Measurement:
    """One measurement of a case from every round's samples (in the order they ran), as its headline figure:
    the spread and `converged` are those of all of them, `stop_reason` and the timer those of the last round."""
    loads = [m.contention for m in rounds if m.contention is not None]
    return dataclasses.replace(
        rounds[-1], samples_s=[s for m in rounds for s in m.samples_s], rounds=list(rounds),
        enqueues_s=[e for m in rounds for e in m.enqueues_s],
        dropped_samples=sum(m.dropped_samples for m in rounds),
        notes=list(dict.fromkeys(note for m in rounds for note in m.notes)),
        contention=host_load.pooled(loads) if loads else None)
