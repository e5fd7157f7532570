"""How a workload is timed: warm-up, samples, an L2 flush for cold cases, and a stopping rule that ends.

Three kinds of case are timed three ways (`Case.kind`):

- `op` (matmul, conv, attention): device time with the host out of the window. On CUDA each sample is the time
  between two CUDA events around `reps` calls. A spin kernel (`torch.cuda._sleep`) holds the stream before the
  start event until the host has enqueued every call of the sample, as nvbench's blocking kernel does: the hold
  is sized from the enqueue time measured in warm-up, and every sample checks that it held (the start event must
  still be pending once the host has enqueued the end event). A sample where the hold ran out is dropped and the
  hold lengthened, so a slow host never shows up as device time; after `FOLLOW_HOST_AFTER` held samples in a row
  the hold comes back to what they needed, so that a one-off slow enqueue does not lengthen every later sample. A
  sample whose enqueue outlasts every hold with several calls may be filling CUDA's launch queue (about 1024
  launches) behind the spin: its calls per sample are halved until they fit. An op whose enqueue itself waits on
  the device (a host sync inside, `.item()`, a copy from pageable memory) outlasts every hold even so: after
  `WAIT_CONFIRMATIONS` such samples in a row, or one at the longest hold, it is timed on the wall clock instead,
  with a note; so is an op whose events see no more device time than an empty pair of events (its work runs on
  another stream or device). A CUDA graph is replayed once before its samples (its first replay uploads it).
  A cold op flushes the L2 before every call: its sample holds several calls, each after its own flush and
  between its own pair of events, behind one hold, and reads the mean of their times (the flushes between count
  towards `min_time_s`, as device time the measurement took). On a CPU the same loop runs on the wall clock.
- `step` (a training step): the wall time of `reps` steps between two synchronizations, host overheads, syncs
  and launch gaps included, since that is what a user's loop takes; device-busy time is measured beside it by an
  observer (suites/observers/busy.py).
- `check` (a correctness experiment): run once by the runner and never sampled here.

Calls per sample (`calibrate`): a call shorter than the rule's `min_sample_s` (1 ms) is batched, `reps` calls
back to back in one sample (on CUDA between one pair of events, as nvbench's batch measurement does), so that the
clock reads and synchronizations around a sample stay under 1 % of it (`MAX_OVERHEAD_SHARE`; an empty sample's
time is measured, `sample_overhead_s`). The batch is grown from warm-up's fastest call until a trial batch, the
fastest of three, lasts the target, as timeit's autorange and pytest-benchmark's calibration do: a call that was
preempted, or that waited for a descheduled thread of torch's pool, is only slower, so it cannot shrink the batch.

Every sample also records the host's time to enqueue its calls (`enqueue_s` per call), so each case says whether
the host or the device is the bottleneck (`host_bound`: enqueueing a call takes longer than running it; unknown,
None, where nothing compares the two: a step or an op timed on the wall clock of a GPU). Every sample is also
probed for a busy host (suites/core/host_load.py).

Stopping (nvbench's rules, plus its "the noise has stopped changing" exit): at least `min_samples` samples and
`min_time_s` of measured time, then stop when the relative interquartile range is at `target_rel_iqr` (`target`),
or when the spreads of the last `plateau_window` samples and of the `plateau_window` before them, two disjoint
windows, differ by less than `plateau_tol` of the larger (`plateau`: the spread is what it is, more samples would
not shrink it; a power-capped gemm or a host-bound op ends here), or at `timeout_s` (`timeout`). A rule with a
`count` takes exactly that many samples and stops with `count` (ranks in lockstep). `converged`: the spread met
the target (`target`; `count` with a rel-IQR at the target), or stopped changing near it (`plateau` with a rel-IQR
within `plateau_ceiling` times the target); a plateau farther out stops early but stays unconverged, with a note.

The clocks and the CUDA primitives used (the host clock, synchronize, the spin, events, the L2 flush, graph
capture, the allocator's counters) come from a `Backend`, torch's by default, so that a model of stream and event
semantics can stand in for a GPU in tests (tests/virtual_gpu.py).
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from suites.core import host_load

STOP_REASONS = ("target", "plateau", "timeout", "once", "count")


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

    def counted(self, samples: int) -> StopRule:
        """A rule every rank stops at together: two warm-up calls, one call per sample, exactly `samples`."""
        return dataclasses.replace(self, count=samples, warmup_s=0.0, min_sample_s=0.0)


def rel_iqr(samples: Sequence[float]) -> float:
    """Interquartile range over median; inf for fewer than two samples (nothing is known about the spread)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else math.inf


