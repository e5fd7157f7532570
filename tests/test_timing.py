"""The stopping rule and its statistics, and the measurement loop on real CPU work."""

import math
import random
import time

import numpy as np
import pytest
import torch

from suites.core.calibration import MAX_OVERHEAD_SHARE
from suites.core.host_load import Contention, SampleLoad
from suites.core.measurement import Measurement, pool_rounds
from suites.core.profiles import NAMES, rules
from suites.core.samplers import MAX_HOLD_S, MIN_HOLD_S, Taken, lengthen_hold, plan_hold
from suites.core.stopping import STOP_REASONS, Stopping, StopRule, converged, rel_iqr
from suites.core.timing import measure, sample_until_stopped, thread_pool_note
from tests.virtual_gpu import VirtualGpu

CPU = torch.device("cpu")


def stop_reason(samples: list[float], measured_s: float, elapsed_s: float, rule: StopRule) -> str | None:
    """Why `rule` stops after these samples, which took `measured_s` on their clock, `elapsed_s` after sampling
    began (suites/core/stopping.py, fed the samples one by one)."""
    stopping = Stopping(rule)
    for i, sample in enumerate(samples):
        stopping.add(sample, measured_s if i == len(samples) - 1 else 0.0)
    return stopping.reason(elapsed_s)


def test_rel_iqr_is_interquartile_range_over_median():
    assert rel_iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0 / 3.0)
    assert rel_iqr([2.0, 2.0, 2.0]) == 0.0


def test_rel_iqr_of_one_sample_is_unknown():
    assert rel_iqr([1.0]) == math.inf


def test_no_stop_before_minimum_samples_even_when_quiet():
    rule = StopRule(min_samples=10, min_time_s=0.0, target_rel_iqr=0.5, timeout_s=100)
    assert stop_reason([1.0] * 9, 9.0, 0.0, rule) is None
    assert stop_reason([1.0] * 10, 10.0, 0.0, rule) == "target"


def test_no_stop_before_at_least_samples_not_even_the_timeout():
    """pytest-benchmark's min_rounds: a slow call ended with 2 samples when the profile's timeout came first."""
    rule = StopRule(min_samples=5, min_time_s=0.05, timeout_s=2.0, at_least=6)
    assert stop_reason([1.0, 1.1], 2.1, 2.1, rule) is None
    assert stop_reason([1.0, 1.1] * 3, 6.3, 6.3, rule) == "timeout"


def test_asked_calls_and_warm_up_are_what_ran():
    """pytest-benchmark's pedantic: `iterations` calls per sample, not calibrated, after the warm-up calls asked."""
    calls = []
    rule = StopRule(min_samples=1, min_time_s=0.0, timeout_s=1.0, warmup_s=0.0, count=4, calls=3, warmup_calls=9)
    m = measure(lambda: calls.append(1), CPU, rule)
    assert (m.calls_per_sample, m.warmup_calls, len(m.samples_s), m.stop_reason) == (3, 9, 4, "count")
    assert m.gc_disabled and len(calls) >= 9 + 4 * 3


def test_no_stop_before_minimum_measured_time():
    rule = StopRule(min_samples=2, min_time_s=1.0, target_rel_iqr=0.5, timeout_s=100)
    assert stop_reason([0.1] * 5, 0.5, 0.0, rule) is None
    # the same samples each stand for 3 calls (or a cold sample's calls with the flushes between them): 1.5 s
    # measured, enough
    assert stop_reason([0.1] * 5, 1.5, 0.0, rule) == "target"


def test_a_spread_that_has_stopped_changing_ends_on_a_plateau_before_the_timeout():
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, plateau_window=4)
    noisy = [1.0, 2.0] * 3  # rel-IQR 2/3 whatever is added: it will not reach 1 %
    assert stop_reason(noisy, 1.0, 1.0, rule) is None  # not yet min_samples + window samples
    assert stop_reason([*noisy, 1.0, 2.0], 1.0, 1.0, rule) == "plateau"


