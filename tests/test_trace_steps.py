"""A ProfilerStep's span on a device (reports/format/kineto/summary.py): consecutive steps tile the device's time,
so the device waiting while the host loads a step's batch is that step's idle time, as it is the whole trace's.

The pair of real traces in tests/data/traces/workers/ (pytorch/kineto's TensorBoard samples: ResNet-50 on a V100,
identical but for the DataLoader's workers) exists to show that wait: with 0 workers the whole trace is 39 % idle,
with 4 workers 23 %. Opened at their own first GPU event, the steps held none of it and ranked the runs the other
way round (15 % idle with 0 workers, 14-35 % with 4)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from reports.format.kineto.events import read_trace
from reports.format.kineto.summary import Breakdown, summarize_trace
from tests.resultfiles import TRACES

WORKERS = {workers: TRACES / "workers" / f"kineto_resnet50_nw{workers}.json.gz" for workers in (0, 4)}


def idle_share(figures: Breakdown) -> float:
    return figures.idle_us / figures.span_us


@pytest.fixture(scope="module")
def devices():
    """{workers: the one GPU's summary} of each real trace."""
    found = {}
    for workers, path in WORKERS.items():
        (device,) = summarize_trace(read_trace(path)).devices
        found[workers] = device
    return found


def test_step_idle_ranks_the_data_loader_runs_as_the_whole_trace_does(devices):
    whole = {workers: idle_share(device.overall) for workers, device in devices.items()}
    assert whole[0] == pytest.approx(0.394, abs=0.001) and whole[4] == pytest.approx(0.233, abs=0.001)
    steps = {workers: [idle_share(step.breakdown) for step in device.steps] for workers, device in devices.items()}
    assert [len(shares) for shares in steps.values()] == [6, 6]  # ProfilerStep#5 to #10
    assert statistics.median(steps[0]) > 0.39 > 0.25 > statistics.median(steps[4])
    assert min(steps[0]) > statistics.median(steps[4])  # each 0-worker step idler than a typical 4-worker one
    for workers, device in devices.items():
        idle, span = (sum(getattr(step.breakdown, key) for step in device.steps) for key in ("idle_us", "span_us"))
        assert idle / span == pytest.approx(whole[workers], abs=0.05)  # the steps hold most of the trace's time


@pytest.mark.parametrize("workers", sorted(WORKERS))
def test_steps_tile_the_device_time(devices, workers):
    """Each step opens where the one before ended on the device, so the steps' spans add up to the time from the
    first step's host start to the last step's last GPU event, and its idle is that time less the steps' busy."""
    trace = read_trace(WORKERS[workers])
    steps = devices[workers].steps
    events = trace.gpu
    last_end = events.end.max()  # (every GPU event of these traces was launched inside a step)
    first_open = trace.steps[0].start
    assert sum(step.breakdown.span_us for step in steps) == pytest.approx(last_end - first_open, abs=1e-6)


def test_a_step_holds_the_wait_for_its_batch(tmp_path: Path):
    """Two steps whose host loads a batch for 50 us before launching one 10 us kernel: each waits, each is idle."""
    def event(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 100, "tid": 7, "ts": ts,
                "dur": dur, "args": args}

    events = [event("user_annotation", "ProfilerStep#1", 0, 100), event("user_annotation", "ProfilerStep#2", 100, 100),
              event("cuda_runtime", "cudaLaunchKernel", 50, 1, correlation=1),
              event("cuda_runtime", "cudaLaunchKernel", 150, 1, correlation=2),
              event("kernel", "volta_sgemm_128x64_nn", 52, 10, device=0, correlation=1),
              event("kernel", "volta_sgemm_128x64_nn", 152, 10, device=0, correlation=2)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    first, second = (step.breakdown for step in summarize_trace(read_trace(path)).devices[0].steps)
    assert (first.span_us, first.busy_us, first.idle_us) == (62, 10, 52)  # from the step's host start
    assert (second.span_us, second.busy_us, second.idle_us) == (100, 10, 90)  # from where step 1 ended
