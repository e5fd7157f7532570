"""The training-step suite: one optimizer step of a real model, with each lever of the mixed-precision recipe.

The step is the recipe as written (`TrainStep`): zero_grad(set_to_none=True); forward under torch.autocast when
the precision asks; scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip_grad_norm_(..., 1.0);
scaler.step(optimizer); scaler.update(). The scaler is enabled only for float16; for the other precisions it is
a disabled GradScaler whose calls are pass-throughs, so every precision runs the same code.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten
from torch.utils.data import DataLoader
from torch.utils.flop_counter import FlopCounterMode

from suites.core.cases import Case, Unsupported, Workload, align_class
from suites.core.memory import cpu_memory_info
from suites.core.precision import tf32_unsupported
from suites.training import param_bytes
from suites.training.data import EncodedImages, image_loader, token_batches
from suites.training.models import GPT, CNNConfig, GPTConfig, ResNet, gpt_flops_per_token

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16")
AUTOCAST_DTYPE: dict[str, torch.dtype] = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}
# The dtype whose peak FLOP/s the MFU of a precision divides by (names of suites/core/peaks.py).
PEAK_DTYPE: dict[str, str] = {"fp32": "float32", "tf32": "tf32", "amp_fp16": "float16", "amp_bf16": "bfloat16"}


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")


def make_optimizer(model: nn.Module, kind: str = "foreach", lr: float = 6e-4,
                   weight_decay: float = 0.1) -> torch.optim.AdamW:
    """AdamW with the multi-tensor (`foreach`) or single-kernel (`fused`) implementation."""
    if kind not in ("foreach", "fused"):
        raise ValueError(f"unknown optimizer implementation {kind!r}; known: foreach, fused")
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay,
                             foreach=kind == "foreach", fused=kind == "fused")


class MasterWeightsAdamW(torch.optim.Optimizer):
    """The classic mixed-precision layout: the model holds 16-bit weights and gradients, this optimizer a float32
    master copy of every weight; AdamW updates the masters from the gradients cast up, and the model receives
    the rounded result. Small updates that 16-bit weights would round away accumulate in the masters.
    `state[p]` exposes each parameter's `master` and AdamW moments for the memory budget."""

    def __init__(self, params: Iterable[nn.Parameter], kind: str = "foreach", lr: float = 6e-4,
                 weight_decay: float = 0.1) -> None:
        super().__init__(list(params), {"lr": lr})
        self.pairs = [(p, p.detach().float().clone().requires_grad_(True))
                      for group in self.param_groups for p in group["params"]]
        masters = [m for _, m in self.pairs]
        self.inner = torch.optim.AdamW(masters, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay,
                                       foreach=kind == "foreach", fused=kind == "fused")
        for p, m in self.pairs:
            self.state[p] = {"master": m}

    @torch.no_grad()
    def step(self, closure: None = None) -> None:
        for p, m in self.pairs:
            m.grad = None if p.grad is None else p.grad.float()
        self.inner.step()
        for p, m in self.pairs:
            p.copy_(m)
            m.grad = None  # the float32 gradient copy lives only during the step
            self.state[p] = {"master": m} | self.inner.state[m]


LossOf = Callable[..., torch.Tensor]  # (model, *batch) -> the scalar loss


