"""How far naive attention in a 16-bit dtype may sit from float64 when its kernels are right: an error model of
the roundings through its path, from which the attention suite sets the tolerance of its `naive` cases.

Naive attention (suites/ops/attention.py) materializes every intermediate in the dtype: the raw scores QK^T, the
scaled scores, the probabilities P, the output O and, backward, dP = dO V^T, dS = P (dP - D), dS scaled, and the
gradients dQ = dS K, dK, dV = P^T dO: each rounded to 16 bits once (the matmuls accumulate in float32, the
softmax and its backward compute in float32). With standard normal inputs, as the suite draws them, each of these
is a known distribution over a row of `seq` keys: the scaled scores are N(0, 1), P = exp(s) / (seq e^(1/2)), dP is
N(0, head_dim), dS scaled is P times N(0, 1), and O and the gradients are N(0, e / seq) (a weighted sum of seq
normal rows). A rounding of values x puts an error of at most half the format's spacing at x on each, a variance
of spacing^2 / 12, and the relative error it leaves in a product that sums over the rounded values is that
variance over x^2, each weighted as the product weights it (`relative_rounding`). Independent roundings add their
variances, so the relative error of an output is the root of the sum of the squares of the roundings on its
path (`naive_error`). On CUDA torch lets cuBLAS reduce a 16-bit gemm in 16 bits
(`allow_fp16_reduced_precision_reduction`, on by default): a gemm split along its `seq`-long sum into S parts
rounds each part and each of the S - 1 additions of them, 1 + (S + 2)(S - 1) / 2S times the variance of one
rounding of its output (`splits`; 1 where the sum stays in float32, as on the CPU). cuBLAS does not say how many
parts it uses; the tolerance assumes at most SPLITS_BOUND, a figure the first GPU run confirms (docs/gpu_check.md).

Why the tolerance cannot be one figure per dtype: P is about 1 / seq, and float16's normal numbers end at 2^-14
(6.1e-5). From 8k tokens much of P, and of dS scaled, is subnormal, where the spacing is a fixed 2^-24 instead of
a share of the value, so their relative rounding grows with seq. Weighted as the gemms weigh them (by their
squares, so the large values count most) it grows slowly: the model gives float16's gradients 7.7e-4 at 2k tokens,
8.0e-4 at 16k (1.0e-3 with sums split in 16 parts), 1.2e-3 at 64k and 4e-3 at 256k. The tolerance of a naive case
is the model's figure with split sums times `MARGIN` where that is above the dtype's: float16 keeps its 2e-3 up to
16k tokens with room, and gets more only where the model says a correct kernel needs it; bfloat16 gets 1.2e-2.
tests/test_attention.py checks the model against float64 on the CPU (0.7-1.06 x the error measured at 128-4096
tokens) and the roundings it assumes against torch's, subnormals included.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: its mantissa bits and the exponent of its smallest normal number."""

    mantissa_bits: int
    min_exponent: int


FORMATS = {"float16": Format(10, -14), "bfloat16": Format(7, -126)}
# The tolerance of a naive case is this many times the model's figure where that is above the dtype's tolerance:
# the model is an expectation over random inputs, the measured error one draw (on the CPU at 128-4096 tokens it
# read 0.7-1.06 x the model, tests/test_attention.py).
MARGIN = 1.5
SPLITS_BOUND = 16  # the most parts a 16-bit gemm's sum is taken to be split into on CUDA (unverified on a GPU)
GRID = 1001  # quantiles of a standard normal that stand for it


def spacing(x: np.ndarray, fmt: Format) -> np.ndarray:
    """The distance between the format's numbers at |x|: 2^(e - mantissa bits) for x in [2^e, 2^(e+1)), and the
    subnormals' fixed spacing below the smallest normal number."""
    exponent = np.floor(np.log2(np.maximum(np.abs(x), np.finfo(np.float64).tiny)))
    return np.exp2(np.maximum(exponent, fmt.min_exponent) - fmt.mantissa_bits)


def relative_rounding(x: np.ndarray, fmt: Format, weights: np.ndarray | None = None) -> float:
    """The root of the rounding's error variance over the values' mean square, both weighted as a product that
    sums over the values weights them (by default as themselves)."""
    w = np.ones_like(x) if weights is None else weights
    return math.sqrt(float(np.sum(w * spacing(x, fmt) ** 2 / 12) / np.sum(w * x**2)))


@functools.cache
def _normal() -> np.ndarray:
    return norm.ppf((np.arange(GRID) + 0.5) / GRID)


def split_sum(splits: int) -> float:
    """How many times one rounding's variance a gemm's output gets when its sum is split into `splits` parts
    rounded and added in 16 bits."""
    return 1 + (splits + 2) * (splits - 1) / (2 * splits)


def naive_tolerance(dtype: str, seq: int, head_dim: int, backward: bool) -> float:
    """MARGIN times the model's error with gemms split into at most SPLITS_BOUND parts: what a correct naive
    attention stays under on every device."""
    return MARGIN * naive_error(dtype, seq, head_dim, backward, SPLITS_BOUND)


def naive_error(dtype: str, seq: int, head_dim: int, backward: bool, splits: int = 1) -> float:
    """The relative error (Frobenius, against float64) a correct naive attention in `dtype` is expected to have on
    standard normal inputs: its output's, or with `backward` the worst of the output's and the gradients'; the
    `seq`-long gemms (P V, P^T dO, dS K, dS^T Q) summed in `splits` parts (`split_sum`)."""
    fmt = FORMATS[dtype]
    z = _normal()
    scores = z  # scaled scores: q.k / sqrt(d) of unit normals
    p = np.exp(z) / (seq * math.exp(0.5))
    p_weight = p**2  # a product over P (O = P V, dS = P (dP - D)) weighs its relative errors by P^2
    # the scores' errors are absolute, and become P's relative errors: their variance, weighted by P^2
    raw = math.sqrt(float(np.sum(p_weight * spacing(math.sqrt(head_dim) * z, fmt) ** 2 / 12)) / head_dim
                    / float(np.sum(p_weight)))
    scaled = math.sqrt(float(np.sum(p_weight * spacing(scores, fmt) ** 2 / 12)) / float(np.sum(p_weight)))
    into_p = math.sqrt(raw**2 + scaled**2 + relative_rounding(p, fmt) ** 2)
    # O, dV, dQ, dK: N(0, e / seq), each the output of a seq-long gemm
    product = relative_rounding(math.sqrt(math.e / seq) * z, fmt) * math.sqrt(split_sum(splits))
    out = math.hypot(into_p, product)
    if not backward:
        return out
    d_p = relative_rounding(math.sqrt(head_dim) * z, fmt)
    p2, z2 = np.meshgrid(p, z)
    d_s = relative_rounding(p2 * math.sqrt(head_dim) * z2, fmt)
    d_s_scaled = relative_rounding(p2 * z2, fmt)
    through_ds = math.sqrt(into_p**2 + d_p**2 + d_s**2 + d_s_scaled**2 + product**2)
    return max(out, through_ds)  # dV's path (P, then its gemm) is O's
