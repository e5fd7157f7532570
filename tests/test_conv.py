"""The conv suite: ids, axes, FLOP model against FlopCounterMode, memory layouts, float64 correctness on the CPU."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from suites.core.cases import Unsupported
from suites.core.runner import execute
from suites.harness.bench_session import SMOKE
from suites.ops import conv
from suites.ops.passes import run_pass, worst_error
from tests.runs import run_bench_in_process, run_reports_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.usefixtures("one_thread")  # beside the other worker's torch: 11 s on two threads, 9 s on one

CPU, META = torch.device("cpu"), torch.device("meta")
ALL_CASES = conv.cases("quick") + conv.cases("exhaustive")  # exhaustive holds every case of full


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_case_ids_are_unique_and_every_axis_is_swept(profile):
    cases = conv.cases(profile)
    assert len({c.id for c in cases}) == len(cases)
    for axis, values in [("dtype", {"float32", "tf32", "float16", "bfloat16"}), ("pass", {"fwd", "fwd_bwd"}),
                         ("memory_format", {"contiguous", "channels_last"})]:
        assert {c.params[axis] for c in cases} == values
    assert {c.params["align"] for c in cases} >= {"64", "odd"}


def test_full_profile_has_the_network_layers_and_every_align_class():
    params = {(c.params["layer"], c.params["shape"], c.params["align"]) for c in conv.cases("full")}
    assert ("resnet50-stem", "32x3x224x224-64k7s2", "odd") in params
    assert ("resnet50-s1-3x3", "32x64x56x56-64k3s1", "64") in params
    assert ("resnet50-s4-1x1-expand", "32x512x7x7-2048k1s1", "64") in params
    assert ("vgg16-conv3", "32x256x56x56-256k3s1", "64") in params
    assert {a for layer, _, a in params if layer == "misaligned-3x3"} == {"8", "odd"}


def test_flop_model_equals_flop_counter_on_every_case():
    """Counted on the meta device (shapes only). tf32 cannot be built there (it needs a GPU); its FLOPs are its
    float32 twin's, which is counted."""
    by_id = {c.id: c for c in ALL_CASES}
    counted = 0
    for case in ALL_CASES:
        try:
            workload = case.build(META)
        except Unsupported:
            assert case.params["dtype"] == "tf32"
            assert case.flops == by_id[case.id.replace("/tf32/", "/float32/")].flops
            continue
        with FlopCounterMode(display=False) as counter:
            workload.fn()
        assert counter.get_total_flops() == case.flops, case.id
        counted += 1
    assert counted == 3 * len(ALL_CASES) // 4


def test_flop_formula_by_hand():
    stem = conv.ConvLayer("resnet50-stem", 32, 3, 64, 224, 7, 2, 3)
    assert stem.out_size == 112
    assert stem.forward_flops() == 2 * 32 * 64 * 3 * 7 * 7 * 112 * 112
    case = conv.make_case(stem, "bfloat16", "channels_last", "fwd_bwd")
    assert case.flops == 3 * stem.forward_flops()


@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_memory_format_reaches_the_kernel(memory_format):
    layer = conv.ConvLayer("misaligned-3x3", 1, 63, 63, 10, 3, 1, 1)
    out = conv.make_case(layer, "float32", memory_format, "fwd").build(CPU).fn()[0]
    assert out.is_contiguous(memory_format=conv.FORMATS[memory_format])
    assert out.std() > 1  # random inputs, never zeros


