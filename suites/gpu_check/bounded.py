"""A step's subprocess run within a time limit, never outliving the check, and saying how it is doing.

The child is started in a process group of its own (suites/core/children.py: it also ends when the check is
killed outright, and a stop signal to the check stops it first), so that at its limit the whole group (pytest
and what it started: compile workers, DataLoader workers) gets SIGTERM (pytest then writes the cases it
finished), and SIGKILL after a grace period. While the child runs, `progress` is called every `progress_s`
seconds with the seconds elapsed and the last line of its log, so a step of minutes is never silent.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from suites.core import children

TERM_GRACE_S = children.GRACE_S  # after SIGTERM, how long a child has to write what it finished before SIGKILL
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
    start = time.perf_counter()
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = children.start(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        with children.stop_with_parent(proc):
            code: int | None = None
            while code is None:
                left = timeout_s - (time.perf_counter() - start)
                if left <= 0:
                    children.stop(proc, TERM_GRACE_S)
                    break
                try:
                    code = proc.wait(timeout=min(progress_s, left))
                except subprocess.TimeoutExpired:
                    if time.perf_counter() - start < timeout_s:
                        progress(time.perf_counter() - start, last_line(log))
    return Finished(code, log.read_text(errors="replace"), time.perf_counter() - start)
