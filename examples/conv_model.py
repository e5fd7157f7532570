"""A small convolutional classifier written in plain torch: the first worked example of docs/your_model.md.

`python -m suites advise examples.conv_model:make_model --device cpu` (the batch factory defaults to
`make_batch` of the same module). The model takes a tuple batch (images, labels) as two positional arguments
and returns a tuple (logits, loss); the suite takes the loss from the tuple's one scalar.
"""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 8
IMAGE = 16
CLASSES = 10


def conv_bn(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())


class Block(nn.Module):
    """Two 3x3 convolutions with a residual connection."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv_bn(channels, channels), conv_bn(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class SmallConvNet(nn.Module):
    def __init__(self, width: int = 16, depth: int = 2, classes: int = CLASSES) -> None:
        super().__init__()
        self.stem = conv_bn(3, width, stride=2)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))
        self.head = nn.Linear(width, classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.blocks(self.stem(images))
        logits = self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return logits, F.cross_entropy(logits, labels)


def make_model() -> nn.Module:
    return SmallConvNet()


def make_batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(BATCH, 3, IMAGE, IMAGE, device=device)
    labels = torch.randint(CLASSES, (BATCH,), device=device)
    return images, labels