@pytest.mark.parametrize("pass_", ["fwd", "fwd_bwd"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_cpu_conv_is_within_tolerance_of_float64(dtype, pass_):
    layer = conv.ConvLayer("misaligned-3x3", 2, 65, 63, 9, 3, 1, 1)
    case = conv.make_case(layer, dtype, "channels_last", pass_)
    err = case.build(CPU).error_rel()
    assert 0 < err <= case.tolerance  # zero would mean the reference was computed the same way


def test_fwd_bwd_returns_output_and_both_gradients():
    layer = conv.ConvLayer("resnet50-s1-3x3", 1, 8, 8, 6, 3, 1, 1)
    outputs = conv.make_case(layer, "float32", "contiguous", "fwd_bwd").build(CPU).fn()
    assert [t.shape for t in outputs] == [(1, 8, 6, 6), (1, 8, 6, 6), (8, 8, 3, 3)]


def test_worst_error_is_the_largest_of_output_and_gradients():
    ref = [torch.ones(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)]
    assert worst_error([ref[0].float(), (ref[1] * 1.01).float()], ref) == pytest.approx(0.01, rel=1e-5)
    x = torch.randn(3, requires_grad=True)
    _, grad = run_pass(lambda t: (t * t).sum(), [x], torch.tensor(1.0))
    assert torch.allclose(grad, 2 * x)


def test_tf32_is_unsupported_on_cpu_with_a_reason():
    layer = conv.ConvLayer("misaligned-3x3", 1, 8, 8, 6, 3, 1, 1)
    with pytest.raises(Unsupported, match=r"compute capability 8\.0"):
        conv.make_case(layer, "tf32", "contiguous", "fwd").build(CPU)


def test_runner_records_cpu_peak_memory_and_a_checked_result():
    layer = conv.ConvLayer("misaligned-3x3", 1, 63, 63, 14, 3, 1, 1)
    result = execute(conv.make_case(layer, "bfloat16", "channels_last", "fwd_bwd"), CPU, SMOKE)
    info = result.figures
    assert result.status == "ok", result.reason
    # at least the output and the two gradients, in bfloat16, were allocated during the call
    assert info["peak_mem_bytes"] >= 2 * (2 * 63 * 14 * 14 + 63 * 63 * 9)
    assert 0 < info["error_rel"] <= info["tolerance"]


def test_plot_writes_one_png_per_pass(tmp_path):
    import pandas as pd

    from reports.plots import conv as plot_conv

    frame = pd.DataFrame([{"group": "conv", "device": "cpu", "median_s": 1e-3 * (i + 1), **c.params}
                          for i, c in enumerate(conv.cases("quick")) if c.params["dtype"] != "tf32"])
    paths = plot_conv.plots(frame, tmp_path)
    assert sorted(p.name for p in paths) == ["conv-cpu-fwd-bwd.png", "conv-cpu-fwd.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_cudnn_autotune_is_on_inside_and_restored_after():
    saved = torch.backends.cudnn.benchmark
    with conv.cudnn_autotune():
        assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cudnn.benchmark == saved


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", ["float32", "tf32", "bfloat16"])
def test_cuda_conv_is_within_tolerance_in_both_formats(dtype):
    layer = conv.ConvLayer("misaligned-3x3", 8, 63, 64, 28, 3, 1, 1)
    for memory_format in conv.FORMATS:
        result = execute(conv.make_case(layer, dtype, memory_format, "fwd_bwd"), torch.device("cuda"), SMOKE)
        assert result.status == "ok", result.reason
        assert result.figures["peak_mem_bytes"] > 0


@pytest.mark.slow
def test_quick_run_end_to_end_json_and_table(tmp_path):
    """bench -> JSON -> table on the misaligned layer, both passes: float32 measured and checked against its
    float64 reference, tf32 recorded as unsupported on a CPU with the reason."""
    out = tmp_path / "conv.json"
    bench = run_bench_in_process("bench/test_conv.py", "--bench-profile", "quick", "-k",
                                 "misaligned and contiguous and (float32 or tf32)", json_path=out)
    assert bench.returncode == 0, bench.tail(2000)
    measured = bench.json["benchmarks"]
    assert sorted(b["params"]["pass"] for b in measured) == ["fwd", "fwd_bwd"]
    for entry in measured:
        info = entry["extra_info"]
        assert entry["group"] == "conv" and info["tflops"] > 0 and info["error_rel"] <= info["tolerance"]
    unsupported = [e["extra_info"] for e in bench.json["not_measured"]]
    assert len(unsupported) == 2 and all(e["status"] == "unsupported" and "tf32" in e["reason"] for e in unsupported)
    table = run_reports_in_process("table", str(out))
    assert table.returncode == 0 and "## conv on" in table.stdout
