"""What a run will cost before it runs: per case, measured where the last run of the same device identity timed it,
else reasoned from a model whose host-side parts are measured on this host.

`python -m suites plan` and the main job's first line and progress clock read these estimates. Measured: a case's
`case_s` in the last results of the device identity (its build, inputs, measurement, check, observers), plus
pytest's own time per case measured here, as gpu_check learns its steps' times. Reasoned, for a case with no such
record (a CPU planning for a GPU, a new case):

- the device time of one call: the case's FLOPs at `EFFICIENCY` of the target's datasheet peak for its dtype, or
  its bytes at that share of the memory bandwidth, whichever is longer, and at least `KERNEL_FLOOR_S`;
- the host's enqueue time of one call: `LAUNCH_S` per kernel it launches (`kernels`), plus `AUTOGRAD_S` for a
  backward pass; a call whose enqueue is longer is host-bound;
- the samples: the profile's rule met at its least (`min_samples` samples of at least `min_sample_s`, `min_time_s`
  of device time, or on the wall clock where the rule allows it), after `warmup_s`; a case that does not reach
  the target in that time runs up to `timeout_s`, which the model does not know and a measured estimate does;
- the inputs: their elements drawn here (`randn_s_per_element`, measured) once per shape, copied to the device at
  `H2D_BYTES_PER_S`; the check: one more call, and its FLOPs again in float64 at `EFFICIENCY` of the FP64 peak,
  once per group of cases that share the reference (`Case.reuse_group`);
- a training step (`kind` step): the model's FLOPs at `STEP_MFU` of the peak, sampled as an op is, plus building
  the model (`MODEL_BUILD_S`), `COMPILE_S` when compiled, and the device-busy profile of a few steps after;
  a largest-batch search: its tries (doubling, then bisection to 5 %) at the batch `assumed_max_batch` reasons
  from the case's `batch_memory` (its FLOPs and bytes per sample, resident model, limit and cap), and a point of
  the batch sweep above that batch is out of memory as it builds;
- a correctness experiment (`kind` check) `CHECK_S`, a case that needs torchrun `UNSUPPORTED_S`, and pytest's own
  time per case (`pytest_s_per_case`, measured).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from suites.core.cases import Case
from suites.core.precision import DTYPES
from suites.core.stopping import StopRule

EFFICIENCY = 0.5  # share of a datasheet peak an op's kernels reach (large gemms 0.7-0.8, attention 0.4-0.6)
STEP_MFU = 0.35  # model FLOP utilization of a training step
KERNEL_FLOOR_S = 4e-6  # the shortest kernel (launch latency on the device)
LAUNCH_S = 8e-6  # host time per kernel launched from Python through torch's dispatcher
AUTOGRAD_S = 40e-6  # the autograd engine's own time per torch.autograd.grad
H2D_BYTES_PER_S = 10e9  # a copy from pageable host memory
MODEL_BUILD_S = 3.0  # a model built on the device and stepped twice (its optimizer state)
COMPILE_S = 60.0  # torch.compile of GPT-2 124M or ResNet-50, cold (Inductor, no autotuning)
BUSY_STEPS = 5  # steps profiled after the timing for the device-busy time (suites/observers/busy.py)
CHECK_S = 2.0  # a numerics experiment: a few steps or casts, run once
UNSUPPORTED_S = 0.01  # a case refused before it builds (it needs torchrun, a GPU feature)
SEARCH_TRIES_BISECT = 5  # bisection steps to 5 % of an answer in the hundreds or thousands


@dataclass(frozen=True)
class Target:
    """The device planned for: its kind and name, datasheet peak FLOP/s per dtype and of float64, bandwidth in
    bytes/s, memory in bytes."""

    kind: str
    name: str
    flops: Mapping[str, float]
    fp64_flops: float
    bandwidth: float
    memory: float


@dataclass(frozen=True)
class HostCosts:
    """The host-side parts of the model, measured on this host."""

    randn_s_per_element: float
    pytest_s_per_case: float

    @classmethod
    def measure(cls, pytest_s_per_case: float) -> HostCosts:
        """Time a seeded CPU draw of 4 M elements here (the op suites' inputs are drawn so)."""
        gen = torch.Generator().manual_seed(0)
        torch.randn(1024, generator=gen)
        start = time.perf_counter()
        torch.randn(4 * 2**20, generator=gen)
        return cls((time.perf_counter() - start) / (4 * 2**20), pytest_s_per_case)


def kernels(case: Case) -> int:
    """Kernels one call launches, as the suites' ops do: a gemm or convolution one (three with its backward),
    naive attention five (its matmuls, scale, mask, softmax; fifteen with the backward), an SDPA kernel one
    (three), a training step about ten per layer-op it runs (counted from its FLOPs elsewhere: one here)."""
    backward = case.params.get("pass") == "fwd_bwd"
    if case.suite == "attention" and case.params.get("impl") in ("naive", "math"):
        return 15 if backward else 5
    return 3 if backward else 1


def call_seconds(case: Case, target: Target) -> float:
    """Device seconds of one call: FLOPs or bytes at EFFICIENCY of the peaks, never under KERNEL_FLOOR_S per kernel."""
    dtype = case.peak_dtype or case.params.get("dtype", "float32")
    flops = (case.flops or 0) / (EFFICIENCY * target.flops.get(dtype, target.flops["float32"]))
    moved = (case.bytes or 0) / (EFFICIENCY * target.bandwidth)
    return max(flops, moved, KERNEL_FLOOR_S * kernels(case))


def sampling_seconds(call_s: float, enqueue_s: float, rule: StopRule, cold_flush_s: float = 0.0) -> float:
    """Wall seconds of warm-up, calibration and the samples of a rule met at its least."""
    per_call_device = call_s + cold_flush_s
    per_call_wall = max(per_call_device, enqueue_s)  # held samples: the device waits for the host's enqueue
    sample_device = max(rule.min_sample_s, per_call_device)
    device_needed = max(rule.min_time_s, rule.min_samples * sample_device)
    wall = device_needed * per_call_wall / per_call_device
    if rule.min_time_on_wall:
        wall = min(wall, max(rule.min_time_s, rule.min_samples * sample_device * per_call_wall / per_call_device))
    calibration = 0.0 if per_call_wall >= rule.min_sample_s else 4 * rule.min_sample_s  # trial batches
    warm_up = max(rule.warmup_s, 2 * per_call_wall)
    return warm_up + calibration + max(min(rule.timeout_s, wall), sample_device * per_call_wall / per_call_device)


def input_elements(case: Case) -> int:
    """Elements of the random inputs a case draws (attention q, k, v and a grad_output; conv x, w and one)."""
    p = case.params
    if case.suite == "attention":
        each = math.prod(int(p[k]) for k in ("batch", "heads", "seq", "head_dim"))
        return each * (4 if p.get("pass") == "fwd_bwd" else 3)
    if case.suite in ("conv", "matmul") and case.bytes:
        itemsize = DTYPES[p.get("dtype", "float32")].itemsize
        return int(case.bytes / itemsize / (3 if p.get("pass") == "fwd_bwd" else 1))
    return 0


def assumed_max_batch(case: Case, target: Target) -> int:
    """The largest batch a case's memory reasons to (`Case.batch_memory`): what is left of the limit (the case's
    for the target's device type, else the device's memory) after the resident model, over the bytes per sample,
    with a tenth kept for the allocator's rounding and workspaces; never above the search's cap."""
    memory = case.batch_memory
    limit = memory.limits.get(target.kind, target.memory)
    return max(0, min(memory.cap, int((0.9 * limit - memory.resident_bytes) / memory.bytes_per_sample)))


def step_seconds(case: Case, target: Target) -> float:
    """Seconds of one training step: its FLOPs at STEP_MFU of the peak of its dtype."""
    dtype = case.peak_dtype or "float32"
    return max(1e-3, (case.flops or 0.0) / (STEP_MFU * target.flops.get(dtype, target.flops["float32"])))


def reasoned(case: Case, rule: StopRule, target: Target, host: HostCosts, drawn: set) -> float:
    """A case's seconds from the model (module docstring). `drawn` holds the input shapes drawn and the
    references computed so far in the run: each is made once (suites/core/reuse.py)."""
    if case.suite in ("collectives",) or case.params.get("strategy") in ("ddp", "fsdp"):
        return UNSUPPORTED_S  # needs torchrun: refused in a single process
    if case.kind == "check":
        return CHECK_S
    if target.kind == "cpu" and (case.cold or case.graph or case.params.get("dtype") in ("tf32", "float8_e4m3fn")):
        return UNSUPPORTED_S
    if case.refused_on is not None and case.refused_on(target.kind):
        return UNSUPPORTED_S
    if case.kind == "step":
        return step_case_seconds(case, rule, target)
    call_s = call_seconds(case, target)
    backward = case.params.get("pass") == "fwd_bwd"
    enqueue = 0.0 if case.graph else LAUNCH_S * kernels(case) + (AUTOGRAD_S if backward else 0.0)
    flush = 25e-6 if case.cold else 0.0
    seconds = sampling_seconds(call_s, enqueue, rule, flush)
    key = (case.suite, case.params.get("shape"), case.params.get("head_dim"), backward)
    elements = input_elements(case)
    if key not in drawn:
        drawn.add(key)
        seconds += elements * host.randn_s_per_element
    if target.kind == "cuda":
        seconds += elements * 4 / H2D_BYTES_PER_S
    reference = (case.flops or 0) / (EFFICIENCY * target.fp64_flops)
    if case.reuse_group is not None:  # computed once for the cases of its group (suites/core/reuse.py)
        reference = 0.0 if ("reference", case.reuse_group) in drawn else reference
        drawn.add(("reference", case.reuse_group))
    return seconds + 4 * call_s + reference  # the prime, a probe and the check's calls, the float64 reference


def step_case_seconds(case: Case, rule: StopRule, target: Target) -> float:
    """A training step: build, compile when asked, samples of the step, the busy profile; a search's tries."""
    compiled = case.params.get("compile") == "on" or "compiled" in case.id
    if case.batch_memory is not None and case.params.get("lever") == "max_batch":
        largest = assumed_max_batch(case, target)
        per_sample = _per_sample_seconds(case, target)
        doubling = [2**k for k in range(max(largest, 1).bit_length() + 1)]  # the last one fails
        tries = [*doubling, *[largest] * (SEARCH_TRIES_BISECT if largest > 20 else largest.bit_length())]
        search = sum(MODEL_BUILD_S + 2 * per_sample * b for b in tries)
        step = per_sample * largest
        return search + MODEL_BUILD_S + sampling_seconds(step, 0.0, rule) + BUSY_STEPS * step
    if case.batch_memory is not None and int(case.params["batch"]) > assumed_max_batch(case, target):
        return MODEL_BUILD_S  # out of memory as it builds: a result, at the cost of the build
    step = step_seconds(case, target)
    return (MODEL_BUILD_S + (COMPILE_S if compiled else 0.0) + sampling_seconds(step, 0.0, rule)
            + BUSY_STEPS * step)


def _per_sample_seconds(case: Case, target: Target) -> float:
    """Seconds per sample of a step: the FLOPs per sample of `Case.batch_memory` at STEP_MFU of the dtype's peak."""
    peak = target.flops.get(case.peak_dtype or "float32", target.flops["float32"])
    return case.batch_memory.flops_per_sample / (STEP_MFU * peak)
