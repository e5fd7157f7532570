"""The stopping rule fed sample by sample (suites/core/stopping.py) decides as recomputing it over all samples did.

The reference below is the rule as it was before it kept its order statistics incrementally: after every sample,
np.percentile over all samples for the target, and over two windows for the plateau. Both are fed the same
streams, random ones and real ones (the raw samples of recorded runs in tests/data), and must stop at the same
sample for the same reason, under every profile's rules and under rules made to stop on each exit.
"""

import json
import math
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from suites.core.profiles import CROSSCHECK, RULES, SMOKE
from suites.core.stopping import QUARTILES, RelIqrTarget, SortedSamples, Stopping, StopRule, quantile, rel_iqr

DATA = Path(__file__).parent / "data"


def reference_rel_iqr(samples: Sequence[float]) -> float:
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else math.inf


def reference_plateaued(samples: Sequence[float], window: int, tol: float) -> bool:
    if len(samples) < 2 * window:
        return False
    recent, before = reference_rel_iqr(samples[-window:]), reference_rel_iqr(samples[-2 * window:-window])
    return math.isfinite(recent) and math.isfinite(before) and abs(recent - before) <= tol * max(recent, before)


def reference_stop_reason(samples: Sequence[float], measured_s: float, elapsed_s: float,
                          rule: StopRule) -> str | None:
    if rule.count is not None:
        return "count" if len(samples) >= rule.count else None
    if len(samples) < rule.at_least:
        return None
    if (rule.min_time_on_wall and measured_s < rule.min_time_s and len(samples) >= rule.min_samples
            and elapsed_s >= rule.min_time_s and reference_rel_iqr(samples) <= rule.target_rel_iqr):
        return "target"  # min_time_s met on the wall clock, at the target
    enough = len(samples) >= rule.min_samples and measured_s >= rule.min_time_s
    if enough:
        if reference_rel_iqr(samples) <= rule.target_rel_iqr:
            return "target"
        if reference_plateaued(samples, rule.plateau_window, rule.plateau_tol):
            return "plateau"
    if elapsed_s >= rule.timeout_s or len(samples) >= rule.max_samples:
        return "timeout"
    return None


def decisions(stream: Sequence[float], rule: StopRule) -> tuple[list, list]:
    """The reason after every sample, by the reference and by `Stopping`, until either stops (sampling ends
    there), each sample taking its own time on its clock and the wall clock running 1.5 times as fast (host time
    between samples)."""
    stopping, old, new = Stopping(rule), [], []
    measured = 0.0
    for i, sample in enumerate(stream):
        measured += sample
        stopping.add(sample, sample)
        elapsed = 1.5 * measured
        old.append(reference_stop_reason(stream[:i + 1], measured, elapsed, rule))
        new.append(stopping.reason(elapsed))
        if old[-1] or new[-1]:
            break
    return old, new


def first_stop(reasons: list) -> tuple[int, str] | None:
    return next(((i, r) for i, r in enumerate(reasons) if r), None)


def random_streams(seed: int) -> Iterator[tuple[str, list[float]]]:
    rng = random.Random(seed)
    n = 250
    yield "lognormal 1 %", [1e-3 * rng.lognormvariate(0, 0.01) for _ in range(n)]
    yield "lognormal 20 %", [1e-3 * rng.lognormvariate(0, 0.2) for _ in range(n)]
    yield "bimodal", [rng.choice((1.0, 1.3)) * 1e-4 * (1 + rng.gauss(0, 0.005)) for _ in range(n)]
    yield "ties", [rng.choice((2.0, 2.5, 3.0)) * 1e-6 for _ in range(n)]
    yield "constant", [5e-3] * 60
    yield "a step", [1e-3 * (1 + rng.gauss(0, 0.02)) * (1 if i < n // 2 else 1.4) for i in range(n)]
    yield "calm then noisy", [1e-3 * (1 + rng.gauss(0, 0.001 if i < 60 else 0.3)) for i in range(n)]
    yield "host delays", [1e-5 * (1 + (rng.expovariate(1.0) if rng.random() < 0.3 else 0)) for _ in range(n)]
    yield "zeros and negatives", [rng.choice((0.0, -1e-9, 1e-9, 2e-9)) for _ in range(100)]


def real_streams() -> Iterator[tuple[str, list[float]]]:
    """The raw samples, in the order they were taken, of every case of some recorded runs (pooled rounds
    included: their samples follow each other)."""
    for name in ("run_cpu_quick.json", "busy/ops_cpu_quick_contended.json", "history/quick_2.json"):
        for entry in json.loads((DATA / name).read_text())["benchmarks"]:
            data = entry["stats"]["data"]
            if len(data) >= 5:
                yield f"{name}: {entry['name']}", data[:400]


# Each rule, and the reasons it must give on some stream (so that each exit's decisions are compared).
RULES_TRIED = {
    **{f"{p.value} {kind}": getattr(r, kind) for p, r in RULES.items() for kind in ("stop", "round")},
    "lockstep": RULES[next(iter(RULES))].lockstep(), "smoke": SMOKE, "crosscheck": CROSSCHECK,
    # made to end on each exit: the target only (no time floor), the plateau only, the timeout, least samples
    "target": StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.05, timeout_s=math.inf, plateau_window=0),
    "plateau": StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.0, timeout_s=math.inf, plateau_window=7,
                        plateau_tol=0.2),
    "timeout": StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.0, timeout_s=0.05, plateau_window=0),
    "at least": StopRule(min_samples=2, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=0.0, at_least=9),
    "max samples": StopRule(min_samples=2, min_time_s=0.0, target_rel_iqr=0.0, timeout_s=math.inf, max_samples=50,
                            plateau_window=0),
}


