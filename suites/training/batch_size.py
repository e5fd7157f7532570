"""Batch-size scaling of the training step, and the largest batch that fits in memory (group `train_step`).

Sweep (`lever: batch`): the GPT and the CNN at amp_bf16 and fp32 over batches in powers of two; each case
records its step time (timed by the core), samples/s and tokens/s, and `step_peak_bytes`: the most memory the
model, optimizer state, batch and activations held at once while the model was built and stepped twice (the
second step runs with the optimizer state every later step has). A batch whose peak does not fit is recorded as
`oom`, so the sweep ends where memory does, and the point where throughput stops growing is visible.

Search (`lever: max_batch`): the largest batch that fits, found by doubling from 1 until a try fails and then
bisecting between the last fit and the first failure, at most MAX_TRIES tries and never above the profile's cap.
An out-of-memory error is an answer, not a failure; every try builds its own model and releases its memory
before the next. The step is then timed at the batch found, or, when that runs out of memory as it is built
again, at the next largest batch that fit (`timed_batch`, with the reason): the row is never lost at the
boundary. Reported per precision with activation checkpointing off and on: the memory lever in samples.

Memory: on CUDA the caching allocator's peak, and a try fits when it raises no OutOfMemoryError. On the CPU,
exhausting the machine's RAM is no safe test, so the limit is a budget (`--bench-mem-budget`, default
the profile's `cpu_budget`) checked against the peak that torch.profiler's memory events measure for each try
(suites/core/memory.py). On CUDA a try must also stay under the budget when there is one: the option's, else in the
full profile 40 GiB (`budget_for`: docs/batch_size.md says why), and every case records it (`mem_budget_bytes`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from suites.core import memory
from suites.core.cases import BatchMemory, Case, Workload
from suites.core.defaults import CUDA_SEARCH_BUDGET
from suites.core.memory import cpu_memory_info, cpu_peak_bytes
from suites.core.profiles import Profile
from suites.core.runner import at_memory_edge, first_line, is_oom
from suites.training.model_spec import ModelSpec
from suites.training.recipe import PEAK_DTYPE, TrainStep, make_optimizer, make_step

SUITE = "train_step"
PRECISIONS = ("fp32", "amp_bf16")
MAX_TRIES = 20  # an answer below 1024 needs at most 11 doublings and 9 bisections
# The bisection stops once the first failure is within this share above the last fit: on a 141 GB GPU the answer is
# in the hundreds or thousands, where the last tries of an exact bisection (each a model built and stepped twice
# at the largest batches, seconds each) move it by a percent or less; `max_batch_exact` says which it is.
BISECT_TOLERANCE = 0.05

@dataclass(frozen=True)
class ModelSweep:
    """One model of a profile: its sweep in powers of two up to `max_sweep`, and whether its largest batch is
    searched."""

    spec: ModelSpec
    max_sweep: int
    search: bool


@dataclass(frozen=True)
class SweepLimits:
    """What a profile sweeps and searches, and within which limits."""

    plans: tuple[ModelSweep, ...]
    search_cap: int  # the search never tries a larger batch
    cpu_budget: int  # the CPU's memory limit when --bench-mem-budget is not given


PROFILES: dict[Profile, SweepLimits] = {
    # A 2-core CPU: a budget that stops the tiny GPT near 10-20 samples (about 1.3 MiB each in fp32), so its sweep
    # and four searches take about a minute; the CNN's convolutions are slow there (bfloat16 has no CPU
    # instructions on most x86), so it is swept to 8 and searched only in the full profile.
    Profile.QUICK: SweepLimits((ModelSweep(ModelSpec("gpt", "tiny"), 16, True),
                                ModelSweep(ModelSpec("cnn", "tiny"), 8, False)), search_cap=256,
                               cpu_budget=16 * 2**20),
    Profile.FULL: SweepLimits((ModelSweep(ModelSpec("gpt", "gpt2-124m"), 512, True),
                               ModelSweep(ModelSpec("cnn", "resnet50"), 1024, True)), search_cap=4096,
                              cpu_budget=16 * 2**30),
}


def budget_for(profile: str, budget: int | None, device: torch.device) -> int | None:
    """The memory limit a try is checked against: the option when given, else the CPU default, else (CUDA) in
    the full profile `defaults.CUDA_SEARCH_BUDGET` (40 GiB), in the quick one none beyond the device's memory."""
    if budget is not None:
        return budget
    if device.type == "cpu":
        return PROFILES[Profile(profile).sizes].cpu_budget
    return CUDA_SEARCH_BUDGET if Profile(profile).sizes is Profile.FULL else None


