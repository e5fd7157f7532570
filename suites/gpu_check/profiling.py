"""gpu_check rows of the observers: tensor cores seen in the profiler traces, NVML telemetry of a run, sampler cost.

`trace_tensor_cores` reads the `trace` step's results (the 4096-cube matmul in bfloat16, tf32 and float32, run
with --trace-dir) and `telemetry_of_run` the `matmul` step's (telemetry is on by default), both through
reports.format.load; `sampler_cost` reads the JSON tools/bench_sampler_cost.py wrote. On a CPU run there are no GPU
kernels and no NVML: those rows say so and give no verdict.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from reports.format import validate
from suites.gpu_check.rows import Row, number, read_step, sourced

TELEMETRY_FIGURES = ("power_mean_w", "power_max_w", "energy_j", "sm_clock_min_mhz", "sm_clock_median_mhz",
                     "temp_max_c")
TRACE_DTYPES = ("bfloat16", "tf32", "float32")  # tensor cores expected for all but IEEE float32
TENSOR_CORE_SHARE = 0.9
NO_GPU = "no CUDA device"  # how tools/bench_sampler_cost.py says it ran without a GPU


def _cpu_run(machine_info: dict) -> bool:
    return not isinstance(machine_info.get("gpu"), dict)


def trace_gaps(cases: list[dict]) -> list[str]:
    """The trace rows need an IEEE float32 case at least (the one with no tensor cores)."""
    return [] if any(c.get("dtype") == "float32" for c in cases) else ["no float32 case"]


def trace_row(entry: dict, cpu: bool) -> Row:
    """One traced case: its tensor-core share and top kernel, held to > 0.9 (bf16, tf32) or 0 (float32)."""
    dtype, check = entry.get("dtype"), f"trace {entry.get('case')}"
    summary = entry.get("trace_summary") if isinstance(entry.get("trace_summary"), dict) else {}
    devices = summary.get("devices") if isinstance(summary.get("devices"), list) else []
    first = devices[0] if devices and isinstance(devices[0], dict) else {}
    if entry.get("trace_error") or not first:
        why = entry.get("trace_error") or summary.get("message") or "no trace summary"
        return Row(check, "tensor_core_share", f"none: {str(why)[:140]}", "" if cpu else "a GPU trace",
                   None if cpu and not entry.get("trace_error") else False)
    share = number(first, "tensor_core_share")
    kernels = first.get("top_kernels") if isinstance(first.get("top_kernels"), list) else []
    top = str(kernels[0].get("name", "?"))[:70] if kernels and isinstance(kernels[0], dict) else "no kernels"
    want_tc = dtype != "float32"
    ok = share is not None and (share > TENSOR_CORE_SHARE if want_tc else share == 0.0)
    return Row(check, "tensor_core_share (top kernel)", f"{share} ({top})",
               f"> {TENSOR_CORE_SHARE:g}" if want_tc else "0", ok)


def trace_tensor_cores(out: Path, step: str) -> list[Row]:
    """bfloat16 and tf32 matmuls run tensor-core kernels, IEEE float32 none: each trace summary's share."""
    run = read_step(out, step)
    cpu = _cpu_run(run.machine_info)
    measured = run.measured()
    rows = [trace_row(entry, cpu) for entry in measured]
    traced = {e.get("dtype") for e in measured}
    if not cpu and not set(TRACE_DTYPES) <= traced:
        rows.append(Row("trace tensor cores", "dtypes traced", ", ".join(sorted(map(str, traced))) or "none",
                        ", ".join(TRACE_DTYPES), False))
    return sourced(run, rows or [Row("trace tensor cores", "cases", "no measured case", "some", False)])


