"""Whether the host was busy with other work while a case was sampled: per sample, did our threads wait for a CPU?

Why: on a shared machine a neighbour's job takes the cores our threads want, and a CPU case's samples then
include the time a thread of ours stood ready in the run queue (on a loaded 2-core machine, ten 256^3 matmuls
took 20-400 ms in such samples against 2 ms in the others: thread-pool waits in scheduler quanta). A verdict
built on those samples says "slower" about the machine, not the code, so every sample is probed, outside its
timed window, and the case records how many were touched.

Per sample (a `SampleLoad`): its wall time; the process's CPU time (all threads, `time.process_time`); its
involuntary context switches (`resource.getrusage`); and, on Linux, the run delay of every thread of the process
(the time it was runnable but not running, from `/proc/self/task/*/schedstat`), the direct measure of contention.
A sample is contended when its threads waited for a CPU for at least `RUN_DELAY_SHARE` of its wall time; where
the run delay cannot be read (no procfs), when it was preempted at all (an involuntary switch). A case is
`contended` when at least `CONTENDED_SHARE` of its samples are. The 1-minute load average, the threads torch
uses and the CPUs this process may run on are recorded beside it as context: the load lags a case of a second
by a minute, so it does not decide.
"""

from __future__ import annotations

import os
import resource
import time
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


class RunDelay:
    """The summed run delay of the process's threads, read from files opened once (a read then costs a few
    microseconds per thread; opening them per sample would cost a hundred or more)."""

    def __init__(self) -> None:
        self.files: list[int] = []
        try:
            for task in os.listdir("/proc/self/task"):
                self.files.append(os.open(f"/proc/self/task/{task}/schedstat", os.O_RDONLY))
        except OSError:
            self.close()

    def seconds(self) -> float | None:
        """Nanoseconds waited, in seconds; None where procfs is absent. A thread that has ended reads as 0."""
        if not self.files:
            return None
        total = 0
        for fd in self.files:
            try:
                total += int(os.pread(fd, 128, 0).split()[1])
            except (OSError, IndexError, ValueError):
                continue
        return total / 1e9

    def close(self) -> None:
        for fd in self.files:
            os.close(fd)
        self.files = []


class HostProbe:
    """Reads the process's clocks before and after every sample (outside its timed window)."""

    def __init__(self) -> None:
        self.run_delay = RunDelay()
        self.loads: list[SampleLoad] = []
        self._before: SampleLoad | None = None

    def read(self) -> SampleLoad:
        return SampleLoad(time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw,
                       self.run_delay.seconds())

    def begin(self) -> None:
        self._before = self.read()

    def end(self, kept: bool) -> None:
        """Close the sample begun last; a sample the sampler dropped is not in the data and is not counted."""
        after = self.read()
        if kept and self._before is not None:
            self.loads.append(after - self._before)

    def close(self) -> None:
        self.run_delay.close()

    def finish(self, threads: int) -> Contention:
        self.close()
        return Contention(self.loads, os.getloadavg()[0], threads, cpus())


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
    threads: int = 1
    cpus: int = 1

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
                     "load_1m": self.load_1m, "threads": self.threads, "cpus": self.cpus, "rule": RULE}
        return out


def pooled(parts: list[Contention]) -> Contention:
    """One case's contention over several measurements (its rounds): every sample of every part."""
    last = parts[-1]
    return Contention([load for part in parts for load in part.loads], max(p.load_1m for p in parts), last.threads,
                      last.cpus)
