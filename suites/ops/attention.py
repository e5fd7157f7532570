"""The attention suite: attention as users write it (`naive`) against SDPA with each backend forced, in time and memory.

`naive` is nanoGPT's: the score matrix QK^T is materialized, scaled, masked, softmaxed and multiplied by V, so its
memory grows with the square of the sequence. The SDPA implementations run
`torch.nn.functional.scaled_dot_product_attention` inside `torch.nn.attention.sdpa_kernel(<one backend>)`, so a
silent fallback to another kernel is impossible: a backend the device or build lacks fails, and the case is
skipped with the reasons torch gives (its warnings and its error). FLOPs are counted as FlashAttention's benchmarks
count them: 4 x b x s^2 x h x d forward, halved when causal, and the backward 2.5 x the forward (fwd_bwd 3.5 x).
Every implementation is checked against float64 attention on the same random inputs, output and gradients.

Two timing levers, CUDA only (`cold`, `graph` params): the L2 flushed before every call, and the calls replayed as
a CUDA graph, against the warm, eager twin. Naive attention launches five kernels per forward, so at short
sequences its launches weigh; they run in the full profile for naive and flash, bfloat16, forward, at the shortest
sequence of the memory sweep (`LEVER_SEQ`).

Two sweeps: at a constant token count (batch x seq = 16k, model width 2048, FlashAttention's benchmark setting)
the work per token grows with the sequence; at a fixed batch the memory of `naive` grows 4x per doubling of the
sequence and that of the fused kernels 2x (their output and softmax statistics only).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from suites.core import reuse
from suites.core.cases import Case, Unsupported, Workload, require_cuda_timing
from suites.core.memory import cpu_memory_info
from suites.core.precision import DTYPES, TOLERANCE
from suites.core.profiles import Profile
from suites.ops.attention_error import FORMATS, naive_tolerance
from suites.ops.passes import PASSES, float64_leaves, run_pass, seeded_inputs, worst_error

SUITE = "attention"
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
IMPLS = ("naive", *BACKENDS)
# The fused kernels are 16-bit only on GPUs; float32 runs where it is a real choice (as written, and the math path).
IMPL_DTYPES = {impl: ("float16", "bfloat16", "float32") if impl in ("naive", "math") else ("float16", "bfloat16")
               for impl in IMPLS}
DTYPE_AXIS = ("bfloat16", "float16", "float32")
# The full profile's constant-token sweep: every kernel in bfloat16, and naive also in float32 (the 16-bit lever's
# baseline, whose rate differs by GPU family). On every GPU since Ampere float16 runs bfloat16's kernels at the same
# tensor-core rate (flash, efficient and cudnn are one template per 16-bit type; naive's gemms are cuBLAS's), and
# the math backend composes naive's own gemms and softmax: on Hopper those repeat what the sweep measures, so full
# runs them at the PATH_POINTS only, where a family on which they differ shows it, and `exhaustive` sweeps them.
FULL_SWEEP_DTYPES = {"naive": ("bfloat16", "float32"), "flash": ("bfloat16",), "efficient": ("bfloat16",),
                     "cudnn": ("bfloat16",)}
BACKWARD_FACTOR = 2.5  # backward FLOPs per forward FLOP, as FlashAttention's benchmarks count them
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
LEVER_SEQ = SEQS[0]  # the cold and graph twins run where launches and L2 weigh most: the shortest sequence


@dataclass(frozen=True)
class AttentionShape:
    """Query, key and value are batch x heads x seq x head_dim (self-attention: one sequence length)."""

    batch: int
    heads: int
    seq: int
    head_dim: int

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq, self.head_dim)

    @property
    def text(self) -> str:
        return "x".join(map(str, self.dims))


def forward_flops(shape: AttentionShape, causal: bool) -> float:
    """4 x b x s^2 x h x d (two matmuls of 2 x b x h x s^2 x d), halved when causal."""
    flops = 4 * shape.batch * shape.seq**2 * shape.heads * shape.head_dim
    return flops / 2 if causal else flops


def pass_flops(shape: AttentionShape, causal: bool, pass_: str) -> float:
    return forward_flops(shape, causal) * (1 + BACKWARD_FACTOR if pass_ == "fwd_bwd" else 1)


def causal_mask(first_row: int, rows: int, seq: int, device: torch.device) -> torch.Tensor:
    """True where a key comes after its query (masked out), for query rows first_row .. first_row + rows - 1."""
    queries = torch.arange(first_row, first_row + rows, device=device)[:, None]
    return torch.arange(seq, device=device)[None, :] > queries


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention as nanoGPT writes it: every intermediate is a b x h x s x s tensor."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is not None:
        att = att.masked_fill(mask, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ v


def sdpa(backend: SDPBackend, causal: bool, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """scaled_dot_product_attention with only `backend` allowed."""
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, grad_out: torch.Tensor | None,
              max_elements: int = 2**26) -> list[torch.Tensor]:
    """Float64 output (and dq, dk, dv for a grad_out), a block of query rows at a time: the whole float64 score
    matrix at 16k tokens would need 32 GiB for 16 heads. Blocks of queries are independent in the output and in dq;
    dk and dv are sums over them."""
    grads = grad_out is not None
    q64 = q.detach().double()
    k64, v64 = float64_leaves((k, v), grads)
    batch, heads, seq, _ = q.shape
    rows = max(1, max_elements // (batch * heads * seq))
    outs, dqs, dk, dv = [], [], torch.zeros_like(k64), torch.zeros_like(v64)
    for first in range(0, seq, rows):
        block = q64[:, :, first:first + rows].requires_grad_(grads)
        mask = causal_mask(first, block.shape[2], seq, q.device) if causal else None
        out = naive_attention(block, k64, v64, mask)
        if grads:
            dq_block, dk_block, dv_block = torch.autograd.grad(
                out, (block, k64, v64), grad_out[:, :, first:first + rows].double())
            dqs.append(dq_block)
            dk += dk_block
            dv += dv_block
        outs.append(out.detach())
    result = [torch.cat(outs, dim=2)]
    return [*result, torch.cat(dqs, dim=2), dk, dv] if grads else result


# How torch and cuDNN say that a forced backend cannot take a case: no kernel at all, or (cuDNN's SDPA) no
# execution plan for this shape, dtype or GPU.
_NO_KERNEL = ("no available kernel", "no viable backend", "no valid execution plan")
_TRIGGERED = re.compile(r"\s*\(Triggered internally at .*$", re.DOTALL)


def probe(impl: str, run: Callable[[], object]) -> None:
    """Run once; when the forced backend cannot take the case, raise Unsupported with torch's reasons."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run()
        except RuntimeError as exc:
            if not any(text in str(exc).lower() for text in _NO_KERNEL):
                raise
            said = [_TRIGGERED.sub("", str(w.message)).strip() for w in caught] + [str(exc).strip().splitlines()[0]]
            raise Unsupported(f"sdpa_kernel({impl}): {'; '.join(dict.fromkeys(s for s in said if s))}") from exc


