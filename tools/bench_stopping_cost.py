"""What the stopping rule costs per sample as samples pile up: the sampling loop (suites/core/timing.py's
`sample_until_stopped`) over a sampler that returns at once, under a rule that never stops before `max_samples`.

The samples are lognormal noise of 20 % around 1 ms, which no target of 0 is met by and whose spread keeps moving
enough (a plateau tolerance of 0) that no plateau ends it: the loop asks the rule after every sample, to the last
one, as a case that runs to its timeout does. What it prints is the loop's own wall time, total and per sample, at
each size: the rule's cost, since the sampler costs nothing. Asking the rule used to recompute the percentiles of
all samples after every sample (quadratic: 100 000 samples took minutes); its criteria now keep their order
statistics as samples come (suites/core/stopping.py).

Usage: python tools/bench_stopping_cost.py [--samples 1000 10000 100000] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.format import strict_json
from suites.core.profiles import Profile, rules
from suites.core.samplers import Taken
from suites.core.timing import sample_until_stopped


def cost(samples: int, seed: int = 0) -> dict:
    """The sampling loop's wall time to `samples` samples of noise, asking the rule after each."""
    rng = random.Random(seed)
    stream = [Taken(1e-3 * rng.lognormvariate(0, 0.2), 0.0, 1e-3) for _ in range(samples)]
    feed = iter(stream)
    # the full profile's rule, its exits out of reach: it runs to max_samples, asking its criteria every time
    rule = replace(rules(Profile.FULL).stop, target_rel_iqr=0.0, plateau_tol=0.0, timeout_s=math.inf,
                   max_samples=samples)
    start = time.perf_counter()
    out = sample_until_stopped(lambda: next(feed), rule, time.perf_counter)
    seconds = time.perf_counter() - start
    assert len(out.samples) == samples and out.reason == "timeout", (len(out.samples), out.reason)
    return {"samples": samples, "seconds": seconds, "us_per_sample": 1e6 * seconds / samples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    found = []
    for n in args.samples:
        found.append(cost(n))
        print(f"{n:>7} samples: {found[-1]['seconds']:8.2f} s, {found[-1]['us_per_sample']:8.1f} us per sample")
    if args.json:
        args.json.write_text(strict_json.dumps({"stopping_cost": found}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
