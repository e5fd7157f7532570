"""Tests of `python -m reports trace` on real Kineto traces, on a hand-made trace, and on broken files.

Figures are checked against expectations that do not come from the code under test: HolisticTraceAnalysis'
(HTA) table in tests/data/traces/README.md, reproduced exactly once HTA's own choices are applied (see
test_matches_hta_temporal_breakdown), the traces' README counts, and a small trace whose overlaps are worked out
by hand below.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reports.__main__ import main
from reports.format.kineto import stream
from reports.format.kineto.events import KERNEL, read_trace
from reports.format.kineto.kernels import CLASS_NAMES, COMMUNICATION, classify_kernel
from reports.format.kineto.summary import assign_steps, classify_events, launch_times, summarize_trace, union_length
from reports.trace import DEVICES_IN_FULL
from tests import hostile
from tests.resultfiles import TRACES
from tests.runs import ProcessRun, run_reports

SHARED = sorted(TRACES.glob("*.json.gz"))


def run_cli(*args: str) -> ProcessRun:
    """`python -m reports trace ...` in a fresh interpreter, as a user runs it."""
    return run_reports("trace", *args, timeout=120)


# --- a hand-made trace with known overlaps -------------------------------------------------------------------

BASE_US = 1_712_195_495_500_000  # epoch microseconds, as Kineto writes them


def gpu(cat: str, name: str, start: float, end: float, correlation: int, **args: Any) -> dict[str, Any]:
    args = {"device": 0, "stream": 7, "correlation": correlation, **args}
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": BASE_US + start,
        "dur": end - start,
        "args": args,
    }


def host(cat: str, name: str, start: float, dur: float = 1.0, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 100,
        "tid": 100,
        "ts": BASE_US + start,
        "dur": dur,
        "args": args,
    }


def launch(name: str, start: float, correlation: int) -> dict[str, Any]:
    return host("cuda_runtime", name, start, correlation=correlation)


HAND_MADE_EVENTS = [
    {"name": "process_name", "ph": "M", "pid": 100, "tid": 0, "args": {"name": "python"}},
    host("user_annotation", "ProfilerStep#1", 0, 18),
    host("user_annotation", "ProfilerStep#2", 18, 40),
    # Device 0. Two overlapping gemms (tensor-core h884, SIMT sgemm) make compute [0, 15).
    gpu("kernel", "volta_h884gemm_64x64_nt", 0, 10, 1),
    gpu("kernel", "volta_sgemm_128x64_nn", 5, 15, 2),
    gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 20, 25, 3, bytes=1000),
    gpu("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 30, 40, 4),
    gpu("gpu_memset", "Memset (Device)", 38, 42, 5, bytes=64),
    gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 50, 52, 6, bytes=500),
    # Device 1: no args.device (the pid names the device), and the category spelled as PyTorch <= 1.10 did.
    {
        "ph": "X",
        "cat": "Kernel",
        "name": "void fill_kernel<float>(float*)",
        "pid": 1,
        "tid": 7,
        "ts": BASE_US + 100,
        "dur": 3.5,
        "args": {"correlation": 7},
    },
    # Launches: the gemms in step 1, the copy, nccl kernel and blocking copy in step 2, the memset after both.
    launch("cudaLaunchKernel", 1, 1),
    launch("cudaLaunchKernel", 2, 2),
    launch("cudaMemcpyAsync", 19, 3),
    launch("cudaLaunchKernel", 25, 4),
    launch("cudaMemsetAsync", 60, 5),
    launch("cudaMemcpy", 45, 6),
    host("cuda_driver", "cuLaunchKernel", 17.5, correlation=7),
    # Synchronizing calls (with cudaMemcpy above: 5), and calls that do not block the host.
    launch("cudaDeviceSynchronize", 70, 8),
    launch("cudaDeviceSynchronize", 80, 9),
    launch("cudaStreamSynchronize", 85, 10),
    launch("cudaEventSynchronize", 90, 11),
    launch("cudaEventQuery", 91, 12),
    launch("cudaStreamWaitEvent", 92, 13),
    # Noise the summary must ignore: a CPU op, flows, an instant, GPU-side annotations and sync records.
    host("cpu_op", "aten::mm", 0.5, 3, **{"External id": 1}),
    {"ph": "s", "id": 1, "pid": 100, "tid": 100, "ts": BASE_US + 1, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": BASE_US, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "ts": BASE_US},
    gpu("gpu_user_annotation", "ProfilerStep#1", 0, 60, -1),
    gpu("cuda_sync", "Stream Sync", 52, 60, 10),
]


@pytest.fixture
def hand_made(tmp_path: Path) -> Path:
    path = tmp_path / "hand_made.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": HAND_MADE_EVENTS}, indent=1))
    return path


def test_hand_made_device_figures(hand_made: Path) -> None:
    summary = summarize_trace(read_trace(hand_made))
    assert [d.device for d in summary.devices] == [0, 1]
    figures = summary.devices[0].overall
    # union: [0,15) + [20,25) + [30,42) + [50,52) = 15 + 5 + 12 + 2
    assert (figures.span_us, figures.busy_us, figures.idle_us) == (52, 34, 18)
    assert (figures.compute_us, figures.non_compute_us) == (15, 19)  # the nccl kernel is not compute
    assert figures.tensor_core_share == 0.5
    assert (figures.kernel_count, figures.event_count) == (3, 6)
    classes = {c.name: (c.count, c.total_us) for c in figures.classes}
    assert classes == {
        "gemm_tensor_core": (1, 10),
        "gemm_simt": (1, 10),
        "communication": (1, 10),
        "memcpy": (2, 7),
        "memset": (1, 4),
    }
    assert [k.share for k in figures.kernels] == pytest.approx([1 / 3] * 3)
    other = summary.devices[1].overall
    assert (other.span_us, other.busy_us, other.compute_us, other.tensor_core_share) == (3.5, 3.5, 3.5, None)


def test_hand_made_steps(hand_made: Path) -> None:
    summary = summarize_trace(read_trace(hand_made))
    assert summary.steps == ["ProfilerStep#1", "ProfilerStep#2"]  # not the gpu_user_annotation copy
    first, second = (step.breakdown for step in summary.devices[0].steps)
    assert (first.event_count, first.span_us, first.busy_us, first.compute_us) == (2, 15, 15, 15)
    assert first.tensor_core_share == 0.5
    # copy [20,25), nccl [30,40), blocking copy [50,52); the memset was launched after both steps. The span opens
    # where step 1 ended on the device (15), so the 5 us the device waited before the copy are this step's idle.
    assert (second.event_count, second.span_us, second.busy_us, second.idle_us) == (3, 37, 17, 20)
    assert (second.compute_us, second.non_compute_us, second.tensor_core_share) == (0, 17, None)
    assert [step.breakdown.event_count for step in summary.devices[1].steps] == [1, 0]


def test_hand_made_host(hand_made: Path) -> None:
    host_figures = summarize_trace(read_trace(hand_made)).host
    assert host_figures.sync_calls == {
        "cudaDeviceSynchronize": 2,
        "cudaEventSynchronize": 1,
        "cudaMemcpy": 1,
        "cudaStreamSynchronize": 1,
    }
    assert host_figures.sync_us == 5
    assert (host_figures.htod_bytes, host_figures.htod_copies) == (1000, 1)
    assert (host_figures.dtoh_bytes, host_figures.dtoh_copies) == (500, 1)


def test_union_length() -> None:
    start = np.array([5.0, 0.0, 20.0, 30.0, 31.0, 30.0])
    end = np.array([15.0, 10.0, 25.0, 35.0, 32.0, 30.0])  # nested, touching-free, zero-length
    assert union_length(start, end) == 15 + 5 + 5
    assert union_length(np.array([]), np.array([])) == 0


def test_top_level_array_form(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text(json.dumps(HAND_MADE_EVENTS))
    assert summarize_trace(read_trace(path)).devices[0].overall.busy_us == 34


# --- real traces -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_streaming_reader_matches_json_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny chunks put every value, number and separator across a refill at some point."""
    with gzip.open(path, "rt") as handle:
        expected = json.load(handle)
    monkeypatch.setattr(stream, "CHUNK_CHARS", 61 if path.stat().st_size < 100_000 else 4093)
    metadata: dict[str, Any] = {}
    assert list(stream.iter_trace_events(path, metadata)) == expected["traceEvents"]
    assert metadata == {key: value for key, value in expected.items() if key != "traceEvents"}


