"""The CUDA sampler (the stream hold, drops, lengthening and its return, host_bound, graph replay and its upload,
capture failures, the L2 flush and cold batches, the launch queue, work on another stream or device, the
fall-back for an enqueue that waits on the device, the agreed hold of ranks, clocks under a power cap) against a
model of stream and event semantics on a virtual clock (tests/virtual_gpu.py), so that every answer is known."""

import dataclasses

import pytest
import torch

from suites.core.cases import Case
from suites.core.profiles import rules
from suites.core.runner import _measurement_info
from suites.core.samplers import (
    EMPTY_WINDOW_TRIES,
    EVENT_RESOLUTION_S,
    FOLLOW_HOST_AFTER,
    MIN_HOLD_S,
    WAIT_CONFIRMATIONS,
    empty_window_s,
    lengthen_hold,
    plan_hold,
)
from suites.core.stopping import StopRule
from suites.core.timing import measure
from suites.ops import matmul
from tests.gpu_bounds import EMPTY_WINDOW_BOUND_S, drops_allowed, hold_allowed, queue_depth
from tests.virtual_gpu import CURRENT, Kernel, PowerCap, VirtualGpu, realistic

CUDA = torch.device("cuda")  # a device object only: every CUDA call goes to the virtual GPU
RULE = StopRule(min_samples=20, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, warmup_s=0.0)
EXACT = 1e-9  # the virtual clock is exact up to float rounding
WARM_RULE = StopRule(min_samples=20, min_time_s=0.0, target_rel_iqr=0.01, timeout_s=5.0, warmup_s=1e-3)
MiB = 2**20


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
    assert m.host_bound is True and m.enqueue_s == pytest.approx(40e-6)  # the calls alone: not the spin, not the events
    # warm-up's last call took 40 us to enqueue: the hold covers a sample of them with margin
    assert m.hold_s == pytest.approx(plan_hold(40e-6, m.calls_per_sample))


def test_a_device_bound_op_is_not_host_bound():
    gpu = VirtualGpu()
    m = measure(_op(gpu, Kernel("gemm", 100e-6, launch_s=2e-6)), CUDA, RULE, backend=gpu)
    assert m.median_s == pytest.approx(100e-6, rel=EXACT) and m.host_bound is False
    assert m.stop_reason == "target" and m.converged


def test_a_sample_whose_hold_ran_out_is_dropped_and_the_hold_lengthened_then_brought_back():
    """One call of the first sample is 1 ms late on the host (a preemption): that sample opens its window before
    the host has enqueued it, so it is dropped and the hold made at least twice that enqueue time; the rest are
    held, and after FOLLOW_HOST_AFTER of them the hold comes back to what they need (before, it stayed at 2 ms
    for the rest of the case: a 1 ms sample took 3 ms of the GPU)."""
    gpu = VirtualGpu()
    late = [1e-3]

    def first_held_call(call: int) -> float:
        """1 ms on the first call after the first sample's spin (the empty windows before it hold spins of their
        own, the unheld windows of the off-stream check none): the first call of the first sample."""
        if sum(name == "spin" for name, _, _ in gpu.launches) > EMPTY_WINDOW_TRIES:
            return late.pop() if late else 0.0
        return 0.0

    fn = _op(gpu, Kernel("gemm", 100e-6, launch_s=2e-6), first_held_call)
    m = measure(fn, CUDA, dataclasses.replace(RULE, min_samples=2 * FOLLOW_HOST_AFTER), backend=gpu)
    assert m.dropped_samples == 1 and not m.notes
    reps = m.calls_per_sample
    first_hold = plan_hold(2e-6, reps)
    lengthened = lengthen_hold(first_hold, 1e-3 + reps * 2e-6 + 3 * gpu.launch_s)
    spins = _case_spins(gpu)
    assert spins[0] == pytest.approx(first_hold, rel=1e-4)
    assert spins[1:1 + FOLLOW_HOST_AFTER] == pytest.approx([lengthened] * FOLLOW_HOST_AFTER, rel=1e-4)
    # then back to what the held samples needed: their enqueue (the calls, the spin and two events) with margin
    assert m.hold_s == pytest.approx(plan_hold((reps * 2e-6 + 3 * gpu.launch_s) / reps, reps))
    assert len(spins) == 1 + len(m.samples_s) and m.hold_s < lengthened / 10
    assert spins[1 + FOLLOW_HOST_AFTER:] == pytest.approx([m.hold_s] * (len(spins) - 1 - FOLLOW_HOST_AFTER), rel=1e-4)
    assert all(s == pytest.approx(100e-6, rel=EXACT) for s in m.samples_s)


