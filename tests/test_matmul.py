"""The matmul suite's cases: ids, axes, FLOP model, and correctness against float64 on the CPU."""

import pandas as pd
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from reports import levers
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
    case = matmul.make_case(matmul.MatmulShape("square", 64, 72, 40), "float32")
    workload = case.build(CPU)
    with FlopCounterMode(display=False) as counter:
        workload.fn()
    assert case.flops == counter.get_total_flops() == 2 * 64 * 72 * 40


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("size", [256, 264, 257])
def test_cpu_matmul_is_within_tolerance_of_float64(dtype, size):
    case = matmul.make_case(matmul.MatmulShape("square", size, size, size), dtype)
    err = case.build(CPU).error_rel()
    assert 0 < err <= case.tolerance  # zero error would mean the reference was computed the same way


@pytest.mark.parametrize("dtype", ["tf32", "float8_e4m3fn"])
def test_gpu_only_dtypes_are_unsupported_on_cpu_with_a_reason(dtype):
    case = matmul.make_case(matmul.MatmulShape("square", 64, 64, 64), dtype)
    with pytest.raises(Unsupported, match="compute capability"):
        case.build(CPU)


def test_inputs_are_random_not_zeros():
    case = matmul.make_case(matmul.MatmulShape("square", 32, 32, 32), "float32")
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
    case = matmul.make_case(matmul.MatmulShape("square", 1024, 1024, 1024), "float8_e4m3fn")
    assert case.build(torch.device("cuda")).error_rel() <= case.tolerance


def _lever_rows(cases: list, seconds: dict[str, float]) -> pd.DataFrame:
    """Rows as reports.format.load makes them from these cases, each with the median a timing would have given it."""
    rows = pd.DataFrame([{"group": c.suite, "status": "ok", "case": c.id, **c.params, "param_names": ",".join(c.params),
                          "median_s": seconds["cold" if c.cold else "graph" if c.graph else "warm"], "flops": c.flops}
                         for c in cases])
    return rows.assign(tflops=rows["flops"] / rows["median_s"] / 1e12)


def test_cold_and_graph_twins_pair_with_their_warm_case_as_levers():
    cases = matmul.cases("full")
    twins = [c for c in cases if c.cold or c.graph]
    assert {c.params["layer"] for c in twins} == {"l2-resident"} and len(twins) == 2 * 5  # cold and graph, 5 dtypes
    assert {c.id.removesuffix("/cold").removesuffix("/graph") for c in twins} <= {c.id for c in cases}
    rows = _lever_rows(cases, {"warm": 1.0, "cold": 1.25, "graph": 0.8})
    found = {spec.axis: levers.effect(rows, spec) for spec in levers.SPECS
             if spec.group == "matmul" and spec.axis in ("cold", "graph")}
    assert (found["cold"].pairs, found["cold"].ratio) == (5, pytest.approx(0.8))  # warm time / cold time
    assert (found["graph"].pairs, found["graph"].ratio) == (5, pytest.approx(1.25))
    alignment = next(s for s in levers.SPECS if s.group == "matmul" and s.variant == "odd")
    paired = set(levers.pairs(rows, alignment).index.get_level_values("layer"))
    assert paired == {"square", "gpt2-lm-head"}  # as before: l2-resident has no odd twin


def test_cold_and_graph_twins_are_unsupported_off_cuda_with_the_reason():
    twin = next(c for c in matmul.cases("full") if c.graph)
    with pytest.raises(Unsupported, match="CUDA-only"):
        twin.build(CPU)
