"""Synthetic training data made in-process from a fixed seed: no downloads, the same bytes on every machine.

Tokens follow a learnable rule (each token's successor is a fixed random permutation of it, with some uniform
noise), so a few optimizer steps lower the loss measurably and losses after n steps can be compared across
precisions. Images come as encoded bytes that a Dataset decodes and augments per sample on the CPU, the work
a real input pipeline does and that DataLoader workers and pinned memory exist to hide.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

NOISE = 0.25  # fraction of tokens drawn uniformly instead of by the successor rule


def token_batch(vocab_size: int, batch: int, seq_len: int, seed: int = 0, rule_seed: int = 0,
                device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of shape (batch, seq_len), targets shifted by one. With probability 1 - NOISE the next
    token is `successor[token]` for a permutation fixed by `rule_seed`, else uniform (starts and noise drawn from
    `seed`): the best loss is well below ln(vocab_size), so training progress shows."""
    successor = torch.randperm(vocab_size, generator=torch.Generator().manual_seed(rule_seed))
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.empty(batch, seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(vocab_size, (batch,), generator=gen)
    random = torch.randint(vocab_size, (batch, seq_len), generator=gen)
    follow = torch.rand(batch, seq_len, generator=gen) >= NOISE
    for t in range(seq_len):
        tokens[:, t + 1] = torch.where(follow[:, t], successor[tokens[:, t]], random[:, t])
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def token_batches(vocab_size: int, batch: int, seq_len: int, steps: int, seed: int = 0,
                  device: torch.device | str = "cpu") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`steps` different batches (seeds seed, seed+1, ...) of one token stream (the successor rule of `seed`)."""
    return [token_batch(vocab_size, batch, seq_len, seed + i, seed, device) for i in range(steps)]


IMAGE_MEAN = (0.485, 0.456, 0.406)  # ImageNet statistics, the usual normalization
IMAGE_STD = (0.229, 0.224, 0.225)


class EncodedImages(Dataset):
    """`n` RGB images of `size` x `size` in `num_classes` classes, kept zlib-compressed as a stand-in for JPEG
    files. Each __getitem__ decodes the bytes to a uint8 image, then augments it as a training pipeline does:
    random crop (after 4-pixel reflection padding), random horizontal flip, scale to [0, 1], normalize."""

    def __init__(self, n: int, size: int, num_classes: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, num_classes, size=n)
        # Each class has a coarse colour template; an image is its class's template half-blended with noise, so
        # the label is learnable, and upsampled, so it compresses like a photograph does (unlike white noise).
        templates = rng.integers(0, 256, size=(num_classes, size // 4, size // 4, 3))
        noise = rng.integers(0, 256, size=(n, size // 4, size // 4, 3))
        coarse = ((templates[labels] + noise) // 2).astype(np.uint8)
        images = coarse.repeat(4, axis=1).repeat(4, axis=2)
        self.encoded = [zlib.compress(img.tobytes(), level=6) for img in images]
        self.labels = labels.tolist()
        self.size, self.seed = size, seed
        self.mean = torch.tensor(IMAGE_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGE_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.encoded)

    def decode(self, index: int) -> torch.Tensor:
        """The stored bytes back to a (3, size, size) uint8 image."""
        raw = bytearray(zlib.decompress(self.encoded[index]))
        return torch.frombuffer(raw, dtype=torch.uint8).view(self.size, self.size, 3).permute(2, 0, 1)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.decode(index).float().div_(255)
        padded = torch.nn.functional.pad(image.unsqueeze(0), (4, 4, 4, 4), mode="reflect").squeeze(0)
        top, left = (int(v) for v in torch.randint(0, 9, (2,)))
        image = padded[:, top:top + self.size, left:left + self.size]
        if torch.rand(()) < 0.5:
            image = image.flip(2)
        return (image - self.mean) / self.std, self.labels[index]


def image_loader(dataset: Dataset, batch: int, num_workers: int, pin_memory: bool,
                 seed: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """An endless iterator of (images, labels) batches: sampling with replacement so it never runs dry, and
    workers that persist, so the timed steps never pay for starting processes."""
    sampler = RandomSampler(dataset, replacement=True, num_samples=2**40,
                            generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(dataset, batch_size=batch, sampler=sampler, num_workers=num_workers,
                        pin_memory=pin_memory, persistent_workers=num_workers > 0, drop_last=True)
    return iter(loader)
