"""What the reports print and write from hostile inputs, so that nothing a file holds can corrupt a terminal or a
page: control characters in names never reach the terminal, times no trace can hold are left out with a count, `-`
is no output file, and the strict JSON writer keeps every value it lists."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reports.format import strict_json
from tests.resultfiles import RUN_A, RUN_B, read, write
from tests.runs import run_reports_in_process

# What a terminal acts on: clear the screen, a hyperlink (OSC 8, ended by BEL), a carriage return that lets the
# rest of the line overwrite its start, and C1's one-byte CSI.
HOSTILE = "\x1b[2J\x1b]8;;http://x.example\x07link\x1b]8;;\x07\rover\x9b31m"
RAW = ("\x1b", "\x07", "\r", "\x9b")


def hostile_run(path: Path) -> Path:
    """A real run whose device name, first case and an unknown top-level field hold terminal escapes."""
    data = read(RUN_A)
    data["machine_info"]["cpu_info"]["model"] += HOSTILE
    entry = data["benchmarks"][0]
    for key in ("name", "fullname"):
        entry[key] += HOSTILE
    entry["extra_info"]["case"] += HOSTILE
    data[f"field{HOSTILE}"] = 1  # named in a warning on stderr
    return write(data, path)


def trace_file(path: Path, *extra: dict) -> Path:
    """Two kernels of one device, launched by two runtime calls, then the extra events."""
    def kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"device": 0, "correlation": correlation}}

    events = [kernel(f"volta_h884gemm{HOSTILE}", 1000, 10, 1), kernel("volta_sgemm_128x64_nn", 1020, 5, 2), *extra]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def assert_printable(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text[:300])
    assert "\\x1b[2J" in text and "\\x07" in text  # written out, so a reader sees what the file holds


@pytest.mark.parametrize("command", ["table", "table --markdown", "compare --allow-different-devices", "hardware",
                                     "export"])
def test_no_control_character_of_a_results_file_reaches_the_terminal(command, tmp_path):
    path = hostile_run(tmp_path / "hostile.json")
    name, *options = command.split()
    args = {"compare": [RUN_B, path], "hardware": [RUN_B, path],
            "export": [path, "-o", tmp_path / "out.csv"]}.get(name, [path])
    run = run_reports_in_process(name, *map(str, args), *options, cwd=tmp_path)
    assert run.returncode == 0, run.tail()
    assert "unknown top-level field" in run.stderr and not any(c in run.stderr for c in RAW)
    if name != "export":  # export prints the file it wrote, no name from the inputs
        assert_printable(run.stdout)


def test_no_control_character_of_a_trace_reaches_the_terminal(tmp_path):
    run = run_reports_in_process("trace", str(trace_file(tmp_path / "trace.json")))
    assert run.returncode == 0, run.tail()
    assert_printable(run.stdout)
    as_json = run_reports_in_process("trace", str(tmp_path / "trace.json"), "--json")
    names = [k["name"] for k in json.loads(as_json.stdout)["devices"][0]["top_kernels"]]
    assert f"volta_h884gemm{HOSTILE}" in names  # JSON escapes them itself: the name reads back as it was


def test_times_no_trace_can_hold_are_left_out_and_counted(tmp_path):
    """A kernel at 1e300 us once made the span 1e300 us and 1e300 + 5 us a kernel of 0 us; one at 1.7e308 us
    beside one at -1.7e308 us made it `inf`."""
    huge = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": ts, "dur": dur, "args": {"device": 0}}
            for ts, dur in ((1e300, 5), (1.7e308, 1), (-1.7e308, 1), (2000, 1e300))]
    run = run_reports_in_process("trace", str(trace_file(tmp_path / "trace.json", *huge)), "--json")
    assert run.returncode == 0, run.tail()
    (line,) = [w for w in run.stderr.splitlines() if w.startswith("warning:")]
    assert "left out 4 event(s)" in line and "beyond 9.01e+15 us" in line
    device = json.loads(run.stdout)["devices"][0]
    assert device["span_us"] == 25 and device["busy_us"] == 15 and device["event_count"] == 2


def test_the_strict_writer_keeps_the_values_beside_a_nonfinite_that_is_no_list():
    """Another writer's `nonfinite` (text, an object) once took the place of the list: the infinite value it was
    written beside came back as null, with nothing said."""
    for foreign in ("see notes", {"path": "/x", "value": "Infinity"}):
        text = strict_json.dumps({"nonfinite": foreign, "rel_iqr": math.inf})
        document = json.loads(text)
        assert document["nonfinite"] == [foreign, {"path": "/rel_iqr", "value": "Infinity"}]
        back = json.loads(text)
        problems = strict_json.restore(back)
        assert back["rel_iqr"] == math.inf
        assert len(problems) == 1  # the foreign entry is named as one that cannot be used
    assert json.loads(strict_json.dumps({"nonfinite": None, "a": -math.inf}))["nonfinite"] == [
        {"path": "/a", "value": "-Infinity"}]


@pytest.mark.parametrize("command", [["compare", RUN_A, RUN_B, "--json", "-"], ["export", RUN_A, "-o", "-"],
                                     ["html", RUN_A, "-o", "-"], ["plot", RUN_A, "-o", "-"]])
def test_dash_is_refused_as_an_output_file(command, tmp_path):
    """`compare A B --json -` wrote a file named `-` while stdout held the text report: `-` is refused in one line,
    before any work, and nothing is written."""
    run = run_reports_in_process(*map(str, command), cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [
        f"error: {command[-2]} -: would be a file named '-', not stdout, which holds the command's report; name a "
        "file (e.g. ./- if that is the name meant)"]
    assert list(tmp_path.iterdir()) == []
