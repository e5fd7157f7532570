"""The clocks and CUDA primitives timing relies on (the host clock, synchronize, the spin, events, the L2 flush,
graph capture, the allocator's counters), behind a `Backend`: torch's by default (`TorchBackend`), so that a model
of stream and event semantics can stand in for a GPU in tests (tests/virtual_gpu.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import torch


class Event(Protocol):
    """A CUDA event with timing (torch.cuda.Event's methods that the sampler uses)."""

    def record(self) -> None: ...

    def query(self) -> bool: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: Event) -> float: ...  # milliseconds


class Backend(Protocol):
    """The clocks and CUDA primitives timing relies on: the host clock, synchronize, the stream-holding spin,
    events, the L2 flush, graph capture, the allocator's counters. `TorchBackend` is the real one; a model of their
    semantics stands in for a GPU in tests."""

    def now(self) -> float: ...  # host seconds

    def synchronize(self) -> None: ...  # waits for all the work this process started, on every device it uses

    def spin_hz(self) -> float: ...  # the clock at which `sleep` cycles are counted: at least the real SM clock

    def sleep(self, cycles: int) -> None: ...  # enqueue a kernel that spins for `cycles`

    def event(self) -> Event: ...

    def l2_flush(self) -> Callable[[], None]: ...  # enqueues a write that evicts the L2; its buffer made once

    def capture_graph(self, fn: Callable[[], object], reps: int) -> Callable[[], None]: ...

    def memory_allocated(self) -> int: ...  # bytes held by tensors on the device

    def max_memory_allocated(self) -> int: ...  # their peak since `reset_peak_memory`

    def reset_peak_memory(self) -> None: ...


# The fastest SM clock any CUDA GPU runs at. _sleep spins for clock cycles; converting seconds at a clock at least
# as high as the real one makes the hold at least as long as asked, whatever the clock does under a power cap.
_FASTEST_CLOCK_HZ = 3.0e9


class TorchBackend:
    """torch.cuda on a CUDA device, the host clock alone on a CPU (where only `now` and `synchronize` are used)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._flush: Callable[[], None] | None = None

    def now(self) -> float:
        return time.perf_counter()

    def synchronize(self) -> None:
        """Every stream of the run's device, and of any other device this process has a context on: a callable
        that works on another device is waited for too, so a wall-clock sample holds its work."""
        if self.device.type == "cuda":
            for index in _devices_in_use(self.device):
                torch.cuda.synchronize(index)

    def spin_hz(self) -> float:
        clock_khz = getattr(torch.cuda.get_device_properties(self.device), "clock_rate", 0)
        return clock_khz * 1e3 if clock_khz else _FASTEST_CLOCK_HZ

    def sleep(self, cycles: int) -> None:
        torch.cuda._sleep(cycles)

    def event(self) -> Event:
        return torch.cuda.Event(enable_timing=True)

    def l2_flush(self) -> Callable[[], None]:
        """Evicts the GPU's L2 by writing a buffer twice its size (random values: a memset of zeros may be
        compressed by the memory system). The buffer is made on the first call and kept by the backend, so that a
        caller can make it before a case's peak-memory window opens (suites/core/runner.py)."""
        if self._flush is None:
            l2_bytes = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 64 * 2**20
            buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=self.device)
            self._flush = lambda: buffer.random_(0, 256)
        return self._flush

    def capture_graph(self, fn: Callable[[], object], reps: int) -> Callable[[], None]:
        """A CUDA graph of `reps` back-to-back calls; replaying it removes per-launch CPU overhead."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        return graph.replay

    def memory_allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0

    def max_memory_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else 0

    def reset_peak_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)


def _devices_in_use(device: torch.device) -> list[int]:
    """The run's device and every other CUDA device this process has a context on (asking creates none: torch's
    own tests of lazy initialisation ask so)."""
    own = device.index if device.index is not None else torch.cuda.current_device()
    others = range(torch.cuda.device_count())
    return [own, *(i for i in others if i != own and torch._C._cuda_hasPrimaryContext(i))]
