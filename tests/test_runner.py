"""Running a case: failures become recorded results and the next case still runs."""

import contextlib

import pytest
import torch

from suites.core.cases import Case, Unsupported, Workload
from suites.core.host_load import pool_waited
from suites.core.measurement import Measurement
from suites.core.runner import (
    DevicePeaks,
    Extension,
    _measure_and_check,
    above_peak_bandwidth,
    execute,
    host_bound_step,
    is_oom,
    requested_bytes,
)
from suites.core.stopping import STOP_REASONS, StopRule, rel_iqr
from suites.harness.entry import RunNotes, extra_info
from suites.ops import matmul
from tests.virtual_gpu import Kernel, VirtualGpu

CPU = torch.device("cpu")
RULE = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=1.0, warmup_s=0.0)
SMALL = matmul.make_case(matmul.MatmulShape("square", 64, 64, 64), "float32")


def _case(build, tolerance=None) -> Case:
    return Case(suite="test", id="test/case", params={}, build=build, flops=1e6, tolerance=tolerance)


def test_out_of_memory_is_a_result_with_the_request_and_the_run_goes_on():
    def build(device):
        torch.empty(2**50, dtype=torch.float32, device=device)  # the CPU allocator refuses 4 PiB
        raise AssertionError("unreachable")

    result = execute(_case(build), CPU, RULE)
    assert result.status == "oom"
    assert result.figures["requested_bytes"] == 4 * 2**50
    assert result.measurement is None
    after = execute(SMALL, CPU, RULE)
    assert after.status == "ok" and after.figures["tflops"] > 0


def test_cuda_allocator_message_is_parsed():
    msg = "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.11 GiB"
    assert requested_bytes(RuntimeError(msg)) == 20 * 2**30


