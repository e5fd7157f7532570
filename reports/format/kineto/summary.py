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
- a step's span on a device ends where its last GPU event there ends, and opens where the step before it ended on
  that device (for the first step, or after a step without events there, at the step's host start, when the host
  began it), or at its own first event if that came earlier (streams that overlap two steps). Consecutive steps so
  tile the device's time: the device waiting while the host loads a step's batch is that step's idle time. Opened
  at its own first GPU event, a step held none of that wait: with 0 data-loader workers a ResNet-50 step on a V100
  read 15 % idle where the whole trace reads 39 % (tests/test_trace_steps.py).
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
    event_step = assign_steps(trace)
    device = trace.gpu.device.astype(np.int64)
    # Every device's figures at once, and every (device, step)'s (events launched outside every step go to one
    # group past the last, left out): a pass over the events per device was quadratic, 67 to 120 s for a trace of
    # 100,000 device ids (tools/bench_trace_devices.py).
    count = len(trace.devices)
    overall = breakdowns(trace.gpu, event_class, trace.names, device, count)
    per_step = len(trace.steps)
    in_step = np.where(event_step >= 0, device * per_step + event_step, count * per_step)
    stepped = breakdowns(trace.gpu, event_class, trace.names, in_step, count * per_step + 1,
                         step_opens(trace, in_step, count))
    devices = [
        DeviceSummary(label, trace.device_names.get(label), overall[index],
                      [StepBreakdown(step.name, stepped[index * per_step + number])
                       for number, step in enumerate(trace.steps)])
        for index, label in enumerate(trace.devices)
    ]
    return TraceSummary(str(trace.path), devices, summarize_host(trace), [step.name for step in trace.steps])


def classify_events(events: GpuEvents, names: Sequence[str]) -> np.ndarray:
    """Each event's index into CLASS_NAMES: kernels by name, copies and sets by their kind."""
    name_class = np.array([_CLASS_INDEX[classify_kernel(name)] for name in names], dtype=np.int8)
    by_kind = np.where(events.kind == MEMCPY, _CLASS_INDEX["memcpy"], _CLASS_INDEX["memset"])
    return np.where(events.kind == KERNEL, name_class[events.name] if len(names) else 0, by_kind)


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of the intervals [start, end)."""
    return float(union_lengths(start, end, np.zeros(len(start), dtype=np.int64), 1)[0])


def union_lengths(start: np.ndarray, end: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Per group (0 to groups - 1), the length of the union of its intervals [start, end): a sweep over every
    start (+1) and end (-1) sorted by group and time; a stretch between two neighbouring times of one group is
    covered when the running count is above 0 (each group's count ends at 0, so groups never mix)."""
    if len(start) == 0:
        return np.zeros(groups)
    times = np.concatenate([start, end])
    step = np.concatenate([np.ones(len(start), dtype=np.int64), np.full(len(end), -1, dtype=np.int64)])
    owner = np.concatenate([group, group])
    order = np.lexsort((-step, times, owner))  # at one time, starts before ends: no stretch opens at a touch
    times, owner = times[order], owner[order]
    covered = (np.cumsum(step[order])[:-1] > 0) & (owner[1:] == owner[:-1])
    return np.bincount(owner[:-1], weights=np.where(covered, np.diff(times), 0.0), minlength=groups)


def step_opens(trace: Trace, in_step: np.ndarray, devices: int) -> np.ndarray:
    """Where the span of each (device, step) group of summarize_trace opens at the latest (see the module's
    definitions): the end of the previous step's last GPU event on the device, else the step's host start; the
    group of events outside every step (the last) opens at its first event."""
    per_step = len(trace.steps)
    groups = devices * per_step + 1
    last = np.full(groups, -np.inf)
    np.maximum.at(last, in_step, trace.gpu.end)
    before = np.concatenate([[-np.inf], last[:-2]])  # each step group's predecessor, the one outside steps left out
    before[np.arange(devices * per_step) % max(per_step, 1) == 0] = -np.inf  # a device's first step has none
    host = np.tile([step.start for step in trace.steps], devices)
    return np.append(np.where(np.isfinite(before), before, host), np.inf)


