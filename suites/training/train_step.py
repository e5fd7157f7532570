"""The training-step suite: one optimizer step of a real model (the recipe of suites/training/recipe.py), with
each lever of the mixed-precision recipe switched one at a time, plus the recommended all-on combination.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.flop_counter import FlopCounterMode

from suites.core.cases import Case, Unsupported, Workload, align_class
from suites.core.memory import cpu_memory_info
from suites.core.precision import tf32_unsupported
from suites.core.profiles import Profile
from suites.training import param_bytes
from suites.training.data import EncodedImages, image_loader, token_batches
from suites.training.models import GPT, CNNConfig, GPTConfig, ResNet, gpt_flops_per_token
from suites.training.recipe import (
    PEAK_DTYPE,
    PRECISIONS,
    LossOf,
    MasterWeightsAdamW,
    TrainStep,
    make_optimizer,
    make_step,
    pair_loss,
    train,
)

# A baseline and one lever varied at a time, plus the recommended all-on combination (docs/train_step.md).
SUITE = "train_step"
SEED = 0


@dataclass(frozen=True)
class Levers:
    """Every setting of a case. The defaults are the baseline: the plain recipe with bfloat16 autocast."""

    precision: str = "amp_bf16"
    compile: bool = False
    optimizer: str = "foreach"
    checkpoint: bool = False
    accum: int = 1
    sync: bool = False
    vocab: str = "padded"  # GPT: padded to a multiple of 64, or GPT-2's raw vocabulary
    master_weights: bool = False  # GPT: bfloat16 weights with a float32 master copy in the optimizer
    memory_format: str = "contiguous"  # CNN
    num_workers: int | None = None  # CNN: None = batches already on the device, no DataLoader
    pin_memory: bool = False  # CNN


@dataclass(frozen=True)
class StepSizes:
    """Sizes of a profile: the models, their batches, and how many steps `loss_after_n` trains from the seed."""

    gpt: str
    gpt_batch: int
    cnn: str
    cnn_batch: int
    images: int  # size of the encoded image dataset
    steps: int
    lr: float
    cpu_compile_all: bool  # compile every precision on a CPU (inductor's C++ build is ~30 s per graph there)


PROFILES: dict[Profile, StepSizes] = {
    # lr high enough that 10 steps of the tiny GPT move the loss visibly
    Profile.QUICK: StepSizes("tiny", 8, "tiny", 16, images=256, steps=8, lr=3e-3, cpu_compile_all=False),
    Profile.FULL: StepSizes("gpt2-124m", 16, "resnet50", 64, images=512, steps=20, lr=6e-4, cpu_compile_all=True),
}

# (lever, label, settings): the GPT varies precision x compile (the must-show grid) and each other lever alone.
GPT_VARIANTS: list[tuple[str, str, Levers]] = [
    ("baseline", "amp_bf16-eager", Levers()),
    *[("precision", f"{p}-{'compiled' if c else 'eager'}", Levers(precision=p, compile=c))
      for p in PRECISIONS for c in (False, True) if (p, c) != ("amp_bf16", False)],
    ("optimizer", "fused", Levers(optimizer="fused")),
    ("checkpoint", "block", Levers(checkpoint=True)),
    ("accum", "4", Levers(accum=4)),
    ("sync", "item", Levers(sync=True)),
    ("vocab", "raw", Levers(vocab="raw")),
    ("master_weights", "bf16-fp32-master", Levers(master_weights=True)),
    ("all_on", "amp_bf16-compiled-fused", Levers(compile=True, optimizer="fused")),
]
CNN_VARIANTS: list[tuple[str, str, Levers]] = [
    ("baseline", "contiguous", Levers()),
    ("memory_format", "channels_last", Levers(memory_format="channels_last")),
    ("data", "workers0", Levers(num_workers=0)),
    ("data", "workers2", Levers(num_workers=2)),
    ("data", "workers2-pinned", Levers(num_workers=2, pin_memory=True)),
    ("all_on", "channels_last-compiled-fused-workers2-pinned",
     Levers(memory_format="channels_last", compile=True, optimizer="fused", num_workers=2, pin_memory=True)),
]


def support(levers: Levers, lever: str, profile: StepSizes, device: torch.device) -> str | None:
    """Why this device cannot run the settings, or None."""
    if levers.precision == "tf32" and (reason := tf32_unsupported(device)):
        return reason
    return refusal(levers, lever, profile, device.type)


def refusal(levers: Levers, lever: str, profile: StepSizes, kind: str) -> str | None:
    """Why every device of a type (`cpu`, `cuda`) refuses the settings, or None: known before there is a device,
    so the plan (suites/core/estimate.py) counts such a case as the refusal it is, not as a compile of a minute."""
    cuda = kind == "cuda"
    if levers.pin_memory and not cuda:
        return "pin_memory speeds host-to-GPU copies; without a CUDA device there is no copy to speed up"
    if levers.compile and not cuda and not profile.cpu_compile_all and lever != "all_on":
        return ("quick profile on CPU compiles only the all-on case: inductor's C++ build takes ~30 s per graph on "
                "a small CPU; --bench-profile full compiles every precision")
    return None


def optimizer_for(model: nn.Module, levers: Levers, lr: float) -> torch.optim.Optimizer:
    """The optimizer the levers ask for (fused or foreach AdamW, with or without a float32 master copy)."""
    try:
        if levers.master_weights:
            return MasterWeightsAdamW(model.parameters(), levers.optimizer, lr=lr)
        return make_optimizer(model, levers.optimizer, lr=lr)
    except RuntimeError as exc:  # e.g. fused AdamW on a device without a fused kernel
        raise Unsupported(f"AdamW {levers.optimizer}: {str(exc).splitlines()[0]}") from exc


def _dynamo_frames() -> int:
    """Frames TorchDynamo has compiled so far in this process; each recompilation adds one."""
    return torch._dynamo.utils.counters["frames"]["total"]


def counted_flops(step: TrainStep, *batch: object) -> int:
    """FLOPs of one forward and backward as torch.utils.flop_counter counts them (matmuls, convolutions and the
    attention kernels it has formulas for), including any recomputation by activation checkpointing."""
    with FlopCounterMode(display=False) as counter:
        step.forward(*batch).backward()
    return counter.get_total_flops()


def _cuda_memory(step: TrainStep, batch: tuple, device: torch.device) -> dict:
    """Allocator figures of one step: its peak (weights, state, activations, workspace), and the activations
    that remain between forward and backward (allocated after forward minus before)."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    step(*batch)
    torch.cuda.synchronize(device)
    info = {"step_peak_alloc_bytes": torch.cuda.max_memory_allocated(device)}
    step.optimizer.zero_grad(set_to_none=True)
    before = torch.cuda.memory_allocated(device)
    loss = step.forward(*batch)
    info["activation_alloc_bytes"] = torch.cuda.memory_allocated(device) - before
    del loss
    return info


