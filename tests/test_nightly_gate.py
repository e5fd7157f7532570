"""The nightly workflow's own shell around compare's three answers, on real busy runs (tests/data/busy_gate): a
gate that could not judge (exit 3) reads "re-run" in the job summary, fails the job as a re-run and not as a
regression, and the run does not join the good runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.histories import Nights, real_runs, steady_case
from tests.resultfiles import DATA
from tests.runs import run_command
from tests.test_results_durability import _workflow_step

BUSY = DATA / "busy_gate"


def _bash(script: str, cwd, env) -> tuple[int, str]:
    done = run_command(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def runner(tmp_path, monkeypatch):
    """A workspace and the runner's environment: its venv is this one, its good runs hold one baseline run."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'. "{sys.prefix}/bin/activate"\n')
    work = tmp_path / "workspace"
    (work / "results").mkdir(parents=True)
    good = tmp_path / "history" / "good" / "vm"
    good.mkdir(parents=True)
    (tmp_path / "history" / "runs").mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BENCH_VENV": str(venv), "BENCH_HISTORY":
           str(tmp_path / "history"), "GITHUB_SHA": "0123456789abcdef", "GITHUB_OUTPUT": str(tmp_path / "outputs"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GOOD": str(good), "BENCH_RC": "0",
           "PYTHONPATH": str(DATA.parents[1])}
    return work, good, env


def _night(runner, baseline: str, candidate: str) -> tuple[str, int, str, list[str]]:
    """The compare, summary and verdict steps of one night: compare's exit, the summary, the verdict's exit and
    log, and the good runs after it."""
    work, good, env = runner
    shutil.copy(BUSY / baseline, good / "20261201_000000_aaaaaaaaaa.json")
    shutil.copy(BUSY / candidate, work / "results" / "nightly.json")
    env = {**env, "RESULT": "results/nightly.json"}
    _, compare = _workflow_step("Compare with the last good runs of this machine")
    code, log = _bash(compare, work, env)
    assert code == 0, log  # the step records compare's exit and goes on
    outputs = dict(line.split("=", 1) for line in Path(env["GITHUB_OUTPUT"]).read_text().splitlines())
    env["COMPARE_RC"] = outputs["rc"]
    condition, report = _workflow_step("History and report")
    assert condition.startswith("always()")
    code, log = _bash(report, work, env)
    assert code == 0, log
    _, verdict = _workflow_step("Verdict")
    code, log = _bash(verdict, work, env)
    return outputs["rc"], Path(env["GITHUB_STEP_SUMMARY"]).read_text(), f"exit {code}: {log}", sorted(
        p.name for p in good.iterdir())


@pytest.mark.slow
def test_a_night_the_gate_could_not_judge_is_a_re_run_and_never_joins_the_good_runs(runner):
    """The issue's example as the nightly sees it: a 1.5x change measured while the host was busy (3 rounds)."""
    rc, summary, verdict, good = _night(runner, "nice0_base_rounds3.json", "nice0_cand_1.5x_rounds3.json")
    assert rc == "3"
    assert summary.startswith("**Gate: RE-RUN: the gate could not judge every change")
    assert "NOT JUDGED" in summary and "this run does not join the good runs" in summary
    assert verdict.startswith("exit 1") and "::error::re-run: the gate could not judge every change" in verdict
    assert "regression" not in verdict.split("::error::re-run")[0]
    assert good == ["20261201_000000_aaaaaaaaaa.json"]


@pytest.mark.slow
def test_a_night_with_a_regression_fails_as_one(runner):
    """The same runs with their timer set to cuda_event (derived): host contention does not shield the change."""
    rc, summary, verdict, good = _night(runner, "nice0_base_rounds3.DERIVED_cuda_event.json",
                                        "nice0_cand_1.5x_rounds3.DERIVED_cuda_event.json")
    assert rc == "1" and summary.startswith("**Gate: FAILED")
    assert verdict.startswith("exit 1") and "::error::the gate failed" in verdict and "re-run" not in verdict
    assert good == ["20261201_000000_aaaaaaaaaa.json"]


@pytest.mark.slow
def test_a_night_that_passes_joins_the_good_runs(runner):
    rc, summary, verdict, good = _night(runner, "nice-19_base_rounds3.json", "nice-19_base_rounds3.json")
    assert rc == "0" and summary.startswith("**Gate: passed**")
    assert verdict.startswith("exit 0") and "joins the good runs" in verdict
    assert len(good) == 2 and good[1].endswith("_0123456789.json")


@pytest.mark.slow
def test_the_history_page_is_built_from_the_runners_history_and_linked_in_the_summary(runner):
    """The page step over a runner's history of seven nights made from the real quick runs (tests/histories.py),
    their matmul cases (tests/test_history_page.py draws every suite), one case 1.25x slower from the fifth: built
    with the good runs once there are some, without them before; the summary step links the uploaded page. (The
    upload and Pages steps are GitHub's actions: their conditions are read here, not run.)"""
    work, good, env = runner
    history = Path(env["BENCH_HISTORY"])
    step = steady_case(real_runs(), "matmul")
    nights = Nights(real_runs(), 7, steps={step: (4, 1.25)}, groups=frozenset({"matmul"})).write(history / "runs")
    condition, script = _workflow_step("History page")
    assert condition == "always() && steps.bench.outputs.result != ''"
    shutil.rmtree(history / "good")  # the first nights of a runner: no good run kept yet
    code, log = _bash(script, work, env)
    page = work / "results" / "history-page" / "index.html"
    assert code == 0, log
    assert "no good runs given (--good)" in page.read_text()
    good.mkdir(parents=True)
    for path in nights[:4]:  # the workflow's copies: another name, the same run
        shutil.copy(path, good / f"20261201_00000{path.stem}.json")
    code, log = _bash(script, work, env)
    assert code == 0, log
    top = page.read_text().split("History per suite")[0]
    assert "against the last 5 good runs of this machine before it (4 runs)" in top
    assert step in top.split("Open steps")[1] or step in top.split("Moved in the newest run")[1]
    condition, link = _workflow_step("Link the history page in the job summary")
    assert condition == "always() && steps.page.outcome == 'success'"
    url = "https://github.com/owner/repo/actions/runs/1/artifacts/2"
    code, log = _bash(link, work, {**env, "PAGE_URL": url, "PAGES": "true"})
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert code == 0 and f"[The history page]({url})" in summary and "GitHub Pages" in summary
    workflow = (DATA.parents[1] / ".github" / "workflows" / "nightly.yml").read_text()
    pages = workflow.split("\n  pages:\n", 1)[1]
    assert "vars.BENCH_PAGES == 'true'" in pages and "actions/deploy-pages@" in pages
    assert "page: ${{ steps.page.outcome == 'success' }}" in workflow
