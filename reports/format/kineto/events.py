"""Read a Kineto trace into the few columns the summary needs, one event at a time.

Only four kinds of events matter: GPU activities (kernels, copies, sets), host runtime/driver calls (to find each
GPU activity's launch and to count synchronizing calls), and `ProfilerStep#N` annotations. Each GPU event keeps
eight numbers in `array` columns (about 50 bytes), each runtime call two; everything else is dropped as soon as
it is decoded, so memory grows with the number of GPU events, not with the size of the file.
Timestamps are kept relative to an origin near the first event: Kineto's epoch microseconds (~1.7e15) leave
float64 a resolution of 0.25 us, while `ts - origin` and `start + dur` near zero are exact to the nanosecond.
A timestamp or duration beyond MAX_TIME_US (2**53 us, 285 years) is no time a trace can hold: float64 no longer
keeps whole microseconds there (1e300 + 5 is 1e300: a kernel would last 0 us) and spans between such events
overflow to `inf`, so such an event is left out and counted in one warning, as one without a usable time is.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from reports.format.errors import InputError
from reports.format.kineto.stream import iter_trace_events
from reports.format.validate import warn

# GPU event kinds, in the order of the per-kind codes stored in GpuEvents.kind.
KERNEL, MEMCPY, MEMSET = 0, 1, 2
GPU_KIND_NAMES = ("kernel", "memcpy", "memset")
# Lower-cased categories: recent Kineto writes kernel/gpu_memcpy/gpu_memset (also on ROCm), PyTorch <= 1.10 wrote
# Kernel/Memcpy/Memset.
GPU_CATEGORIES = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET}
_RUNTIME, _HOST, _IGNORED = 3, 4, 5
MAX_TIME_US = float(2**53)  # 9.0e15 us: beyond it float64 loses whole microseconds

# Copy directions, stored in GpuEvents.direction: from the name ('Memcpy HtoD (Pageable -> Device)') or, on
# ROCm traces, from args.kind ('HtoD').
NO_COPY, HTOD, DTOH, OTHER_COPY = 0, 1, 2, 3
_DIRECTION = re.compile(r"\b(HtoD|DtoH)\b")

# Host calls that block the CPU until the GPU has caught up: explicit synchronizations, and copies without
# 'Async' (cudaMemcpy, cudaMemcpy2D, cuMemcpyHtoD_v2, hipMemcpyWithStream, ...), in the runtime and driver APIs
# of CUDA and HIP.
SYNC_CALL = re.compile(
    r"^(cuda|hip)(Device|Stream|Event)Synchronize|^cu(Ctx|Stream|Event)Synchronize|^(cuda|hip|cu)Memcpy(?!\w*Async)"
)


@dataclass(frozen=True)
class GpuEvents:
    """GPU events as parallel numpy columns (one row per event, in file order)."""

    device: np.ndarray  # index into Trace.devices
    start: np.ndarray  # us since Trace.origin_us
    end: np.ndarray
    kind: np.ndarray  # KERNEL, MEMCPY or MEMSET
    name: np.ndarray  # index into Trace.names
    correlation: np.ndarray  # links to the launching runtime call; -1 when absent
    nbytes: np.ndarray  # bytes moved by a copy or set; -1 when unknown
    direction: np.ndarray  # HTOD, DTOH, OTHER_COPY, or NO_COPY for kernels and sets

    def __len__(self) -> int:
        return len(self.start)

    def select(self, mask: np.ndarray) -> GpuEvents:
        """The rows where `mask` is true (a boolean array or an index array)."""
        return GpuEvents(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})


@dataclass(frozen=True)
class ProfilerStep:
    """One `ProfilerStep#N` annotation on the host: [start, end) in us since Trace.origin_us."""

    name: str
    start: float
    end: float


@dataclass(frozen=True)
class Trace:
    """What the summary needs from one trace file."""

    path: Path
    origin_us: float  # the epoch microsecond all times here are relative to
    gpu: GpuEvents
    names: list[str]  # GPU event names, indexed by GpuEvents.name
    devices: list[Any]  # device labels (args.device, else pid), indexed by GpuEvents.device
    device_names: dict[Any, str]  # label -> product name, from deviceProperties where present
    launch_correlation: np.ndarray  # runtime/driver calls: correlation id ...
    launch_start: np.ndarray  # ... and start time
    steps: list[ProfilerStep]  # sorted by start
    sync_calls: Counter[str]  # synchronizing host calls by name
    sync_us: float  # their total duration
    rank: int | None = None  # the process group rank the trace names (distributedInfo), where it does


def read_trace(path: Path) -> Trace:
    """Parse one trace file (.json or .json.gz); raises InputError when it cannot be read or is malformed.

    An event whose times cannot be right (a timestamp or duration missing, not a number, negative or not finite)
    is left out and counted in one warning: a negative duration would make busy time negative and shares exceed
    100 %, and one such event does not make the rest of a trace unusable. An entry that is not an event (not a
    JSON object) makes the file malformed.
    """
    metadata: dict[str, Any] = {}
    collector = _Collector()
    for index, event in enumerate(iter_trace_events(path, metadata)):
        if not isinstance(event, dict):
            raise InputError(f"{path}: entry #{index} of traceEvents is not an event (an object) but "
                             f"{json.dumps(event)[:60]}")
        try:
            collector.add(event)
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(f"{path}: malformed event #{index} in traceEvents: {exc!r:.200}") from exc
    if collector.bad_times:
        warn(f"{path}: left out {collector.bad_times} event(s) with a missing, non-numeric, negative or non-finite "
             "time")
    if collector.huge_times:
        warn(f"{path}: left out {collector.huge_times} event(s) with a timestamp or duration beyond "
             f"{MAX_TIME_US:.3g} us (285 years), where float64 keeps no whole microseconds")
    properties = metadata.get("deviceProperties")
    if properties is not None and not isinstance(properties, list):
        warn(f"{path}: deviceProperties is not a list but {json.dumps(properties)[:60]}; device names left out")
    return collector.finish(path, metadata)


def _time(value: Any) -> float:
    """A timestamp, duration or size as a float (a number, or a number written as text); NaN for anything else,
    missing, not a number or not finite: an event without a usable time is left out, a copy without a usable size
    counts as one whose size the trace does not give."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return math.nan
    try:
        x = float(value)
    except (ValueError, OverflowError):
        return math.nan
    return x if math.isfinite(x) else math.nan


