"""The `device_bench` fixture's logic: any callable timed as the suite times its ops, in pytest-benchmark's JSON.

pytest-benchmark's `benchmark(fn)` times Python calls with a host clock: on a GPU that measures how fast the
host enqueues kernels, not how long they run. `device_bench(fn)` makes the callable a case of the core (a
`suites.core.cases.Case` of kind `op`) and runs it through the same runner as the suites' own cases
(`suites.core.runner.execute`, `suites.core.timing.measure`), so it gets what they get:

- on CUDA, device time between CUDA events with the stream held until the host has enqueued the sample (the host
  is out of the window), optionally with a cold L2 before every call (`cold=True`) or as a replayed CUDA graph
  (`graph=True`); on a CPU, wall time, and `cold`/`graph` do nothing there (the record says what ran);
- the run's stopping rule (`--bench-profile`), telemetry, `enqueue_s` and `host_bound`;
- with `flops`/`bytes` (per call, checked at the call: a NaN, an infinity or a negative count fails the test in
  one line), TFLOP/s and GB/s, and with `dtype` on a GPU whose peaks are known, `pct_peak`; they are the caller's
  declaration, so a figure above its achievable roof raises no roof (suites/core/achievable.py);
- pytest-benchmark's `stats` filled with those samples (seconds per call), `options.timer` and
  `extra_info.timer` naming the timer that ran (`cuda_event`, `cuda_graph`, `wall`);
- a call shorter than a sample batched (`calls_per_sample`, suites/core/timing.py's `calibrate`);
- with `--bench-rounds N`, N rounds with the per-round rule, pooled and listed in `round_medians_s` as the
  suites' are; they run back to back inside the test (the callable exists only there), not interleaved with the
  other cases' rounds, so their spread is the noise of those seconds, not of the whole run.

The callable runs once before the measurement, outside the runner, so that a bug in it fails the test with its
own traceback; an allocation failure is left to the runner, which records it as `oom` and skips the test.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import pytest
import torch
from pytest_benchmark.fixture import FixtureAlreadyUsed

from suites.core.cases import Case, Workload
from suites.core.precision import DTYPES
from suites.core.runner import CaseResult, is_oom
from suites.harness import bench_session
from suites.harness.bench_session import BenchSession

GROUP = "device_bench"  # the benchmark group when neither the call nor a benchmark marker names one


def declared(name: str, value: float | None) -> float | None:
    """A per-call `flops` or `bytes` as given, or a one-line failure of the test: a NaN, an infinity or a negative
    count would become a TFLOP/s or GB/s figure (a NaN one made the achievable roof it beat NaN). Zero is no model."""
    if value is None:
        return None
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number) or number < 0:
        pytest.fail(f"device_bench: {name}={value!r} is not a count per call (a finite number >= 0)", pytrace=False)
    return int(value) if isinstance(value, numbers.Integral) else number  # plain Python numbers: the JSON's


def peak_dtype(dtype: torch.dtype | str | None) -> str | None:
    """The name `pct_peak` looks the device's peak up by: a design-card dtype name (`tf32` included) or a torch
    float dtype."""
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"device_bench: dtype {dtype!r} has no peak; expected one of {', '.join(DTYPES)}")
    return name


class DeviceBench:
    """Callable once per test, like pytest-benchmark's fixture; `device` is the run's device (--bench-device)."""

    def __init__(self, shared: BenchSession, benchmark, request: pytest.FixtureRequest,
                 journal: Callable[[list[CaseResult]], None] | None = None) -> None:
        self.shared, self.benchmark, self.request = shared, benchmark, request
        self.journal = journal  # hands each earlier round to the results writer (None: no writer)

    @property
    def device(self) -> torch.device:
        return self.shared.device

    def __call__(self, fn: Callable[[], object], *, flops: float | None = None, bytes: float | None = None,
                 dtype: torch.dtype | str | None = None, cold: bool = False, graph: bool = False,
                 group: str | None = None) -> CaseResult:
        """Time `fn()` (no arguments: close over the inputs) and record it; returns the runner's result, whose
        `extra_info` is what the JSON holds. `flops` and `bytes` are per call."""
        flops, bytes = declared("flops", flops), declared("bytes", bytes)
        if self.benchmark._mode:
            raise FixtureAlreadyUsed(f"device_bench times one callable per test (it was used in {self.benchmark._mode}"
                                     " mode); parametrize the test to time several")
        try:
            fn()
        except Exception as exc:
            if not is_oom(exc):
                raise
        node = self.request.node
        case = Case(suite=group or self.benchmark.group or GROUP, id=node.nodeid,
                    params=dict(self.benchmark.params or {}), build=lambda device: Workload(fn=fn), flops=flops,
                    bytes=bytes, peak_dtype=peak_dtype(dtype), tf32=None, cold=cold, graph=graph, kind="op")
        if self.shared.rounds > 1 and not self.benchmark.disabled:
            bench_session.measure_rounds_in_place(self.shared, case, self.journal)
        return bench_session.run(self.shared, self.benchmark, self.request, case)
