"""The state of one benchmark run under pytest: device, profile, stopping rule, peaks, and cases not measured.

pytest-benchmark's fixture times Python calls with a host clock; this suite times device work itself
(suites/core/timing.py) and then hands each sample to the fixture as one round (`record`), so the JSON's `stats`
(min, median, IQR, ...) and its raw `data` are device seconds per call. The fixture has no public method for
samples taken by another clock, so `record` uses the two members its own `pedantic()` uses (`_make_stats`,
`_mode`); tests/test_plugin.py runs a real benchmark and checks the JSON against the samples, so a change in
pytest-benchmark cannot silently break this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from suites.core import device as devices
from suites.core.cases import Case
from suites.core.precision import DTYPES
from suites.core.runner import CaseResult, Extension, run_case
from suites.core.timing import RULES, StopRule
from suites.harness import rounds as bench_rounds

PROFILES = tuple(RULES)
SMOKE = StopRule(min_samples=1, min_time_s=0.0, target_rel_iqr=float("inf"), timeout_s=0.0, warmup_s=0.0)


def parse_dtypes(text: str | None) -> list[str] | None:
    """`--bench-dtypes a,b` -> ['a', 'b']; unknown names are a usage error that lists the valid ones."""
    if not text:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in DTYPES]
    if unknown or not names:
        raise pytest.UsageError(f"--bench-dtypes: unknown {', '.join(unknown) or 'empty list'}; "
                                f"valid names: {', '.join(DTYPES)}")
    return names


@dataclass
class BenchSession:
    """What every case of the run shares."""

    device: torch.device
    profile: str
    dtypes: list[str] | None
    extensions: list[Extension] = field(default_factory=list)
    not_measured: list[dict] = field(default_factory=list)
    rounds: int = 1
    round_log: bench_rounds.RoundLog = field(default_factory=bench_rounds.RoundLog)
    _peaks: dict | None = None

    def rule(self, case: Case) -> StopRule:
        """The profile's rule, or its per-round rule when the case is measured in several rounds."""
        if self.rounds > 1 and bench_rounds.in_rounds(case):
            return bench_rounds.ROUND_RULES[self.profile]
        return RULES[self.profile]

    def peak_flops(self, dtype: str | None) -> float | None:
        """The device's peak FLOP/s for a dtype (None on CPU: no honest peak is known there)."""
        if self.device.type != "cuda" or dtype is None:
            return None
        if self._peaks is None:
            self._peaks = devices.gpu_info(self.device).peaks
        return self._peaks.get(dtype, {}).get("value")

    def select(self, cases: list[Case]) -> list[Case]:
        return [c for c in cases if self.dtypes is None or c.params.get("dtype") in self.dtypes]


def from_config(config: pytest.Config) -> BenchSession:
    try:
        device = devices.resolve(config.getoption("bench_device"))
    except devices.DeviceError as exc:
        raise pytest.UsageError(str(exc)) from None
    if device.type == "cuda":
        torch.cuda.set_device(device)  # timing's events, spin kernel and graph capture run on the current device
    return BenchSession(device, config.getoption("bench_profile"), parse_dtypes(config.getoption("bench_dtypes")),
                        rounds=bench_rounds.parse_rounds(config.getoption("bench_rounds")))


def measure_once(session: BenchSession, case: Case) -> CaseResult:
    """One round of a case outside pytest's pass (see suites/harness/rounds.py): no observers, nothing recorded."""
    return run_case(case, session.device, session.rule(case), session.peak_flops(case.peak_dtype))


def record(benchmark, result: CaseResult) -> None:
    """Hand the device-time samples to pytest-benchmark as rounds of one call each; set group, params, extra_info."""
    benchmark.group = result.case.suite
    benchmark.params = dict(result.case.params)
    benchmark.extra_info.update(result.extra_info)
    if benchmark.disabled or result.measurement is None:
        return
    benchmark._mode = "suites.harness.session.record(...)"
    stats = benchmark._make_stats(1)
    stats.options.update(timer=result.measurement.timer, min_rounds=None, max_time=None, min_time=None, warmup=None)
    for seconds in result.measurement.samples_s:
        stats.update(seconds)


def not_measured_entry(item_name: str, nodeid: str, result: CaseResult) -> dict:
    """A JSON entry shaped like pytest-benchmark's, without stats, for a case that produced no timing."""
    return {"group": result.case.suite, "name": item_name, "fullname": nodeid, "params": dict(result.case.params),
            "extra_info": result.extra_info}


def run(session: BenchSession, benchmark, request: pytest.FixtureRequest, case: Case) -> CaseResult:
    """Run a case under pytest: record what was measured, then skip (unsupported, oom) or fail (error)."""
    rule = SMOKE if benchmark.disabled else session.rule(case)
    result = run_case(case, session.device, rule, session.peak_flops(case.peak_dtype), session.extensions)
    result.extra_info["profile"] = session.profile
    if session.rounds > 1 and not benchmark.disabled and bench_rounds.in_rounds(case):
        result.extra_info |= bench_rounds.merge(result, session.round_log.results.get(case.id, []))
    record(benchmark, result)
    if result.measurement is None:
        session.not_measured.append(not_measured_entry(request.node.name, request.node.nodeid, result))
        benchmark.skipped = True  # no "fixture was not used" warning: the case was handled
    if result.status in ("unsupported", "oom"):
        pytest.skip(f"{result.status}: {result.reason}")
    if result.status == "error":
        pytest.fail(f"{case.id}: {result.reason}", pytrace=False)
    return result
