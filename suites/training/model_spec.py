"""A model of the training-step suite named by kind and preset, built from a fixed seed with a batch of any size.

The batch-size sweep, the largest-batch search and the autocast audit all need "this model, this many samples,
on this device", freshly built (a search try must start from nothing, so its peak memory is its own).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from suites.training.data import token_batch
from suites.training.models import GPT, CNNConfig, GPTConfig, ResNet, gpt_flops_per_token

SEED = 0


@dataclass(frozen=True)
class ModelSpec:
    """`kind` gpt (padded vocabulary, full context) or cnn; `preset` one of suites.training.models' presets."""

    kind: str
    preset: str

    def __post_init__(self) -> None:
        presets = {"gpt": GPTConfig.preset, "cnn": CNNConfig.preset}
        if self.kind not in presets:
            raise ValueError(f"unknown model kind {self.kind!r}; known: gpt, cnn")
        presets[self.kind](self.preset)  # raises ValueError naming the known presets

    @property
    def name(self) -> str:
        """`gpt2-124m` and `resnet50` name themselves; `tiny` is `gpt-tiny` or `cnn-tiny`."""
        return self.preset if self.preset.startswith(("gpt", "resnet")) else f"{self.kind}-{self.preset}"

    @property
    def config(self) -> GPTConfig | CNNConfig:
        return GPTConfig.preset(self.preset, padded=True) if self.kind == "gpt" else CNNConfig.preset(self.preset)

    @property
    def tokens_per_sample(self) -> int | None:
        return self.config.block_size if self.kind == "gpt" else None

    def flops_per_sample(self) -> float | None:
        """Training FLOPs of one GPT sequence by the 6N + 12LHQT formula (None for the CNN: no formula)."""
        return _gpt_flops_per_sequence(self.preset) if self.kind == "gpt" else None

    def n_params(self) -> int:
        """Parameters of the model, counted on the meta device (no memory), once per preset."""
        return _n_params(self.kind, self.preset)

    def build(self, device: torch.device, checkpoint: bool = False) -> nn.Module:
        """The model with weights from SEED; `checkpoint` recomputes activations per block (GPT) or stage (CNN)."""
        torch.manual_seed(SEED)
        model = GPT(self.config, checkpoint) if self.kind == "gpt" else ResNet(self.config, checkpoint)
        return model.to(device)

    def batch(self, size: int, device: torch.device, seed: int = SEED) -> tuple[torch.Tensor, torch.Tensor]:
        """`size` samples: token sequences (the learnable synthetic stream) or random images with labels."""
        config = self.config
        if self.kind == "gpt":  # targets from the raw vocabulary: padded rows of the head never occur
            vocab = GPTConfig.preset(self.preset).vocab_size
            return token_batch(vocab, size, config.block_size, seed, device=device)
        gen = torch.Generator().manual_seed(seed)
        images = torch.randn(size, 3, config.image_size, config.image_size, generator=gen)
        labels = torch.randint(config.num_classes, (size,), generator=gen)
        return images.to(device), labels.to(device)


@functools.cache
def _n_params(kind: str, preset: str) -> int:
    with torch.device("meta"):
        if kind == "gpt":
            return GPT(GPTConfig.preset(preset, padded=True)).n_params()
        return ResNet(CNNConfig.preset(preset)).n_params()


@functools.cache
def _gpt_flops_per_sequence(preset: str) -> float:
    """N counted on the meta device (no memory), once per preset."""
    config = GPTConfig.preset(preset, padded=True)
    with torch.device("meta"):
        n = GPT(config).n_params(non_embedding=True)
    return float(gpt_flops_per_token(config, n) * config.block_size)


def parse(name: str) -> ModelSpec:
    """`gpt-tiny`, `cnn-tiny`, `gpt-small`, `gpt2-124m`, `resnet50` -> a ModelSpec (ValueError otherwise)."""
    if name.startswith("gpt2"):
        return ModelSpec("gpt", name)
    if name.startswith("resnet"):
        return ModelSpec("cnn", name)
    kind, _, preset = name.partition("-")
    return ModelSpec(kind, preset)
