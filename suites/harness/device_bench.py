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
- a call shorter than a sample batched (`calls_per_sample`, suites/core/calibration.py's `calibrate`);
- with `--bench-rounds N`, N rounds with the per-round rule, pooled and listed in `round_medians_s` as the
  suites' are; they run back to back inside the test (the callable exists only there), not interleaved with the
  other cases' rounds, so their spread is the noise of those seconds, not of the whole run.

It is called as pytest-benchmark's `benchmark` is (docs/device_bench.md has the two side by side):
`device_bench(fn, *args, **kwargs)` returns what `fn` returned, `.pedantic(...)` takes exact rounds and
iterations, `.extra_info` is the entry's, and pytest-benchmark's `min_rounds`, `max_time` and `--benchmark-cprofile`
hold (`Asked` applies them to the profile's rule).

The callable runs once before the measurement, outside the runner, so that a bug in it fails the test with its
own traceback (recorded as an `error`, as a SystemExit is); an allocation failure is left to the runner, which
records it as `oom` and skips the test; a generator or coroutine, whose work was never done, is refused.
"""

from __future__ import annotations

import cProfile
import functools
import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
import torch
from pytest_benchmark.fixture import FixtureAlreadyUsed

from suites.core.cases import Case, Workload
from suites.core.precision import DTYPES
from suites.core.runner import CaseResult, failure, is_oom, refused
from suites.core.stopping import StopRule
from suites.harness import bench_session, entry
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


PYTEST_BENCHMARK_MAX_TIME_S = 1.0  # pytest-benchmark's --benchmark-max-time default: left, the profile decides


def max_time_given(benchmark, request: pytest.FixtureRequest) -> float | None:
    """`max_time` of a `benchmark` marker or of --benchmark-max-time, None when neither set it: pytest-benchmark's
    1 s default would cut the profile's rule (15 s in full, for kernels that converge slowly) for every test."""
    marker = request.node.get_closest_marker("benchmark")
    if not ((marker is not None and "max_time" in marker.kwargs)
            or float(request.config.getoption("benchmark_max_time")) != PYTEST_BENCHMARK_MAX_TIME_S):
        return None
    seconds = float(entry.max_time(benchmark))
    if not (math.isfinite(seconds) and seconds > 0):  # a NaN timeout never comes: sampling would not end
        pytest.fail(f"device_bench: max_time={seconds!r}: expected a finite number of seconds > 0", pytrace=False)
    return seconds


def count(name: str, value: object, least: int) -> int:
    """An option that counts (rounds, iterations), or a one-line failure of the test."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        pytest.fail(f"device_bench: {name}={value!r}: expected an int >= {least}", pytrace=False)
    return int(value)


@dataclass(frozen=True)
class Asked:
    """What a test asked of the measurement through pytest-benchmark's options, applied to the profile's rule:
    `min_rounds` samples before any stop (the timeout's included), `max_time_s` as the sampling's timeout when
    given; pedantic's exact `rounds` of `iterations` calls each, after at least `warmup_rounds` of them."""

    min_rounds: int = 0
    max_time_s: float | None = None
    rounds: int | None = None
    iterations: int = 1
    warmup_rounds: int = 0

    def apply(self, rule: StopRule) -> StopRule:
        if self.rounds is not None:
            return replace(rule, count=self.rounds, calls=self.iterations,
                           warmup_calls=max(rule.warmup_calls, self.warmup_rounds * self.iterations))
        timeout = rule.timeout_s if self.max_time_s is None else self.max_time_s
        return replace(rule, at_least=self.min_rounds, timeout_s=timeout, min_time_s=min(rule.min_time_s, timeout),
                       max_samples=max(rule.max_samples, self.min_rounds))


def lazy(value: object) -> str | None:
    """What a call returned that did not do its work (a generator, a coroutine): its kind, or None."""
    for kind, test in (("generator", inspect.isgenerator), ("coroutine", inspect.iscoroutine),
                       ("async generator", inspect.isasyncgen)):
        if test(value):
            return kind
    return None


class DeviceBench:
    """Used once per test, like pytest-benchmark's fixture, and called as it is (`device_bench(fn, *args,
    **kwargs)`, `.pedantic(...)`, `.extra_info`); `device` is the run's device (--bench-device), `recorded` the
    recorded outcome (the runner's result and the `extra_info` its entry holds)."""

    def __init__(self, shared: BenchSession, benchmark, request: pytest.FixtureRequest,
                 journal: Callable[[list[CaseResult]], None] | None = None) -> None:
        self.shared, self.benchmark, self.request = shared, benchmark, request
        self.journal = journal  # hands each earlier round to the results writer (None: no writer)
        self.recorded: entry.Recorded | None = None
        self._users_before: dict = {}  # the test's extra_info when it called
        self.clashes: set[str] = set()  # the suite's fields the test set in extra_info (`keep_suite_fields`)

    @property
    def device(self) -> torch.device:
        return self.shared.device

    @property
    def extra_info(self) -> dict:
        """pytest-benchmark's `extra_info` of the test: what the test puts there lands in its JSON entry, before or
        after the call. A name the suite records too (docs/results.md) keeps the suite's value and fails the test
        at teardown (`finish`), naming it."""
        return self.benchmark.extra_info

    def __call__(self, fn: Callable[..., object], *args: object, flops: float | None = None,
                 bytes: float | None = None, dtype: torch.dtype | str | None = None, cold: bool = False,
                 graph: bool = False, group: str | None = None, **kwargs: object) -> object:
        """Time `fn(*args, **kwargs)` and record it; returns what one call returned, as `benchmark(fn, ...)` does.
        `flops` and `bytes` are per call; these six names are device_bench's own (pass an argument of that name to
        `fn` with `.pedantic(fn, kwargs={...})`). pytest-benchmark's min_rounds and max_time hold."""
        self._claim("device_bench(...)")
        flops, bytes = declared("flops", flops), declared("bytes", bytes)  # before anything runs
        asked = Asked(min_rounds=count("min_rounds", entry.min_rounds(self.benchmark), 1),
                      max_time_s=max_time_given(self.benchmark, self.request))
        return self._time(functools.partial(fn, *args, **kwargs), asked, flops=flops, bytes=bytes, dtype=dtype,
                          cold=cold, graph=graph, group=group)

    def pedantic(self, target: Callable[..., object], args: tuple = (), kwargs: dict | None = None,
                 setup: Callable[[], object] | None = None, teardown: Callable[..., object] | None = None,
                 rounds: int = 1, warmup_rounds: int = 0, iterations: int = 1, *, flops: float | None = None,
                 bytes: float | None = None, dtype: torch.dtype | str | None = None, cold: bool = False,
                 graph: bool = False, group: str | None = None) -> object:
        """pytest-benchmark's `pedantic`: exactly `rounds` samples of `iterations` calls of `target(*args,
        **kwargs)` each (the calls are not calibrated), after at least `warmup_rounds` x `iterations` warm-up calls
        (and never fewer than two). `setup` and `teardown` are refused: a sample's calls run between one pair of
        device events, with no untimed moment between them to run anything."""
        self._claim("device_bench.pedantic(...)")
        flops, bytes = declared("flops", flops), declared("bytes", bytes)
        for name, hook in (("setup", setup), ("teardown", teardown)):
            if hook is not None:
                pytest.fail(f"device_bench.pedantic: {name}= is not supported: a sample's calls run back to back "
                            f"between one pair of device events, with no untimed moment for {name} (make the "
                            "inputs before the call, or time it with benchmark.pedantic on the host clock)",
                            pytrace=False)
        asked = Asked(rounds=count("rounds", rounds, 1), iterations=count("iterations", iterations, 1),
                      warmup_rounds=count("warmup_rounds", warmup_rounds, 0))
        return self._time(functools.partial(target, *args, **(kwargs or {})), asked, flops=flops, bytes=bytes,
                          dtype=dtype, cold=cold, graph=graph, group=group)

    def _time(self, call: Callable[[], object], asked: Asked, *, flops: float | None, bytes: float | None,
              dtype: torch.dtype | str | None, cold: bool, graph: bool, group: str | None) -> object:
        """Call once, measure under the asked rule, profile when asked; what the call returned."""
        self._users_before = dict(self.benchmark.extra_info)
        node = self.request.node
        case = Case(suite=group or self.benchmark.group or GROUP, id=node.nodeid,
                    params=dict(self.benchmark.params or {}), build=lambda device: Workload(fn=call), flops=flops,
                    bytes=bytes, peak_dtype=peak_dtype(dtype), tf32=None, cold=cold, graph=graph, kind="op")
        returned = self._first_call(call, case)
        if self.shared.rounds > 1 and not self.benchmark.disabled:
            bench_session.measure_rounds_in_place(self.shared, case, self.journal, asked.apply)
        self.recorded = bench_session.run(self.shared, self.benchmark, self.request, case, asked.apply)
        self._profile(call, self.recorded.result)
        return returned

    def _claim(self, mode: str) -> None:
        """The fixture used once, as pytest-benchmark's is: a second use raises FixtureAlreadyUsed, and a use that
        is refused (a count that is not one, pedantic's setup) is a use, not a "fixture was not used" warning."""
        if used := entry.used_in(self.benchmark):
            raise FixtureAlreadyUsed(f"device_bench times one callable per test (it was used in {used}"
                                     " mode); parametrize the test to time several")
        entry.claim(self.benchmark, mode)

    def _first_call(self, call: Callable[[], object], case: Case) -> object:
        """`fn` once before the measurement, as the caller would call it. A bug in it fails the test with its own
        traceback, and a SystemExit too, each recorded as an `error` with its reason (a case that vanished read
        as "removed" to `compare`); an allocation failure is left to the runner, which records it as `oom` and
        skips. A generator or coroutine did none of its work: timing its calls would time nothing (a generator of
        matmuls read 16 TFLOP/s), so the case is recorded as an `error` saying so and the test fails."""
        try:
            returned = call()
        except (Exception, SystemExit) as exc:
            if is_oom(exc):
                return None
            bench_session.keep(self.shared, self.benchmark, self.request, failure(case, self.device, exc))
            raise
        if (kind := lazy(returned)) is not None:
            returned.close()
            bench_session.settle(self.shared, self.benchmark, self.request, refused(
                case, self.device, f"device_bench: fn returned a {kind}, whose work runs only when it is consumed, "
                "so its calls would time nothing; consume it inside fn (e.g. lambda: list(gen()))"))
        return returned

    def _profile(self, call: Callable[[], object], result: CaseResult) -> None:
        """--benchmark-cprofile (or a marker's `cprofile`): after the measurement, the calls under cProfile, saved
        as pytest-benchmark saves its own (terminal table, JSON `cprofile`, --benchmark-cprofile-dump): the host's
        Python time in the calls, what enqueuing costs, never the device's. As many calls as
        --benchmark-cprofile-loops, `auto` being one sample's calls."""
        if not self.benchmark.cprofile or self.benchmark.stats is None or result.measurement is None:
            return
        profile = cProfile.Profile()
        for _ in range(self.benchmark.cprofile_loops or result.measurement.calls_per_sample):
            profile.runcall(call)
        entry.save_cprofile(self.benchmark, profile)

    def keep_suite_fields(self) -> None:
        """The suite's fields of the entry are its own (`entry.keep_suite_fields`): a name of the suite's that the
        test put in `extra_info` keeps the suite's value, or is removed where the suite recorded none. Done when the
        test's call ends, before its entry is journaled (suites/harness/pytest_plugin.py), and again at teardown."""
        if self.recorded is not None:
            self.clashes |= set(entry.keep_suite_fields(self.benchmark, self.recorded.info, self._users_before))

    def finish(self) -> None:
        """At teardown: the suite's fields kept its own (`keep_suite_fields`), and the test fails naming those it
        set (never silently either way)."""
        self.keep_suite_fields()
        if self.clashes:
            pytest.fail(f"device_bench.extra_info: {', '.join(map(repr, sorted(self.clashes)))} the suite records "
                        "itself (docs/results.md); the entry keeps the suite's value, or none where the suite "
                        "measured none (flops= and bytes= give its tflops and gbps): name yours otherwise",
                        pytrace=False)