# Kernel counts from tests/data/traces/README.md.
README_KERNELS = {
    "ns_resolution_trace.json.gz": 4350,
    "critical_path.json.gz": 79,
    "triton_example.json.gz": 1,
    "amd_trace.json.gz": 14,
    "cpu_only.json.gz": 0,
}


def test_every_shared_trace_through_the_cli() -> None:
    """One process, every file: the several-files JSON form, kernel counts as in the README, no traceback."""
    result = run_cli(*map(str, SHARED), "--json")
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)["files"]
    assert [Path(f["file"]).name for f in files] == [p.name for p in SHARED]
    for found in files:
        kernels = sum(device["kernel_count"] for device in found["devices"])
        assert kernels == README_KERNELS[Path(found["file"]).name]
        for device in found["devices"]:
            assert device["busy_us"] <= device["span_us"]
            assert device["compute_us"] <= device["busy_us"]
            assert device["idle_us"] == pytest.approx(device["span_us"] - device["busy_us"], abs=2e-3)


JSON_DEVICE_KEYS = {
    "device",
    "span_us",
    "busy_us",
    "idle_us",
    "compute_us",
    "non_compute_us",
    "tensor_core_share",
    "kernel_count",
    "top_kernels",
}


def test_json_schema() -> None:
    result = run_cli(str(TRACES / "ns_resolution_trace.json.gz"), "--json", "--top", "3")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert {"devices", "host"} <= summary.keys()
    (device,) = summary["devices"]
    assert device.keys() >= JSON_DEVICE_KEYS
    assert device["device"] == 0
    assert device["kernel_count"] == 4350
    assert len(device["top_kernels"]) == 3
    for kernel in device["top_kernels"]:
        assert {"name", "count", "total_us"} <= kernel.keys()
    totals = [kernel["total_us"] for kernel in device["top_kernels"]]
    assert totals == sorted(totals, reverse=True)
    assert [step["step"] for step in device["steps"]] == [f"ProfilerStep#{n}" for n in range(101, 106)]
    assert {"sync_call_count", "sync_calls", "htod_bytes", "dtoh_bytes"} <= summary["host"].keys()


