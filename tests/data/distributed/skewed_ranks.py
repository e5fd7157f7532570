"""A 4 KiB all_reduce whose rank 1 leaves every barrier 50 ms late, run by tests/test_distributed.py under torchrun
(not collected otherwise): hosts leave a barrier apart, and the first collective of the earliest rank waits for
the latest inside its window. The skew is real time on a real gloo group; only its size is made to stand out."""

import os
import time

from suites.distributed import collectives
from suites.harness import distributed

SKEW_S = 50e-3
RANK = int(os.environ.get("RANK", "0"))
_barrier = distributed.RankLockstep.before_sample


def late_on_rank_1(self) -> None:
    _barrier(self)
    if RANK == 1:
        time.sleep(SKEW_S)


def test_skewed(run_case, monkeypatch):
    monkeypatch.setattr(distributed.RankLockstep, "before_sample", late_on_rank_1)  # this case's barriers only
    info = run_case(collectives.case("all_reduce", "float32", 4 * collectives.KiB)).info
    assert info["status"] == "ok", info
