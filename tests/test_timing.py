"""The stopping rule and its statistics, and the measurement loop on real CPU work."""

import math
import time

import pytest
import torch

from suites.core.timing import (
    MAX_HOLD_S,
    MIN_HOLD_S,
    StopRule,
    lengthen_hold,
    measure,
    plan_hold,
    rel_iqr,
    stop_reason,
)

CPU = torch.device("cpu")


def test_rel_iqr_is_interquartile_range_over_median():
    assert rel_iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0 / 3.0)
    assert rel_iqr([2.0, 2.0, 2.0]) == 0.0


def test_rel_iqr_of_one_sample_is_unknown():
    assert rel_iqr([1.0]) == math.inf


def test_no_stop_before_minimum_samples_even_when_quiet():
    rule = StopRule(min_samples=10, min_time_s=0.0, target_rel_iqr=0.5, timeout_s=100)
    assert stop_reason([1.0] * 9, 1, 0.0, rule) is None
    assert stop_reason([1.0] * 10, 1, 0.0, rule) == "target"


def test_no_stop_before_minimum_measured_time():
    rule = StopRule(min_samples=2, min_time_s=1.0, target_rel_iqr=0.5, timeout_s=100)
    assert stop_reason([0.1] * 5, 1, 0.0, rule) is None
    # the same samples each stand for 3 calls: 1.5 s measured, enough
    assert stop_reason([0.1] * 5, 3, 0.0, rule) == "target"


def test_a_spread_that_has_stopped_changing_ends_on_a_plateau_before_the_timeout():
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, plateau_window=4)
    noisy = [1.0, 2.0] * 3  # rel-IQR 2/3 whatever is added: it will not reach 1 %
    assert stop_reason(noisy, 1, 1.0, rule) is None  # not yet min_samples + window samples
    assert stop_reason([*noisy, 1.0, 2.0], 1, 1.0, rule) == "plateau"


def test_a_spread_still_moving_runs_to_the_timeout():
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, plateau_window=4)
    widening = [1.0, 1.01, 1.02, 1.05, 1.1, 1.2, 1.4, 1.8]
    assert stop_reason(widening, 1, 1.0, rule) is None
    assert stop_reason(widening, 1, 5.0, rule) == "timeout"


def test_the_hold_covers_the_measured_enqueue_time():
    for enqueue_per_call, reps in [(5e-6, 1), (40e-6, 25), (2e-3, 3), (0.0, 10)]:
        hold = plan_hold(enqueue_per_call, reps)
        assert hold >= enqueue_per_call * reps and hold >= MIN_HOLD_S
    # a hold that ran out grows past what the host took, and past itself
    assert lengthen_hold(1e-4, 3e-4) >= 2 * 3e-4
    assert lengthen_hold(1e-4, 1e-5) > 1e-4
    assert lengthen_hold(MAX_HOLD_S, 1.0) == MAX_HOLD_S  # bounded: the sampler then keeps samples with a note


def test_measure_times_real_work_and_converges():
    rule = StopRule(min_samples=5, min_time_s=0.02, target_rel_iqr=0.5, timeout_s=10, warmup_s=0.0)
    m = measure(lambda: time.sleep(0.002), CPU, rule)
    assert m.timer == "wall"
    assert m.converged and m.stop_reason in ("target", "plateau")
    assert len(m.samples_s) >= 5
    assert m.median_s >= 0.002  # sleep never returns early
    assert m.rel_iqr == pytest.approx(rel_iqr(m.samples_s))


def test_every_sample_records_the_hosts_time_to_issue_its_calls():
    rule = StopRule(min_samples=5, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=5, warmup_s=0.0)
    m = measure(lambda: time.sleep(0.002), CPU, rule, kind="step")
    # on a CPU the host runs the call: issuing it is running it, so the host is never slower than the device
    assert 0.002 <= m.enqueue_s <= m.median_s * 1.01 + 1e-4
    assert m.host_bound is False


def test_measure_batches_calls_shorter_than_a_sample():
    a = torch.randn(8, 8)
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=5, warmup_s=0.0, min_sample_s=1e-3)
    m = measure(lambda: a @ a, CPU, rule)
    assert m.calls_per_sample > 1
    assert 0 < m.median_s < 1e-3


def test_timeout_ends_a_slow_case_unconverged():
    rule = StopRule(min_samples=100, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=0.1, warmup_s=0.0)
    m = measure(lambda: time.sleep(0.03), CPU, rule)
    assert not m.converged and m.stop_reason == "timeout"
    assert 1 <= len(m.samples_s) < 100


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: CUDA events, graphs and L2 flush")
def test_cuda_timers_agree_on_a_large_matmul():
    dev = torch.device("cuda")
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    rule = StopRule(min_samples=10, min_time_s=0.1, target_rel_iqr=0.05, timeout_s=10)
    events = measure(lambda: a @ a, dev, rule)
    graph = measure(lambda: a @ a, dev, rule, graph=True)
    cold = measure(lambda: a @ a, dev, rule, cold=True)
    assert (events.timer, graph.timer, cold.timer) == ("cuda_event", "cuda_graph", "cuda_event")
    assert cold.l2_flush and cold.calls_per_sample == 1
    assert graph.median_s == pytest.approx(events.median_s, rel=0.1)
