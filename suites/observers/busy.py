"""Device-busy time of a training step, beside its wall time: how much of the step the GPU actually worked.

A step's figure is its wall time (suites/core/timing.py), launch gaps, host syncs and data loading included. What
the GPU did in it comes from a short torch.profiler run after the timed window: the union of the kernel, copy
and memset intervals on the device over the profiler's active steps (the same summary as `python -m reports
trace`, so overlapping streams are counted once), divided by the steps. The runner then calls a step host-bound
when the device was busy for less than `HOST_BOUND_BUSY_SHARE` of it. CUDA only: on a CPU the host is the device.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from reports.errors import InputError
from reports.trace.events import read_trace
from reports.trace.summary import summarize_trace
from suites.core.cases import Case, Workload
from suites.core.runner import Extension, first_line
from suites.observers.tracing import ACTIVE, profile_calls


def busy_seconds_per_call(trace: Path, calls: int = ACTIVE) -> float | None:
    """The device's busy time per profiled call, from a trace of `calls` active calls (None: no device events)."""
    summary = summarize_trace(read_trace(trace))
    if not summary.devices:
        return None
    return sum(device.overall.busy_us for device in summary.devices) / 1e6 / calls


class BusyExtension(Extension):
    """Adds `device_busy_s` (per step) to every CUDA `step` case, or `device_busy_error` when it cannot."""

    def after(self, case: Case, workload: Workload, device: torch.device) -> dict:
        if case.kind != "step" or device.type != "cuda":
            return {}
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "busy.json"
                profile_calls(workload.fn, device, path)
                busy = busy_seconds_per_call(path)
        except (RuntimeError, OSError, InputError) as exc:
            return {"device_busy_error": first_line(exc)}
        return {} if busy is None else {"device_busy_s": busy}
