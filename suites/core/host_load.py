"""Whether the host was busy with other work while a case was sampled: per sample, did our threads wait for a CPU?

Why: on a shared machine a neighbour's job takes the cores our threads want, and a CPU case's samples then
include the time a thread of ours stood ready in the run queue (on a loaded 2-core machine, ten 256^3 matmuls
took 20-400 ms in such samples against 2 ms in the others: thread-pool waits in scheduler quanta). A verdict
built on those samples says "slower" about the machine, not the code, so every sample is probed, outside its
timed window, and the case records how many were touched.

Per sample (a `SampleLoad`): its wall time; the process's CPU time (all threads, `time.process_time`); its
involuntary context switches (`resource.getrusage`); and, on Linux, the run delay of the process's threads that
move (the time each was runnable but not running, from `/proc/self/task/*/schedstat`; see `RunDelay` for which
threads a sample reads), the direct measure of contention.
A sample is contended when its threads waited for a CPU for at least `RUN_DELAY_SHARE` of its wall time; where
the run delay cannot be read (no procfs), when it was preempted at all (an involuntary switch). A case is
`contended` when at least `CONTENDED_SHARE` of its samples are. The 1-minute load average, the threads torch
uses, the threads that worked (each took at least `WORKING_SHARE` of the process's CPU time over the samples) and
the CPUs this process may run on are recorded beside it as context: the load lags a case of a second by a minute,
so it does not decide. A contended CPU case that worked on several threads is not a measurement of its op
(`pool_waited`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

RUN_DELAY_SHARE = 0.1  # a sample whose threads waited this share of its wall time for a CPU was slowed by others
# A tenth of the samples slowed moves the median by more than a quiet case's spread (it lands at the 0.55
# quantile of the quiet samples, or beyond).
CONTENDED_SHARE = 0.1
RULE = (f"a sample is contended when the process's threads waited for a CPU (run delay) for at least "
        f"{RUN_DELAY_SHARE:g} of its wall time, or, where the run delay cannot be read, when it had an "
        f"involuntary context switch; the case is contended when at least {CONTENDED_SHARE:g} of its samples are")


@dataclass(frozen=True)
class SampleLoad:
    """The process's clocks: at one moment, or their change over one sample (a difference of two readings)."""

    wall_s: float
    cpu_s: float
    involuntary: int
    run_delay_s: float | None

    def __sub__(self, before: SampleLoad) -> SampleLoad:
        known = self.run_delay_s is not None and before.run_delay_s is not None
        delay = self.run_delay_s - before.run_delay_s if known else None
        return SampleLoad(self.wall_s - before.wall_s, self.cpu_s - before.cpu_s, self.involuntary - before.involuntary,
                          delay)

    @property
    def contended(self) -> bool:
        if self.run_delay_s is not None:
            return self.run_delay_s >= RUN_DELAY_SHARE * self.wall_s
        return self.involuntary > 0


# Every this many samples all threads are read again, so that a thread that starts working mid-case (a pool
# thread woken, a loader) is counted from then on; between such samples only the threads that moved are read.
RESCAN_SAMPLES = 32