@dataclass(frozen=True)
class Point:
    """Everything that defines a case besides implementation and dtype."""

    shape: AttentionShape
    causal: bool
    pass_: str

    @property
    def mask(self) -> str:
        return "causal" if self.causal else "noncausal"


# Where the full profile runs every implementation in each of its dtypes (FULL_SWEEP_DTYPES): a point of its
# constant-token sweep at a language model's training shape (4 x 4096 tokens, 16 heads of 128, causal), both passes.
PATH_POINTS = tuple(Point(AttentionShape(4, 16, 4096, 128), True, pass_) for pass_ in PASSES)


SEED = 0


def _build(impl: str, dtype: str, point: Point, timed_on_cuda: bool, device: torch.device) -> Workload:
    if timed_on_cuda:
        require_cuda_timing(device)
    group = reference_group(point, dtype)
    grads = point.pass_ == "fwd_bwd"
    q, k, v, *rest = seeded_inputs([point.shape.dims] * (4 if grads else 3), SEED, device, DTYPES[dtype])
    q, k, v = (t.requires_grad_(grads) for t in (q, k, v))
    grad_out = rest[0] if grads else None
    if impl == "naive":
        mask = causal_mask(0, point.shape.seq, point.shape.seq, device) if point.causal else None
        forward = partial(naive_attention, mask=mask)
    else:
        forward = partial(sdpa, BACKENDS[impl], point.causal)

    def run() -> list[torch.Tensor]:
        return run_pass(forward, (q, k, v), grad_out)

    def error_rel() -> float:
        expected = reuse.SHELF.get(group, lambda: reference(q, k, v, point.causal, grad_out))
        return worst_error(run(), expected)

    if impl in BACKENDS and device.type != "meta":
        probe(impl, run)
    elif device.type == "cuda":
        run()  # cuBLAS allocates its workspace in the first call: before the runner's memory baseline
    return Workload(fn=run, error_rel=error_rel, figures=cpu_memory_info(run, device))


def tolerance(impl: str, dtype: str, point: Point) -> float:
    """The dtype's tolerance; for naive attention in 16 bits, the error model's where that is larger: P and dS
    fall into float16's subnormals at long sequences (suites/ops/attention_error.py)."""
    if impl != "naive" or dtype not in FORMATS:
        return TOLERANCE[dtype]
    shape = point.shape
    return max(TOLERANCE[dtype], naive_tolerance(dtype, shape.seq, shape.head_dim, point.pass_ == "fwd_bwd"))


