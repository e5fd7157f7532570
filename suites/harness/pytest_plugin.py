"""The suite's pytest plugin: its options, its hooks into pytest and pytest-benchmark, the `run_case` and
`device_bench` fixtures, and `parametrize` for bench files.

Installing the project registers it in every pytest run of that environment (a `pytest11` entry point named like
this module, so `-p suites.harness.pytest_plugin` and `pytest_plugins = [...]` lines stay harmless, and
`-p no:suites.harness.pytest_plugin` turns it off). It is therefore a guest in other repositories' runs:

- its options are all `--bench-...` (suites/harness/options.py), declared without importing torch;
- a run that uses none of its fixtures sees nothing of it: no torch import, no CUDA initialisation, no journal;
  pytest-benchmark's JSON, autosave, save-data, skips and messages stay exactly its own. The suite switches on
  once collection shows a selected test using `run_case` or `device_bench` (`pytest_collection_finish`);
- under pytest-xdist, pytest-benchmark disables benchmarks (timings from parallel workers are not reliable): the
  suite's cases then run once each as smoke tests, and no journal or results file is written (each worker would
  race for it); run without `-n` to measure;
- with `-p no:benchmark`, the tests using its fixtures are skipped with that reason and the others run; so are they
  where another plugin replaced pytest-benchmark's `benchmark` fixture (pytest-codspeed under --codspeed).

What a run shares lives in suites/harness/bench_session.py, the results file in suites/harness/results.py, the
`device_bench` fixture's logic in suites/harness/device_bench.py. Heavy modules are imported inside the hooks
that need them, for runs that use the suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from suites.harness import options

if TYPE_CHECKING:
    from suites.core.cases import Case
    from suites.core.runner import CaseResult, Extension
    from suites.harness.bench_session import BenchSession
    from suites.harness.device_bench import DeviceBench
    from suites.harness.entry import Recorded

SUITE_FIXTURES = ("run_case", "device_bench")
SESSION = pytest.StashKey["BenchSession"]()
PROGRESS = pytest.StashKey["ProgressPlugin"]()
VERDICT = pytest.StashKey["CompareFail"]()
NO_BENCHMARK = ("needs pytest-benchmark, which is turned off (-p no:benchmark): the suite's fixtures record their "
                "timings through it")


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Usage errors for option values that cannot be right, in the first second (suites/harness/options.py)."""
    options.check(config)


def uses_suite(item: pytest.Item) -> bool:
    """Whether a test measures through one of the suite's fixtures."""
    return any(name in getattr(item, "fixturenames", ()) for name in SUITE_FIXTURES)


