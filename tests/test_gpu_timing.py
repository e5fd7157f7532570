"""What the virtual GPU of the timing tests assumes about a real one (tests/virtual_gpu.py), checked on CUDA.

Each test here is the real-hardware twin of a behaviour the model gives the timing core, asserted as the bounds a
correct GPU keeps (tests/gpu_bounds.py), not as exact figures: the first graph replay pays an upload and a graph
case drops a bounded number of samples with a hold within a factor of the minimum; an empty pair of events reads
within a few microseconds; work on a side stream, wholly or in part, is invisible to the current stream's events;
a copy from pageable memory waits for its stream; the launch queue's depth is found, and a call past it is timed
on the wall clock; a cold kernel of a few microseconds converges in hundreds of samples or says its spread is the
events' resolution; a cold case's peak memory is its hot twin's. Skipped without CUDA:
`pytest tests/test_gpu_timing.py tests/test_timing.py -m gpu -v -s -p no:cacheprovider` (-s shows the figures).
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
from tests.gpu_bounds import EMPTY_WINDOW_BOUND_S, QUEUE_DEPTH_RANGE, drops_allowed, hold_allowed, queue_depth

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
    print(f"graph case: {m.dropped_samples} dropped of {len(m.samples_s)} kept, hold {m.hold_s * 1e6:.0f} us")
    assert m.timer == "cuda_graph" and m.dropped_samples <= drops_allowed(len(m.samples_s))
    assert MIN_HOLD_S <= m.hold_s <= hold_allowed()


def test_an_empty_window_reads_within_a_few_microseconds(cuda):
    empty = empty_window_s(TorchBackend(cuda)) - EVENT_RESOLUTION_S
    print(f"empty window: {empty * 1e6:.3f} us")
    assert 0 <= empty <= EMPTY_WINDOW_BOUND_S


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


def test_the_launch_queue_depth_is_found_and_a_call_past_it_is_timed_on_the_wall(cuda):
    """The launch queue is bounded in bytes of launch parameters: its depth in launches of this tiny kernel is
    found behind a spin (about 1024 on current GPUs, other depths on other drivers), then a call of half of it is
    held and timed by events, and one of one and a half times it blocks the host behind the spin and is timed on
    the wall clock with a note that names the launch queue."""
    x = torch.zeros(16, device=cuda)
    found = queue_depth(TorchBackend(cuda), lambda: x.add_(1))
    print(f"launch queue: {found} launches of a tiny add behind a spin")
    assert found is not None and QUEUE_DEPTH_RANGE[0] <= found <= QUEUE_DEPTH_RANGE[1]
    for launches, timer in ((found // 2, "cuda_event"), (3 * found // 2, "wall")):
        def many(launches: int = launches) -> None:
            for _ in range(launches):
                x.add_(1)

        m = measure(many, cuda, RULE)
        print(f"{launches} launches per call: {m.timer}, {m.calls_per_sample} calls per sample, notes {m.notes}")
        assert m.timer == timer
        assert any("launch queue" in note for note in m.notes) is (timer == "wall")


def test_part_of_the_work_on_a_side_stream_is_timed_on_the_wall(cuda):
    """A small kernel on the current stream, a 4096^3 gemm on a side stream: the events would read the small one;
    the gemm goes on after the window and the op is timed on the wall clock, with a note."""
    small, a = torch.zeros(16, device=cuda), torch.randn(4096, 4096, device=cuda)
    side = torch.cuda.Stream(cuda)

    def partly() -> None:
        side.wait_stream(torch.cuda.current_stream(cuda))
        with torch.cuda.stream(side):
            a @ a
        small.add_(1)

    m = measure(partly, cuda, RULE)
    print(f"partly off-stream: {m.timer} {m.median_s * 1e6:.1f} us, notes {m.notes}")
    assert m.timer == "wall" and any("part of the calls' work ran off the current stream" in n for n in m.notes)
    assert m.median_s > 100e-6  # a 4096^3 float32 gemm: about a millisecond


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
    if not m.converged:  # the events' 0.5 us steps, not noise: said so (resolution_limited)
        print(f"unconverged: the steps alone give rel-IQR up to {m.resolution_rel_iqr:.4f}")
        assert m.resolution_limited


def test_a_cold_cases_peak_memory_is_its_hot_twins(cuda):
    a = torch.randn(1024, 1024, device=cuda)

    def case(cold: bool) -> Case:
        return Case("test", f"peak/{cold}", {}, build=lambda device: Workload(lambda: a @ a), cold=cold)

    hot, cold = (execute(case(c), cuda, RULE).figures for c in (False, True))
    print(f"peak_mem_bytes hot {hot['peak_mem_bytes']}, cold {cold['peak_mem_bytes']}")
    assert cold["l2_flush"] and cold["peak_mem_bytes"] == hot["peak_mem_bytes"]
