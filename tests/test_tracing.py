"""Per-case profiler traces: a real quick run with --trace-dir writes one gzip trace per case that the trace
summarizer reads, and a trace that cannot be taken is recorded without failing the case."""

import gzip
import json
from pathlib import Path

import pytest
import torch

from suites.core.cases import Case, Workload
from suites.core.runner import execute
from suites.core.stopping import StopRule
from suites.observers.tracing import ACTIVE, TraceExtension, trace_path
from suites.ops import matmul
from tests.runs import run_bench_in_process, run_python, run_reports_in_process

RULE = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=1.0, warmup_s=0.0)


def test_trace_file_is_named_after_the_case_id():
    path = trace_path(Path("out"), "matmul/gpt2-lm-head/8x50257x768/float8_e4m3fn")
    assert path == Path("out/matmul_gpt2-lm-head_8x50257x768_float8_e4m3fn.json.gz")
    assert trace_path(Path("."), "a b/c:d*").name == "a_b_c_d.json.gz"


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("traced")
    out, traces = tmp / "run.json", tmp / "traces"
    proc = run_bench_in_process("bench/test_matmul.py", "-k", "square/256x256x256", "--bench-dtypes",
                                "float32,bfloat16", "--trace-dir", str(traces), json_path=out)
    assert proc.returncode == 0, proc.tail()
    return {"json": proc.json, "traces": traces}


@pytest.mark.slow
def test_every_case_has_a_gzip_trace_with_the_active_steps_and_shapes(traced_run):
    benchmarks = traced_run["json"]["benchmarks"]
    assert {b["params"]["dtype"] for b in benchmarks} == {"float32", "bfloat16"}
    written = sorted(traced_run["traces"].iterdir())
    assert [Path(b["extra_info"]["trace"]) for b in sorted(benchmarks, key=lambda b: b["extra_info"]["trace"])] \
        == written
    for path in written:
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]  # gzip, or this raises
        steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")]
        assert len(steps) == ACTIVE
        assert any(e.get("name") == "aten::mm" and e["args"].get("Input Dims") == [[256, 256], [256, 256]]
                   for e in events)


@pytest.mark.slow
def test_summary_of_a_cpu_trace_says_it_has_no_gpu_events(traced_run):
    benchmarks = traced_run["json"]["benchmarks"]
    for bench in benchmarks:
        summary = bench["extra_info"]["trace_summary"]
        assert summary["devices"] == [] and "no GPU events" in summary["message"]
        assert len(summary["steps"]) == ACTIVE
    proc = run_reports_in_process("trace", "--json", *(b["extra_info"]["trace"] for b in benchmarks))
    assert proc.returncode == 0, proc.stderr
    assert [f["message"] for f in json.loads(proc.stdout)["files"]] == \
        [b["extra_info"]["trace_summary"]["message"] for b in benchmarks]


def test_a_trace_that_fails_is_recorded_and_the_measurement_stands(tmp_path):
    def build(device):
        def fn():
            if torch.autograd._profiler_enabled():  # the measurement's calls succeed, the profiled rerun fails
                raise RuntimeError("device lost during profiling\ndetail")

        return Workload(fn=fn)

    case = Case(suite="test", id="test/failing-trace", params={}, build=build)
    result = execute(case, torch.device("cpu"), RULE, extensions=[TraceExtension(tmp_path)])
    assert result.status == "ok" and result.measurement is not None
    assert result.figures["trace_error"] == "RuntimeError: device lost during profiling"
    assert "trace" not in result.figures


def _gpu_trace(dtype: str, tmp_path: Path) -> dict:
    case = matmul.make_case(matmul.MatmulShape("square", 4096, 4096, 4096), dtype)
    result = execute(case, torch.device("cuda"), RULE, extensions=[TraceExtension(tmp_path)])
    assert result.status == "ok", result.reason
    return result.figures["trace_summary"]["devices"][0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tensor_cores_for_bf16_and_tf32_and_none_for_ieee_fp32(tmp_path):
    for dtype in ("bfloat16", "tf32"):
        assert _gpu_trace(dtype, tmp_path)["tensor_core_share"] > 0.9, dtype
    assert _gpu_trace("float32", tmp_path)["tensor_core_share"] == 0.0


PROFILE_BOTH = """
import json, sys, warnings
import torch
from suites.core.memory import cpu_peak_bytes
from suites.observers.tracing import profile_calls
a = torch.randn(64, 64)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cpu_peak_bytes(lambda: a @ a)
    profile_calls(lambda: a @ a, torch.device("cpu"), __import__("pathlib").Path(sys.argv[1]))
print(json.dumps([f"{w.category.__name__}: {w.message}" for w in caught]))
"""


def test_a_trace_and_a_cpu_peak_warn_of_nothing_under_this_torch(tmp_path):
    """Both profiles of a case (its trace, its CPU memory) in a fresh process, where torch warns once: torch 2.11
    warned at every profiler start that events are cleared at the end of each cycle (suites/core/profiler.py);
    CI runs this under every torch it tests."""
    proc = run_python("-c", PROFILE_BOTH, str(tmp_path / "t.json.gz"))
    assert proc.returncode == 0, proc.tail()
    assert json.loads(proc.stdout.splitlines()[-1]) == []
    assert (tmp_path / "t.json.gz").exists()
