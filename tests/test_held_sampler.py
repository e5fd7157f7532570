"""The CUDA sampler (the stream hold, drops, lengthening, host_bound, graph replay, the L2 flush, the fall-back for
an enqueue that waits on the device, the agreed hold of ranks) against a model of stream and event semantics on a
virtual clock (tests/virtual_gpu.py), so that every answer is known."""

import pytest
import torch

from suites.core.runner import _measurement_info
from suites.core.timing import MIN_HOLD_S, WAIT_CONFIRMATIONS, StopRule, lengthen_hold, measure, plan_hold
from suites.ops import matmul
from tests.virtual_gpu import Kernel, VirtualGpu

CUDA = torch.device("cuda")  # a device object only: every CUDA call goes to the virtual GPU
RULE = StopRule(min_samples=20, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, warmup_s=0.0)
EXACT = 1e-9  # the virtual clock is exact up to float rounding
WARM_RULE = StopRule(min_samples=20, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, warmup_s=1e-3)


def _op(gpu: VirtualGpu, kernel: Kernel, extra_host_s=lambda call: 0.0):
    """A workload of one kernel launch; `extra_host_s(call)` is host time the call spends before launching."""
    calls = [0]

    def fn() -> None:
        calls[0] += 1
        gpu.host += extra_host_s(calls[0])
        gpu.launch(kernel)
    return fn


def test_a_host_bound_op_is_timed_at_its_device_time_and_says_host_bound():
    gpu = VirtualGpu()
    m = measure(_op(gpu, Kernel("add", 5e-6, launch_s=40e-6)), CUDA, RULE, backend=gpu)
    assert m.timer == "cuda_event" and m.dropped_samples == 0
    assert m.median_s == pytest.approx(5e-6, rel=EXACT)  # not the host's 40 us: the hold kept it out
    assert m.host_bound is True and m.enqueue_s >= 40e-6
    # warm-up's last call took 40 us to enqueue: the hold covers a sample of them with margin
    assert m.hold_s == pytest.approx(plan_hold(40e-6, m.calls_per_sample))


def test_a_device_bound_op_is_not_host_bound():
    gpu = VirtualGpu()
    m = measure(_op(gpu, Kernel("gemm", 100e-6, launch_s=2e-6)), CUDA, RULE, backend=gpu)
    assert m.median_s == pytest.approx(100e-6, rel=EXACT) and m.host_bound is False
    assert m.stop_reason == "target" and m.converged


def test_a_sample_whose_hold_ran_out_is_dropped_and_the_hold_lengthened():
    """One call of the first sample is 1 ms late on the host: that sample opens its window before the host has
    enqueued it, so it is dropped and the hold made at least twice that enqueue time; the rest are held."""
    gpu = VirtualGpu()
    late = [1e-3]

    def first_held_call(call: int) -> float:
        """1 ms on the first call after a spin was launched: the first call of the first sample."""
        if any(name == "spin" for name, _, _ in gpu.launches):
            return late.pop() if late else 0.0
        return 0.0

    fn = _op(gpu, Kernel("gemm", 100e-6, launch_s=2e-6), first_held_call)
    m = measure(fn, CUDA, RULE, backend=gpu)
    assert m.dropped_samples == 1 and not m.notes
    first_hold = plan_hold(2e-6, m.calls_per_sample)
    assert m.hold_s == pytest.approx(lengthen_hold(first_hold, 1e-3 + m.calls_per_sample * 2e-6 + 3 * gpu.launch_s))
    assert all(s == pytest.approx(100e-6, rel=EXACT) for s in m.samples_s)


def test_a_spin_that_runs_faster_than_the_clock_it_was_sized_at_is_caught_by_the_query():
    """A GPU whose SM clock runs at twice the reported one spins half as long as asked: the first hold runs out,
    is lengthened, and the device time stays the kernel's."""
    gpu = VirtualGpu(clock_hz=4e9, reported_hz=2e9)
    m = measure(_op(gpu, Kernel("gemm", 100e-6, launch_s=2e-6)), CUDA, RULE, backend=gpu)
    assert m.dropped_samples == 1
    assert m.median_s == pytest.approx(100e-6, rel=EXACT)
    spins = gpu.device_time_of("spin")
    assert spins[-1] == pytest.approx(m.hold_s / 2, rel=1e-4)  # cycles at the reported clock, run at the real one


def test_graph_replay_takes_the_launch_cost_off_the_host():
    gpu = VirtualGpu()
    kernel = Kernel("add", 2e-6, launch_s=5e-6)
    eager = measure(_op(gpu, kernel), CUDA, RULE, backend=gpu)
    graph = measure(_op(gpu, kernel), CUDA, RULE, graph=True, backend=gpu)
    assert (eager.timer, graph.timer) == ("cuda_event", "cuda_graph")
    assert eager.median_s == pytest.approx(2e-6, rel=EXACT) == graph.median_s
    assert eager.host_bound is True and graph.host_bound is False
    assert graph.hold_s == pytest.approx(MIN_HOLD_S)  # one replay enqueues the whole sample


