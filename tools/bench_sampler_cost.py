"""What the NVML sampler costs: a ~10 ms GPU kernel timed with sampling off and on, and the sampling loop's own cost.

On a GPU (with NVML) a bfloat16 matmul sized to about 10 ms is measured by the suite's measurement core
(suites.core.timing.measure, CUDA events, the full stopping rule) alternately without and with the telemetry
extension around it, exactly as a benchmark run wraps a case; the slowdown is median(on) / median(off) - 1,
printed next to the difference between the two "off" runs, the noise floor it must be read against. Target: under
0.5 %.

Everywhere (CPU only here), the sampler thread's machinery is measured with a trivial reader (one timestamped
record per reading, no NVML call): the wall time per iteration when it runs flat out (interval 0), and the CPU
time per sample at the real interval while the main thread sleeps, idle CPU time subtracted. This is the cost of
the loop, the thread wake-ups and the list appends, not of NVML's calls (a few to tens of microseconds each on a
GPU box, which the GPU part covers).

Usage: python tools/bench_sampler_cost.py [--interval-ms 20] [--seconds 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.format import strict_json
from suites.core import nvml
from suites.core.cases import Case
from suites.core.profiles import Profile, rules
from suites.core.timing import measure
from suites.observers.telemetry import DEFAULT_INTERVAL_MS, Sample, Sampler, TelemetryExtension
from suites.ops import matmul

TARGET_PCT = 0.5
KERNEL_S = 0.010


def trivial_read() -> Sample:
    return Sample(t_s=time.perf_counter())


def loop_cost_flat_out(seconds: float) -> dict:
    """Wall time per iteration of the sampler loop with interval 0 (reading, append, stop check)."""
    sampler = Sampler(trivial_read, interval_s=0.0)
    start = time.perf_counter()
    sampler.start()
    time.sleep(seconds)
    samples = sampler.stop()
    elapsed = time.perf_counter() - start
    return {"samples": len(samples), "wall_us_per_sample": 1e6 * elapsed / len(samples)}


def loop_cost_at_interval(interval_ms: float, seconds: float) -> dict:
    """Process CPU time per sample at the real interval, minus the CPU time of the same sleep without a sampler."""
    idle_start = time.process_time()
    time.sleep(seconds)
    idle = time.process_time() - idle_start
    sampler = Sampler(trivial_read, interval_s=interval_ms / 1e3)
    busy_start = time.process_time()
    sampler.start()
    time.sleep(seconds)
    samples = sampler.stop()
    busy = time.process_time() - busy_start
    return {
        "interval_ms": interval_ms,
        "samples": len(samples),
        "cpu_us_per_sample": 1e6 * max(busy - idle, 0.0) / len(samples),
        "cpu_share_pct": 100 * max(busy - idle, 0.0) / seconds,
    }


def gpu_skip_reason() -> str | None:
    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__})"
    lib, reason = nvml.nvml()
    return reason if lib is None else None


def sized_case(device: torch.device) -> Case:
    """A square bfloat16 matmul whose call lasts about KERNEL_S, found by scaling n with the cube root of time."""
    n = 8192
    for _ in range(4):
        case = matmul.make_case(matmul.MatmulShape("square", n, n, n), "bfloat16")
        seconds = measure(case.build(device).fn, device, rules(Profile.QUICK).stop).median_s
        if abs(seconds / KERNEL_S - 1) < 0.1:
            break
        n = max(256, 256 * round(n * (KERNEL_S / seconds) ** (1 / 3) / 256))
    return case


def gpu_cost(interval_ms: float, pairs: int = 3) -> dict:
    """Alternate off/on measurements of the sized matmul; medians of the per-call device times."""
    device = torch.device("cuda", torch.cuda.current_device())
    case = sized_case(device)
    workload = case.build(device)
    ext = TelemetryExtension(device, interval_ms)
    off, on = [], []
    for _ in range(pairs):
        off.append(measure(workload.fn, device, rules(Profile.FULL).stop).median_s)
        with ext.around(case, device) as fields:
            on.append(measure(workload.fn, device, rules(Profile.FULL).stop).median_s)
    off_s, on_s = float(np.median(off)), float(np.median(on))
    return {
        "case": case.id,
        "interval_ms": interval_ms,
        "off_ms": [1e3 * s for s in off],
        "on_ms": [1e3 * s for s in on],
        "slowdown_pct": 100 * (on_s / off_s - 1),
        "noise_floor_pct": 100 * (max(off) - min(off)) / off_s,
        "target_pct": TARGET_PCT,
        "telemetry_of_last_window": fields.get("telemetry"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval-ms", type=float, default=DEFAULT_INTERVAL_MS, help="sampling interval")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each CPU loop measurement")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if not (args.interval_ms > 0 and args.seconds > 0 and math.isfinite(args.seconds)):
        parser.error("--interval-ms and --seconds must be positive")
    result = {
        "loop_flat_out": loop_cost_flat_out(args.seconds),
        "loop_at_interval": loop_cost_at_interval(args.interval_ms, args.seconds),
    }
    flat, paced = result["loop_flat_out"], result["loop_at_interval"]
    print(
        f"sampler loop, trivial reader, flat out: {flat['wall_us_per_sample']:.2f} us per sample "
        f"({flat['samples']} samples)"
    )
    print(
        f"sampler loop, trivial reader, every {paced['interval_ms']:g} ms: {paced['cpu_us_per_sample']:.1f} us of "
        f"CPU per sample ({paced['samples']} samples, {paced['cpu_share_pct']:.3f} % of one core)"
    )
    reason = gpu_skip_reason()
    if reason:
        result["gpu"] = {"skipped": reason}
        print(f"GPU kernel with sampling on/off: skipped, {reason}")
    else:
        gpu = result["gpu"] = gpu_cost(args.interval_ms)
        print(
            f"GPU {gpu['case']}: off {np.median(gpu['off_ms']):.4f} ms, on {np.median(gpu['on_ms']):.4f} ms, "
            f"slowdown {gpu['slowdown_pct']:+.3f} % (noise floor {gpu['noise_floor_pct']:.3f} %, "
            f"target < {TARGET_PCT} %)"
        )
    if args.json:
        args.json.write_text(strict_json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
