"""The models of the training-step suite: published sizes, causality, tied head, checkpointing, FLOP formula."""

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from suites.training.data import EncodedImages, token_batch, token_batches
from suites.training.models import GPT, CNNConfig, GPTConfig, ResNet, gpt_flops_per_token, pad_vocab


def _closed_form_gpt_params(vocab: int, block: int, layers: int, width: int) -> int:
    """Per block: qkv (3C^2 + 3C), proj (C^2 + C), fc (4C^2 + 4C), proj (4C^2 + C), two LayerNorms (4C)."""
    per_block = 12 * width**2 + 13 * width
    return layers * per_block + vocab * width + block * width + 2 * width


@pytest.mark.parametrize("padded", [False, True])
def test_gpt2_124m_has_the_published_parameter_count(padded):
    config = GPTConfig.preset("gpt2-124m", padded=padded)
    with torch.device("meta"):
        model = GPT(config)
    assert config.vocab_size == (50304 if padded else 50257)
    assert model.n_params() == _closed_form_gpt_params(config.vocab_size, 1024, 12, 768)
    if not padded:  # nanoGPT prints "number of parameters: 123.65M" (position embedding excluded)
        assert round(model.n_params(non_embedding=True) / 1e6, 2) == 123.65


def test_resnet50_preset_has_torchvisions_parameter_count():
    with torch.device("meta"):
        model = ResNet(CNNConfig.preset("resnet50"))
    assert model.n_params() == 25_557_032  # torchvision.models.resnet50


def test_pad_vocab_rounds_up_to_a_multiple_of_64():
    assert pad_vocab(50257) == 50304
    assert pad_vocab(1024) == 1024


def test_unknown_preset_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown GPT preset 'nope'"):
        GPTConfig.preset("nope")
    with pytest.raises(ValueError, match="unknown CNN preset"):
        CNNConfig.preset("nope")


def test_head_is_tied_and_initial_loss_is_near_uniform():
    torch.manual_seed(0)
    model = GPT(GPTConfig.preset("tiny"))
    assert model.lm_head.weight is model.wte.weight
    x, y = token_batch(1000, 4, 64)
    logits, loss = model(x, y)
    assert logits.shape == (4, 64, 1000)
    assert abs(loss.item() - math.log(1000)) < 0.1


def test_attention_is_causal():
    torch.manual_seed(0)
    model = GPT(GPTConfig.preset("tiny")).eval()
    x, _ = token_batch(1000, 2, 64)
    changed = x.clone()
    changed[:, 40:] = (changed[:, 40:] + 1) % 1000
    with torch.no_grad():
        a, _ = model(x)
        b, _ = model(changed)
    torch.testing.assert_close(a[:, :40], b[:, :40])
    assert not torch.allclose(a[:, 40:], b[:, 40:])


def test_checkpointing_gives_the_same_gradients():
    x, y = token_batch(1000, 2, 64)
    grads = []
    for checkpoint in (False, True):
        torch.manual_seed(0)
        model = GPT(GPTConfig.preset("tiny"), checkpoint=checkpoint)
        model(x, y)[1].backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])


def test_formula_matches_counted_flops_with_the_math_attention():
    """6N + 12LHQT against torch's FLOP counter on real tensors; the math SDPA backend makes the attention
    matmuls visible to the counter. What the formula counts and the counter does not (biases, LayerNorm
    parameters) is under 3% of N for the tiny model."""
    config = GPTConfig.preset("tiny", padded=True)
    torch.manual_seed(0)
    model = GPT(config)
    x, y = token_batch(config.vocab_size, 4, config.block_size)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(x, y)[1].backward()
    formula = gpt_flops_per_token(config, model.n_params(non_embedding=True)) * x.numel()
    assert 0.97 < counter.get_total_flops() / formula <= 1.0


def test_resnet_channels_last_matches_contiguous():
    torch.manual_seed(0)
    model = ResNet(CNNConfig.preset("tiny")).eval()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        a, _ = model(x)
        b, _ = model.to(memory_format=torch.channels_last)(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_token_data_is_seeded_and_learnable():
    x1, y1 = token_batch(100, 4, 32, seed=3)
    x2, y2 = token_batch(100, 4, 32, seed=3)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(x1[:, 1:], y1[:, :-1])  # targets are the inputs shifted by one
    succ = torch.randperm(100, generator=torch.Generator().manual_seed(0))
    follows = (succ[x1] == y1).float().mean().item()
    assert 0.6 < follows < 0.9  # the rule holds 75% of the time (plus chance): there is something to learn
    batches = token_batches(100, 4, 32, steps=3)
    assert not torch.equal(batches[0][0], batches[1][0])


def test_encoded_images_decode_and_augment():
    ds = EncodedImages(8, 32, 10, seed=0)
    raw = ds.decode(0)
    assert raw.dtype == torch.uint8 and raw.shape == (3, 32, 32)
    assert len(ds.encoded[0]) < raw.numel()  # really compressed: decoding is work
    image, label = ds[0]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32 and 0 <= label < 10
    assert -3 < image.mean() < 3 and image.std() > 0.1  # normalized