def test_library_workspace_failures_count_as_out_of_memory():
    assert is_oom(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
    assert is_oom(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert not is_oom(RuntimeError("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED"))


def test_unsupported_keeps_its_reason():
    def build(device):
        raise Unsupported("needs a Hopper GPU")

    result = execute(_case(build), CPU, RULE)
    assert (result.status, result.reason) == ("unsupported", "needs a Hopper GPU")
    assert extra_info(result, RunNotes())["status"] == "unsupported"  # its entry says it (suites/harness/entry.py)


def test_unexpected_exception_is_an_error_with_its_first_line():
    def build(device):
        raise KeyError("no such layer\nmore detail")

    result = execute(_case(build), CPU, RULE)
    assert result.status == "error"
    assert result.reason.startswith("KeyError")
    assert "\n" not in result.reason


def test_result_outside_tolerance_is_an_error_but_keeps_the_timing():
    a = torch.randn(64, 64)

    def build(device):
        return Workload(fn=lambda: a @ a, error_rel=lambda: 0.5)

    result = execute(_case(build, tolerance=1e-3), CPU, RULE)
    assert result.status == "error"
    assert "exceeds" in result.reason
    assert result.measurement is not None and result.figures["error_rel"] == 0.5


def test_a_check_that_cannot_run_is_an_error_that_keeps_the_timing():
    a = torch.randn(64, 64)

    def reference_out_of_memory() -> float:
        torch.empty(2**50, dtype=torch.float64)  # the float64 reference does not fit
        return 0.0

    def build(device):
        return Workload(fn=lambda: a @ a, error_rel=reference_out_of_memory)

    result = execute(_case(build, tolerance=1e-3), CPU, RULE)
    assert result.status == "error"
    assert "correctness check did not run" in result.reason and "can't allocate memory" in result.reason
    assert result.measurement is not None and result.figures["tflops"] > 0
    assert "error_rel" not in result.figures


def test_ok_case_has_the_design_card_fields():
    info = extra_info(execute(SMALL, CPU, RULE), RunNotes())
    for key in ("suite", "case", "device", "timer", "status", "flops", "bytes", "tflops", "gbps", "converged",
                "rel_iqr", "error_rel"):
        assert key in info, key
    assert info["timer"] == "wall" and info["status"] == "ok"
    assert "pct_peak" not in info  # no peak is known for a CPU: absent, never faked


class Counting(Extension):
    def __init__(self):
        self.calls = 0

    @contextlib.contextmanager
    def around(self, case, device):
        fields = {}
        yield fields
        fields["observed"] = case.id

    def after(self, case, workload, device):
        workload.fn()
        self.calls += 1
        return {"after": True}


def test_extensions_add_fields_without_touching_the_measurement():
    ext = Counting()
    info = execute(SMALL, CPU, RULE, extensions=[ext]).figures
    assert info["observed"] == SMALL.id and info["after"] is True and ext.calls == 1


def test_an_op_records_its_device_time_the_hosts_enqueue_time_and_why_sampling_stopped():
    result = execute(SMALL, CPU, RULE)
    info = result.figures
    assert info["device_s"] > 0 and 0 < info["enqueue_s"] <= info["device_s"] * 1.01
    assert info["host_bound"] is False  # a CPU runs what it issues: never behind itself
    assert info["stop_reason"] in STOP_REASONS
    # converged only where the spread met the rule: a target met always is, a timeout never; a plateau is within
    # its ceiling of the target (on a loaded machine it can stop farther out, unconverged); and never where the
    # matmul's threads waited on the scheduler (contended on torch's several threads: a loaded machine)
    spread_met = info["stop_reason"] == "target" or (
        info["stop_reason"] == "plateau" and info["rel_iqr"] <= RULE.plateau_ceiling * RULE.target_rel_iqr)
    waited = pool_waited(result.measurement.contention, "cpu")
    assert info["converged"] == (spread_met and not waited)
    assert waited == (info["contended"] and info["contention"]["working_threads"] >= 2)
    assert "step_wall_s" not in info
    assert isinstance(info["contended"], bool)
    assert info["contention"]["samples"] == len(result.measurement.samples_s)
    assert 0 <= info["contention"]["share"] <= 1 and info["contention"]["rule"]


def test_a_case_measured_in_rounds_takes_its_figures_from_every_round():
    """An earlier round of 1 s calls with more samples than this one: the headline (device_s, tflops) is the
    median of all samples, 1 s, not this round's."""
    slow = Measurement([1.0] * 1000, "wall", 1, "target", RULE)
    result = execute(SMALL, CPU, RULE, earlier_rounds=[slow])
    m, info = result.measurement, result.figures
    assert len(m.rounds) == 2 and m.samples_s == slow.samples_s + m.rounds[1].samples_s
    assert info["device_s"] == m.median_s == 1.0 > m.rounds[1].median_s
    assert info["tflops"] == pytest.approx(SMALL.flops / m.median_s / 1e12)
    assert info["rel_iqr"] == m.rel_iqr == rel_iqr(m.samples_s)
    waited = pool_waited(m.contention, "cpu")  # this round's threads waited on the scheduler (a loaded machine)
    assert info["converged"] == (m.rel_iqr <= RULE.plateau_ceiling * RULE.target_rel_iqr and not waited)


def test_a_check_runs_once_in_its_build_and_is_labelled_so():
    calls = []

    def build(device):
        calls.append(1)
        return Workload(fn=lambda: calls.append("sampled"), figures={"figure": 42})

    case = Case(suite="numerics", id="numerics/once", params={}, build=build, kind="check")
    result = execute(case, CPU, RULE)
    assert calls == [1]  # never sampled under the stopping rule
    info = result.figures
    assert (info["stop_reason"], info["timer"], info["figure"]) == ("once", "wall", 42)
    assert not {"converged", "rel_iqr", "enqueue_s", "host_bound", "device_s"} & set(info)
    assert len(result.measurement.samples_s) == 1


def test_a_step_is_host_bound_when_its_device_sat_idle_for_much_of_it():
    assert host_bound_step({"step_wall_s": 0.010, "device_busy_s": 0.0095}) == {
        "device_busy_share": pytest.approx(0.95), "host_bound": False}
    assert host_bound_step({"step_wall_s": 0.010, "device_busy_s": 0.004})["host_bound"] is True
    assert host_bound_step({"step_wall_s": 0.010}) == {}  # no busy time measured (a CPU): nothing claimed


def test_bytes_moved_faster_than_memory_can_serve_them_are_called_a_cache_figure():
    flagged = above_peak_bandwidth({"gbps": 9000.0, "notes": ["earlier"]}, peak_gbps=4800.0)
    assert flagged["gbps_above_peak"] is True and flagged["notes"][0] == "earlier"
    assert "served from cache" in flagged["notes"][1]
    assert above_peak_bandwidth({"gbps": 3000.0}, peak_gbps=4800.0) == {}
    assert above_peak_bandwidth({"gbps": 9000.0}, peak_gbps=None) == {}


def test_a_figure_above_the_datasheet_peak_is_flagged_with_the_reason():
    """As a Winograd convolution reads against the direct FLOP model: a real case timed against a peak it beats."""
    above = execute(SMALL, CPU, RULE, DevicePeaks(flops=1e6))  # 1 MFLOP/s: any real gemm beats it
    assert above.status == "ok" and above.figures["pct_peak"] > 100
    assert above.figures["tflops_above_peak"] is True
    assert "fewer FLOPs than the model counts" in above.figures["notes"][-1]
    below = execute(SMALL, CPU, RULE, DevicePeaks(flops=1e18))
    assert below.figures["pct_peak"] < 100 and "tflops_above_peak" not in below.figures



@pytest.mark.parametrize("cold", [False, True], ids=["hot", "cold"])
def test_a_cold_cases_peak_memory_is_its_own_not_the_l2_flush_buffers(cold):
    """A cold case's flush writes a buffer of twice the L2 (100 MiB on an H200); made inside the peak-memory window
    it was counted as the case's. On a virtual GPU (tests/virtual_gpu.py) whose allocator counts bytes, a call that
    holds 1 MiB peaks at 1 MiB, hot or cold."""
    gpu = VirtualGpu()
    kernel = Kernel("gemm", 10e-6, cold_s=30e-6)

    def fn() -> None:
        gpu.allocate(2**20)
        gpu.launch(kernel)
        gpu.free(2**20)

    case = Case(suite="test", id="test/cold", params={}, build=lambda device: Workload(fn), cold=cold)
    rule = StopRule(min_samples=5, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=1.0, warmup_s=0.0)
    result = _measure_and_check(case, Workload(fn), torch.device("cuda"), rule, DevicePeaks(), (), backend=gpu)
    assert result.figures["l2_flush"] is cold and result.figures["timer"] == "cuda_event"
    assert result.figures["peak_mem_bytes"] == 2**20
    assert gpu.memory_allocated() == (2 * gpu.l2_bytes if cold else 0)  # the flush buffer is there, outside the peak
