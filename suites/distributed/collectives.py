"""The collectives suite: all_reduce, all_gather, reduce_scatter, all_to_all and broadcast across message sizes.

Time, algorithm bandwidth and bus bandwidth follow nccl-tests (PERFORMANCE.md there): the message size S is the
largest buffer of the operation (the all_reduce and broadcast buffer, the all_gather output, the reduce_scatter
input, one rank's all_to_all input), algbw = S / t, and busbw = algbw x a factor that makes figures of different
collectives and world sizes comparable with the links' bandwidth: 2(n-1)/n for all_reduce, (n-1)/n for
all_gather, reduce_scatter and all_to_all, 1 for broadcast. Like nccl-tests, all_reduce and broadcast run in
place, so the timed buffer's values drift from call to call; the result is checked on a fresh buffer once after
the timing: rank q contributes (q + 1) x a random tensor from a shared seed, so every rank knows what every
other rank sent and computes the expected result in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suites.core.cases import Case, Workload
from suites.core.precision import DTYPES
from suites.core.profiles import Profile
from suites.distributed import group

SUITE = "collectives"
SEED = 0
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
COLLECTIVE_DTYPES = ("float32", "bfloat16")
KiB, MiB = 2**10, 2**20
# torch 2.13 renamed reduce_scatter_tensor and all_gather_into_tensor (now deprecated) to *_single
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
SIZES: dict[Profile, list[int]] = {
    Profile.QUICK: [4 * KiB, 64 * KiB, 1 * MiB, 8 * MiB],
    Profile.FULL: [4 * KiB * 4**k for k in range(10)],  # 4 KiB to 1 GiB
}
# The reductions add n values in the collective's dtype; the other collectives copy, exactly.
REDUCING = ("all_reduce", "reduce_scatter")
TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2}


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for `op` on `n` ranks."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


def bandwidths(op: str, n: int, message_bytes: int, seconds: float) -> dict[str, float]:
    """`algbw_gbps` and `busbw_gbps` (GB/s, 1e9 bytes) of one call of `seconds`."""
    algbw = message_bytes / seconds / 1e9
    return {"algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, n)}


def size_label(nbytes: int) -> str:
    return f"{nbytes // MiB}MiB" if nbytes >= MiB else f"{nbytes // KiB}KiB"


@dataclass
class Buffers:
    """What one rank sends and receives; `reset` restores the input of an in-place collective."""

    run: Callable[[], object]
    output: torch.Tensor
    expected: Callable[[], torch.Tensor]  # float64, from every rank's known input
    reset: Callable[[], None]


def contribution(base: torch.Tensor, rank: int, dtype: torch.dtype) -> torch.Tensor:
    """What rank `rank` sends: (rank + 1) x the shared random tensor, in the collective's dtype."""
    return ((rank + 1) * base).to(dtype)


def _sum_of_contributions(base: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    total = torch.zeros_like(base, dtype=torch.float64)
    for q in range(n):
        total += contribution(base, q, dtype).double()
    return total


def buffers(op: str, numel: int, dtype: torch.dtype, rank: int, n: int, device: torch.device) -> Buffers:
    """The tensors and the call of `op` for a message of `numel` elements (a multiple of n)."""
    gen = torch.Generator(device="cpu").manual_seed(SEED)
    chunk = numel // n
    if op == "all_gather":  # the message is the output; each rank sends one chunk of it
        base = torch.randn(chunk, generator=gen, dtype=torch.float64).to(device)
        src, out = contribution(base, rank, dtype), torch.empty(numel, dtype=dtype, device=device)
        return Buffers(lambda: _all_gather(out, src), out,
                       lambda: torch.cat([contribution(base, q, dtype).double() for q in range(n)]), lambda: None)
    base = torch.randn(numel, generator=gen, dtype=torch.float64).to(device)
    src = contribution(base, rank, dtype)
    if op == "reduce_scatter":
        out = torch.empty(chunk, dtype=dtype, device=device)
        return Buffers(lambda: _reduce_scatter(out, src), out,
                       lambda: _sum_of_contributions(base, n, dtype).chunk(n)[rank], lambda: None)
    if op == "all_to_all":  # chunk p of rank r's output is chunk r of rank p's input
        out = torch.empty(numel, dtype=dtype, device=device)
        return Buffers(lambda: dist.all_to_all_single(out, src), out,
                       lambda: torch.cat([contribution(base, p, dtype).double().chunk(n)[rank] for p in range(n)]),
                       lambda: None)
    buf = src.clone()

    def reset() -> None:
        buf.copy_(src)

    if op == "all_reduce":
        return Buffers(lambda: dist.all_reduce(buf), buf, lambda: _sum_of_contributions(base, n, dtype), reset)
    if op == "broadcast":
        return Buffers(lambda: dist.broadcast(buf, src=0), buf, lambda: contribution(base, 0, dtype).double(), reset)
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


def _build(op: str, dtype_name: str, nbytes: int) -> Callable[[torch.device], Workload]:
    def build(device: torch.device) -> Workload:
        rank, n = group.require()
        dtype = DTYPES[dtype_name]
        numel = max(n, nbytes // dtype.itemsize // n * n)
        b = buffers(op, numel, dtype, rank, n, device)
        message_bytes = numel * dtype.itemsize

        def error_rel() -> float:
            b.reset()
            b.run()
            expected = b.expected()
            return float(torch.linalg.vector_norm(b.output.double() - expected) / torch.linalg.vector_norm(expected))

        info = {"op": op, "message_bytes": message_bytes, "world_size": n, "bus_factor": bus_factor(op, n)}
        return Workload(fn=b.run, error_rel=error_rel, figures=info,
                        rates=lambda median_s, _peak: bandwidths(op, n, message_bytes, median_s))

    return build


def case(op: str, dtype_name: str, nbytes: int) -> Case:
    params = {"op": op, "dtype": dtype_name, "size": size_label(nbytes)}
    return Case(suite=SUITE, id=f"{SUITE}/{op}/{dtype_name}/{params['size']}", params=params,
                build=_build(op, dtype_name, nbytes), tolerance=TOLERANCE[dtype_name] if op in REDUCING else 0.0)


def cases(profile: str) -> list[Case]:
    """Every collective in float32 and bfloat16 at the profile's message sizes."""
    return [case(op, dt, size) for op in OPS for dt in COLLECTIVE_DTYPES for size in SIZES[Profile(profile).sizes]]

