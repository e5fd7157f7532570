"""The matmul suite: C = A @ B over dtypes and shape classes, with 2MNK FLOPs and a float64 reference.

Shapes: cubes in the three `align` classes (a multiple of 64, of 8 only, and odd: 4096, 4104, 4097 in the full
profile) and layers of real models, where alignment is what the model designer chose: LLaMA-7B's MLP
(4096 -> 11008) and GPT-2's tied output head over the raw vocabulary (50257) against the padded one (50304).
`shape` is written MxNxK: A is MxK, B is KxN.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from suites.core import gemm
from suites.core.cases import Case, Workload, align_class
from suites.core.precision import DTYPES, TOLERANCE, relative_error
from suites.core.profiles import Profile

SUITE = "matmul"


@dataclass(frozen=True)
class Shape:
    layer: str
    m: int
    n: int
    k: int

    @property
    def text(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def _cubes(base: int) -> list[Shape]:
    return [Shape("square", s, s, s) for s in (base, base + 8, base + 1)]


def _model_layers(tokens: int) -> list[Shape]:
    return [
        Shape("llama7b-mlp-up", tokens, 11008, 4096),
        Shape("llama7b-mlp-down", tokens, 4096, 11008),
        Shape("gpt2-lm-head", tokens, 50257, 768),
        Shape("gpt2-lm-head", tokens, 50304, 768),
    ]


# quick: a 2-core CPU runs every dtype in seconds (CPU float16 matmul runs at a few GFLOP/s);
# full: sizes that fill a large GPU.
SHAPES: dict[Profile, list[Shape]] = {
    Profile.QUICK: _cubes(256) + _model_layers(8),
    Profile.FULL: _cubes(4096) + _model_layers(4096) + [Shape("gpt2-lm-head", 8192, 50304, 768)],
}


def _build(shape: Shape, dtype: str, device: torch.device) -> Workload:
    product = gemm.build(shape.m, shape.n, shape.k, dtype, device)
    return Workload(fn=product.fn, error_rel=lambda: relative_error(product.fn(), product.reference()))


def make_case(shape: Shape, dtype: str) -> Case:
    """One matmul case; its id is stable across runs and machines (nightly history keys on it)."""
    in_size = DTYPES[dtype].itemsize
    out_size = 2 if dtype == "float8_e4m3fn" else in_size

    align = align_class(shape.m, shape.n, shape.k)
    return Case(
        suite=SUITE,
        id=f"{SUITE}/{shape.layer}/{shape.text}/{dtype}",
        params={"dtype": dtype, "layer": shape.layer, "shape": shape.text, "align": align},
        build=functools.partial(_build, shape, dtype),
        flops=2 * shape.m * shape.n * shape.k,
        bytes=(shape.m * shape.k + shape.k * shape.n) * in_size + shape.m * shape.n * out_size,
        peak_dtype=dtype,
        tolerance=TOLERANCE[dtype],
        tf32=dtype == "tf32",
    )


def cases(profile: str) -> list[Case]:
    """Every matmul case of a profile, all dtypes (the plugin filters by --bench-dtypes)."""
    return [make_case(shape, dtype) for shape in SHAPES[profile] for dtype in DTYPES]
