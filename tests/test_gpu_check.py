"""The GPU check's scheduler (budget, --only, device), and a real budgeted run of it on this CPU."""

from __future__ import annotations

import json
import time

import pytest

from suites.checks.gpu_check import (
    READ_MARGIN_S,
    STEP_NAMES,
    STEPS,
    TERM_GRACE_S,
    CheckStep,
    StepPlan,
    main,
    skip_reason,
    step_timeout,
)
from tests.runs import call_in_process, start_python

GPU_ONLY = CheckStep("gpu_only", {"cuda": StepPlan(10)})
BOTH = CheckStep("both", {"cuda": StepPlan(100), "cpu": StepPlan(30)})


def test_a_step_that_would_overrun_the_budget_is_skipped_with_its_reason():
    room = READ_MARGIN_S + TERM_GRACE_S
    assert skip_reason(BOTH, "cpu", 30 + room, None) is None
    assert skip_reason(BOTH, "cpu", 29 + room, None) == "over budget: needs about 30 s, 29 s usable left"
    assert skip_reason(BOTH, "cuda", 60 + room, None).startswith("over budget: needs about 100 s")


def test_gpu_only_steps_and_steps_left_out_by_only_say_why():
    assert skip_reason(GPU_ONLY, "cpu", 1e6, None) == "needs a cuda device; this run measures cpu"
    assert skip_reason(BOTH, "cpu", 1e6, {"gpu_only"}) == "not in --only"


def test_a_step_never_runs_past_what_the_budget_has_left():
    plan = StepPlan(100)
    assert step_timeout(plan, 1e6) == 230  # its own limit: twice the estimate and half a minute
    assert step_timeout(plan, 150) == 150 - READ_MARGIN_S - TERM_GRACE_S


def test_every_step_has_a_plan_for_cuda_and_the_order_starts_with_what_checks_the_measurement():
    assert all("cuda" in step.plans for step in STEPS)
    assert STEP_NAMES[:3] == ("preflight", "timing", "matmul")
    assert len(set(STEP_NAMES)) == len(STEP_NAMES)


def test_an_unknown_only_name_is_a_one_line_usage_error(tmp_path):
    proc = call_in_process(main, "--only", "matmul,nonsense", "--out", str(tmp_path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: --only: unknown step nonsense")


@pytest.mark.slow
def test_a_budgeted_cpu_run_streams_its_rows_skips_with_reasons_and_reads_nothing_stale(tmp_path):
    stale = {"benchmarks": [{"params": {"dtype": "stale"},
                             "extra_info": {"status": "ok", "tflops": 1e9, "case": "stale/case"}}]}
    for name in ("matmul.json", "numerics.json", "train_step.json", "conv.json"):
        (tmp_path / name).write_text(json.dumps(stale))
    (tmp_path / "rows.jsonl").write_text('{"check": "stale"}\n')
    start = time.perf_counter()
    proc = start_python("-m", "suites.gpu_check", "--device", "cpu", "--budget-s", "90", "--out", str(tmp_path))
    arrivals = [(time.perf_counter() - start, line) for line in proc.stdout]
    proc.wait()
    total = time.perf_counter() - start
    assert total < 100
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert {row["step"] for row in rows} == set(STEP_NAMES)  # every step has a row: run, or skipped and why
    skipped = {row["step"]: row["value"] for row in rows if row["figure"] == "skipped"}
    assert skipped["trace"] == "needs a cuda device; this run measures cpu"
    assert all(reason.startswith(("needs a cuda device", "over budget")) for reason in skipped.values())
    assert "stale" not in (tmp_path / "rows.jsonl").read_text()
    assert "stale" not in (tmp_path / "matmul.json").read_text()  # rewritten by this run
    printed = [t for t, line in arrivals if line.startswith("[")]
    assert len(printed) == len(rows)
    assert printed[0] < printed[-1] - 5  # the first rows were printed while later steps still ran
    assert all(row["t_s"] <= 90 for row in rows)