def test_the_plateau_compares_two_disjoint_windows():
    """The last window against the one before it, not all samples against all but the last few (two sets that
    share most of their samples agree whatever the samples are)."""
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, plateau_window=4)
    calm_then_noisy = [1.0, 1.001, 1.002, 1.003, 1.0, 1.5, 2.0, 1.2]
    assert stop_reason(calm_then_noisy, 1.0, 1.0, rule) is None  # rel-IQR 0.002 before, 0.4 after: not a plateau


@pytest.mark.parametrize("profile", NAMES)
def test_a_noisy_op_stops_on_a_plateau_but_is_not_converged(profile):
    """Random 0.5-1.5 ms sleeps: a spread near 0.3-0.5 that never nears the target stops early (it has stopped
    changing) but is not reported as converged."""
    rng = random.Random(7)
    m = measure(lambda: time.sleep(rng.uniform(0.5e-3, 1.5e-3)), CPU, rules(profile).stop)
    assert m.rel_iqr > rules(profile).stop.plateau_ceiling * rules(profile).stop.target_rel_iqr
    assert not m.converged and m.stop_reason in ("plateau", "timeout")
    if m.stop_reason == "plateau":
        assert any("not converged" in note for note in m.notes)


def _sampled(noise: float, rule: StopRule, seed: int = 0) -> tuple[str, list[float]]:
    """Sampling 1 ms calls with uniform relative noise of +-noise, on a virtual clock."""
    rng, clock = np.random.default_rng(seed), [0.0]

    def sampler():
        sample = 1e-3 * rng.uniform(1 - noise, 1 + noise)
        clock[0] += sample
        return Taken(sample, sample, sample)
    out = sample_until_stopped(sampler, rule, lambda: clock[0])
    return out.reason, out.samples


@pytest.mark.parametrize(("noise", "expected"), [(0.015, True), (0.03, False)])
def test_a_plateau_converges_only_within_its_ceiling(noise, expected):
    """Under the full rule (1 % target, ceiling 2x): a spread that stops changing at 1.5 % is a power-capped
    GPU's measurement; one at 3 % is not."""
    rule = rules("full").stop
    reason, samples = _sampled(noise, rule)
    assert reason == "plateau"
    assert converged(reason, rel_iqr(samples), rule) is expected


def test_a_count_takes_exactly_that_many_samples_and_is_judged_on_the_target():
    rule = rules("quick").stop.counted(12)
    assert rule.warmup_s == 0.0 and rule.min_sample_s == 0.0
    reason, samples = _sampled(0.01, rule)
    assert (reason, len(samples)) == ("count", 12) and "count" in STOP_REASONS
    assert converged(reason, rel_iqr(samples), rule)  # 1 % against quick's 5 % target
    reason, samples = _sampled(0.5, rule)
    assert not converged(reason, rel_iqr(samples), rule)


def test_rounds_pool_into_one_measurement_judged_on_all_their_samples():
    rule = rules("quick").round
    fast = Measurement([1.0, 1.01, 0.99] * 3, "wall", 1, "target", rule, enqueues_s=[0.98] * 9)
    slow = Measurement([1.3, 1.31, 1.29] * 3, "wall", 1, "target", rule, enqueues_s=[1.28] * 9)
    pooled = pool_rounds([fast, slow, slow])
    assert pooled.samples_s == fast.samples_s + slow.samples_s * 2 and pooled.rounds == [fast, slow, slow]
    assert pooled.median_s == pytest.approx(1.29)  # the median of all 27 samples, not the last round's 1.3
    # each sample's enqueue is within its own time: pooled alike, the host of a CPU is never behind itself
    assert pooled.enqueue_s == 1.28 and pooled.host_bound is False
    assert fast.converged and slow.converged and not pooled.converged  # rounds 30 % apart: no measurement
    assert pool_rounds([fast, fast]).converged


