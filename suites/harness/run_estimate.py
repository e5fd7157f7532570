"""What the main job expects to cost, said at its start and counted down by its progress line.

The same plan as `python -m suites plan` (suites/core/planning.py), for the cases this run selected (after `-k`,
`--bench-dtypes`) on this run's device and profile: each case measured where the last results of this device
identity timed it (`case_s`, from the newest run of that identity under .benchmarks/), else reasoned, pytest's own
time added to both; with `--bench-rounds N` every round of a case, under the per-round rule; and the achievable
search where this machine has none cached and the run will make one. A line at the start says it:

    bench: about 28 min for 748 cases on this device (cuda:0); estimates: 0 measured (no earlier run of this
    device identity), 748 reasoned (suites/core/estimate.py); the achievable search 53 s (none cached)

and the progress line (suites/harness/progress.py) counts down the seconds of the cases left until enough cases
have run to use the run's own pace. An estimate is never worth a run: one that fails says why on its line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from suites.core import devices, estimate, planning
from suites.core.profiles import rules
from suites.harness import bench_rounds
from suites.harness.bench_session import BenchSession
from suites.harness.progress import duration


@dataclass(frozen=True)
class RunEstimate:
    """Seconds per unit of the run's progress in run order (each earlier round of a case, then each test of
    pytest's pass; None for a test that is not one of the suite's cases, whose cost nothing says), of which
    `measured` cases were timed by the last run of `source`; the achievable search's seconds (0: cached or not
    made), and the run's device."""

    seconds: list[float | None]
    cases: int
    measured: int
    source: str
    search_s: float
    device: str

    @property
    def others(self) -> int:
        """Tests of the run that are not the suite's cases, not estimated."""
        return sum(s is None for s in self.seconds)

    def planned(self) -> list[float]:
        """Seconds per unit of progress, the achievable search's in the first; empty where a test is not
        estimated (the progress line then keeps to the run's own pace)."""
        if self.others or not self.seconds:
            return []
        return [self.seconds[0] + self.search_s, *self.seconds[1:]]

    @property
    def line(self) -> str:
        total = sum(s for s in self.seconds if s is not None) + self.search_s
        measured = (f"{self.measured} measured (the last run of this device identity, {self.source})" if self.source
                    else f"{self.measured} measured (no earlier run of this device identity in .benchmarks)")
        search = (f"; the achievable search {duration(self.search_s)} (none cached)" if self.search_s else "")
        others = f"; {self.others} other tests not estimated" if self.others else ""
        return (f"bench: about {duration(total)} for {self.cases} cases on this device ({self.device}); estimates: "
                f"{measured}, {self.cases - self.measured} reasoned (suites/core/estimate.py){search}{others}")


def estimate_run(items: Sequence[pytest.Item], shared: BenchSession, root: Path, searches: bool) -> RunEstimate:
    """The run's estimate (module docstring); `searches`: whether the run will use the achievable peaks."""
    device = shared.device
    target = planning.this_gpu(device) if device.type == "cuda" else planning.this_cpu()
    measured, source = planning.last_case_seconds(None, devices.identity(device)["machine"], root)
    host = estimate.HostCosts.measure(planning.PYTEST_S_PER_CASE)
    cases = [case for item in items if (case := bench_rounds.case_of(item)) is not None]
    rule = rules(shared.profile).round if shared.rounds > 1 else rules(shared.profile).stop
    per_case = dict(zip((c.id for c in cases), planning.case_seconds(cases, rule, target, measured, host),
                        strict=True))
    in_rounds = bench_rounds.bench_cases(items)
    earlier = [per_case[in_rounds[position].id] for index in range(1, shared.rounds)  # in the order they run
               for position in bench_rounds.round_order(len(in_rounds), index, shared.rounds)]
    passes = [per_case[case.id] if (case := bench_rounds.case_of(item)) is not None else None for item in items]
    search = (planning.search_line(target, planning.cached_search(device, shared.achievable_cache)).seconds
              if searches else 0.0)
    return RunEstimate(earlier + passes, len(cases), sum(c.id in measured for c in cases), source, search,
                       str(device))


def safely(items: Sequence[pytest.Item], shared: BenchSession, root: Path, searches: bool
           ) -> tuple[RunEstimate | None, str]:
    """The estimate and its line, or None and a line that says why there is none (the run goes on)."""
    try:
        found = estimate_run(items, shared, root, searches)
    except Exception as exc:  # the boundary: an estimate that fails costs the run its estimate, never a case
        return None, f"bench: no estimate of this run's time ({type(exc).__name__}: {exc})"
    return found, found.line

