"""`--benchmark-compare-fail`'s verdict in one line per failed check, instead of pytest-benchmark's traceback.

pytest-benchmark checks the run against the saved run that `--benchmark-compare` loaded and raises from its
terminal summary: a regression ended the run in a traceback of some forty lines, under a message that named the
saved run by twelve characters of its file name and the change as `PercentageRegressionCheck: 372.577648666 >
100.000000000`; a run with no saved run to compare against (the first run of a nightly job) ended in a traceback
too. Here the checks' findings are read from its session when the run finishes (`judge`, which sets pytest's exit
status as pytest-benchmark's exceptions did: 1 for a regression, 4 when nothing was compared), taken out of it
before its summary (`silence`, so that it raises nothing), and said after that summary (`CompareFail.say`): one line
per failed check naming the case, the statistic, both values, the change against what the option allows, and the
saved run's file. The run's results are written before any of this (suites/harness/results.py): a first run
without a baseline, saved, still becomes the next run's, as with pytest-benchmark. `--benchmark-compare-fail` without
`--benchmark-compare` can compare nothing, ever: that is a usage error before the first case
(suites/harness/options.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pytest_benchmark.utils import PercentageRegressionCheck

from suites.harness.entry import benchmark_session


@dataclass
class CompareFail:
    """What `--benchmark-compare-fail` found: its checks, whether a saved run was compared, where the saved runs
    are, and one line per failed check."""

    checks: list = field(default_factory=list)
    compared: bool = False
    storage: str = ""
    lines: list[str] = field(default_factory=list)

    @property
    def status(self) -> pytest.ExitCode:
        if self.checks and not self.compared:
            return pytest.ExitCode.USAGE_ERROR
        return pytest.ExitCode.TESTS_FAILED if self.lines else pytest.ExitCode.OK

    def say(self, terminalreporter) -> None:
        if self.checks and not self.compared:
            terminalreporter.write_line(
                f"--benchmark-compare-fail {options(self.checks)}: nothing was compared (--benchmark-compare "
                f"found no saved run in {self.storage})", red=True)
        for line in self.lines:
            terminalreporter.write_line(f"regression: {line}", red=True)


def judge(session: pytest.Session) -> CompareFail:
    """The checks' findings, as pytest-benchmark's own checks decide them, and the run's exit status set from them
    (an exit status that already says worse is kept)."""
    bench = benchmark_session(session.config)
    if bench is None or not getattr(bench, "compare_fail", None):
        return CompareFail()
    mapping = bench.compared_mapping or {}
    verdict = CompareFail(list(bench.compare_fail), bool(mapping), str(bench.storage))
    folder = Path(getattr(bench.storage, "path", ""))  # a file storage's folder: its runs are named within it
    for current in filter(None, bench.benchmarks):
        for path, saved_runs in mapping.items():
            saved = saved_runs.get(current.fullname)
            if saved is not None:
                verdict.lines += [describe(current, saved["stats"], check, folder / path)
                                  for check in verdict.checks if check.fails(current, saved["stats"])]
    if verdict.status != pytest.ExitCode.OK and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = verdict.status
    return verdict


def silence(config: pytest.Config) -> None:
    """Take the checks out of pytest-benchmark's session before its summary, which would raise from them."""
    bench = benchmark_session(config)
    if bench is not None:
        bench.compare_fail, bench.performance_regressions = [], []


def describe(current, saved: dict, check, path: Path) -> str:
    """One failed check: `CASE STAT NOW against THEN in FILE: +CHANGE (--benchmark-compare-fail OPTION allows ...)`."""
    now, then = current[check.field], saved[check.field]
    if isinstance(check, PercentageRegressionCheck):
        change, allowed = f"{check.compute(current, saved):+.0f} %", f"+{check.threshold:g} %"
    else:
        change, allowed = f"+{seconds(now - then)}", f"+{seconds(check.threshold)}"
    return (f"{current.fullname} {check.field} {seconds(now)} against {seconds(then)} in {path}: {change} "
            f"(--benchmark-compare-fail {option(check)} allows {allowed})")


def option(check) -> str:
    """A check as the option is written: `median:100%`, `min:0.001`."""
    percent = isinstance(check, PercentageRegressionCheck)
    return f"{check.field}:{check.threshold:g}{'%' if percent else ''}"


def options(checks: list) -> str:
    return " ".join(option(check) for check in checks)


def seconds(value: float) -> str:
    """A time to three figures in the unit that keeps it at 1 or more (s, ms, us, ns)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"