def _close(fds: dict[str, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


class RunDelay:
    """The summed run delay of the process's threads during a sample, read from files opened once (a read then
    costs a microsecond or two per thread; opening them per sample would cost a hundred or more).

    Most threads of a GPU process sleep through a case (torch's intra-op pool on a GPU case, CUDA's and NVML's
    helpers); reading all of them twice per sample cost about 0.23 ms per sample with 113 threads
    (tools/bench_probe_cost.py), which doubles a case of tiny samples. So after its first RESCAN_SAMPLES samples
    a measurement reads only the threads whose scheduler counters (time on a CPU, time waiting for one, slices)
    moved between the two latest full readings, and the thread that runs the probe (the one timing): every
    RESCAN_SAMPLES samples one sample reads them all again. The window is tens of samples, not one, because the
    kernel updates a running thread's counters at its ticks and switches, not continuously. A sleeping thread's
    counters stand still, so what a sample skips is a thread that neither ran nor waited to run (zero run
    delay), unless it woke since the last full reading. Begin and end of one sample read the same threads.

    The files are closed by `close`, and on every other path when the object is collected (a sampling loop that
    raised never calls `close`; leaking one descriptor per thread per failure ran a many-thread process out of
    them after about 40 failures).
    """

    def __init__(self) -> None:
        self.files: dict[str, int] = {}  # thread id -> its open schedstat
        self._closer = weakref.finalize(self, _close, self.files)
        try:
            for task in os.listdir("/proc/self/task"):
                with contextlib.suppress(FileNotFoundError):  # a thread that ended since the listing
                    self.files[task] = os.open(f"/proc/self/task/{task}/schedstat", os.O_RDONLY)
        except OSError:
            self.close()
        self._reading: list[str] = []  # the threads this sample reads, at its begin and its end
        self._moving: list[str] = list(self.files)  # the threads read between full samples (all, at first)
        self._own = str(threading.get_native_id())  # the thread that takes the samples
        self._full = False  # whether this sample reads every thread
        self._full_start: dict[str, bytes] = {}  # the full reading at the start of this full sample
        self._last_full: dict[str, bytes] | None = None  # ... and of the full sample before it
        self._samples = 0

    def _read(self, tasks: list[str]) -> dict[str, bytes]:
        raw = {}
        for task in tasks:
            with contextlib.suppress(OSError):  # a thread that has ended reads as nothing, which is 0
                raw[task] = os.pread(self.files[task], 128, 0)
        return raw

    @staticmethod
    def _seconds(raw: dict[str, bytes]) -> float:
        total = 0
        for line in raw.values():
            with contextlib.suppress(IndexError, ValueError):
                total += int(line.split()[1])
        return total / 1e9

    def begin(self) -> float | None:
        """The run delay at the start of a sample, in seconds (None where procfs is absent)."""
        if not self.files:
            return None
        self._full = self._samples % RESCAN_SAMPLES == 0
        self._samples += 1
        self._reading = list(self.files) if self._full else self._moving
        raw = self._read(self._reading)
        if self._full:
            self._full_start = raw
        return self._seconds(raw)

    def end(self) -> float | None:
        """The run delay at the end of the sample begun last, over the same threads as its beginning; a full
        sample also decides which threads the next ones read (those that moved since the full sample before; all
        of them until there is one before)."""
        if not self.files:
            return None
        raw = self._read(self._reading)
        if self._full:
            if self._last_full is not None:
                self._moving = [task for task, line in raw.items()
                                if task == self._own or line != self._last_full.get(task)]
            self._last_full = self._full_start
        return self._seconds(raw)

    def cpu_times(self) -> dict[str, int]:
        """Every thread's time on a CPU so far, in nanoseconds (the first figure of its schedstat)."""
        times = {}
        for task, line in self._read(list(self.files)).items():
            with contextlib.suppress(IndexError, ValueError):
                times[task] = int(line.split()[0])
        return times

    @property
    def threads_read(self) -> tuple[int, ...]:
        """The native ids of the threads the last sample read (all of them in a full sample)."""
        return tuple(int(task) for task in self._reading)

    def close(self) -> None:
        self._closer()


# A thread that took at least this share of the process's CPU time over a case's samples worked on the case: the
# threads of torch's pool on a parallel op take about equal shares, a progress line's or a sampler's thread a
# sliver.
WORKING_SHARE = 0.1


def working(before: dict[str, int], after: dict[str, int]) -> int | None:
    """How many threads did the work between two readings of their CPU times (None: none could be read)."""
    if not after:
        return None
    took = [after[task] - before.get(task, 0) for task in after]
    total = sum(took)
    return sum(t >= WORKING_SHARE * total for t in took) if total > 0 else 1


class HostProbe:
    """Reads the process's clocks before and after every sample (outside its timed window), and every thread's CPU
    time over all of them (how many threads the case ran on)."""

    def __init__(self) -> None:
        self.run_delay = RunDelay()
        self.loads: list[SampleLoad] = []
        self._before: SampleLoad | None = None
        self._cpu_times = self.run_delay.cpu_times()

    @staticmethod
    def read(run_delay: Callable[[], float | None]) -> SampleLoad:
        """The clocks now, the run delay last: the clock and rusage calls are where the kernel notices that a slice
        has run out, so a switch that was due during the sample lands before the run delay is read and counts."""
        return SampleLoad(time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw,
                          run_delay())

    def begin(self) -> None:
        self._before = self.read(self.run_delay.begin)

    def end(self, kept: bool) -> None:
        """Close the sample begun last; a sample the sampler dropped is not in the data and is not counted."""
        after = self.read(self.run_delay.end)
        if kept and self._before is not None:
            self.loads.append(after - self._before)

    def close(self) -> None:
        self.run_delay.close()

    def finish(self, threads: int) -> Contention:
        """The case's contention; `threads`: those of torch's pool."""
        worked = working(self._cpu_times, self.run_delay.cpu_times())
        self.close()
        return Contention(self.loads, os.getloadavg()[0], threads, cpus(), worked)


def cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container or taskset narrows), else all."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class Contention:
    """The host's load during a case's samples, summarized for extra_info (`contended`, `contention`)."""

    loads: list[SampleLoad] = field(default_factory=list)
    load_1m: float = 0.0
    threads: int = 1  # torch's intra-op threads
    cpus: int = 1
    working_threads: int | None = None  # the process's threads that worked while sampling (None: not read)

    @property
    def ran_on(self) -> int:
        """The threads the case ran on: those that worked, where procfs says, else torch's pool."""
        return self.threads if self.working_threads is None else self.working_threads

    @property
    def share(self) -> float:
        return sum(load.contended for load in self.loads) / len(self.loads) if self.loads else 0.0

    @property
    def contended(self) -> bool:
        return bool(self.loads) and self.share >= CONTENDED_SHARE

    def info(self) -> dict:
        """`contention`: the share of contended samples, what was measured, and the rule."""
        walls = np.array([load.wall_s for load in self.loads]) if self.loads else np.zeros(0)
        wall = float(walls.sum())
        delays = [load.run_delay_s for load in self.loads if load.run_delay_s is not None]
        out: dict = {"share": self.share, "samples": len(self.loads),
                     "flagged": sum(load.contended for load in self.loads),
                     "involuntary_switches_per_sample": (float(np.mean([load.involuntary for load in self.loads]))
                                                         if self.loads else 0.0),
                     "cpu_per_wall": float(sum(load.cpu_s for load in self.loads) / wall) if wall > 0 else None,
                     "run_delay_share": float(sum(delays) / wall) if delays and wall > 0 else None,
                     "load_1m": self.load_1m, "threads": self.threads, "cpus": self.cpus,
                     "working_threads": self.working_threads, "rule": RULE}
        return out


def pool_waited(load: Contention | None, device_type: str) -> bool:
    """Whether a CPU case's figure is the scheduler's rather than the op's: it ran on several threads (torch's
    intra-op pool; `Contention.ran_on`) while other work held the host's CPUs (`contended`).

    A parallel op waits at its end for the last thread of the pool; a thread that another process displaced waits
    for a scheduler slice (milliseconds) before it runs again, in every call that follows a pause of the pool. So a
    contended sample of such an op is not the op slowed by a share, it is the slice: beside one CPU-bound neighbour
    on this 2-core machine, a 0.2 ms 257^3 float32 matmul on 2 threads read 69 ms per call, its five samples
    within the quick profile's target (`converged`). Its spread says nothing of the op, so such a case is never
    converged (suites/core/measurement.py), and its note says why (suites/core/timing.py). One thread has no pool
    to wait on: its contended samples are the op slowed by what the neighbour took, which the median of mostly
    quiet samples leaves out and the case's `contended` marks; nor has a case that runs on one thread while the pool
    has two (Python code, a sleep: `working_threads`). A GPU's ops are timed on the device."""
    return device_type == "cpu" and load is not None and load.contended and load.ran_on >= 2


def pooled(parts: list[Contention]) -> Contention:
    """One case's contention over several measurements (its rounds): every sample of every part."""
    last = parts[-1]
    worked = [p.working_threads for p in parts if p.working_threads is not None]
    return Contention([load for part in parts for load in part.loads], max(p.load_1m for p in parts), last.threads,
                      last.cpus, max(worked) if worked else None)