@dataclass
class Trainee:
    """A model ready to train: its eager form, optimizer, the batches of the seeded run, the next timed batch
    (each a tuple of the step's arguments), and how its loss is computed."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    seed_batches: list[tuple]
    next_batch: Callable[[], tuple]
    samples: int
    tokens: int | None
    formula_flops: float | None
    loss_of: LossOf = pair_loss


def _seeded_run(step: TrainStep, trainee: Trainee, levers: Levers, device: torch.device) -> tuple[dict, int]:
    """Train the seeded steps: every step's loss, skipped steps and, compiled, what compilation cost.
    Returns the fields and Dynamo's frame count after the run (recompiles are counted from there)."""
    counters, frames_before = torch._dynamo.utils.counters, _dynamo_frames()
    hits_before = counters["inductor"]["fxgraph_cache_hit"]
    try:
        run = train(step, trainee.seed_batches)
    except torch._dynamo.exc.BackendCompilerFailed as exc:
        if device.type == "cpu":
            raise Unsupported(f"torch.compile failed on this CPU: {str(exc).splitlines()[0]}") from exc
        raise
    # every step's loss, not only the ends: a setting is judged against fp32 step by step (suites/training/advise.py)
    info: dict = {"loss_after_n": run.losses[-1], "loss_first": run.losses[0], "n_steps": len(run.losses),
                  "seeded_losses": list(run.losses), "scaler_skipped_steps": run.skipped_steps}
    frames = _dynamo_frames()
    if levers.compile:
        info["compile_s"] = run.first_step_s  # the first step's wall time: compilation plus one step
        info["compiled_frames"] = frames - frames_before
        # graphs inductor took from its on-disk cache (a warm cache makes compile_s far shorter than a cold one)
        info["compile_cache_hits"] = counters["inductor"]["fxgraph_cache_hit"] - hits_before
    return info, frames


