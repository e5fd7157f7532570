"""Every `python -m reports` command on every input of the hostile corpus (tests/hostile.py).

The contract, for each (input, command): no traceback and no hang; exit 0 with a warning that names the file
(or, for an input the reports read as it is, nothing to warn about), or exit 2 with one `error:` line that
names it; and never a figure that contradicts the input: a median that cannot be a time is listed as invalid,
never shown as a time, a field of the wrong type is left out with a warning naming it, a key named like a report
column never takes that column, and a trace's shares stay within 0 to 100 % of a non-negative busy time. Each
input's outcome is the one tests/hostile.py gives it.

Pictures are drawn once per input the reports read: `plot` and `html` run the same plotters
(reports.plot.PLOTTERS, run by run), and the page catches a plotter's exception to keep its other sections, so
`plot` runs on the inputs that are refused when loaded (its own load and its one error line) and `html` stands for
it on the others, with no plotter lost (a warning `html: plots of ...` is a plotter's traceback that `plot` would
show). Drawing is most of these tests' time.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest

from reports.__main__ import main
from reports.comparison import compare
from reports.format.load import load
from tests import hostile

# tests/conftest.py: the contract, not pixels nor where an artist lies
pytestmark = pytest.mark.usefixtures("small_pictures", "no_layout")

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


def test_corpus_size_and_every_input_has_one_outcome(capsys):
    """The counts the closing note gives: inputs, runs (inputs times commands) and inputs per outcome."""
    runs = len(result_runs()) + len(hostile.RESULTS) * len(FOLDER_COMMANDS) + len(hostile.TRACES) * len(
        TRACE_COMMANDS)
    with capsys.disabled():
        print(f"\n{len(hostile.RESULTS)} result inputs x ({len(RESULT_COMMANDS)} commands, `plot` on the "
              f"{len(hostile.REFUSED)} refused ones only, + {len(FOLDER_COMMANDS)} in a folder), "
              f"{len(hostile.TRACES)} traces x {len(TRACE_COMMANDS)} = {runs} runs; outcomes: "
              + ", ".join(f"{name} {len(items)}" for name, items in hostile.OUTCOMES.items()))
    assert len(hostile.RESULTS) >= 80 and len(hostile.TRACES) >= 16
    assert sorted(n for items in hostile.OUTCOMES.values() for n in items) == sorted(hostile.RESULTS)


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


def check_contract(name: str, path: Path, code: int, out: str, err: str, command: str) -> None:
    assert "Traceback" not in out + err
    assert code in (0, 2), f"{name}: exit {code}\n{err[-2000:]}"
    if code == 2:
        lines = err.strip().splitlines()
        assert lines[-1].startswith("error: "), err
        assert all(line.startswith("warning: ") for line in lines[:-1]), err
    elif name in hostile.LEFT_OUT:
        field = hostile.LEFT_OUT[name]
        assert f"warning: {path}" in err and f" {field}=" in err, f"{name}: no warning naming {field}\n{err}"
    elif name in hostile.PLOT_WARNINGS and command in ("plot", "html"):
        pass  # tested below
    elif name in hostile.BENIGN | hostile.RENAMED.keys() or (name in hostile.SAMPLES_ONLY and
                                                            not command.startswith("compare")):
        assert f"warning: {path}" not in err, f"{name}: read as it is, but warned\n{err}"
    else:
        assert f"warning: {path}" in err, f"{name}: exit 0 without a warning naming {path}\n{err}"


def result_runs() -> list[tuple[str, str]]:
    """(input, command) for every command on every input, but `plot` only on the inputs refused when loaded: on
    the others `html` draws the same pictures (see the module's docstring)."""
    return [(name, command) for name in sorted(hostile.RESULTS) for command in sorted(RESULT_COMMANDS)
            if command != "plot" or name in hostile.REFUSED]


@pytest.mark.parametrize(("name", "command"), result_runs())
def test_result_inputs(name, command, tmp_path, capsys):
    path = hostile.RESULTS[name](tmp_path)
    good = hostile.good_run(tmp_path)
    code, out, err = run(RESULT_COMMANDS[command](str(path), str(good), str(tmp_path / "out")), capsys)
    check_contract(name, path, code, out, err, command)
    assert "html: plots of " not in err, f"{name}: a plotter failed\n{err[-2000:]}"
    assert (code == 2) == (name in hostile.REFUSED), f"{name}: exit {code}\n{err[-2000:]}"
    if code == 2:
        assert str(path) in err
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
    if name not in hostile.BENIGN | hostile.RENAMED.keys() | hostile.SAMPLES_ONLY:
        assert f"warning: {path}" in err
    if name in hostile.REFUSED:
        assert f"warning: {path}" in err and "; skipped" in err
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
    assert (code == 2) == (name in hostile.TRACE_REFUSED), f"{name}: exit {code}\n{err[-2000:]}"
    if name in hostile.TRACE_LEFT_OUT:
        assert code == 0 and f"warning: {path}: left out 1 event(s)" in err


@pytest.mark.parametrize("command", ["plot", "html", "history", "hardware"])
def test_an_output_folder_that_is_a_file_is_one_line_before_any_work(command, tmp_path, capsys):
    blocker = tmp_path / "out"
    blocker.write_text("a file")
    code, out, err = run([command, str(hostile.good_run(tmp_path)), "-o", str(blocker)], capsys)
    assert out == ""
    assert code == 2 and err.strip().splitlines() == [f"error: {blocker}: is a file; the output needs a directory"]
    assert blocker.read_text() == "a file"


@pytest.mark.parametrize("command", ["plot", "html", "history", "hardware"])
def test_an_output_folder_that_is_a_symlink_loop_is_one_line_before_any_work(command, tmp_path, capsys):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    code, out, err = run([command, str(hostile.good_run(tmp_path)), "-o", str(tmp_path / "a")], capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: {tmp_path / 'a'}: is a symlink that leads nowhere (a loop, or a "
                                        "missing target); the output needs a directory"]


@pytest.mark.parametrize("name", sorted(hostile.RENAMED))
def test_a_key_named_like_a_report_column_is_loaded_beside_it_never_in_it(name, tmp_path):
    path = hostile.RESULTS[name](tmp_path)
    frame = load([path])
    column, renamed = hostile.RENAMED[name]
    holders = frame[frame[renamed].notna()]
    assert len(holders) >= 1, f"{renamed} missing"
    own = holders[column] if column in holders else pd.Series(None, index=holders.index)
    if column == "device":
        assert own.str.startswith("AMD EPYC").all()
    elif column == "file":
        assert (own == str(path)).all()
    elif column == "tflops":
        assert pd.api.types.is_float_dtype(frame["tflops"]) and own.notna().all()
    elif name == "param_named_median_s":
        assert (own == hostile.small_run()["benchmarks"][0]["stats"]["median"]).all()
    else:  # incomplete_reason, stop_reason, throttled; the OOM case's median
        assert own.isna().all(), own


def test_an_oom_case_carrying_a_median_is_failing_now_not_timed(tmp_path, capsys):
    path = hostile.RESULTS["oom_case_carrying_median_s"](tmp_path)
    good = hostile.good_run(tmp_path)
    case = hostile.small_run()["benchmarks"][0]["extra_info"]["case"]
    result = compare(load([good]), load([path]))
    assert case not in [v.case for v in result.verdicts]
    assert any(line.startswith(f"{case} (now oom") for line in result.broken)


def test_a_param_named_incomplete_reason_or_stop_reason_changes_no_verdict(tmp_path):
    good = hostile.good_run(tmp_path)
    for name in ("param_named_incomplete_reason", "param_named_stop_reason"):
        folder = tmp_path / name
        folder.mkdir()
        result = compare(load([good]), load([hostile.RESULTS[name](folder)]))
        assert result.incomplete is None and len(result.verdicts) == 4, name


def test_throttled_written_as_text_is_not_throttled(tmp_path, capsys):
    path = hostile.RESULTS["throttled_text"](tmp_path)
    frame = load([path])
    assert "throttled" not in frame or frame["throttled"].isna().all()
    assert "sm_clock_mhz" not in frame or frame["sm_clock_mhz"].isna().all()
    result = compare(load([hostile.good_run(tmp_path)]), frame)
    assert not any("throttled" in v.note for v in result.verdicts)
    assert "extra_info.telemetry.throttled='no'" in capsys.readouterr().err


def test_lone_surrogates_are_shown_with_the_replacement_character(tmp_path, capsys):
    path = hostile.RESULTS["lone_surrogates"](tmp_path)
    assert main(["history", str(path), "--all"]) == 0
    captured = capsys.readouterr()
    assert "matmul/\ufffd/matmul/square" in captured.out and "AMD \ufffd EPYC" in captured.out
    assert f"warning: {path}: 4 lone UTF-16 surrogate(s) in its text, shown as U+FFFD" in captured.err
    assert load([path]).iloc[0]["lay\ufffder"] == "sq\ufffduare"  # a param's name and value


def test_a_trace_read_as_a_json_reader_would_or_refused(tmp_path, capsys):
    """Two traceEvents were both counted (a JSON reader keeps the last); device `true` took device 1's events (as
    a key, True is 1); a deviceProperties object was dropped without a word."""
    twice = hostile.TRACES["trace_events_twice"](tmp_path)
    assert run(["trace", str(twice)], capsys)[2] == (f"error: {twice}: traceEvents appears twice; which one holds "
                                                     "the events is not knowable\n")
    path = hostile.TRACES["trace_device_true_and_1"](tmp_path)
    code, out, _ = run(["trace", str(path), "--json"], capsys)
    devices = {d["device"]: d["event_count"] for d in json.loads(out)["devices"]}
    assert code == 0 and devices == {0: 2, "true": 1, 1: 1}
    path = hostile.TRACES["trace_device_properties_object"](tmp_path)
    code, _, err = run(["trace", str(path)], capsys)
    assert code == 0 and f"warning: {path}: deviceProperties is not a list but " in err


def test_an_event_without_a_usable_time_is_left_out_and_the_rest_summarized(tmp_path, capsys):
    for name in ("trace_ts_missing", "trace_dur_null", "trace_ts_text"):
        path = hostile.TRACES[name](tmp_path)
        code, out, _ = run(["trace", str(path), "--json"], capsys)
        assert code == 0 and json.loads(out)["devices"][0]["event_count"] == 2, name
    path = hostile.TRACES["trace_copy_bytes_text"](tmp_path)
    code, out, _ = run(["trace", str(path), "--json"], capsys)
    assert code == 0 and json.loads(out)["host"]["copies_without_bytes"] == 1


def test_a_device_written_as_text_and_as_a_number_is_one_device(tmp_path, capsys):
    path = hostile.TRACES["trace_device_text_and_number"](tmp_path)
    code, out, _ = run(["trace", str(path), "--json"], capsys)
    assert code == 0 and [d["device"] for d in json.loads(out)["devices"]] == [0]


def _output_naming_an_input(kind: str, run: Path, folder: Path) -> Path:
    """An output path that names the input `run` (or the folder holding it): as given, by a symlink, by another
    spelling of the path, or as a results file a named folder holds."""
    if kind == "symlink":
        (folder / "link.csv").symlink_to(run)
        return folder / "link.csv"
    if kind == "other_spelling":
        return run.parent / ".." / run.parent.name / run.name
    return run


# Each command with an output option, the output naming one of its inputs: (argv, the input the output names).
OVERWRITES = {
    "compare_json_baseline": lambda run, good, out: ["compare", run, good, "--json", out],
    "compare_json_candidate": lambda run, good, out: ["compare", good, run, "--json", out],
    "export": lambda run, good, out: ["export", run, "-o", out],
}
FOLDER_OUTPUTS = ("plot", "history", "hardware", "html")


@pytest.mark.parametrize("kind", ["same_path", "symlink", "other_spelling"])
@pytest.mark.parametrize("command", sorted(OVERWRITES))
def test_an_output_naming_an_input_is_refused_before_any_work(command, kind, tmp_path, capsys):
    run_path = hostile.good_run(tmp_path)
    good = shutil.copy(run_path, tmp_path / "other.json")
    before = run_path.read_bytes()
    out = _output_naming_an_input(kind, run_path, tmp_path)
    code, stdout, err = run([str(a) for a in OVERWRITES[command](run_path, good, out)], capsys)
    assert code == 2 and stdout == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("error: ") and f" {out}: is the input " in line and "refusing to overwrite an input" in line
    assert run_path.read_bytes() == before


def test_an_output_that_is_a_file_inside_an_input_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    inside = hostile.good_run(folder)
    before = inside.read_bytes()
    code, stdout, err = run(["compare", str(folder), str(hostile.RUN_A), "--json", str(inside)], capsys)
    assert code == 2 and stdout == "" and "refusing to overwrite an input" in err
    assert inside.read_bytes() == before


@pytest.mark.parametrize("command", FOLDER_OUTPUTS)
def test_an_output_folder_that_is_an_input_folder_is_refused(command, tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    hostile.good_run(folder)
    code, stdout, err = run([command, str(folder), "-o", str(folder)], capsys)
    assert code == 2 and stdout == "" and "refusing to overwrite an input" in err
    assert [p.name for p in folder.iterdir()] == ["good.json"]


def test_an_html_page_over_its_input_is_refused(tmp_path, capsys):
    """`html` writes OUT/index.html: an input of that name is an input the page would replace."""
    out = tmp_path / "report"
    out.mkdir()
    page = shutil.copy(hostile.good_run(tmp_path), out / "index.html")
    code, _, err = run(["html", str(page), "-o", str(out)], capsys)
    assert code == 2 and f"error: -o {page}: is the input {page}" in err
    assert json.loads(page.read_text())["benchmarks"]