def _case_spins(gpu: VirtualGpu) -> list[float]:
    """The spins that held the case's samples (after those of the empty windows measured first)."""
    return gpu.device_time_of("spin")[EMPTY_WINDOW_TRIES:]


def test_a_spin_that_runs_faster_than_the_clock_it_was_sized_at_is_caught_by_the_query():
    """A GPU whose SM clock runs at twice the reported one spins half as long as asked: the first hold runs out,
    is lengthened, and the device time stays the kernel's."""
    gpu = VirtualGpu(clock_hz=4e9, reported_hz=2e9)
    m = measure(_op(gpu, Kernel("gemm", 100e-6, launch_s=2e-6)), CUDA, RULE, backend=gpu)
    assert m.dropped_samples == 1  # and only one: the hold does not come back below the one the spin ran short of
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


def test_the_l2_flush_runs_before_every_call_outside_its_window_and_makes_it_cold():
    gpu = VirtualGpu(flush_s=200e-6)
    kernel = Kernel("gemm", 10e-6, cold_s=30e-6)
    cold = measure(_op(gpu, kernel), CUDA, RULE, cold=True, backend=gpu)
    reps = cold.calls_per_sample
    assert cold.l2_flush and reps > 1  # a cold call of 230 us with its flush: a few per 1 ms sample
    assert cold.median_s == pytest.approx(30e-6, rel=EXACT)  # the cold time, and no flush inside the windows
    assert cold.enqueue_s == pytest.approx(kernel.launch_s)  # the call's own, not its flush's or events'
    # in every sample: the spin, then per call a flush, start event, the call, end event, in that order
    names = [name for name, _, _ in gpu.launches]
    last = len(names) - 1 - names[::-1].index("spin")
    assert names[last:] == ["spin", *["l2_flush", "event", "gemm", "event"] * reps]
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


def test_an_op_that_syncs_falls_back_to_the_wall_with_its_calibrated_batch():
    """A 50 us op with a host sync inside: its batch of calls is halved down to one call (it could have been the
    launch queue), which still outlasts its hold; the wall clock then times the calibrated batch, not one call per
    sample, whose two synchronizations would be a large share of it."""
    gpu = VirtualGpu()
    kernel = Kernel("step", 50e-6, launch_s=5e-6)

    def syncing() -> None:
        gpu.launch(kernel)
        gpu.synchronize()

    m = measure(syncing, CUDA, RULE, backend=gpu)
    assert m.timer == "wall" and m.calls_per_sample * 57e-6 >= RULE.min_sample_s
    assert m.dropped_samples >= 2 * WAIT_CONFIRMATIONS and not any("launch queue (about" in n for n in m.notes)
    assert m.median_s == pytest.approx(kernel.launch_s + 50e-6 + gpu.sync_s, rel=0.01)


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
    late = [5e-3]

    def second_sample(call: int) -> float:
        """5 ms on the first call of the second sample (ranks have no empty windows: each spin holds a sample)."""
        return late.pop() if late and sum(name == "spin" for name, _, _ in gpu.launches) == 2 else 0.0

    fn = _op(gpu, Kernel("all_reduce", 100e-6, launch_s=2e-6), second_sample)
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
    return counts[EMPTY_WINDOW_TRIES:]  # the empty windows measured before the case's samples hold nothing


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


def test_a_graphs_first_replay_pays_its_upload_before_the_samples():
    """cudaGraphLaunch uploads a graph on its first launch (2 ms of host time here). Paid in the first sample, it
    made that sample outlast its hold, which was lengthened for the rest of the case; under a power cap the long
    holds left the GPU idle between samples, so the kernels ran at a higher clock than those of the same case
    without an upload. Replayed once before sampling, the case reads as one whose graph was uploaded already."""
    cap = PowerCap(capped_hz=1.4e9)
    kernel = Kernel("gemm", 50e-6, launch_s=5e-6)
    uploading, uploaded = VirtualGpu(graph_upload_s=2e-3, power_cap=cap), VirtualGpu(power_cap=cap)
    m = measure(_op(uploading, kernel), CUDA, RULE, graph=True, backend=uploading)
    twin = measure(_op(uploaded, kernel), CUDA, RULE, graph=True, backend=uploaded)
    assert m.timer == twin.timer == "cuda_graph"
    assert m.dropped_samples == 0 and m.hold_s == twin.hold_s == pytest.approx(MIN_HOLD_S)
    assert m.median_s == pytest.approx(twin.median_s, rel=1e-3)


