"""The models the training-step suite trains: a nanoGPT-like decoder and a ResNet-style CNN, no downloads.

The GPT is the shape the mixed-precision recipe is usually quoted for (GPT-2 124M: 12 layers, 12 heads, 768 wide,
1024 context), small enough to train a step on any GPU and, as `tiny`, on a laptop CPU. Its vocabulary is an
alignment axis: GPT-2's 50257 tokens make the tied output head an odd-sized matmul, nanoGPT pads to 50304
(a multiple of 64) for tensor-core-friendly tiles. The CNN is a bottleneck ResNet with batch norm, the model
where the channels-last memory format matters.

Both models share one interface: `forward(inputs, targets=None) -> (logits, loss)`, `n_params()`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as checkpoint_block


def pad_vocab(vocab_size: int, multiple: int = 64) -> int:
    """The vocabulary rounded up to a multiple of `multiple` (GPT-2: 50257 -> 50304), as nanoGPT pads it."""
    return math.ceil(vocab_size / multiple) * multiple


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT-style decoder. `vocab_size` is the embedding/head size actually allocated."""

    vocab_size: int
    block_size: int  # context length T
    n_layer: int
    n_head: int
    n_embd: int
    name: str = "custom"  # what results call the model (`model` param); presets are keyed by shorter names

    @classmethod
    def preset(cls, name: str, padded: bool = False) -> GPTConfig:
        """A named configuration; `padded` rounds its vocabulary up to a multiple of 64."""
        if name not in GPT_PRESETS:
            raise ValueError(f"unknown GPT preset {name!r}; known: {', '.join(GPT_PRESETS)}")
        config = GPT_PRESETS[name]
        return replace(config, vocab_size=pad_vocab(config.vocab_size)) if padded else config

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


# Raw (unpadded) vocabularies; GPTConfig.preset(name, padded=True) gives the padded twin.
GPT_PRESETS: dict[str, GPTConfig] = {
    # CPU quick profile: a step in a few milliseconds on 2 cores; vocabulary odd (1000) vs padded (1024).
    "tiny": GPTConfig(vocab_size=1000, block_size=64, n_layer=2, n_head=2, n_embd=64, name="gpt-tiny"),
    # A middle size for numerics runs and small GPUs: GPT-2's vocabulary, 4 layers of 256.
    "small": GPTConfig(vocab_size=50257, block_size=256, n_layer=4, n_head=4, n_embd=256, name="gpt-small"),
    "gpt2-124m": GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768, name="gpt2-124m"),
}


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through F.scaled_dot_product_attention (Flash/efficient kernels on GPU)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT-like decoder with a tied head. `checkpoint=True` recomputes each block's activations in backward."""

    def __init__(self, config: GPTConfig, checkpoint: bool = False) -> None:
        super().__init__()
        self.config = config
        self.checkpoint = checkpoint
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def n_params(self, non_embedding: bool = False) -> int:
        """Parameters counted once (the tied head is the token embedding); `non_embedding` drops the position
        embedding, as nanoGPT's N of the 6N FLOP formula does."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        t = idx.shape[1]
        if t > self.config.block_size:
            raise ValueError(f"sequence of {t} tokens exceeds the block size {self.config.block_size}")
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = checkpoint_block(block, x, use_reentrant=False) if self.checkpoint and self.training else block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        return logits, loss


def gpt_flops_per_token(config: GPTConfig, n_params_non_embedding: int, seq_len: int | None = None) -> int:
    """Training FLOPs per token, 6N + 12 L H Q T (PaLM appendix B, as nanoGPT's MFU): 6N for the forward and
    backward matmuls with the weights, 12 L H Q T for the attention scores and their weighted sum."""
    t = seq_len or config.block_size
    return 6 * n_params_non_embedding + 12 * config.n_layer * config.n_head * config.head_dim * t


@dataclass(frozen=True)
class CNNConfig:
    """Shape of a bottleneck ResNet: `layers` blocks per stage, stage widths `width * 2**i` (x4 at the output)."""

    layers: tuple[int, ...]
    width: int
    image_size: int
    num_classes: int
    imagenet_stem: bool  # 7x7 stride-2 conv + max pool (224 px inputs) vs a 3x3 stride-1 conv (small inputs)
    name: str = "custom"

    @classmethod
    def preset(cls, name: str) -> CNNConfig:
        if name not in CNN_PRESETS:
            raise ValueError(f"unknown CNN preset {name!r}; known: {', '.join(CNN_PRESETS)}")
        return CNN_PRESETS[name]


CNN_PRESETS: dict[str, CNNConfig] = {
    "tiny": CNNConfig(layers=(1, 1), width=8, image_size=32, num_classes=10, imagenet_stem=False,
                      name="resnet-tiny"),
    "resnet50": CNNConfig(layers=(3, 4, 6, 3), width=64, image_size=224, num_classes=1000, imagenet_stem=True,
                          name="resnet50"),
}


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, each with batch norm; projection shortcut when the
    shape changes."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """Bottleneck ResNet (ResNet-50 at the `resnet50` preset). `checkpoint=True` recomputes each stage in backward."""

    def __init__(self, config: CNNConfig, checkpoint: bool = False) -> None:
        super().__init__()
        self.config = config
        self.checkpoint = checkpoint
        w = config.width
        if config.imagenet_stem:
            self.stem = nn.Sequential(nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(w),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, w, 3, padding=1, bias=False), nn.BatchNorm2d(w),
                                      nn.ReLU(inplace=True))
        stages, in_ch = [], w
        for i, n_blocks in enumerate(config.layers):
            width = w * 2**i
            blocks = []
            for j in range(n_blocks):
                blocks.append(Bottleneck(in_ch, width, stride=2 if (j == 0 and i > 0) else 1))
                in_ch = width * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.ModuleList(stages)
        self.fc = nn.Linear(in_ch, config.num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, images: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = self.stem(images)
        for stage in self.stages:
            x = checkpoint_block(stage, x, use_reentrant=False) if self.checkpoint and self.training else stage(x)
        logits = self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        loss = F.cross_entropy(logits.float(), targets) if targets is not None else None
        return logits, loss