def test_a_spread_still_moving_runs_to_the_timeout():
    rule = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, plateau_window=4)
    widening = [1.0, 1.01, 1.02, 1.05, 1.1, 1.2, 1.4, 1.8]
    assert stop_reason(widening, 1.0, 1.0, rule) is None
    assert stop_reason(widening, 1.0, 5.0, rule) == "timeout"


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
    assert m.contention is not None and m.contention.info()["samples"] == len(m.samples_s)
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
    assert cold.l2_flush and cold.calls_per_sample >= 1  # a cold sample batches calls, each after its flush
    assert graph.median_s == pytest.approx(events.median_s, rel=0.1)


# Calls per sample, on a virtual host clock (tests/virtual_gpu.py: a synchronize costs 2 us there, clock reads
# nothing), so that the batch each rule asks for and the time it gives are known exactly.
SHORT_RULE = StopRule(min_samples=20, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, warmup_s=1e-3)


def _host_call(gpu: VirtualGpu, call_s: float, preempt_after_s: float, preempt_s: float = 5e-3):
    """A CPU call of `call_s` on the virtual host clock; the first call that starts at `preempt_after_s` or later
    is preempted for `preempt_s` (another process took the CPU)."""
    pending = [preempt_s]

    def fn() -> None:
        gpu.host += call_s + (pending.pop() if pending and gpu.host >= preempt_after_s else 0.0)
    return fn


def test_a_preempted_last_warm_up_call_does_not_shrink_the_batch():
    """Warm-up's last call is preempted for 5 ms: sized from it, a 0.5 us function got one call per sample and
    read 2.5 us, its sample mostly the synchronize after it. Sized from the fastest call and grown until a trial
    batch lasts 1 ms, it reads its own time."""
    gpu = VirtualGpu()
    # preempted in the last millisecond of warm-up, the call ends past it: the last warm-up call
    m = measure(_host_call(gpu, 0.5e-6, preempt_after_s=0.9 * SHORT_RULE.warmup_s), CPU, SHORT_RULE, backend=gpu)
    assert m.calls_per_sample * 0.5e-6 >= SHORT_RULE.min_sample_s
    assert m.median_s == pytest.approx(0.5e-6, rel=MAX_OVERHEAD_SHARE)
    assert m.sample_overhead_s == pytest.approx(gpu.sync_s)


def test_a_preempted_trial_batch_does_not_shrink_the_batch():
    """The first trial batch (0.2 ms of calls) is preempted for 5 ms and looks long enough; the fastest of three
    trials is the batch's own time, so the batch still grows to 1 ms."""
    gpu = VirtualGpu()
    m = measure(_host_call(gpu, 0.5e-6, preempt_after_s=SHORT_RULE.warmup_s), CPU, SHORT_RULE, backend=gpu)
    assert m.calls_per_sample * 0.5e-6 >= SHORT_RULE.min_sample_s


def test_a_slow_clock_makes_the_samples_long_enough_to_keep_its_cost_under_one_percent():
    """A host whose synchronize costs 50 us: a 1 ms sample would be 5 % overhead; the target becomes 100 x the
    empty sample's time."""
    gpu = VirtualGpu(sync_s=50e-6)
    m = measure(_host_call(gpu, 0.5e-6, preempt_after_s=math.inf), CPU, SHORT_RULE, backend=gpu)
    assert m.sample_overhead_s == pytest.approx(50e-6)
    assert m.calls_per_sample * 0.5e-6 >= 50e-6 / MAX_OVERHEAD_SHARE
    assert m.median_s == pytest.approx(0.5e-6, rel=MAX_OVERHEAD_SHARE)


def test_a_call_longer_than_a_sample_and_a_count_take_one_call_per_sample():
    gpu = VirtualGpu()
    long = measure(_host_call(gpu, 2e-3, preempt_after_s=math.inf), CPU, SHORT_RULE, backend=gpu)
    counted = measure(_host_call(gpu, 0.5e-6, preempt_after_s=math.inf), CPU, SHORT_RULE.counted(5), backend=gpu)
    assert long.calls_per_sample == counted.calls_per_sample == 1
    assert len(counted.samples_s) == 5