def test_the_l2_flush_runs_before_the_window_and_makes_every_call_cold():
    gpu = VirtualGpu(flush_s=200e-6)
    kernel = Kernel("gemm", 10e-6, cold_s=30e-6)
    cold = measure(_op(gpu, kernel), CUDA, RULE, cold=True, backend=gpu)
    assert cold.l2_flush and cold.calls_per_sample == 1
    assert cold.median_s == pytest.approx(30e-6, rel=EXACT)  # the cold time, and no flush inside the window
    # in every sample: flush, spin, start event, the call, end event, in that order on the stream
    names = [name for name, _, _ in gpu.launches]
    last = len(names) - 1 - names[::-1].index("l2_flush")
    assert names[last:last + 5] == ["l2_flush", "spin", "event", "gemm", "event"]
    hot = measure(_op(gpu, kernel), CUDA, RULE, backend=gpu)
    assert not hot.l2_flush and hot.median_s == pytest.approx(10e-6, rel=EXACT)


def test_an_op_whose_enqueue_waits_on_the_device_falls_back_to_the_wall_clock():
    """A host sync inside the op (`.item()`) outlasts every hold, however long: after WAIT_CONFIRMATIONS drops it
    is timed between synchronizations, with a note, well before the timeout."""
    gpu = VirtualGpu()
    kernel = Kernel("step", 1e-3, launch_s=5e-6)

    def syncing() -> None:
        gpu.launch(kernel)
        gpu.synchronize()

    m = measure(syncing, CUDA, RULE, backend=gpu)
    assert m.timer == "wall" and m.dropped_samples == WAIT_CONFIRMATIONS
    assert any("waits on the device" in note for note in m.notes)
    assert m.stop_reason == "target" and gpu.host < RULE.timeout_s
    assert m.median_s == pytest.approx(1e-3 + kernel.launch_s + 2 * gpu.sync_s, rel=1e-6)
    assert m.host_bound is None and m.hold_s is None  # a wall-clock time on a GPU holds host and device alike


class OtherRank:
    """Another rank that planned a longer hold; the barrier is counted."""

    def __init__(self, their_hold_s: float) -> None:
        self.their_hold_s, self.barriers = their_hold_s, 0

    def before_sample(self) -> None:
        self.barriers += 1

    def agree(self, seconds: float) -> float:
        return max(seconds, self.their_hold_s)


def test_ranks_use_one_agreed_hold_and_keep_every_sample():
    gpu = VirtualGpu()
    ranks = OtherRank(their_hold_s=3e-3)
    fn = _op(gpu, Kernel("all_reduce", 100e-6, launch_s=2e-6), lambda call: 5e-3 if call == 4 else 0.0)
    m = measure(fn, CUDA, RULE.counted(12), ranks=ranks, backend=gpu)
    assert len(m.samples_s) == 12 == ranks.barriers and m.stop_reason == "count"
    assert m.hold_s == pytest.approx(3e-3)  # the longest hold planned by any rank, never lengthened alone
    assert all(spin == pytest.approx(3e-3, rel=1e-4) for spin in gpu.device_time_of("spin"))
    assert m.dropped_samples == 0 and "agreed" in m.notes[0]  # the one sample that ran out is kept, and said so


def test_a_gpu_step_without_busy_time_does_not_claim_host_bound():
    gpu = VirtualGpu()
    m = measure(_op(gpu, Kernel("step", 1e-3)), CUDA, RULE, kind="step", backend=gpu)
    assert m.timer == "wall" and m.host_bound is None and m.enqueue_s is not None
    case = matmul.make_case(matmul.MatmulShape("square", 8, 8, 8), "float32")
    info = _measurement_info(case, m)
    assert "host_bound" not in info and info["enqueue_s"] == m.enqueue_s


def _kernels_per_window(gpu: VirtualGpu, kernel: str) -> list[int]:
    """How many `kernel`s ran between each pair of timing events that a spin held (one sample each)."""
    names = [name for name, _, _ in gpu.launches]
    counts = []
    for at, name in enumerate(names[:-1]):
        if name == "spin" and names[at + 1] == "event":
            end = names.index("event", at + 2)
            counts.append(names[at + 2:end].count(kernel))
    return counts


def test_kernels_of_a_few_microseconds_are_batched_between_one_pair_of_events():
    """nvbench's batch measurement: a 3 us kernel is launched back to back, hundreds of times between one start
    and one end event, so the events' resolution and cost are a vanishing share of the window. Warm-up's last call
    is preempted for 5 ms: sized from it, one kernel sat between each pair of events."""
    gpu = VirtualGpu()
    preempted = [5e-3]

    def preempt_last_warm_up_call(call: int) -> float:
        return preempted.pop() if preempted and gpu.host >= 0.9 * WARM_RULE.warmup_s else 0.0

    m = measure(_op(gpu, Kernel("small", 3e-6, launch_s=5e-6), preempt_last_warm_up_call), CUDA, WARM_RULE,
                backend=gpu)
    windows = _kernels_per_window(gpu, "small")
    assert len(windows) == len(m.samples_s) + m.dropped_samples
    assert set(windows) == {m.calls_per_sample}
    # the host launches a call in 5 us: a batch of 1 ms of host time holds 200 kernels, 0.6 ms of device time
    assert m.calls_per_sample * 3e-6 >= 0.5e-3
    assert m.median_s == pytest.approx(3e-6, rel=EXACT) and m.host_bound is True