def batch_memory(spec: ModelSpec, precision: str, checkpoint: bool, profile: str, budget: int | None
                 ) -> BatchMemory:
    """What the plan reasons this model's batches from (suites/core/estimate.py; the cases measure it): FLOPs per
    sample (GPT: 6N + 12LHQT per token; a CNN: ResNet-50's 3 x 4.1 GFLOP at 224 px, scaled by its image area and
    width squared), a third more with checkpointing (the forward again); activation bytes per sample (GPT:
    Korthikanti et al.'s s h (34 + 5 a s / h) per layer in 16 bits, twice in float32, one layer's worth plus each
    layer's input with checkpointing, and the float32 logits and their gradient; a CNN: about 100 MB per 224-px
    image in float32 for ResNet-50, scaled alike, half in 16 bits, a third with checkpointing); the resident model
    at 16 bytes per parameter (float32 weights, gradients and two AdamW moments); the limits `budget_for` gives."""
    config, width = spec.config, 1 if precision != "fp32" else 2
    if spec.kind == "gpt":
        s, h, a, layers = config.block_size, config.n_embd, config.n_head, config.n_layer
        layer = s * h * (34 + 5 * a * s / h) * width
        per_sample = (layer + layers * s * h * 2 if checkpoint else layers * layer) + 2 * s * config.vocab_size * 4
        flops = spec.flops_per_sample() or 0.0
    else:
        scale = (config.image_size / 224) ** 2 * (config.width / 64) ** 2
        per_sample = 100e6 * scale * width / 2 * (0.3 if checkpoint else 1)
        flops = 3 * 2 * 4.1e9 * scale
    limits = {kind: limit for kind in ("cpu", "cuda")
              if (limit := budget_for(profile, budget, torch.device(kind))) is not None}
    return BatchMemory(flops * (4 / 3 if checkpoint else 1), per_sample, 16.0 * spec.n_params(),
                       PROFILES[Profile(profile).sizes].search_cap, limits)


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """The most memory held at once during `fn` above what was held before it: the allocator's peak on CUDA,
    profiler memory events on the CPU. There the garbage collector is paused for the call, so that cyclic
    garbage of an earlier try freed inside the window cannot lower the figure: the same try, the same peak."""
    if device.type != "cuda":
        paused = gc.isenabled()
        gc.disable()
        try:
            return cpu_peak_bytes(fn)
        finally:
            if paused:
                gc.enable()
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


@dataclass
class ReadyStep:
    """A model, its optimizer and a batch on the device: calling it runs one recipe step."""

    step: TrainStep
    inputs: torch.Tensor
    targets: torch.Tensor

    def __call__(self) -> torch.Tensor:
        return self.step(self.inputs, self.targets)


def prepare(spec: ModelSpec, precision: str, checkpoint: bool, batch: int, device: torch.device) -> ReadyStep:
    """Build the model, optimizer and batch, and step twice (the second step holds the optimizer state)."""
    model = spec.build(device, checkpoint)
    inputs, targets = spec.batch(batch, device)
    trainee = ReadyStep(make_step(model, make_optimizer(model), precision, device=device), inputs, targets)
    trainee()
    trainee()
    return trainee


@dataclass
class Fit:
    """One try of a batch: whether it fit, its measured peak, and why not when it did not."""

    batch: int
    fits: bool
    peak_bytes: int | None
    reason: str | None = None