def pair_loss(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loss of the suite's own models, whose forward takes (inputs, targets) and returns (output, loss)."""
    _, loss = model(inputs, targets)
    return loss


def split_batch(batch: tuple, n: int) -> list[tuple]:
    """`n` micro-batches of a batch: every tensor in it (nested in tuples, lists or dicts) split along dim 0;
    anything else (a flag, a 0-dim tensor) is given to every micro-batch as it is."""
    if n == 1:
        return [batch]
    leaves, spec = tree_flatten(batch)
    parts = [leaf.tensor_split(n) if isinstance(leaf, torch.Tensor) and leaf.dim() else [leaf] * n
             for leaf in leaves]
    return [tree_unflatten([p[i] for p in parts], spec) for i in range(n)]


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """A dynamic loss scaler, enabled only for float16 (bfloat16 has float32's exponent range and needs none)."""
    _check_precision(precision)
    return torch.amp.GradScaler(device.type, enabled=precision == "amp_fp16")


@dataclass
class TrainStep:
    """One optimizer step over `accum` micro-batches of a batch; calling it returns the mean loss as a tensor on
    the device (no host sync unless `sync`, which calls loss.item() as a training loop that logs every step
    does). `loss_of(model, *batch)` is the loss of a (micro-)batch: by default the suite's models' (inputs,
    targets) -> (output, loss); suites.training.user_model gives one for any model. For `tf32`, run it inside
    `suites.core.precision.float32_mode(True)`."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    precision: str
    scaler: torch.amp.GradScaler
    device: torch.device
    accum: int = 1
    sync: bool = False
    clip: float = 1.0
    # Where the gradients of all but the last micro-batch stay local (DDP's `no_sync`: one all-reduce per step)
    no_sync: Callable[[], contextlib.AbstractContextManager] | None = None
    loss_of: LossOf = pair_loss
    last_loss: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        _check_precision(self.precision)

    def forward(self, *batch: object) -> torch.Tensor:
        """The loss of one (micro-)batch, under autocast when the precision asks for it."""
        with torch.autocast(self.device.type, dtype=AUTOCAST_DTYPE.get(self.precision),
                            enabled=self.precision in AUTOCAST_DTYPE):
            return self.loss_of(self.model, *batch)

    def __call__(self, *batch: object) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for i, micro in enumerate(split_batch(batch, self.accum)):
            local = self.no_sync is not None and i < self.accum - 1
            with self.no_sync() if local else contextlib.nullcontext():
                loss = self.forward(*micro) / self.accum
                self.scaler.scale(loss).backward()
            total += loss.detach()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.sync:
            self.last_loss = total.item()
        return total


def make_step(model: nn.Module, optimizer: torch.optim.Optimizer, precision: str,
              scaler: torch.amp.GradScaler | None = None, device: torch.device | None = None, accum: int = 1,
              sync: bool = False, loss_of: LossOf = pair_loss) -> TrainStep:
    """The recipe's step for a model already on its device; the scaler defaults to `make_scaler(precision)`."""
    device = device or next(model.parameters()).device
    return TrainStep(model, optimizer, precision, scaler or make_scaler(precision, device), device, accum, sync,
                     loss_of=loss_of)


@dataclass
class TrainRun:
    """Losses of consecutive steps, how many of them the loss scaler skipped (inf/NaN gradients), and the wall
    time of the first step (which pays for torch.compile's compilation when the model is compiled)."""

    losses: list[float]
    skipped_steps: int
    first_step_s: float


def train(step: TrainStep, batches: Iterable[tuple]) -> TrainRun:
    """Run one step per batch, reading the loss and the scaler's scale after each (a host sync per step: for
    accuracy runs, not timed ones). A step is skipped when the scaler lowered its scale."""
    losses, skipped, first_step_s = [], 0, 0.0
    for batch in batches:
        before = step.scaler.get_scale() if step.scaler.is_enabled() else None
        start = time.perf_counter()
        losses.append(float(step(*batch)))  # float() waits for the device: the step is complete
        if len(losses) == 1:
            first_step_s = time.perf_counter() - start
        if before is not None and step.scaler.get_scale() < before:
            skipped += 1
    return TrainRun(losses, skipped, first_step_s)


# ---------------------------------------------------------------------------------------------------------------
# The suite: a baseline and one lever varied at a time, plus the recommended all-on combination (docs/train_step.md)

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
class Profile:
    """Sizes of a profile: the models, their batches, and how many steps `loss_after_n` trains from the seed."""

    gpt: str
    gpt_batch: int
    cnn: str
    cnn_batch: int
    images: int  # size of the encoded image dataset
    steps: int
    lr: float
    cpu_compile_all: bool  # compile every precision on a CPU (inductor's C++ build is ~30 s per graph there)


PROFILES: dict[str, Profile] = {
    # lr high enough that 10 steps of the tiny GPT move the loss visibly
    "quick": Profile("tiny", 8, "tiny", 16, images=256, steps=8, lr=3e-3, cpu_compile_all=False),
    "full": Profile("gpt2-124m", 16, "resnet50", 64, images=512, steps=20, lr=6e-4, cpu_compile_all=True),
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


def support(levers: Levers, lever: str, profile: Profile, device: torch.device) -> str | None:
    """Why this device cannot run the settings, or None."""
    cuda = device.type == "cuda"
    if levers.precision == "tf32" and (reason := tf32_unsupported(device)):
        return reason
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
    """Train the seeded steps: the loss after n steps, skipped steps and, compiled, what compilation cost.
    Returns the fields and Dynamo's frame count after the run (recompiles are counted from there)."""
    counters, frames_before = torch._dynamo.utils.counters, _dynamo_frames()
    hits_before = counters["inductor"]["fxgraph_cache_hit"]
    try:
        run = train(step, trainee.seed_batches)
    except torch._dynamo.exc.BackendCompilerFailed as exc:
        if device.type == "cpu":
            raise Unsupported(f"torch.compile failed on this CPU: {str(exc).splitlines()[0]}") from exc
        raise
    info: dict = {"loss_after_n": run.losses[-1], "loss_first": run.losses[0], "n_steps": len(run.losses),
                  "scaler_skipped_steps": run.skipped_steps}
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
    info = param_bytes.measure(trainee.model, eager.optimizer).extra_info()
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
    return Workload(fn=lambda: step(*trainee.next_batch()), extra_info=info, rates=rates)


def cycle(batches: list[tuple]) -> Callable[[], tuple]:
    it = itertools.cycle(batches)
    return lambda: next(it)


def gpt_config(profile: Profile, levers: Levers) -> GPTConfig:
    return GPTConfig.preset(profile.gpt, padded=levers.vocab == "padded")


def gpt_formula_flops(profile: Profile, levers: Levers) -> float:
    """6N + 12LHQT per token times the tokens of a step; N from the model built on the meta device."""
    config = gpt_config(profile, levers)
    with torch.device("meta"):
        n = GPT(config).n_params(non_embedding=True)
    return float(gpt_flops_per_token(config, n) * profile.gpt_batch * config.block_size)


def _build_gpt(profile: Profile, levers: Levers, device: torch.device) -> Workload:
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


def _build_cnn(profile: Profile, levers: Levers, device: torch.device) -> Workload:
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


def _supported_build(builder: Callable[[Profile, Levers, torch.device], Workload], profile: Profile, lever: str,
                     levers: Levers) -> Callable[[torch.device], Workload]:
    """A Case.build that first says why this device cannot run the levers (Unsupported), then builds."""

    def build(device: torch.device) -> Workload:
        reason = support(levers, lever, profile, device)
        if reason:
            raise Unsupported(reason)
        return builder(profile, levers, device)

    return build


def gpt_case(profile: Profile, lever: str, label: str, levers: Levers) -> Case:
    params = _params(GPTConfig.preset(profile.gpt).name, lever, levers) | {
        "vocab": str(gpt_config(profile, levers).vocab_size),
        "align": align_class(gpt_config(profile, levers).vocab_size),  # of the head's vocabulary dimension
        "weights": "bf16+fp32_master" if levers.master_weights else "fp32"}

    return Case(suite=SUITE, id=f"{SUITE}/{params['model']}/{lever}/{label}", params=params,
                build=_supported_build(_build_gpt, profile, lever, levers),
                flops=gpt_formula_flops(profile, levers), peak_dtype=PEAK_DTYPE[levers.precision],
                tf32=levers.precision == "tf32", kind="step")


def cnn_case(profile: Profile, lever: str, label: str, levers: Levers) -> Case:
    params = _params(CNNConfig.preset(profile.cnn).name, lever, levers) | {
        "memory_format": levers.memory_format,
        "num_workers": "resident" if levers.num_workers is None else str(levers.num_workers),
        "pin_memory": _on_off(levers.pin_memory)}

    return Case(suite=SUITE, id=f"{SUITE}/{params['model']}/{lever}/{label}", params=params,
                build=_supported_build(_build_cnn, profile, lever, levers),
                peak_dtype=PEAK_DTYPE[levers.precision], tf32=levers.precision == "tf32", kind="step")


def cases(profile: str) -> list[Case]:
    """The GPT and CNN cases of a profile: baselines, one lever at a time, and the all-on combinations."""
    prof = PROFILES[profile]
    return ([gpt_case(prof, *variant) for variant in GPT_VARIANTS]
            + [cnn_case(prof, *variant) for variant in CNN_VARIANTS])