def _memory_and_flops(eager: TrainStep, trainee: Trainee, device: torch.device) -> dict:
    """Bytes per parameter (after a step, before the next zero_grad), saved activations, the CUDA allocator's
    figures, and the counted FLOPs, all taken on the eager model outside the timed window."""
    batch = trainee.seed_batches[0]
    info = param_bytes.measure(trainee.model, eager.optimizer).figures()
    info["saved_activation_bytes"] = param_bytes.saved_activation_bytes(lambda: eager.forward(*batch))
    if device.type == "cuda":
        info |= _cuda_memory(eager, batch, device)
    info |= cpu_memory_info(lambda: eager(*batch), device)  # CPU: peak_mem_bytes of one step (CUDA: the runner's)
    info["flops_counted"] = counted = counted_flops(eager, *batch)
    if trainee.formula_flops:
        info |= {"flops_formula": trainee.formula_flops, "flops_ratio": counted / trainee.formula_flops}
    return info


def _rates(trainee: Trainee, counted: int, frames_seeded: int | None) -> Callable[[float, float | None], dict]:
    """Throughput, achieved FLOP/s and MFU from the median step time (MFU only where a peak is known), and the
    recompilations during the timed steps of a compiled model."""

    def rates(median_s: float, peak_flops: float | None) -> dict:
        out = {"samples_per_s": trainee.samples / median_s, "tflops_counted": counted / median_s / 1e12}
        if trainee.tokens:
            out["tokens_per_s"] = trainee.tokens / median_s
        if peak_flops and trainee.formula_flops:
            out["mfu"] = trainee.formula_flops / median_s / peak_flops
        if peak_flops:
            out["mfu_counted"] = counted / median_s / peak_flops
        if frames_seeded is not None:
            out["recompiles"] = _dynamo_frames() - frames_seeded
        return out

    return rates


_COMPILER_WARMED: set[str] = set()


def warm_compiler(device: torch.device) -> float | None:
    """Compile and run a tiny function once per process and device type, so that the one-time start-up of
    Dynamo, Inductor and Triton (imports, worker pools, the first kernel build) is not charged to the first
    compiled case's `compile_s`; returns its seconds when this call paid them, else None."""
    if device.type in _COMPILER_WARMED:
        return None
    start = time.perf_counter()
    torch.compile(lambda x: torch.relu(x) * 2)(torch.randn(64, device=device))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    _COMPILER_WARMED.add(device.type)
    return time.perf_counter() - start


def workload(trainee: Trainee, levers: Levers, device: torch.device) -> Workload:
    """The seeded run and the measurements outside the timed window, then the timed step."""
    startup = warm_compiler(device) if levers.compile else None
    if levers.compile:
        torch._dynamo.reset()  # a fresh compile per case: compile_s and recompiles are this case's own
    stepped = torch.compile(trainee.model) if levers.compile else trainee.model
    step = make_step(stepped, trainee.optimizer, levers.precision, device=device, accum=levers.accum,
                     sync=levers.sync, loss_of=trainee.loss_of)
    info, frames_seeded = _seeded_run(step, trainee, levers, device)
    if startup is not None:
        info["compile_startup_s"] = startup  # paid once per process, before this case's compile_s
    info |= {"n_params": sum(p.numel() for p in trainee.model.parameters()), "samples_per_step": trainee.samples}
    if trainee.tokens:
        info["tokens_per_step"] = trainee.tokens
    eager = TrainStep(trainee.model, trainee.optimizer, levers.precision, step.scaler, device,
                      loss_of=trainee.loss_of)
    info |= _memory_and_flops(eager, trainee, device)
    rates = _rates(trainee, info["flops_counted"], frames_seeded if levers.compile else None)
    return Workload(fn=lambda: step(*trainee.next_batch()), figures=info, rates=rates)


def cycle(batches: list[tuple]) -> Callable[[], tuple]:
    it = itertools.cycle(batches)
    return lambda: next(it)


def gpt_config(profile: StepSizes, levers: Levers) -> GPTConfig:
    return GPTConfig.preset(profile.gpt, padded=levers.vocab == "padded")


def gpt_formula_flops(profile: StepSizes, levers: Levers) -> float:
    """6N + 12LHQT per token times the tokens of a step; N from the model built on the meta device."""
    config = gpt_config(profile, levers)
    with torch.device("meta"):
        n = GPT(config).n_params(non_embedding=True)
    return float(gpt_flops_per_token(config, n) * profile.gpt_batch * config.block_size)


def _build_gpt(profile: StepSizes, levers: Levers, device: torch.device) -> Workload:
    config = gpt_config(profile, levers)
    raw_vocab = GPTConfig.preset(profile.gpt).vocab_size  # padded rows of the head never occur as targets
    torch.manual_seed(SEED)
    model = GPT(config, checkpoint=levers.checkpoint).to(device)
    if levers.master_weights:
        model.to(torch.bfloat16)
    batches = token_batches(raw_vocab, profile.gpt_batch, config.block_size, profile.steps, SEED, device)
    trainee = Trainee(model, optimizer_for(model, levers, profile.lr), batches, cycle(batches), profile.gpt_batch,
                       profile.gpt_batch * config.block_size, gpt_formula_flops(profile, levers))
    return workload(trainee, levers, device)


