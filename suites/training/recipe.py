"""The mixed-precision training recipe as written: the step, its loss scaler, AdamW with or without a float32
master copy, micro-batches for gradient accumulation, and a short training run.

The step (`TrainStep`): zero_grad(set_to_none=True); forward under torch.autocast when the precision asks;
scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip_grad_norm_(..., 1.0); scaler.step(optimizer);
scaler.update(). The scaler is enabled only for float16; for the other precisions it is a disabled GradScaler
whose calls are pass-throughs, so every precision runs the same code. The training-step suite
(suites/training/train_step.py), the batch-size search, the numerics checks, a user's model and the distributed
steps all train through it.
"""


from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

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