def test_an_allocator_that_grows_in_one_sample_does_not_lengthen_every_later_hold():
    """A cache of the op's grows once, mid-measurement: the caching allocator reserves more, which waits for the
    device, so that sample's enqueue outlasts its hold and is dropped; FOLLOW_HOST_AFTER samples later the hold is
    back to what the samples need."""
    gpu = VirtualGpu()
    kernel = Kernel("gemm", 100e-6, launch_s=2e-6)

    def fn() -> None:
        if len(_case_spins(gpu)) == 5 and gpu.reserved == 0:  # in the fifth sample
            gpu.allocate(256 * MiB)
        gpu.launch(kernel)

    m = measure(fn, CUDA, dataclasses.replace(RULE, min_samples=2 * FOLLOW_HOST_AFTER), backend=gpu)
    reps = m.calls_per_sample
    assert m.dropped_samples == 1 and gpu.reserved == 256 * MiB
    spins = _case_spins(gpu)
    assert len([s for s in spins if s > 1.9 * spins[0]]) == FOLLOW_HOST_AFTER  # lengthened, then back
    assert m.hold_s == pytest.approx(plan_hold((reps * 2e-6 + 3 * gpu.launch_s) / reps, reps))
    assert spins[-1] == pytest.approx(m.hold_s, rel=1e-4)
    assert all(s == pytest.approx(100e-6, rel=EXACT) for s in m.samples_s)


def test_a_cold_kernel_of_a_few_microseconds_ends_converged_in_hundreds_of_samples():
    """A 3.2 us cold kernel behind a 50 us flush, events in 0.5 us steps, the full profile's rule. One call per
    sample read 3.0 or 3.5 us (the median of the steps, not the kernel) and needed 0.5 s of 3.2 us samples, 156 000
    of them, past the 15 s timeout, unconverged. Batched, each call still after its own flush and between its own
    events, a sample is the mean of its calls (the steps average out) and the flushes between them count towards
    the rule's measured time."""
    gpu = VirtualGpu(event_resolution_s=0.5e-6, flush_s=50e-6)
    rule = rules("full").stop
    m = measure(_op(gpu, Kernel("small", 1e-6, cold_s=3.2e-6)), CUDA, rule, cold=True, backend=gpu)
    assert m.l2_flush and m.timer == "cuda_event" and m.calls_per_sample > 1
    assert m.stop_reason == "target" and m.converged and len(m.samples_s) < 1000
    assert m.median_s == pytest.approx(3.2e-6, rel=0.01)
    assert gpu.host < 2 * rule.min_time_s  # virtual seconds: the GPU's own time, not the timeout


@pytest.mark.parametrize("stream", [(0, 1), (1, 0)], ids=["another stream", "another device"])
def test_an_op_that_works_off_the_timed_stream_is_not_read_as_no_time(stream):
    """The events of the current stream see nothing of a kernel launched on another stream or device: the op read
    about 0 us and `host_bound: true`. Its windows are no longer than empty ones: it is timed on the wall clock
    between synchronizations of every device in use, with a note, and host_bound is unknown."""
    gpu = VirtualGpu()
    m = measure(_op(gpu, Kernel("gemm", 100e-6, launch_s=5e-6, stream=stream)), CUDA, RULE, backend=gpu)
    assert m.timer == "wall" and m.host_bound is None and m.hold_s is None
    assert any("saw no work" in note and "another stream or device" in note for note in m.notes)
    assert m.median_s >= 100e-6  # the kernel's time is in the wall-clock samples


def test_an_op_with_its_work_on_the_timed_stream_keeps_its_events():
    gpu = VirtualGpu(event_resolution_s=0.5e-6)
    m = measure(_op(gpu, Kernel("tiny", 1e-6, launch_s=5e-6, stream=CURRENT)), CUDA, RULE, backend=gpu)
    assert m.timer == "cuda_event" and not m.notes and m.host_bound is True


