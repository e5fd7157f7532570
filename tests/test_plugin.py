"""End to end: pytest on bench/ writes device-time samples as pytest-benchmark stats, and reports reads them."""

import numpy as np
import pytest
import torch

from suites.core.stopping import rel_iqr
from tests.runs import run_pytest_in_process, run_reports_in_process

slow = pytest.mark.slow  # reads the quick run of tests/conftest.py


@slow
def test_a_clean_cpu_run_warns_of_nothing(quick_run):
    """No NVML warning on a CPU, no pandas or deprecation warning: the run above treats warnings as errors."""
    assert "warnings summary" not in quick_run["stdout"] and "Warning" not in quick_run["stdout"]


def test_stats_are_the_measured_samples(quick_run):
    for bench in quick_run["json"]["benchmarks"]:
        data = bench["stats"]["data"]
        assert bench["stats"]["rounds"] == len(data) > 0
        assert bench["stats"]["median"] == pytest.approx(float(np.median(data)))
        # the runner computed rel_iqr from its own samples: equal only if the JSON holds exactly those samples
        assert bench["extra_info"]["rel_iqr"] == pytest.approx(rel_iqr(data))
        assert bench["extra_info"]["timer"] == bench["options"]["timer"] == "wall"


@slow
def test_every_dtype_in_every_align_class_with_throughput(quick_run):
    seen = {(b["params"]["dtype"], b["params"]["align"]) for b in quick_run["json"]["benchmarks"]
            if b["extra_info"]["tflops"] > 0 and b["group"] == "matmul"}
    assert seen == {(d, a) for d in ("float32", "bfloat16", "float16") for a in ("64", "8", "odd")}


@slow
def test_unsupported_cases_are_recorded_with_their_reason(quick_run):
    skipped = quick_run["json"]["not_measured"]
    assert {s["params"]["dtype"] for s in skipped} == {"tf32"}
    assert all(s["extra_info"]["status"] == "unsupported" and s["extra_info"]["reason"] for s in skipped)


@slow
def test_machine_info_names_the_device(quick_run):
    info = quick_run["json"]["machine_info"]
    assert info["bench_device"] == "cpu"
    assert info["torch"]["version"] == torch.__version__
    assert info["cpu_info"]["torch_threads"] >= 1


@slow
def test_reports_table_reads_the_run(quick_run):
    proc = run_reports_in_process("table", str(quick_run["path"]), "--markdown")
    assert proc.returncode == 0, proc.stderr
    assert "## matmul on" in proc.stdout
    assert "bfloat16" in proc.stdout and "odd" in proc.stdout
    assert "unsupported (3 cases)" in proc.stdout


def test_unknown_dtype_is_a_usage_error_listing_valid_names():
    proc = run_pytest_in_process("bench/test_matmul.py", "--bench-dtypes", "nonsense", "--collect-only")
    assert proc.returncode == 4
    assert "unknown nonsense" in proc.stderr and "bfloat16" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_cuda_without_a_gpu_is_an_error_not_an_all_skip():
    proc = run_pytest_in_process("bench/test_matmul.py", "--device", "cuda", "--collect-only")
    assert proc.returncode == 4
    assert "no CUDA device" in proc.stderr


@pytest.mark.parametrize("content", ["", "{", "[1, 2]", '{"benchmarks": 3}'])
def test_reports_table_rejects_bad_files_in_one_line(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = run_reports_in_process("table", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr


@pytest.mark.parametrize("option", [["--bench-mem-budget", "1e400"], ["--bench-mem-budget", "0.5"],
                                    ["--bench-dtypes", ""], ["--bench-dtypes", ","], ["--bench-device", "cuda:abc"],
                                    ["--bench-device", "cuda:0:junk"], ["--bench-telemetry-interval-ms", "inf"],
                                    ["--bench-telemetry-interval-ms", "nan"], ["--bench-telemetry-interval-ms", "-1"],
                                    ["--bench-rounds", "0"], ["--bench-progress-interval-s", "-1"],
                                    ["--bench-progress-interval-s", "nan"]])
def test_options_that_cannot_be_right_are_usage_errors(option):
    proc = run_pytest_in_process("bench/test_matmul.py", "--collect-only", *option)
    assert proc.returncode == 4, proc.tail(2000)
    assert "Traceback" not in proc.stderr and option[0] in proc.stderr + proc.stdout


def test_the_old_spellings_work_with_plugin_autoloading_off(monkeypatch):
    """With PYTEST_DISABLE_PLUGIN_AUTOLOAD, conftest.py's aliases are declared before the plugin's own options:
    a default of their own (once SUPPRESS) then broke every run at start-up."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    proc = run_pytest_in_process("-p", "pytest_benchmark.plugin", "--collect-only", "bench/test_matmul.py", "--device",
                                 "cpu", "--telemetry-interval-ms", "0")
    assert proc.returncode == 0 and "collected" in proc.stdout, proc.tail()
