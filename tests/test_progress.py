"""The progress line: what it says, and that a real run writes it every interval during a long case, under -q,
and not at all in a run shorter than the interval."""

from __future__ import annotations

import re

import pytest

from suites.harness.progress import Progress, duration
from tests.runs import ProcessRun, run_pytest_in_process

LINE = re.compile(r"^bench: [\dminhs ]+, (\d+) of (\d+) cases done, (\d+) left"
                  r"(?: \(about [\dminhs ]+ more (?:at this run's pace|by the plan)\))?"
                  r"(; (\S+) running for [\dminhs ]+)?$")


def test_durations_read_at_a_glance():
    assert [duration(s) for s in (0.4, 35, 245.9, 3720)] == ["0 s", "35 s", "4 min 05 s", "1 h 02 min"]


def test_the_line_says_elapsed_done_left_and_the_case_running():
    progress = Progress(total=40, started=100.0)
    for _ in range(12):
        progress.begin("a case")
        progress.finish()
    # 245 s for 12 cases: 28 more at that pace are 571 s
    assert progress.line(now=345.0) == ("bench: 4 min 05 s, 12 of 40 cases done, 28 left (about 9 min 31 s more at "
                                        "this run's pace)")
    progress.begin("bench/test_batch_size.py::test_x[gpt2]")
    progress.current_since = 275.0
    assert progress.line(now=345.0) == ("bench: 4 min 05 s, 12 of 40 cases done, 28 left (about 9 min 31 s more at "
                                        "this run's pace); bench/test_batch_size.py::test_x[gpt2] running for 1 min "
                                        "10 s")


def test_before_enough_cases_the_line_counts_down_the_plan_then_scales_it_by_the_runs_pace():
    """A search of minutes after ops of a second: the plan's seconds of the cases left, not the mean per case."""
    planned = [1.0] * 12 + [300.0, 1.0]
    progress = Progress(total=14, planned=planned, started=0.0)
    assert progress.line(now=5.0) == "bench: 5 s, 0 of 14 cases done, 14 left (about 5 min 13 s more by the plan)"
    for _ in range(9):
        progress.finish()
    assert progress.line(now=18.0).endswith("5 left (about 5 min 04 s more by the plan)")
    for _ in range(3):
        progress.finish()
    # 12 cases planned at 12 s took 24 s: the run goes at half the plan's speed, so 301 s left are 602 s
    assert progress.line(now=24.0) == ("bench: 24 s, 12 of 14 cases done, 2 left (about 10 min 02 s more at this "
                                       "run's pace)")


def test_a_round_before_pytests_pass_counts_as_a_case_and_its_error_still_ends_it():
    progress = Progress(total=3)
    assert progress.measure("matmul/x (round 1 of 2)", lambda: 7) == 7 and progress.done == 1
    with pytest.raises(ZeroDivisionError):
        progress.measure("matmul/y (round 1 of 2)", lambda: 1 / 0)
    assert progress.done == 2 and progress.current is None


LONG_CASE = '''
import time


def test_long(device_bench):
    time.sleep(1.5)
    device_bench(lambda: None)


def test_short(device_bench):
    device_bench(lambda: None)
'''


def _progress_lines(output: str) -> list[re.Match]:
    return [m for m in map(LINE.match, output.splitlines()) if m]


def _run(tmp_path, capfd, *args: str) -> tuple[ProcessRun, str]:
    """A run of the suite in this process, and what it wrote to file descriptor 1: the progress line's output (a
    duplicate of the descriptor, taken as the suite switches on) is pytest's own capture of this test's, which
    capfd reads, while the run's reporter writes to the captured sys.stdout."""
    capfd.readouterr()
    proc = run_pytest_in_process("test_mine.py", "--benchmark-only", "--bench-device", "cpu", *args, cwd=tmp_path)
    return proc, capfd.readouterr().out


@pytest.mark.slow
def test_a_long_case_gets_a_line_every_interval_under_minus_q(tmp_path, capfd):
    (tmp_path / "test_mine.py").write_text(LONG_CASE)
    proc, written = _run(tmp_path, capfd, "--bench-progress-interval-s", "0.25")
    assert proc.returncode == 0, proc.tail()
    lines = _progress_lines(written)
    during_long = [m for m in lines if m.group(5) == "test_mine.py::test_long"]
    assert len(during_long) >= 2, written  # 1.5 s at 0.25 s: six lines due
    assert all((m.group(1), m.group(2), m.group(3)) == ("0", "2", "2") for m in during_long)
    assert all(m.group(2) == "2" and int(m.group(1)) + int(m.group(3)) == 2 for m in lines)


@pytest.mark.slow
def test_a_run_shorter_than_the_interval_gets_no_line(tmp_path, capfd):
    (tmp_path / "test_mine.py").write_text(LONG_CASE.replace("time.sleep(1.5)", "pass"))
    proc, written = _run(tmp_path, capfd)
    assert proc.returncode == 0, proc.tail()
    everything = proc.stdout + written
    others = [line for line in everything.splitlines() if line.startswith("bench: ") and "cases done" in line]
    assert "2 passed" in proc.stdout and not _progress_lines(everything) and not others
    assert "bench: profile quick" in proc.stdout  # the run's first line, which is not a progress line