def test_a_sample_of_more_launches_than_the_launch_queue_holds_is_split_not_timed_on_the_wall():
    """A 0.3 us kernel launched in 0.5 us (a C++ loop): 1 ms of host time is 2 500 launches, more than CUDA's
    launch queue holds (about 1024). Behind the spin the host blocked until the spin ended, every hold ran out and
    the op fell back to the wall clock; halving the calls per sample until they fit keeps it on events."""
    gpu = VirtualGpu(queue_depth=1024)
    m = measure(_op(gpu, Kernel("tiny", 0.3e-6, launch_s=0.5e-6)), CUDA, RULE, backend=gpu)
    assert m.timer == "cuda_event" and m.calls_per_sample < 1024 - 3  # the spin and two events share the queue
    assert m.median_s == pytest.approx(0.3e-6, rel=EXACT)
    assert any("launch queue" in note for note in m.notes)


def test_a_graph_whose_capture_fails_is_timed_with_events_and_what_it_waits_for_on_the_wall():
    """A copy from pageable memory inside the op: CUDA refuses it on a capturing stream, so the graph is not
    made (the note says why), and outside a capture it waits for its stream to drain, so the events cannot hold
    the op either: it is timed on the wall clock, and both notes say so."""
    gpu = VirtualGpu()
    kernel = Kernel("step", 200e-6, launch_s=5e-6)

    def copies_from_pageable() -> None:
        gpu.copy_from_pageable(64 * 2**10)
        gpu.launch(kernel)

    m = measure(copies_from_pageable, CUDA, RULE, graph=True, backend=gpu)
    assert m.timer == "wall"
    assert m.notes[0].startswith("CUDA graph capture failed") and "not permitted when stream is capturing" in m.notes[0]
    assert any("waits on the device" in note for note in m.notes[1:])
    assert gpu.capturing is None  # the failed capture ended


def test_held_samples_run_at_the_clock_of_a_duty_cycled_loop_not_a_dense_ones():
    """Under a power cap the SM clock falls as the GPU stays busy. The held samples (spin, calls, synchronize: the
    GPU idles between them) run a compute-bound kernel at a higher clock than a dense loop of it does (do_bench's,
    a training loop's): the suite's figure is the duty-cycled one, which is why gpu_check compares clocks with
    do_bench (suites/checks/crosscheck.py)."""
    gpu = VirtualGpu(power_cap=PowerCap(capped_hz=1.4e9))
    kernel = Kernel("gemm", 200e-6, launch_s=5e-6)
    m = measure(_op(gpu, kernel), CUDA, RULE, backend=gpu)
    for _ in range(500):  # 0.1 s back to back
        gpu.launch(kernel)
    dense = gpu.device_time_of("gemm")[-1]
    assert 200e-6 < m.median_s < dense / 1.01
    assert dense == pytest.approx(200e-6 * 1.98 / 1.4, rel=1e-3)  # at the capped clock


def test_a_cold_graph_sample_too_long_for_the_launch_queue_is_split_too():
    """Cold calls replay a graph of one call each, after a flush and between two events: four launches per call.
    A GPU whose launch queue held 64 cannot take 24 of them behind the spin; halved, 12 fit."""
    gpu = VirtualGpu(queue_depth=64, flush_s=30e-6)
    m = measure(_op(gpu, Kernel("small", 1e-6, cold_s=3e-6)), CUDA, RULE, cold=True, graph=True, backend=gpu)
    assert m.timer == "cuda_graph" and m.l2_flush and 1 < 4 * m.calls_per_sample < 64
    assert any("launch queue" in note for note in m.notes)
    assert m.median_s == pytest.approx(3e-6, rel=EXACT)


def test_a_cold_kernel_under_the_events_resolution_says_its_spread_is_a_resolution_limit():
    """A 1.3 us kernel timed cold, its durations and the flush's varying by 1 % (each window at a random phase
    against the events' 0.5 us steps): 25 windows a sample spread by a rel-IQR of about 6 % from the steps alone,
    and the case ends on a plateau, unconverged. It says so as a limit of the timer, not as the kernel's noise; a
    kernel that is noisy itself, at the same rule, does not."""
    gpu = VirtualGpu(event_resolution_s=0.5e-6, flush_s=50e-6, jitter=0.01)
    m = measure(_op(gpu, Kernel("small", 0.5e-6, cold_s=1.3e-6)), CUDA, rules("full").stop, cold=True, backend=gpu)
    assert m.stop_reason == "plateau" and not m.converged and m.median_s == pytest.approx(1.3e-6, rel=0.02)
    assert m.resolution_limited and m.resolution_rel_iqr ** 2 > 0.5 * m.rel_iqr ** 2
    assert _measurement_info(Case("t", "t", {}, build=None), m)["resolution_limited"] is True
    assert any(note.startswith("a resolution limit, not noise: the events' 0.5 us steps") for note in m.notes)
    noisy = VirtualGpu(event_resolution_s=0.5e-6, jitter=0.2)
    n = measure(_op(noisy, Kernel("noisy", 20e-6)), CUDA, rules("full").stop, backend=noisy)
    assert not n.converged and not n.resolution_limited
    assert "resolution_limited" not in _measurement_info(Case("t", "t", {}, build=None), n)
    assert not any("resolution limit" in note for note in n.notes)