def plateaued(samples: Sequence[float], window: int, tol: float) -> bool:
    """Whether the spread of the last `window` samples and that of the `window` before them agree within `tol`
    of the larger: two disjoint windows, so that the comparison is not of almost the same samples twice."""
    if len(samples) < 2 * window:
        return False
    recent, before = rel_iqr(samples[-window:]), rel_iqr(samples[-2 * window:-window])
    return math.isfinite(recent) and math.isfinite(before) and abs(recent - before) <= tol * max(recent, before)


def stop_reason(samples: Sequence[float], measured_s: float, elapsed_s: float, rule: StopRule) -> str | None:
    """Why sampling stops after this sample (`target`, `plateau`, `timeout`, `count`), or None to go on.
    `measured_s` is the time the samples took on their own clock (a cold sample's flushes between its calls
    included: the device spent that time on the measurement)."""
    if rule.count is not None:
        return "count" if len(samples) >= rule.count else None
    if len(samples) < rule.at_least:
        return None
    enough = len(samples) >= rule.min_samples and measured_s >= rule.min_time_s
    if enough:
        if rel_iqr(samples) <= rule.target_rel_iqr:
            return "target"
        if plateaued(samples, rule.plateau_window, rule.plateau_tol):
            return "plateau"
    if elapsed_s >= rule.timeout_s or len(samples) >= rule.max_samples:
        return "timeout"
    return None


def converged(reason: str, spread: float, rule: StopRule, pooled: bool = False) -> bool:
    """Whether a spread is a measurement: at the target, or (a plateau, or rounds pooled, whose spread includes
    their moves from round to round) within `plateau_ceiling` of it."""
    if pooled or reason == "plateau":
        return spread <= rule.plateau_ceiling * rule.target_rel_iqr
    return reason in ("target", "count") and spread <= rule.target_rel_iqr


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
        return converged(self.stop_reason, self.rel_iqr, self.rule, pooled=bool(self.rounds))

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


class Event(Protocol):
    """A CUDA event with timing (torch.cuda.Event's methods that the sampler uses)."""

    def record(self) -> None: ...

    def query(self) -> bool: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: Event) -> float: ...  # milliseconds


class Backend(Protocol):
    """The clocks and CUDA primitives timing relies on: the host clock, synchronize, the stream-holding spin,
    events, the L2 flush, graph capture, the allocator's counters. `TorchBackend` is the real one; a model of their
    semantics stands in for a GPU in tests."""

    def now(self) -> float: ...  # host seconds

    def synchronize(self) -> None: ...  # waits for all the work this process started, on every device it uses

    def spin_hz(self) -> float: ...  # the clock at which `sleep` cycles are counted: at least the real SM clock

    def sleep(self, cycles: int) -> None: ...  # enqueue a kernel that spins for `cycles`

    def event(self) -> Event: ...

    def l2_flush(self) -> Callable[[], None]: ...  # enqueues a write that evicts the L2; its buffer made once

    def capture_graph(self, fn: Callable[[], object], reps: int) -> Callable[[], None]: ...

    def memory_allocated(self) -> int: ...  # bytes held by tensors on the device

    def max_memory_allocated(self) -> int: ...  # their peak since `reset_peak_memory`

    def reset_peak_memory(self) -> None: ...


# The fastest SM clock any CUDA GPU runs at. _sleep spins for clock cycles; converting seconds at a clock at least
# as high as the real one makes the hold at least as long as asked, whatever the clock does under a power cap.
_FASTEST_CLOCK_HZ = 3.0e9


