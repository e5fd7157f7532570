"""`--bench-rounds N`: measure the whole selection N times in interleaved passes, one median per case per round.

Why: a nightly verdict compares one run with another, so what matters is how much a case moves from one run to
the next, and the samples of one run (taken within a second or two) cannot show that. As asv does with its
rounds, every case is measured once per pass over the whole selection; the load of a shared machine, a clock
that drifts or a neighbour's job then touches each case in several rounds rather than all of one case's
samples, and the spread of a case's round medians is its own run-to-run noise, which `reports compare` reads.

Rounds 1..N-1 run before pytest's own pass (`measure_rounds`, from the `pytest_runtestloop` hook), each in
another order (`round_order`) so that no case always sits at the same moment of a pass; pytest's pass is round
N and records the case with `round_medians_s` (`merge`). Each round uses the per-round
rule of the profile (`ROUND_RULES`): shorter than the profile's rule so that N rounds cost about what one
measurement did. Correctness experiments (`Case.kind` `check`, the numerics suite) are not speed figures and run
once. Observers (telemetry, traces) run in pytest's round only: they describe the recorded case and a
trace of every round would be N copies of the same thing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from suites.core.cases import Case
from suites.core.runner import CaseResult
from suites.core.timing import StopRule

# Per-round rules. Full: 3 rounds of at least 0.2 s and 10 samples each replace one measurement of 0.5 s; the
# timeout is a third of the profile's 15 s, so a case that never converges costs what it did. Quick: the same
# scaling of the quick rule, so that --bench-rounds 3 on the quick profile is the nightly setting in miniature.
QUICK_ROUND = StopRule(min_samples=5, min_time_s=0.02, target_rel_iqr=0.05, timeout_s=0.7, warmup_s=0.01)
FULL_ROUND = StopRule(min_samples=10, min_time_s=0.2, target_rel_iqr=0.02, timeout_s=5.0, warmup_s=0.05)
ROUND_RULES = {"quick": QUICK_ROUND, "full": FULL_ROUND}


def parse_rounds(value: int) -> int:
    """A usage error unless at least one round is asked for."""
    if value < 1:
        raise pytest.UsageError(f"--bench-rounds {value}: expected a number of rounds >= 1")
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


def bench_cases(items: Sequence[pytest.Item]) -> list[Case]:
    """The cases of the collected items that measure speed through the `run_case` fixture, in collection order."""
    found = []
    for item in items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        if isinstance(case, Case) and "run_case" in getattr(item, "fixturenames", ()) and in_rounds(case):
            found.append(case)
    return found


def measure_rounds(cases: list[Case], rounds: int, run: Callable[[Case], CaseResult],
                   report: Callable[[str], None] = print,
                   recorded: Callable[[list[CaseResult]], None] | None = None) -> RoundLog:
    """The rounds before pytest's pass, each over every case in its own order; pytest's pass (order 0) follows.

    `recorded` is called with a case's results so far each time one of its rounds ends (the results writer
    journals them, so a run stopped in these rounds keeps what they measured).
    """
    log = RoundLog()
    for index in range(1, rounds):
        start = time.perf_counter()
        for position in round_order(len(cases), index, rounds):
            result = run(cases[position])
            log.add(result)
            if recorded is not None:
                recorded(log.results[result.case.id])
        log.seconds.append(time.perf_counter() - start)
        report(f"bench round {index}/{rounds}: {len(cases)} cases in {log.seconds[-1]:.1f} s")
    return log


def merge(final: CaseResult, earlier: list[CaseResult]) -> dict:
    """extra_info fields for a case measured in several rounds.

    The JSON's `stats` and the fields derived from them (rel_iqr, tflops, ...) stay those of pytest's round, so
    they agree with each other; `round_medians_s` lists the median of every round that produced a timing in
    the order they ran (pytest's round, which runs last, last), `bench_rounds` the rounds asked for and
    `rounds_converged` how many met the rule's spread target. A round that failed while another measured is
    named in `round_failures`.
    """
    if final.measurement is None:
        return {}
    measured = [r.measurement for r in earlier if r.measurement is not None] + [final.measurement]
    info: dict = {"bench_rounds": 1 + len(earlier), "round_medians_s": [m.median_s for m in measured],
                  "rounds_converged": sum(m.converged for m in measured)}
    failures = [f"{r.status}: {r.reason}" for r in earlier if r.measurement is None]
    if failures:
        info["round_failures"] = failures
    return info
