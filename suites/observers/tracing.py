"""A torch.profiler trace per case (`--trace-dir DIR`), taken after the timed measurement so timings stay clean.

The workload is run again under the profiler with a wait/warm-up/active schedule: the first call is not
recorded, the second is recorded and discarded (it pays for the profiler's own start-up), and the last three
are kept, each marked `ProfilerStep#N`, with shapes recorded. The trace is written as a gzip Chrome trace named
after the case id, and summarized by the same code as `python -m reports trace` (reports/trace.py, which never
imports torch); the headline figures go into extra_info next to the trace's path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, schedule

from reports.format.errors import InputError
from reports.format.kineto.events import read_trace
from reports.format.kineto.summary import summarize_trace, summary_to_json
from suites.core.cases import Case, Workload
from suites.core.profiler import one_cycle
from suites.core.runner import Extension, first_line

WAIT, WARMUP, ACTIVE = 1, 1, 3
TOP_KERNELS = 3
HEADLINE = ("device", "name", "span_us", "busy_us", "idle_us", "compute_us", "non_compute_us", "tensor_core_share",
            "kernel_count")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trace_path(directory: Path, case_id: str, rank: int | None = None) -> Path:
    """`matmul/square/256x256x256/float32` -> DIR/matmul_square_256x256x256_float32.json.gz; under torchrun each
    rank writes its own, `...float32.rank1.json.gz` (`python -m reports trace` reads them as one run's ranks)."""
    suffix = "" if rank is None else f".rank{rank}"
    return directory / f"{_UNSAFE.sub('_', case_id).strip('_')}{suffix}.json.gz"


def profile_calls(fn: Callable[[], object], device: torch.device, path: Path) -> None:
    """Run `fn` WAIT + WARMUP + ACTIVE times under torch.profiler (CUDA activities on CUDA) and write `path`.

    Each call's work is finished before its step ends: `prof.step()` does not synchronize, and Kineto keeps a GPU
    activity by its device timestamp, so without it a step's kernels would run (and be counted) in the next."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    steps = schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    with one_cycle(activities=activities, schedule=steps, record_shapes=True,
                   on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            prof.step()


def headline(path: Path) -> dict[str, Any]:
    """The trace's figures per GPU device (top kernels included), its ProfilerSteps and its host sync count."""
    full = summary_to_json(summarize_trace(read_trace(path)), TOP_KERNELS)
    devices = [{key: device[key] for key in HEADLINE}
               | {"top_kernels": [{k: kernel[k] for k in ("name", "class", "count", "total_us")}
                                  for kernel in device["top_kernels"]]}
               for device in full["devices"]]
    out = {"devices": devices, "steps": full["steps"], "sync_call_count": full["host"]["sync_call_count"]}
    if full["message"]:
        out["message"] = full["message"]
    return out


class TraceExtension(Extension):
    """Writes DIR/<case id>.json.gz per case and adds `trace` (its path) and `trace_summary` to extra_info.

    A trace that cannot be taken or read is recorded as `trace_error`; the case's measurement stands."""

    def __init__(self, directory: Path, rank: int | None = None) -> None:
        self.directory, self.rank = directory, rank

    def after(self, case: Case, workload: Workload, device: torch.device) -> dict:
        path = trace_path(self.directory, case.id, self.rank)
        try:
            profile_calls(workload.fn, device, path)
            return {"trace": str(path), "trace_summary": headline(path)}
        except (RuntimeError, OSError, InputError) as exc:
            return {"trace_error": first_line(exc)}
