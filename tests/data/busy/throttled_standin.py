"""Makes the throttled STAND-IN of tests/data/busy from a real run: no GPU was throttled to make it.

This machine has no GPU, so no real run here holds NVML telemetry. The stand-in is a real busy run of this
project (every figure as measured) with, per measured case, the `extra_info.telemetry` that
suites/observers/telemetry.py would record on a GPU sampled every 20 ms over the case's samples, computed by
that module's own `summarize` from made-up NVML readings: clocks, power and temperature of an H100-class part,
and from the second half of the run on a GPU that heats up: hw_thermal_slowdown set in 60 % of the readings and
the SM clock down from 1980 to 1410 MHz. `machine_info.stand_in` and the file name (STANDIN) say so.

    python tests/data/busy/throttled_standin.py SOURCE.json tests/data/busy/STANDIN_throttled_<source>.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from reports.format import strict_json
from suites.observers.telemetry import Sample, power_energy, summarize

INTERVAL_S = 0.02  # the default --bench-telemetry-interval-ms
MAX_READINGS = 200
THERMAL = 0x40  # nvml's hw_thermal_slowdown bit (suites/observers/telemetry.py, REASON_NAMES)
THROTTLED_SHARE = 0.6


def readings(window_s: float, throttled: bool) -> list[Sample]:
    """What the sampler would read over one case's window: a cool GPU at full clock, or a hot one slowed down in
    THROTTLED_SHARE of the readings."""
    count = max(2, min(MAX_READINGS, round(window_s / INTERVAL_S)))
    slowed = round(count * THROTTLED_SHARE) if throttled else 0
    return [Sample(t_s=i * window_s / (count - 1), used_bytes=2 << 30, gpu_util_pct=97, mem_util_pct=40,
                   power_w=690.0 if i < slowed else 610.0, sm_clock_mhz=1410 if i < slowed else 1980,
                   mem_clock_mhz=2619, temp_c=91 if throttled else 74, reasons=THERMAL if i < slowed else 0)
            for i in range(count)]


def stand_in(data: dict, source: str) -> dict:
    """The run with telemetry on every measured case, the second half of them throttled, and the machine marked."""
    cases = data["benchmarks"]
    for i, entry in enumerate(cases):
        window = float(entry["stats"]["total"])
        samples = readings(window, throttled=i >= len(cases) // 2)
        entry["extra_info"]["telemetry"] = summarize(samples, power_energy(samples, 0.0, window))
    data["machine_info"]["stand_in"] = (
        f"throttled stand-in made by tests/data/busy/throttled_standin.py from the real run {source}: its figures "
        "are as measured on this CPU, its telemetry (the throttling) is made up; not a measurement of a GPU")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    data = strict_json.loads(args.source.read_text())
    args.out.write_text(strict_json.dumps(stand_in(data, args.source.name)))


if __name__ == "__main__":
    main()