class TorchBackend:
    """torch.cuda on a CUDA device, the host clock alone on a CPU (where only `now` and `synchronize` are used)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._flush: Callable[[], None] | None = None

    def now(self) -> float:
        return time.perf_counter()

    def synchronize(self) -> None:
        """Every stream of the run's device, and of any other device this process has a context on: a callable
        that works on another device is waited for too, so a wall-clock sample holds its work."""
        if self.device.type == "cuda":
            for index in _devices_in_use(self.device):
                torch.cuda.synchronize(index)

    def spin_hz(self) -> float:
        clock_khz = getattr(torch.cuda.get_device_properties(self.device), "clock_rate", 0)
        return clock_khz * 1e3 if clock_khz else _FASTEST_CLOCK_HZ

    def sleep(self, cycles: int) -> None:
        torch.cuda._sleep(cycles)

    def event(self) -> Event:
        return torch.cuda.Event(enable_timing=True)

    def l2_flush(self) -> Callable[[], None]:
        """Evicts the GPU's L2 by writing a buffer twice its size (random values: a memset of zeros may be
        compressed by the memory system). The buffer is made on the first call and kept by the backend, so that a
        caller can make it before a case's peak-memory window opens (suites/core/runner.py)."""
        if self._flush is None:
            l2_bytes = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 64 * 2**20
            buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=self.device)
            self._flush = lambda: buffer.random_(0, 256)
        return self._flush

    def capture_graph(self, fn: Callable[[], object], reps: int) -> Callable[[], None]:
        """A CUDA graph of `reps` back-to-back calls; replaying it removes per-launch CPU overhead."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        return graph.replay

    def memory_allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0

    def max_memory_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else 0

    def reset_peak_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)


def _devices_in_use(device: torch.device) -> list[int]:
    """The run's device and every other CUDA device this process has a context on (asking creates none: torch's
    own tests of lazy initialisation ask so)."""
    own = device.index if device.index is not None else torch.cuda.current_device()
    others = range(torch.cuda.device_count())
    return [own, *(i for i in others if i != own and torch._C._cuda_hasPrimaryContext(i))]


def needs_flush(device: torch.device, kind: str, cold: bool) -> bool:
    """Whether a case is timed with the L2 flushed before every call: a cold op on CUDA (elsewhere `cold` does
    nothing, and the record says so)."""
    return cold and device.type == "cuda" and kind == "op"


class Ranks(Protocol):
    """Ranks of a distributed run measuring one case together (suites/harness/distributed.py)."""

    def before_sample(self) -> None: ...  # lines the ranks up, outside the timed window

    def agree(self, seconds: float) -> float: ...  # the largest value any rank offers (every rank's hold)


MIN_HOLD_S = 20e-6  # the shortest hold: the launch latency of the start event itself
HOLD_MARGIN = 1.5  # the hold is this many times the enqueue time measured (host jitter)
MAX_HOLD_S = 0.5  # a hold never grows past this; a sample that still outlasts it is kept with a note
MAX_HOLD_RETRIES = 8
# Samples in a row whose hold ran out although each hold was at least twice the last enqueue time: a slow host
# does not double its time three times running, an enqueue that waits for the device (a sync inside) always does.
WAIT_CONFIRMATIONS = 3
# Held samples in a row after which a lengthened hold comes back to what they needed: a one-off slow enqueue (a
# graph's first replay, an allocator that grew, a preemption) must not lengthen every later sample of the case.
FOLLOW_HOST_AFTER = 20
# cudaEventElapsedTime's resolution ("around 0.5 microseconds", the CUDA runtime API): a window of no more device
# time than an empty one plus this held no work.
EVENT_RESOLUTION_S = 0.5e-6
EMPTY_WINDOW_TRIES = 3


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


def plan_hold(enqueue_per_call_s: float, reps: int) -> float:
    """The hold for a sample of `reps` calls: the enqueue time measured, with margin, and never below the floor."""
    return min(MAX_HOLD_S, max(MIN_HOLD_S, HOLD_MARGIN * enqueue_per_call_s * reps + MIN_HOLD_S))


def lengthen_hold(hold_s: float, enqueue_s: float) -> float:
    """After a sample whose hold ran out: at least twice what the host took to enqueue it, and longer than before."""
    return min(MAX_HOLD_S, max(2 * hold_s, 2 * enqueue_s))


def spin_cycles(hz: float, seconds: float) -> int:
    """Cycles for the spin kernel to hold the stream for at least `seconds` at a clock of at most `hz`."""
    return max(1, int(hz * seconds))


def _repeat(fn: Callable[[], object], reps: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(reps):
            fn()
    return run


def _after(first: Callable[[], object], fn: Callable[[], object]) -> Callable[[], None]:
    """`first()` then `fn()`: a cold call, the flush before it, as warm-up and calibration time it."""
    def both() -> None:
        first()
        fn()
    return both


@dataclass(frozen=True)
class Taken:
    """One kept sample: seconds per call, the host's seconds to enqueue one call, and the time the sample occupied
    on its clock (its calls, and a cold sample's flushes between them), which counts towards `min_time_s`."""

    per_call_s: float
    enqueue_s: float
    span_s: float


# A sampler returns a Taken, or None when the sample must be dropped.
Sample = Taken | None


class EventsCannotTime(Exception):
    """CUDA events cannot time this op (the subclasses say why); it is timed on the wall clock instead."""


class EnqueueWaitsOnDevice(EventsCannotTime):
    """The host's enqueue of a sample outlasted every hold: it waits for the device (a host sync inside, a copy
    from pageable memory) or, with many calls per sample, fills CUDA's launch queue behind the spin."""


class NothingOnTimedStream(EventsCannotTime):
    """The events around the calls saw no more device time than an empty pair of events: the work went to another
    stream or device (or there is none), which the events of the current stream do not see."""


class HeldSampler:
    """CUDA events around the calls of a sample, the stream held by a spin kernel until the host has enqueued them
    all. Hot: one pair of events around `reps` calls (`run` makes them all). Cold (`flush` given): `reps` calls of
    `run`, each after a flush and between a pair of events of its own, all behind one hold; a sample is the mean
    of their times, so that the flushes stay out of it and the events' 0.5 us steps average out."""

    def __init__(self, run: Callable[[], None], backend: Backend, reps: int, hold_s: float, *,
                 flush: Callable[[], None] | None = None, fixed_hold: bool = False,
                 empty_window_s: float | None = None) -> None:
        self.run, self.backend, self.reps, self.flush, self.hold_s = run, backend, reps, flush, hold_s
        # ranks in lockstep keep every sample and one agreed hold: a drop would call fn once more on one rank,
        # and a hold of its own would let its collectives start apart from the others'
        self.fixed_hold = fixed_hold
        # the first kept sample's windows are compared with this many seconds each (None: not checked)
        self.empty_window_s = empty_window_s
        self.windows = [(backend.event(), backend.event()) for _ in range(reps if flush is not None else 1)]
        self.floor_s = 0.0  # the hold never follows the host below a hold that the spin itself ran short of
        self.recent: list[float] = []  # enqueue times of the samples held since the last change of the hold
        self.dropped, self.retries, self.outlasted, self.notes = 0, 0, 0, []

    def __call__(self) -> Sample:
        t0 = self.backend.now()
        self.backend.sleep(spin_cycles(self.backend.spin_hz(), self.hold_s))
        calls_s = self._enqueue_calls()
        first, last = self.windows[0][0], self.windows[-1][1]
        held = not first.query()  # the window had not opened when the host finished enqueueing
        enqueue_s = self.backend.now() - t0
        last.synchronize()
        timed_s = sum(start.elapsed_time(end) for start, end in self.windows) / 1e3
        taken = Taken(timed_s / self.reps, calls_s / self.reps, first.elapsed_time(last) / 1e3)
        if not held:
            return self._hold_ran_out(taken, enqueue_s)
        self.outlasted = 0
        self._check_not_empty(timed_s)
        self._follow_host(enqueue_s)
        return taken

    def _enqueue_calls(self) -> float:
        """Enqueue the sample's windows; returns the host's seconds in the calls themselves (`enqueue_s`: not the
        spin's, the events' or the flushes' launches, which are the timer's)."""
        calls_s = 0.0
        for start, end in self.windows:
            if self.flush is not None:
                self.flush()  # between the windows: each call starts with a cold L2, and no flush is timed
            start.record()
            t0 = self.backend.now()
            self.run()
            calls_s += self.backend.now() - t0
            end.record()
        return calls_s

    def _check_not_empty(self, timed_s: float) -> None:
        """On the first kept sample: windows holding no more device time than empty ones held no work."""
        if self.empty_window_s is None:
            return
        empty_s, self.empty_window_s = self.empty_window_s * len(self.windows), None
        if timed_s <= empty_s:
            raise NothingOnTimedStream(f"{timed_s * 1e6:.3g} us of device time in {self.reps} call(s), against "
                                       f"{empty_s * 1e6:.3g} us for as many empty windows")

    def _follow_host(self, enqueue_s: float) -> None:
        """After FOLLOW_HOST_AFTER held samples in a row, bring a lengthened hold back to what they needed (the
        slowest of them, with the usual margin), never below `floor_s`."""
        if self.fixed_hold:
            return
        self.recent.append(enqueue_s)
        if len(self.recent) < FOLLOW_HOST_AFTER:
            return
        needed = max(self.floor_s, plan_hold(max(self.recent) / self.reps, self.reps))
        self.recent.clear()
        if needed < self.hold_s:
            self.hold_s, self.retries = needed, 0

    def _hold_ran_out(self, taken: Taken, enqueue_s: float) -> Sample:
        """Lengthen the hold and drop the sample; past the retries (or the longest hold), keep it with a note. An
        enqueue that keeps outlasting a hold made twice as long as it took waits on the device: raise."""
        if self.fixed_hold:
            self._note(f"the host took {enqueue_s * 1e3:.3g} ms to enqueue a sample, past the agreed "
                       f"{self.hold_s * 1e3:.3g} ms hold: device time may include host gaps")
            return taken
        self.outlasted += 1
        self.recent.clear()
        if self.outlasted >= WAIT_CONFIRMATIONS or (self.outlasted > 1 and self.hold_s >= MAX_HOLD_S):
            self.dropped += 1
            raise EnqueueWaitsOnDevice(f"{self.outlasted} samples in a row outlasted their hold (the last one "
                                       f"{self.hold_s * 1e3:.3g} ms, enqueued in {enqueue_s * 1e3:.3g} ms)")
        lengthened = lengthen_hold(self.hold_s, enqueue_s)
        if enqueue_s <= self.hold_s:  # the host was in time: the spin ran short (an SM clock above the one reported)
            self.floor_s = lengthened
        if self.retries < MAX_HOLD_RETRIES and self.hold_s < MAX_HOLD_S:
            self.retries += 1
            self.dropped += 1
            self.hold_s = lengthened
            return None
        self.hold_s = lengthened  # kept, but the next sample is held longer
        self._note(f"the host took {enqueue_s * 1e3:.3g} ms to enqueue a sample, past the "
                   f"{self.hold_s * 1e3:.3g} ms hold: device time may include host gaps")
        return taken

    def _note(self, text: str) -> None:
        if not self.notes:
            self.notes.append(text)


def empty_window_s(backend: Backend) -> float:
    """The most device time a held pair of events with nothing between them reads, over EMPTY_WINDOW_TRIES (on a
    GPU a fraction of a microsecond, in steps of the events' resolution), plus that resolution."""
    empty = HeldSampler(lambda: None, backend, 1, MIN_HOLD_S)
    taken = [t for t in (empty() for _ in range(EMPTY_WINDOW_TRIES)) if t is not None]
    return max((t.per_call_s for t in taken), default=0.0) + EVENT_RESOLUTION_S


class WallSampler:
    """The wall time of `reps` calls between two synchronizations, and the host's time until the calls returned."""

    def __init__(self, run: Callable[[], None], backend: Backend, reps: int) -> None:
        self.run, self.backend, self.reps = run, backend, reps

    def __call__(self) -> Sample:
        self.backend.synchronize()
        t0 = self.backend.now()
        self.run()
        t1 = self.backend.now()
        self.backend.synchronize()
        took = self.backend.now() - t0
        return Taken(took / self.reps, (t1 - t0) / self.reps, took)


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
    empty = WallSampler(_repeat(lambda: None, 0), backend, 1)
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
        trial = WallSampler(_repeat(fn, calls), backend, calls)
        took = min(trial().per_call_s for _ in range(CALIBRATION_TRIES)) * calls
        if took >= target or calls >= most:
            return Calibration(calls, overhead)
        calls = min(most, math.ceil(calls * CALIBRATION_AIM * target / max(took, 1e-9)))


@dataclass
class Sampled:
    """What a sampling loop produced: per-call times and enqueue times of the kept samples, and why it stopped."""

    samples: list[float]
    enqueues: list[float]
    reason: str


def sample_until_stopped(sampler: Callable[[], Sample], rule: StopRule, now: Callable[[], float],
                         before_sample: Callable[[], None] | None = None,
                         probe: host_load.HostProbe | None = None) -> Sampled:
    """Sample until the rule stops, with the garbage collector off (as timeit does: a collection pause is the
    interpreter's, not the workload's); `probe` reads the host's load around every sample, outside its window."""
    out = Sampled([], [], "")
    measured = 0.0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = now()
        while True:
            if before_sample is not None:
                before_sample()
            if probe is not None:
                probe.begin()
            taken = sampler()
            if probe is not None:
                probe.end(kept=taken is not None)
            if taken is not None:
                out.samples.append(taken.per_call_s)
                out.enqueues.append(taken.enqueue_s)
                measured += taken.span_s
            # a sampler drops a bounded number of samples (HeldSampler), so the first one always comes
            reason = stop_reason(out.samples, measured, now() - start, rule) if out.samples else None
            if reason:
                out.reason = reason
                return out
    finally:
        if gc_was_enabled:
            gc.enable()


@dataclass
class Sampling:
    """How a case's samples were taken: the samples, the timer, the calls per sample, the host's load, and for
    CUDA events the held sampler (its hold and notes) with the samples dropped over every attempt."""

    sampled: Sampled
    timer: str
    calls: int
    probe: host_load.HostProbe
    held: HeldSampler | None = None
    dropped: int = 0


def _sample(sampler: Callable[[], Sample], rule: StopRule, backend: Backend,
            before_sample: Callable[[], None] | None) -> tuple[Sampled, host_load.HostProbe]:
    """Sample until the rule stops under a host probe of its own, closed if sampling raises."""
    probe = host_load.HostProbe()
    try:
        return sample_until_stopped(sampler, rule, backend.now, before_sample, probe), probe
    except BaseException:
        probe.close()
        raise


def _graphed(fn: Callable[[], object], reps: int, backend: Backend, notes: list[str]) -> Callable[[], None] | None:
    """A CUDA graph of `reps` calls, replayed once and synchronized before any sample: the first replay uploads the
    graph, host time that a sample would drop and lengthen the hold for. None, with a note, when capture fails."""
    try:
        replay = backend.capture_graph(fn, reps)
        replay()
        backend.synchronize()
    except RuntimeError as exc:
        notes.append(f"CUDA graph capture failed, timed with events: {str(exc).splitlines()[0]}")
        return None
    return replay


def _on_events(fn: Callable[[], object], flush: Callable[[], None] | None, graph: bool, reps: int, warm: WarmUp,
               backend: Backend, rule: StopRule, ranks: Ranks | None, notes: list[str]) -> Sampling:
    """A CUDA op timed by events behind a hold; when the events cannot time it, on the wall clock with a note.

    A sample that outlasts every hold with several calls may be one that fills CUDA's launch queue behind the
    spin (about 1024 launches: the host blocks until the spin ends): the calls per sample are halved and the op
    held again, down to one call. A sample that still outlasts its hold waits on the device, and one whose
    events saw no work ran its work elsewhere: both are timed between synchronizations."""
    replay = _graphed(fn, 1 if flush else reps, backend, notes) if graph else None
    timer = "cuda_event" if replay is None else "cuda_graph"
    empty = None if ranks is not None else empty_window_s(backend)
    before_sample = ranks.before_sample if ranks is not None else None
    baked = replay is not None and flush is None  # the graph holds the sample's calls: one replay enqueues them
    dropped, planned = 0, reps
    while True:
        run = replay or (fn if flush else _repeat(fn, reps))
        hold = plan_hold(0.0 if baked else warm.enqueue_s, reps)
        if ranks is not None:
            hold = ranks.agree(hold)
        held = HeldSampler(run, backend, reps, hold, flush=flush, fixed_hold=ranks is not None,
                           empty_window_s=empty)
        try:
            sampled, probe = _sample(held, rule, backend, before_sample)
        except EnqueueWaitsOnDevice as exc:
            dropped += held.dropped
            if reps > 1 and not baked:
                reps //= 2
                continue
            notes.append(f"the op waits on the device while it is enqueued (a host sync inside, a copy from "
                         f"pageable memory, or one call launching more than CUDA's launch queue holds): {exc}; timed "
                         "on the wall clock between synchronizations instead, so its time includes the host's")
        except NothingOnTimedStream as exc:
            dropped += held.dropped
            notes.append(f"the events on the current stream saw no work in the calls ({exc}): the op works on "
                         "another stream or device, or on none; timed on the wall clock between synchronizations "
                         "of every device this process uses instead")
        else:
            if reps < planned:
                notes.append(f"{planned} calls per sample outlasted every hold: more launches than CUDA's launch "
                             f"queue holds (about 1024) block the host behind the spin; {reps} calls per sample")
            return Sampling(sampled, timer, reps, probe, held, dropped + held.dropped)
        wall = WallSampler(_repeat(fn, planned), backend, planned)  # no hold, no launch queue: the calibrated batch
        sampled, probe = _sample(wall, rule, backend, before_sample)
        return Sampling(sampled, "wall", planned, probe, dropped=dropped)


def measure(fn: Callable[[], object], device: torch.device, rule: StopRule, *, cold: bool = False,
            graph: bool = False, kind: str = "op", ranks: Ranks | None = None,
            backend: Backend | None = None) -> Measurement:
    """Time `fn` on `device` under `rule` as the case's `kind` asks (`op` or `step`; see the module docstring).
    `cold` flushes L2 before every call; `graph` replays a CUDA graph of the batched calls (of each call, cold).
    Both apply to CUDA ops only, and the record says what ran. With `ranks` (torchrun), each sample is preceded by
    their barrier, outside the timed window, every sample is kept and the hold is agreed, so that every rank
    calls `fn` as often and starts each sample as the others do."""
    backend = backend or TorchBackend(device)
    cuda_op = device.type == "cuda" and kind == "op"
    flush = backend.l2_flush() if needs_flush(device, kind, cold) else None
    unit = fn if flush is None else _after(flush, fn)  # what a call costs: a cold one, with its flush
    warm = warm_up(unit, backend, rule.warmup_s, rule.warmup_calls)
    calibration = calibrate(unit, backend, rule, warm,
                            most=MAX_CALLS_PER_SAMPLE if flush is None else MAX_COLD_CALLS_PER_SAMPLE)
    notes: list[str] = []
    if cuda_op:
        took = _on_events(fn, flush, graph, calibration.calls, warm, backend, rule, ranks, notes)
    else:
        before_sample = ranks.before_sample if ranks is not None else None
        wall = WallSampler(_repeat(fn, calibration.calls), backend, calibration.calls)
        sampled, probe = _sample(wall, rule, backend, before_sample)
        took = Sampling(sampled, "wall", calibration.calls, probe)
    held = took.held
    if held is not None:
        notes += held.notes
    m = Measurement(took.sampled.samples, took.timer, took.calls, took.sampled.reason, rule, warm.calls,
                    held is not None and flush is not None, device.type, enqueues_s=took.sampled.enqueues,
                    hold_s=held.hold_s if held else None, dropped_samples=took.dropped, notes=notes,
                    sample_overhead_s=calibration.overhead_s, gc_disabled=True,
                    contention=took.probe.finish(torch.get_num_threads()))
    if m.stop_reason == "plateau" and not m.converged:
        m.notes.append(f"the spread stopped changing at rel-IQR {m.rel_iqr:.3g}, beyond {rule.plateau_ceiling:g} "
                       f"x the {rule.target_rel_iqr:g} target: not converged")
    if (note := thread_pool_note(m.contention, device.type)) is not None:
        m.notes.append(note)
    return m


def thread_pool_note(load: host_load.Contention | None, device_type: str) -> str | None:
    """What a contended CPU case with several intra-op threads must say: its time may be the scheduler's.

    torch's intra-op pool runs a parallel op on all its threads and waits at the end for the last; when other
    processes hold the CPUs, that thread waits for a scheduler slice (milliseconds), in every call that follows a
    pause of the pool. On the 2-core test machine beside two CPU-bound processes, a 15 us softmax on 2 threads
    took 16-32 ms per call (and 28 us on one thread); pytest-benchmark's fixture read the same 16 ms. Both timers
    are right about this host, which is not the op's own time."""
    if device_type != "cpu" or load is None or not load.contended or load.threads < 2:
        return None
    return (f"other work held this host's CPUs in {load.share:.0%} of the samples while torch ran {load.threads} "
            f"intra-op threads on {load.cpus} CPUs: a parallel op then waits for its descheduled threads, for "
            "milliseconds per call; torch.set_num_threads(1) (as torch.utils.benchmark times) or a quiet host "
            "gives the op's own time")