def _label(value: Any) -> Any:
    """A device or name label usable as a key: scalars as they are, anything else (a list, an object) as text."""
    return value if value is None or isinstance(value, str | int | float | bool) else json.dumps(value)[:200]


def _device(value: Any) -> Any:
    """A device label: a whole number written as text or as a float (`"0"`, `0.0`) is that number, so one device
    is one section however a tool wrote its id; anything else as `_label` has it."""
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool):  # as a key, True is 1 and False is 0: device `true` would take device 1's events
        return json.dumps(value)
    return _label(value)


def _correlation(value: Any) -> int:
    """A correlation id: an integer that fits the column, else -1 (no link) rather than an overflow."""
    if isinstance(value, bool):
        return -1
    try:
        x = int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
    return x if -(2**63) <= x < 2**63 else -1


class _Collector:
    """Accumulates the kept fields of each event into flat columns."""

    def __init__(self) -> None:
        self.origin: float | None = None
        self.columns = {
            "device": array("i"),
            "start": array("d"),
            "end": array("d"),
            "kind": array("b"),
            "name": array("i"),
            "correlation": array("q"),
            "nbytes": array("d"),
            "direction": array("b"),
        }
        self.names: dict[str, int] = {}
        self.devices: dict[Any, int] = {}
        self.roles: dict[Any, int] = {}
        self.directions: dict[str, int] = {}
        self.launch_correlation = array("q")
        self.launch_start = array("d")
        self.copy_sizes: dict[int, float] = {}
        self.sync_calls: Counter[str] = Counter()
        self.sync_us = 0.0
        self.steps: list[ProfilerStep] = []
        self.bad_times = 0
        self.huge_times = 0

    def add(self, event: dict[str, Any]) -> None:
        """Keep what the summary needs from one decoded event."""
        if event.get("ph") != "X":
            return
        category = _label(event.get("cat"))
        role = self.roles.get(category)
        if role is None:
            role = self.roles[category] = _role(category)
        if role == _IGNORED:
            return
        ts, dur = _time(event.get("ts")), _time(event.get("dur", 0.0))  # Kineto writes dur; a missing one is 0
        if math.isnan(ts) or math.isnan(dur) or dur < 0:
            self.bad_times += 1
            return
        if abs(ts) > MAX_TIME_US or dur > MAX_TIME_US:
            self.huge_times += 1
            return
        if self.origin is None:
            self.origin = math.floor(ts)
        if role <= MEMSET:
            self._add_gpu(event, role, ts - self.origin, dur)
        elif role == _RUNTIME:
            self._add_runtime(event, ts - self.origin, dur)
        elif isinstance(name := event.get("name"), str) and name.startswith("ProfilerStep#"):
            start = ts - self.origin
            self.steps.append(ProfilerStep(name, start, start + dur))

    def _add_gpu(self, event: dict[str, Any], kind: int, start: float, dur: float) -> None:
        args = _args(event)
        name = _text(event.get("name", ""))
        columns = self.columns
        device = _device(args.get("device", event.get("pid")))
        columns["device"].append(self.devices.setdefault(device, len(self.devices)))
        columns["start"].append(start)
        columns["end"].append(start + dur)
        columns["kind"].append(kind)
        columns["name"].append(self.names.setdefault(name, len(self.names)))
        columns["correlation"].append(_correlation(args.get("correlation", -1)))
        nbytes = _time(args.get("bytes", -1))
        columns["nbytes"].append(nbytes if nbytes >= 0 else -1.0)
        columns["direction"].append(self._direction(name, args.get("kind")) if kind == MEMCPY else NO_COPY)

    def _add_runtime(self, event: dict[str, Any], start: float, dur: float) -> None:
        args = _args(event)
        name = _text(event.get("name", ""))
        correlation = _correlation(args.get("correlation"))
        if correlation >= 0:
            self.launch_correlation.append(correlation)
            self.launch_start.append(start)
            if "size" in args and "Memcpy" in name and _time(args["size"]) >= 0:
                # ROCm traces put a copy's size on the host call only (args.size, a string), not on the GPU event.
                self.copy_sizes[correlation] = _time(args["size"])
        if SYNC_CALL.match(name):
            self.sync_calls[name] += 1
            self.sync_us += dur

    def _direction(self, name: str, kind_arg: Any) -> int:
        key = f"{name}\0{kind_arg}"
        direction = self.directions.get(key)
        if direction is None:
            found = _DIRECTION.search(name) or _DIRECTION.search(str(kind_arg))
            direction = self.directions[key] = {"HtoD": HTOD, "DtoH": DTOH}[found.group(1)] if found else OTHER_COPY
        return direction

    def finish(self, path: Path, metadata: dict[str, Any]) -> Trace:
        gpu = GpuEvents(**{key: np.array(column) for key, column in self.columns.items()})
        unknown = np.flatnonzero((gpu.kind == MEMCPY) & (gpu.nbytes < 0))
        for row in unknown:
            gpu.nbytes[row] = self.copy_sizes.get(int(gpu.correlation[row]), -1.0)
        properties = metadata.get("deviceProperties")
        return Trace(
            path=path,
            origin_us=float(self.origin or 0),
            gpu=gpu,
            names=list(self.names),
            devices=list(self.devices),
            device_names={_device(p.get("id")): _text(p.get("name")) for p in properties if isinstance(p, dict)}
            if isinstance(properties, list)
            else {},
            launch_correlation=np.array(self.launch_correlation),
            launch_start=np.array(self.launch_start),
            steps=sorted(self.steps, key=lambda step: step.start),
            sync_calls=self.sync_calls,
            sync_us=self.sync_us,
            rank=_rank(metadata.get("distributedInfo")),
        )


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _text(value: Any) -> str:
    """An event name as text: a number or a list where a kernel name belongs is shown as its JSON."""
    return value if isinstance(value, str) else json.dumps(value)[:200]


def _rank(info: Any) -> int | None:
    """`distributedInfo.rank` of a trace taken in a process group (torch.profiler writes it), else None."""
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def _role(category: Any) -> int:
    """What an event of this category is to the summary: a GPU kind, a runtime call, a host event, or noise."""
    lowered = str(category).lower()
    if lowered in GPU_CATEGORIES:
        return GPU_CATEGORIES[lowered]
    if lowered.endswith(("runtime", "driver")):
        return _RUNTIME
    if lowered.startswith("gpu_"):
        # gpu_user_annotation repeats ProfilerStep#N on the GPU timeline; it is not a launch-side step.
        return _IGNORED
    return _HOST
