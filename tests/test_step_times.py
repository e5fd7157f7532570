"""The GPU check's learned step times: kept per device identity, used by the next plan, shown by --plan, and a
file that cannot be used is a warning, never a crash.

The identity is the one the real CPU run of the check in tests/data/gpu_check_cpu recorded in its results
(`machine_info.identity`). A check run on this CPU, whose times plan the next check, is tests/test_gpu_check.py's
budgeted run: one run of the check serves both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suites.core.children import Finished
from suites.gpu_check import command
from suites.gpu_check.command import StepRun, learn, plan
from suites.gpu_check.step_times import KEEP_RUNS, StepTimes, file_for, plan_key
from suites.gpu_check.steps import PROFILE, STEPS
from tests.runs import call_in_process

DATA = Path(__file__).resolve().parent / "data" / "gpu_check_cpu"
STEP = {step.name: step for step in STEPS}


def recorded_identity() -> dict:
    """The identity a real run of the check recorded in its results (the matmul step's machine_info)."""
    return json.loads((DATA / "matmul.json").read_text())["machine_info"]["identity"]


def key(name: str, device: str = "cpu") -> str:
    return plan_key(STEP[name].plans[device], PROFILE[device])


def test_times_kept_for_an_identity_come_back_for_it_and_only_for_it(tmp_path):
    identity = recorded_identity()
    times, warning = StepTimes.load(tmp_path, identity)
    assert warning is None and times.steps == {}
    times.record("preflight", key("preflight"), 12.04, "exit 0")
    times.record("matmul", key("matmul"), 41.5, "exit 1")
    path = times.save()
    assert path == file_for(tmp_path, identity) and path.name.startswith("AMD-EPYC-2-threads-")
    again, warning = StepTimes.load(tmp_path, identity)
    assert warning is None and again.steps == times.steps
    planned = {p.step.name: p for p in plan("cpu", 900, None, again)}
    assert planned["preflight"].seconds == 12.04 and planned["preflight"].measured.runs == 1
    assert planned["matmul"].seconds == 41.5
    assert planned["timing"].measured is None
    assert planned["timing"].seconds == STEP["timing"].plans["cpu"].estimate.seconds
    other, _ = StepTimes.load(tmp_path, identity | {"torch": "2.6.0+cpu"})  # another torch: another file
    assert other.steps == {} and other.path != path


def test_the_plan_uses_the_longest_of_the_last_runs_and_forgets_another_selections():
    times = StepTimes(recorded_identity(), Path("unused.json"))
    for seconds in (10.0, 30.0, 20.0, 15.0):
        times.record("matmul", key("matmul"), seconds, "exit 0")
    measured = times.measured("matmul", key("matmul"))
    assert (measured.seconds, measured.runs) == (30.0, KEEP_RUNS)  # 10 s fell out; the longest of 30, 20, 15
    assert times.measured("matmul", key("matmul", "cuda")) is None  # another selection is not this step
    times.record("matmul", "another-plan", 5.0, "exit 0")
    assert times.measured("matmul", key("matmul")) is None and len(times.steps["matmul"].runs) == 1


def test_a_measured_time_moves_the_schedule():
    times = StepTimes(recorded_identity(), Path("unused.json"))
    times.record("matmul", key("matmul"), 300.0, "exit 0")
    planned = {p.step.name: p for p in plan("cpu", 200, None, times)}
    assert planned["matmul"].skipped.startswith("over budget: needs about 300 s")
    assert planned["attention"].skipped is None  # the steps after it start as if it did not run


@pytest.mark.parametrize("content", ["{", "[1, 2]", '{"format": 99}', '{"format": 1, "identity": {"machine": "x"}}',
                                     '{"format": 1, "identity": IDENTITY, "steps": {"matmul": {"runs": 3}}}'])
def test_a_file_that_cannot_be_used_is_one_warning_and_no_times(tmp_path, content, capsys):
    identity = recorded_identity()
    path = file_for(tmp_path, identity)
    path.write_text(content.replace("IDENTITY", json.dumps(identity)))
    times, warning = StepTimes.load(tmp_path, identity)
    assert times.steps == {} and len(warning.splitlines()) == 1 and warning.startswith(str(path))
    times.record("preflight", key("preflight"), 9.0, "exit 0")
    times.save()  # the next run writes it anew
    assert StepTimes.load(tmp_path, identity)[0].measured("preflight", key("preflight")).seconds == 9.0


def test_plan_with_an_unusable_file_warns_in_one_line_and_still_plans(tmp_path):
    directory = tmp_path / "times"
    gpu_check_identity = command.identity("cpu")
    file_for(directory, gpu_check_identity).parent.mkdir(parents=True)
    file_for(directory, gpu_check_identity).mkdir()  # a directory where the file should be: OSError on read
    proc = call_in_process(command.main, "--plan", "--device", "cpu", "--times-cache", str(directory))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("warning: ")
    assert "steps scheduled on cpu" in proc.stdout and "Traceback" not in proc.stderr


def _run(times: StepTimes, finished: Finished) -> None:
    step = STEP["preflight"]
    run = StepRun(step, step.plans["cpu"], Path("."), "cpu", 60.0, lambda *_: None, 30.0, 10.0)
    learn(times, run, finished)


def test_a_step_stopped_at_its_limit_is_not_learned_and_an_unwritable_cache_only_warns(tmp_path, capsys):
    times = StepTimes(recorded_identity(), tmp_path / "times.json")
    _run(times, Finished(None, "", 60.0))
    assert times.steps == {} and not times.path.exists()
    _run(times, Finished(0, "", 11.0))
    assert times.measured("preflight", key("preflight")).seconds == 11.0 and times.path.exists()
    blocked = StepTimes(recorded_identity(), tmp_path / "times.json" / "inside.json")  # its folder is a file
    _run(blocked, Finished(0, "", 11.0))
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("warning: step times not kept")