def telemetry_rows(cases: list[dict]) -> list[Row]:
    """Power, energy, clocks and throttling over the cases that have them all."""
    found = [c["telemetry"] if isinstance(c.get("telemetry"), dict) else {} for c in cases if "median_s" in c]
    complete = [t for t in found if all(number(t, key) is not None for key in TELEMETRY_FIGURES)]
    rows = [Row("telemetry", "cases with power, energy, clocks, temperature", f"{len(complete)}/{len(found)}", "all",
                bool(found) and len(complete) == len(found))]
    if not complete:
        return rows
    power = [t["power_mean_w"] for t in complete]
    throttled = Counter(str(r) for t in complete for r in t.get("throttle_reasons") or [])
    rows += [
        Row("telemetry", "power mean W (min / median / max over cases)",
            f"{min(power):.0f} / {np.median(power):.0f} / {max(power):.0f}", "", None),
        Row("telemetry", "energy J (sum), methods", f"{sum(t['energy_j'] for t in complete):.1f}, "
            f"{dict(Counter(str(t.get('energy_method')) for t in complete))}", "", None),
        Row("telemetry", "SM clock MHz (min of mins / median of medians)",
            f"{min(t['sm_clock_min_mhz'] for t in complete):.0f} / "
            f"{np.median([t['sm_clock_median_mhz'] for t in complete]):.0f}", "", None),
        Row("telemetry", "throttled cases (reasons)",
            f"{sum(t.get('throttled') is True for t in complete)} ({dict(throttled)})", "reported", None),
    ]
    counted = [t for t in complete if t.get("energy_method") == "energy_counter" and number(t, "energy_window_s")
               and t["power_mean_w"] > 0]
    if counted:
        ratio = float(np.median([t["energy_j"] / t["energy_window_s"] / t["power_mean_w"] for t in counted]))
        rows.append(Row("telemetry", "median (energy/window) / mean sampled power", f"{ratio:.3f}", "0.8 - 1.25",
                        0.8 <= ratio <= 1.25))
    return rows


def telemetry_of_run(out: Path, step: str) -> list[Row]:
    """Every measured case has power, energy and clocks; the counter's energy agrees with the power samples."""
    run = read_step(out, step)
    info = run.machine_info.get("telemetry") if isinstance(run.machine_info.get("telemetry"), dict) else {}
    cpu = _cpu_run(run.machine_info)
    rows = [Row("telemetry", "machine_info.telemetry", json.dumps(info)[:150], "" if cpu else "available",
                None if cpu else info.get("available") is True)]
    if info.get("available") is True:
        rows += telemetry_rows(run.cases)
    return sourced(run, rows)


def sampler_cost(out: Path, step: str) -> list[Row]:
    """tools/bench_sampler_cost.py's figures: the sampler loop's own cost and, on a GPU, the slowdown of a ~10 ms
    matmul with sampling on against its noise floor."""
    path = out / "sampler_cost.json"
    data = validate.read_json(path)
    loop = data.get("loop_at_interval") if isinstance(data, dict) else None
    gpu = data.get("gpu") if isinstance(data, dict) and isinstance(data.get("gpu"), dict) else {}
    rows = []
    if isinstance(loop, dict) and number(loop, "cpu_us_per_sample") is not None:
        rows.append(Row("sampler cost", f"CPU per sample every {loop.get('interval_ms')} ms (trivial reader)",
                        f"{loop['cpu_us_per_sample']:.1f} us, {number(loop, 'cpu_share_pct') or 0:.3f} % of a core",
                        "", None))
    if "skipped" in gpu:  # expected without a GPU; with one (no NVML, say) it is a failure
        no_gpu = str(gpu["skipped"]).startswith(NO_GPU)
        rows.append(Row("sampler cost", "GPU part", f"skipped: {gpu['skipped']}", "" if no_gpu else "run",
                        None if no_gpu else False))
    elif number(gpu, "slowdown_pct") is not None:
        rows.append(Row("sampler cost", f"slowdown of {gpu.get('case')} (noise floor)",
                        f"{gpu['slowdown_pct']:+.3f} % ({gpu.get('noise_floor_pct', float('nan')):.3f} %)",
                        f"< {gpu.get('target_pct')} %", gpu["slowdown_pct"] < (number(gpu, "target_pct") or 0)))
    else:
        rows.append(Row("sampler cost", "GPU part", "absent from the tool's JSON", "run", False))
    for row in rows:
        row.source = path.name
    return rows

