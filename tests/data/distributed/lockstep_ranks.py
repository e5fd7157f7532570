"""The two gloo ranks of tests/test_distributed.py's test of RankLockstep, started by torch.multiprocessing.spawn:
a module of their own, so that each fresh rank imports what it runs and not the test module (its other suites and
tests/runs.py's reports), half a second less of start-up per rank."""

import json
from pathlib import Path

import torch
import torch.distributed as dist

from suites.core.measurement import Measurement
from suites.core.profiles import rules
from suites.harness import distributed


def agree_and_reduce(rank: int, init: str, out: str) -> None:
    """One of two gloo ranks: offer a hold, then reduce four samples (rank 1 slower on the last two)."""
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        world = distributed.World(rank, 2, rank, 2, 1, "gloo", ("h", "h"))
        lockstep = distributed.RankLockstep(world, torch.device("cpu"))
        hold = lockstep.agree([1e-4, 3e-3][rank])
        rule = rules("quick").stop.counted(4)
        mine = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 2.0, 2.0]][rank]
        m = lockstep.reduce(Measurement(mine, "cuda_event", 1, "count", rule))
        Path(out, f"{rank}.json").write_text(json.dumps({"hold": hold, "samples": m.samples_s,
                                                         "reason": m.stop_reason, "converged": m.converged,
                                                         "own": lockstep.own_median_s}))
    finally:
        dist.destroy_process_group()
