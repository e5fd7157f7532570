"""The GPU check: its plan and budget, every step's selection collected by pytest, its readers on real results
(whole, journaled, truncated, with failed cases), its command line's errors, and its children ended with it.

The results under tests/data/gpu_check_cpu are a real CPU run of the check (see its README); CUDA results do
not exist yet, so the CUDA readers are exercised by the CPU plan's readers (the same functions) and the CUDA
selections are checked by collection only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import time
from functools import cache
from pathlib import Path

import pytest

from reports.format.readback import read_run
from suites.core import profiles
from suites.core.children import GRACE_S
from suites.core.precision import DTYPES
from suites.gpu_check import attention as attention_rows
from suites.gpu_check import batch_size as batch_rows
from suites.gpu_check import command
from suites.gpu_check import conv as conv_rows
from suites.gpu_check import train_step as train_rows
from suites.gpu_check.command import (
    DEFAULT_BUDGET_S,
    READ_MARGIN_S,
    SPARE_SHARE,
    UsageError,
    load_function,
    plan,
    reader_rows,
    skip_reason,
    step_timeout,
)
from suites.gpu_check.profiling import TRACE_DTYPES
from suites.gpu_check.rows import Row
from suites.gpu_check.steps import (
    COMPILE_GRAPH_S,
    COMPILER_START_S,
    FIRST_CONTACT,
    PROFILE,
    STEP_NAMES,
    STEPS,
    Cases,
    CheckStep,
    Estimate,
    StepPlan,
)
from tests.runs import call_in_process, run_python, start_python

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "gpu_check_cpu"
GPU_ONLY = CheckStep("gpu_only", "", {"cuda": StepPlan(Estimate(10, ""))})
BOTH = CheckStep("both", "", {"cuda": StepPlan(Estimate(100, "")), "cpu": StepPlan(Estimate(30, ""))})
PYTEST_PLANS = [(step.name, device) for step in STEPS for device, p in step.plans.items() if p.pytest_args]


@pytest.fixture(autouse=True)
def own_caches(tmp_path_factory, monkeypatch):
    """Each test's check keeps its step times (and peaks) in a cache of its own: what this user's earlier checks
    learned must not move a test's plan, and a test must not teach the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


# --- the plan and the budget ------------------------------------------------------------------------------------

def test_a_step_that_would_overrun_the_budget_is_skipped_with_its_reason():
    room = READ_MARGIN_S + GRACE_S
    assert skip_reason(BOTH, "cpu", 30 + room, None) is None
    assert skip_reason(BOTH, "cpu", 29 + room, None) == "over budget: needs about 30 s, 29 s usable left"
    assert skip_reason(BOTH, "cuda", 60 + room, None).startswith("over budget: needs about 100 s")


def test_gpu_only_steps_and_steps_left_out_by_only_say_why():
    assert skip_reason(GPU_ONLY, "cpu", 1e6, None) == "needs a cuda device; this run measures cpu"
    assert skip_reason(BOTH, "cpu", 1e6, {"gpu_only"}) == "not in --only"


def test_a_step_never_runs_past_what_the_budget_has_left():
    assert step_timeout(100, 1e6) == 230  # its own limit: twice what it is expected to take and half a minute
    assert step_timeout(100, 150) == 150 - READ_MARGIN_S - GRACE_S


def test_an_estimate_is_the_sum_of_what_it_rests_on():
    estimate = Estimate(6, "why", (Cases(1, 25, "fp32"), Cases(4, 9)), graphs=1, work_s=2)
    assert estimate.cases == 5
    assert estimate.seconds == 6 + 25 + 36 + 2 + COMPILE_GRAPH_S + COMPILER_START_S
    assert estimate.parts().startswith("6 s start + 1 case x 25 s (fp32) + 4 cases x 9 s + 1 compile x")
    assert all(p.estimate.rests_on for step in STEPS for p in step.plans.values())


