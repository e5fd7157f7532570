"""The figures of a parsed trace: per GPU device, per ProfilerStep, and on the host.

Definitions (all times in microseconds):
- GPU events: complete events of category kernel, gpu_memcpy or gpu_memset, grouped by `args.device` (else pid).
- span = last end - first start; busy = length of the union of the events' intervals; idle = span - busy.
- compute = length of the union of the `kernel` events that are not communication (nccl/rccl/hccl);
  non_compute = busy - compute (copies, sets and communication not hidden under compute).
- per kernel name and per class: count, total (sum of durations, so overlapping streams add up), mean, share.
  Kernel names share the total kernel time; classes, which include memcpy and memset, share the total GPU time.
- tensor_core_share = gemm_tensor_core time / (gemm_tensor_core + gemm_simt) time; None without gemms.
- steps: a GPU event belongs to the ProfilerStep in which the host call that launched it (same correlation id)
  started; events launched outside every step are in the device's figures but in no step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reports.format.kineto.events import DTOH, HTOD, KERNEL, MEMCPY, GpuEvents, Trace
from reports.format.kineto.kernels import CLASS_NAMES, COMMUNICATION, GEMM_SIMT, GEMM_TENSOR_CORE, classify_kernel

_CLASS_INDEX = {name: index for index, name in enumerate(CLASS_NAMES)}
# The time figures of a device or step, in the order tables and JSON give them.
FIGURES = ("span_us", "busy_us", "idle_us", "compute_us", "non_compute_us")


@dataclass(frozen=True)
class KernelStat:
    """One kernel name's share of the kernel time."""

    name: str
    kernel_class: str
    count: int
    total_us: float
    mean_us: float
    share: float  # of the summed duration of all kernel events


@dataclass(frozen=True)
class ClassStat:
    """One class's share of the GPU time."""

    name: str
    count: int
    total_us: float
    share: float  # of the summed duration of all GPU events


@dataclass(frozen=True)
class Breakdown:
    """The figures for one set of GPU events (a device, or a device within one step)."""

    event_count: int
    kernel_count: int
    span_us: float
    busy_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    tensor_core_share: float | None
    kernels: list[KernelStat]  # by total time, largest first
    classes: list[ClassStat]  # in CLASS_NAMES order, classes without events left out


@dataclass(frozen=True)
class StepBreakdown:
    step: str
    breakdown: Breakdown


@dataclass(frozen=True)
class DeviceSummary:
    device: Any  # the label found in the trace: args.device, else pid
    name: str | None  # from the trace's deviceProperties, where present
    overall: Breakdown
    steps: list[StepBreakdown]


@dataclass(frozen=True)
class HostSummary:
    """Host-side figures: synchronizing calls, and bytes copied between host and device (all devices)."""

    sync_calls: dict[str, int]
    sync_us: float
    htod_bytes: int
    htod_copies: int
    dtoh_bytes: int
    dtoh_copies: int
    copies_without_bytes: int  # HtoD/DtoH copies whose size the trace does not give


@dataclass(frozen=True)
class TraceSummary:
    path: str
    devices: list[DeviceSummary]
    host: HostSummary
    steps: list[str]


def summarize_trace(trace: Trace) -> TraceSummary:
    """Everything `python -m reports trace` prints for one file."""
    event_class = classify_events(trace.gpu, trace.names)
    # Rows grouped by step (the unattributed, -1, first), so each step's rows are one slice: a trace with
    # thousands of steps costs one sort, not one pass over all events per step.
    event_step = assign_steps(trace)
    by_step = np.argsort(event_step, kind="stable")
    bounds = np.searchsorted(event_step[by_step], np.arange(len(trace.steps) + 1))
    devices = []
    for device_index, label in enumerate(trace.devices):
        steps = []
        for number, step in enumerate(trace.steps):
            rows = by_step[bounds[number] : bounds[number + 1]]
            rows = rows[trace.gpu.device[rows] == device_index]
            steps.append(StepBreakdown(step.name, breakdown(trace.gpu, event_class, trace.names, rows)))
        overall = breakdown(trace.gpu, event_class, trace.names, trace.gpu.device == device_index)
        devices.append(DeviceSummary(label, trace.device_names.get(label), overall, steps))
    return TraceSummary(str(trace.path), devices, summarize_host(trace), [step.name for step in trace.steps])