def test_a_contended_cpu_case_on_several_threads_says_its_time_may_be_the_schedulers():
    waited = SampleLoad(0.016, 0.004, 2, 0.012)  # 12 ms of a 16 ms sample waiting for a CPU
    quiet = SampleLoad(0.016, 0.016, 0, 0.0)
    note = thread_pool_note(Contention([waited] * 5, 6.0, threads=2, cpus=2), "cpu")
    assert note is not None and note.startswith("not converged: ") and "100% of the samples" in note
    assert "ran on 2 threads (torch's intra-op pool: 2) on 2 CPUs" in note
    assert "the time is the scheduler's, not the op's" in note
    assert thread_pool_note(Contention([waited] * 5, 6.0, threads=1, cpus=2), "cpu") is None  # no pool to wait on
    assert thread_pool_note(Contention([quiet] * 5, 0.1, threads=2, cpus=2), "cpu") is None
    assert thread_pool_note(Contention([waited] * 5, 6.0, threads=2, cpus=2), "cuda") is None


@pytest.mark.parametrize(("threads", "device_type", "expected"), [
    (2, "cpu", False),  # the pool waited on the scheduler: the samples are its slices, however tight
    (1, "cpu", True),  # no pool: the median of mostly quiet samples is the op's, marked contended
    (2, "cuda", True),  # a GPU's op is timed on the device
])
def test_a_contended_cpu_case_on_several_threads_is_never_converged(threads, device_type, expected):
    """The issue's case: five samples of a 0.2 ms matmul on 2 threads beside a neighbour, each 69 ms (the slice the
    pool waited for) and within 1 % of each other, met the quick rule's target and were written `converged`."""
    waited = SampleLoad(0.070, 0.004, 3, 0.066)
    load = Contention([waited] * 5, 6.0, threads=threads, cpus=2)
    m = Measurement([0.0690, 0.0692, 0.0691, 0.0690, 0.0693], "wall", 1, "target", rules("quick").stop,
                    device_type=device_type, contention=load)
    assert m.rel_iqr <= m.rule.target_rel_iqr  # the spread alone would converge it
    assert m.converged is expected
    assert pool_rounds([m, m]).converged is expected  # rounds pool their contention, and the rule holds for them


def _steady_step(gpu: VirtualGpu, step_s: float, spread: float):
    """A training step of `step_s` on the virtual host clock, each one off by up to `spread` of it (seeded)."""
    rng = random.Random(0)

    def step() -> None:
        gpu.host += step_s * (1 + rng.uniform(-spread, spread))
    return step


@pytest.mark.parametrize(("step_s", "spread", "kind", "expected"), [
    (2.0, 0.002, "step", True),  # 8 samples of 2 s, 0.2 % apart: a measurement
    (2.0, 0.05, "step", False),  # 8 samples 5 % apart: not one
    (8.0, 0.002, "step", False),  # 2 samples: too few to know a spread from
    (2.0, 0.002, "op", False),  # an op that slow has no such exit: its timeout stays unconverged
])
def test_a_long_steps_timeout_converges_on_few_samples_within_the_target(step_s, spread, kind, expected):
    """The full rule asks for 10 samples inside 15 s: a step of 2 s gets 7, one of 6 s gets 2. A steady step of
    seconds ends on `timeout` and is converged on its 3 or more samples, saying on how many; a spread past the
    target, fewer than 3 samples, or an op is not."""
    gpu = VirtualGpu()
    rule = rules("full").stop
    m = measure(_steady_step(gpu, step_s, spread), CPU, rule, kind=kind, backend=gpu)
    assert m.stop_reason == "timeout" and len(m.samples_s) < rule.min_samples
    assert m.converged is expected
    said = [note for note in m.notes if "converged at the 15 s timeout" in note]
    assert said == ([f"converged at the 15 s timeout on {len(m.samples_s)} samples of {m.median_s:.3g} s (fewer than "
                     f"the rule's 10; at least 3 within the 0.01 target, rel-IQR {m.rel_iqr:.3g})"] if expected else [])
