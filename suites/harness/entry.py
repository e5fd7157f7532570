"""A case's entry in the results file: the one writer of its `extra_info`, and the one user of pytest-benchmark's
private members.

A case's trip ends here. The runner gives a result (suites/core/runner.py: a status, the measurement, the case's
own figures: what it measured and what follows from that); the run knows more of it (`RunNotes`: how the ranks
settled it, the profile, torch's threads, its percent of the achievable peak, its earlier rounds). `extra_info`
assembles them, one step after the other (`STEPS`), in the order the entry holds them:

1. `figures`: the case's own figures, as the runner made them;
2. `status`: its status, and the reason of one that is not `ok`;
3. `ranks`: under torchrun, the world's size and every rank's median and telemetry (distributed.RankLockstep);
4. `profile`: the run's `--bench-profile`;
5. `threads`: `torch_threads`, where the case ran with another thread count than the run started with;
6. `achievable`: `pct_achievable`, the case's percent of this machine's achievable peak (suites/core/achievable.py);
7. `rounds`: with `--bench-rounds`, each round's median and samples (the measurement pools them all).

A field of every case belongs to the runner's figures; a field that needs the run (its options, the other ranks,
the rounds before) is a step here: its value in a field of `RunNotes`, a function that reads it, and its place in
`STEPS`. The names are those of docs/results.md.

Entries come out of here three ways, each from that one builder: a measured case hands its samples to
pytest-benchmark's fixture as rounds of one call each (`record`), so that the JSON's `stats` (min, median, IQR,
...) and its `data` are device seconds per call; a case with no timing becomes an entry of `not_measured`
(`not_measured`); a case whose run stopped after its earlier rounds, before pytest's pass, keeps an entry made
from them (`from_rounds`). pytest-benchmark has no public way to take samples from another clock: `record` uses
the two members its own `pedantic()` uses (`_make_stats`, `_mode`) and `from_rounds` its `Metadata` with an object
that stands in for its fixture. Those, the options a test gave its fixture, its cProfile saving and its session
are pytest-benchmark's private members, all used here and nowhere else (tests/test_layout.py), so that a change in
pytest-benchmark shows in one module; tests/test_plugin.py runs real benchmarks and checks their JSON against the
samples, so such a change cannot break this silently.

The module imports nothing heavy: the plugin asks it for pytest-benchmark's session in runs that do not use the
suite (suites/harness/pytest_plugin.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cProfile

    import pytest

    from suites.core.measurement import Measurement
    from suites.core.runner import CaseResult


@dataclass(frozen=True)
class RunNotes:
    """What the run adds to a case's own figures, each read by one step of `extra_info`. A field left at its
    default adds nothing: a case recorded before the run's rule applied to it (device_bench's first call failed)
    has no profile."""

    ranks: dict = field(default_factory=dict)  # distributed.RankLockstep.settle: the world and every rank's figures
    profile: str | None = None
    run_threads: int | None = None  # torch's threads when the run started: the run's label (machine_info)
    threads: int | None = None  # torch's threads when the case was recorded
    achievable: dict = field(default_factory=dict)  # BenchSession.pct_achievable
    earlier_rounds: Sequence[CaseResult] | None = None  # the case's other rounds; None: not measured in rounds


Step = Callable[["CaseResult", RunNotes], dict]


def figures(result: CaseResult, notes: RunNotes) -> dict:
    return dict(result.figures)


def status(result: CaseResult, notes: RunNotes) -> dict:
    """The status every entry holds, and the reason of one that is not `ok` (as the runner or the ranks gave it)."""
    return {"status": result.status} | ({"reason": result.reason} if result.reason else {})


def ranks(result: CaseResult, notes: RunNotes) -> dict:
    return dict(notes.ranks)


def profile(result: CaseResult, notes: RunNotes) -> dict:
    return {} if notes.profile is None else {"profile": str(notes.profile)}


def threads(result: CaseResult, notes: RunNotes) -> dict:
    return torch_threads(notes.run_threads, notes.threads)


def torch_threads(run_threads: int | None, now: int | None) -> dict:
    """`torch_threads` when a case was measured with another thread count than the run's (a test called
    torch.set_num_threads): the run's label stays the count it started with."""
    return {"torch_threads": now} if run_threads is not None and now is not None and now != run_threads else {}


