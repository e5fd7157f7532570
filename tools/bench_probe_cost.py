"""What the host-contention probe costs per sample: HostProbe.begin() and end() around an empty sample.

Why: the probe reads the run delay of the process's threads before and after every sample (outside the timed
window, but on the wall clock of the case: a tiny case's samples are a few tens of microseconds, so a probe of
hundreds of microseconds per sample doubles its run). A GPU process has many threads that sleep through a case
(torch's intra-op pool of one thread per core, CUDA's and NVML's helpers), so the cost is measured with that
many idle threads started beside the main one (`--idle-threads`, default 111 for a 112-core host) and a few
that work (`--busy-threads`, default 1: the telemetry sampler's like, waking every millisecond).

Usage: python tools/bench_probe_cost.py [--idle-threads 111] [--busy-threads 1] [--samples 3000] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.format import strict_json
from suites.core.host_load import HostProbe


def start_threads(idle: int, busy: int, stop: threading.Event) -> list[threading.Thread]:
    """`idle` threads blocked on `stop`, and `busy` ones that wake every millisecond until it is set."""
    def nap() -> None:
        while not stop.wait(0.001):
            pass

    threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(idle)]
    threads += [threading.Thread(target=nap, daemon=True) for _ in range(busy)]
    for thread in threads:
        thread.start()
    return threads


def probe_cost(samples: int) -> dict:
    """Microseconds per sample of begin() + end() with nothing between them (median, mean and 90th percentile over
    `samples` samples of one probe, as a measurement's sampling loop uses it), and the threads a sample read."""
    probe = HostProbe()
    costs, read = [], []
    try:
        for _ in range(samples):
            t0 = time.perf_counter()
            probe.begin()
            probe.end(kept=True)
            costs.append(time.perf_counter() - t0)
            read.append(len(probe.run_delay.threads_read))
    finally:
        probe.close()
    costs.sort()
    return {"samples": samples, "median_us": 1e6 * statistics.median(costs), "mean_us": 1e6 * statistics.mean(costs),
            "p90_us": 1e6 * costs[int(0.9 * (len(costs) - 1))], "threads_read_median": statistics.median(read),
            "threads_read_max": max(read)}


def positive(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: expected 0 or more")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-threads", type=positive, default=111, help="threads that sleep through the samples")
    parser.add_argument("--busy-threads", type=positive, default=1, help="threads that wake every millisecond")
    parser.add_argument("--samples", type=positive, default=3000, help="samples to time (default 3000)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    stop = threading.Event()
    threads = start_threads(args.idle_threads, args.busy_threads, stop)
    try:
        result = {"threads": threading.active_count(), "idle_threads": args.idle_threads,
                  "busy_threads": args.busy_threads} | probe_cost(args.samples)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    print(f"host probe, {result['threads']} Python threads ({args.idle_threads} idle, {args.busy_threads} waking "
          f"every ms): {result['median_us']:.1f} us per sample (median), {result['mean_us']:.1f} us (mean), "
          f"{result['p90_us']:.1f} us (90th percentile) over {result['samples']} samples; threads read per sample: "
          f"{result['threads_read_median']:g} (median), {result['threads_read_max']} (most)")
    if args.json:
        args.json.write_text(strict_json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