def test_the_default_budget_schedules_every_step_on_cuda_with_at_least_15_percent_spare():
    planned = plan("cuda", DEFAULT_BUDGET_S, None)
    assert [p.step.name for p in planned if p.skipped] == []
    total = sum(p.seconds for p in planned)
    assert total == sum(step.plans["cuda"].estimate.seconds for step in STEPS if "cuda" in step.plans)
    assert total <= (1 - SPARE_SHARE) * DEFAULT_BUDGET_S and SPARE_SHARE >= 0.15


def test_the_conv_estimate_rests_on_cudnns_search_per_config_and_the_float64_reference():
    conv = next(step for step in STEPS if step.name == "conv").plans["cuda"].estimate
    assert "per config cuDNN's benchmark search of its fwd, dgrad and wgrad" in conv.rests_on
    assert "the float64 reference" in conv.rests_on
    assert conv.seconds >= 8 + 15 * 2.5  # the review's 2.5-4 s per case, not the matmul's 1.2
    fp32_eager = next(step for step in STEPS if step.name == "train_step").plans["cuda"].estimate.groups[0]
    assert fp32_eager.which == "fp32 eager" and 20 <= fp32_eager.seconds <= 30
    batch = next(step for step in STEPS if step.name == "batch_size").plans["cuda"].estimate.seconds
    assert 55 <= batch <= 85


def test_what_users_need_runs_first_and_fits_a_first_session_of_420_s():
    assert STEP_NAMES[:5] == ("preflight", "timing", "matmul", "attention", "train_step")
    assert STEP_NAMES[:len(FIRST_CONTACT)] == FIRST_CONTACT
    at_420 = {p.step.name: p.skipped for p in plan("cuda", 420, None)}
    assert all(at_420[name] is None for name in FIRST_CONTACT), at_420
    left_out = [name for name, why in at_420.items() if why]
    assert left_out == ["batch_size", "train_step_compiled", "achievable"]
    shown = call_in_process(command.main, "--plan", "--device", "cuda", "--budget-s", "420").stdout
    assert ("Left out for time: batch_size (74 s), train_step_compiled (189 s), achievable (55 s); --budget-s 830 "
            "schedules every step with 15% spare.") in shown