def benchmark_session(config: pytest.Config) -> object | None:
    """pytest-benchmark's session object, or None when pytest-benchmark is not loaded (`-p no:benchmark`)."""
    from suites.harness import entry

    return entry.benchmark_session(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if benchmark_session(config) is None:
        skip = pytest.mark.skip(reason=NO_BENCHMARK)
        for item in items:
            if uses_suite(item):
                item.add_marker(skip)


@pytest.hookimpl(trylast=True)  # after deselection (-k, -m) and after other plugins reordered the items
def pytest_collection_finish(session: pytest.Session) -> None:
    """Switch the suite on when a selected test uses its fixtures: make the run's session (device, observers;
    under torchrun the process group, and a check that every rank collected the same cases), then take over the
    results file."""
    config = session.config
    bench = benchmark_session(config)
    if config.option.collectonly or bench is None or not any(uses_suite(item) for item in session.items):
        return
    shared = shared_session(config)
    if shared.world is not None:
        from suites.harness import distributed

        distributed.check_same_cases([item.nodeid for item in session.items], shared.world)
    claim_outputs(session, bench, shared)
    planned = announce(session, bench, shared)
    start_progress(session, bench, shared, planned)


def xdist_active(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist controller or worker."""
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) or config.getoption("dist", "no") != "no"


def claim_outputs(session: pytest.Session, bench: object, shared: BenchSession) -> None:
    """Who writes the results of a run that uses the suite.

    Nothing is written when benchmarks are disabled (`--benchmark-disable`, and pytest-xdist, where pytest-benchmark
    disables them): the cases ran once as smoke tests, and a stored run of those would be an empty baseline for
    the next comparison. Under torchrun only rank 0 writes. Otherwise the results writer (suites/harness/results.py)
    takes the file outputs over from pytest-benchmark, with the raw samples of the suite's cases (`compare`
    decides from them; plain `benchmark` tests keep pytest-benchmark's rule for theirs); a
    `--benchmark-only` run with no output chosen is autosaved into .benchmarks/ under pytest-benchmark's tag of
    the commit, date and dirty flag, so that no run ends with its numbers only on the screen (one whose
    `--benchmark-compare-fail` fails is kept outside the numbered runs, so it never becomes the next baseline).
    """
    from suites.harness import distributed, results

    config = session.config
    if bench.disabled or xdist_active(config):
        return
    if shared.world is not None and shared.world.rank != 0:
        distributed.quiet_other_ranks(bench, shared.world)
        return
    implicit_save = bench.only and not (bench.json or bench.save or bench.autosave)
    if implicit_save:
        bench.autosave = True
    bench.save_data = True  # for a storage the writer leaves to pytest-benchmark (elasticsearch)
    results.take_over(session, bench, shared.not_measured, implicit_save,
                      frozenset(item.nodeid for item in session.items if uses_suite(item)))


def announce(session: pytest.Session, bench: object, shared: BenchSession) -> list[float]:
    """The run's first lines: its profile and why (given, or the device's default), so that nobody reads a quick
    run's numbers as the real sweep's (they are recorded too: machine_info's `bench_profile`); then what the run
    is expected to cost (suites/harness/run_estimate.py; not when benchmarks are disabled: each case then runs
    once, untimed). Returns the estimate's seconds per unit of progress (empty without one), which the progress
    line counts down."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or (shared.world is not None and shared.world.rank != 0):
        return []
    from suites.harness import bench_rounds, run_estimate

    cases = sum(uses_suite(item) for item in session.items)
    reporter.write_line(f"bench: {options.profile(session.config).line}; {cases} cases on {shared.device}")
    if bench.disabled or not any(bench_rounds.case_of(item) for item in session.items):
        return []  # smoke runs, and device_bench tests only: nothing says what they cost
    searches = shared.achievable_mode != "off" and shared.world is None
    found, line = run_estimate.safely(session.items, shared, Path.cwd(), searches)
    reporter.write_line(line)
    return found.planned() if found is not None else []


def start_progress(session: pytest.Session, bench: object, shared: BenchSession, planned: list[float]) -> None:
    """The progress line every --bench-progress-interval-s (suites/harness/progress.py), where the output is a
    terminal's or a CI log's: not under pytest-xdist, not on ranks other than 0. Called between collection and the
    first test, while pytest captures nothing, so that the line's output is the run's own. `planned`: the run's
    estimate per unit of progress, which the line counts down before the run's own pace is known."""
    config = session.config
    interval = config.getoption("bench_progress_interval_s")
    if interval <= 0 or xdist_active(config) or (shared.world is not None and shared.world.rank != 0):
        return
    from suites.harness import bench_rounds, progress

    earlier = (shared.rounds - 1) * len(bench_rounds.bench_cases(session.items)) if not bench.disabled else 0
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    writer = getattr(reporter, "_tw", None)

    def line_open() -> bool:
        return bool(getattr(writer, "width_of_current_line", 0))

    total = len(session.items) + earlier
    plugin = progress.ProgressPlugin(total, interval, progress.terminal_writer(line_open),
                                     planned if len(planned) == total else [])
    config.pluginmanager.register(plugin, "bench-progress")
    config.stash[PROGRESS] = plugin


def active_session(config: pytest.Config) -> BenchSession | None:
    """The run's session when the suite is in use, else None (the hooks below then leave everything alone)."""
    return config.stash.get(SESSION, None)


def shared_session(config: pytest.Config) -> BenchSession:
    """The run's shared state (device, profile, rule, peaks, observers, the cases not measured), made on first use."""
    if SESSION not in config.stash:
        from suites.core import memory
        from suites.harness import bench_session

        shared = bench_session.from_config(config, options.profile(config).name)
        shared.extensions.extend(observers(config, shared))
        config.stash[SESSION] = shared
        memory.freeze_long_lived()  # the collections between cases walk only what the cases made
    return config.stash[SESSION]


def observers(config: pytest.Config, shared: BenchSession) -> list[Extension]:
    """NVML telemetry around every case (it reports why when it cannot), the device-busy time of training steps
    on CUDA, and with --bench-trace-dir a profiler trace."""
    from suites.observers import busy, telemetry, tracing

    found: list[Extension] = [telemetry.TelemetryExtension(shared.device,
                                                           config.getoption("bench_telemetry_interval_ms")),
                              busy.BusyExtension()]
    if trace_dir := config.getoption("bench_trace_dir"):
        found.append(tracing.TraceExtension(Path(trace_dir), None if shared.world is None else shared.world.rank))
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """When a test's call ends, before its entry is journaled: a device_bench test's extra_info keeps only the
    suite's values in the suite's fields (`DeviceBench.keep_suite_fields`); a plain `benchmark` test of a run that
    uses the suite, measured with another thread count than the run's (it called torch.set_num_threads), says so
    in its extra_info as the suite's cases do (the `threads` step of suites/harness/entry.py)."""
    yield
    funcargs = getattr(item, "funcargs", {})
    if (ours := funcargs.get("device_bench")) is not None and hasattr(ours, "keep_suite_fields"):
        ours.keep_suite_fields()
    shared = active_session(item.config)
    fixture = funcargs.get("benchmark")
    if shared is not None and is_pytest_benchmark(fixture) and not uses_suite(item):
        import torch

        from suites.harness import entry

        entry.mark_threads(fixture, shared.torch_threads, torch.get_num_threads())


@pytest.hookimpl(tryfirst=True)  # before pytest's own pass, which is the last round
def pytest_runtestloop(session: pytest.Session) -> None:
    """With --bench-rounds N, N-1 rounds of every selected case before pytest's own pass, which is the last."""
    config = session.config
    shared = active_session(config)
    bench = benchmark_session(config)
    if shared is None or shared.rounds < 2 or session.testsfailed or bench is None or bench.disabled:
        return
    from suites.harness import bench_rounds, bench_session

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    report = reporter.write_line if reporter is not None else print
    cases = bench_rounds.bench_cases(session.items)
    tracker = config.stash.get(PROGRESS, None)

    def measure(case: Case, earlier: list[CaseResult]) -> CaseResult:
        if tracker is None:
            return bench_session.measure_once(shared, case, earlier)
        return tracker.progress.measure(f"{case.id} (round {len(earlier) + 1} of {shared.rounds})",
                                        lambda: bench_session.measure_once(shared, case, earlier))

    shared.round_log = bench_rounds.measure_rounds(cases, shared.rounds, measure, report,
                                                   journal_rounds(session, shared))


def journal_rounds(session: pytest.Session, shared: BenchSession) -> Callable[[list[CaseResult]], None] | None:
    """What hands each earlier round of the suites' cases to the results writer (None when no writer took the
    outputs)."""
    from suites.core.cases import Case

    items = {item.callspec.params["case"].id: item for item in session.items
             if isinstance(getattr(item, "callspec", None) and item.callspec.params.get("case"), Case)}
    return round_journal(session.config, shared, lambda case: items[case.id])


def round_journal(config: pytest.Config, shared: BenchSession,
                  item_of: Callable[[Case], pytest.Item]) -> Callable[[list[CaseResult]], None] | None:
    """What hands a case's results so far to the results writer each time one of its earlier rounds ends, as the
    entry of its test (`item_of`), so that a run stopped in those rounds keeps them; None without a writer."""
    from suites.harness import entry, results

    writer = results.writer_of(config)
    if writer is None:
        return None

    def journal(done: list[CaseResult]) -> None:
        item = item_of(done[-1].case)
        notes = entry.RunNotes(profile=str(shared.profile))
        writer.journal_round(item, *entry.from_rounds(item, done, notes), rounds_done=len(done))
    return journal


def parametrize(metafunc: pytest.Metafunc, cases: Callable[[str], list[Case]]) -> None:
    """Parametrize a bench test's `case` argument with the suite's cases for this profile and dtype filter."""
    if "case" not in metafunc.fixturenames:
        return
    from suites.core.cases import select_dtypes
    from suites.harness.bench_session import parse_dtypes

    config = metafunc.config
    selected = select_dtypes(cases(options.profile(config).name), parse_dtypes(config.getoption("bench_dtypes")))
    metafunc.parametrize("case", selected, ids=[c.id.split("/", 1)[1] for c in selected])


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-benchmark's, absent with -p no:benchmark
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """The device, telemetry, achievable peaks and ranks of a run that uses the suite."""
    if (shared := active_session(config)) is None:
        return
    from suites.core import devices
    from suites.harness import distributed
    from suites.observers import telemetry

    machine_info.update(devices.machine_info(shared.device, shared.torch_threads))
    choice = options.profile(config)
    machine_info |= {"bench_profile": choice.name, "bench_profile_source": choice.source}
    machine_info["telemetry"] = telemetry.machine_info(shared.extensions)
    if (found := shared.achievable_info()) is not None:
        machine_info["achievable"] = found
    if shared.world is not None:
        machine_info["distributed"] = distributed.machine_info(shared.world, shared.device)


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list, output_json: dict) -> None:
    """Add the cases that produced no timing (oom, unsupported, error) beside pytest-benchmark's `benchmarks`."""
    if (shared := active_session(config)) is not None:
        output_json["not_measured"] = list(shared.not_measured)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """`--benchmark-compare-fail`'s verdict and exit status (suites/harness/regressions.py), said in the summary."""
    from suites.harness import regressions

    session.config.stash[VERDICT] = regressions.judge(session)


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter, config: pytest.Config):
    """pytest-benchmark's summary without its traceback, then each failed check of --benchmark-compare-fail in one
    line."""
    verdict = config.stash.get(VERDICT, None)
    if verdict is not None and verdict.checks:
        from suites.harness import regressions

        regressions.silence(config)
    result = yield
    if verdict is not None:
        verdict.say(terminalreporter)
    return result


