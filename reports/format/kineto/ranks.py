"""The traces of several ranks of one run side by side: one row per rank, the spread between them, the straggler.

A collective finishes on every rank when the last rank arrives, so a rank that computes longer makes the others'
communication kernels longer (they wait inside them). Per rank (all times in microseconds, over its GPU events):
- compute = union of the non-communication kernels; communication = union of the nccl/rccl/hccl kernels;
- overlapped = the part of communication that runs while compute runs too (|comm| + |compute| - |comm U
  compute|), `overlap_share` = overlapped / communication (None without communication): how much of the
  communication the run hides behind compute, as DDP's bucketed all-reduce during backward does;
- exposed communication = communication - overlapped, time the rank's GPU only communicates (or waits).
Between ranks: the straggler is the rank with the most compute, and `compute_spread_us` (its compute minus the
least) is what the others wait for; `span_spread_us` the same for the traces' spans.

A rank is the trace's `distributedInfo.rank`; where the traces do not name distinct ranks, their order on the
command line numbers them (and the result says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from reports.format.kineto.events import KERNEL, Trace
from reports.format.kineto.kernels import COMMUNICATION, classify_kernel
from reports.format.kineto.summary import union_length


@dataclass(frozen=True)
class RankFigures:
    rank: int
    file: str
    span_us: float
    busy_us: float
    compute_us: float
    communication_us: float
    overlapped_us: float
    exposed_communication_us: float
    overlap_share: float | None


@dataclass(frozen=True)
class RankSpread:
    ranks: list[RankFigures]
    ranks_from: str  # "trace" (distributedInfo) or "file order"
    straggler: int | None
    compute_spread_us: float
    span_spread_us: float

    def to_json(self) -> dict:
        return asdict(self)


def rank_figures(trace: Trace, rank: int) -> RankFigures:
    """One rank's compute, communication and their overlap over all GPU events of its trace."""
    gpu = trace.gpu
    if len(gpu) == 0:
        return RankFigures(rank, str(trace.path), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None)
    is_comm_name = np.array([classify_kernel(name) == COMMUNICATION for name in trace.names], dtype=bool)
    kernel = gpu.kind == KERNEL
    comm = kernel & (is_comm_name[gpu.name] if len(trace.names) else False)
    compute = kernel & ~comm
    comm_us = union_length(gpu.start[comm], gpu.end[comm])
    compute_us = union_length(gpu.start[compute], gpu.end[compute])
    both = comm | compute
    overlapped = comm_us + compute_us - union_length(gpu.start[both], gpu.end[both])
    return RankFigures(rank, str(trace.path), float(gpu.end.max() - gpu.start.min()),
                       union_length(gpu.start, gpu.end), compute_us, comm_us, overlapped, comm_us - overlapped,
                       overlapped / comm_us if comm_us > 0 else None)


def spread(traces: Sequence[Trace]) -> RankSpread:
    """The ranks of `traces` (one trace per rank) and how far apart they are."""
    named = [t.rank for t in traces]
    from_trace = None not in named and len(set(named)) == len(named)
    ranks = [rank_figures(t, r) for t, r in zip(traces, named if from_trace else range(len(traces)), strict=True)]
    ranks.sort(key=lambda row: row.rank)
    with_gpu = [row for row in ranks if row.span_us > 0]
    if not with_gpu:
        return RankSpread(ranks, "trace" if from_trace else "file order", None, 0.0, 0.0)
    compute = [row.compute_us for row in with_gpu]
    spans = [row.span_us for row in with_gpu]
    straggler = with_gpu[int(np.argmax(compute))].rank
    return RankSpread(ranks, "trace" if from_trace else "file order", straggler, max(compute) - min(compute),
                      max(spans) - min(spans))