def classify_events(events: GpuEvents, names: Sequence[str]) -> np.ndarray:
    """Each event's index into CLASS_NAMES: kernels by name, copies and sets by their kind."""
    name_class = np.array([_CLASS_INDEX[classify_kernel(name)] for name in names], dtype=np.int8)
    by_kind = np.where(events.kind == MEMCPY, _CLASS_INDEX["memcpy"], _CLASS_INDEX["memset"])
    return np.where(events.kind == KERNEL, name_class[events.name] if len(names) else 0, by_kind)


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of the intervals [start, end): sort by start, sweep with a running maximum end."""
    if len(start) == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    start, end = start[order], np.maximum.accumulate(end[order])
    opens = np.empty(len(start), dtype=bool)
    opens[0] = True
    opens[1:] = start[1:] > end[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, len(start) - 1)
    return float(np.sum(end[last] - start[first]))


def breakdown(events: GpuEvents, event_class: np.ndarray, names: Sequence[str], rows: np.ndarray) -> Breakdown:
    """The figures of the events selected by `rows` (a boolean mask over `events`, or row indices)."""
    chosen, chosen_class = events.select(rows), event_class[rows]
    if len(chosen) == 0:
        return Breakdown(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, None, [], [])
    span = float(chosen.end.max() - chosen.start.min())
    busy = union_length(chosen.start, chosen.end)
    is_compute = (chosen.kind == KERNEL) & (chosen_class != _CLASS_INDEX[COMMUNICATION])
    compute = union_length(chosen.start[is_compute], chosen.end[is_compute])
    duration = chosen.end - chosen.start
    class_total = np.bincount(chosen_class, weights=duration, minlength=len(CLASS_NAMES))
    gemm = class_total[_CLASS_INDEX[GEMM_TENSOR_CORE]] + class_total[_CLASS_INDEX[GEMM_SIMT]]
    return Breakdown(
        event_count=len(chosen),
        kernel_count=int(np.count_nonzero(chosen.kind == KERNEL)),
        span_us=span,
        busy_us=busy,
        idle_us=span - busy,
        compute_us=compute,
        non_compute_us=busy - compute,
        tensor_core_share=float(class_total[_CLASS_INDEX[GEMM_TENSOR_CORE]] / gemm) if gemm > 0 else None,
        kernels=_kernel_stats(chosen, duration, chosen_class, names),
        classes=_class_stats(chosen_class, class_total),
    )


def _kernel_stats(
    events: GpuEvents, duration: np.ndarray, event_class: np.ndarray, names: Sequence[str]
) -> list[KernelStat]:
    is_kernel = events.kind == KERNEL
    name_ids = events.name[is_kernel]
    count = np.bincount(name_ids, minlength=len(names))
    total = np.bincount(name_ids, weights=duration[is_kernel], minlength=len(names))
    kernel_time = float(total.sum())
    used = np.flatnonzero(count)
    used = used[np.lexsort((used, -total[used]))]
    name_class = dict(zip(name_ids.tolist(), event_class[is_kernel].tolist(), strict=True))
    return [
        KernelStat(
            name=names[i],
            kernel_class=CLASS_NAMES[name_class[i]],
            count=int(count[i]),
            total_us=float(total[i]),
            mean_us=float(total[i] / count[i]),
            share=float(total[i] / kernel_time) if kernel_time > 0 else 0.0,
        )
        for i in used
    ]


def _class_stats(event_class: np.ndarray, class_total: np.ndarray) -> list[ClassStat]:
    count = np.bincount(event_class, minlength=len(CLASS_NAMES))
    gpu_time = float(class_total.sum())
    return [
        ClassStat(name, int(count[i]), float(class_total[i]), float(class_total[i] / gpu_time) if gpu_time else 0.0)
        for i, name in enumerate(CLASS_NAMES)
        if count[i]
    ]


def launch_times(trace: Trace) -> np.ndarray:
    """Per GPU event, the start of the host call with the same correlation id (NaN when there is none)."""
    correlation = trace.gpu.correlation
    if len(trace.launch_correlation) == 0:
        return np.full(len(correlation), np.nan)
    order = np.argsort(trace.launch_correlation, kind="stable")
    known = trace.launch_correlation[order]
    at = np.minimum(np.searchsorted(known, correlation), len(known) - 1)
    found = (known[at] == correlation) & (correlation >= 0)
    return np.where(found, trace.launch_start[order][at], np.nan)


def assign_steps(trace: Trace) -> np.ndarray:
    """Per GPU event, the index in trace.steps of the step [start, end) its launch fell in; -1 for none."""
    if not trace.steps:
        return np.full(len(trace.gpu), -1)
    starts = np.array([step.start for step in trace.steps])
    ends = np.array([step.end for step in trace.steps])
    launched = launch_times(trace)
    step = np.searchsorted(starts, launched, side="right") - 1
    inside = (step >= 0) & (launched < ends[np.maximum(step, 0)])  # NaN compares false: no launch, no step
    return np.where(inside, step, -1)


def summarize_host(trace: Trace) -> HostSummary:
    """Synchronizing calls and host<->device bytes; copies are counted from the GPU's memcpy events."""
    gpu = trace.gpu
    htod, dtoh = gpu.direction == HTOD, gpu.direction == DTOH
    known = gpu.nbytes >= 0
    return HostSummary(
        sync_calls=dict(sorted(trace.sync_calls.items())),
        sync_us=trace.sync_us,
        htod_bytes=int(gpu.nbytes[htod & known].sum()),
        htod_copies=int(np.count_nonzero(htod)),
        dtoh_bytes=int(gpu.nbytes[dtoh & known].sum()),
        dtoh_copies=int(np.count_nonzero(dtoh)),
        copies_without_bytes=int(np.count_nonzero((htod | dtoh) & ~known)),
    )