def breakdowns(events: GpuEvents, event_class: np.ndarray, names: Sequence[str], group: np.ndarray,
               groups: int, opens: np.ndarray | None = None) -> list[Breakdown]:
    """The figures of each group of events (`group`: each event's group, 0 to groups - 1), all computed at once
    over the events, so that many small groups cost no more than a few large ones. A group's span runs from its
    first event, or from `opens` (per group) where that is earlier, to its last event's end."""
    duration = events.end - events.start
    is_kernel = events.kind == KERNEL
    is_compute = is_kernel & (event_class != _CLASS_INDEX[COMMUNICATION])
    first = np.full(groups, np.inf) if opens is None else opens.astype(float)
    np.minimum.at(first, group, events.start)
    last = np.full(groups, -np.inf)
    np.maximum.at(last, group, events.end)
    busy = union_lengths(events.start, events.end, group, groups)
    compute = union_lengths(events.start[is_compute], events.end[is_compute], group[is_compute], groups)
    classes = len(CLASS_NAMES)
    cell = group * classes + event_class
    class_total = np.bincount(cell, weights=duration, minlength=groups * classes).reshape(groups, classes)
    class_count = np.bincount(cell, minlength=groups * classes).reshape(groups, classes)
    event_count = np.bincount(group, minlength=groups)
    kernel_count = np.bincount(group[is_kernel], minlength=groups)
    kernels = _kernel_stats(events.name[is_kernel], duration[is_kernel], event_class[is_kernel], names,
                            group[is_kernel], groups)
    return [_breakdown(*figures) for figures in zip(
        event_count.tolist(), kernel_count.tolist(), (last - first).tolist(), busy.tolist(), compute.tolist(),
        class_total.tolist(), class_count.tolist(), kernels, strict=True)]


def _breakdown(events: int, kernels: int, span: float, busy: float, compute: float, class_total: list[float],
               class_count: list[int], kernel_stats: list[KernelStat]) -> Breakdown:
    """One group's Breakdown from its figures."""
    if events == 0:
        return Breakdown(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, None, [], [])
    gemm = class_total[_CLASS_INDEX[GEMM_TENSOR_CORE]] + class_total[_CLASS_INDEX[GEMM_SIMT]]
    gpu_time = sum(class_total)
    return Breakdown(
        event_count=events,
        kernel_count=kernels,
        span_us=span,
        busy_us=busy,
        idle_us=span - busy,
        compute_us=compute,
        non_compute_us=busy - compute,
        tensor_core_share=class_total[_CLASS_INDEX[GEMM_TENSOR_CORE]] / gemm if gemm > 0 else None,
        kernels=kernel_stats,
        classes=[ClassStat(name, class_count[i], class_total[i], class_total[i] / gpu_time if gpu_time else 0.0)
                 for i, name in enumerate(CLASS_NAMES) if class_count[i]],
    )


def _kernel_stats(name: np.ndarray, duration: np.ndarray, event_class: np.ndarray, names: Sequence[str],
                  group: np.ndarray, groups: int) -> list[list[KernelStat]]:
    """Per group, its kernel names by total time, largest first (ties by first appearance in the trace): counted
    over the (group, name) pairs that occur, never over every name of the trace per group."""
    pair = group * max(len(names), 1) + name
    used, first, inverse, count = np.unique(pair, return_index=True, return_inverse=True, return_counts=True)
    total = np.bincount(inverse, weights=duration, minlength=len(used))
    owner, name_id = used // max(len(names), 1), used % max(len(names), 1)
    kernel_time = np.bincount(owner, weights=total, minlength=groups)
    order = np.lexsort((name_id, -total, owner))
    stats = [
        KernelStat(names[i], CLASS_NAMES[c], n, t, t / n, t / kernel_time[g] if kernel_time[g] > 0 else 0.0)
        for i, c, n, t, g in zip(name_id[order].tolist(), event_class[first[order]].tolist(), count[order].tolist(),
                                 total[order].tolist(), owner[order].tolist(), strict=True)
    ]
    bounds = np.searchsorted(owner[order], np.arange(groups + 1)).tolist()
    return [stats[bounds[g]:bounds[g + 1]] for g in range(groups)]


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