def test_cpu_only_trace_gets_a_message_and_host_figures(capsys: pytest.CaptureFixture[str]) -> None:
    path = TRACES / "cpu_only.json.gz"
    assert main(["trace", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["devices"] == []
    assert "no GPU events" in summary["message"]
    assert summary["host"]["sync_call_count"] == 0
    assert main(["trace", str(path)]) == 0
    text = capsys.readouterr().out
    assert "no GPU events" in text and "host:" in text


def test_text_output_lists_devices_steps_and_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(TRACES / "ns_resolution_trace.json.gz"), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "GPU 0 (Tesla V100-SXM2-32GB): 6095 GPU events, 4350 kernels" in text
    assert "ProfilerStep#105" in text and "top 2 kernels" in text


def hta_rounded(start_us: np.ndarray, end_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA 0.5.0 rounds fractional timestamps: start up, end down (hta/common/trace_parser.py)."""
    return np.ceil(start_us), np.floor(end_us)


def hta_figures(start: np.ndarray, end: np.ndarray, is_compute: np.ndarray) -> tuple[float, float, float, float]:
    """HTA's temporal breakdown (idle, compute, non-compute, span) from absolute times, with our union."""
    start, end = hta_rounded(start, end)
    span = end.max() - start.min()
    busy = union_length(start, end)
    compute = union_length(start[is_compute], end[is_compute])
    return span - busy, compute, busy - compute, span


def raw_events(name: str) -> list[dict[str, Any]]:
    with gzip.open(TRACES / name, "rt") as handle:
        return json.load(handle)["traceEvents"]


@pytest.mark.parametrize(
    ("name", "hta"),
    [
        ("ns_resolution_trace.json.gz", (10113, 372150, 2371, 384634)),
        ("amd_trace.json.gz", (8780, 96, 35, 8911)),
        ("critical_path.json.gz", (12929684, 10637, 55690, 12996011)),
    ],
)
def test_matches_hta_temporal_breakdown(name: str, hta: tuple[int, int, int, int]) -> None:
    """HTA's figures (README) come out exactly from our events and union once HTA's own choices are applied:
    - it rounds timestamps to whole microseconds (start up, end down), which we do not;
    - with several ProfilerSteps it keeps only GPU events launched before the last step starts (so the
      ns_resolution figures cover steps 101-104; ours cover all five steps);
    - it counts as GPU events every event with a stream, so critical_path's 41 `cuda_sync` records ("Stream Sync",
      "Context Sync", "Stream Wait Event") are in its span, and "Stream Wait Event", whose name escapes its
      Memcpy/Memset/Sync pattern, in its compute. Our definition has kernels, copies and sets only.
    """
    trace = read_trace(TRACES / name)
    events = trace.gpu
    keep = np.ones(len(events), dtype=bool)
    if len(trace.steps) > 1:
        keep = launch_times(trace) < trace.steps[-1].start
    classes = classify_events(events, trace.names)[keep]
    selected = events.select(keep)
    start, end = selected.start + trace.origin_us, selected.end + trace.origin_us
    is_compute = (selected.kind == KERNEL) & (classes != CLASS_NAMES.index(COMMUNICATION))
    syncs = [e for e in raw_events(name) if e.get("cat") == "cuda_sync"]
    if syncs:
        start = np.append(start, [e["ts"] for e in syncs])
        end = np.append(end, [e["ts"] + e["dur"] for e in syncs])
        is_compute = np.append(is_compute, [e["name"] == "Stream Wait Event" for e in syncs])
    assert hta_figures(start, end, is_compute) == hta


def test_triton_example_against_hta() -> None:
    """HTA reports span 94 us for this one-kernel trace; the kernel itself lasts 1.76 us. HTA's 94 is the
    `cpu_op` that launched it, which carries args.stream = 0 and so passes HTA's "GPU event" test (stream != -1):
    its rounded interval is 94 us and covers the kernel."""
    (device,) = summarize_trace(read_trace(TRACES / "triton_example.json.gz")).devices
    assert device.overall.span_us == pytest.approx(1.76, abs=1e-6)
    assert device.overall.kernel_count == 1
    (op,) = [e for e in raw_events("triton_example.json.gz") if e.get("cat") == "cpu_op" and "stream" in e["args"]]
    start, end = hta_rounded(np.array([op["ts"]]), np.array([op["ts"] + op["dur"]]))
    assert (end - start)[0] == 94


def test_steps_match_hta_iterations() -> None:
    """HTA assigns 1219 GPU events to each of iterations 101-104 of this trace; so do we (105 too)."""
    trace = read_trace(TRACES / "ns_resolution_trace.json.gz")
    per_step = np.bincount(assign_steps(trace) + 1, minlength=len(trace.steps) + 1)
    assert per_step.tolist() == [0, 1219, 1219, 1219, 1219, 1219]


def test_host_figures_on_real_traces() -> None:
    critical = summarize_trace(read_trace(TRACES / "critical_path.json.gz")).host
    raw = raw_events("critical_path.json.gz")
    assert critical.sync_calls == {"cudaDeviceSynchronize": 5, "cudaStreamSynchronize": 16}
    assert critical.htod_bytes == sum(e["args"]["bytes"] for e in raw if e["name"].startswith("Memcpy HtoD"))
    assert critical.htod_copies == 16
    # ROCm puts the size on the host call only (args.size, a string) and copies synchronously.
    amd = summarize_trace(read_trace(TRACES / "amd_trace.json.gz")).host
    sizes = [int(e["args"]["size"]) for e in raw_events("amd_trace.json.gz") if e["name"] == "hipMemcpyWithStream"]
    assert (amd.htod_bytes, amd.htod_copies, amd.copies_without_bytes) == (sum(sizes), 2, 0)
    assert amd.sync_calls == {"hipDeviceSynchronize": 1, "hipMemcpyWithStream": 2}


# --- broken input ------------------------------------------------------------------------------------------


def assert_one_line_error(result: ProcessRun, path: Path) -> None:
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_truncated_gzip_exits_2(tmp_path: Path) -> None:
    data = (TRACES / "critical_path.json.gz").read_bytes()
    path = tmp_path / "truncated.json.gz"
    path.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_cli(str(path)), path)


def test_non_json_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("this is not a trace\n")
    assert_one_line_error(run_cli(str(path), "--json"), path)


def broken_files(tmp_path: Path) -> dict[str, Path]:
    whole = json.dumps({"traceEvents": HAND_MADE_EVENTS})
    contents = {
        "truncated.json": whole[: len(whole) * 2 // 3],
        "empty.json": "",
        "no_events.json": json.dumps({"schemaVersion": 1}),
        "bad_event.json": json.dumps({"traceEvents": [["X", "kernel", "k", 1000, 1]]}),  # an entry that is no event
        "trailing.json": whole + "}",
        "binary.json.gz": "",
    }
    paths = {name: tmp_path / name for name in contents}
    for name, text in contents.items():
        paths[name].write_text(text)
    paths["binary.json.gz"].write_bytes(b"\x1f\x8b\x08\x00garbage")
    paths["missing.json"] = tmp_path / "missing.json"
    return paths


@pytest.mark.parametrize(
    "name",
    [
        "truncated.json",
        "empty.json",
        "no_events.json",
        "bad_event.json",
        "trailing.json",
        "binary.json.gz",
        "missing.json",
    ],
)
def test_broken_input_is_one_line_and_exit_2(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = broken_files(tmp_path)[name]
    assert main(["trace", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("error: ") and str(path) in line


def test_numbers_split_across_chunks_are_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'125' cut by a refill after '12' must still decode as 125, at any chunk size."""
    path = tmp_path / "numbers.json"
    path.write_text('{"schemaVersion": 12345, "traceEvents": [], "baseTimeNanoseconds": 1735632360000000000}')
    for chunk in range(1, 12):
        monkeypatch.setattr(stream, "CHUNK_CHARS", chunk)
        metadata: dict[str, Any] = {}
        assert list(stream.iter_trace_events(path, metadata)) == []
        assert metadata == {"schemaVersion": 12345, "baseTimeNanoseconds": 1735632360000000000}


# --- kernel classes ----------------------------------------------------------------------------------------

KERNEL_NAMES = [
    # From the shared traces (V100, A100, MI250).
    ("volta_sgemm_128x32_nt", "gemm_simt"),
    ("ampere_sgemm_32x32_sliced1x4_tn", "gemm_simt"),
    ("ampere_gcgemm_64x64_nt", "gemm_simt"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1", "gemm_tensor_core"),
    (
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1"
        "_g1_tensor16x8x8_alignc4_execute_kernel__5x_cudnn",
        "convolution",
    ),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "convolution"),
    (
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::Params)",
        "convolution",
    ),
    ("void wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, float const*)", "convolution"),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float)", "reduction"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, true, false>()", "reduction"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>()", "reduction"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*)", "reduction"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::MeanOps>>()", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)", "elementwise"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>()", "elementwise"),
    ("void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long)", "elementwise"),
    ("triton_poi_fused_add_cos_sin_0", "elementwise"),
    # Hopper and Blackwell, as found in public profiles.
    ("nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT", "gemm_tensor_core"),
    ("nvjet_hsh_256x128_64x4_2x1_v_bz_TNN", "gemm_tensor_core"),
    ("nvjet_sm90_hss_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm_tensor_core"),
    ("nvjet_sm100_tst_24x64_64x16_4x1_v_bz_TNN", "gemm_tensor_core"),
    ("nvjet_sss_tf32_128x256_TNT", "gemm_tensor_core"),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas",
        "gemm_tensor_core",
    ),
    (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas",
        "gemm_tensor_core",
    ),
    # IEEE fp32 on an H100 still runs an sm80 FFMA kernel: SIMT.
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute"
        "_kernel__5x_cublas",
        "gemm_simt",
    ),
    # cuBLAS/CASK xmma names: <A,B types>_<math types>_<C type>; the math pair decides, not the sm prefix (names
    # from NVIDIA's open GPU test kernel lists and public Nsight/Kineto tables).
    (
        "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas",
        "gemm_simt",
    ),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ff", "gemm_simt"),  # cut off
    (
        "sm80_xmma_gemm_tf32tf32_tf32f32_f32_nt_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8",
        "gemm_tensor_core",
    ),
    (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize256x128x32_cgasize1x2x1_stage4_gmmastage2_warpgroupsize2x1x1"
        "_hgmma64x128x8",
        "gemm_tensor_core",
    ),
    (
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas",
        "gemm_tensor_core",
    ),
    (
        "sm89_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize64x64x64_stage4_warpsize2x2x1_tensor16x8x32",
        "gemm_tensor_core",
    ),
    (
        "sm90_xmma_gemm_i8i8_i8i32_f32_tn_n_tilesize128x128x128_stage4_gmmastage2_warpgroupsize1x1x1_igmma64x128x32",
        "gemm_tensor_core",
    ),
    ("sm90_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize128x128x16_stage3_warpsize4x2x1_tensor16x8x16", "gemm_tensor_core"),
    ("nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT", "gemm_tensor_core"),  # fp8 _scaled_mm on Hopper
    ("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_64x64_64x6_tn_align8>(Params)", "gemm_tensor_core"),
    (
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align8>()",
        "gemm_tensor_core",
    ),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_tn_align1>(Params)", "gemm_simt"),
    ("cutlass3x_sm100_tensorop_gemm_bf16_bf16_f32_bf16_bf16_256x256x64_2x2x1_0_tnt_align8_2sm", "gemm_tensor_core"),
    ("cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue4m3xf4_ue4m3", "gemm_tensor_core"),
    ("cutlass3x_sm100_simt_sgemm_f32_f32_f32_f32_f32_64x128x16_1x1x1_3_tnn_align1_bias_f32_relu", "gemm_simt"),
    ("ampere_s1688gemm_bf16_128x128_ldg8_stages_32x1_nt", "gemm_tensor_core"),
    ("volta_h884gemm_64x128_ldg8_nn", "gemm_tensor_core"),
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true>(cublasGemmSmallNParams<float>)", "gemm_simt"),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, 128, 16>()", "gemm_simt"),
    ("triton_tem_fused_mm_0", "gemm_simt"),  # a name that says nothing of tensor cores: counted SIMT
    (
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_64x64_16x10_nhwc_align4>()",
        "convolution",
    ),
    (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false>>(Params)",
        "attention",
    ),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>::Params)", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm80_flash_bprop_wmma_f16_knob_3_64x64x64_4x1x1_kernel0_0", "attention"),
    ("void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "reduction"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("triton_red_fused_sum_0", "reduction"),
    ("triton_per_fused__softmax_0", "reduction"),
    ("some_custom_kernel", "other"),
]


@pytest.mark.parametrize(("name", "expected"), KERNEL_NAMES, ids=[n[:40] for n, _ in KERNEL_NAMES])
def test_kernel_classes(name: str, expected: str) -> None:
    assert classify_kernel(name) == expected


def test_every_real_kernel_has_a_class() -> None:
    """No kernel of the shared traces falls through to 'other'."""
    for path in SHARED:
        trace = read_trace(path)
        names = {trace.names[i] for i in np.unique(trace.gpu.name[trace.gpu.kind == KERNEL])}
        assert {name for name in names if classify_kernel(name) == "other"} == set(), path.name


def test_hand_made_trace_roundtrips_through_gzip(hand_made: Path, tmp_path: Path) -> None:
    packed = tmp_path / "hand_made.trace"  # compressed, whatever the name says
    packed.write_bytes(gzip.compress(hand_made.read_bytes()))
    result = run_cli(str(packed), "--json")
    assert result.returncode == 0, result.stderr
    devices = json.loads(result.stdout)["devices"]
    assert [(d["device"], d["busy_us"], d["compute_us"]) for d in devices] == [(0, 34, 15), (1, 3.5, 3.5)]
    assert math.isclose(devices[0]["tensor_core_share"], 0.5)


def test_a_trace_of_20k_device_ids_has_each_device_once_with_its_own_figures(tmp_path: Path, capsys) -> None:
    """Each device's one kernel is its figures, and the text lists the devices past the first DEVICES_IN_FULL one
    row each (a pass over every event per device took 67 to 120 s for 100,000 ids; tools/bench_trace_devices.py
    times that size)."""
    devices = 20_000
    path = hostile.many_devices_trace(tmp_path, devices)
    summary = summarize_trace(read_trace(path))
    assert [d.device for d in summary.devices] == list(range(devices))
    durations = [1 + i % 5 for i in range(devices)]
    assert [d.overall.busy_us for d in summary.devices] == durations
    assert [d.overall.span_us for d in summary.devices] == durations
    assert all(d.overall.event_count == d.overall.kernel_count == 1 and d.overall.idle_us == 0 for d in summary.devices)
    assert [d.overall.kernels[0].name for d in summary.devices[:8]] == [f"kernel_{i % 7}" for i in range(8)]
    assert main(["trace", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rest = lines.index(f"{devices - DEVICES_IN_FULL} more GPU devices, one row each (--json gives each in full):")
    rows = [line.split() for line in lines[rest + 2 : rest + 2 + devices - DEVICES_IN_FULL]]
    assert [int(r[1]) for r in rows] == list(range(DEVICES_IN_FULL, devices))
    assert [float(r[3]) for r in rows] == durations[DEVICES_IN_FULL:]  # busy_us
