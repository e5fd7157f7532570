"""A subprocess run within a time limit that never outlives its parent, and says how it is doing while it runs.

Each child gets a process group of its own, so that at its limit the whole group (pytest and whatever it
started: compile workers, DataLoader workers) is sent SIGTERM (pytest then writes the cases it finished), and
SIGKILL after a grace period. The parent's own end is handled too:

- SIGTERM, SIGHUP or SIGINT to the parent (`Stopped`, raised by the handlers `stop_on_signals` installs) stops
  the running child's group the same way before the parent goes on to end;
- on Linux the child is also asked to get SIGTERM when the parent dies (PR_SET_PDEATHSIG), the one case no
  handler can see (SIGKILL, the OOM killer).

While the child runs, `progress` is called every `progress_s` seconds with the seconds elapsed and the last line
of its log, so a step of minutes is never silent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

TERM_GRACE_S = 20.0  # after SIGTERM, how long a child has to write what it finished before SIGKILL
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
TAIL_BYTES = 4096


class Stopped(BaseException):
    """The parent was sent a stop signal (a BaseException, like KeyboardInterrupt: no handler swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGTERM, SIGHUP and SIGINT raise Stopped in the main thread."""
    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    old = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


@dataclass
class Finished:
    """A subprocess's outcome: its exit code (None when it was stopped at its limit), output and seconds."""

    returncode: int | None
    output: str
    seconds: float


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec_fn asking Linux to send the child SIGTERM when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request was made
            os._exit(1)

    return preexec


def last_line(log: Path) -> str:
    """The last non-empty line of a log (pytest -v writes the case it is running before its result)."""
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - TAIL_BYTES))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def stop_group(proc: subprocess.Popen, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM to the child's process group, SIGKILL after `grace_s` if it has not ended."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_bounded(cmd: list[str], timeout_s: float, log: Path, cwd: Path,
                progress: Callable[[float, str], None] = lambda elapsed, line: None,
                progress_s: float = 30.0) -> Finished:
    """Run `cmd` in `cwd` for at most `timeout_s`, its output into `log`; stopped (group, SIGTERM, then
    SIGKILL) at the limit or when the parent is stopped (the Stopped is raised again after)."""
    start = time.perf_counter()
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True, preexec_fn=_die_with_parent(os.getpid()))
        code: int | None = None
        try:
            while code is None:
                elapsed = time.perf_counter() - start
                if elapsed >= timeout_s:
                    stop_group(proc)
                    break
                try:
                    code = proc.wait(timeout=min(progress_s, timeout_s - elapsed))
                except subprocess.TimeoutExpired:
                    if time.perf_counter() - start < timeout_s:
                        progress(time.perf_counter() - start, last_line(log))
        except BaseException:
            stop_group(proc)
            raise
    return Finished(code, log.read_text(errors="replace"), time.perf_counter() - start)
