"""The reports on a real 2-rank run (tests/data/dist_cpu_quick.json: `torchrun --standalone --nproc-per-node 2
-m pytest bench/test_collectives.py bench/test_train_step_distributed.py --benchmark-only --device cpu
--bench-profile quick -k "not 8MiB and not 1MiB"` on a 2-core CPU with gloo, telemetry fields dropped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports import levers
from reports.format.load import device_name, load
from reports.table import render

RUN = Path(__file__).resolve().parent / "data" / "dist_cpu_quick.json"


@pytest.fixture(scope="module")
def frame():
    return load([RUN])


def test_a_run_of_several_ranks_is_one_machine_named_with_its_world_size():
    cpu = {"cpu_info": {"model": "EPYC", "torch_threads": 1}}
    assert device_name(cpu | {"distributed": {"world_size": 2, "nodes": 1}}) == "EPYC (1 thread) x 2 ranks"
    assert device_name({"gpu": {"name": "NVIDIA H200"}, "distributed": {"world_size": 16, "nodes": 2}}) == \
        "NVIDIA H200 x 16 ranks on 2 nodes"
    assert device_name(cpu) == "EPYC (1 thread)"  # a single-process run keeps its name


def test_the_collectives_table_shows_world_size_and_bus_bandwidth(frame):
    text = render(frame[frame["group"] == "collectives"], "simple")
    assert "## collectives on AMD EPYC (1 thread) x 2 ranks" in text.splitlines()[0]
    assert text.splitlines()[2].startswith("same on every row: world_size 2")  # said once, not on every row
    header = text.splitlines()[4].split()
    assert {"algbw_gbps", "busbw_gbps", "error_rel"} <= set(header)


def test_the_run_has_every_collective_with_nccl_tests_bandwidths(frame):
    rows = frame[frame["group"] == "collectives"]
    assert set(rows["op"]) == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"}
    assert (rows["world_size"] == 2).all() and (rows["status"] == "ok").all()
    algbw = rows["message_bytes"] / rows["median_s"] / 1e9
    assert rows["algbw_gbps"].to_numpy() == pytest.approx(algbw.to_numpy())
    assert rows["busbw_gbps"].to_numpy() == pytest.approx((algbw * rows["bus_factor"]).to_numpy())


def test_levers_of_ddp_and_fsdp_are_measured(frame):
    found = {(e.lever, e.comparison.split(",")[-1].strip()): e for e in levers.effects(frame)}
    for lever in ("DDP bucket size", "DDP no_sync while accumulating", "FSDP param dtype", "FSDP reduce dtype",
                  "FSDP reshard after forward"):
        assert found[(lever, "speed-up (baseline time / time)")].pairs == 1, lever
    view = found[("DDP gradient as bucket view", "bytes per parameter ratio (variant / baseline)")]
    assert view.ratio == pytest.approx(16 / 20, rel=1e-3)  # the gradients are the buckets: one copy less


def test_fsdp_holds_half_of_ddp_per_rank_on_two_ranks(frame):
    by = {e.lever: e for e in levers.effects(frame)}
    assert by["FSDP bytes/param per rank"].ratio == pytest.approx(8.0, rel=1e-3)
    assert by["DDP bytes/param per rank"].ratio == pytest.approx(20.0, rel=1e-3)
    assert by["bytes/param"].ratio == pytest.approx(16.0, rel=1e-3)  # the local reference, one rank holding everything
    assert by["DDP scaling efficiency"].pairs == 5 and by["FSDP scaling efficiency"].pairs == 4
