"""The suite's command-line options: their names, defaults and checks, declared without importing torch.

Every option is namespaced `--bench-...`, so that the plugin can be a guest in a repository whose own conftest
defines `--device` or `--trace-dir` (common in ML repositories). This repository's bench/ had shorter spellings
before (`--device`, `--trace-dir`, ...): its root conftest.py keeps them as aliases (`add_legacy_spellings`), so the
commands in its docs, CI, gpu_check and the nightly workflow keep working there; elsewhere only `--bench-...` exists.

The checks (`check`) run at start-up, so that a wrong value is a one-line usage error in the first second. Those
that need torch (a dtype name, a CUDA device) run only for options given on the command line: a run that leaves
the suite's options alone pays nothing for them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from suites.core import defaults
from suites.core.units import parse_bytes
from suites.harness import progress

# The sampler's bounds: below 1 ms its thread is a busy loop beside the measurement (NVML's readings take about
# that long), past a minute no case sees a second sample, and a huge value overflows the thread's wait.
TELEMETRY_INTERVAL_MS = (1.0, 60_000.0)
GROUP = ("torchbench-levers", "torchbench-levers: device-time benchmarks and the GPU efficiency-lever suites")


@dataclass(frozen=True)
class Option:
    """One option: its `--bench-...` name, the spelling this repository's bench/ used before (if any), and the
    keyword arguments of pytest's `addoption` (dest, default, type, choices, help)."""

    name: str
    legacy: str | None
    kwargs: dict = field(default_factory=dict)

    @property
    def dest(self) -> str:
        return self.kwargs["dest"]


OPTIONS = (
    Option("--bench-device", "--device", dict(
        dest="bench_device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")),
    Option("--bench-profile", None, dict(
        dest="bench_profile", default=None, choices=defaults.PROFILES,
        help="quick: small shapes and a short stopping rule (minutes on a 2-core CPU); full: the real sweep. Not "
        "given: full on a CUDA device, quick elsewhere (python -m suites plan says what a run will cost)")),
    Option("--bench-dtypes", None, dict(
        dest="bench_dtypes", default=None, help="comma-separated dtypes to keep, e.g. bfloat16,float16")),
    Option("--bench-telemetry-interval-ms", "--telemetry-interval-ms", dict(
        dest="bench_telemetry_interval_ms", type=float, default=defaults.TELEMETRY_INTERVAL_MS,
        help=f"NVML sampling interval during each measurement, 1 to 60000 ms (default "
        f"{defaults.TELEMETRY_INTERVAL_MS:g}); 0 turns telemetry off")),
    Option("--bench-trace-dir", "--trace-dir", dict(
        dest="bench_trace_dir", default=None,
        help="also write a torch.profiler trace of every case to DIR (run after its timed measurement)")),
    Option("--bench-rounds", None, dict(
        dest="bench_rounds", type=int, default=1,
        help="measure the selection N times in interleaved passes and record each round's median per case, for "
        f"verdicts from run-to-run noise (nightly: {defaults.NIGHTLY_ROUNDS})")),
    Option("--bench-mem-budget", None, dict(
        dest="bench_mem_budget", default=None, type=parse_bytes,
        help="memory limit of the batch-size search, e.g. 2GiB (CPU default: the profile's; CUDA: 40GiB in "
        "the full profile, none in the quick one)")),
    Option("--bench-achievable-peaks", "--achievable-peaks", dict(
        dest="bench_achievable_peaks", default=None, choices=("auto", "search", "full", "off"),
        help="the achievable gemm and bandwidth peaks that pct_achievable divides by: auto loads this machine's "
        "from --bench-achievable-cache, else runs the short search (seconds on a CPU, about a minute on a GPU) "
        "and caches it; search runs the short search again; full loads this machine's long search, else runs it "
        "(about five minutes on a GPU) and caches it, for every later run; off: no pct_achievable. Not given: "
        "auto for the suite's bench files, off for device_bench tests")),
    Option("--bench-achievable-cache", "--achievable-cache", dict(
        dest="bench_achievable_cache", default=str(defaults.achievable_cache()),
        help="directory of achievable-peak files, one per machine identity (default: %(default)s)")),
    Option("--bench-progress-interval-s", None, dict(
        dest="bench_progress_interval_s", type=float, default=progress.INTERVAL_S,
        help=f"write a progress line (elapsed, cases done and left, the case running) every N seconds of a run, "
        f"-q included (default {progress.INTERVAL_S:g}); 0 turns it off")),
    Option("--bench-dist-timeout-s", "--dist-timeout-s", dict(
        dest="bench_dist_timeout_s", type=float, default=defaults.DIST_TIMEOUT_S,
        help="under torchrun: seconds any collective may wait for the other ranks before the run fails "
        f"(default {defaults.DIST_TIMEOUT_S:g})")),
)


