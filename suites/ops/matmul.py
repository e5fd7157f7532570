"""The matmul suite: C = A @ B over dtypes and shape classes, with 2MNK FLOPs and a float64 reference.

Shapes: cubes in the three `align` classes (a multiple of 64, of 8 only, and odd: 4096, 4104, 4097 in the full
profile) and layers of real models, where alignment is what the model designer chose: LLaMA-7B's MLP
(4096 -> 11008) and GPT-2's tied output head over the raw vocabulary (50257) against the padded one (50304).
`shape` is written MxNxK: A is MxK, B is KxN.

Two timing levers, CUDA only (`cold`, `graph` params): the L2 flushed before every call, against the warm repeats
that read operands from L2, and the calls replayed as a CUDA graph, against eager launches. They run in the full
profile at `l2-resident` 2048^3 (`LEVER_SHAPES`), whose operands and result (24 MiB in 16-bit) fit the L2 of an
A100 or H100, so a warm repeat reads from L2 what a cold call reads from memory, and whose 16-bit calls are short
enough (tens of microseconds) for launch gaps to show.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from suites.core import gemm
from suites.core.cases import Case, Workload, align_class, require_cuda_timing
from suites.core.precision import DTYPES, TOLERANCE, relative_error
from suites.core.profiles import Profile

SUITE = "matmul"


@dataclass(frozen=True)
class MatmulShape:
    layer: str
    m: int
    n: int
    k: int

    @property
    def text(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def _cubes(base: int) -> list[MatmulShape]:
    return [MatmulShape("square", s, s, s) for s in (base, base + 8, base + 1)]


def _model_layers(tokens: int) -> list[MatmulShape]:
    return [
        MatmulShape("llama7b-mlp-up", tokens, 11008, 4096),
        MatmulShape("llama7b-mlp-down", tokens, 4096, 11008),
        MatmulShape("gpt2-lm-head", tokens, 50257, 768),
        MatmulShape("gpt2-lm-head", tokens, 50304, 768),
    ]


# quick: a 2-core CPU runs every dtype in seconds (CPU float16 matmul runs at a few GFLOP/s);
# full: sizes that fill a large GPU.
SHAPES: dict[Profile, list[MatmulShape]] = {
    Profile.QUICK: _cubes(256) + _model_layers(8),
    Profile.FULL: _cubes(4096) + _model_layers(4096) + [MatmulShape("gpt2-lm-head", 8192, 50304, 768)],
}
# The shapes that are also timed cold and as a CUDA graph, with their warm, eager twin (the levers are CUDA-only, so
# the quick profile, a CPU's, has none).
LEVER_SHAPES: dict[Profile, list[MatmulShape]] = {Profile.QUICK: [],
                                                  Profile.FULL: [MatmulShape("l2-resident", 2048, 2048, 2048)]}
# (cold, graph) of the twins at a lever shape: warm and eager is the baseline of both levers.
TIMINGS = ((True, False), (False, True))


def _build(shape: MatmulShape, dtype: str, timed_on_cuda: bool, device: torch.device) -> Workload:
    if timed_on_cuda:
        require_cuda_timing(device)
    product = gemm.build(shape.m, shape.n, shape.k, dtype, device)
    return Workload(fn=product.fn, error_rel=lambda: relative_error(product.fn(), product.reference()),
                    figures=accumulation_info(dtype))


def accumulation_info(dtype: str) -> dict:
    """`fast_accum` of a float8 case: whether torch._scaled_mm ran cuBLASLt's fast accumulation (it does not, see
    suites.core.gemm.FP8_FAST_ACCUM), so a float8 figure says it is the accurate mode's, not the fastest one's."""
    return {"fast_accum": gemm.FP8_FAST_ACCUM} if dtype == "float8_e4m3fn" else {}


def make_case(shape: MatmulShape, dtype: str, cold: bool = False, graph: bool = False) -> Case:
    """One matmul case; its id is stable across runs and machines (nightly history keys on it): a cold or graph
    twin adds `/cold` or `/graph` to its warm, eager case's id."""
    in_size = DTYPES[dtype].itemsize
    out_size = 2 if dtype == "float8_e4m3fn" else in_size

    align = align_class(shape.m, shape.n, shape.k)
    timing = ("/cold" if cold else "") + ("/graph" if graph else "")
    return Case(
        suite=SUITE,
        id=f"{SUITE}/{shape.layer}/{shape.text}/{dtype}{timing}",
        params={"dtype": dtype, "layer": shape.layer, "shape": shape.text, "align": align,
                "cold": str(cold).lower(), "graph": str(graph).lower()},
        build=functools.partial(_build, shape, dtype, cold or graph),
        flops=2 * shape.m * shape.n * shape.k,
        bytes=(shape.m * shape.k + shape.k * shape.n) * in_size + shape.m * shape.n * out_size,
        peak_dtype=dtype,
        tolerance=TOLERANCE[dtype],
        tf32=dtype == "tf32",
        cold=cold,
        graph=graph,
    )


def cases(profile: str) -> list[Case]:
    """Every matmul case of a profile, all dtypes (the plugin filters by --bench-dtypes), with the cold and graph
    twins at the lever shapes."""
    sizes = Profile(profile).sizes
    shapes = SHAPES[sizes] + [s for s in LEVER_SHAPES[sizes] if s not in SHAPES[sizes]]
    warm = [make_case(shape, dtype) for shape in shapes for dtype in DTYPES]
    return warm + [make_case(shape, dtype, cold, graph) for shape in LEVER_SHAPES[sizes] for dtype in DTYPES
                   for cold, graph in TIMINGS]
