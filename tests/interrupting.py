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


_cases_started = 0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _cases_started
    if "benchmark" not in getattr(item, "fixturenames", ()):
        return
    _cases_started += 1
    if _cases_started == 2:
        interrupt, tb = interrupt_on_an_unlocated_instruction()
        raise interrupt.with_traceback(tb.tb_next)
