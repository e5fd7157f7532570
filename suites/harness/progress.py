"""A progress line at least every `--bench-progress-interval-s` (30 s) while a run of the suite measures.

Why: pytest prints one dot per finished test, and one case of the batch-size search or of the training steps runs
for minutes; a CI log with nothing in it for four minutes reads as a hung job. The line says how long the run has
taken, how many cases are done and left, what is left, which case is running and for how long:

    bench: 4 min 05 s, 12 of 40 cases done, 28 left (about 9 min 31 s more at this run's pace);
    bench/test_batch_size.py::test_x[...] running for 1 min 10 s

What is left comes from the run's estimate (suites/harness/run_estimate.py: seconds per case, measured on the last
run of this device identity or reasoned) where there is one: until `PACE_AFTER` cases are done, the estimate's
seconds of the cases left (`by the plan`); after, the same scaled by the run's pace against the estimate (its
elapsed time over the estimate's for the cases done: the cases of a run differ by a thousandfold, a search against
an op, so the mean time per case done says little of the ones left). Without an estimate, the mean time per case
done times the cases left.

One line per interval, never one per case: a quick run of a hundred cases in 90 s gets three lines, a run shorter
than the interval none. It is shown at every verbosity, `-q` included (CI logs are where a silent job is read as
hung); 0 turns it off.

The line comes from a daemon thread, so that a case that runs for minutes still gets its lines, and it is written
to the output pytest had before it captured the tests' (a duplicate of file descriptor 1 taken when the suite
switches on, between collection and the first test): the tests' captured output is not touched. Nothing is
written under pytest-xdist (its workers' output is not the terminal) or on ranks other than 0 under torchrun.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

INTERVAL_S = 30.0
PACE_AFTER = 10  # cases done before the run's own pace replaces the estimate's seconds
T = TypeVar("T")


def duration(seconds: float) -> str:
    """`35 s`, `4 min 05 s`, `1 h 02 min`: what a reader of a log takes in at a glance."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


@dataclass
class Progress:
    """Where the run is: the cases to measure, those done, and the one running (set in the main thread, read by the
    ticker's thread, which only formats them). With `--bench-rounds N` a case of the suites counts once per round."""

    total: int
    planned: list[float] = field(default_factory=list)  # the estimate's seconds per case in run order (or none)
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    current: str | None = None
    current_since: float = 0.0

    def begin(self, name: str) -> None:
        self.current, self.current_since = name, time.monotonic()

    def measure(self, name: str, fn: Callable[[], T]) -> T:
        """`fn()` as a case of the run named `name` (a round before pytest's pass: outside pytest's hooks)."""
        self.begin(name)
        try:
            return fn()
        finally:
            self.finish()

    def finish(self) -> None:
        self.done += 1
        self.current = None

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        left = max(0, self.total - self.done)
        elapsed = now - self.started
        text = f"bench: {duration(elapsed)}, {self.done} of {self.total} cases done, {left} left"
        if left and (more := self.left_s(elapsed)) is not None:
            text += f" (about {duration(more[0])} more {more[1]})"
        current, since = self.current, self.current_since  # one read each: the main thread may change them
        if current is not None:
            text += f"; {current} running for {duration(now - since)}"
        return text

    def left_s(self, elapsed: float) -> tuple[float, str] | None:
        """Seconds left and on what they rest (module docstring); None before a case is done without an
        estimate."""
        done = min(self.done, self.total)
        if self.planned:
            planned_left, planned_done = sum(self.planned[done:]), sum(self.planned[:done])
            if done < PACE_AFTER or planned_done <= 0:
                return planned_left, "by the plan"
            return planned_left * elapsed / planned_done, "at this run's pace"
        if done:
            return elapsed / done * (self.total - done), "at this run's pace"
        return None


class Ticker:
    """A daemon thread that writes `progress.line()` every `interval_s` until stopped."""

    def __init__(self, progress: Progress, interval_s: float, write: Callable[[str], None]) -> None:
        self.progress, self.interval_s, self.write = progress, interval_s, write
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-progress", daemon=True)

    def start(self) -> Ticker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.write(self.progress.line())
            except OSError:  # the terminal went away (a closed pipe): the run goes on without its progress
                return


def terminal_writer(line_open: Callable[[], bool]) -> Callable[[str], None]:
    """A writer of whole lines to the output as it is now (file descriptor 1 duplicated: call this outside a test,
    while pytest is not capturing). `line_open` says whether pytest's reporter has a line of dots under way, which
    the progress line then starts below."""
    fd = os.dup(1)

    def write(line: str) -> None:
        os.write(fd, f"{chr(10) if line_open() else ''}{line}\n".encode())
    return write


class ProgressPlugin:
    """pytest's hooks that move the progress, and the ticker's life: from the suite switching on (registered then)
    to the end of the session."""

    def __init__(self, total: int, interval_s: float, write: Callable[[str], None],
                 planned: list[float] | None = None) -> None:
        self.progress = Progress(total, planned or [])
        self.ticker = Ticker(self.progress, interval_s, write).start()

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.progress.begin(nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        self.progress.finish()

    def pytest_sessionfinish(self, session: object, exitstatus: int) -> None:
        self.ticker.stop()
