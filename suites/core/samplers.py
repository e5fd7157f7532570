"""How one sample is taken: on CUDA between events, the stream held until the host has enqueued the sample's calls
(`HeldSampler`); elsewhere, and where events cannot time an op, on the wall clock (`WallSampler`).

On CUDA each sample is the time between two CUDA events around `reps` calls. A spin kernel
(`torch.cuda._sleep`) holds the stream before the start event until the host has enqueued every call of the
sample, as nvbench's blocking kernel does: the hold is sized from the enqueue time measured in warm-up, and every
sample checks that it held (the start event must still be pending once the host has enqueued the end event). A
sample where the hold ran out is dropped and the hold lengthened, so a slow host never shows up as device time;
after `FOLLOW_HOST_AFTER` held samples in a row the hold comes back to what they needed, so that a one-off slow
enqueue does not lengthen every later sample. An enqueue that outlasts every hold waits on the device
(`EnqueueWaitsOnDevice`), windows that see no more device time than empty ones hold no work
(`NothingOnTimedStream`), and work that outlasts the timed stream's window ran partly elsewhere
(`PartlyOffTimedStream`, `check_on_timed_stream`): suites/core/timing.py then times the op on the wall clock. A
cold op flushes the L2 before every call: its sample holds several calls, each after its own flush and between
its own pair of events, behind one hold, and reads the mean of their times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from suites.core.backends import Backend

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
# Work of the calls that outlasts the current stream's window by more than both of these (beyond what an empty
# window's synchronization waits) ran on another stream or device; less is a synchronization's own jitter. A
# preempted host only lengthens the wait, so every one of OFF_STREAM_TRIES windows must outlast it.
OFF_STREAM_FLOOR_S = 10e-6
OFF_STREAM_SHARE = 0.05
OFF_STREAM_TRIES = 3


def plan_hold(enqueue_per_call_s: float, reps: int) -> float:
    """The hold for a sample of `reps` calls: the enqueue time measured, with margin, and never below the floor."""
    return min(MAX_HOLD_S, max(MIN_HOLD_S, HOLD_MARGIN * enqueue_per_call_s * reps + MIN_HOLD_S))


def lengthen_hold(hold_s: float, enqueue_s: float) -> float:
    """After a sample whose hold ran out: at least twice what the host took to enqueue it, and longer than before."""
    return min(MAX_HOLD_S, max(2 * hold_s, 2 * enqueue_s))


def spin_cycles(hz: float, seconds: float) -> int:
    """Cycles for the spin kernel to hold the stream for at least `seconds` at a clock of at most `hz`."""
    return max(1, int(hz * seconds))


def repeat(fn: Callable[[], object], reps: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(reps):
            fn()
    return run


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


class PartlyOffTimedStream(EventsCannotTime):
    """Some of the calls' work ran on after the current stream's window had ended (a side stream's big kernel
    beside a small one on the current stream): the events would time only the part on the current stream."""


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
        """On the first kept sample: windows holding no more device time than empty ones held no work; windows
        that held some may hold only part of it (`check_on_timed_stream`)."""
        if self.empty_window_s is None:
            return
        empty_s, self.empty_window_s = self.empty_window_s * len(self.windows), None
        if timed_s <= empty_s:
            raise NothingOnTimedStream(f"{timed_s * 1e6:.3g} us of device time in {self.reps} call(s), against "
                                       f"{empty_s * 1e6:.3g} us for as many empty windows")
        check_on_timed_stream(self.run, self.backend)

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


def unheld_window(run: Callable[[], None], backend: Backend) -> tuple[float, float]:
    """`run` between a pair of events on an idle current stream: (the events' seconds, how long a synchronization
    of every stream and device then waited after the end event had completed). Unheld, work launched on any
    stream starts after the start event, so a part that ends after the end event outlasts the window."""
    backend.synchronize()
    start, end = backend.event(), backend.event()
    start.record()
    run()
    end.record()
    end.synchronize()
    t0 = backend.now()
    backend.synchronize()
    return start.elapsed_time(end) / 1e3, backend.now() - t0


def check_on_timed_stream(run: Callable[[], None], backend: Backend) -> None:
    """Raise PartlyOffTimedStream when the work of `run` outlasts its window on the current stream, in every one of
    OFF_STREAM_TRIES tries, by more than OFF_STREAM_FLOOR_S and OFF_STREAM_SHARE of the window beyond what an empty
    window's synchronization waits. Asked once the held windows were seen to hold some work (an unheld window
    also holds the host's launch gaps, so it cannot tell an empty one)."""
    settle_s = min(unheld_window(lambda: None, backend)[1] for _ in range(OFF_STREAM_TRIES))
    for _ in range(OFF_STREAM_TRIES):
        window_s, waited_s = unheld_window(run, backend)
        outlasted_s = waited_s - settle_s
        if outlasted_s <= max(OFF_STREAM_FLOOR_S, OFF_STREAM_SHARE * window_s):
            return
    raise PartlyOffTimedStream(f"work went on for {outlasted_s * 1e6:.3g} us after a window of "
                               f"{window_s * 1e6:.3g} us on the current stream had ended")


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
