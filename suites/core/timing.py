"""How a workload is timed (`measure`): warm-up, calibrated samples, an L2 flush for cold cases, until the stopping
rule ends.

Three kinds of case are timed three ways (`Case.kind`):

- `op` (matmul, conv, attention): device time with the host out of the window. On CUDA each sample is the time
  between two CUDA events around the sample's calls, the stream held by a spin kernel until the host has enqueued
  them (suites/core/samplers.py). A sample whose enqueue outlasts every hold with several calls may be filling
  CUDA's launch queue (about 1024 launches) behind the spin: its calls per sample are halved until they fit. An op
  whose enqueue itself waits on the device (a host sync inside, `.item()`, a copy from pageable memory) outlasts
  every hold even so: after `WAIT_CONFIRMATIONS` such samples in a row, or one at the longest hold, it is timed on
  the wall clock instead, with a note; so is an op whose events see no more device time than an empty pair of
  events (its work runs on another stream or device), and one whose work goes on after its window on the current
  stream has ended (part of it runs elsewhere). A CUDA graph is replayed once before its samples (its first
  replay uploads it). A cold op flushes the L2 before every call (the flushes between its calls count towards
  `min_time_s`, as device time the measurement took). On a CPU the same loop runs on the wall clock.
- `step` (a training step): the wall time of `reps` steps between two synchronizations, host overheads, syncs
  and launch gaps included, since that is what a user's loop takes; device-busy time is measured beside it by an
  observer (suites/observers/busy.py).
- `check` (a correctness experiment): run once by the runner and never sampled here.

The parts, each in a module of its own: when sampling stops and whether the spread is a measurement
(suites/core/stopping.py), the record of a measurement and the pooling of rounds (suites/core/measurement.py), the
clocks and CUDA primitives (suites/core/backends.py, a `Backend` that a model of a GPU stands in for in tests), how
one sample is taken (suites/core/samplers.py), warm-up and the calls per sample (suites/core/calibration.py). Here:
the loop that samples until the rule stops, with the garbage collector off and the host's load probed around
every sample, and `measure`, which puts them together.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from suites.core import host_load
from suites.core.backends import Backend, TorchBackend
from suites.core.calibration import MAX_CALLS_PER_SAMPLE, MAX_COLD_CALLS_PER_SAMPLE, WarmUp, calibrate, warm_up
from suites.core.measurement import Measurement
from suites.core.samplers import (
    EVENT_RESOLUTION_S,
    EnqueueWaitsOnDevice,
    EventsCannotTime,
    HeldSampler,
    NothingOnTimedStream,
    PartlyOffTimedStream,
    Sample,
    WallSampler,
    empty_window_s,
    plan_hold,
    repeat,
)
from suites.core.stopping import MIN_LONG_SAMPLES, Stopping, StopRule


def needs_flush(device: torch.device, kind: str, cold: bool) -> bool:
    """Whether a case is timed with the L2 flushed before every call: a cold op on CUDA (elsewhere `cold` does
    nothing, and the record says so)."""
    return cold and device.type == "cuda" and kind == "op"


class Ranks(Protocol):
    """Ranks of a distributed run measuring one case together (suites/harness/distributed.py)."""

    def before_sample(self) -> None: ...  # lines the ranks up, outside the timed window

    def agree(self, seconds: float) -> float: ...  # the largest value any rank offers (every rank's hold)


# Ranks leave their barrier 5-30 us apart; the earliest rank's first collective waits inside its window for the
# latest, and the figure is the slowest rank's sample. As nccl-tests times its iterations (-n 20 between one pair
# of events), an op's sample under torchrun is this many back-to-back calls after the barrier, which spreads that
# skew over them: a 10-40 us collective read 1.2-2x nccl-tests' time with one call per sample.
LOCKSTEP_CALLS = 20
# Fewer calls where 20 would last longer than this (a GiB on a slow link): the skew is then a small share of one.
LOCKSTEP_SAMPLE_S = 20e-3


def lockstep_calls(call_s: float, ranks: Ranks) -> int:
    """The calls of every sample of an op under torchrun, the same on every rank: LOCKSTEP_CALLS, or as many as
    fill LOCKSTEP_SAMPLE_S at the slowest rank's call time (at least one)."""
    slowest_s = ranks.agree(call_s)
    return max(1, min(LOCKSTEP_CALLS, int(LOCKSTEP_SAMPLE_S // slowest_s) if slowest_s > 0 else LOCKSTEP_CALLS))


def _after(first: Callable[[], object], fn: Callable[[], object]) -> Callable[[], None]:
    """`first()` then `fn()`: a cold call, the flush before it, as warm-up and calibration time it."""
    def both() -> None:
        first()
        fn()
    return both


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
    stopping = Stopping(rule)
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
                stopping.add(taken.per_call_s, taken.span_s)
            # a sampler drops a bounded number of samples (HeldSampler), so the first one always comes
            reason = stopping.reason(now() - start) if out.samples else None
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


# Why events could not time an op, and what it was timed on instead (`_on_events`), by what the sampler raised.
WALL_INSTEAD = {
    EnqueueWaitsOnDevice: "the op waits on the device while it is enqueued (a host sync inside, a copy from pageable "
                          "memory, or one call launching more than CUDA's launch queue holds): {exc}; timed on the "
                          "wall clock between synchronizations instead, so its time includes the host's",
    NothingOnTimedStream: "the events on the current stream saw no work in the calls ({exc}): the op works on another "
                          "stream or device, or on none; timed on the wall clock between synchronizations of every "
                          "device this process uses instead",
    PartlyOffTimedStream: "part of the calls' work ran off the current stream ({exc}): its events would time only the "
                          "part on it; timed on the wall clock between synchronizations of every device this process "
                          "uses instead",
}


def _on_events(fn: Callable[[], object], flush: Callable[[], None] | None, graph: bool, reps: int, warm: WarmUp,
               backend: Backend, rule: StopRule, ranks: Ranks | None, notes: list[str]) -> Sampling:
    """A CUDA op timed by events behind a hold; when the events cannot time it, on the wall clock with a note.

    A sample that outlasts every hold with several calls may be one that fills CUDA's launch queue behind the
    spin (about 1024 launches: the host blocks until the spin ends): the calls per sample are halved and the op
    held again, down to one call. A sample that still outlasts its hold waits on the device, one whose events
    saw no work ran its work elsewhere, and one whose work goes on after its window (checked once, after the
    first sample) ran part of it elsewhere: all are timed between synchronizations."""
    replay = _graphed(fn, 1 if flush else reps, backend, notes) if graph else None
    timer = "cuda_event" if replay is None else "cuda_graph"
    empty = None if ranks is not None else empty_window_s(backend)
    before_sample = ranks.before_sample if ranks is not None else None
    baked = replay is not None and flush is None  # the graph holds the sample's calls: one replay enqueues them
    dropped, planned = 0, reps
    while True:
        run = replay or (fn if flush else repeat(fn, reps))
        hold = plan_hold(0.0 if baked else warm.enqueue_s, reps)
        if ranks is not None:
            hold = ranks.agree(hold)
        held = HeldSampler(run, backend, reps, hold, flush=flush, fixed_hold=ranks is not None,
                           empty_window_s=empty)
        try:
            sampled, probe = _sample(held, rule, backend, before_sample)
        except EventsCannotTime as exc:
            dropped += held.dropped
            if isinstance(exc, EnqueueWaitsOnDevice) and reps > 1 and not baked:
                reps //= 2
                continue
            notes.append(WALL_INSTEAD[type(exc)].format(exc=exc))
        else:
            if reps < planned:
                notes.append(f"{planned} calls per sample outlasted every hold: more launches than CUDA's launch "
                             f"queue holds (about 1024) block the host behind the spin; {reps} calls per sample")
            return Sampling(sampled, timer, reps, probe, held, dropped + held.dropped)
        wall = WallSampler(repeat(fn, planned), backend, planned)  # no hold, no launch queue: the calibrated batch
        sampled, probe = _sample(wall, rule, backend, before_sample)
        return Sampling(sampled, "wall", planned, probe, dropped=dropped)


def measure(fn: Callable[[], object], device: torch.device, rule: StopRule, *, cold: bool = False,
            graph: bool = False, kind: str = "op", ranks: Ranks | None = None,
            backend: Backend | None = None) -> Measurement:
    """Time `fn` on `device` under `rule` as the case's `kind` asks (`op` or `step`; see the module docstring).
    `cold` flushes L2 before every call; `graph` replays a CUDA graph of the batched calls (of each call, cold).
    Both apply to CUDA ops only, and the record says what ran. With `ranks` (torchrun), each sample is preceded by
    their barrier, outside the timed window, every sample is kept and the hold is agreed, so that every rank
    calls `fn` as often and starts each sample as the others do; an op's sample then holds `lockstep_calls` calls
    back to back (a step's one)."""
    backend = backend or TorchBackend(device)
    cuda_op = device.type == "cuda" and kind == "op"
    flush = backend.l2_flush() if needs_flush(device, kind, cold) else None
    unit = fn if flush is None else _after(flush, fn)  # what a call costs: a cold one, with its flush
    warm = warm_up(unit, backend, rule.warmup_s, rule.warmup_calls)
    calibration = calibrate(unit, backend, rule, warm,
                            most=MAX_CALLS_PER_SAMPLE if flush is None else MAX_COLD_CALLS_PER_SAMPLE)
    if ranks is not None and kind == "op" and rule.calls is None:
        calibration = dataclasses.replace(calibration, calls=lockstep_calls(warm.call_s, ranks))
    notes: list[str] = []
    if cuda_op:
        took = _on_events(fn, flush, graph, calibration.calls, warm, backend, rule, ranks, notes)
    else:
        before_sample = ranks.before_sample if ranks is not None else None
        wall = WallSampler(repeat(fn, calibration.calls), backend, calibration.calls)
        sampled, probe = _sample(wall, rule, backend, before_sample)
        took = Sampling(sampled, "wall", calibration.calls, probe)
    held = took.held
    if held is not None:
        notes += held.notes
    m = Measurement(took.sampled.samples, took.timer, took.calls, took.sampled.reason, rule, warm.calls,
                    held is not None and flush is not None, device.type, enqueues_s=took.sampled.enqueues,
                    hold_s=held.hold_s if held else None, dropped_samples=took.dropped, notes=notes,
                    sample_overhead_s=calibration.overhead_s, gc_disabled=True, kind=kind,
                    contention=took.probe.finish(torch.get_num_threads()))
    if m.stop_reason == "plateau" and m.rel_iqr > rule.plateau_ceiling * rule.target_rel_iqr:
        m.notes.append(f"the spread stopped changing at rel-IQR {m.rel_iqr:.3g}, beyond {rule.plateau_ceiling:g} "
                       f"x the {rule.target_rel_iqr:g} target: not converged")
    if m.resolution_limited:
        m.notes.append(resolution_note(m))
    if (note := long_step_note(m)) is not None:
        m.notes.append(note)
    if (note := thread_pool_note(m.contention, device.type)) is not None:
        m.notes.append(note)
    return m


def resolution_note(m: Measurement) -> str:
    """What a measurement whose spread is the events' resolution says: a limit of the timer, not noise."""
    windows = f"{m.calls_per_sample} cold calls, each between its own pair" if m.l2_flush else (
        f"{m.calls_per_sample} call(s) between one pair")
    return (f"a resolution limit, not noise: the events' {EVENT_RESOLUTION_S * 1e6:g} us steps alone can spread "
            f"samples of {windows} of events around {m.median_s * 1e6:.3g} us per call by a rel-IQR of up to "
            f"{m.resolution_rel_iqr:.3g}, most of the {m.rel_iqr:.3g} measured: the spread is the timer's, and more "
            "samples would not converge it")


def long_step_note(m: Measurement) -> str | None:
    """What a step that converged at the timeout says: on how many samples, fewer than the rule asks for."""
    if m.kind != "step" or m.stop_reason != "timeout" or not m.converged:
        return None
    return (f"converged at the {m.rule.timeout_s:g} s timeout on {len(m.samples_s)} samples of "
            f"{m.median_s:.3g} s (fewer than the rule's {m.rule.min_samples}; at least {MIN_LONG_SAMPLES} within "
            f"the {m.rule.target_rel_iqr:g} target, rel-IQR {m.rel_iqr:.3g})")


def thread_pool_note(load: host_load.Contention | None, device_type: str) -> str | None:
    """What a contended CPU case with several intra-op threads says: its time is the scheduler's, so it is not
    converged (`host_load.pool_waited`). On the 2-core test machine beside two CPU-bound processes, a 15 us softmax
    on 2 threads took 16-32 ms per call (and 28 us on one thread); pytest-benchmark's fixture read the same 16 ms.
    Both timers are right about this host, which is not the op's own time."""
    if load is None or not host_load.pool_waited(load, device_type):
        return None
    return (f"not converged: other work held this host's CPUs in {load.share:.0%} of the samples while the case ran "
            f"on {load.ran_on} threads (torch's intra-op pool: {load.threads}) on {load.cpus} CPUs; a parallel op "
            "then waits for its descheduled threads, for milliseconds per call, so the time is the scheduler's, not "
            "the op's; "
            "torch.set_num_threads(1) (as torch.utils.benchmark times) or a quiet host gives the op's own time")
