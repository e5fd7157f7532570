"""How a workload is timed: warm-up, samples, an L2 flush for cold cases, and a stopping rule that ends.

Three kinds of case are timed three ways (`Case.kind`):

- `op` (matmul, conv, attention): device time with the host out of the window. On CUDA each sample is the time
  between two CUDA events around `reps` calls. A spin kernel (`torch.cuda._sleep`) holds the stream before the
  start event until the host has enqueued every call of the sample, as nvbench's blocking kernel does: the hold
  is sized from the enqueue time measured in warm-up, and every sample checks that it held (the start event must
  still be pending once the host has enqueued the end event). A sample where the hold ran out is dropped and the
  hold lengthened, so a slow host never shows up as device time. On a CPU the same loop runs on the wall clock.
- `step` (a training step): the wall time of `reps` steps between two synchronizations, host overheads, syncs
  and launch gaps included, since that is what a user's loop takes; device-busy time is measured beside it by an
  observer (suites/observers/busy.py).
- `check` (a correctness experiment): run once by the runner and never sampled here.

Every sample also records the host's time to enqueue its calls (`enqueue_s` per call), so each case says whether
the host or the device is the bottleneck (`host_bound`: enqueueing a call takes longer than running it).

Stopping (nvbench's rules, plus its "the noise has stopped changing" exit): at least `min_samples` samples and
`min_time_s` of measured time, then stop when the relative interquartile range is at `target_rel_iqr` (`target`),
or when it has moved by less than `plateau_tol` of itself over the last `plateau_window` samples (`plateau`: the
spread is what it is, more samples would not shrink it; a power-capped gemm or a host-bound op ends here), or at
`timeout_s` (`timeout`). `converged` is true for `target` and `plateau`.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass(frozen=True)
class StopRule:
    """When to stop sampling. The full profile's defaults follow nvbench (10 samples, 0.5 s, 15 s timeout); the
    1 % rel-IQR target is what event-timed kernels of a millisecond or more reach on a quiet GPU (about 0.75 %
    relative standard deviation for normal noise, nvbench's default max noise being 0.5 %), and the plateau exit
    ends the cases that cannot reach it well before the timeout."""

    min_samples: int = 10
    min_time_s: float = 0.5
    target_rel_iqr: float = 0.01
    timeout_s: float = 15.0
    max_samples: int = 100_000
    warmup_s: float = 0.1
    min_sample_s: float = 1e-3  # shorter calls are batched so that one sample lasts at least this long
    plateau_window: int = 20
    plateau_tol: float = 0.05


QUICK = StopRule(min_samples=5, min_time_s=0.05, target_rel_iqr=0.05, timeout_s=2.0, warmup_s=0.02, plateau_window=5)
FULL = StopRule()
RULES = {"quick": QUICK, "full": FULL}
STOP_REASONS = ("target", "plateau", "timeout", "once")

MIN_HOLD_S = 20e-6  # the shortest hold: the launch latency of the start event itself
HOLD_MARGIN = 1.5  # the hold is this many times the enqueue time measured (host jitter)
MAX_HOLD_S = 0.5  # a hold never grows past this; a sample that still outlasts it is kept with a note
MAX_HOLD_RETRIES = 8


@dataclass
class Measurement:
    """Per-call times in seconds (device time for CUDA ops, wall time otherwise) and how they were obtained."""

    samples_s: list[float]
    timer: str  # cuda_event, cuda_graph or wall
    calls_per_sample: int
    stop_reason: str  # target, plateau, timeout, once
    rel_iqr: float
    warmup_calls: int
    l2_flush: bool
    enqueue_s: float | None = None  # median host time to enqueue one call
    hold_s: float | None = None  # CUDA ops: how long the stream was held before each sample's start event
    dropped_samples: int = 0  # CUDA ops: samples whose hold ran out before the host had enqueued them
    notes: list[str] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples_s))

    @property
    def converged(self) -> bool:
        return self.stop_reason in ("target", "plateau")

    @property
    def host_bound(self) -> bool | None:
        """Whether the host needs longer to enqueue a call than the device needs to run it (a loop of these calls
        would leave the device idle). On a CPU the host is the device: both times are the same work, never more."""
        return None if self.enqueue_s is None else self.enqueue_s > self.median_s


def rel_iqr(samples: list[float]) -> float:
    """Interquartile range over median; inf for fewer than two samples (nothing is known about the spread)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else math.inf


def stop_reason(samples: list[float], calls_per_sample: int, elapsed_s: float, rule: StopRule) -> str | None:
    """Why sampling stops after this sample (`target`, `plateau`, `timeout`), or None to go on."""
    enough = len(samples) >= rule.min_samples and sum(samples) * calls_per_sample >= rule.min_time_s
    if enough:
        spread = rel_iqr(samples)
        if spread <= rule.target_rel_iqr:
            return "target"
        if len(samples) >= rule.min_samples + rule.plateau_window:
            before = rel_iqr(samples[:-rule.plateau_window])
            if math.isfinite(spread) and abs(spread - before) <= rule.plateau_tol * spread:
                return "plateau"
    if elapsed_s >= rule.timeout_s or len(samples) >= rule.max_samples:
        return "timeout"
    return None


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class WarmUp:
    """What warm-up learned: calls made, the last call's wall time (synchronized) and its host enqueue time."""

    calls: int
    call_s: float
    enqueue_s: float


def warm_up(fn: Callable[[], object], device: torch.device, warmup_s: float) -> WarmUp:
    """Run `fn` for at least `warmup_s` (and twice: the first call pays for lazy init); the last call's figures
    size the batches and the hold."""
    calls, start = 0, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        _synchronize(device)
        t2 = time.perf_counter()
        calls += 1
        if calls >= 2 and t2 - start >= warmup_s:
            return WarmUp(calls, t2 - t0, t1 - t0)


class L2Flush:
    """Evicts the GPU's L2 by writing a buffer twice its size, outside the timed window (cold cases)."""

    def __init__(self, device: torch.device) -> None:
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 * 2**20
        self.buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.random_(0, 256)  # random values: a memset of zeros may be compressed by the memory system


def plan_hold(enqueue_per_call_s: float, reps: int) -> float:
    """The hold for a sample of `reps` calls: the enqueue time measured, with margin, and never below the floor."""
    return min(MAX_HOLD_S, max(MIN_HOLD_S, HOLD_MARGIN * enqueue_per_call_s * reps + MIN_HOLD_S))


def lengthen_hold(hold_s: float, enqueue_s: float) -> float:
    """After a sample whose hold ran out: at least twice what the host took to enqueue it, and longer than before."""
    return min(MAX_HOLD_S, max(2 * hold_s, 2 * enqueue_s))


# The fastest SM clock any CUDA GPU runs at. _sleep spins for clock cycles; converting seconds at a clock at least
# as high as the real one makes the hold at least as long as asked, whatever the clock does under a power cap.
_FASTEST_CLOCK_HZ = 3.0e9


def _spin_cycles(device: torch.device, seconds: float) -> int:
    """Cycles for `torch.cuda._sleep` to hold the stream for at least `seconds`."""
    clock_khz = getattr(torch.cuda.get_device_properties(device), "clock_rate", 0)
    hz = clock_khz * 1e3 if clock_khz else _FASTEST_CLOCK_HZ
    return max(1, int(hz * seconds))


def _capture_graph(fn: Callable[[], object], reps: int, device: torch.device) -> Callable[[], None]:
    """A CUDA graph of `reps` back-to-back calls; replaying it removes per-launch CPU overhead for short kernels."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    return graph.replay


def _repeat(fn: Callable[[], object], reps: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(reps):
            fn()
    return run


# A sampler returns (seconds per call, host enqueue seconds per call), or None when the sample must be dropped.
Sample = tuple[float, float] | None


class HeldSampler:
    """CUDA events around `reps` calls, the stream held by a spin kernel until the host has enqueued them all."""

    def __init__(self, run: Callable[[], None], device: torch.device, reps: int, flush: L2Flush | None,
                 hold_s: float, may_drop: bool = True) -> None:
        self.run, self.device, self.reps, self.flush, self.hold_s = run, device, reps, flush, hold_s
        self.may_drop = may_drop  # ranks in lockstep keep every sample: a drop would call fn once more on one rank
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.dropped, self.retries, self.notes = 0, 0, []

    def __call__(self) -> Sample:
        if self.flush is not None:
            self.flush()
        t0 = time.perf_counter()
        torch.cuda._sleep(_spin_cycles(self.device, self.hold_s))
        self.start.record()
        self.run()
        self.end.record()
        held = not self.start.query()  # the window had not opened when the host finished enqueueing
        enqueue_s = time.perf_counter() - t0
        self.end.synchronize()
        per_call = self.start.elapsed_time(self.end) / 1e3 / self.reps
        if held:
            return per_call, enqueue_s / self.reps
        return self._hold_ran_out(per_call, enqueue_s)

    def _hold_ran_out(self, per_call: float, enqueue_s: float) -> Sample:
        """Lengthen the hold and drop the sample; past the retries (or the longest hold), keep it with a note."""
        if self.may_drop and self.retries < MAX_HOLD_RETRIES and self.hold_s < MAX_HOLD_S:
            self.retries += 1
            self.dropped += 1
            self.hold_s = lengthen_hold(self.hold_s, enqueue_s)
            return None
        self.hold_s = lengthen_hold(self.hold_s, enqueue_s)  # kept, but the next sample is held longer
        if not self.notes:
            self.notes.append(f"the host took {enqueue_s * 1e3:.3g} ms to enqueue a sample, past the "
                              f"{self.hold_s * 1e3:.3g} ms hold: device time may include host gaps")
        return per_call, enqueue_s / self.reps


class WallSampler:
    """The wall time of `reps` calls between two synchronizations, and the host's time until the calls returned."""

    def __init__(self, run: Callable[[], None], device: torch.device, reps: int) -> None:
        self.run, self.device, self.reps = run, device, reps

    def __call__(self) -> Sample:
        _synchronize(self.device)
        t0 = time.perf_counter()
        self.run()
        t1 = time.perf_counter()
        _synchronize(self.device)
        return (time.perf_counter() - t0) / self.reps, (t1 - t0) / self.reps


def sample_until_stopped(sampler: Callable[[], Sample], reps: int, rule: StopRule,
                         before_sample: Callable[[], None] | None = None) -> tuple[list, list, str]:
    """(per-call times, per-call enqueue times, stop reason), sampling with the garbage collector off (as timeit
    does: a collection pause is the interpreter's, not the workload's)."""
    samples: list[float] = []
    enqueues: list[float] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        while True:
            if before_sample is not None:
                before_sample()
            taken = sampler()
            if taken is not None:
                samples.append(taken[0])
                enqueues.append(taken[1])
            # a sampler drops a bounded number of samples (HeldSampler), so the first one always comes
            reason = stop_reason(samples, reps, time.perf_counter() - start, rule) if samples else None
            if reason:
                return samples, enqueues, reason
    finally:
        if gc_was_enabled:
            gc.enable()


def measure(fn: Callable[[], object], device: torch.device, rule: StopRule, *, cold: bool = False,
            graph: bool = False, kind: str = "op", before_sample: Callable[[], None] | None = None) -> Measurement:
    """Time `fn` on `device` under `rule` as the case's `kind` asks (`op` or `step`; see the module docstring).
    `cold` flushes L2 before every call (one call per sample); `graph` replays a CUDA graph of the batched calls.
    Both apply to CUDA ops only, and the record says what ran. `before_sample` runs before each sample, outside
    the timed window (the ranks' barrier under torchrun); then every sample is kept, none dropped, so that every
    rank calls `fn` as often."""
    warm = warm_up(fn, device, rule.warmup_s)
    cuda_op = device.type == "cuda" and kind == "op"
    reps = 1 if (cold and cuda_op) else max(1, math.ceil(rule.min_sample_s / max(warm.call_s, 1e-9)))
    notes: list[str] = []
    timer, run = ("cuda_event" if cuda_op else "wall"), _repeat(fn, reps)
    if graph and cuda_op:
        try:
            run, timer = _capture_graph(fn, reps, device), "cuda_graph"
        except RuntimeError as exc:
            notes.append(f"CUDA graph capture failed, timed with events: {str(exc).splitlines()[0]}")
    held: HeldSampler | None = None
    if cuda_op:
        enqueue = 0.0 if timer == "cuda_graph" else warm.enqueue_s
        held = HeldSampler(run, device, reps, L2Flush(device) if cold else None, plan_hold(enqueue, reps),
                           may_drop=before_sample is None)
        sampler: Callable[[], Sample] = held
    else:
        sampler = WallSampler(run, device, reps)
    samples, enqueues, reason = sample_until_stopped(sampler, reps, rule, before_sample)
    if held is not None:
        notes += held.notes
    return Measurement(samples, timer, reps, reason, rel_iqr(samples), warm.calls, bool(cold and cuda_op),
                       enqueue_s=float(np.median(enqueues)) if enqueues else None,
                       hold_s=held.hold_s if held else None, dropped_samples=held.dropped if held else 0,
                       notes=notes)
