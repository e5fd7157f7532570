"""Child processes that end with their parent: the pytest runs that `advise` and `gpu_check` start, each through
`run_bounded`.

A command that runs pytest in a child must not leave it measuring after the command itself is gone: a child left
behind holds the GPU and skews the next run's figures. Two ways out are covered:

- the parent is stopped by a signal it can handle (SIGTERM from a CI timeout, SIGHUP, Ctrl-C): `stop_with_parent`
  forwards SIGTERM to the child, which writes the cases it finished (suites/harness/results.py), waits for it,
  and then ends the parent as that signal would have. A signal the parent ignores (SIGHUP under nohup) stops
  neither (`stops_to_catch`);
- the parent is killed outright (SIGKILL, the OOM killer): on Linux the child is started with the parent-death
  signal set to SIGTERM (prctl PR_SET_PDEATHSIG), so the kernel stops it the same way.

`run_bounded` runs one such child within a time limit (gpu_check's steps; advise's sweeps have none), in a process
group of its own, so that at its limit the whole group (pytest and what it started: compile workers, DataLoader
workers) gets SIGTERM (pytest then writes the cases it finished), and SIGKILL after a grace period. While the child
runs, `progress` is called every `progress_s` seconds with the seconds elapsed and the last line of its log, so
that a run of minutes is never silent.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The signals that ask a process to stop (a CI timeout, a closed terminal, Ctrl-C): a run writes what it finished
# and a child is stopped with its parent. The platform may lack some (Windows has no SIGHUP).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


def stops_to_catch() -> tuple[int, ...]:
    """The stop signals to catch: all but a SIGHUP the process ignores (nohup, whose children inherit it), which
    stays ignored: the user asked the process to outlive its terminal, and catching it once stopped a child and
    left its parent running without it. An ignored SIGINT is still caught: a shell ignores it in its background
    jobs, yet `kill -INT` must stop the run and write what it finished."""
    hangup = getattr(signal, "SIGHUP", None)
    return tuple(signum for signum in STOP_SIGNALS
                 if not (signum == hangup and signal.getsignal(signum) is signal.SIG_IGN))


GRACE_S = 20.0  # after SIGTERM, how long a child has to write what it finished before it is killed
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: ask the kernel for SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(libc_name, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start(cmd: list[str], **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen(cmd, ...)` whose process is stopped (SIGTERM) when this process dies."""
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    return subprocess.Popen(cmd, preexec_fn=preexec, **popen_kwargs)


def _send(proc: subprocess.Popen, signum: int) -> None:
    """The signal to the child's whole process group when it leads one (started with start_new_session=True:
    pytest's compile and DataLoader workers go with it), else to the child alone."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)


def stop(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM, then SIGKILL after `grace_s` if the child is still there."""
    if proc.poll() is not None:
        return
    _send(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _send(proc, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def stop_with_parent(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """While inside: a stop signal to this process stops the child first, then this process as the signal would
    (the previous handler runs, or the default action)."""

    def forward(signum: int, frame: object) -> None:
        stop(proc)
        restore()
        signal.raise_signal(signum)

    previous = {}
    with contextlib.suppress(ValueError):  # not the main thread: signals stay as they are
        for signum in stops_to_catch():
            previous[signum] = signal.signal(signum, forward)

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    try:
        yield proc
    finally:
        restore()


TAIL_BYTES = 4096


@dataclass
class Finished:
    """A subprocess's outcome: its exit code (None when it was stopped at its limit), output and seconds."""

    returncode: int | None
    output: str
    seconds: float


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


def run_bounded(cmd: list[str], timeout_s: float, log: Path, cwd: Path,
                progress: Callable[[float, str], None] = lambda elapsed, line: None,
                progress_s: float = 30.0) -> Finished:
    """Run `cmd` in `cwd` for at most `timeout_s`, its output into `log`; at the limit its process group is
    stopped (SIGTERM, then SIGKILL)."""
    began = time.perf_counter()
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = start(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        with stop_with_parent(proc):
            code: int | None = None
            while code is None:
                left = timeout_s - (time.perf_counter() - began)
                if left <= 0:
                    stop(proc, GRACE_S)
                    break
                try:
                    code = proc.wait(timeout=min(progress_s, left))
                except subprocess.TimeoutExpired:
                    if time.perf_counter() - began < timeout_s:
                        progress(time.perf_counter() - began, last_line(log))
    return Finished(code, log.read_text(errors="replace"), time.perf_counter() - began)