def test_plan_prints_the_schedule_for_both_devices_and_runs_nothing(tmp_path):
    out = tmp_path / "never"
    for device in ("cuda", "cpu"):
        proc = call_in_process(command.main, "--plan", "--device", device, "--budget-s", "420", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        for name in STEP_NAMES:
            assert name in proc.stdout
        scheduled = sum(p.skipped is None for p in plan(device, 420, None))
        assert f"{scheduled} of {len(STEPS)} steps scheduled on {device}" in proc.stdout
        assert "what it rests on" in proc.stdout and "reasoned" in proc.stdout
    assert not out.exists()
    default = call_in_process(command.main, "--plan", "--device", "cuda")
    assert f"{len(STEPS)} of {len(STEPS)} steps scheduled on cuda (full profile), about 700 s of a 900 s budget " \
           "(22 % spare)" in default.stdout
    assert "Left out" not in default.stdout


def test_the_docs_table_gives_each_steps_estimate():
    readme = (ROOT / "docs" / "gpu_check.md").read_text()
    for step in STEPS:
        row = next(line for line in readme.splitlines() if line.startswith(f"| {step.name} |"))
        assert f"| {step.plans['cuda'].estimate.seconds:.0f} s |" in row, row


# --- every selection, collected by pytest ------------------------------------------------------------------------

class Collected:
    """A pytest plugin that keeps the cases a collection selected."""

    def __init__(self) -> None:
        self.cases: list = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.cases = [item.callspec.params["case"] for item in session.items if hasattr(item, "callspec")]


@cache
def collect(step_name: str, device: str) -> tuple[int, tuple[dict, ...]]:
    """pytest's own collection of a plan's selection (on this CPU, with the profile the device runs: cases do not
    depend on the device), in this process; the exit code and each case as {case, params}. Without pytest's
    unraisable-exception plugin: a collection runs no test whose unraisable exceptions it could report, and at its
    end the plugin collects the garbage of this whole process (torch's objects and the test session's) twice, 0.5 s
    of the 0.7 s a collection took."""
    step = next(s for s in STEPS if s.name == step_name)
    args = [arg.replace("{out}", "/tmp/gpu_check_collect") for arg in step.plans[device].pytest_args]
    found = Collected()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = pytest.main([*args, "--collect-only", "-qq", "--capture=no", "-p", "no:cacheprovider", "-p",
                                "no:unraisableexception", "--device", "cpu", "--bench-profile", PROFILE[device]],
                               plugins=[found])
    finally:
        os.chdir(cwd)
    return int(code), tuple({"case": c.id, **c.params} for c in found.cases)


@pytest.mark.parametrize(("step_name", "device"), PYTEST_PLANS)
def test_every_selection_collects_the_cases_its_readers_need_and_its_estimate_counts(step_name, device):
    code, cases = collect(step_name, device)
    assert code == 0 and cases, f"{step_name} on {device}: the selection collects nothing"
    plan_ = next(s for s in STEPS if s.name == step_name).plans[device]
    assert plan_.estimate.cases == len(cases), f"{step_name} on {device}: estimate counts {plan_.estimate.cases}"
    for reader in plan_.readers:
        if reader.gaps:
            assert load_function(reader.gaps)(list(cases)) == [], f"{step_name} on {device}: {reader.rows}"


def test_the_cuda_selections_cover_the_whole_ladder_the_traced_dtypes_and_the_precision_grid():
    dtypes = {c["dtype"] for c in collect("matmul", "cuda")[1]}
    assert dtypes == set(DTYPES)
    assert {c["dtype"] for c in collect("trace", "cuda")[1]} == set(TRACE_DTYPES)
    cells = {(c["precision"], c["compile"]) for name in ("train_step", "train_step_compiled")
             for c in collect(name, "cuda")[1]}
    assert cells == {(p, c) for p in ("fp32", "tf32", "amp_fp16", "amp_bf16") for c in ("on", "off")}


def test_gaps_name_what_a_selection_lacks():
    flash = {"case": "f", "impl": "flash", "dtype": "bfloat16", "shape": "s", "causal": "true", "pass": "fwd"}
    assert attention_rows.pair_gaps([flash]) == ["bfloat16 s true fwd: no naive case"]
    assert attention_rows.pair_gaps([]) == ["no flash and naive cases"]


def test_the_flash_case_timed_against_do_bench_is_the_suites_own():
    case = attention_rows.do_bench_case()
    assert case.id == "attention/flash/bfloat16/4x16x4096x128/noncausal/fwd"


# --- the readers on a real CPU run, and on what a killed or failed run leaves -------------------------------------

CPU_READERS = [(step.name, reader) for step in STEPS if "cpu" in step.plans for reader in step.plans["cpu"].readers]


def copy_data(tmp_path: Path) -> Path:
    for path in DATA.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


@pytest.mark.parametrize(("step_name", "reader"), CPU_READERS, ids=[f"{s}-{r.rows}" for s, r in CPU_READERS])
def test_every_reader_gives_rows_that_name_their_source_from_the_real_run(step_name, reader, tmp_path):
    rows = reader_rows(reader, copy_data(tmp_path), step_name)
    assert rows and all(isinstance(r, Row) for r in rows)
    assert not [r for r in rows if r.ok is False], rows  # the CPU run passed: its figures read as passing
    assert all(r.source == f"{step_name}.json" for r in rows), rows


def to_journal(path: Path) -> Path:
    """What a run killed outright leaves: the journal's header and one line per finished case, no final file."""
    data = json.loads(path.read_text())
    header = {"journal": 1} | {k: data.get(k) for k in ("machine_info", "commit_info", "datetime", "version")}
    lines = [header] + [{"benchmarks": b} for b in data["benchmarks"]] + [{"not_measured": n}
                                                                         for n in data.get("not_measured", [])]
    journal = path.with_name(path.name + ".journal")
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    path.unlink()
    return journal


@pytest.mark.parametrize(("step_name", "reader"), CPU_READERS, ids=[f"{s}-{r.rows}" for s, r in CPU_READERS])
def test_a_killed_runs_journal_is_read_and_named_incomplete(step_name, reader, tmp_path):
    out = copy_data(tmp_path)
    if step_name == "sampler_cost":
        pytest.skip("a tool's JSON, not a pytest run's results")
    whole = reader_rows(reader, out, step_name)
    to_journal(out / f"{step_name}.json")
    rows = reader_rows(reader, out, step_name)
    assert [(r.check, r.figure, r.value) for r in rows] == [(r.check, r.figure, r.value) for r in whole]
    assert all(r.source.startswith(f"{step_name}.json.journal (incomplete") for r in rows), rows


def test_a_truncated_or_missing_results_file_is_one_failing_row_naming_it(tmp_path):
    out = copy_data(tmp_path)
    text = (out / "matmul.json").read_text()
    (out / "matmul.json").write_text(text[: len(text) // 2])
    reader = STEPS[STEP_NAMES.index("matmul")].plans["cpu"].readers[0]
    [row] = reader_rows(reader, out, "matmul")
    assert row.ok is False and "matmul.json" in row.value and "truncated" in row.value
    [row] = reader_rows(reader, out, "no_such_step")
    assert row.ok is False and "no_such_step.json: not written" in row.value


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_attention_rows_say_out_of_memory_unsupported_and_missing_fields(tmp_path):
    out = copy_data(tmp_path)
    path = out / "attention.json"

    def naive_out_of_memory(data: dict) -> None:  # what a GPU that cannot hold the scores writes
        naive = next(b for b in data["benchmarks"] if b["params"]["impl"] == "naive")
        data["benchmarks"].remove(naive)
        naive["extra_info"] |= {"status": "oom", "reason": "CUDA out of memory", "requested_bytes": 8 * 2**30}
        data["not_measured"].append({k: naive[k] for k in ("group", "name", "fullname", "params", "extra_info")})

    edit(path, naive_out_of_memory)
    [row] = attention_rows.flash_vs_naive(out, "attention")
    assert row.value.startswith("naive out of memory (asked for 8 GiB more); flash") and row.ok is True

    def flash_unsupported(data: dict) -> None:
        flash = next(b for b in data["benchmarks"] if b["params"]["impl"] == "flash")
        data["benchmarks"].remove(flash)
        flash["extra_info"] = {"case": flash["extra_info"]["case"], "status": "unsupported",
                               "reason": "no flash kernel for this GPU"}
        data["not_measured"].append({k: flash[k] for k in ("group", "name", "fullname", "params", "extra_info")})

    edit(path, flash_unsupported)
    [row] = attention_rows.flash_vs_naive(out, "attention")
    assert row.value == "flash unsupported: no flash kernel for this GPU" and row.ok is False

    shutil.copy(DATA / "attention.json", path)
    edit(path, lambda data: [b["extra_info"].pop(k, None) for b in data["benchmarks"]
                             for k in ("peak_mem_bytes", "tflops")])
    [row] = attention_rows.flash_vs_naive(out, "attention")
    assert "peak memory not recorded" in row.value


def test_the_stopping_summary_counts_host_bound_cases_and_dropped_samples(tmp_path):
    out = copy_data(tmp_path)

    def one_host_bound(data: dict) -> None:  # as a CUDA run of a small op records it
        data["benchmarks"][0]["extra_info"] |= {"host_bound": True, "dropped_samples": 3}

    edit(out / "matmul.json", one_host_bound)
    stopped = load_function("suites.gpu_check.matmul:how_cases_stopped")(out, "matmul")
    assert stopped[1].value.startswith("1 (matmul/square/256x256x256/") and stopped[1].value.endswith("), 3")


def test_an_incomplete_results_file_says_so_in_every_row(tmp_path):
    out = copy_data(tmp_path)
    edit(out / "numerics.json", lambda data: data.update(incomplete=True, incomplete_reason="stopped by SIGTERM"))
    rows = load_function("suites.gpu_check.numerics:ran_once")(out, "numerics")
    assert rows and all(r.source == "numerics.json (incomplete: stopped by SIGTERM)" for r in rows)
    assert read_run(out / "numerics.json").incomplete_reason == "stopped by SIGTERM"


def cuda_case(status: str = "ok", **fields) -> dict:
    """A case as reports.format.load gives it, measured on a GPU (the verdicts that hold there)."""
    return {"status": status, "torch_device": "cuda:0", **fields}


def test_the_float8_rung_of_the_ladder_says_it_is_the_accurate_accumulations():
    from suites.gpu_check import matmul as matmul_rows

    fp8 = cuda_case(dtype="float8_e4m3fn", case="matmul/square/4096x4096x4096/float8_e4m3fn", tflops=1200.0,
                    pct_peak=60.6, fast_accum=False)
    bf16 = cuda_case(dtype="bfloat16", case="matmul/square/4096x4096x4096/bfloat16", tflops=700.0, pct_peak=70.8)
    rows = {row.figure: row for row in matmul_rows.ladder_rows([fp8, bf16])}
    assert "use_fast_accum=False" in rows["float8_e4m3fn"].value and "not measured" in rows["float8_e4m3fn"].value
    assert "accumulation" not in rows["bfloat16"].value


def test_flash_against_naive_on_a_gpu_passes_faster_and_smaller_and_an_out_of_memory_naive():
    flash = cuda_case(median_s=0.001, peak_mem_bytes=2**20, tflops=400.0)
    value, ok = attention_rows.compare(flash, cuda_case(median_s=0.004, peak_mem_bytes=2**24))
    assert ok is True and value.startswith("speed-up 4.00x, naive's peak memory 16.0x flash's")
    value, ok = attention_rows.compare(flash, cuda_case("oom", reason="CUDA out of memory", requested_bytes=8 * 2**30))
    assert ok is True and "naive out of memory (asked for 8 GiB more)" in value
    slower = cuda_case(median_s=0.004, peak_mem_bytes=2**20)
    assert attention_rows.compare(slower, flash | {"impl": "naive"})[1] is False
    assert attention_rows.compare(None, flash) == ("flash case missing from the results", False)
    assert attention_rows.compare({**flash, "torch_device": "cpu"}, cuda_case(median_s=0.0005))[1] is None


def test_conv_speedups_of_channels_last_and_bfloat16_and_what_is_missing():
    settings = {conv_rows.NCHW_BF16: cuda_case(median_s=4e-3), conv_rows.NHWC_BF16: cuda_case(median_s=2e-3),
                conv_rows.NCHW_FP32: cuda_case(median_s=1e-2)}
    assert conv_rows.speedups(settings) == "bf16 channels_last 2.00x NCHW (2 vs 4 ms); 5.00x float32 NCHW"
    settings[conv_rows.NCHW_FP32] = cuda_case("error", reason="cuDNN failed")
    assert conv_rows.speedups(settings).endswith("; float32 contiguous error: cuDNN failed")
    assert conv_rows.speedups({}) == "; ".join(f"{' '.join(s)} missing" for s in conv_rows.SETTINGS)


def test_the_precision_grid_on_a_gpu_holds_mfu_between_0_and_1_and_fails_what_did_not_run(tmp_path):
    base = cuda_case(model="gpt2-124m", lever="baseline", precision="amp_bf16", compile="off", median_s=0.05,
                     mfu=0.42, mfu_counted=0.44, tokens_per_s=327680.0, n_steps=20, loss_after_n=7.1)
    value, ok = train_rows.describe(base)
    assert ok is True and value.startswith("20.00 steps/s, 327,680 tokens/s, MFU 42.0 % (counted 44.0 %)")
    assert train_rows.describe(base | {"mfu": 1.3})[1] is False
    assert train_rows.describe({k: v for k, v in base.items() if k != "mfu"})[1] is False  # a GPU has a peak
    compiled = base | {"compile": "on", "compile_s": 41.0, "compile_startup_s": 9.0, "recompiles": 0}
    assert "compile 41 s after 9 s of compiler start-up, 0 recompiles" in train_rows.describe(compiled)[0]
    assert train_rows.describe(cuda_case("oom", reason="CUDA out of memory")) == ("oom: CUDA out of memory", False)
    assert train_rows.describe({"status": "unsupported", "reason": "no tf32", "torch_device": "cpu"})[1] is None


def test_the_largest_batches_of_a_real_search_and_of_its_journal(tmp_path):
    out = copy_data(tmp_path)
    rows = batch_rows.largest_batches(out, "batch_size")
    assert [r.value.split()[0] for r in rows] == ["10", "12", "17"] and all(r.ok for r in rows)
    assert all(r.source == "batch_size.json" for r in rows)
    to_journal(out / "batch_size.json")
    assert [r.value for r in batch_rows.largest_batches(out, "batch_size")] == [r.value for r in rows]
    refit = cuda_case(max_batch=96, timed_batch=64, timed_batch_reason="batch 96 fit in the search but not again")
    assert batch_rows.search_value(refit) == ("96 (timed at 64: batch 96 fit in the search but not again)", 96)
    assert batch_rows.search_gaps([{"case": "x", "lever": "max_batch", "model": "m", "precision": "fp32",
                                    "checkpoint": "off"}]) == ["m: no amp_bf16 checkpoint off search",
                                                               "m: no amp_bf16 checkpoint block search"]


def test_searched_peaks_are_held_below_the_datasheet_and_a_missing_dtype_fails():
    from suites.core import achievable
    from suites.gpu_check import matmul as matmul_rows

    found = achievable.Found(800e12, "8192x8192x8192", "searched", 12, 20.0)
    peaks = achievable.Peaks(flops={"bfloat16": found, "float8_e4m3fn": achievable.Found(2e15, "x", "s", 3, 20.0)},
                             missing={"float16": "no float16 gemm of the grid fits"})
    plan_ = matmul_rows.search_plan("cuda")
    assert plan_.gemm_budget_s == 20.0 and plan_.sizes == profiles.search_plan("cuda", "full").sizes
    rows = list(matmul_rows.peak_rows(peaks, {"bfloat16": {"value": 989e12}, "float8_e4m3fn": {"value": 1979e12},
                                              "bandwidth": {"value": None}}, plan_))
    assert [r.ok for r in rows] == [True, False, False]  # 81 % of the sheet; above it; none found
    assert "80.9 % of the datasheet's 989" in rows[0].value


def test_a_searched_peak_below_a_measured_case_says_so(tmp_path):
    """The short search can miss the shape a case of the matmul step ran faster: the row says the roof is at least
    what was measured, from the matmul step's real results."""
    from suites.core import achievable
    from suites.gpu_check import matmul as matmul_rows

    shutil.copy(DATA / "matmul.json", tmp_path / "matmul.json")
    measured = matmul_rows.measured_best(tmp_path)
    fastest, case = measured["float32"]
    assert case.startswith("matmul/") and fastest > 0
    peaks = achievable.Peaks(flops={"float32": achievable.Found(fastest / 2, "256x256x256", "searched", 6, 3.5),
                                    "bfloat16": achievable.Found(10 * measured["bfloat16"][0], "x", "s", 6, 3.5)})
    rows = {r.figure: r for r in matmul_rows.peak_rows(peaks, {}, matmul_rows.search_plan("cpu"), measured)}
    assert f"below the {fastest / 1e12:.4g} TFLOP/s that {case} measured in the matmul step" in rows["float32"].value
    assert "below the" not in rows["bfloat16"].value
    assert matmul_rows.measured_best(tmp_path / "nowhere") == {}


# --- the command line -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("--budget-s", "30"), ("--budget-s", "nan"), ("--budget-s", "-5"),
                                  ("--budget-s", "1e9"), ("--progress-s", "0"), ("--only", "matmul,nonsense"),
                                  ("--device", "tpu"), ("--device", "cuda:7")])
def test_a_bad_command_line_is_one_line_and_exit_2(args, tmp_path, capsys):
    assert command.main(["--device", "cpu", "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert not (tmp_path / "out").exists()


def test_a_budget_that_runs_nothing_names_what_would_fit(tmp_path, capsys):
    assert command.main(["--device", "cpu", "--budget-s", "30", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --budget-s 30: no step fits; the smallest needs about")


def test_an_out_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file", tmp_path / "file" / "sub", tmp_path / ("x" * 300)):
        assert command.main(["--device", "cpu", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --out {out}") and len(err.strip().splitlines()) == 1


def _symlink_loop(tmp_path: Path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def _rows_file_a_folder(tmp_path: Path) -> Path:
    (tmp_path / "out" / "rows.jsonl").mkdir(parents=True)
    return tmp_path / "out"


@pytest.mark.parametrize(("make", "says"), [
    (_symlink_loop, "is a symlink that leads nowhere (a loop, or a missing target)"),
    (lambda tmp_path: _symlink_loop(tmp_path) / "sub", "cannot create output directory (Too many levels of symbolic"),
    (_rows_file_a_folder, "cannot write rows.jsonl there (Is a directory)"),
], ids=["symlink_loop", "inside_a_symlink_loop", "rows_jsonl_a_folder"])
def test_an_out_folder_it_cannot_use_is_one_line_before_any_step(make, says, tmp_path, capsys):
    """A symlink loop raised RuntimeError from Path.resolve; a folder named rows.jsonl an IsADirectoryError once
    the first row came."""
    out = make(tmp_path)
    assert command.main(["--device", "cpu", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"error: --out {out}")
    assert len(captured.err.strip().splitlines()) == 1 and says in captured.err


def test_outside_a_checkout_the_check_says_it_needs_one(tmp_path, monkeypatch):
    for package in ("suites", "reports"):  # the packages alone, as an installed copy would be
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    proc = run_python("-m", "suites.gpu_check", "--device", "cpu", "--out", str(tmp_path / "out"), cwd=tmp_path,
                      timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: gpu_check runs the bench files and tools of a checkout")
    assert len(proc.stderr.strip().splitlines()) == 1
    monkeypatch.setattr(command, "ROOT", tmp_path)
    with pytest.raises(UsageError, match=r"has no bench, tools, conftest\.py"):
        command.checkout()


# --- running: progress, children ended with the check, a budgeted run ------------------------------------------

def children(pid: int) -> list[int]:
    """The processes whose parent is pid (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for(condition, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; the parent-death signal is Linux's")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_or_killing_the_check_ends_its_running_step(how, tmp_path):
    # Twenty rounds (pytest's own options reach the step through PYTEST_ADDOPTS, as a user's would) keep the step
    # running for about half a minute: a quiet box finishes the one-round step in 3 s, before the signal.
    check = start_python("-m", "suites.gpu_check", "--device", "cpu", "--only", "train_step", "--progress-s", "1",
                         "--out", str(tmp_path), env={"PYTEST_ADDOPTS": "--bench-rounds 20"})
    try:
        assert wait_for(lambda: children(check.pid), 60), "the step never started"
        [step] = children(check.pid)
        journal = tmp_path / "train_step.json.journal"  # pytest's session has started: it writes what it finishes
        assert wait_for(journal.exists, 60), "the step's pytest never started its session"
        time.sleep(1)
        check.send_signal(how)
        check.wait(timeout=60)
        assert wait_for(lambda: not alive(step), GRACE_S + 10), "the step outlived the check"
    finally:
        if check.poll() is None:
            check.kill()
    output = check.stdout.read()
    assert any("train_step" in line and "running for" in line for line in output.splitlines())  # its progress
    assert check.returncode == -how  # ended as the signal ends it, after its step
    if how == signal.SIGTERM:  # the step was stopped, not killed: pytest wrote what it had, marked incomplete
        assert read_run(tmp_path / "train_step.json").incomplete_reason.startswith("stopped by SIGTERM")


@pytest.mark.slow
def test_a_budgeted_cpu_run_streams_its_rows_skips_with_reasons_reads_nothing_stale_and_keeps_its_times(tmp_path):
    """A real run of the check on this CPU, in a folder an earlier run left; then its step times, kept under the
    identity its results recorded (suites/gpu_check/step_times.py), plan the next check (tests/test_step_times.py
    holds the rest of the step times' tests)."""
    out, cache = tmp_path / "out", tmp_path / "times"
    out.mkdir()
    stale = {"benchmarks": [{"name": "x", "params": {"dtype": "stale"},
                             "extra_info": {"status": "ok", "tflops": 1e9, "case": "stale/case"}}]}
    for name in ("matmul.json", "numerics.json", "train_step.json"):
        (out / name).write_text(json.dumps(stale))
    (out / "matmul.json.journal").write_text('{"journal": 1}\n')  # a killed run's: pytest would refuse it
    (out / "rows.jsonl").write_text('{"check": "stale"}\n')
    only = "preflight,matmul,numerics,train_step,attention_do_bench"
    # A budget the training step cannot fit into even as the first step, however quick the steps before it are;
    # the preflight and matmul (10 s and 11 s estimated) fit.
    train_step = next(step for step in STEPS if step.name == "train_step").plans["cpu"].estimate.seconds
    budget = train_step + READ_MARGIN_S + GRACE_S - 1
    start = time.perf_counter()
    proc = start_python("-m", "suites.gpu_check", "--device", "cpu", "--budget-s", f"{budget:g}", "--only", only,
                        "--progress-s", "2", "--out", str(out), "--times-cache", str(cache))
    arrivals = [(time.perf_counter() - start, line) for line in proc.stdout]
    proc.wait()
    # 1: a figure failed on this loaded box, not the check
    assert proc.returncode in (0, 1), "".join(line for _, line in arrivals)[-3000:]
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert {row["step"] for row in rows} == set(STEP_NAMES)  # every step has a row: run, or skipped and why
    skipped = {row["step"]: row["value"] for row in rows if row["figure"] == "skipped"}
    assert skipped["attention_do_bench"] == "needs a cuda device; this run measures cpu"
    assert skipped["train_step"].startswith("over budget")
    assert skipped["conv"] == "not in --only"
    ran = {row["step"] for row in rows if row["figure"] != "skipped"}
    assert {"preflight", "matmul"} <= ran
    assert "stale" not in (out / "rows.jsonl").read_text()
    assert "stale" not in (out / "matmul.json").read_text()  # rewritten by this run
    assert all(row["source"] for row in rows)
    printed = [t for t, line in arrivals if line.startswith("[") and "running for" not in line]
    assert len(printed) == len(rows)
    assert printed[0] < printed[-1] - 5  # the first rows were printed while later steps still ran
    assert any("running for" in line and "matmul" in line for _, line in arrivals)  # progress of a slow step
    # the budget held on the check's own clock (each row's time since the check started): a wall time taken out
    # here would add two interpreters' start and end, which a loaded machine stretches for reasons of its own
    assert all(row["t_s"] <= budget for row in rows)

    [kept] = cache.glob("*.json")
    document = json.loads(kept.read_text())
    assert document["identity"] == json.loads((out / "matmul.json").read_text())["machine_info"]["identity"]
    took = {row["step"]: float(row["value"].split(" s of an expected")[0]) for row in rows
            if row["figure"] == "wall time, result"}
    assert set(document["steps"]) == set(took) >= {"preflight", "matmul"}  # the skipped steps are not learned
    shown = call_in_process(command.main, "--plan", "--device", "cpu", "--times-cache", str(cache))  # plans only
    assert shown.returncode == 0, shown.tail()
    for name in took:
        [line] = [line for line in shown.stdout.splitlines() if line.startswith(f"| {name} ")]
        cells = [cell.strip() for cell in line.split("|")]
        assert cells[4] == "measured" and abs(float(cells[3]) - took[name]) <= 1, line
    assert f"{len(took)} of them expected from times measured on this device" in shown.stdout
