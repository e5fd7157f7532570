"""The matmul suite: C = A @ B over dtypes and shape classes, with 2MNK FLOPs and a float64 reference.

Shapes: cubes in the three `align` classes (a multiple of 64, of 8 only, and odd: 4096, 4104, 4097 in the full
profile) and layers of real models, where alignment is what the model designer chose: LLaMA-7B's MLP
(4096 -> 11008) and GPT-2's tied output head over the raw vocabulary (50257) against the padded one (50304).
`shape` is written MxNxK: A is MxK, B is KxN.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from suites.core.cases import Case, Unsupported, Workload, align_class
from suites.core.precision import DTYPES, TOLERANCE, relative_error, tf32_unsupported

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
SHAPES: dict[str, list[Shape]] = {
    "quick": _cubes(256) + _model_layers(8),
    "full": _cubes(4096) + _model_layers(4096) + [Shape("gpt2-lm-head", 8192, 50304, 768)],
}


def fp8_support(device: torch.device) -> str | None:
    """None when torch._scaled_mm can run float8 here, else why not."""
    if device.type != "cuda":
        return "float8_e4m3fn matmul needs a CUDA GPU of compute capability 8.9 or newer (torch._scaled_mm)"
    cap = torch.cuda.get_device_capability(device)
    if cap < (8, 9):
        return f"float8_e4m3fn needs compute capability 8.9 or newer; this GPU is {cap[0]}.{cap[1]}"
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm"
    return None


def _support(dtype: str, device: torch.device) -> str | None:
    if dtype == "tf32":
        return tf32_unsupported(device)
    if dtype == "float8_e4m3fn":
        return fp8_support(device)
    return None


def _random(rows: int, cols: int, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """Standard-normal float32 values made on the CPU with a fixed seed, so every device sees the same inputs."""
    return torch.randn(rows, cols, generator=generator).to(device)


def _build_dense(shape: Shape, dtype: str, device: torch.device) -> Workload:
    gen = torch.Generator().manual_seed(0)
    a = _random(shape.m, shape.k, device, gen).to(DTYPES[dtype])
    b = _random(shape.k, shape.n, device, gen).to(DTYPES[dtype])

    def error_rel() -> float:
        return relative_error(a @ b, a.double() @ b.double())

    return Workload(fn=lambda: a @ b, error_rel=error_rel)


def _build_fp8(shape: Shape, device: torch.device) -> Workload:
    """Per-tensor scaled float8: A row-major, B column-major (what cuBLASLt's fp8 kernels take), bfloat16 out."""
    gen = torch.Generator().manual_seed(0)
    a32, b32 = _random(shape.m, shape.k, device, gen), _random(shape.k, shape.n, device, gen)
    fmax = torch.finfo(torch.float8_e4m3fn).max
    scale_a, scale_b = a32.abs().max() / fmax, b32.abs().max() / fmax
    a = (a32 / scale_a).to(torch.float8_e4m3fn)
    b = (b32 / scale_b).to(torch.float8_e4m3fn).t().contiguous().t()

    def run() -> torch.Tensor:
        out = torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
        return out[0] if isinstance(out, tuple) else out  # torch < 2.5 returned (out, amax)

    try:
        run()
    except RuntimeError as exc:  # e.g. dimensions not multiples of 16
        raise Unsupported(f"torch._scaled_mm rejects {shape.text}: {str(exc).splitlines()[0]}") from exc

    def error_rel() -> float:
        ref = (a.double() * scale_a.double()) @ (b.double() * scale_b.double())
        return relative_error(run(), ref)

    return Workload(fn=run, error_rel=error_rel)


def make_case(shape: Shape, dtype: str) -> Case:
    """One matmul case; its id is stable across runs and machines (nightly history keys on it)."""
    in_size = DTYPES[dtype].itemsize
    out_size = 2 if dtype == "float8_e4m3fn" else in_size

    def build(device: torch.device) -> Workload:
        reason = _support(dtype, device)
        if reason:
            raise Unsupported(reason)
        return _build_fp8(shape, device) if dtype == "float8_e4m3fn" else _build_dense(shape, dtype, device)

    align = align_class(shape.m, shape.n, shape.k)
    return Case(
        suite=SUITE,
        id=f"{SUITE}/{shape.layer}/{shape.text}/{dtype}",
        params={"dtype": dtype, "layer": shape.layer, "shape": shape.text, "align": align},
        build=build,
        flops=2 * shape.m * shape.n * shape.k,
        bytes=(shape.m * shape.k + shape.k * shape.n) * in_size + shape.m * shape.n * out_size,
        peak_dtype=dtype,
        tolerance=TOLERANCE[dtype],
        tf32=dtype == "tf32",
    )


def cases(profile: str) -> list[Case]:
    """Every matmul case of a profile, all dtypes (the plugin filters by --bench-dtypes)."""
    return [make_case(shape, dtype) for shape in SHAPES[profile] for dtype in DTYPES]
