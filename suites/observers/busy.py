"""Device-busy time of a training step, beside its wall time: how much of the step the GPU actually worked.

A step's figure is its wall time (suites/core/timing.py), launch gaps, host syncs and data loading included. What
the GPU did in it comes from a short torch.profiler run after the timed window (each profiler step synchronized:
suites/observers/tracing.py): per active ProfilerStep, the union of the kernel, copy and memset intervals of the
work launched in that step (the same summary as `python -m reports trace`, so overlapping streams are counted
once), and the median over the steps. Per step, not the whole trace over the step count: Kineto keeps a GPU
activity by its device timestamp, so kernels of the warm-up step that ran into the first active one are in the
trace, and only their launch, outside every active step, tells them apart. The runner then calls a step
host-bound when the device was busy for less than `HOST_BOUND_BUSY_SHARE` of it. CUDA only: on a CPU the host is
the device.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import torch

from reports.format.errors import InputError
from reports.format.kineto.events import read_trace
from reports.format.kineto.summary import summarize_trace
from suites.core.cases import Case, Workload
from suites.core.runner import Extension, first_line
from suites.observers.tracing import profile_calls


class NoBusyTime(Exception):
    """A trace that cannot give a step's busy time; the message says why (it becomes `device_busy_error`)."""


# Where the trace has no GPU activity at all, CUPTI recorded none: the profiler could not attach to the device
# (CUPTI missing or refused, e.g. ERR_NVGPUCTRPERM, or another profiler holding it) or the step launched nothing.
NO_GPU_EVENTS = ("the profiler's trace holds no GPU kernel, copy or memset events (CUPTI recorded none: no CUPTI, "
                 "no permission, another profiler attached, or a step that launched no GPU work), so device-busy "
                 "time is unknown and host_bound is not judged")
NO_STEPS = "the profiler's trace holds no ProfilerStep to attribute the GPU work to"


def busy_seconds_per_step(trace: Path) -> float:
    """The median over the trace's ProfilerSteps of the device time busy with the work each launched, every GPU
    of the trace summed; NoBusyTime (with why) when the trace has no device events or no steps."""
    summary = summarize_trace(read_trace(trace))
    if not summary.devices:
        raise NoBusyTime(NO_GPU_EVENTS)
    if not summary.steps:
        raise NoBusyTime(NO_STEPS)
    per_step = [sum(device.steps[i].breakdown.busy_us for device in summary.devices)
                for i in range(len(summary.steps))]
    return statistics.median(per_step) / 1e6


def busy_fields(trace: Path) -> dict:
    """extra_info of a profiled step: `device_busy_s`, or `device_busy_error` saying why there is none (never
    silently nothing: a missing busy time also means host_bound was not judged)."""
    try:
        return {"device_busy_s": busy_seconds_per_step(trace)}
    except NoBusyTime as exc:
        return {"device_busy_error": str(exc)}
    except InputError as exc:
        return {"device_busy_error": first_line(exc)}


class BusyExtension(Extension):
    """Adds `device_busy_s` (per step) to every CUDA `step` case, or `device_busy_error` when it cannot."""

    def after(self, case: Case, workload: Workload, device: torch.device) -> dict:
        if case.kind != "step" or device.type != "cuda":
            return {}
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "busy.json"
                profile_calls(workload.fn, device, path)
                return busy_fields(path)
        except (RuntimeError, OSError) as exc:
            return {"device_busy_error": first_line(exc)}
