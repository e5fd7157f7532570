"""A run stopped by a signal that leaves a traceback entry without a line number still ends as interrupted."""

from __future__ import annotations

import dis
import json
import sys

import pytest

from suites.harness.tracebacks import give_every_entry_a_line, line_before
from tests.interrupting import interrupt_on_an_unlocated_instruction, stopped_in_a_handler
from tests.runs import bench_args, run_pytest_in_process

needs_311 = pytest.mark.skipif(sys.version_info < (3, 11), reason="tb_lineno is never None before CPython 3.11")


@needs_311
def test_pytest_prints_an_interrupt_whose_traceback_has_an_entry_without_a_line():
    exc, tb = interrupt_on_an_unlocated_instruction()
    assert tb.tb_next.tb_lineno is None
    with pytest.raises(TypeError):  # what such a stop did to pytest's report of it
        pytest.ExceptionInfo.from_exc_info((KeyboardInterrupt, exc, tb)).getrepr()

    give_every_entry_a_line(tb)

    code = stopped_in_a_handler.__code__
    assert tb.tb_next.tb_lineno == line_before(code, tb.tb_next.tb_lasti) > code.co_firstlineno
    text = str(pytest.ExceptionInfo.from_exc_info((KeyboardInterrupt, exc, tb)).getrepr())
    assert "stopped by SIGTERM" in text and "stopped_in_a_handler" in text


@needs_311
def test_a_run_stopped_on_an_instruction_without_a_line_ends_interrupted_with_its_finished_case(tmp_path):
    """Seen in CI: SIGTERM to a quick run, pytest's report of the interrupt died in a TypeError and the run exited 1."""
    out = tmp_path / "cut.json"
    proc = run_pytest_in_process("-p", "tests.interrupting", *bench_args(
        "bench/test_matmul.py", "--bench-profile", "quick", "--bench-achievable-peaks", "off", "-k", "square",
        json_path=out))
    assert proc.returncode == 2, proc.tail()  # pytest's "interrupted"
    assert "KeyboardInterrupt" in proc.stdout and "TypeError" not in proc.output
    data = json.loads(out.read_text())
    assert data["incomplete"] is True and len(data["benchmarks"]) == 1


def test_entries_with_lines_are_left_as_they_are():
    try:
        stopped_in_a_handler()
    except KeyboardInterrupt as exc:
        tb = exc.__traceback__
    entries = [tb, tb.tb_next]
    give_every_entry_a_line(tb)
    assert [tb, tb.tb_next] == entries and tb.tb_next.tb_next is None


def test_the_line_before_an_offset_is_the_last_line_started_at_or_before_it():
    code = stopped_in_a_handler.__code__
    starts = [(offset, line) for offset, line in dis.findlinestarts(code) if line is not None]
    for offset, line in starts:
        assert line_before(code, offset) == line
    assert line_before(code, -1) == code.co_firstlineno