def achievable(result: CaseResult, notes: RunNotes) -> dict:
    return dict(notes.achievable)


def rounds(result: CaseResult, notes: RunNotes) -> dict:
    """Fields of a case measured in several rounds (its measurement pools them: `timing.pool_rounds`).

    `round_medians_s` lists the median of every round that produced a timing in the order they ran (pytest's
    round, which runs last, last) and `round_samples` how many samples each gave (the JSON's `data` is theirs,
    in that order), `bench_rounds` the rounds asked for and `rounds_converged` how many met the per-round rule
    on their own. A round that failed while another measured is named in `round_failures`.
    """
    earlier = notes.earlier_rounds
    if earlier is None or result.measurement is None:
        return {}
    measured = result.measurement.rounds or [result.measurement]
    info: dict = {"bench_rounds": 1 + len(earlier), "round_medians_s": [m.median_s for m in measured],
                  "round_samples": [len(m.samples_s) for m in measured],
                  "rounds_converged": sum(m.converged for m in measured)}
    failures = [f"{r.status}: {r.reason}" for r in earlier if r.measurement is None]
    if failures:
        info["round_failures"] = failures
    return info


STEPS: tuple[Step, ...] = (figures, status, ranks, profile, threads, achievable, rounds)


def extra_info(result: CaseResult, notes: RunNotes) -> dict:
    """A case's `extra_info`: every step's fields in turn (a later step's name would replace an earlier one's)."""
    info: dict = {}
    for step in STEPS:
        info |= step(result, notes)
    return info


@dataclass(frozen=True)
class Recorded:
    """A case as it was recorded: the runner's result and the `extra_info` its entry holds."""

    result: CaseResult
    info: dict


def options(m: Measurement) -> dict:
    """pytest-benchmark's `options` of an entry, as the measurement ran: `disable_gc` whether the collector was off
    while sampling (it always is for sampled cases, --benchmark-disable-gc or not), `min_rounds` the samples no
    stop came before (None: the profile's rule may stop on its timeout sooner), `max_time` the sampling's timeout,
    `min_time` the shortest sample the calls were batched to, `warmup` whether calls ran before the samples."""
    rule = m.rule
    return {"disable_gc": m.gc_disabled, "timer": m.timer, "min_rounds": rule.count or rule.at_least or None,
            "max_time": rule.timeout_s, "min_time": rule.min_sample_s, "warmup": m.warmup_calls > 0}


def record(benchmark, result: CaseResult, info: dict) -> None:
    """Hand the device-time samples to pytest-benchmark as rounds of one call each; set group, params, extra_info."""
    benchmark.group = result.case.suite
    benchmark.params = dict(result.case.params)
    benchmark.extra_info.update(info)
    # the fixture was used, measured or not: a disabled run (--benchmark-disable, pytest-xdist) must not warn
    # "Benchmark fixture was not used", which fails hosts that turn warnings into errors
    benchmark._mode = "suites.harness.entry.record(...)"
    if benchmark.disabled or result.measurement is None:
        return
    stats = benchmark._make_stats(1)
    stats.options.update(options(result.measurement))
    for seconds in result.measurement.samples_s:
        stats.update(seconds)


def not_measured(item_name: str, nodeid: str, result: CaseResult, info: dict) -> dict:
    """A JSON entry shaped like pytest-benchmark's, without stats, for a case that produced no timing."""
    return {"group": result.case.suite, "name": item_name, "fullname": nodeid, "params": dict(result.case.params),
            "extra_info": info}


