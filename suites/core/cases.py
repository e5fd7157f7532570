"""What a benchmark case is: its stable id, its axes, its FLOP and byte model, and how to build its workload."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import torch


class Unsupported(Exception):
    """This device or build cannot run the case; the message says why, and the case is skipped with it."""


@dataclass
class Workload:
    """A built case: `fn` is the timed work; `error_rel` computes the relative error against float64; `figures`
    are the suite's own fields of the case's entry (docs/results.md), which the runner adds to what it measured."""

    fn: Callable[[], object]
    error_rel: Callable[[], float] | None = None
    figures: dict = field(default_factory=dict)
    # Fields computed from the measured median seconds per call and the peak FLOP/s (None when unknown), e.g.
    # tokens/s and MFU; called once after the measurement.
    rates: Callable[[float, float | None], dict] | None = None


@dataclass(frozen=True)
class BatchMemory:
    """What the plan's model (suites/core/estimate.py) reasons from for a training step whose batch runs into
    memory (the batch sweep's points, the largest-batch search), where the case's FLOP model says nothing of
    memory: a step's FLOPs per sample (a search case has no `flops`: its batch is found as it runs), the bytes a
    sample and the resident model (weights, gradients, AdamW moments) hold, the search's cap, and the memory limit
    a try is checked against per device type (absent: the device's own memory)."""

    flops_per_sample: float
    bytes_per_sample: float
    resident_bytes: float
    cap: int
    limits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One point of a suite's sweep. `build` allocates random inputs on a device and may raise Unsupported."""

    suite: str
    id: str
    params: dict[str, str]
    build: Callable[[torch.device], Workload] = field(compare=False, repr=False)
    flops: float | None = None
    bytes: float | None = None
    peak_dtype: str | None = None  # which peak FLOP/s `pct_peak` divides by
    tolerance: float | None = None
    tf32: bool | None = False  # the float32 mode (suites.core.precision.float32_mode); None: the caller's
    cold: bool = False
    graph: bool = False
    # How it is timed (suites/core/timing.py): `op` in device time with the host held out, `step` in wall time per
    # training step, `check` run once as a correctness experiment and never sampled.
    kind: str = "op"
    # Cases that check against one float64 reference of identical inputs (attention's implementations at one point
    # and dtype, a conv layer's two memory formats): it is computed once for them (suites/core/reuse.py).
    reuse_group: Hashable | None = field(default=None, compare=False)
    batch_memory: BatchMemory | None = field(default=None, compare=False)  # what the plan reasons a batch from
    # Why every device of a type (`cpu`, `cuda`) refuses the case before it builds, from its settings alone (a
    # compiled step on a CPU in the quick profile, pinned memory without CUDA): the plan counts it as refused.
    refused_on: Callable[[str], str | None] | None = field(default=None, compare=False, repr=False)


def require_cuda_timing(device: torch.device) -> None:
    """A case timed cold (L2 flushed before every call) or as a CUDA graph (`Case.cold`, `Case.graph`) needs CUDA:
    elsewhere it would time what its warm, eager twin times, so it is unsupported there."""
    if device.type != "cuda":
        raise Unsupported("cold L2 (a flush before every call) and CUDA-graph replay are CUDA-only: on "
                          f"{device.type} the case would time what its warm, eager twin times")


def align_class(*dims: int) -> str:
    """`64` when every dimension is a multiple of 64, `8` when of 8, else `odd`: the `align` axis (docs/results.md)."""
    if all(d % 64 == 0 for d in dims):
        return "64"
    if all(d % 8 == 0 for d in dims):
        return "8"
    return "odd"


def select_dtypes(cases: list[Case], dtypes: list[str] | None) -> list[Case]:
    """The cases whose `dtype` param is in `dtypes` (all when None)."""
    return [c for c in cases if dtypes is None or c.params.get("dtype") in dtypes]