def _to_device(batch: tuple[torch.Tensor, torch.Tensor], device: torch.device, memory_format: torch.memory_format,
               non_blocking: bool) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = batch
    images = images.to(device, non_blocking=non_blocking).contiguous(memory_format=memory_format)
    return images, labels.to(device, non_blocking=non_blocking)


def _build_cnn(profile: StepSizes, levers: Levers, device: torch.device) -> Workload:
    config = CNNConfig.preset(profile.cnn)
    memory_format = torch.channels_last if levers.memory_format == "channels_last" else torch.contiguous_format
    dataset = EncodedImages(profile.images, config.image_size, config.num_classes, SEED)
    torch.manual_seed(SEED)
    model = ResNet(config, checkpoint=levers.checkpoint).to(device, memory_format=memory_format)
    host = DataLoader(dataset, batch_size=profile.cnn_batch, shuffle=False)  # decoded once, in-process, seeded
    seeded = itertools.islice(itertools.cycle(host), profile.steps)
    batches = [_to_device(b, device, memory_format, False) for b in seeded]
    if levers.num_workers is None:
        next_batch = cycle(batches)
    else:
        loader = image_loader(dataset, profile.cnn_batch, levers.num_workers, levers.pin_memory, SEED)

        def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
            return _to_device(next(loader), device, memory_format, levers.pin_memory)

    trainee = Trainee(model, optimizer_for(model, levers, profile.lr), batches, next_batch, profile.cnn_batch,
                       None, None)
    return workload(trainee, levers, device)


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def _params(model: str, lever: str, levers: Levers) -> dict[str, str]:
    return {"model": model, "lever": lever, "precision": levers.precision, "dtype": PEAK_DTYPE[levers.precision],
            "compile": _on_off(levers.compile), "optimizer": levers.optimizer,
            "checkpoint": "block" if levers.checkpoint else "off", "accum": str(levers.accum),
            "sync": "item" if levers.sync else "none"}


def _supported_build(builder: Callable[[StepSizes, Levers, torch.device], Workload], profile: StepSizes, lever: str,
                     levers: Levers) -> Callable[[torch.device], Workload]:
    """A Case.build that first says why this device cannot run the levers (Unsupported), then builds."""

    def build(device: torch.device) -> Workload:
        reason = support(levers, lever, profile, device)
        if reason:
            raise Unsupported(reason)
        return builder(profile, levers, device)

    return build


def gpt_case(profile: StepSizes, lever: str, label: str, levers: Levers) -> Case:
    params = _params(GPTConfig.preset(profile.gpt).name, lever, levers) | {
        "vocab": str(gpt_config(profile, levers).vocab_size),
        "align": align_class(gpt_config(profile, levers).vocab_size),  # of the head's vocabulary dimension
        "weights": "bf16+fp32_master" if levers.master_weights else "fp32"}

    return Case(suite=SUITE, id=f"{SUITE}/{params['model']}/{lever}/{label}", params=params,
                build=_supported_build(_build_gpt, profile, lever, levers),
                refused_on=functools.partial(refusal, levers, lever, profile),
                flops=gpt_formula_flops(profile, levers), peak_dtype=PEAK_DTYPE[levers.precision],
                tf32=levers.precision == "tf32", kind="step")


def cnn_case(profile: StepSizes, lever: str, label: str, levers: Levers) -> Case:
    params = _params(CNNConfig.preset(profile.cnn).name, lever, levers) | {
        "memory_format": levers.memory_format,
        "num_workers": "resident" if levers.num_workers is None else str(levers.num_workers),
        "pin_memory": _on_off(levers.pin_memory)}

    return Case(suite=SUITE, id=f"{SUITE}/{params['model']}/{lever}/{label}", params=params,
                build=_supported_build(_build_cnn, profile, lever, levers),
                refused_on=functools.partial(refusal, levers, lever, profile),
                peak_dtype=PEAK_DTYPE[levers.precision], tf32=levers.precision == "tf32", kind="step")


def cases(profile: str) -> list[Case]:
    """The GPT and CNN cases of a profile: baselines, one lever at a time, and the all-on combinations."""
    prof = PROFILES[Profile(profile).sizes]
    return ([gpt_case(prof, *variant) for variant in GPT_VARIANTS]
            + [cnn_case(prof, *variant) for variant in CNN_VARIANTS])