def from_rounds(item: pytest.Item, results: list[CaseResult], notes: RunNotes) -> tuple[str, dict]:
    """A case's entry from the rounds it had before pytest's pass, what a run stopped before that pass keeps:
    (`benchmarks`, ENTRY) shaped as `record` makes it, from the latest round that measured (which pools the
    rounds before it, listed in `round_medians_s` by the `rounds` step), or (`not_measured`, ENTRY) when none did.
    `notes` says what the run adds; its rounds are taken from `results`."""
    from pytest_benchmark.stats import Metadata

    measured = [r for r in results if r.measurement is not None]
    latest = measured[-1] if measured else results[-1]
    info = extra_info(latest, replace(notes, earlier_rounds=[r for r in results if r is not latest]))
    if latest.measurement is None:
        return "not_measured", not_measured(item.name, item.nodeid, latest, info)
    callspec = getattr(item, "callspec", None)  # a device_bench test need not be parametrized
    fixture = SimpleNamespace(name=item.name, fullname=item.nodeid, group=latest.case.suite,
                              param=callspec.id if callspec is not None else None,
                              params=dict(latest.case.params), extra_info=info, cprofile_stats=None)
    entry = Metadata(fixture, iterations=1, options=options(latest.measurement))
    for seconds in latest.measurement.samples_s:
        entry.update(seconds)
    return "benchmarks", entry.as_dict(include_data=True)


def mark_threads(benchmark, run_threads: int, now: int) -> None:
    """The `threads` step for a plain `benchmark` test of a run that uses the suite (its entry is
    pytest-benchmark's own): `torch_threads` when it called torch.set_num_threads."""
    benchmark.extra_info.update(torch_threads(run_threads, now))


def keep_suite_fields(benchmark, suite: dict, users_before: dict) -> list[str]:
    """After a device_bench test: the names of the suite's fields that the test also set in its fixture's
    extra_info, before its call (`users_before`) or after. One the suite recorded for the case (`suite`, what
    `record` wrote) gets the suite's value back; one it did not (a `tflops` on a call given no `flops=`, a
    `converged` on a case that failed) is removed: a field of the suite's is never the test's figure posing as a
    measured one. The suite's fields are the schema's (`EXTRA_INFO_FIELDS`)."""
    from reports.format.schema import EXTRA_INFO_FIELDS

    clashes = [k for k in suite if k in users_before or benchmark.extra_info.get(k) is not suite[k]]
    posing = [k for k in benchmark.extra_info if k in EXTRA_INFO_FIELDS and k not in suite]
    benchmark.extra_info.update({k: suite[k] for k in clashes})
    for k in posing:
        del benchmark.extra_info[k]
    return sorted(clashes + posing)


# pytest-benchmark's other private members the suite needs: its session, and what a test asked of its fixture.

def benchmark_session(config: pytest.Config) -> object | None:
    """pytest-benchmark's session object, or None when pytest-benchmark is not loaded (`-p no:benchmark`)."""
    return getattr(config, "_benchmarksession", None)


def used_in(benchmark) -> str | None:
    """How the fixture was used already (pytest-benchmark's mode: `benchmark(...)`, `benchmark.pedantic(...)`, or
    the suite's own), None while it is not."""
    return benchmark._mode or None


def claim(benchmark, mode: str) -> None:
    """Mark the fixture used, as pytest-benchmark marks it, so that a second use is refused as its own are."""
    benchmark._mode = mode


def min_rounds(benchmark) -> object:
    """The `min_rounds` a `benchmark` marker or --benchmark-min-rounds gave the fixture (unchecked)."""
    return benchmark._min_rounds


def max_time(benchmark) -> object:
    """The `max_time` a `benchmark` marker or --benchmark-max-time gave the fixture (unchecked)."""
    return benchmark._max_time


def save_cprofile(benchmark, profile: cProfile.Profile) -> None:
    """Save a cProfile of the calls as pytest-benchmark saves its own (terminal table, JSON `cprofile`, dump)."""
    benchmark._save_cprofile(profile)
