"""`python -m suites advise` as a command: what it says while it works, what it refuses, and that its pytest child
never outlives it; and the recommendation's refusal of a setting whose loss is not finite."""

import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from suites.core import children
from suites.training import advise, advise_rules, advise_sweep
from tests.runs import start_python

DICT_MODEL = ["tests.user_models:dict_model", "--batch", "tests.user_models:dict_batch", "--device", "cpu"]


def test_a_setting_whose_loss_is_not_finite_is_never_recommended(advise_rows):
    """The fused case made 10x faster, but its loss went NaN (which a results file holds as a missing loss)."""
    fused = next(r for r in advise_rows if r.lever == "optimizer")
    for loss in (float("nan"), None, float("inf")):
        diverged = [dataclasses.replace(r, median_s=r.median_s / 10, q1_s=r.q1_s / 10, q3_s=r.q3_s / 10,
                                        loss_after_n=loss) if r is fused else r for r in advise_rows]
        advise_rules.add_parity(diverged)
        best = advise_rules.recommend(diverged, budget=None)
        assert best is not None and best.lever != "optimizer"
        base = next(r for r in diverged if r.lever == "baseline")
        hit = next(r for r in diverged if r.lever == "optimizer")
        assert advise_rules.verdict(hit, base, None).startswith("no finite loss")


def test_when_fp32s_own_loss_is_not_finite_nothing_is_recommended(advise_rows):
    broken = [dataclasses.replace(r, loss_after_n=float("nan")) if r.label == "fp32" else r for r in advise_rows]
    advise_rules.add_parity(broken)
    measured = [r for r in broken if r.measured and r.label != "fp32"]
    assert measured and all(advise_rules.rejection(r, None) for r in measured)
    assert advise_rules.recommend(broken, budget=None) is None


@pytest.mark.parametrize(("args", "message"), [
    (["--out", "{file}"], "is a file; the sweep needs a directory"),
    (["--name", "../elsewhere"], "--name '../elsewhere': use letters"),
])
def test_unusable_out_and_name_are_one_line_usage_errors(args, message, tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("a user's file")
    argv = [*DICT_MODEL, *[a.replace("{file}", str(target)) for a in args]]
    if "--out" not in args:
        argv += ["--out", str(tmp_path / "out")]
    assert advise.main(argv) == advise.USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert target.read_text() == "a user's file" and not (tmp_path / "out").exists()


def test_a_slow_factory_is_told_while_it_runs(capsys, monkeypatch, tmp_path):
    """A factory that takes a second: advise says it is still at it, then names what the factory returned."""
    monkeypatch.setattr(advise_sweep, "PROGRESS_S", 0.2)
    argv = ["tests.user_models:slow_not_a_model", "--batch", "tests.user_models:dict_batch", "--device", "cpu",
            "--out", str(tmp_path / "out")]
    assert advise.main(argv) == advise.USAGE
    captured = capsys.readouterr()
    beats = [line for line in captured.out.splitlines() if "still building and checking the model" in line]
    assert len(beats) >= 2, captured.out
    assert "the model factory returned a str" in captured.err


def test_the_progress_count_reads_a_running_sweeps_journal(tmp_path):
    results = tmp_path / "sweep.json"
    assert advise_sweep.finished_cases(results) is None
    journal = tmp_path / "sweep.json.journal"
    journal.write_text('{"journal": 1, "machine_info": {}}\n{"benchmarks": {"name": "a"}}\n'
                       '{"not_measured": {"name": "b"}}\n')
    assert advise_sweep.finished_cases(results) == 2


PARENT = '''
import signal, sys, time
from suites.core import children
signal.signal(signal.SIGHUP, signal.SIG_DFL if len(sys.argv) < 2 else signal.SIG_IGN)  # as under nohup, or not
proc = children.start([sys.executable, "-c", "import time; time.sleep(120)"])
print(proc.pid, flush=True)
with children.stop_with_parent(proc):
    time.sleep(120)
'''


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as fh:  # a zombie (ended, not yet reaped by its dead parent's reaper)
            if fh.read().split(") ")[1].startswith("Z"):
                return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's prctl")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_child_never_outlives_its_parent(sig):
    parent = start_python("-c", PARENT, output="stdout")
    child = int(parent.stdout.readline())
    time.sleep(0.3)  # the handlers are installed right after the pid is printed
    parent.send_signal(sig)
    assert parent.wait(timeout=30) == -sig
    assert _gone(child, within_s=children.GRACE_S), f"child {child} outlived its parent ({sig.name})"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the child's pid from /proc")
def test_stopping_advise_stops_its_pytest_child(tmp_path):
    proc = start_python("-m", "suites", "advise", *DICT_MODEL, "--out", str(tmp_path))
    deadline, child = time.monotonic() + 120, None
    while child is None and time.monotonic() < deadline:
        pids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        child = int(pids[0]) if pids else None
        time.sleep(0.1)
    assert child is not None, "advise never started its pytest run"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert _gone(child, within_s=5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGHUP is a POSIX signal")
def test_a_parent_that_ignores_sighup_keeps_itself_and_its_child():
    """Under nohup (SIGHUP ignored, by the child too) a SIGHUP stops neither: the parent was left running without
    the child it had stopped."""
    parent = start_python("-c", PARENT, "nohup", output="stdout")
    child = int(parent.stdout.readline())
    time.sleep(0.3)
    parent.send_signal(signal.SIGHUP)
    assert not _gone(child, within_s=1.0) and parent.poll() is None
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == -signal.SIGTERM
    assert _gone(child, within_s=children.GRACE_S)