def over_budget(peak: int, budget: int | None) -> str | None:
    if budget is not None and peak > budget:
        return f"out of memory: peak {peak / 2**20:.1f} MiB exceeds the {budget / 2**20:.1f} MiB budget"
    return None


def try_batch(spec: ModelSpec, precision: str, checkpoint: bool, batch: int, device: torch.device,
              budget: int | None) -> Fit:
    """Build and step at `batch` from nothing; an out-of-memory error or a peak over the budget is a `False`, and so
    is cuDNN's failure at the memory edge (`at_memory_edge`) above batch 1: the search tries a batch above 1 only
    once a smaller one fit, so memory is what changed. What the try allocated is released before it returns, so
    the next try starts from the same memory."""
    try:
        peak = peak_bytes(lambda: prepare(spec, precision, checkpoint, batch, device), device)
    except Exception as exc:
        edge = batch > 1 and not is_oom(exc) and at_memory_edge(exc)
        if not (is_oom(exc) or edge):
            raise
        said = str(exc).strip().splitlines()[0]
        fit = Fit(batch, False, None, f"taken as out of memory at the memory edge (a smaller batch fit): {said}"
                  if edge else said)
    else:
        reason = over_budget(peak, budget)
        fit = Fit(batch, reason is None, peak, reason)
    memory.release(device)
    return fit


@dataclass
class Search:
    """The largest batch that fit (0: not even one sample), every try in order, and whether the cap stopped it."""

    largest: int
    tries: list[Fit] = field(default_factory=list)
    capped: bool = False

    @property
    def exact(self) -> bool:
        """True when the batch after `largest` was tried and failed (or the cap was reached)."""
        return self.capped or any(not t.fits and t.batch == self.largest + 1 for t in self.tries)


def largest_batch(fits: Callable[[int], Fit], cap: int, max_tries: int = MAX_TRIES,
                  tolerance: float = BISECT_TOLERANCE) -> Search:
    """Doubling from 1 until a try fails or `cap` is reached, then bisection between the last fit and the first
    failure until the failure is within `tolerance` of the fit (exact below 1 / tolerance: 20 at 5 %); at most
    `max_tries` tries."""
    search = Search(0)
    low, high, batch = 0, None, 1
    while batch <= cap and len(search.tries) < max_tries:
        search.tries.append(fit := fits(batch))
        if not fit.fits:
            high = batch
            break
        low, batch = batch, batch * 2
    if high is None:
        search.largest, search.capped = low, batch > cap
        return search
    while high - low > max(1, int(low * tolerance)) and len(search.tries) < max_tries:
        mid = (low + high) // 2
        search.tries.append(fit := fits(mid))
        low, high = (mid, high) if fit.fits else (low, mid)
    search.largest = low
    return search


def _workload(spec: ModelSpec, precision: str, checkpoint: bool, batch: int, device: torch.device,
              budget: int | None, info: dict) -> Workload:
    """Build at `batch` with its peak measured, refuse it when over the budget, and time its step."""
    built: list[ReadyStep] = []
    peak = peak_bytes(lambda: built.append(prepare(spec, precision, checkpoint, batch, device)), device)
    reason = over_budget(peak, budget)
    if reason:
        raise torch.OutOfMemoryError(reason)
    trainee = built[0]
    tokens = spec.tokens_per_sample
    # peak_mem_bytes, as the runner reports it on CUDA: one step's own peak above the resident weights and state
    info = info | cpu_memory_info(trainee, device) | {"step_peak_bytes": peak, "samples_per_step": batch}
    if budget is not None:
        info["mem_budget_bytes"] = budget
    if tokens:
        info["tokens_per_step"] = batch * tokens

    def rates(median_s: float, peak_flops: float | None) -> dict:
        out = {"samples_per_s": batch / median_s}
        if tokens:
            out["tokens_per_s"] = batch * tokens / median_s
        flops = spec.flops_per_sample()
        if flops and peak_flops:
            out["mfu"] = flops * batch / median_s / peak_flops
        return out

    return Workload(fn=trainee, figures=info, rates=rates)


