"""Runs one case: build, measure, check against float64, and turn it all into the case's figures (docs/results.md),
from which suites/harness/entry.py builds its entry.

Failures are results: an out-of-memory error becomes `status: oom` with the memory that was asked for, a case
the device cannot run becomes `unsupported` with the reason, any other exception `error`; memory is released
after every case so the run goes on. Extensions (telemetry, traces) wrap the measurement without touching it.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from suites.core import memory, reuse
from suites.core.backends import Backend, TorchBackend
from suites.core.cases import Case, Unsupported, Workload
from suites.core.measurement import Measurement, pool_rounds
from suites.core.precision import float32_mode
from suites.core.stopping import StopRule
from suites.core.timing import Ranks, measure, needs_flush


class Extension:
    """Something that observes a case without changing its timing (NVML telemetry, a profiler trace).

    `around` wraps the measurement and fills the dict it yields, merged into the case's figures afterwards;
    `after` may run the workload again (outside the timed window) and returns figures of its own.
    """

    @contextlib.contextmanager
    def around(self, case: Case, device: torch.device) -> Iterator[dict]:
        yield {}

    def after(self, case: Case, workload: Workload, device: torch.device) -> dict:
        return {}


class Lockstep(Ranks, Protocol):
    """How the ranks of a distributed run measure one case together: `before_sample` lines them up before each
    sample (outside the timed window), `agree` gives them one hold, `reduce` turns this rank's samples into the
    slowest rank's."""

    def reduce(self, m: Measurement) -> Measurement: ...


@dataclass
class CaseResult:
    """The outcome of one case: a status, the measurement when there is one, and the case's own figures (what it
    measured and what follows from that; its entry's `extra_info` is built from them by suites/harness/entry.py,
    with its status and what the run adds)."""

    case: Case
    status: str  # ok, oom, unsupported, error
    reason: str | None = None
    measurement: Measurement | None = None
    figures: dict = field(default_factory=dict)


# CUDA's caching allocator and the CPU allocator word the failed request differently.
_ALLOC = re.compile(r"(?:Tried to allocate|you tried to allocate) ([\d.]+) ?(B|KiB|MiB|GiB|TiB|bytes)")
_UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


# How an allocation failure reads when it does not come as torch.OutOfMemoryError: the CPU allocator, and cuBLAS or
# cuDNN failing to get their workspace from a full GPU.
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed")


def is_oom(exc: BaseException) -> bool:
    """An allocation failure of any allocator: a result (the case does not fit), not an error of the code. Python's
    own `MemoryError` (a host allocation that failed, often with no message) is one too."""
    text = str(exc).lower()
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(marker in text for marker in _OOM_MARKERS)


# How cuDNN fails near the memory limit without saying so: no engine whose workspace fits ("GET/FIND was unable to
# find an engine ..." from torch's cuDNN v8 API), or a status that an allocation failed inside it (torch's
# "cuDNN error: CUDNN_STATUS_..." from cudnnGetErrorString). Any of them can also be a real fault of the code or
# the build, so they are out of memory only where memory is the likely cause (`at_memory_edge`).
_MEMORY_EDGE_MARKERS = ("unable to find an engine to execute this computation", "cudnn_status_internal_error",
                        "cudnn_status_not_supported")


def at_memory_edge(exc: BaseException) -> bool:
    """cuDNN's failures near the memory limit that are not worded as out of memory (ResNet-50 at a large batch).
    Only a largest-batch search try reads them as out of memory (suites/training/batch_size.py), and only at a batch
    larger than one that fit on the same model and code path, where the one thing that changed is memory; anywhere
    else they stay errors."""
    text = str(exc).lower()
    return any(marker in text for marker in _MEMORY_EDGE_MARKERS)


