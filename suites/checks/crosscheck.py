"""Our timer against the field's: torch.utils.benchmark on any device, triton.testing.do_bench on CUDA.

`python -m suites.crosscheck` times the same matmul cases with both in one run and prints the ratio of medians
per case; agreement within a few percent is the evidence that the measurement core measures what peers measure.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
import torch.utils.benchmark as tub
from tabulate import tabulate

from suites.core.cases import Case
from suites.core.precision import float32_mode
from suites.core.profiles import CROSSCHECK, NAMES
from suites.core.timing import StopRule, measure
from suites.ops import matmul


def ours_vs_torch_benchmark(case: Case, device: torch.device, rule: StopRule = CROSSCHECK,
                            rounds: int = 3) -> dict:
    """Median per call from our core and from Timer.blocked_autorange, same workload, same process.

    The two alternate for `rounds` rounds and the medians of their medians are compared, so a drift of the
    machine's speed during the run (another process, a clock change) hits both alike.
    """
    ours, theirs = [], []
    with float32_mode(case.tf32):
        fn = case.build(device).fn
        # Timer runs on one thread unless told otherwise; ours runs on the threads torch is set to use.
        timer = tub.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        for _ in range(rounds):
            ours.append(measure(fn, device, rule).median_s)
            theirs.append(timer.blocked_autorange(min_run_time=rule.min_time_s).median)
    ours_s, theirs_s = float(np.median(ours)), float(np.median(theirs))
    return {"case": case.id, "ours_s": ours_s, "torch_utils_benchmark_s": theirs_s, "ratio": ours_s / theirs_s}


def ours_vs_do_bench(case: Case, device: torch.device, rule: StopRule = CROSSCHECK) -> dict:
    """Median per call from our core and from triton.testing.do_bench. do_bench flushes L2 before every call,
    so ours is taken cold too (and hot, for the record)."""
    import triton.testing

    with float32_mode(case.tf32):
        fn = case.build(device).fn
        cold = measure(fn, device, rule, cold=True)
        hot = measure(fn, device, rule)
        theirs_ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
    return {"case": case.id, "ours_cold_s": cold.median_s, "ours_hot_s": hot.median_s,
            "do_bench_s": theirs_ms / 1e3, "ratio": cold.median_s / (theirs_ms / 1e3),
            "tflops": case.flops / cold.median_s / 1e12}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites.crosscheck", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    parser.add_argument("--profile", default="quick", choices=NAMES)
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated (default: float32,bfloat16)")
    parser.add_argument("--threads", type=int, help="torch threads for both timers (default: torch's default)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed |ratio - 1| (default: 0.05)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtypes = args.dtypes.split(",")
    cases = [c for c in matmul.cases(args.profile) if c.params["dtype"] in dtypes and c.params["layer"] == "square"]
    rows = [ours_vs_torch_benchmark(c, device) for c in cases]
    print(tabulate(rows, headers="keys", floatfmt=".4g"))
    worst = max(abs(r["ratio"] - 1) for r in rows)
    print(f"worst |ratio - 1| = {worst:.3f} (tolerance {args.tolerance})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
