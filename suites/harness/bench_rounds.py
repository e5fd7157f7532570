"""`--bench-rounds N`: measure the whole selection N times in interleaved passes, one median per case per round.

Why: a nightly verdict compares one run with another, so what matters is how much a case moves from one run to
the next, and the samples of one run (taken within a second or two) cannot show that. As asv does with its
rounds, every case is measured once per pass over the whole selection; the load of a shared machine, a clock
that drifts or a neighbour's job then touches each case in several rounds rather than all of one case's
samples, and the spread of a case's round medians is its own run-to-run noise, which `reports compare` reads.

Rounds 1..N-1 run before pytest's own pass (`measure_rounds`, from the `pytest_runtestloop` hook), each in
another order (`round_order`) so that no case always sits at the same moment of a pass; pytest's pass is round
N and records the case. Its headline comes from every round: the JSON's `stats` (the median every report shows)
and every figure derived from them are over the samples of all N rounds, and `round_medians_s` lists each
round's own median (the `rounds` step of the case's entry, suites/harness/entry.py). Each round uses the
per-round rule of the profile (suites/core/profiles.py): shorter than the profile's rule so that N rounds cost
about what one measurement did. Correctness experiments (`Case.kind` `check`, the numerics suite) are not
speed figures and run once. Observers (telemetry, traces) run in pytest's round only: they describe the recorded
case and a trace of every round would be N copies of the same thing. A `device_bench` callable exists only
inside its test, so its rounds are taken there, back to back (`session.measure_rounds_in_place`), and pooled the
same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from suites.core.cases import Case
from suites.core.defaults import NIGHTLY_ROUNDS
from suites.core.measurement import Measurement
from suites.core.runner import CaseResult

# Each round is a whole pass over the selection: past this many, a run costs hours and its round medians say
# nothing that a history of nightly runs does not say better.
MAX_ROUNDS = 20


def parse_rounds(value: int) -> int:
    """A usage error unless 1 to MAX_ROUNDS rounds are asked for."""
    if not 1 <= value <= MAX_ROUNDS:
        raise pytest.UsageError(f"--bench-rounds {value}: expected 1 to {MAX_ROUNDS} rounds (each is a whole pass "
                                f"over the selection; nightly runs use {NIGHTLY_ROUNDS})")
    return value


def round_order(count: int, index: int, rounds: int) -> list[int]:
    """The order of `count` cases in round `index` (0 is pytest's pass, in collection order).

    Round r is the collection order rotated to start r/N of the way through it, so over N rounds (N <= count)
    each case sits at N different moments of a pass: early, late, in the middle. A rotation, unlike a shuffle,
    guarantees that: a random order leaves some case at the same place in two rounds most of the time.
    """
    if count == 0:
        return []
    start = (index * count) // rounds
    return [(start + i) % count for i in range(count)]


@dataclass
class RoundLog:
    """Each case's results of the rounds run before pytest's pass, by case id, in round order."""

    results: dict[str, list[CaseResult]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)

    def add(self, result: CaseResult) -> None:
        self.results.setdefault(result.case.id, []).append(result)


def in_rounds(case: Case) -> bool:
    """Whether a case is measured in every round: speed figures are, correctness experiments (`kind` `check`,
    run once by the runner) are not."""
    return case.kind != "check"


def case_of(item: pytest.Item) -> Case | None:
    """The suite's case a collected test measures through the `run_case` fixture (None: a test of another kind)."""
    case = getattr(item, "callspec", None) and item.callspec.params.get("case")
    return case if isinstance(case, Case) and "run_case" in getattr(item, "fixturenames", ()) else None


def bench_cases(items: Sequence[pytest.Item]) -> list[Case]:
    """The cases of the collected items that measure speed through the `run_case` fixture, in collection order."""
    return [case for item in items if (case := case_of(item)) is not None and in_rounds(case)]


def measure_rounds(cases: list[Case], rounds: int, run: Callable[[Case, list[CaseResult]], CaseResult],
                   report: Callable[[str], None] = print,
                   recorded: Callable[[list[CaseResult]], None] | None = None) -> RoundLog:
    """The rounds before pytest's pass, each over every case in its own order; pytest's pass (order 0) follows.
    `run` measures a case given its results of the rounds before (so that its figures pool them all).

    `recorded` is called with a case's results so far each time one of its rounds ends (the results writer
    journals them, so a run stopped in these rounds keeps what they measured).
    """
    log = RoundLog()
    for index in range(1, rounds):
        start = time.perf_counter()
        for position in round_order(len(cases), index, rounds):
            case = cases[position]
            result = run(case, log.results.get(case.id, []))
            log.add(result)
            if recorded is not None:
                recorded(log.results[result.case.id])
        log.seconds.append(time.perf_counter() - start)
        report(f"bench round {index}/{rounds}: {len(cases)} cases in {log.seconds[-1]:.1f} s")
    return log


def earlier_measurements(earlier: list[CaseResult]) -> list[Measurement]:
    """Each round's own measurement, of the rounds before that produced one, in the order they ran (the latest
    measured result pools them all: its `rounds`)."""
    measured = [r.measurement for r in earlier if r.measurement is not None]
    return (measured[-1].rounds or [measured[-1]]) if measured else []
