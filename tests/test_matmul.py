"""The matmul suite's cases: ids, axes, FLOP model, and correctness against float64 on the CPU."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from suites.core.cases import Unsupported, align_class
from suites.core.precision import relative_error
from suites.ops import matmul

CPU = torch.device("cpu")


def test_align_classes():
    assert align_class(4096, 4096, 4096) == "64"
    assert align_class(4104, 4104, 4104) == "8"
    assert align_class(4097, 4097, 4097) == "odd"
    assert align_class(4096, 50257, 768) == "odd"
    assert align_class(4096, 50304, 768) == "64"


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_case_ids_are_unique_and_every_align_class_is_present(profile):
    cases = matmul.cases(profile)
    assert len({c.id for c in cases}) == len(cases)
    for dtype in ("float32", "tf32", "float16", "bfloat16", "float8_e4m3fn"):
        aligns = {c.params["align"] for c in cases if c.params["dtype"] == dtype and c.params["layer"] == "square"}
        assert aligns == {"64", "8", "odd"}


def test_full_profile_has_the_model_shapes():
    shapes = {(c.params["layer"], c.params["shape"]) for c in matmul.cases("full")}
    assert ("llama7b-mlp-up", "4096x11008x4096") in shapes
    assert ("gpt2-lm-head", "4096x50257x768") in shapes
    assert ("gpt2-lm-head", "4096x50304x768") in shapes


def test_flop_model_matches_torch_flop_counter():
    case = matmul.make_case(matmul.Shape("square", 64, 72, 40), "float32")
    workload = case.build(CPU)
    with FlopCounterMode(display=False) as counter:
        workload.fn()
    assert case.flops == counter.get_total_flops() == 2 * 64 * 72 * 40


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("size", [256, 264, 257])
def test_cpu_matmul_is_within_tolerance_of_float64(dtype, size):
    case = matmul.make_case(matmul.Shape("square", size, size, size), dtype)
    err = case.build(CPU).error_rel()
    assert 0 < err <= case.tolerance  # zero error would mean the reference was computed the same way


@pytest.mark.parametrize("dtype", ["tf32", "float8_e4m3fn"])
def test_gpu_only_dtypes_are_unsupported_on_cpu_with_a_reason(dtype):
    case = matmul.make_case(matmul.Shape("square", 64, 64, 64), dtype)
    with pytest.raises(Unsupported, match="compute capability"):
        case.build(CPU)


def test_inputs_are_random_not_zeros():
    case = matmul.make_case(matmul.Shape("square", 32, 32, 32), "float32")
    out = case.build(CPU).fn()
    assert out.abs().min() > 0 or out.count_nonzero() > 0.99 * out.numel()
    assert out.std() > 1


def test_relative_error_definition():
    ref = torch.randn(50, dtype=torch.float64)
    assert relative_error((ref * (1 + 1e-3)).float(), ref) == pytest.approx(1e-3, rel=1e-3)
    assert relative_error(torch.full((50,), float("nan")), ref) == float("inf")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
                    reason="float8 matmul needs a CUDA GPU of compute capability 8.9 or newer")
def test_fp8_matmul_is_within_tolerance_on_gpu():
    case = matmul.make_case(matmul.Shape("square", 1024, 1024, 1024), "float8_e4m3fn")
    assert case.build(torch.device("cuda")).error_rel() <= case.tolerance