def requested_bytes(exc: BaseException) -> int | None:
    """The allocation that failed, as the CUDA caching allocator's message states it."""
    match = _ALLOC.search(str(exc))
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`: what a recorded result says of an exception (stack traces stay out)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _base_info(case: Case, device: torch.device) -> dict:
    info = {"suite": case.suite, "case": case.id, "device": str(device)}
    for key in ("flops", "bytes"):
        if getattr(case, key) is not None:
            info[key] = getattr(case, key)
    return info


def throughput_info(case: Case, median_s: float, peak_flops: float | None) -> dict:
    """TFLOP/s, GB/s and percent of the device's peak, from the case's FLOP and byte models."""
    info: dict = {}
    if case.flops:
        info["tflops"] = case.flops / median_s / 1e12
        if peak_flops:
            info["pct_peak"] = 100 * case.flops / median_s / peak_flops
    if case.bytes:
        info["gbps"] = case.bytes / median_s / 1e9
    return info


def _measurement_info(case: Case, m: Measurement) -> dict:
    """How the case was timed: the timer, the calls batched into a sample and what an empty sample costs, why
    sampling stopped, the host's share of the work, and its load.

    An op's `device_s` is its device time per call; a step's `step_wall_s` is the wall time of one step (the
    device-busy time beside it comes from an observer). `enqueue_s` is the host's time to issue one call, and
    `host_bound` whether that is longer than the call's time, absent where nothing compares them (for a step on a
    GPU it is decided once the busy time is known: `host_bound_step`). `contended` and `contention` say whether
    other work took the host's CPUs during the samples (suites/core/host_load.py)."""
    info = {"timer": m.timer, "stop_reason": m.stop_reason, "calls_per_sample": m.calls_per_sample,
            "warmup_calls": m.warmup_calls, "l2_flush": m.l2_flush}
    if m.sample_overhead_s is not None:
        info["sample_overhead_s"] = m.sample_overhead_s
    if m.stop_reason != "once":
        info |= {"converged": m.converged, "rel_iqr": m.rel_iqr}
    if m.resolution_limited:
        info["resolution_limited"] = True
    if case.kind == "op":
        info["device_s"] = m.median_s
    elif case.kind == "step":
        info["step_wall_s"] = m.median_s
    if m.enqueue_s is not None and case.kind != "check":
        info["enqueue_s"] = m.enqueue_s
        if m.host_bound is not None:
            info["host_bound"] = m.host_bound
    if m.hold_s is not None:
        info |= {"hold_s": m.hold_s, "dropped_samples": m.dropped_samples}
    if m.contention is not None:
        info |= {"contended": m.contention.contended, "contention": m.contention.info()}
    if m.notes:
        info["notes"] = list(m.notes)
    return info


# A step is host-bound when its device was busy for less than this share of the step's wall time: the rest is
# launch gaps, host syncs and data loading that torch.compile, CUDA graphs and more workers remove.
HOST_BOUND_BUSY_SHARE = 0.8


def host_bound_step(info: dict) -> dict:
    """For a step with a measured `device_busy_s`: its busy share of the wall time and `host_bound`."""
    if "device_busy_s" not in info or not info.get("step_wall_s"):
        return {}
    share = info["device_busy_s"] / info["step_wall_s"]
    return {"device_busy_share": share, "host_bound": share < HOST_BOUND_BUSY_SHARE}


def above_peak_flops(info: dict) -> dict:
    """A case above 100 % of the datasheet peak did less work than its FLOP model counts (cuDNN's Winograd and FFT
    convolutions do fewer multiplies than the direct formula), or the peak is wrong: say so, so that the figure
    is not read as a speed and raises no achievable roof."""
    pct = info.get("pct_peak")
    if pct is None or pct <= 100:
        return {}
    note = (f"{pct:.0f} % of the datasheet peak: the kernel did fewer FLOPs than the model counts (a Winograd or "
            "FFT convolution, say) or the peak is wrong, so tflops is not the device's speed and raises no "
            "achievable roof")
    return {"tflops_above_peak": True, "notes": [*info.get("notes", []), note]}


def above_peak_bandwidth(info: dict, peak_gbps: float | None) -> dict:
    """A case moving bytes faster than the device's memory can serve them was fed from a cache: say so."""
    gbps = info.get("gbps")
    if not peak_gbps or gbps is None or gbps <= peak_gbps:
        return {}
    note = (f"{gbps:.0f} GB/s is above the {peak_gbps:.0f} GB/s memory peak: the working set was served from "
            "cache (a hot case), so gbps is not a memory-bandwidth figure")
    return {"gbps_above_peak": True, "notes": [*info.get("notes", []), note]}


def failure(case: Case, device: torch.device, exc: BaseException) -> CaseResult:
    """What an exception of a case's code makes of it: `unsupported`, `oom` (with the bytes asked for) or `error`."""
    info = _base_info(case, device)
    if isinstance(exc, Unsupported):
        return CaseResult(case, "unsupported", str(exc), figures=info)
    if is_oom(exc):
        needed = requested_bytes(exc)
        if needed is not None:
            info["requested_bytes"] = needed
        return CaseResult(case, "oom", first_line(exc), figures=info)
    return CaseResult(case, "error", first_line(exc), figures=info)


def refused(case: Case, device: torch.device, reason: str) -> CaseResult:
    """A case not measured because what it would measure is not its work: an `error` with the reason."""
    return CaseResult(case, "error", reason, figures=_base_info(case, device))


def execute(case: Case, device: torch.device, rule: StopRule, peaks: DevicePeaks | None = None,
            extensions: Sequence[Extension] = (), lockstep: Lockstep | None = None,
            earlier_rounds: Sequence[Measurement] = (), backend: Backend | None = None) -> CaseResult:
    """Build, measure and check one case; never raises for a failing case, it returns the failure.
    With `lockstep` (several ranks), every figure derives from the slowest rank's samples; with `earlier_rounds`
    (`--bench-rounds`), from the samples of every round, these and this one's. `backend`: the clocks and CUDA
    primitives (suites/core/backends.py), torch's by default."""
    workload = None
    peaks = peaks or DevicePeaks()
    started = time.perf_counter()
    if reuse.SHELF.enter(case.reuse_group):  # another group's reference, dropped before this case allocates
        memory.release(device)
    try:
        with float32_mode(case.tf32):
            built_at = time.perf_counter()
            workload = case.build(device)
            if case.kind == "check":
                result = _checked_once(case, workload, device, time.perf_counter() - built_at, rule)
            else:
                result = _measure_and_check(case, workload, device, rule, peaks, extensions, lockstep,
                                            earlier_rounds, backend)
    # the boundary where a failing case becomes a recorded result; a SystemExit from the case's code is its
    # failure too (it vanished from the results before), a KeyboardInterrupt (Ctrl-C, a stop signal) is the run's
    except (Exception, SystemExit) as exc:
        result = failure(case, device, exc)
    finally:
        del workload
        memory.release(device)
    # what the case cost the run (build, measurement, check, observers, release): what `python -m suites plan`
    # learns from the last run of this device identity
    result.figures["case_s"] = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class DevicePeaks:
    """The device's peaks a case is compared with: FLOP/s of the case's dtype and memory bandwidth (None: unknown)."""

    flops: float | None = None
    gbps: float | None = None


def _checked_once(case: Case, workload: Workload, device: torch.device, build_s: float,
                  rule: StopRule) -> CaseResult:
    """A correctness experiment: it ran once, in its build; its wall time is recorded as such, never as a speed."""
    m = Measurement([build_s], "wall", 1, "once", rule, device_type=device.type)
    info = _base_info(case, device) | workload.figures | _measurement_info(case, m)
    status, reason = check(case, workload, info)
    return CaseResult(case, status, reason, m, info)


def _prime(workload: Workload, device: torch.device, backend: Backend) -> int:
    """One call before the window on CUDA, so that lazily made buffers (cuBLAS and cuDNN workspaces, autotuning)
    are in the baseline, not in the case's peak; returns the bytes allocated after it."""
    if device.type != "cuda":
        return 0
    workload.fn()
    backend.synchronize()
    backend.reset_peak_memory()
    return backend.memory_allocated()


def _measure_and_check(case: Case, workload: Workload, device: torch.device, rule: StopRule,
                       peaks: DevicePeaks, extensions: Sequence[Extension], lockstep: Lockstep | None = None,
                       earlier_rounds: Sequence[Measurement] = (), backend: Backend | None = None) -> CaseResult:
    """Measure a built case and check it. A cold case's L2 flush buffer (twice the L2: 100 MiB on an H200) is
    made before the peak-memory window opens: it is the timer's memory, not the case's."""
    info = _base_info(case, device) | workload.figures
    backend = backend or TorchBackend(device)
    if needs_flush(device, case.kind, case.cold):
        backend.l2_flush()
    baseline = _prime(workload, device, backend)
    with contextlib.ExitStack() as stack:
        observed = [stack.enter_context(ext.around(case, device)) for ext in extensions]
        m = measure(workload.fn, device, rule, cold=case.cold, graph=case.graph, kind=case.kind, ranks=lockstep,
                    backend=backend)
        if lockstep is not None:
            m = lockstep.reduce(m)
    if earlier_rounds:
        m = pool_rounds([*earlier_rounds, m])
    for fields in observed:
        info |= fields
    if device.type == "cuda":
        info["peak_mem_bytes"] = backend.max_memory_allocated() - baseline
    info |= _measurement_info(case, m) | throughput_info(case, m.median_s, peaks.flops)
    info |= above_peak_flops(info)
    info |= above_peak_bandwidth(info, peaks.gbps)
    if workload.rates is not None:
        info |= workload.rates(m.median_s, peaks.flops)
    status, reason = check(case, workload, info)
    for ext in extensions:
        info |= ext.after(case, workload, device)
    info |= host_bound_step(info)
    return CaseResult(case, status, reason, m, info)


def check(case: Case, workload: Workload, info: dict) -> tuple[str, str | None]:
    """(status, reason) of the float64 comparison, filling `error_rel` and `tolerance` into info.

    The timing is already taken: a check that fails to run (its float64 reference out of memory, say) makes the
    case an error with that reason, and the measurement is kept.
    """
    if workload.error_rel is None:
        return "ok", None
    try:
        info["error_rel"] = err = workload.error_rel()
    except Exception as exc:  # the boundary: a failing check must not lose the measurement
        memory.release(torch.device(info["device"]))
        return "error", f"correctness check did not run ({first_line(exc)}); the timing is kept"
    if case.tolerance is None:
        return "ok", None
    info["tolerance"] = case.tolerance
    if not err <= case.tolerance:
        return "error", f"error_rel {err:.3g} exceeds the {case.tolerance:g} tolerance"
    return "ok", None
