"""Running a case: failures become recorded results and the next case still runs."""

import contextlib

import torch

from suites.core.cases import Case, Unsupported, Workload
from suites.core.runner import Extension, is_oom, requested_bytes, run_case
from suites.core.timing import StopRule
from suites.ops import matmul

CPU = torch.device("cpu")
RULE = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=1.0, warmup_s=0.0)
SMALL = matmul.make_case(matmul.Shape("square", 64, 64, 64), "float32")


def _case(build, tolerance=None) -> Case:
    return Case(suite="test", id="test/case", params={}, build=build, flops=1e6, tolerance=tolerance)


def test_out_of_memory_is_a_result_with_the_request_and_the_run_goes_on():
    def build(device):
        torch.empty(2**50, dtype=torch.float32, device=device)  # the CPU allocator refuses 4 PiB
        raise AssertionError("unreachable")

    result = run_case(_case(build), CPU, RULE)
    assert result.status == "oom"
    assert result.extra_info["requested_bytes"] == 4 * 2**50
    assert result.measurement is None
    after = run_case(SMALL, CPU, RULE)
    assert after.status == "ok" and after.extra_info["tflops"] > 0


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

    result = run_case(_case(build), CPU, RULE)
    assert (result.status, result.reason) == ("unsupported", "needs a Hopper GPU")
    assert result.extra_info["status"] == "unsupported"


def test_unexpected_exception_is_an_error_with_its_first_line():
    def build(device):
        raise KeyError("no such layer\nmore detail")

    result = run_case(_case(build), CPU, RULE)
    assert result.status == "error"
    assert result.reason.startswith("KeyError")
    assert "\n" not in result.reason


def test_result_outside_tolerance_is_an_error_but_keeps_the_timing():
    a = torch.randn(64, 64)

    def build(device):
        return Workload(fn=lambda: a @ a, error_rel=lambda: 0.5)

    result = run_case(_case(build, tolerance=1e-3), CPU, RULE)
    assert result.status == "error"
    assert "exceeds" in result.reason
    assert result.measurement is not None and result.extra_info["error_rel"] == 0.5


def test_a_check_that_cannot_run_is_an_error_that_keeps_the_timing():
    a = torch.randn(64, 64)

    def reference_out_of_memory() -> float:
        torch.empty(2**50, dtype=torch.float64)  # the float64 reference does not fit
        return 0.0

    def build(device):
        return Workload(fn=lambda: a @ a, error_rel=reference_out_of_memory)

    result = run_case(_case(build, tolerance=1e-3), CPU, RULE)
    assert result.status == "error"
    assert "correctness check did not run" in result.reason and "can't allocate memory" in result.reason
    assert result.measurement is not None and result.extra_info["tflops"] > 0
    assert "error_rel" not in result.extra_info


def test_ok_case_has_the_design_card_fields():
    info = run_case(SMALL, CPU, RULE).extra_info
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
    info = run_case(SMALL, CPU, RULE, extensions=[ext]).extra_info
    assert info["observed"] == SMALL.id and info["after"] is True and ext.calls == 1
