"""The stopping rule and its statistics, and the measurement loop on real CPU work."""

import math
import time

import pytest
import torch

from suites.core.timing import StopRule, measure, rel_iqr, should_stop

CPU = torch.device("cpu")


def test_rel_iqr_is_interquartile_range_over_median():
    assert rel_iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0 / 3.0)
    assert rel_iqr([2.0, 2.0, 2.0]) == 0.0


def test_rel_iqr_of_one_sample_is_unknown():
    assert rel_iqr([1.0]) == math.inf


def test_no_stop_before_minimum_samples_even_when_quiet():
    rule = StopRule(min_samples=10, min_time_s=0.0, target_rel_iqr=0.5, timeout_s=100)
    assert should_stop([1.0] * 9, 1, 0.0, rule) == (False, False)
    assert should_stop([1.0] * 10, 1, 0.0, rule) == (True, True)


def test_no_stop_before_minimum_measured_time():
    rule = StopRule(min_samples=2, min_time_s=1.0, target_rel_iqr=0.5, timeout_s=100)
    assert should_stop([0.1] * 5, 1, 0.0, rule) == (False, False)
    # the same samples each stand for 3 calls: 1.5 s measured, enough
    assert should_stop([0.1] * 5, 3, 0.0, rule) == (True, True)


def test_noisy_samples_run_to_the_timeout_and_are_not_converged():
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0)
    noisy = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    assert should_stop(noisy, 1, 1.0, rule) == (False, False)
    assert should_stop(noisy, 1, 5.0, rule) == (True, False)


def test_measure_times_real_work_and_converges():
    rule = StopRule(min_samples=5, min_time_s=0.02, target_rel_iqr=0.5, timeout_s=10, warmup_s=0.0)
    m = measure(lambda: time.sleep(0.002), CPU, rule)
    assert m.timer == "wall"
    assert m.converged
    assert len(m.samples_s) >= 5
    assert m.median_s >= 0.002  # sleep never returns early
    assert m.rel_iqr == pytest.approx(rel_iqr(m.samples_s))


def test_measure_batches_calls_shorter_than_a_sample():
    a = torch.randn(8, 8)
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=5, warmup_s=0.0, min_sample_s=1e-3)
    m = measure(lambda: a @ a, CPU, rule)
    assert m.calls_per_sample > 1
    assert 0 < m.median_s < 1e-3


def test_timeout_ends_a_slow_case_unconverged():
    rule = StopRule(min_samples=100, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=0.1, warmup_s=0.0)
    m = measure(lambda: time.sleep(0.03), CPU, rule)
    assert not m.converged
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
