"""`python -m reports trace` on the traces of several ranks: one row per rank, the straggler, and the share of
communication that overlaps compute. Expectations are worked out by hand for two small rank traces; the real
traces of tests/data/traces check the numbering by file order and traces without communication."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.__main__ import main
from reports.format.kineto.events import read_trace
from reports.format.kineto.ranks import spread
from tests.resultfiles import TRACES

BASE_US = 1_700_000_000_000_000


def kernel(name: str, start: float, end: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": BASE_US + start, "dur": end - start,
            "args": {"device": 0, "stream": 7, "correlation": int(start) + 1}}


def rank_trace(tmp_path: Path, rank: int, events: list[dict]) -> Path:
    path = tmp_path / f"rank{rank}.json"
    path.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
                                "traceEvents": events}))
    return path


@pytest.fixture
def two_ranks(tmp_path: Path) -> list[Path]:
    # rank 0: compute [0,40) and [50,60); the all-reduce [30,70) overlaps compute over [30,40) + [50,60) = 20 of 40
    rank0 = rank_trace(tmp_path, 0, [kernel("ampere_bf16_gemm", 0, 40), kernel("vectorized_elementwise", 50, 60),
                                     kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30, 70)])
    # rank 1 computes longer, [0,65): its all-reduce [60,70) is overlapped for 5 of 10
    rank1 = rank_trace(tmp_path, 1, [kernel("ampere_bf16_gemm", 0, 65),
                                     kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60, 70)])
    return [rank1, rank0]  # out of order on purpose: ranks come from the traces


def test_one_row_per_rank_with_overlap_and_straggler(two_ranks):
    found = spread([read_trace(p) for p in two_ranks])
    assert found.ranks_from == "trace"
    assert [r.rank for r in found.ranks] == [0, 1]
    r0, r1 = found.ranks
    assert (r0.compute_us, r0.communication_us, r0.overlapped_us, r0.exposed_communication_us) == (50, 40, 20, 20)
    assert r0.overlap_share == 0.5
    assert (r1.compute_us, r1.communication_us, r1.overlapped_us, r1.overlap_share) == (65, 10, 5, 0.5)
    assert (found.straggler, found.compute_spread_us, found.span_spread_us) == (1, 15, 0)


def test_the_command_prints_the_ranks_and_their_json(two_ranks, capsys):
    assert main(["trace", *map(str, two_ranks)]) == 0
    text = capsys.readouterr().out
    assert "== ranks (numbered by trace)" in text and "straggler: rank 1" in text
    assert main(["trace", "--json", *map(str, two_ranks)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["files"]) == 2 and data["ranks"]["straggler"] == 1
    assert [r["overlap_share"] for r in data["ranks"]["ranks"]] == [0.5, 0.5]


def test_real_traces_without_distinct_ranks_are_numbered_by_file_order():
    """Both real traces say rank 0; neither has communication kernels (a one-rank run's nccl calls launch none)."""
    paths = [TRACES / "critical_path.json.gz", TRACES / "ns_resolution_trace.json.gz"]
    found = spread([read_trace(p) for p in paths])
    assert found.ranks_from == "file order"
    assert [Path(r.file).name for r in found.ranks] == [p.name for p in paths]
    assert all(r.communication_us == 0 and r.overlap_share is None for r in found.ranks)
    assert found.straggler == 1  # the V100 training trace computes far longer than the AlexNet one
