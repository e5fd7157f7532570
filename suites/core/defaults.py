"""The defaults that the command line states and the measuring code uses, without importing torch.

The pytest plugin is registered in every pytest run of an environment that installs this project (its `pytest11`
entry point), so declaring its options must cost nothing: no torch import (seconds), no CUDA. The values those
options default to live here, and the modules that use them import them from here, so each has one source.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path


class Profile(str, Enum):
    """A profile's name (`--bench-profile`); it compares, hashes and formats as its plain string ("quick" ==
    Profile.QUICK). What each profile measures with is in suites/core/profiles.py."""

    QUICK = "quick"
    FULL = "full"
    EXHAUSTIVE = "exhaustive"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def sizes(self) -> Profile:
        """The profile whose shapes, models, batches, rules and searches this one measures with: exhaustive is the
        full sweep plus the axes full leaves out because they repeat on one GPU family (float16 where it runs
        bfloat16's kernels, the math attention backend: docs/conv_attention.md), so only the suites that have such
        axes tell the two apart, and every other table keys on `sizes`."""
        return Profile.FULL if self is Profile.EXHAUSTIVE else self


PROFILES = tuple(p.value for p in Profile)


def default_profile(device_type: str) -> Profile:
    """The profile a run gets when `--bench-profile` is not given: the real sweep on a CUDA device, which is what
    the main job exists for, and the short one elsewhere (a CPU runs the full sweep's shapes for hours)."""
    return Profile.FULL if device_type == "cuda" else Profile.QUICK
# `--bench-device`'s grammar, read by the plugin (suites/core/devices.py) and the GPU check's plan alike: `auto`,
# `cpu`, `cuda` or `cuda:N` with nothing after (not `cuda:0:junk`).
CUDA_DEVICE = re.compile(r"cuda(?::([0-9]{1,4}))?")


def device_type(option: str) -> str | None:
    """`cpu` or `cuda` for a device option that names one (`cuda:1` is `cuda`); None for `auto` or a malformed
    one."""
    if option == "cpu":
        return "cpu"
    return "cuda" if CUDA_DEVICE.fullmatch(option) else None
# The largest-batch search's memory budget on a GPU in the full profile when --bench-mem-budget is not given: an
# A100-40GB's memory, so that the answers compare across GPUs and a 141 GB one does not search batches whose steps
# take tens of seconds each (fp32 GPT-2 with checkpointing: about 600 there, 27 s per step).
CUDA_SEARCH_BUDGET = 40 * 2**30
TELEMETRY_INTERVAL_MS = 20.0  # NVML sampling interval during a measurement
DIST_TIMEOUT_S = 300.0  # under torchrun: how long any collective may wait for the other ranks
NIGHTLY_ROUNDS = 3  # --bench-rounds of the nightly workflow


def achievable_cache() -> Path:
    """$XDG_CACHE_HOME/torchbench-levers/achievable (~/.cache/...): per user and machine, outside the results."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "torchbench-levers" / "achievable"
