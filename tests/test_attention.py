"""The attention suite: FLOP model, float64 reference, forced backends, correctness and the memory sweep on the CPU."""

import itertools
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from suites.core.cases import Unsupported
from suites.core.runner import execute
from suites.harness.bench_session import SMOKE
from suites.ops import attention
from suites.ops.attention import AttentionShape, Point
from tests.runs import run_bench_in_process, run_reports_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

CPU, META = torch.device("cpu"), torch.device("meta")


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_case_ids_are_unique_and_every_impl_is_swept(profile):
    cases = attention.cases(profile)
    assert len({c.id for c in cases}) == len(cases)
    assert {c.params["impl"] for c in cases} == set(attention.IMPLS)
    assert {(c.params["impl"], c.params["dtype"]) for c in cases} == {
        (impl, dtype) for impl, dtypes in attention.IMPL_DTYPES.items() for dtype in dtypes}


def test_full_profile_sweeps_sequence_at_constant_tokens_and_at_fixed_batch():
    cases = attention.cases("full")
    for case in cases:
        p = case.params
        assert int(p["heads"]) * int(p["head_dim"]) in (2048, 128 * 16)
    tokens = {int(c.params["batch"]) * int(c.params["seq"]) for c in cases}
    assert tokens == {16384} | {seq for seq in attention.SEQS}  # constant tokens, and batch 1
    fixed = {int(c.params["seq"]) for c in cases if c.params["batch"] == "1" and c.params["impl"] == "naive"
             and c.params["head_dim"] == "128" and c.params["dtype"] == "bfloat16" and c.params["pass"] == "fwd"}
    assert fixed == set(attention.SEQS)


def test_flop_model():
    shape = AttentionShape(2, 4, 1024, 64)
    full = 4 * 2 * 1024**2 * 4 * 64
    assert attention.forward_flops(shape, causal=False) == full
    assert attention.forward_flops(shape, causal=True) == full / 2
    assert attention.pass_flops(shape, True, "fwd_bwd") == 3.5 * full / 2


def test_forward_flops_equal_the_counted_matmuls_of_naive_attention():
    """FlopCounterMode counts the two batched matmuls of the unmasked forward: 4 x b x s^2 x h x d."""
    case = attention.make_case("naive", "float32", Point(AttentionShape(2, 3, 96, 40), False, "fwd"))
    with FlopCounterMode(display=False) as counter:
        case.build(META).fn()
    assert counter.get_total_flops() == case.flops


