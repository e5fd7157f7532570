"""The training-step suite: one optimizer step of a real model, with each lever of the mixed-precision recipe.

The step is the recipe as written (`TrainStep`): zero_grad(set_to_none=True); forward under torch.autocast when
the precision asks; scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip_grad_norm_(..., 1.0);
scaler.step(optimizer); scaler.update(). The scaler is enabled only for float16; for the other precisions it is
a disabled GradScaler whose calls are pass-throughs, so every precision runs the same code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16")
AUTOCAST_DTYPE: dict[str, torch.dtype] = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}
# The dtype whose peak FLOP/s the MFU of a precision divides by (names of suites/peaks.py).
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


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """A dynamic loss scaler, enabled only for float16 (bfloat16 has float32's exponent range and needs none)."""
    _check_precision(precision)
    return torch.amp.GradScaler(device.type, enabled=precision == "amp_fp16")


@dataclass
class TrainStep:
    """One optimizer step over `accum` micro-batches of a (inputs, targets) batch; calling it returns the mean
    loss as a tensor on the device (no host sync unless `sync`, which calls loss.item() as a training loop that
    logs every step does). For `tf32`, run it inside `suites.precision.float32_mode(True)`."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    precision: str
    scaler: torch.amp.GradScaler
    device: torch.device
    accum: int = 1
    sync: bool = False
    clip: float = 1.0
    last_loss: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        _check_precision(self.precision)

    def __call__(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for x, y in zip(inputs.chunk(self.accum), targets.chunk(self.accum), strict=True):
            with torch.autocast(self.device.type, dtype=AUTOCAST_DTYPE.get(self.precision),
                                enabled=self.precision in AUTOCAST_DTYPE):
                _, loss = self.model(x, y)
            loss = loss / self.accum
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
              sync: bool = False) -> TrainStep:
    """The recipe's step for a model already on its device; the scaler defaults to `make_scaler(precision)`."""
    device = device or next(model.parameters()).device
    return TrainStep(model, optimizer, precision, scaler or make_scaler(precision, device), device, accum, sync)


@dataclass
class TrainRun:
    """Losses of consecutive steps and how many of them the loss scaler skipped (inf/NaN gradients)."""

    losses: list[float]
    skipped_steps: int


def train(step: TrainStep, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> TrainRun:
    """Run one step per batch, reading the loss and the scaler's scale after each (a host sync per step: for
    accuracy runs, not timed ones). A step is skipped when the scaler lowered its scale."""
    losses, skipped = [], 0
    for inputs, targets in batches:
        before = step.scaler.get_scale() if step.scaler.is_enabled() else None
        losses.append(float(step(inputs, targets)))
        if before is not None and step.scaler.get_scale() < before:
            skipped += 1
    return TrainRun(losses, skipped)
