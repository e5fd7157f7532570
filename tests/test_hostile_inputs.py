"""Every `python -m reports` command on every input of the hostile corpus (tests/hostile.py).

The contract, for each (input, command): no traceback and no hang; exit 0 with a warning that names the file
(or, for an input the reports read as it is, nothing to warn about), or exit 2 with one `error:` line that
names it; and never a figure that contradicts the input: a median that cannot be a time is listed as invalid,
never shown as a time, and a trace's shares stay within 0 to 100 % of a non-negative busy time.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from reports.__main__ import main
from tests import hostile

RESULT_COMMANDS = {
    "table": lambda p, good, out: ["table", p],
    "plot": lambda p, good, out: ["plot", p, "-o", out],
    "compare-as-candidate": lambda p, good, out: ["compare", good, p, "--allow-different-devices"],
    "compare-as-baseline": lambda p, good, out: ["compare", p, good, "--allow-different-devices"],
    "history": lambda p, good, out: ["history", p, "-o", out, "--all"],
    "hardware": lambda p, good, out: ["hardware", p, "-o", out],
    "html": lambda p, good, out: ["html", p, "-o", out],
}
FOLDER_COMMANDS = ("table", "history")
TRACE_COMMANDS = {"trace": [], "trace-json": ["--json"]}
HANG_LIMIT_S = 120


def test_corpus_size():
    """The count the issue asks to show: inputs times commands."""
    runs = len(hostile.RESULTS) * (len(RESULT_COMMANDS) + len(FOLDER_COMMANDS)) + len(hostile.TRACES) * len(
        TRACE_COMMANDS)
    print(f"{len(hostile.RESULTS)} result inputs x {len(RESULT_COMMANDS)} commands + {len(FOLDER_COMMANDS)} "
          f"folder commands, {len(hostile.TRACES)} traces x {len(TRACE_COMMANDS)} = {runs} runs")
    assert len(hostile.RESULTS) >= 40 and len(hostile.TRACES) >= 12


def _on_alarm(signum, frame):
    raise TimeoutError(f"a command ran past {HANG_LIMIT_S} s: a hang")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """main() in this process, with an alarm so that a hang fails the test instead of stopping the suite."""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_LIMIT_S)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check_contract(name: str, path: Path, code: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err
    assert code in (0, 2), f"{name}: exit {code}\n{err[-2000:]}"
    if code == 2:
        lines = err.strip().splitlines()
        assert lines[-1].startswith("error: "), err
        assert all(line.startswith("warning: ") for line in lines[:-1]), err
    elif name not in hostile.BENIGN:
        assert f"warning: {path}" in err, f"{name}: exit 0 without a warning naming {path}\n{err}"


@pytest.mark.parametrize("command", sorted(RESULT_COMMANDS))
@pytest.mark.parametrize("name", sorted(hostile.RESULTS))
def test_result_inputs(name, command, tmp_path, capsys):
    path = hostile.RESULTS[name](tmp_path)
    good = hostile.good_run(tmp_path)
    code, out, err = run(RESULT_COMMANDS[command](str(path), str(good), str(tmp_path / "out")), capsys)
    check_contract(name, path, code, out, err)
    if code == 2:
        assert str(path) in err or str(good) in err or str(tmp_path / "out") in err
    if name in hostile.PLOT_WARNINGS and command in ("plot", "html"):
        assert code == 0 and f"warning: {path}" in err and "left out of the" in err
    if name in hostile.INVALID_MEDIAN and code == 0 and command == "table":
        assert "- invalid (1 cases): " in out  # listed with why, never as a time or "ok"


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
@pytest.mark.parametrize("name", sorted(hostile.RESULTS))
def test_one_hostile_file_in_a_folder_does_not_hide_the_others(name, command, tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    path = hostile.RESULTS[name](folder)
    shutil.copy(hostile.RUN_A, folder / "other.json")
    code, out, err = run([command, str(folder), *(["--all"] if command == "history" else [])], capsys)
    assert "Traceback" not in err
    assert code == 0, f"{name}: exit {code}\n{err[-2000:]}"
    if name not in hostile.BENIGN:
        assert f"warning: {path}" in err
    assert "matmul" in out


def _not_json(constant: str) -> None:
    raise AssertionError(f"{constant} in --json output")


def _shares_within_bounds(document: dict) -> None:
    for device in document["devices"]:
        for figures in [device, *device["steps"]]:
            assert figures["busy_us"] >= 0 and figures["idle_us"] >= 0
            for item in figures["classes"] + figures["top_kernels"]:
                assert 0 <= item["share"] <= 1.0 + 1e-9, item


@pytest.mark.parametrize("command", sorted(TRACE_COMMANDS))
@pytest.mark.parametrize("name", sorted(hostile.TRACES))
def test_trace_inputs(name, command, tmp_path, capsys):
    path = hostile.TRACES[name](tmp_path)
    code, out, err = run(["trace", str(path), *TRACE_COMMANDS[command]], capsys)
    assert "Traceback" not in out + err
    assert code in (0, 2), f"{name}: exit {code}\n{err[-2000:]}"
    if code == 2:
        (line,) = err.strip().splitlines()
        assert line.startswith("error: ") and str(path) in line
    elif command == "trace-json":
        _shares_within_bounds(json.loads(out, parse_constant=_not_json))  # bare NaN or Infinity is not JSON
    if name in ("trace_negative_duration", "trace_nan_duration"):
        assert code == 0 and f"warning: {path}: left out 1 event(s)" in err


@pytest.mark.parametrize("command", ["plot", "html", "history", "hardware"])
def test_an_output_folder_that_is_a_file_is_one_line_before_any_work(command, tmp_path, capsys):
    blocker = tmp_path / "out"
    blocker.write_text("a file")
    code, out, err = run([command, str(hostile.good_run(tmp_path)), "-o", str(blocker)], capsys)
    assert out == ""
    assert code == 2 and err.strip().splitlines() == [f"error: {blocker}: is a file; the output needs a directory"]
    assert blocker.read_text() == "a file"