def reference_group(point: Point, dtype: str) -> tuple:
    """What the implementations of one point share: identical inputs in one dtype, hence one float64 reference."""
    return (SUITE, point, dtype, SEED)


def make_case(impl: str, dtype: str, point: Point, cold: bool = False, graph: bool = False) -> Case:
    """One attention case; its id is stable across runs and machines (nightly history keys on it): a cold or graph
    twin adds `/cold` or `/graph` to its warm, eager case's id."""
    shape = point.shape
    timing = ("/cold" if cold else "") + ("/graph" if graph else "")
    return Case(
        suite=SUITE,
        id=f"{SUITE}/{impl}/{dtype}/{shape.text}/{point.mask}/{point.pass_}{timing}",
        params={"impl": impl, "dtype": dtype, "shape": shape.text, "batch": str(shape.batch),
                "heads": str(shape.heads), "seq": str(shape.seq), "head_dim": str(shape.head_dim),
                "causal": str(point.causal).lower(), "pass": point.pass_, "cold": str(cold).lower(),
                "graph": str(graph).lower()},
        build=partial(_build, impl, dtype, point, cold or graph),
        flops=pass_flops(shape, point.causal, point.pass_),
        peak_dtype=dtype,
        tolerance=tolerance(impl, dtype, point),
        cold=cold,
        graph=graph,
        reuse_group=reference_group(point, dtype),
    )


def timing_twins(point: Point, impls: tuple[str, ...] = ("naive", "flash"), dtype: str = "bfloat16") -> list[Case]:
    """The cold and the graph twin of each implementation at one point (their warm, eager cases are in a sweep)."""
    return [make_case(impl, dtype, point, cold, not cold) for impl in impls for cold in (True, False)]


def fixed_batch(batch: int, heads: int, head_dim: int, seqs: tuple[int, ...], dtype: str = "bfloat16") -> list[Case]:
    """Every implementation over sequence lengths at one batch size, forward, no mask: the memory sweep. The
    implementations of one sequence length follow each other: they share inputs and reference (reference_group)."""
    return [make_case(impl, dtype, Point(AttentionShape(batch, heads, seq, head_dim), False, "fwd"))
            for seq in seqs for impl in IMPLS]


def constant_tokens(tokens: int, width: int, seqs: tuple[int, ...],
                    dtypes: Mapping[str, tuple[str, ...]] = IMPL_DTYPES, every_path_at: Collection[Point] = ()
                    ) -> list[Case]:
    """The implementations in their `dtypes` (every implementation in each of its dtypes at the points of
    `every_path_at`) over head dims, sequences, masks and passes with batch x seq = tokens and heads x head_dim =
    width. Ordered so that cases of one input shape follow each other, and within them the implementations of one
    mask, pass and dtype (reference_group): the inputs are drawn once per shape, the float64 reference computed
    once per group."""
    points = [Point(AttentionShape(tokens // seq, width // head_dim, seq, head_dim), causal, pass_)
              for head_dim in (64, 128) for seq in seqs for causal in (False, True) for pass_ in PASSES]
    return [make_case(impl, dtype, point) for point in points for dtype in DTYPE_AXIS for impl in IMPLS
            if dtype in (IMPL_DTYPES if point in every_path_at else dtypes).get(impl, ())]


def every_path(point: Point) -> list[Case]:
    """Every implementation in each of its dtypes at one point (the implementations of a dtype together)."""
    return [make_case(impl, dtype, point) for dtype in DTYPE_AXIS for impl in IMPLS if dtype in IMPL_DTYPES[impl]]


def cases(profile: str) -> list[Case]:
    """quick: the memory sweep at a fixed batch (bfloat16, 128 to 512 tokens, what a 2-core CPU runs in seconds)
    and every implementation and dtype once at a small shape, causal, forward and backward; full: the constant-token
    sweep in FULL_SWEEP_DTYPES with every path at PATH_POINTS, the memory sweep at batch 1 up to 16k tokens, and
    the timing twins at its shortest sequence; exhaustive: the same with every path at every point of the
    constant-token sweep. A case in two sweeps is listed once."""
    if profile == Profile.QUICK:
        found = (fixed_batch(4, 8, 64, (128, 256, 512))
                 + every_path(Point(AttentionShape(1, 2, 128, 128), True, "fwd_bwd")))
    else:
        sweep = IMPL_DTYPES if profile == Profile.EXHAUSTIVE else FULL_SWEEP_DTYPES
        found = (constant_tokens(16384, 2048, SEQS, sweep, PATH_POINTS) + fixed_batch(1, 16, 128, SEQS)
                 + timing_twins(Point(AttentionShape(1, 16, LEVER_SEQ, 128), False, "fwd")))
    return list({case.id: case for case in found}.values())
