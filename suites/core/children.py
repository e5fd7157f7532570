"""Child processes that end with their parent: the pytest runs that `advise` and `gpu_check` start.

A command that runs pytest in a child must not leave it measuring after the command itself is gone: a child left
behind holds the GPU and skews the next run's figures. Two ways out are covered:

- the parent is stopped by a signal it can handle (SIGTERM from a CI timeout, SIGHUP, Ctrl-C): `stop_with_parent`
  forwards SIGTERM to the child, which writes the cases it finished (suites/harness/results.py), waits for it,
  and then ends the parent as that signal would have. A signal the parent ignores (SIGHUP under nohup) stops
  neither (`stops_to_catch`);
- the parent is killed outright (SIGKILL, the OOM killer): on Linux the child is started with the parent-death
  signal set to SIGTERM (prctl PR_SET_PDEATHSIG), so the kernel stops it the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

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
