"""What a profile is (`--bench-profile quick|full`): every measurement rule the profile decides, in one place.

A profile is how much a run may spend per case. `quick` is minutes for the whole suite on a 2-core CPU (CI, a
laptop); `full` is the real sweep for a GPU. Per profile (`Rules`):

- `stop`: the stopping rule of one measurement of a case (suites/core/stopping.py explains the rule);
- `round`: the rule of each round under `--bench-rounds N` (suites/harness/bench_rounds.py), shorter than `stop` so
  that N rounds cost about what one measurement does;
- `lockstep_samples`: the samples every rank takes under torchrun (a count, as nccl-tests does;
  suites/harness/distributed.py), judged against the `stop` target;
- `search`: the achievable-peak search per device type (suites/core/achievable.py).

The suites' own sizes per profile (shapes, models, batch limits) stay with each suite, keyed by `Profile` (its
names are declared in suites/core/defaults.py, which the command line reads without importing torch).
Two rules belong to no profile and live here too, so that every rule literal has one home: `SMOKE`, one sample
of everything (`--benchmark-disable`), and `CROSSCHECK`, the rule of the comparisons with peer timers.
"""

from __future__ import annotations

from dataclasses import dataclass

from suites.core.defaults import PROFILES as NAMES
from suites.core.defaults import Profile
from suites.core.stopping import StopRule

__all__ = ["NAMES", "Profile", "Rules", "SearchPlan", "rules", "search_plan", "searches_serving"]


@dataclass(frozen=True)
class SearchPlan:
    """What one achievable search covers: cube edges of the coarse grid, refinement steps, budgets, the rule."""

    sizes: tuple[int, ...]
    step: int  # first refinement step on M, N, K
    min_step: int  # refinement stops below it; a multiple of 16 (float8 gemms need it)
    gemm_budget_s: float  # per dtype
    bandwidth_sizes: tuple[int, ...]  # bytes per array
    bandwidth_budget_s: float  # for copy and triad together
    rule: StopRule


@dataclass(frozen=True)
class Rules:
    """Every measurement rule of one profile."""

    stop: StopRule
    round: StopRule
    lockstep_samples: int
    search: dict[str, SearchPlan]  # by device type (`cpu`, `cuda`)

    def lockstep(self) -> StopRule:
        """The rule of a case under torchrun: exactly `lockstep_samples` samples, judged on the profile's target."""
        return self.stop.counted(self.lockstep_samples)


MiB, GiB = 2**20, 2**30

# The search's own rules: a shape's median needs less care than a case's (the best of many shapes is kept).
_QUICK_SEARCH = StopRule(min_samples=5, min_time_s=0.02, target_rel_iqr=0.03, timeout_s=0.5, warmup_s=0.01)
_FULL_SEARCH = StopRule(min_samples=10, min_time_s=0.1, target_rel_iqr=0.01, timeout_s=2.0, warmup_s=0.05)

RULES: dict[Profile, Rules] = {
    Profile.QUICK: Rules(
        stop=StopRule(min_samples=5, min_time_s=0.05, target_rel_iqr=0.05, timeout_s=2.0, warmup_s=0.02,
                      plateau_window=5),
        # the quick rule scaled as the full one is, so that --bench-rounds 3 on quick is the nightly setting in
        # miniature
        round=StopRule(min_samples=5, min_time_s=0.02, target_rel_iqr=0.05, timeout_s=0.7, warmup_s=0.01),
        lockstep_samples=10,
        # seconds in all on a CPU (the cases' own quick shapes are 256 cubes)
        search={"cpu": SearchPlan((128, 256, 384, 512, 768, 1024), 128, 32, 3.5, (64 * MiB,), 2.0, _QUICK_SEARCH),
                "cuda": SearchPlan((1024, 2048, 4096, 6144, 8192), 512, 128, 10.0, (1 * GiB,), 3.0, _QUICK_SEARCH)}),
    Profile.FULL: Rules(
        # nvbench's defaults (suites/core/stopping.py), with min_time_s also met on the wall clock once the spread is
        # at the target (WallTimeTarget: a host-bound op's 0.5 s of device time took 1.5-3.5 s of the clock)
        stop=StopRule(min_time_on_wall=True),
        # 3 rounds of at least 0.2 s and 10 samples each replace one measurement of 0.5 s; the timeout is a third
        # of the profile's 15 s, so a case that never converges costs what it did
        round=StopRule(min_samples=10, min_time_s=0.2, target_rel_iqr=0.02, timeout_s=5.0, warmup_s=0.05,
                       min_time_on_wall=True),
        lockstep_samples=50,  # nccl-tests times 20 iterations after 5 warm-up ones by default
        # about a minute per dtype on a GPU, over the shapes that fill a large one, as mamf-finder's ranges do
        search={"cpu": SearchPlan((256, 512, 1024, 1536, 2048, 3072), 256, 32, 30.0, (128 * MiB, 512 * MiB), 10.0,
                                  _FULL_SEARCH),
                "cuda": SearchPlan((1024, 2048, 3072, 4096, 5120, 6144, 8192, 10240, 12288, 16384), 1024, 64, 60.0,
                                   (1 * GiB, 4 * GiB), 15.0, _FULL_SEARCH)}),
}

SMOKE = StopRule(min_samples=1, min_time_s=0.0, target_rel_iqr=float("inf"), timeout_s=0.0, warmup_s=0.0)
# Long enough that both timers' medians settle: compared ratios within a few percent mean the timers agree.
CROSSCHECK = StopRule(min_samples=20, min_time_s=1.0, target_rel_iqr=0.02, timeout_s=10.0, warmup_s=0.2)


def rules(profile: str) -> Rules:
    """The rules of a profile named by its string (what the command line gives)."""
    return RULES[Profile(profile).sizes]


def search_plan(device_type: str, profile: str) -> SearchPlan:
    """The achievable search's plan for a device type under a profile."""
    return rules(profile).search[device_type]


def searches_serving(profile: str) -> tuple[Profile, ...]:
    """The profiles whose saved achievable search a run of `profile` may load, best first: a full search (wider,
    longer) serves both profiles, a quick one only quick runs."""
    return (Profile.FULL,) if Profile(profile) is Profile.FULL else (Profile.FULL, Profile.QUICK)
