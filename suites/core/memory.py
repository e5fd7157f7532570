"""Memory around a case: its peak on the CPU, from torch.profiler's memory events, and handing memory back.

On CUDA the runner reads the caching allocator's peak; the CPU allocator keeps no such counter, but the profiler
with `profile_memory=True` records every allocation and free (`[memory]` events with signed byte counts) on the
calling thread and on the intra-op worker threads. The peak of their running sum over one call is the memory the
call needed above what existed before it (its inputs). It is taken in a call of its own, outside the timed window.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

import torch
from torch.autograd import DeviceType
from torch.autograd.profiler import profile


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Most bytes held at once by the allocations made during one call of `fn` (its result is dropped inside).

    The profiler is torch.autograd's, which torch.profiler.profile wraps: its raw events are all this reads, and
    it leaves them raw. torch.profiler's, kept for one cycle (suites/core/profiler.py), turns every event into a
    FunctionEvent tree as it stops: 0.4 s a call of the tiny ResNet's or GPT's training step on a 2-core host
    (0.05 s left raw), at every case and every try of a batch-size search on a CPU, for a tree nothing reads."""
    with profile(use_cpu=True, use_kineto=True, profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() == DeviceType.CPU), key=lambda e: e.start_ns())
    return max(accumulate((e.nbytes() for e in events), initial=0))


def cpu_memory_info(fn: Callable[[], object], device: torch.device) -> dict:
    """`peak_mem_bytes` of one call on the CPU; nothing elsewhere (the runner reads CUDA's allocator itself)."""
    return {"peak_mem_bytes": cpu_peak_bytes(fn)} if device.type == "cpu" else {}


@dataclass
class Frozen:
    """How many modules were imported when the run last froze its long-lived objects (0: the run froze nothing)."""

    modules: int = 0


FROZEN = Frozen()


def freeze_long_lived() -> None:
    """Collect once, then move every object alive now (torch, pytest, the collected cases: the run's long-lived
    objects) out of the collector's sight (`gc.freeze`), so that each `release` after a case walks only what was
    made since: a full collection over a process that imported torch and collected a thousand cases walks 200 000
    objects (0.15-0.45 s on a 2-core host; 2-4 min over the full sweep), one after `freeze` walks the case's
    own. What `release` frees is the same: cyclic garbage is made by the cases, after the freeze.

    A host that froze its own heap before the run (a test session, a server that forks workers) keeps the collector
    as it set it: the run freezes nothing and so thaws nothing, since `gc.unfreeze` cannot give back the run's
    objects alone; what the host froze is out of the collections' sight already."""
    if gc.get_freeze_count():
        return
    gc.collect()
    freeze_survivors()


def freeze_survivors() -> None:
    """Freeze what is alive now (after a collection), and note how many modules were imported then."""
    gc.freeze()
    FROZEN.modules = len(sys.modules)


def thaw() -> None:
    """Give what the run froze back to the collector (the end of a run: the plugin is a guest in the process); a
    host's own freeze stays (`freeze_long_lived`)."""
    if FROZEN.modules:
        gc.unfreeze()
        FROZEN.modules = 0


def release(device: torch.device) -> None:
    """Hand back what a case, a try or a searched shape held, so that the next starts from the same free memory
    and its peak is its own: collect what reference cycles hold (a failed call's traceback frames keep its
    tensors; after `freeze_long_lived` a collection walks only what the cases made), then on CUDA wait for the
    device and return the caching allocator's blocks.

    A case that imported modules (the profiler, autograd's engine, conv's and attention's kernels, Inductor: 795
    modules and 117 000 objects after the first quick conv case on CPU) made objects that live as long as the
    run; they are frozen too, after the collection, or every later collection walks them again (65 ms a case
    there, under 0.5 ms once frozen). That happens at the few releases after a first import (torch._dynamo and sympy
    with the first case, Inductor with the first compiled one): what else survived those releases (a compiled
    case's caches until the next `torch._dynamo.reset`) is out of the collector's sight until the run thaws it."""
    gc.collect()
    if FROZEN.modules and len(sys.modules) > FROZEN.modules:
        freeze_survivors()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
