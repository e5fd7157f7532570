"""torch.profiler.profile for one recording cycle, which every trace of this project is (a case's trace; one call's
CPU memory is read from the raw events of torch.autograd's profiler, which it wraps: suites/core/memory.py).

torch 2.11's profile warns at every start that it "clears events at the end of each cycle" unless `acc_events` is
set: its check for a second cycle is true on the first. With one cycle nothing is cleared, so `acc_events=True`,
where the installed torch has the option, asks for what this project wants (the one cycle's events, kept), and a
user's run under 2.11 carries no warning about cycles it never has.
"""

from __future__ import annotations

import inspect

from torch.profiler import profile

_HAS_ACC_EVENTS = "acc_events" in inspect.signature(profile.__init__).parameters


def one_cycle(**options) -> profile:
    """`torch.profiler.profile(**options)` that keeps its one cycle's events (see the module docstring)."""
    return profile(**options, **({"acc_events": True} if _HAS_ACC_EVENTS else {}))