def pytest_unconfigure(config: pytest.Config) -> None:
    if (shared := active_session(config)) is None:
        return
    from suites.core import memory, reuse

    reuse.forget_draws()  # the last inputs drawn and the last group's float64 reference (on the device) go back
    reuse.SHELF.clear()  # with the run: the plugin is a guest in a process that may go on
    memory.thaw()
    if shared.world is not None:
        from suites.harness import distributed

        distributed.leave()


def is_pytest_benchmark(fixture: object) -> bool:
    """Whether a `benchmark` fixture is pytest-benchmark's: pytest-codspeed under --codspeed puts its own in its
    place, whose class claims to be pytest-benchmark's (so `type`, not `isinstance`)."""
    from pytest_benchmark.fixture import BenchmarkFixture

    return issubclass(type(fixture), BenchmarkFixture)


def require_pytest_benchmark(benchmark: object) -> None:
    """Skip, with the reason, a test whose `benchmark` fixture is not pytest-benchmark's (is_pytest_benchmark):
    the suite's fixtures record through pytest-benchmark's."""
    if not is_pytest_benchmark(benchmark):
        pytest.skip(f"needs pytest-benchmark's benchmark fixture, which {type(benchmark).__module__} replaced "
                    "(pytest-codspeed does under --codspeed): the suite's fixtures record their timings through it")