def timed_where_it_fits(found: Search, build: Callable[[int], Workload], release: Callable[[], None]) -> Workload:
    """The workload at the largest batch the search found; when that batch does not fit as it is built again (on
    CUDA the allocator's free memory is not the search's: fragmentation, another process), the next largest one
    that fit in the search, with `timed_batch` and `timed_batch_reason` saying so. The row is never lost to an
    out-of-memory error at the boundary; only when no batch that fit fits again is the case `oom`."""
    refused: list[str] = []
    for batch in sorted({t.batch for t in found.tries if t.fits}, reverse=True):
        try:
            workload = build(batch)
        except Exception as exc:
            if not is_oom(exc):
                raise
            refused.append(f"{batch} ({first_line(exc)})")
            workload = None
        if workload is None:
            release()  # outside the except: its traceback's frames held the failed build's tensors until here
            continue
        workload.figures["timed_batch"] = batch
        if refused:
            workload.figures["timed_batch_reason"] = (
                f"batch {', '.join(refused)} fit in the search but not when built again; timed at {batch}, the "
                f"largest batch that fit in the search and again")
        return workload
    raise torch.OutOfMemoryError(f"out of memory: no batch that fit in the search fits again: {'; '.join(refused)}")


def _params(spec: ModelSpec, lever: str, precision: str, checkpoint: bool) -> dict[str, str]:
    return {"model": spec.name, "lever": lever, "precision": precision, "dtype": PEAK_DTYPE[precision],
            "checkpoint": "block" if checkpoint else "off"}


def sweep_case(spec: ModelSpec, precision: str, batch: int, profile: str, budget: int | None) -> Case:
    """One batch of the sweep (activation checkpointing off)."""
    def build(device: torch.device) -> Workload:
        return _workload(spec, precision, False, batch, device, budget_for(profile, budget, device), {})

    flops = spec.flops_per_sample()
    return Case(suite=SUITE, id=f"{SUITE}/batch/{spec.name}/{precision}/{batch}",
                params=_params(spec, "batch", precision, False) | {"batch": str(batch)}, build=build,
                flops=flops * batch if flops else None, peak_dtype=PEAK_DTYPE[precision], kind="step",
                batch_memory=batch_memory(spec, precision, False, profile, budget))


def search_case(spec: ModelSpec, precision: str, checkpoint: bool, profile: str, budget: int | None) -> Case:
    """The largest-batch search; its timed work is one step at the batch it found."""
    def build(device: torch.device) -> Workload:
        limit = budget_for(profile, budget, device)
        found = largest_batch(lambda b: try_batch(spec, precision, checkpoint, b, device, limit),
                              PROFILES[Profile(profile).sizes].search_cap)
        if found.largest == 0:
            raise torch.OutOfMemoryError(f"out of memory: not even a batch of 1 fits ({found.tries[0].reason})")
        info = {"max_batch": found.largest, "max_batch_exact": found.exact, "search_capped": found.capped,
                "search_tries": [asdict(t) for t in found.tries]}

        return timed_where_it_fits(found, lambda b: _workload(spec, precision, checkpoint, b, device, limit, info),
                                   lambda: memory.release(device))

    name = "block" if checkpoint else "off"
    return Case(suite=SUITE, id=f"{SUITE}/max_batch/{spec.name}/{precision}/checkpoint-{name}",
                params=_params(spec, "max_batch", precision, checkpoint), build=build,
                peak_dtype=PEAK_DTYPE[precision], kind="step",
                batch_memory=batch_memory(spec, precision, checkpoint, profile, budget))


def cases(profile: str, budget: int | None = None) -> list[Case]:
    """The sweep and the searches of a profile; `budget` is --bench-mem-budget in bytes (None: the default)."""
    plans = PROFILES[Profile(profile).sizes].plans
    sweeps = [sweep_case(plan.spec, p, 2**k, profile, budget) for plan in plans for p in PRECISIONS
              for k in range(plan.max_sweep.bit_length())]
    searches = [search_case(plan.spec, p, ckpt, profile, budget) for plan in plans if plan.search
                for p in PRECISIONS for ckpt in (False, True)]
    return sweeps + searches
