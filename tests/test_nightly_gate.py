"""The nightly workflow's own shell around compare's three answers, on real busy runs (tests/data/busy_gate): a
gate that could not judge (exit 3) reads "re-run" in the job summary and fails the job as a re-run and not as a
regression; a regression fails it; a new machine's first night is not judged until its run is accepted, with the
workflow's own accept job; tonight's entry, already in the history, is never its own baseline."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from reports.format.document import read_json
from tests.histories import Nights, real_runs, steady_case
from tests.resultfiles import DATA, dated, read, write
from tests.runs import run_command
from tests.test_results_durability import _workflow_step

BUSY = DATA / "busy_gate"
COMPARE = "Judge tonight as the newest night of this machine's history"


def _bash(script: str, cwd, env) -> tuple[int, str]:
    done = run_command(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def runner(tmp_path):
    """A workspace and the runner's environment: its venv is this one, its history an empty runs/ folder."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'. "{sys.prefix}/bin/activate"\n')
    work = tmp_path / "workspace"
    (work / "results").mkdir(parents=True)
    runs = tmp_path / "history" / "runs"
    runs.mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BENCH_VENV": str(venv), "BENCH_HISTORY":
           str(tmp_path / "history"), "GITHUB_SHA": "0123456789abcdef", "GITHUB_OUTPUT": str(tmp_path / "outputs"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "BENCH_RC": "0",
           "PYTHONPATH": str(DATA.parents[1])}
    return work, runs, env


def _night(runner, history: list[Path], candidate: Path) -> tuple[str, str, str]:
    """The compare, summary and verdict steps of one night, the history holding `history` and tonight's entry (as
    the workflow keeps it before judging): compare's exit, the summary, the verdict's exit and log."""
    work, runs, env = runner
    for path in history:
        shutil.copy(path, runs / path.name)
    shutil.copy(candidate, work / "results" / "nightly.json")
    shutil.copy(candidate, runs / "20261202_031700_0123456789.json")  # the "Keep as history entry" step's copy
    env = {**env, "RESULT": "results/nightly.json"}
    Path(env["GITHUB_OUTPUT"]).write_text("")
    Path(env["GITHUB_STEP_SUMMARY"]).write_text("")
    _, compare = _workflow_step(COMPARE)
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
    return outputs["rc"], Path(env["GITHUB_STEP_SUMMARY"]).read_text(), f"exit {code}: {log}"


def restamped(source: Path, folder: Path, day: int) -> Path:
    """A real run as an earlier night of the history: its own date and commit, its figures as they were."""
    return write(dated(read(source), f"2026-11-{day:02d}T03:17:00+00:00", f"{day:08x}".ljust(40, "0")),
                 folder / f"202611{day:02d}_031700_{day:010d}.json")


@pytest.mark.slow
def test_a_night_the_gate_could_not_judge_is_a_re_run(runner, tmp_path):
    """The issue's example as the nightly sees it: a 1.5x change measured while the host was busy (3 rounds)."""
    base = restamped(BUSY / "nice0_base_rounds3.json", tmp_path, 1)
    rc, summary, verdict = _night(runner, [base], BUSY / "nice0_cand_1.5x_rounds3.json")
    assert rc == "3"
    assert summary.startswith("**Gate: RE-RUN: the gate could not judge every change")
    assert "NOT JUDGED" in summary
    assert verdict.startswith("exit 1") and "::error::re-run: the gate could not judge every change" in verdict
    assert "regression" not in verdict.split("::error::re-run")[0]


@pytest.mark.slow
def test_a_night_with_a_regression_fails_as_one(runner, tmp_path):
    """The same runs with their timer set to cuda_event (derived): host contention does not shield the change."""
    base = restamped(BUSY / "nice0_base_rounds3.DERIVED_cuda_event.json", tmp_path, 1)
    rc, summary, verdict = _night(runner, [base], BUSY / "nice0_cand_1.5x_rounds3.DERIVED_cuda_event.json")
    assert rc == "1" and summary.startswith("**Gate: FAILED")
    assert verdict.startswith("exit 1") and "::error::the gate failed" in verdict and "re-run" not in verdict
    assert "accept it" in verdict


@pytest.mark.slow
def test_a_night_that_passes_is_judged_against_earlier_nights_not_its_own_entry(runner, tmp_path):
    """Tonight's entry is in the history already: compare leaves it out by its identity, and the earlier night
    (the same real figures, another date and commit) is the baseline."""
    base = restamped(BUSY / "nice-19_base_rounds3.json", tmp_path, 1)
    rc, summary, verdict = _night(runner, [base], BUSY / "nice-19_base_rounds3.json")
    assert rc == "0" and summary.startswith("**Gate: passed**")
    assert "holding the candidate's own run" in summary  # the warning names the copy left out
    assert verdict.startswith("exit 0") and "the gate passed" in verdict


@pytest.mark.slow
def test_a_new_machines_first_night_is_not_judged_until_the_accept_job_takes_it(runner):
    """The first night of a history: nothing to judge it against. The gate says so (exit 3, not a pass), and the
    workflow's accept job (run by hand with `accept: newest`) records why its level is the reference; the same
    night then passes, and the acceptance is kept beside the history."""
    work, runs, env = runner
    tonight = BUSY / "nice-19_base_rounds3.json"
    rc, summary, _ = _night(runner, [], tonight)
    assert rc == "3" and "NEW MACHINE" in summary and "python -m reports accept" in summary
    _, script = _workflow_step("Accept a night's level")
    code, log = _bash(script, work, {**env, "ENTRY": "newest", "REASON": "the new H200 runner", "CASES": ""})
    assert code == 0, log
    assert "accepted 20261202_031700_0123456789.json" in log and "the new H200 runner" in log
    assert read_json(Path(tonight))["machine_info"]["identity"]["machine"] in (runs / "accepted.jsonl").read_text()
    rc, summary, _ = _night(runner, [], tonight)
    assert rc == "0" and "this run was accepted as a reference: the new H200 runner" in summary


@pytest.mark.slow
def test_the_history_page_is_built_from_the_runners_history_and_linked_in_the_summary(runner):
    """The page step over a runner's history of seven nights made from the real quick runs (tests/histories.py),
    their matmul cases (tests/test_history_page.py draws every suite), one case 1.25x slower from the fifth: the
    newest night judged as the gate judges it; the summary step links the uploaded page. (The upload and Pages
    steps are GitHub's actions: their conditions are read here, not run.)"""
    work, runs, env = runner
    step = steady_case(real_runs(), "matmul")
    Nights(real_runs(), 7, steps={step: (4, 1.25)}, groups=frozenset({"matmul"})).write(runs)
    condition, script = _workflow_step("History page")
    assert condition == "always() && steps.bench.outputs.result != ''"
    code, log = _bash(script, work, env)
    page = work / "results" / "history-page" / "index.html"
    assert code == 0, log
    top = page.read_text().split("History per suite")[0]
    assert "judged as the nightly gate does, against the runs of this machine before it" in top
    assert step in top.split("Moved in the newest run")[1]
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
