"""An interrupt as a signal landing on an instruction without a line number leaves it (python/cpython#94485), and a
pytest plugin (`-p tests.interrupting`) that stops a benchmark run with one before its second case: a CI timeout's
SIGTERM arriving at such an instruction, made to happen every time (tests/test_tracebacks.py)."""

from __future__ import annotations

import dis
from types import CodeType, TracebackType

import pytest


def stopped_in_a_handler() -> None:
    try:
        raise KeyboardInterrupt("stopped by SIGTERM")  # the line the signal came on
    except ValueError:
        pass


def _unlocated_offset(code: CodeType) -> int:
    """An instruction of `code` without a line number: its exception-handling cleanup, where a signal can land."""
    positions = list(code.co_positions())
    return next(ins.offset for ins in dis.get_instructions(code) if positions[ins.offset // 2][0] is None)


def interrupt_on_an_unlocated_instruction() -> tuple[KeyboardInterrupt, TracebackType]:
    """A real interrupt's traceback (this frame, then the handler's), its last entry moved onto an instruction
    without a line number."""
    try:
        stopped_in_a_handler()
    except KeyboardInterrupt as caught:
        interrupt = caught
    head = interrupt.__traceback__
    last = head.tb_next
    head.tb_next = TracebackType(None, last.tb_frame, _unlocated_offset(last.tb_frame.f_code), -1)
    return interrupt, head


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The second case of the session is stopped before it starts (the session's own count: no state kept here,
    so a second run in the same interpreter is stopped the same way)."""
    cases = [each for each in item.session.items if "benchmark" in getattr(each, "fixturenames", ())]
    if len(cases) > 1 and item is cases[1]:
        interrupt, tb = interrupt_on_an_unlocated_instruction()
        raise interrupt.with_traceback(tb.tb_next)
