"""Device-busy time of a training step from real Kineto traces: per profiler step, from the work each step
launched, so that kernels of the step before the window (kept by Kineto for their device timestamps) are not
counted. The traces are HolisticTraceAnalysis's real ones (tests/data/traces/README.md)."""

import gzip
import json
import statistics
from pathlib import Path

import pytest

from reports.format.kineto.events import read_trace
from reports.format.kineto.summary import summarize_trace
from suites.observers.busy import NO_GPU_EVENTS, NoBusyTime, busy_fields, busy_seconds_per_step
from tests.resultfiles import TRACES

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.fixture(scope="module")
def original_steps_s() -> list[float]:
    """The busy time of each ProfilerStep of the real V100 trace, from its summary."""
    summary = summarize_trace(read_trace(TRACES / "ns_resolution_trace.json.gz"))
    return [sum(d.steps[i].breakdown.busy_us for d in summary.devices) / 1e6 for i in range(len(summary.steps))]


def test_busy_time_is_the_median_of_the_steps(original_steps_s):
    assert len(original_steps_s) == 5
    busy = busy_seconds_per_step(TRACES / "ns_resolution_trace.json.gz")
    assert busy == pytest.approx(statistics.median(original_steps_s))
    assert 0.094 < busy < 0.095  # a V100 training step of about 95 ms of kernels
    assert busy_fields(TRACES / "ns_resolution_trace.json.gz") == {"device_busy_s": busy}


def test_a_trace_without_gpu_events_says_why_busy_time_is_absent():
    """A real trace in which CUPTI recorded no GPU work (a CPU-only profile, as a GPU run gives when CUPTI is
    missing or refused): no busy time, and the field that says so, never silence."""
    with pytest.raises(NoBusyTime, match="no GPU kernel, copy or memset events"):
        busy_seconds_per_step(TRACES / "cpu_only.json.gz")
    fields = busy_fields(TRACES / "cpu_only.json.gz")
    assert fields == {"device_busy_error": NO_GPU_EVENTS} and "host_bound is not judged" in NO_GPU_EVENTS


def _as_if_first_step_were_warm_up(source: Path, out: Path) -> Path:
    """The real trace as Kineto writes it when its first ProfilerStep is the schedule's warm-up: that step's host
    events are gone, and of the GPU work it launched only what ran on into the next step is kept (Kineto keeps a
    GPU activity by its device timestamp)."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    events = data["traceEvents"]
    steps = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    window = steps[1]["ts"]  # the first active step begins here

    def kept(event: dict) -> bool:
        if "ts" not in event or event.get("ph") == "M":
            return True
        return event["ts"] >= window  # host events of the warm-up step, and GPU work that ended there, go
    data["traceEvents"] = [e for e in events if kept(e)]
    out.write_bytes(gzip.compress(json.dumps(data).encode()))
    return out


def test_kernels_of_the_step_before_the_window_are_not_counted(tmp_path, original_steps_s):
    """In this real trace the host ran ahead (step 101's host part took 35 ms, its kernels 95 ms), so step 101's
    kernels run deep into step 102: with step 101 as warm-up they land in the window. Per step they are not
    counted; the whole trace over the step count (the old figure) counted them."""
    original = TRACES / "ns_resolution_trace.json.gz"
    trace = _as_if_first_step_were_warm_up(original, tmp_path / "warm_up_first.json.gz")
    summary = summarize_trace(read_trace(trace))
    assert len(summary.steps) == 4
    overall_per_step = summary.devices[0].overall.busy_us / 1e6 / len(summary.steps)
    busy = busy_seconds_per_step(trace)
    assert busy == pytest.approx(statistics.median(original_steps_s[1:]), rel=1e-6)
    assert overall_per_step > busy * 1.1  # the warm-up step's kernels, more than a tenth of a step
