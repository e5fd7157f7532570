"""Host contention per sample: the rule on known figures, and a real CPU-bound neighbour on the same CPU."""

import os

import pytest
import torch

from suites.core.contention import CONTENDED_SHARE, RUN_DELAY_SHARE, Contention, SampleLoad, pooled
from suites.core.timing import StopRule, measure
from tests.runs import start_python


def test_a_sample_is_contended_when_its_threads_waited_for_a_cpu():
    assert SampleLoad(0.010, 0.010, 0, 0.0).contended is False
    assert SampleLoad(0.010, 0.006, 3, RUN_DELAY_SHARE * 0.010).contended is True
    assert SampleLoad(0.010, 0.010, 2, 0.0001).contended is False  # preempted, but for a hundredth of it
    # without procfs the run delay is unknown: any involuntary switch counts
    assert SampleLoad(0.010, 0.010, 1, None).contended is True
    assert SampleLoad(0.010, 0.010, 0, None).contended is False


def test_a_case_is_contended_from_a_share_of_its_samples():
    quiet, busy = SampleLoad(1e-3, 1e-3, 0, 0.0), SampleLoad(3e-3, 1e-3, 4, 2e-3)
    few = Contention([busy] + [quiet] * 19, load_1m=3.2, threads=2, cpus=2)
    many = Contention([busy] * 3 + [quiet] * 7, load_1m=3.2, threads=2, cpus=2)
    assert few.share == pytest.approx(0.05) and few.contended is False
    assert many.share == pytest.approx(0.3) and many.share >= CONTENDED_SHARE and many.contended is True
    info = many.info()
    assert info["samples"] == 10 and info["flagged"] == 3 and info["rule"]
    assert info["run_delay_share"] == pytest.approx(6e-3 / 16e-3)
    assert (info["load_1m"], info["threads"], info["cpus"]) == (3.2, 2, 2)
    both = pooled([few, many])
    assert both.share == pytest.approx(4 / 30) and both.contended is True
    assert Contention().contended is False and Contention().info()["share"] == 0.0


def _spin() -> None:
    x = 0
    for i in range(20_000):
        x += i


@pytest.mark.skipif(not (hasattr(os, "sched_setaffinity") and os.path.exists("/proc/self/task")),
                    reason="needs Linux: CPU affinity and per-thread run delay in procfs")
def test_a_cpu_bound_neighbour_on_our_cpu_marks_the_case_contended():
    """Our thread and a busy loop in another process pinned to one CPU: the scheduler splits it in slices of a
    few milliseconds, so our threads wait about half of the wall time, in the samples that span a switch."""
    cpu = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    neighbour = start_python("-c", "while True: pass", output="discard")
    try:
        os.sched_setaffinity(neighbour.pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        rule = StopRule(min_samples=30, min_time_s=0.1, target_rel_iqr=0.0, timeout_s=1.0, warmup_s=0.05)
        m = measure(_spin, torch.device("cpu"), rule)
    finally:
        os.sched_setaffinity(0, mine)
        neighbour.kill()
        neighbour.wait()
    info = m.contention.info()
    assert m.contention.contended, info
    assert info["run_delay_share"] >= 0.3 and info["involuntary_switches_per_sample"] > 0, info
