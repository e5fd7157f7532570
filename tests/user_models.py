"""Small models of the kinds users bring, with their batch factories: for tests/test_user_model.py and its CLI runs.

Each is named in tests as `tests.user_models:FACTORY`, the way a user names theirs on the command line.
"""

import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

FEATURES, CLASSES, BATCH = 16, 4, 64


class DictLossMLP(nn.Module):
    """Takes keyword arguments and returns a dict with `loss`, as Hugging Face models do."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(FEATURES, FEATURES) for _ in range(2)])
        self.head = nn.Linear(FEATURES, CLASSES)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        logits = self.head(x)
        return {"logits": logits, "loss": F.cross_entropy(logits, labels)}


class TupleConv(nn.Module):
    """Takes (images, labels) positionally and returns (logits, loss)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.head(torch.relu(self.conv(images)).mean((2, 3)))
        return logits, F.cross_entropy(logits, labels)


class TooBig(nn.Linear):
    """A forward that asks for a petabyte: the model does not fit."""

    def __init__(self) -> None:
        super().__init__(FEATURES, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.empty(2**50, dtype=torch.uint8)
        return super().forward(x).sum()


def dict_model() -> nn.Module:
    return DictLossMLP()


def dict_batch(device: torch.device) -> dict[str, torch.Tensor]:
    """Random inputs whose label is a function of them (the sign of two features), so that steps learn."""
    x = torch.randn(BATCH, FEATURES, device=device)
    return {"x": x, "labels": (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()}


def tuple_model() -> nn.Module:
    return TupleConv()


def tuple_batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random images labelled by the sign of their first two channels' means, so that steps learn."""
    images = torch.randn(BATCH, 3, 8, 8, device=device)
    means = images.mean((2, 3))
    return images, (means[:, 0] > 0).long() + 2 * (means[:, 1] > 0).long()


def logits_model() -> nn.Module:
    """Returns logits only: training it needs a loss function."""
    return nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.ReLU(), nn.Linear(FEATURES, CLASSES))


def tensor_batch() -> torch.Tensor:
    """No device argument: the batch is made on the CPU (a CPU run accepts it, a CUDA run says it is misplaced)."""
    return torch.randn(BATCH, FEATURES)


def logits_loss(output: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(output, batch[:, :CLASSES])


def meta_batch(device: torch.device) -> torch.Tensor:
    """A batch on the wrong device whatever the run's device."""
    return torch.randn(BATCH, FEATURES, device="meta")


def too_big_model() -> nn.Module:
    return TooBig()


def not_a_model() -> str:
    return "a model"


def exiting_model() -> nn.Module:
    sys.exit(0)  # a script's habit: advise must not end with 0 and no advice


def exiting_batch(device: torch.device) -> torch.Tensor:
    sys.exit("no data here")


def exiting_loss(output: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    raise SystemExit


def slow_not_a_model() -> str:
    """A factory that takes a while (a big checkpoint to load, say) and then returns no model."""
    time.sleep(1.0)
    return "a checkpoint path"


class NoiseConv(nn.Module):
    """A conv classifier with BatchNorm (so that micro-batches change its statistics, as in real models) whose head
    starts at zero: its first loss is ln(CLASSES), the best any model can do on labels that are noise."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Linear(8 * 8 * 8, CLASSES)  # every pixel's features: room to fit a batch's noise
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.head(self.body(images).flatten(1))
        return logits, F.cross_entropy(logits, labels)


def noise_model() -> nn.Module:
    return NoiseConv()


NOISE_BATCH = 16  # small enough that one step fits its batch's noise visibly


def noise_batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels independent of the images: every step fits its batch's noise, so fp32's own loss on the next batch
    rises above its first (a batch with no structure, which users do bring)."""
    return torch.randn(NOISE_BATCH, 3, 8, 8, device=device), torch.randint(CLASSES, (NOISE_BATCH,), device=device)