@dataclass(frozen=True)
class ProfileChoice:
    """The run's profile and why it is that one: `given` (--bench-profile) or the device's default."""

    name: str
    source: str  # `--bench-profile`, or `default on cuda` / `default on cpu`

    @property
    def line(self) -> str:
        """How the start of a run states it."""
        if self.source == "--bench-profile":
            return f"profile {self.name} (--bench-profile)"
        other = "quick for the short sweep" if self.name == defaults.Profile.FULL else "full for the real sweep"
        return f"profile {self.name} (the {self.source}; --bench-profile {other})"


PROFILE_CHOICE = pytest.StashKey[ProfileChoice]()


def profile(config: pytest.Config) -> ProfileChoice:
    """The run's profile (`choose_profile`), decided once per run."""
    if PROFILE_CHOICE not in config.stash:
        config.stash[PROFILE_CHOICE] = choose_profile(config.getoption("bench_profile"),
                                                      config.getoption("bench_device"), _auto_device_type)
    return config.stash[PROFILE_CHOICE]


def choose_profile(given_name: str | None, device_option: str, auto: Callable[[], str]) -> ProfileChoice:
    """--bench-profile when given, else the default of the device the run measures (`defaults.default_profile`:
    full on CUDA, quick elsewhere). `auto` says which device `--bench-device auto` is: only runs that collect the
    suite's cases ask, and they have imported torch already."""
    if given_name is not None:
        return ProfileChoice(given_name, "--bench-profile")
    kind = defaults.device_type(device_option) or auto()
    return ProfileChoice(str(defaults.default_profile(kind)), f"default on {kind}")


def _auto_device_type() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(*GROUP)
    for option in OPTIONS:
        group.addoption(option.name, **option.kwargs)


def add_legacy_spellings(parser: pytest.Parser) -> None:
    """The spellings this repository's bench/ had before the options were namespaced (`--device` for
    `--bench-device`, ...), as aliases: same destination and default. (A default of SUPPRESS would break where
    this runs before the plugin's own options, as with PYTEST_DISABLE_PLUGIN_AUTOLOAD: pytest stores the first
    default it sees, and argparse then converts that string with the option's type.) For this repository's root
    conftest.py only: a host repository may define `--device` itself."""
    group = parser.getgroup(*GROUP)
    for option in OPTIONS:
        if option.legacy:
            group.addoption(option.legacy, **{**option.kwargs, "help": f"the same as {option.name}"})


def given(config: pytest.Config, dest: str) -> bool:
    """Whether an option holds something else than its default (it was given on the command line or in addopts)."""
    default = next(o.kwargs.get("default") for o in OPTIONS if o.dest == dest)
    return config.getoption(dest) != default


def check(config: pytest.Config) -> None:
    """Usage errors for values that cannot be right, before anything runs."""
    interval = config.getoption("bench_telemetry_interval_ms")
    if not (interval == 0 or TELEMETRY_INTERVAL_MS[0] <= interval <= TELEMETRY_INTERVAL_MS[1]):
        low, high = TELEMETRY_INTERVAL_MS
        raise pytest.UsageError(f"--bench-telemetry-interval-ms {interval:g}: expected 0 (off) or {low:g} to "
                                f"{high:g} ms")
    every = config.getoption("bench_progress_interval_s")
    if not (math.isfinite(every) and every >= 0):
        raise pytest.UsageError(f"--bench-progress-interval-s {every:g}: expected 0 (off) or a positive interval")
    if config.getoption("benchmark_compare_fail", None) and not config.getoption("benchmark_compare", None):
        raise pytest.UsageError("--benchmark-compare-fail: compares against the run --benchmark-compare loads; "
                                "without --benchmark-compare it can compare nothing")
    if trace_dir := config.getoption("bench_trace_dir"):
        _check_trace_dir(Path(trace_dir))
    if given(config, "bench_dtypes") or given(config, "bench_device") or given(config, "bench_rounds"):
        from suites.harness import bench_session  # imports torch: only for options that were given

        bench_session.check_options(config)


def _check_trace_dir(trace_dir: Path) -> None:
    try:
        trace_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"--bench-trace-dir {trace_dir}: {exc.strerror or exc}") from None
    if not os.access(trace_dir, os.W_OK | os.X_OK):  # else every case's trace fails, said only in extra_info
        raise pytest.UsageError(f"--bench-trace-dir {trace_dir}: cannot write there (permission denied)")