def test_an_op_with_part_of_its_work_off_the_timed_stream_is_timed_on_the_wall():
    """A small kernel on the current stream and the big one on a side stream: the events see 5 us of work, more
    than an empty window, so the empty-window check passes, and they would read 5 us of a 200 us op. The side
    kernel goes on after the current stream's window has ended: caught at the first sample, the op is timed on the
    wall clock with a note, as an op wholly off the stream is."""
    gpu = VirtualGpu(event_resolution_s=0.5e-6)
    small, big = Kernel("small", 5e-6), Kernel("big", 200e-6, stream=(0, 1))

    def op() -> None:
        gpu.launch(big)
        gpu.launch(small)

    m = measure(op, CUDA, RULE, backend=gpu)
    assert m.timer == "wall" and m.host_bound is None
    assert any(note.startswith("part of the calls' work ran off the current stream (work went on for")
               for note in m.notes)
    assert m.median_s >= 200e-6  # the side kernel's time is in the samples
    both = VirtualGpu(event_resolution_s=0.5e-6)  # the same two kernels on the current stream keep their events
    on_stream = measure(lambda: (both.launch(Kernel("big", 200e-6)), both.launch(small)), CUDA, RULE, backend=both)
    assert on_stream.timer == "cuda_event" and not on_stream.notes
    assert on_stream.median_s == pytest.approx(205e-6, rel=0.01)


# The bounds tests/test_gpu_timing.py asserts on a GPU, on a virtual GPU with realistic costs and host hiccups.

@pytest.mark.parametrize("seed", range(4))
def test_a_graph_case_on_a_realistic_gpu_drops_a_bounded_number_and_holds_within_a_factor_of_the_minimum(seed):
    """A baked graph of 10 us kernels: its planned hold is the 20 us floor, which a 5 us replay launch between
    two event records and the spin's own launch, plus a host hiccup now and then, outlasts: samples drop and the
    hold follows what the enqueues took. Bounded, both: not zero drops and exactly 20 us, as the GPU test asked."""
    gpu = realistic(seed=seed)
    m = measure(_op(gpu, Kernel("gemm", 10e-6)), CUDA, rules("full").stop, graph=True, backend=gpu)
    assert m.timer == "cuda_graph" and m.converged
    assert m.dropped_samples <= drops_allowed(len(m.samples_s))
    assert MIN_HOLD_S <= m.hold_s <= hold_allowed()
    assert m.median_s == pytest.approx(10e-6, rel=0.02)


def test_an_empty_window_on_a_realistic_gpu_reads_its_events_own_time_within_the_bound():
    empty = empty_window_s(realistic()) - EVENT_RESOLUTION_S
    assert 0.5e-6 <= empty <= EMPTY_WINDOW_BOUND_S  # about 1 us: the timestamps' own device time


def test_the_launch_queue_depth_is_found_and_a_call_past_it_is_timed_on_the_wall():
    """A queue of 1700 launches (not 1024: it is bounded in bytes of launch parameters, and differs by kernel and
    driver): the probe finds it behind a spin (less the spin's own slot), a call of half of it is held and timed
    by events, one of one and a half times it blocks the host behind every hold and is timed on the wall clock
    with a note naming the launch queue."""
    gpu = realistic(queue_depth=1700, hiccup_p=0.0)
    tiny = Kernel("tiny", 1e-6, launch_s=3e-6)
    found = queue_depth(gpu, lambda: gpu.launch(tiny))
    assert found == 1700 - 1
    for launches, timer in ((found // 2, "cuda_event"), (3 * found // 2, "wall")):
        def many(launches: int = launches) -> None:
            for _ in range(launches):
                gpu.launch(tiny)
        m = measure(many, CUDA, RULE, backend=gpu)
        assert m.timer == timer
        assert any("launch queue" in note for note in m.notes) is (timer == "wall")