@pytest.fixture
def run_case(request: pytest.FixtureRequest, benchmark) -> Callable[[Case], Recorded]:
    """`run_case(case)`: measure one of the suite's cases in device time and record it in the benchmark JSON (what
    it returns: the runner's result and its entry's extra_info)."""
    require_pytest_benchmark(benchmark)
    from suites.harness import bench_session
    shared = shared_session(request.config)
    return lambda case: bench_session.run(shared, benchmark, request, case)


@pytest.fixture
def device_bench(request: pytest.FixtureRequest, benchmark) -> Iterator[DeviceBench]:
    """`device_bench(fn, *args, flops=..., bytes=..., dtype=..., cold=..., graph=..., **kwargs)`: time any callable
    as the suite times its ops (device time with the host held out; wall time on a CPU), record it in the benchmark
    JSON and return what `fn` returned; `.pedantic(...)` and `.extra_info` as pytest-benchmark's fixture has them.
    `device_bench.device` is the run's device (--bench-device). See suites/harness/device_bench.py and
    docs/device_bench.md."""
    require_pytest_benchmark(benchmark)
    from suites.harness.device_bench import DeviceBench
    shared = shared_session(request.config)
    fixture = DeviceBench(shared, benchmark, request, round_journal(request.config, shared, lambda _: request.node))
    yield fixture
    fixture.finish()