MUST_GIVE = {"target": {"target"}, "plateau": {"plateau"}, "timeout": {"timeout"}, "max samples": {"timeout"},
             "lockstep": {"count"}, "quick stop": {"target", "plateau", "timeout"}}


@pytest.mark.parametrize("rule_name", sorted(RULES_TRIED))
def test_incremental_stopping_decides_as_recomputing_over_all_samples(rule_name):
    rule = RULES_TRIED[rule_name]
    stops: set[str] = set()
    for label, stream in [*random_streams(7), *random_streams(11), *real_streams()]:
        old, new = decisions(stream, rule)
        assert new == old, f"{rule_name} on {label}: first stop {first_stop(new)}, expected {first_stop(old)}"
        if (stop := first_stop(old)) is not None:
            stops.add(stop[1])
    assert stops >= MUST_GIVE.get(rule_name, set()) and stops, f"{rule_name} stopped with {stops} only"


def test_sorted_samples_give_numpys_rel_iqr_after_every_sample(monkeypatch):
    """Small blocks, so that a long stream splits them many times; ties, NaNs and infinities included."""
    monkeypatch.setattr(SortedSamples, "BLOCK", 4)
    rng = random.Random(3)
    stream = [rng.choice((1.0, 2.0, 2.0, 3.5)) * rng.choice((1, 1, 1.0001)) for _ in range(700)]
    stream += [rng.lognormvariate(0, 1) for _ in range(300)] + [math.inf, math.nan, 1.0]
    kept = SortedSamples()
    for i, sample in enumerate(stream):
        kept.add(sample)
        assert kept.rel_iqr() == reference_rel_iqr(stream[:i + 1]) == rel_iqr(stream[:i + 1]), i


def test_quartiles_are_numpys_to_the_last_bit():
    """np.percentile's interpolation reads the upper neighbour for the upper half (b - (b - a)(1 - t)): the lower
    one's formula, a + (b - a)t, differs from it in the last bit of about one quartile in a hundred."""
    rng = random.Random(5)
    for _ in range(3000):
        values = [rng.lognormvariate(0, 1) for _ in range(rng.randrange(2, 40))]
        ordered = sorted(values)
        ours = [quantile(ordered.__getitem__, len(ordered), q) for q in QUARTILES]
        assert ours == [float(x) for x in np.percentile(values, [25, 50, 75])], values


def test_a_criterion_can_be_plugged_in():
    """Stopping asks the criteria it is given, in order, once the rule has its least samples and time."""

    class Tenth:
        reason = "target"

        def __init__(self):
            self.n = 0

        def add(self, sample_s):
            self.n += 1

        def met(self):
            return self.n >= 10

    rule = StopRule(min_samples=4, min_time_s=0.0, timeout_s=math.inf)
    stopping = Stopping(rule, [Tenth(), RelIqrTarget(0.0)])
    reasons = []
    for sample in [1.0, 2.0] * 6:
        stopping.add(sample, sample)
        reasons.append(stopping.reason(0.0))
    assert first_stop(reasons) == (9, "target")


def test_a_host_bound_op_stops_on_the_wall_clock_once_its_device_time_is_exact():
    """A 5 us kernel whose launch takes 40 us (attention at batch 1): its samples hold about a seventh of their wall
    time in device time, so 0.5 s of device time took seconds on the clock. With the full profile's
    `min_time_on_wall` it stops once its samples span 0.5 s of the clock, at the same target and median."""
    import dataclasses

    import torch

    from suites.core.timing import measure
    from tests.virtual_gpu import Kernel, VirtualGpu

    def timed(rule: StopRule) -> tuple[object, float]:
        gpu = VirtualGpu()

        def op() -> None:
            gpu.launch(Kernel("attention", 5e-6, launch_s=40e-6))
        m = measure(op, torch.device("cuda"), rule, backend=gpu)
        return m, gpu.host  # the virtual host clock, not this machine's

    full = RULES["full"].stop
    assert full.min_time_on_wall
    on_wall, host_clock_s = timed(full)
    device_only, device_rule_host_clock_s = timed(dataclasses.replace(full, min_time_on_wall=False))
    assert on_wall.stop_reason == device_only.stop_reason == "target" and on_wall.converged
    assert on_wall.median_s == pytest.approx(device_only.median_s, rel=1e-6) == pytest.approx(5e-6, rel=1e-6)
    assert len(on_wall.samples_s) >= full.min_samples
    assert sum(on_wall.samples_s) * on_wall.calls_per_sample < full.min_time_s  # device time short of 0.5 s
    assert host_clock_s < device_rule_host_clock_s / 3, (host_clock_s, device_rule_host_clock_s)  # virtual clock
