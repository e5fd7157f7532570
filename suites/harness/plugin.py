"""The pytest side of the suite, called from the root conftest.py: options, configuration, fixtures, JSON hooks."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from suites.core import device as devices
from suites.core.cases import Case
from suites.core.runner import Extension
from suites.core.units import parse_bytes
from suites.harness import results
from suites.harness import session as sessions
from suites.observers import telemetry, tracing

SESSION = pytest.StashKey[sessions.BenchSession]()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("bench", "GPU efficiency-lever benchmarks")
    group.addoption("--device", dest="bench_device", default="auto",
                    help="auto (CUDA when available), cpu, cuda or cuda:N")
    group.addoption("--bench-profile", dest="bench_profile", default="quick", choices=sessions.PROFILES,
                    help="quick: minutes on a 2-core CPU; full: the real sweep for a GPU")
    group.addoption("--bench-dtypes", dest="bench_dtypes", default=None,
                    help="comma-separated dtypes to keep, e.g. bfloat16,float16")
    group.addoption("--telemetry-interval-ms", dest="telemetry_interval_ms", type=float,
                    default=telemetry.DEFAULT_INTERVAL_MS, help="NVML sampling interval during each measurement "
                    f"(default {telemetry.DEFAULT_INTERVAL_MS:g}); 0 turns telemetry off")
    group.addoption("--trace-dir", dest="trace_dir", default=None,
                    help="also write a torch.profiler trace of every case to DIR (run after its timed measurement)")
    group.addoption("--bench-mem-budget", dest="bench_mem_budget", default=None, type=parse_bytes,
                    help="memory limit of the batch-size search, e.g. 2GiB (CPU default: the profile's; CUDA: none)")


def configure(config: pytest.Config) -> None:
    """Validate the options early (a usage error, not a silent all-skip) and keep raw samples in saved runs.

    In a `--benchmark-only` run with no output chosen, results are autosaved into .benchmarks/ so that a run
    never ends with numbers only on the screen.
    """
    config.stash[SESSION] = sessions.from_config(config)
    config.stash[SESSION].extensions.extend(observers(config))
    option = config.option
    if hasattr(option, "benchmark_save_data"):
        option.benchmark_save_data = True
        if option.benchmark_only and not (option.benchmark_json or option.benchmark_save):
            option.benchmark_autosave = True
        results.take_over(config, config.stash[SESSION].not_measured)


def observers(config: pytest.Config) -> list[Extension]:
    """NVML telemetry around every case (it reports why when it cannot), and with --trace-dir a profiler trace."""
    interval = config.getoption("telemetry_interval_ms")
    if not (math.isfinite(interval) and interval >= 0):
        raise pytest.UsageError(f"--telemetry-interval-ms {interval:g}: expected 0 (off) or a positive interval")
    found: list[Extension] = [telemetry.TelemetryExtension(session(config).device, interval)]
    if trace_dir := config.getoption("trace_dir"):
        try:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--trace-dir {trace_dir}: {exc.strerror or exc}") from None
        if not os.access(trace_dir, os.W_OK | os.X_OK):  # else every case's trace fails, said only in extra_info
            raise pytest.UsageError(f"--trace-dir {trace_dir}: cannot write there (permission denied)")
        found.append(tracing.TraceExtension(Path(trace_dir)))
    return found


def session(config: pytest.Config) -> sessions.BenchSession:
    return config.stash[SESSION]


def parametrize(metafunc: pytest.Metafunc, cases: Callable[[str], list[Case]]) -> None:
    """Parametrize a bench test's `case` argument with the suite's cases for this profile and dtype filter."""
    if "case" not in metafunc.fixturenames:
        return
    s = session(metafunc.config)
    selected = s.select(cases(s.profile))
    metafunc.parametrize("case", selected, ids=[c.id.split("/", 1)[1] for c in selected])


def update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    machine_info.update(devices.machine_info(session(config).device))
    machine_info["telemetry"] = telemetry.machine_info(session(config).extensions)


def update_json(config: pytest.Config, output_json: dict) -> None:
    """Add the cases that produced no timing (oom, unsupported, error) beside pytest-benchmark's `benchmarks`."""
    output_json["not_measured"] = list(session(config).not_measured)
