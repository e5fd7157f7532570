"""How a workload is timed: warm-up, samples in device time, an L2 flush for cold cases, and a stopping rule.

The model is nvbench's: a case is sampled until it has at least `min_samples` samples and `min_time_s` of
measured time and the spread is below a target, or until a timeout; whether the target was reached is recorded
(`converged`) together with the spread (`rel_iqr` = interquartile range / median, robust to the rare outlier
that a relative standard deviation is not). On CUDA each sample is the time between two CUDA events around the
work, so host overheads outside the stream never count; a spin kernel (`torch.cuda._sleep`) is queued ahead of
the start event so the stream is busy while the host enqueues the work, as nvbench's blocking kernel does, and
the launch latency of an idle GPU stays out of the window. On CPU the same rules run on `time.perf_counter`.
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
    """When to stop sampling. Defaults follow nvbench (10 samples, 0.5 s, 15 s timeout) with a rel-IQR target."""

    min_samples: int = 10
    min_time_s: float = 0.5
    target_rel_iqr: float = 0.01
    timeout_s: float = 15.0
    max_samples: int = 100_000
    warmup_s: float = 0.1
    min_sample_s: float = 1e-3  # shorter calls are batched so that one sample lasts at least this long


QUICK = StopRule(min_samples=5, min_time_s=0.05, target_rel_iqr=0.05, timeout_s=2.0, warmup_s=0.02)
FULL = StopRule()
RULES = {"quick": QUICK, "full": FULL}


@dataclass
class Measurement:
    """Per-call times in seconds (device time on CUDA) and how they were obtained."""

    samples_s: list[float]
    timer: str  # cuda_event, cuda_graph or wall
    calls_per_sample: int
    converged: bool
    rel_iqr: float
    warmup_calls: int
    l2_flush: bool
    notes: list[str] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples_s))


def rel_iqr(samples: list[float]) -> float:
    """Interquartile range over median; inf for fewer than two samples (nothing is known about the spread)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else math.inf


def should_stop(samples: list[float], calls_per_sample: int, elapsed_s: float, rule: StopRule) -> tuple[bool, bool]:
    """(stop, converged) after a new sample: converged once the minimums are met and the spread is on target."""
    enough = len(samples) >= rule.min_samples and sum(samples) * calls_per_sample >= rule.min_time_s
    if enough and rel_iqr(samples) <= rule.target_rel_iqr:
        return True, True
    return elapsed_s >= rule.timeout_s or len(samples) >= rule.max_samples, False


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(fn: Callable[[], object], device: torch.device, warmup_s: float) -> tuple[int, float]:
    """Run `fn` for at least `warmup_s` (and twice: the first call pays for lazy init); return calls and the last
    call's wall time, an upper bound of its cost used to size batches."""
    calls, start = 0, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        _synchronize(device)
        last = time.perf_counter() - t0
        calls += 1
        if calls >= 2 and time.perf_counter() - start >= warmup_s:
            return calls, last


class L2Flush:
    """Evicts the GPU's L2 by writing a buffer twice its size, outside the timed window (cold cases)."""

    def __init__(self, device: torch.device) -> None:
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 * 2**20
        self.buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.random_(0, 256)  # random values: a memset of zeros may be compressed by the memory system


def _spin_cycles(device: torch.device, seconds: float = 50e-6) -> int:
    """Cycles for `torch.cuda._sleep` to hold the stream for about `seconds` while the host enqueues a sample."""
    clock_khz = getattr(torch.cuda.get_device_properties(device), "clock_rate", 0) or 2_000_000
    return int(clock_khz * 1e3 * seconds)


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


def _cuda_sampler(run: Callable[[], None], device: torch.device, reps: int,
                  flush: L2Flush | None) -> Callable[[], float]:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spin = _spin_cycles(device) if hasattr(torch.cuda, "_sleep") else 0

    def sample() -> float:
        if flush is not None:
            flush()
        if spin:
            torch.cuda._sleep(spin)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / reps

    return sample


def _wall_sampler(run: Callable[[], None], reps: int) -> Callable[[], float]:
    def sample() -> float:
        t0 = time.perf_counter()
        run()
        return (time.perf_counter() - t0) / reps

    return sample


def measure(fn: Callable[[], object], device: torch.device, rule: StopRule, *, cold: bool = False,
            graph: bool = False, before_sample: Callable[[], None] | None = None) -> Measurement:
    """Time `fn` on `device` under `rule`. `cold` flushes L2 before every call (one call per sample);
    `graph` replays a CUDA graph of the batched calls. Both apply on CUDA only, and the record says what ran.
    `before_sample` runs before each sample, outside the timed window (the ranks' barrier under torchrun)."""
    warmup_calls, last_call_s = warm_up(fn, device, rule.warmup_s)
    cuda = device.type == "cuda"
    reps = 1 if (cold and cuda) else max(1, math.ceil(rule.min_sample_s / max(last_call_s, 1e-9)))
    notes: list[str] = []
    timer, run = ("cuda_event" if cuda else "wall"), _repeat(fn, reps)
    if graph and cuda:
        try:
            run, timer = _capture_graph(fn, reps, device), "cuda_graph"
        except RuntimeError as exc:
            notes.append(f"CUDA graph capture failed, timed with events: {str(exc).splitlines()[0]}")
    if cuda:
        flush = L2Flush(device) if cold else None
        sampler = _cuda_sampler(run, device, reps, flush)
    else:
        sampler = _wall_sampler(run, reps)
    samples: list[float] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection pause is the interpreter's, not the workload's
    try:
        start = time.perf_counter()
        while True:
            if before_sample is not None:
                before_sample()
            samples.append(sampler())
            stop, converged = should_stop(samples, reps, time.perf_counter() - start, rule)
            if stop:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return Measurement(samples, timer, reps, converged, rel_iqr(samples), warmup_calls, bool(cold and cuda), notes)
