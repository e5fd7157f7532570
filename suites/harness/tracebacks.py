"""Interrupt tracebacks that pytest can print.

A KeyboardInterrupt raised from a signal handler (Ctrl-C, or the SIGTERM and SIGHUP that the results writer turns
into one, suites/harness/results.py) can leave a traceback entry on an instruction that has no line number: under
CPython 3.11 and later, `tb_lineno` is then None ("possible in unusual circumstances, such as when the cycle GC invokes
Python or a keyboard interrupt", python/cpython#94485). pytest's report of the interrupt computes `tb_lineno - 1` and
dies with a TypeError, so a run stopped by a CI timeout's SIGTERM ended with an internal traceback and exit status 1
instead of 2, "interrupted" (seen in CI; pytest-dev/pytest-xdist#1196 shows the same trace). The results file is
written either way (pytest finishes the session in a `finally`); what broke was the exit status and the message.
"""

from __future__ import annotations

import dis
from types import CodeType, TracebackType


def give_every_entry_a_line(tb: TracebackType | None) -> None:
    """Replace, in place, each entry after the first that has no line number with one on the nearest line before
    its instruction: the line the frame was running when the signal came. The first entry is the frame that caught
    the interrupt, stopped in a call (which always has a line); it cannot be replaced in place."""
    while tb is not None and tb.tb_next is not None:
        following = tb.tb_next
        if following.tb_lineno is None:
            line = line_before(following.tb_frame.f_code, following.tb_lasti)
            tb.tb_next = TracebackType(following.tb_next, following.tb_frame, following.tb_lasti, line)
        tb = tb.tb_next


def line_before(code: CodeType, offset: int) -> int:
    """The line of the last instruction at or before byte `offset` of `code` that has one; the `def`'s line when
    none before it has."""
    lines = [line for start, line in dis.findlinestarts(code) if start <= offset and line is not None]
    return lines[-1] if lines else code.co_firstlineno
