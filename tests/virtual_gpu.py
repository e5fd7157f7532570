"""A model of CUDA devices, their streams and events and the host that feeds them, on a virtual clock: the timing
core's `Backend` (suites/core/backends.py) for tests that must know the answer.

What it models, as CUDA specifies it or as GPUs are seen to behave (not canned results):
- the host clock advances by the host cost of every call (a kernel launch, an event record, a sync) and, in a
  synchronization, up to the device time it waits for;
- work on a stream runs in order, each kernel from the later of the stream's tail and the moment the host
  enqueued it (a kernel cannot start before its launch): a host slower than the device leaves gaps. Streams are
  `(device, index)`; the backend times on `CURRENT`, device 0's current stream, and a kernel may be launched on
  another stream or device, whose work the events of `CURRENT` do not see. `synchronize` waits for every stream
  of every device (what `TorchBackend.synchronize` waits for: all the work this process started);
- an event completes when its stream reaches it; `query` says whether the device has got there by the host's
  now, `synchronize` waits for it, and `elapsed_time` between two completed events is their device-time
  difference (an incomplete one raises, as cudaEventElapsedTime's cudaErrorNotReady does). With
  `event_resolution_s` (0.5 us: cudaEventElapsedTime's documented resolution) each timestamp is quantized;
- the spin (`torch.cuda._sleep`) runs for its cycles at the GPU's actual SM clock, which may differ from the
  clock the backend reports (`spin_hz`);
- the L2: a kernel reading data the cache does not hold runs at its cold time, else at its warm time, and the
  flush evicts everything. The flush's buffer (twice the L2) is allocated once, when the flush is made;
- graph capture records the kernels of `reps` calls (after one call outside the capture, as torch makes) and a
  replay enqueues them all for one launch's host cost; the first replay of a graph also pays its upload
  (`graph_upload_s`, cudaGraphLaunch uploads the executable graph on its first launch). A synchronization, a
  pageable copy inside a capture fails it, as CUDA refuses them on a capturing stream (an allocation there comes
  from the graph's private pool);
- the launch queue: with `queue_depth` (about 1024 on current GPUs) a launch onto a stream that already has that
  many items pending blocks the host until the oldest completes (a graph replay is one launch);
- implicit synchronizations: a copy from pageable host memory first waits for its stream to drain (CUDA's
  documented behaviour for pageable H2D copies), and an allocation that grows the caching allocator's reserve
  waits for the device (cudaMalloc may synchronize, and torch's allocator synchronizes when it frees cached
  blocks to make room);
- memory: bytes allocated, their peak since the last reset (the caching allocator's counters);
- a power cap (`PowerCap`): the SM clock falls from its boost towards a capped clock as the device's recent busy
  share rises, so a dense loop of kernels runs at a lower clock than a duty-cycled one. Work kernels and the
  flush count as busy; the spin (one thread) and events do not draw power.
- jitter: with `jitter`, every work item's device time (a kernel, the flush, a copy) is off by a random share of
  it (normal, that standard deviation, seeded), as a real GPU's durations vary by tens of nanoseconds from call to
  call: against the events' 0.5 us steps it puts each window at a random phase, where exact durations would put
  every window at the same one and hide the steps' spread;
- host hiccups: with `hiccup_p`, every host call (a launch, an event record, a replay) is delayed by `hiccup_s`
  with that probability (seeded), as a real host is by preemptions, page faults and interrupts;
- an event's own device time (`event_device_s`): a real GPU spends about a microsecond on a timestamp, so an empty
  pair of events reads about 1 us on Hopper, not 0;
Every option is off by default, so that a test states which of them its answer depends on (`REALISTIC` sets the
costs a current GPU and host are seen to have, for the tests of tests/gpu_bounds.py's bounds).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

Stream = tuple[int, int]  # (device, stream index)
CURRENT: Stream = (0, 0)  # the stream the backend times on: device 0's current stream
CAPTURE_REFUSED = "CUDA error: operation not permitted when stream is capturing"


@dataclass
class Kernel:
    """An op's kernel: device time with its data in L2 (`warm_s`) and without (`cold_s`), at the boost clock; host
    cost to launch; the stream it is launched on."""

    name: str
    warm_s: float
    cold_s: float | None = None
    launch_s: float = 5e-6
    stream: Stream = CURRENT


@dataclass(frozen=True)
class PowerCap:
    """The SM clock under a power cap: boost when idle, `capped_hz` when busy all the time, linear in between, on the
    busy share averaged with time constant `tau_s` (the power controller reacts over milliseconds)."""

    capped_hz: float
    tau_s: float = 2e-3


@dataclass
class VirtualGpu:
    clock_hz: float = 1.98e9  # the SM clock the GPU actually runs the spin at (its boost under a power cap)
    reported_hz: float = 1.98e9  # what the backend tells the timing core (the device's clock_rate)
    launch_s: float = 4e-6  # host cost of launching the spin, an event record or a graph replay
    sync_s: float = 2e-6  # host cost of a synchronize beyond the wait itself
    flush_s: float = 50e-6  # device time of the L2 flush
    l2_bytes: int = 50 * 2**20
    event_resolution_s: float = 0.0  # event timestamps are multiples of this (0: exact)
    graph_upload_s: float = 0.0  # host time of a graph's first replay beyond its launch
    queue_depth: int | None = None  # launches a stream holds before the host blocks (None: unbounded)
    malloc_s: float = 20e-6  # host cost of growing the allocator's reserve, beyond the wait for the device
    power_cap: PowerCap | None = None
    jitter: float = 0.0  # relative standard deviation of every work item's device time
    hiccup_p: float = 0.0  # probability that a host call is delayed by hiccup_s
    hiccup_s: float = 0.0
    event_device_s: float = 0.0  # device time of an event record
    seed: int = 0
    host: float = 0.0  # host clock, seconds
    tails: dict[Stream, float] = field(default_factory=dict)  # device time at which each stream's work ends
    pending: dict[Stream, deque] = field(default_factory=dict)  # per stream: device end times of queued items
    cached: set[str] = field(default_factory=set)  # device 0's L2
    launches: list[tuple[str, float, float]] = field(default_factory=list)  # (name, device start, end)
    capturing: list[Kernel] | None = None
    allocated: int = 0
    reserved: int = 0
    peak: int = 0
    heat: float = 0.0  # device 0's busy share, exponentially averaged (PowerCap)
    heat_at: float = 0.0  # device time `heat` was last brought up to
    _flush: Callable[[], None] | None = None
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def tail(self) -> float:
        """Device time at which the current stream's work ends."""
        return self.tails.get(CURRENT, 0.0)

    # --- the Backend interface ---------------------------------------------------------------------------------
    def now(self) -> float:
        return self.host

    def synchronize(self) -> None:
        self._refuse_in_capture()
        self.host = max([self.host, *self.tails.values()]) + self.sync_s

    def spin_hz(self) -> float:
        return self.reported_hz

    def sleep(self, cycles: int) -> None:
        start = self._start_on(CURRENT, self.launch_s)
        self._put(CURRENT, "spin", start, cycles / self._clock_at(start), busy=False)

    def event(self) -> VirtualEvent:
        return VirtualEvent(self)

    def l2_flush(self) -> Callable[[], None]:
        if self._flush is None:
            self.allocate(2 * self.l2_bytes)  # the buffer it writes, kept for the flush's life

            def flush() -> None:
                self._enqueue(CURRENT, "l2_flush", self.flush_s, self.launch_s, scales=False)
                self.cached.clear()
            self._flush = flush
        return self._flush

    def capture_graph(self, fn: Callable[[], object], reps: int) -> Callable[[], None]:
        fn()  # as torch does: one call on a side stream before capture
        self.capturing = []
        try:
            for _ in range(reps):
                fn()
            captured = self.capturing
        finally:
            self.capturing = None
        uploaded = [False]

        def replay() -> None:
            self.host += self.launch_s + (0.0 if uploaded[0] else self.graph_upload_s)
            uploaded[0] = True
            for at, kernel in enumerate(captured):
                self._run(kernel, host_cost=0.0, counts=at == 0)
        return replay

    def memory_allocated(self) -> int:
        return self.allocated

    def max_memory_allocated(self) -> int:
        return self.peak

    def reset_peak_memory(self) -> None:
        self.peak = self.allocated

    # --- what a workload calls ---------------------------------------------------------------------------------
    def launch(self, kernel: Kernel) -> None:
        """Launch one kernel from the host (recorded instead while a graph is captured, unless it goes to a stream
        outside the capture, where it runs at once)."""
        if self.capturing is not None and kernel.stream == CURRENT:
            self.host += kernel.launch_s
            self.capturing.append(kernel)
            return
        self._run(kernel, kernel.launch_s)

    def copy_from_pageable(self, nbytes: int, bytes_per_s: float = 25e9, stream: Stream = CURRENT) -> None:
        """cudaMemcpyAsync from pageable host memory: the stream drains first, then the host stages the bytes and
        the copy is enqueued."""
        self._refuse_in_capture()
        self.host = max(self.host, self.tails.get(stream, 0.0)) + self.sync_s
        self._enqueue(stream, "h2d", nbytes / bytes_per_s, nbytes / bytes_per_s, scales=False)

    def allocate(self, nbytes: int) -> None:
        """An allocation from the caching allocator; beyond its reserve, the reserve grows (cudaMalloc), which
        waits for the device."""
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        if self.allocated > self.reserved:
            if self.capturing is None:  # a capture allocates from its graph's private pool
                self.synchronize()
            self.host += self.malloc_s
            self.reserved = self.allocated

    def free(self, nbytes: int) -> None:
        """A block back to the caching allocator: its reserve stays."""
        self.allocated -= nbytes

    # --- the model ---------------------------------------------------------------------------------------------
    def _refuse_in_capture(self) -> None:
        if self.capturing is not None:
            raise RuntimeError(CAPTURE_REFUSED)

    def _run(self, kernel: Kernel, host_cost: float, counts: bool = True) -> None:
        cold = kernel.cold_s if kernel.cold_s is not None else kernel.warm_s
        on_device_0 = kernel.stream[0] == 0
        warm = on_device_0 and kernel.name in self.cached
        self._enqueue(kernel.stream, kernel.name, kernel.warm_s if warm else cold, host_cost, counts=counts)
        if on_device_0:
            self.cached.add(kernel.name)

    def _enqueue(self, stream: Stream, name: str, duration: float, host_cost: float, counts: bool = True,
                 scales: bool = True) -> float:
        """Put work on a stream after the host's call returns; returns its device end time. `scales`: the work's
        time follows the SM clock (a kernel) rather than the memory (a flush, a copy)."""
        start = self._start_on(stream, host_cost, counts)
        clock = self._clock_at(start) if scales and stream[0] == 0 else self.clock_hz
        if self.jitter and duration > 0:
            duration *= max(0.0, 1 + self.rng.gauss(0.0, self.jitter))
        return self._put(stream, name, start, duration * self.clock_hz / clock, busy=duration > 0, counts=counts)

    def _start_on(self, stream: Stream, host_cost: float, counts: bool = True) -> float:
        """The host pays for the launch (and now and then a hiccup), waits for a slot in the stream's launch queue,
        and the work starts when the stream is free and the launch has happened."""
        self.host += host_cost
        if self.hiccup_p and host_cost > 0 and self.rng.random() < self.hiccup_p:
            self.host += self.hiccup_s
        queue = self.pending.setdefault(stream, deque())
        while queue and queue[0] <= self.host:
            queue.popleft()
        if counts and self.queue_depth is not None and len(queue) >= self.queue_depth:
            self.host = queue.popleft()
        return max(self.tails.get(stream, 0.0), self.host)

    def _put(self, stream: Stream, name: str, start: float, duration: float, busy: bool, counts: bool = True
             ) -> float:
        end = start + duration
        self.tails[stream] = end
        if counts:
            self.pending.setdefault(stream, deque()).append(end)
        self.launches.append((name, start, end))
        if stream[0] == 0 and self.power_cap is not None:
            self._warm_up_to(start, busy=False)
            self._warm_up_to(end, busy=busy)
        return end

    def _warm_up_to(self, t: float, busy: bool) -> None:
        """Average the busy share up to device time `t` (idle or busy since `heat_at`)."""
        if t <= self.heat_at:
            return
        keep = math.exp(-(t - self.heat_at) / self.power_cap.tau_s)
        self.heat = self.heat * keep + (1.0 - keep if busy else 0.0)
        self.heat_at = t

    def _clock_at(self, t: float) -> float:
        """The SM clock for work starting at device time `t`."""
        if self.power_cap is None:
            return self.clock_hz
        self._warm_up_to(t, busy=False)
        return self.clock_hz - (self.clock_hz - self.power_cap.capped_hz) * self.heat

    def device_time_of(self, name: str) -> list[float]:
        return [end - start for n, start, end in self.launches if n == name]


