"""Time `python -m reports trace` on a trace of many device ids, text and --json, and print the figures.

The trace is the hostile corpus's (tests/hostile.py, `trace_20k_device_ids`), here of 100,000 ids by default: one
kernel on each device id. A pass over every event per device made it quadratic (67 to 120 s for 100,000 ids);
tests/test_trace.py checks the result on such a trace of 20,000, this script gives the time, which tests do not
assert.
Usage: python tools/bench_trace_devices.py [--devices 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench_trace_speed import REPO, run_child

sys.path.insert(0, str(REPO))

from tests.hostile import many_devices_trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100_000, help="device ids in the trace (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_trace_devices_") as workdir:
        trace = many_devices_trace(Path(workdir), args.devices)
        print(f"trace: {args.devices} device ids, one kernel each, {trace.stat().st_size / 1e6:.1f} MB")
        for label, extra in (("text", []), ("--json", ["--json"])):
            runs = [run_child([sys.executable, "-m", "reports", "trace", str(trace), *extra])
                    for _ in range(args.repeat)]
            print(f"python -m reports trace {label:6s}: median {statistics.median(r.wall_s for r in runs):6.2f} s "
                  f"wall, {statistics.median(r.cpu_s for r in runs):6.2f} s CPU, peak RSS "
                  f"{max(r.rss_mib for r in runs):4.0f} MiB (repeat={args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
