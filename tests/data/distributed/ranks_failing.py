"""Cases that fail on one rank only, run by tests/test_distributed.py under torchrun (not collected otherwise).

The failures are real exceptions raised on rank 1; what is checked is how the other rank and the run react.
"""

import os
import time

import torch.distributed as dist

from suites.core.cases import Case, Unsupported, Workload

RANK = int(os.environ.get("RANK", "0"))
# `hang`: rank 1 stops answering inside the timed loop; `collect`: rank 1 collects one case more; otherwise rank 1
# raises inside the timed loop.
MODE = os.environ.get("RANKS_FAILING_MODE", "raise")


def build_fails_on_rank_1(device):
    if RANK == 1:
        raise Unsupported("this rank lacks the feature")
    return Workload(fn=dist.barrier)


def build_ok(device):
    return Workload(fn=dist.barrier)


def build_breaks_in_loop(device):
    calls = []

    def fn():
        calls.append(1)
        if RANK == 1 and len(calls) > 3:
            if MODE == "hang":
                time.sleep(3600)
            raise RuntimeError("injected failure in the timed loop")
        dist.barrier()

    return Workload(fn=fn)


CASES = [Case("failing", f"failing/{name}", {"name": name}, build)
         for name, build in (("build", build_fails_on_rank_1), ("ok", build_ok), ("loop", build_breaks_in_loop))]
if MODE == "collect" and RANK == 1:
    CASES.insert(1, Case("failing", "failing/extra", {"name": "extra"}, build_ok))


def pytest_generate_tests(metafunc):
    metafunc.parametrize("case", CASES, ids=[c.id for c in CASES])


def test_failing(case, run_case):
    run_case(case)