class VirtualEvent:
    """A timing event on the current stream: its device time is fixed when it is recorded (the stream is in order),
    and read back quantized to the GPU's event resolution."""

    def __init__(self, gpu: VirtualGpu) -> None:
        self.gpu = gpu
        self.at: float | None = None

    def record(self) -> None:
        self.at = self.gpu._enqueue(CURRENT, "event", self.gpu.event_device_s, self.gpu.launch_s, scales=False)

    def query(self) -> bool:
        return self.at is not None and self.at <= self.gpu.host

    def synchronize(self) -> None:
        if self.at is not None:
            self.gpu.host = max(self.gpu.host, self.at) + self.gpu.sync_s

    def elapsed_time(self, end: VirtualEvent) -> float:
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready")
        return (self._stamp(end.at) - self._stamp(self.at)) * 1e3

    def _stamp(self, at: float) -> float:
        resolution = self.gpu.event_resolution_s
        return math.floor(at / resolution) * resolution if resolution else at


def realistic(**overrides) -> VirtualGpu:
    """A GPU and host with the costs a current one is seen to have: 5 us launches (the spin, events, a replay),
    a graph's first replay uploading for 300 us, events in 0.5 us steps that spend 1 us of device time each
    (an empty pair reads about 1 us on Hopper), durations varying by 1 %, and a host hiccup of 50 us in one call
    of 200 (a preemption, a page fault); the launch queue is bounded where a test says so."""
    settings = dict(launch_s=5e-6, graph_upload_s=300e-6, event_resolution_s=0.5e-6, event_device_s=1e-6,
                    jitter=0.01, hiccup_p=0.005, hiccup_s=50e-6) | overrides
    return VirtualGpu(**settings)
