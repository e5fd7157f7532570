"""Our timer against the field's: torch.utils.benchmark on any device, triton.testing.do_bench on CUDA.

`python -m suites crosscheck` times the same matmul cases with both in one run and prints the ratio of medians
per case; agreement within a few percent is the evidence that the measurement core measures what peers measure.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.utils.benchmark as tub
from tabulate import tabulate

from suites.core import devices
from suites.core.cases import Case
from suites.core.precision import float32_mode
from suites.core.profiles import CROSSCHECK, NAMES
from suites.core.stopping import StopRule
from suites.core.timing import measure
from suites.observers.telemetry import TelemetryExtension, TelemetryUnavailable
from suites.ops import matmul

CLOCK_INTERVAL_MS = 10.0  # NVML's SM clock sampled this often while a timer runs (do_bench's window is ~0.2 s)


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


@dataclass(frozen=True)
class Clocked:
    """A median per call and the SM clock the GPU ran at meanwhile (NVML's median over the window), or why that
    clock is unknown (no NVML, a CPU)."""

    seconds: float
    sm_clock_mhz: float | None
    clock_reason: str | None = None


def clocked(device: torch.device, case: Case, timed: Callable[[], float]) -> Clocked:
    """`timed()` (a median in seconds) with NVML's SM clock sampled around it, as a benchmark run samples a case."""
    telemetry = TelemetryExtension(device, CLOCK_INTERVAL_MS)
    with warnings.catch_warnings():  # the reason is kept in the result, not warned
        warnings.simplefilter("ignore", TelemetryUnavailable)
        with telemetry.around(case, device) as fields:
            seconds = timed()
    clock = fields.get("telemetry", {}).get("sm_clock_median_mhz")
    reason = None if clock else telemetry.machine_info().get("reason") or "NVML gave no SM clock samples"
    return Clocked(seconds, clock, reason)


@dataclass(frozen=True)
class Agreement:
    """Our median against a peer's, in time and, where both SM clocks are known, in GPU cycles (time x clock).

    Why cycles: our samples are held, synchronized and spaced, so the GPU works a smaller share of the time than
    in do_bench's dense loop, and under a power cap it clocks higher; a compute-bound kernel's time scales with
    1/clock, so the two timers can differ by the clock ratio while counting the same cycles. Agreement in time
    passes; outside the tolerance in time but within it in cycles passes and says that the clocks differed; a
    difference in cycles, or in time with a clock unknown, fails."""

    ours: Clocked
    theirs: Clocked
    tolerance: float

    @property
    def ratio(self) -> float:
        return self.ours.seconds / self.theirs.seconds

    @property
    def cycles_ratio(self) -> float | None:
        if not (self.ours.sm_clock_mhz and self.theirs.sm_clock_mhz):
            return None
        return self.ratio * self.ours.sm_clock_mhz / self.theirs.sm_clock_mhz

    @property
    def ok(self) -> bool:
        cycles = self.cycles_ratio
        return abs(self.ratio - 1) <= self.tolerance or (cycles is not None and abs(cycles - 1) <= self.tolerance)

    def text(self, peer: str) -> str:
        """`ratio 0.962 (ours 1.23 ms at 1980 MHz, do_bench 1.28 ms at 1905 MHz); in cycles 0.999: ...`"""
        def side(name: str, c: Clocked) -> str:
            return f"{name} {c.seconds * 1e6:.1f} us" + (f" at {c.sm_clock_mhz:.0f} MHz" if c.sm_clock_mhz else "")

        out = f"ratio {self.ratio:.3f} ({side('ours', self.ours)}, {side(peer, self.theirs)})"
        cycles = self.cycles_ratio
        if cycles is None:
            reason = self.ours.clock_reason or self.theirs.clock_reason
            return out + f"; SM clocks not read ({reason})"
        out += f"; in cycles {cycles:.3f}"
        if abs(self.ratio - 1) > self.tolerance and abs(cycles - 1) <= self.tolerance:
            out += (f": the timers agree, the GPU ran at other clocks ({peer}'s dense loop against our spaced "
                    "samples, under the power cap)")
        return out


def ours_vs_do_bench(case: Case, device: torch.device, rule: StopRule = CROSSCHECK) -> dict:
    """Median per call from our core and from triton.testing.do_bench, each with the SM clock it ran at.
    do_bench flushes L2 before every call, so ours is taken cold too (and hot, for the record)."""
    import triton.testing

    with float32_mode(case.tf32):
        fn = case.build(device).fn
        cold = clocked(device, case, lambda: measure(fn, device, rule, cold=True).median_s)
        hot = measure(fn, device, rule)
        theirs = clocked(device, case, lambda: triton.testing.do_bench(fn, warmup=25, rep=200,
                                                                       return_mode="median") / 1e3)
    return {"case": case.id, "ours_cold": cold, "ours_hot_s": hot.median_s, "do_bench": theirs,
            "ratio": cold.seconds / theirs.seconds, "tflops": case.flops / cold.seconds / 1e12}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites crosscheck", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (default: cuda when available), cpu, cuda or cuda:N")
    parser.add_argument("--profile", default="quick", choices=NAMES)
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated (default: float32,bfloat16)")
    parser.add_argument("--threads", type=int, help="torch threads for both timers (default: torch's default)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed |ratio - 1| (default: 0.05)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = devices.resolve(args.device)
    except devices.DeviceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dtypes = args.dtypes.split(",")
    cases = [c for c in matmul.cases(args.profile) if c.params["dtype"] in dtypes and c.params["layer"] == "square"]
    rows = [ours_vs_torch_benchmark(c, device) for c in cases]
    print(tabulate(rows, headers="keys", floatfmt=".4g"))
    worst = max(abs(r["ratio"] - 1) for r in rows)
    print(f"worst |ratio - 1| = {worst:.3f} (tolerance {args.tolerance})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
