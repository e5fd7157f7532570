"""The suite's pytest plugin: its options, its hooks into pytest and pytest-benchmark, and the `run_case` fixture.

The root conftest.py loads it for this repository's bench/ and tests/; a bench file in another repository loads it
with `pytest -p suites.harness.pytest_plugin ...` or a root conftest.py of one line,
`pytest_plugins = ["suites.harness.pytest_plugin"]` (docs/your_model.md). Bench files parametrize their `case`
argument with `parametrize`; what a run shares lives in suites/harness/session.py.
"""


from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from suites.core import achievable, profiles
from suites.core import device as devices
from suites.core.cases import Case
from suites.core.runner import CaseResult, Extension
from suites.core.units import parse_bytes
from suites.harness import distributed, results
from suites.harness import rounds as bench_rounds
from suites.harness import session as sessions
from suites.observers import busy, telemetry, tracing

SESSION = pytest.StashKey[sessions.BenchSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bench", "GPU efficiency-lever benchmarks")
    group.addoption("--device", dest="bench_device", default="auto",
                    help="auto (CUDA when available), cpu, cuda or cuda:N")
    group.addoption("--bench-profile", dest="bench_profile", default="quick", choices=profiles.NAMES,
                    help="quick: minutes on a 2-core CPU; full: the real sweep for a GPU")
    group.addoption("--bench-dtypes", dest="bench_dtypes", default=None,
                    help="comma-separated dtypes to keep, e.g. bfloat16,float16")
    group.addoption("--telemetry-interval-ms", dest="telemetry_interval_ms", type=float,
                    default=telemetry.DEFAULT_INTERVAL_MS, help="NVML sampling interval during each measurement "
                    f"(default {telemetry.DEFAULT_INTERVAL_MS:g}); 0 turns telemetry off")
    group.addoption("--trace-dir", dest="trace_dir", default=None,
                    help="also write a torch.profiler trace of every case to DIR (run after its timed measurement)")
    group.addoption("--bench-rounds", dest="bench_rounds", type=int, default=1,
                    help="measure the selection N times in interleaved passes and record each round's median per "
                    f"case, for verdicts from run-to-run noise (nightly: {bench_rounds.NIGHTLY_ROUNDS})")
    group.addoption("--bench-mem-budget", dest="bench_mem_budget", default=None, type=parse_bytes,
                    help="memory limit of the batch-size search, e.g. 2GiB (CPU default: the profile's; CUDA: none)")
    group.addoption("--achievable-peaks", dest="achievable_peaks", default="auto", choices=("auto", "search", "off"),
                    help="the achievable gemm and bandwidth peaks that pct_achievable divides by: auto loads this "
                    "machine's from --achievable-cache or searches (seconds on CPU quick, about a minute per dtype "
                    "on a GPU in full); search searches again; off: no pct_achievable")
    group.addoption("--achievable-cache", dest="achievable_cache", default=str(achievable.default_cache()),
                    help="directory of achievable-peak files, one per machine identity (default: %(default)s)")
    group.addoption("--dist-timeout-s", dest="dist_timeout_s", type=float, default=distributed.DEFAULT_TIMEOUT_S,
                    help="under torchrun: seconds any collective may wait for the other ranks before the run fails "
                    f"(default {distributed.DEFAULT_TIMEOUT_S:g})")


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark reads its options
def pytest_configure(config: pytest.Config) -> None:
    """Validate the options early (a usage error, not a silent all-skip) and keep raw samples in saved runs.

    In a `--benchmark-only` run with no output chosen, results are autosaved into .benchmarks/ so that a run
    never ends with numbers only on the screen, under the name `--benchmark-autosave` gives: pytest-benchmark's
    tag of the commit, date and dirty flag (e.g. 0001_3f2a9c1_20260101_120000_uncommited-changes.json).
    """
    config.stash[SESSION] = sessions.from_config(config)
    config.stash[SESSION].extensions.extend(observers(config))
    option = config.option
    world = config.stash[SESSION].world
    if world is not None and config.stash[SESSION].rounds > 1:
        raise pytest.UsageError("--bench-rounds: one round under torchrun (the ranks measure each case in lockstep)")
    if hasattr(option, "benchmark_save_data"):
        option.benchmark_save_data = True
        if option.benchmark_only and not (option.benchmark_json or option.benchmark_save):
            option.benchmark_autosave = True
    if world is not None:
        distributed.quiet_other_ranks(option, world)  # after the autosave choice: ranks > 0 write nothing
    if hasattr(option, "benchmark_save_data"):
        results.take_over(config, config.stash[SESSION].not_measured)  # rank 0 only under torchrun


def observers(config: pytest.Config) -> list[Extension]:
    """NVML telemetry around every case (it reports why when it cannot), the device-busy time of training steps
    on CUDA, and with --trace-dir a profiler trace."""
    interval = config.getoption("telemetry_interval_ms")
    if not (math.isfinite(interval) and interval >= 0):
        raise pytest.UsageError(f"--telemetry-interval-ms {interval:g}: expected 0 (off) or a positive interval")
    device = bench_session(config).device
    found: list[Extension] = [telemetry.TelemetryExtension(device, interval), busy.BusyExtension()]
    if trace_dir := config.getoption("trace_dir"):
        try:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--trace-dir {trace_dir}: {exc.strerror or exc}") from None
        if not os.access(trace_dir, os.W_OK | os.X_OK):  # else every case's trace fails, said only in extra_info
            raise pytest.UsageError(f"--trace-dir {trace_dir}: cannot write there (permission denied)")
        world = bench_session(config).world
        found.append(tracing.TraceExtension(Path(trace_dir), None if world is None else world.rank))
    return found


@pytest.hookimpl(tryfirst=True)  # before pytest's own pass, which is the last round
def pytest_runtestloop(session: pytest.Session) -> None:
    """With --bench-rounds N, N-1 rounds of every selected case before pytest's own pass, which is the last."""
    config = session.config
    s = bench_session(config)
    bench = getattr(config, "_benchmarksession", None)
    if s.rounds < 2 or config.option.collectonly or session.testsfailed or bench is None or bench.disabled:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    report = reporter.write_line if reporter is not None else print
    cases = bench_rounds.bench_cases(session.items)
    s.round_log = bench_rounds.measure_rounds(cases, s.rounds, lambda case, earlier: sessions.measure_once(
        s, case, earlier), report, journal_rounds(session, s))


def journal_rounds(session: pytest.Session, s: sessions.BenchSession) -> Callable[[list[CaseResult]], None] | None:
    """What hands each earlier round of a case to the results writer (None when no writer took the outputs)."""
    writer = results.writer_of(session.config)
    if writer is None:
        return None
    items = {item.callspec.params["case"].id: item for item in session.items
             if isinstance(getattr(item, "callspec", None) and item.callspec.params.get("case"), Case)}

    def journal(done: list[CaseResult]) -> None:
        item = items[done[-1].case.id]
        writer.journal_round(item, *sessions.rounds_entry(s, item, done), rounds_done=len(done))
    return journal


def bench_session(config: pytest.Config) -> sessions.BenchSession:
    """The run's shared state (device, profile, rule, peaks, the cases not measured)."""
    return config.stash[SESSION]


def parametrize(metafunc: pytest.Metafunc, cases: Callable[[str], list[Case]]) -> None:
    """Parametrize a bench test's `case` argument with the suite's cases for this profile and dtype filter."""
    if "case" not in metafunc.fixturenames:
        return
    s = bench_session(metafunc.config)
    selected = s.select(cases(s.profile))
    metafunc.parametrize("case", selected, ids=[c.id.split("/", 1)[1] for c in selected])


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    machine_info.update(devices.machine_info(bench_session(config).device))
    machine_info["telemetry"] = telemetry.machine_info(bench_session(config).extensions)
    if (found := bench_session(config).achievable_info()) is not None:
        machine_info["achievable"] = found
    if (world := bench_session(config).world) is not None:
        machine_info["distributed"] = distributed.machine_info(world, bench_session(config).device)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under torchrun, check that every rank collected the same cases in the same order."""
    if (world := bench_session(session.config).world) is not None:
        distributed.check_same_cases([item.nodeid for item in session.items], world)


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION in config.stash and config.stash[SESSION].world is not None:
        distributed.leave()


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list, output_json: dict) -> None:
    """Add the cases that produced no timing (oom, unsupported, error) beside pytest-benchmark's `benchmarks`."""
    output_json["not_measured"] = list(bench_session(config).not_measured)


@pytest.fixture
def run_case(request: pytest.FixtureRequest, benchmark) -> Callable[[Case], CaseResult]:
    """`run_case(case)`: measure one case in device time and record it in the benchmark JSON."""
    shared = bench_session(request.config)
    return lambda case: sessions.run(shared, benchmark, request, case)
