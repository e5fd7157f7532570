"""What the timing core may expect of real hardware, as bounds: asserted on a GPU (tests/test_gpu_timing.py) and
modelled on the virtual GPU with realistic launch costs and host hiccups (tests/test_held_sampler.py), so that the
first GPU run checks the same figures the model gives. docs/gpu_check.md lists each with the figure to read.

A correct GPU does not give exact figures here: a host is preempted now and then, a baked graph's hold follows
what its enqueue took (1.5 x plus the 20 us floor after any drop: 50 us on the realistic virtual GPU, 125-140 us
while a hiccup's drop still holds it), an empty
pair of events reads about a microsecond on Hopper (the timestamps' own device time), and the launch queue is
bounded in bytes of launch parameters, so its depth in launches differs by kernel and driver: it is found
(`queue_depth`), never assumed.
"""

from __future__ import annotations

from collections.abc import Callable

from suites.core.backends import Backend
from suites.core.samplers import MIN_HOLD_S, spin_cycles

# Samples a case may drop: the first hold's lengthening (a few) and one in twenty of those it keeps (host hiccups
# that outlast a hold).
DROPS_FLOOR = 4
DROPS_SHARE = 0.05
# A hold stays within this factor of the shortest hold: 1.5 x an enqueue of tens of microseconds plus the floor
# once it follows the host, twice one lengthened by a hiccup of 50-80 us while the last drop still holds it.
HOLD_FACTOR = 10.0
# An empty pair of events reads at most this (about 1 us on Hopper, 0 to 0.5 us on older GPUs).
EMPTY_WINDOW_BOUND_S = 3e-6
# The launch queue's depth in launches of a tiny kernel lies in this range (about 1024 on current GPUs).
QUEUE_DEPTH_RANGE = (64, 16384)
# A launch that blocks the host this long behind the spin found the queue full (a preemption is shorter).
BLOCKED_S = 5e-3


def drops_allowed(kept: int) -> int:
    """The samples a case that kept `kept` may have dropped on correct hardware."""
    return DROPS_FLOOR + int(DROPS_SHARE * kept)


def hold_allowed() -> float:
    return HOLD_FACTOR * MIN_HOLD_S


def queue_depth(backend: Backend, launch: Callable[[], None], most: int = QUEUE_DEPTH_RANGE[1],
                spin_s: float = 0.5) -> int | None:
    """How many launches of `launch` the stream takes behind a spin of `spin_s` before the host blocks (None: all
    `most` fit): the launch queue's depth for that kernel, found rather than assumed."""
    backend.synchronize()
    backend.sleep(spin_cycles(backend.spin_hz(), spin_s))
    try:
        for n in range(most):
            t0 = backend.now()
            launch()
            if backend.now() - t0 >= BLOCKED_S:
                return n
        return None
    finally:
        backend.synchronize()
