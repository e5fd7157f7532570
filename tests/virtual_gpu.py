"""A model of one CUDA stream, its events and the host that feeds it, on a virtual clock: the timing core's
`Backend` (suites/core/timing.py) for tests that must know the answer.

What it models, as CUDA specifies it (not canned results):
- the host clock advances by the host cost of every call (a kernel launch, an event record, a sync) and, in a
  synchronization, up to the device time it waits for;
- work on the stream runs in order, each kernel from the later of the stream's tail and the moment the host
  enqueued it (a kernel cannot start before its launch): a host slower than the device leaves gaps;
- an event completes when the stream reaches it; `query` says whether the device has got there by the host's
  now, `synchronize` waits for it, and `elapsed_time` between two completed events is their device-time
  difference (an incomplete one raises, as cudaEventElapsedTime's cudaErrorNotReady does);
- the spin (`torch.cuda._sleep`) runs for its cycles at the GPU's actual SM clock, which may differ from the
  clock the backend reports (`spin_hz`);
- the L2: a kernel reading data the cache does not hold runs at its cold time, else at its warm time, and the
  flush evicts everything; graph capture records the kernels of `reps` calls and a replay enqueues them all
  for one launch's host cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Kernel:
    """An op's kernel: device time with its data in L2 (`warm_s`) and without (`cold_s`), host cost to launch."""

    name: str
    warm_s: float
    cold_s: float | None = None
    launch_s: float = 5e-6


@dataclass
class VirtualGpu:
    clock_hz: float = 1.98e9  # the SM clock the GPU actually runs the spin at
    reported_hz: float = 1.98e9  # what the backend tells the timing core (the device's clock_rate)
    launch_s: float = 4e-6  # host cost of launching the spin, an event record or a graph replay
    sync_s: float = 2e-6  # host cost of a synchronize beyond the wait itself
    flush_s: float = 50e-6  # device time of the L2 flush
    host: float = 0.0  # host clock, seconds
    tail: float = 0.0  # device time at which the last enqueued work ends
    cached: set[str] = field(default_factory=set)
    launches: list[tuple[str, float, float]] = field(default_factory=list)  # (name, device start, end)
    capturing: list[Kernel] | None = None

    # --- the Backend interface ---------------------------------------------------------------------------------
    def now(self) -> float:
        return self.host

    def synchronize(self) -> None:
        self.host = max(self.host, self.tail) + self.sync_s

    def spin_hz(self) -> float:
        return self.reported_hz

    def sleep(self, cycles: int) -> None:
        self._enqueue("spin", cycles / self.clock_hz, self.launch_s)

    def event(self) -> VirtualEvent:
        return VirtualEvent(self)

    def l2_flush(self) -> Callable[[], None]:
        def flush() -> None:
            self._enqueue("l2_flush", self.flush_s, self.launch_s)
            self.cached.clear()
        return flush

    def capture_graph(self, fn: Callable[[], object], reps: int) -> Callable[[], None]:
        fn()  # as torch does: one call on a side stream before capture
        self.capturing = []
        for _ in range(reps):
            fn()
        captured, self.capturing = self.capturing, None

        def replay() -> None:
            self.host += self.launch_s
            for kernel in captured:
                self._run(kernel, host_cost=0.0)
        return replay

    # --- what a workload calls ---------------------------------------------------------------------------------
    def launch(self, kernel: Kernel) -> None:
        """Launch one kernel from the host (recorded instead while a graph is captured)."""
        if self.capturing is not None:
            self.host += kernel.launch_s
            self.capturing.append(kernel)
            return
        self._run(kernel, kernel.launch_s)

    def _run(self, kernel: Kernel, host_cost: float) -> None:
        cold = kernel.cold_s if kernel.cold_s is not None else kernel.warm_s
        self._enqueue(kernel.name, kernel.warm_s if kernel.name in self.cached else cold, host_cost)
        self.cached.add(kernel.name)

    def _enqueue(self, name: str, duration: float, host_cost: float) -> float:
        """Put work on the stream after the host's call returns; returns its device end time."""
        self.host += host_cost
        start = max(self.tail, self.host)
        self.tail = start + duration
        self.launches.append((name, start, self.tail))
        return self.tail

    def device_time_of(self, name: str) -> list[float]:
        return [end - start for n, start, end in self.launches if n == name]


class VirtualEvent:
    """A timing event on the stream: its device time is fixed when it is recorded (the stream is in order)."""

    def __init__(self, gpu: VirtualGpu) -> None:
        self.gpu = gpu
        self.at: float | None = None

    def record(self) -> None:
        self.at = self.gpu._enqueue("event", 0.0, self.gpu.launch_s)

    def query(self) -> bool:
        return self.at is not None and self.at <= self.gpu.host

    def synchronize(self) -> None:
        if self.at is not None:
            self.gpu.host = max(self.gpu.host, self.at) + self.gpu.sync_s

    def elapsed_time(self, end: VirtualEvent) -> float:
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready")
        return (end.at - self.at) * 1e3
