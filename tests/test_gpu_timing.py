"""What the virtual GPU of the timing tests assumes about a real one (tests/virtual_gpu.py), checked on CUDA.

Each test here is the real-hardware twin of a behaviour the model gives the timing core: the first graph replay
pays an upload, two events on a held stream read within the events' 0.5 us resolution, work on a side stream is
invisible to the current stream's events, a copy from pageable memory waits for its stream, the launch queue
holds about 1024 launches, a cold kernel of a few microseconds converges in hundreds of samples, and a cold case's
peak memory is its hot twin's. Skipped without CUDA:
`pytest tests/test_gpu_timing.py tests/test_timing.py -m gpu -v -p no:cacheprovider`.
"""

import time

import pytest
import torch

from suites.core.backends import TorchBackend
from suites.core.cases import Case, Workload
from suites.core.profiles import rules
from suites.core.runner import execute
from suites.core.samplers import EVENT_RESOLUTION_S, MIN_HOLD_S, empty_window_s
from suites.core.stopping import StopRule
from suites.core.timing import measure

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: events, streams, graphs")]
RULE = StopRule(min_samples=20, min_time_s=0.05, target_rel_iqr=0.05, timeout_s=10.0, warmup_s=0.05)


@pytest.fixture
def cuda() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def test_a_graphs_first_replay_is_its_slow_one_and_stays_out_of_the_samples(cuda):
    a = torch.randn(256, 256, device=cuda)
    graph = torch.cuda.CUDAGraph()
    a @ a  # warm (cuBLAS handle, workspace) outside the capture, as TorchBackend does on a side stream
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(100):
            a @ a
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        graph.replay()
        took.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    print(f"graph replays' host times: {[f'{t * 1e6:.0f} us' for t in took]}")
    assert took[0] > took[1]  # the model's upload (graph_upload_s)
    m = measure(lambda: a @ a, cuda, RULE, graph=True)
    assert m.timer == "cuda_graph" and m.dropped_samples == 0 and m.hold_s == pytest.approx(MIN_HOLD_S)


def test_an_empty_window_reads_within_the_events_resolution(cuda):
    empty = empty_window_s(TorchBackend(cuda)) - EVENT_RESOLUTION_S
    print(f"empty window: {empty * 1e6:.3f} us")
    assert 0 <= empty <= EVENT_RESOLUTION_S


@pytest.mark.parametrize("where", ["side stream", "current stream"])
def test_work_on_a_side_stream_is_timed_on_the_wall_and_work_on_the_current_one_by_events(cuda, where):
    a = torch.randn(2048, 2048, device=cuda)
    side = torch.cuda.Stream(cuda)

    def on_side() -> None:
        with torch.cuda.stream(side):
            a @ a

    m = measure(on_side if where == "side stream" else (lambda: a @ a), cuda, RULE)
    print(f"{where}: {m.timer} {m.median_s * 1e6:.1f} us, notes {m.notes}")
    if where == "side stream":
        assert m.timer == "wall" and any("saw no work" in note for note in m.notes)
    else:
        assert m.timer == "cuda_event" and not any("saw no work" in note for note in m.notes)
    assert m.median_s > 10e-6  # a 2048^3 float32 gemm: tens of microseconds on any GPU


def test_a_copy_from_pageable_memory_waits_for_its_stream(cuda):
    host = torch.randn(2**18)  # 1 MiB, pageable
    dest = torch.empty(2**18, device=cuda)
    m = measure(lambda: dest.copy_(host), cuda, RULE)
    print(f"pageable copy: {m.timer}, notes {m.notes}")
    assert m.timer == "wall" and any("waits on the device" in note for note in m.notes)


@pytest.mark.parametrize("launches", [600, 1500])
def test_a_call_of_more_launches_than_the_queue_holds_outlasts_every_hold(cuda, launches):
    """The model's launch queue (queue_depth 1024): a call of 600 tiny kernels is held; one of 1500 blocks the host
    behind the spin, and is timed on the wall clock with a note that names the launch queue."""
    x = torch.zeros(16, device=cuda)

    def many() -> None:
        for _ in range(launches):
            x.add_(1)

    m = measure(many, cuda, RULE)
    print(f"{launches} launches per call: {m.timer}, {m.calls_per_sample} calls per sample, notes {m.notes}")
    if launches < 1024:
        assert m.timer == "cuda_event"
    else:
        assert m.timer == "wall" and any("launch queue" in note for note in m.notes)


def test_a_cold_kernel_of_a_few_microseconds_ends_in_hundreds_of_samples(cuda):
    x = torch.zeros(4096, device=cuda)
    rule = rules("full").stop
    started = time.perf_counter()
    m = measure(lambda: x.add_(1), cuda, rule, cold=True)
    took = time.perf_counter() - started
    print(f"cold add: {m.median_s * 1e6:.2f} us, {m.calls_per_sample} calls x {len(m.samples_s)} samples, "
          f"{m.stop_reason}, rel-IQR {m.rel_iqr:.4f}, {took:.1f} s")
    assert m.l2_flush and m.calls_per_sample > 1 and m.stop_reason in ("target", "plateau")
    assert len(m.samples_s) < 2000 and took < rule.timeout_s


def test_a_cold_cases_peak_memory_is_its_hot_twins(cuda):
    a = torch.randn(1024, 1024, device=cuda)

    def case(cold: bool) -> Case:
        return Case("test", f"peak/{cold}", {}, build=lambda device: Workload(lambda: a @ a), cold=cold)

    hot, cold = (execute(case(c), cuda, RULE).figures for c in (False, True))
    print(f"peak_mem_bytes hot {hot['peak_mem_bytes']}, cold {cold['peak_mem_bytes']}")
    assert cold["l2_flush"] and cold["peak_mem_bytes"] == hot["peak_mem_bytes"]