@pytest.mark.parametrize("causal", [False, True])
def test_blocked_reference_equals_the_whole_matrix_one(causal):
    gen = torch.Generator().manual_seed(1)
    q, k, v, grad_out = (torch.randn(2, 3, 50, 16, generator=gen) for _ in range(4))
    whole = attention.reference(q, k, v, causal, grad_out, max_elements=2**30)
    blocked = attention.reference(q, k, v, causal, grad_out, max_elements=2 * 3 * 50 * 7)  # 7 rows, 8 blocks
    for a, b in zip(whole, blocked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert all(t.dtype == torch.float64 for t in whole) and len(whole) == 4


def test_naive_causal_equals_torch_causal_attention():
    q, k, v = (torch.randn(1, 2, 33, 8, dtype=torch.float64) for _ in range(3))
    mask = attention.causal_mask(0, 33, 33, CPU)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(attention.naive_attention(q, k, v, mask), expected)


GRID = attention.every_path(Point(AttentionShape(1, 2, 64, 32), True, "fwd_bwd"))


@pytest.mark.parametrize("case", GRID, ids=[c.id.split("/", 2)[1] + "-" + c.params["dtype"] for c in GRID])
def test_every_implementation_on_cpu_is_within_tolerance_or_skipped_with_torchs_reason(case):
    result = execute(case, CPU, SMOKE)
    if case.params["impl"] in ("efficient", "cudnn"):  # CUDA-only backends
        assert result.status == "unsupported"
        assert result.reason.startswith(f"sdpa_kernel({case.params['impl']}): ") and "backend" in result.reason
        return
    assert result.status == "ok", result.reason
    assert 0 < result.figures["error_rel"] <= case.tolerance


def test_probe_reports_torchs_warnings_and_error_as_the_reason():
    def run():
        warnings.warn("Flash attention kernel not used because: (Triggered internally at sdp_utils.cpp:1.)",
                      stacklevel=1)
        warnings.warn("Flash attention requires sm80 or newer (Triggered internally at sdp_utils.cpp:2.)",
                      stacklevel=1)
        raise RuntimeError("No available kernel. Aborting execution.")

    with pytest.raises(Unsupported) as raised:
        attention.probe("flash", run)
    assert str(raised.value) == ("sdpa_kernel(flash): Flash attention kernel not used because:; Flash attention "
                                 "requires sm80 or newer; No available kernel. Aborting execution.")


def test_a_cudnn_backend_without_an_execution_plan_is_unsupported_not_an_error():
    def run():
        raise RuntimeError("cuDNN Frontend error: [cudnn_frontend] Error: No valid execution plans built.")

    with pytest.raises(Unsupported, match="sdpa_kernel\\(cudnn\\): cuDNN Frontend error"):
        attention.probe("cudnn", run)


def test_probe_lets_other_errors_through():
    def run():
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        attention.probe("flash", run)


def test_quick_memory_sweep_naive_grows_4x_and_flash_2x_per_doubling():
    """Measured peaks (torch.profiler memory events) of the quick profile's fixed-batch sweep on the CPU."""
    sweep = [c for c in attention.cases("quick") if c.params["shape"].startswith("4x8x")]
    peaks: dict[str, list[int]] = {}
    for impl in ("naive", "flash", "math"):
        for case in sorted((c for c in sweep if c.params["impl"] == impl), key=lambda c: int(c.params["seq"])):
            peaks.setdefault(impl, []).append(case.build(CPU).figures["peak_mem_bytes"])
    ratios = {impl: [b / a for a, b in itertools.pairwise(p)] for impl, p in peaks.items()}
    for impl, values in ratios.items():
        print(f"{impl}: peak bytes {peaks[impl]}, ratio per doubling of seq {[f'{r:.2f}' for r in values]}")
    assert len(ratios["naive"]) == 2
    assert all(r > 3 for r in ratios["naive"])
    assert all(r < 2.6 for r in ratios["flash"])


def _frame(cases, **columns):
    import pandas as pd

    return pd.DataFrame([{"group": c.suite, "device": "cpu", "status": "ok", "case": c.id, **c.params, **columns}
                         for c in cases])


def test_plot_series_of_the_full_profile():
    from reports.plots import attention as plot_attention

    found = plot_attention.series(_frame(attention.cases("full"), median_s=1e-3, peak_mem_bytes=2**20))
    fixed = [(value, part) for kind, value, part in found if kind == "batch"]
    tokens = [(value, part) for kind, value, part in found if kind == "tokens"]
    assert [value for value, _ in fixed] == [1]
    assert sorted(fixed[0][1]["seq"].unique()) == list(attention.SEQS)
    # the dtypes full sweeps (bfloat16; float32 for naive) x head dims x masks x passes: float16 is at one point
    assert len(tokens) == 2 * 2 * 2 * 2
    assert all(value == 16384 for value, _ in tokens)
    every = plot_attention.series(_frame(attention.cases("exhaustive"), median_s=1e-3, peak_mem_bytes=2**20))
    assert sum(kind == "tokens" for kind, _, _ in every) == 3 * 2 * 2 * 2


def test_plots_write_a_png_per_series(tmp_path):
    from reports.plots import attention as plot_attention

    frame = _frame(attention.cases("quick"), median_s=1e-3, peak_mem_bytes=2**20)
    frame.loc[frame["impl"] == "naive", "status"] = "oom"
    paths = plot_attention.plots(frame, tmp_path)
    assert [p.name for p in paths] == ["attention-cpu-bfloat16-batch4-h8-d64-nomask-fwd.png"]
    assert paths[0].stat().st_size > 10_000


@pytest.mark.slow
def test_quick_sweep_end_to_end_json_table_and_plot(tmp_path):
    """bench -> JSON -> table and plot, on the shortest flash and naive cases of the CPU memory sweep."""
    out = tmp_path / "attention.json"
    bench = run_bench_in_process("bench/test_attention.py", "--bench-profile", "quick", "-k",
                                 "(naive or flash) and 4x8x128x", json_path=out)
    assert bench.returncode == 0, bench.tail(2000)
    entries = bench.json["benchmarks"]
    assert len(entries) == 2
    for entry in entries:
        assert entry["group"] == "attention"
        assert {"impl", "seq", "batch"} <= set(entry["params"])
        assert entry["extra_info"]["peak_mem_bytes"] > 0 and entry["extra_info"]["tflops"] > 0
    table = run_reports_in_process("table", str(out))
    assert table.returncode == 0 and "## attention on" in table.stdout
    plot = run_reports_in_process("plot", str(out), "-o", str(tmp_path))
    assert plot.returncode == 0 and "no plots" in plot.stdout  # one sequence length: no series to draw


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@CUDA
def test_forced_flash_in_float32_on_cuda_is_unsupported_with_torchs_reasons():
    q = torch.randn(1, 2, 128, 64, device="cuda")
    with pytest.raises(Unsupported, match=r"^sdpa_kernel\(flash\): .*[Ff]lash") as raised:
        attention.probe("flash", lambda: attention.sdpa(attention.BACKENDS["flash"], False, q, q, q))
    assert "No available kernel" in str(raised.value)


@pytest.mark.gpu
@CUDA
def test_on_cuda_flash_needs_less_memory_than_naive_and_both_match_float64():
    point = Point(AttentionShape(1, 8, 2048, 128), True, "fwd_bwd")
    results = {impl: execute(attention.make_case(impl, "bfloat16", point), torch.device("cuda"), SMOKE)
               for impl in ("naive", "flash")}
    for result in results.values():
        assert result.status == "ok", result.reason
        assert result.figures["peak_mem_bytes"] > 0
    assert results["naive"].figures["peak_mem_bytes"] > 4 * results["flash"].figures["peak_mem_bytes"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("scale", [1.0, 1 / (16384 * 1.6487)], ids=["normal", "p_at_16k_tokens"])
def test_the_rounding_model_is_torchs_rounding_subnormals_included(dtype, scale):
    """The model's spacing and variance against torch's own rounding of the values the model reasons about:
    unit normals, and P at 16k tokens (exp(z) / (16384 e^(1/2))), mostly float16 subnormals."""
    import numpy as np

    from suites.ops.attention_error import FORMATS, relative_rounding

    z = torch.randn(2**20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = z if scale == 1.0 else torch.exp(z) * scale
    measured = float(torch.linalg.vector_norm(x.to(getattr(torch, dtype)).double() - x) / torch.linalg.vector_norm(x))
    assert measured == pytest.approx(relative_rounding(x.numpy(), FORMATS[dtype]), rel=0.05)
    if dtype == "float16" and scale != 1.0:  # most of P at 16k tokens is subnormal: a fifth more than normal
        assert measured > 1.1 * relative_rounding(np.exp(z.numpy()), FORMATS[dtype])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("dims", "causal", "pass_"), [((1, 2, 256, 64), False, "fwd_bwd"),
                                                       ((1, 2, 512, 128), True, "fwd_bwd"),
                                                       ((1, 1, 1024, 64), False, "fwd")])
def test_the_naive_error_model_is_what_float64_measures(one_thread, dtype, dims, causal, pass_):  # noqa: F811
    """Naive attention in 16 bits on this CPU (its gemms sum in float32: one part) against float64: the model's
    figure within 40 % of the error measured (0.7-1.06 x at 128-4096 tokens), and the case's tolerance above
    both."""
    from suites.ops.attention_error import naive_error

    shape = AttentionShape(*dims)
    case = attention.make_case("naive", dtype, Point(shape, causal, pass_))
    measured = case.build(torch.device("cpu")).error_rel()
    model = naive_error(dtype, shape.seq, shape.head_dim, pass_ == "fwd_bwd")
    assert 0.6 * model <= measured <= 1.4 * model
    assert measured < case.tolerance


def test_the_tolerance_of_naive_16_bit_attention_covers_its_error_model_at_every_size():
    """float16's P and dS fall into its subnormals from about 8k tokens: the tolerance of every naive 16-bit case
    is at least MARGIN x the model's error with cuBLAS's sums split into up to SPLITS_BOUND parts, and never
    below the dtype's; the other implementations keep the dtype's."""
    from suites.core.precision import TOLERANCE
    from suites.ops.attention_error import MARGIN, SPLITS_BOUND, naive_error

    for case in attention.cases("full"):
        dtype, seq, head_dim = case.params["dtype"], int(case.params["seq"]), int(case.params["head_dim"])
        if case.params["impl"] != "naive" or dtype == "float32":
            assert case.tolerance == TOLERANCE[dtype]
            continue
        model = naive_error(dtype, seq, head_dim, case.params["pass"] == "fwd_bwd", SPLITS_BOUND)
        assert case.tolerance == max(TOLERANCE[dtype], MARGIN * model)
    assert naive_error("float16", 65536, 128, True) > 1.5 * naive_error("float16", 2048, 128, True)