def no_gpu_message(summary: TraceSummary) -> str | None:
    """The notice for a trace without GPU events (a CPU-only profile, or one recorded without CUDA activities)."""
    if summary.devices:
        return None
    return f"{summary.path}: no GPU events (kernel, gpu_memcpy, gpu_memset) in this trace; host figures only"


def summary_to_json(summary: TraceSummary, top: int) -> dict[str, Any]:
    """The JSON object of one file, as `reports trace --json` prints it and the trace observer stores it:
    `{"file", "devices": [...], "host": {...}, "steps": [...], "message"}`."""
    return {
        "file": summary.path,
        "devices": [_device_json(device, top) for device in summary.devices],
        "host": _host_json(summary.host),
        "steps": summary.steps,
        "message": no_gpu_message(summary),
    }


def _device_json(device: DeviceSummary, top: int) -> dict[str, Any]:
    return {
        "device": device.device,
        "name": device.name,
        **_breakdown_json(device.overall, top),
        "steps": [{"step": step.step, **_breakdown_json(step.breakdown, top)} for step in device.steps],
    }


def _breakdown_json(figures: Breakdown, top: int) -> dict[str, Any]:
    share = figures.tensor_core_share
    return {
        **{key: round(getattr(figures, key), 3) for key in FIGURES},
        "tensor_core_share": None if share is None else round(share, 4),
        "kernel_count": figures.kernel_count,
        "event_count": figures.event_count,
        "top_kernels": [
            {
                "name": kernel.name,
                "class": kernel.kernel_class,
                "count": kernel.count,
                "total_us": round(kernel.total_us, 3),
                "mean_us": round(kernel.mean_us, 3),
                "share": round(kernel.share, 4),
            }
            for kernel in figures.kernels[:top]
        ],
        "classes": [
            {"class": c.name, "count": c.count, "total_us": round(c.total_us, 3), "share": round(c.share, 4)}
            for c in figures.classes
        ],
    }


def _host_json(host: HostSummary) -> dict[str, Any]:
    return {
        "sync_call_count": sum(host.sync_calls.values()),
        "sync_calls": host.sync_calls,
        "sync_us": round(host.sync_us, 3),
        "htod_bytes": host.htod_bytes,
        "htod_copies": host.htod_copies,
        "dtoh_bytes": host.dtoh_bytes,
        "dtoh_copies": host.dtoh_copies,
        "copies_without_bytes": host.copies_without_bytes,
    }
