"""The process group a distributed case runs in, as the case sees it: world size, rank, or why it cannot run."""

from __future__ import annotations

import torch.distributed as dist

from suites.core.cases import Unsupported

NEEDS_TORCHRUN = ("needs a process group of 2 or more ranks: launch with "
                  "`torchrun --nproc-per-node N -m pytest bench/... --benchmark-only`")


def require() -> tuple[int, int]:
    """(rank, world size) of the joined process group; Unsupported in a single-process run."""
    if not dist.is_initialized() or dist.get_world_size() < 2:
        raise Unsupported(NEEDS_TORCHRUN)
    return dist.get_rank(), dist.get_world_size()
