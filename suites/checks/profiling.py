"""gpu_check rows of the observers: tensor cores seen in the profiler traces, NVML telemetry of a run, sampler cost.

Each function takes gpu_check's --out directory and reads what its pytest runs wrote there: `trace.json` (the
4096-cube matmul in bfloat16, tf32 and float32, run with --trace-dir) and `matmul.json` (the full matmul sweep,
telemetry on by default). A JSON that is missing because its run was left out (--only) gives an empty row.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from reports import strict_json
from suites.checks.gpu_check import Row

TELEMETRY_FIGURES = ("power_mean_w", "power_max_w", "energy_j", "sm_clock_min_mhz", "sm_clock_median_mhz",
                     "temp_max_c")
TRACE_DTYPES = ("bfloat16", "tf32", "float32")
SAMPLER_TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench_sampler_cost.py"


def _benchmarks(path: Path, check: str) -> tuple[dict | None, list[Row]]:
    if not path.exists():
        return None, [Row(check, f"{path.name} not written", "run left out or failed", "", None)]
    return json.loads(path.read_text()), []


def trace_tensor_cores(out: Path) -> list[Row]:
    """bfloat16 and tf32 matmuls run tensor-core kernels, IEEE float32 none: each trace summary's share."""
    run, rows = _benchmarks(out / "trace.json", "trace tensor cores")
    if run is None:
        return rows
    seen = {}
    for bench in run["benchmarks"]:
        dtype, info = bench["params"]["dtype"], bench["extra_info"]
        devices = info.get("trace_summary", {}).get("devices", [])
        share = devices[0]["tensor_core_share"] if devices else None
        top = devices[0]["top_kernels"][0]["name"][:70] if devices and devices[0]["top_kernels"] else "no kernels"
        want_tc = dtype != "float32"
        ok = share is not None and (share > 0.9 if want_tc else share == 0.0)
        seen[dtype] = ok
        rows.append(Row(f"trace {info['case']}", "tensor_core_share (top kernel)",
                        f"{info.get('trace_error') or share} ({top})", "> 0.9" if want_tc else "0", ok))
    missing = [d for d in TRACE_DTYPES if d not in seen]
    if missing:
        rows.append(Row("trace tensor cores", "dtypes traced", ", ".join(seen), ", ".join(TRACE_DTYPES), False))
    return rows


def telemetry_of_run(out: Path) -> list[Row]:
    """Every measured matmul case has power, energy and clocks; the counter's energy agrees with the power samples."""
    run, rows = _benchmarks(out / "matmul.json", "telemetry")
    if run is None:
        return rows
    info = run["machine_info"].get("telemetry", {})
    rows.append(Row("telemetry", "machine_info.telemetry", json.dumps(info)[:150], "available",
                    bool(info.get("available"))))
    found = [b["extra_info"].get("telemetry") or {} for b in run["benchmarks"]]
    complete = [t for t in found if all(key in t for key in TELEMETRY_FIGURES)]
    rows.append(Row("telemetry matmul", "cases with power, energy, clocks, temperature",
                    f"{len(complete)}/{len(found)}", "all", bool(found) and len(complete) == len(found)))
    if not complete:
        return rows
    power = [t["power_mean_w"] for t in complete]
    throttled = Counter(r for t in complete for r in t.get("throttle_reasons", []))
    rows += [
        Row("telemetry matmul", "power mean W (min / median / max over cases)",
            f"{min(power):.0f} / {np.median(power):.0f} / {max(power):.0f}", "", None),
        Row("telemetry matmul", "energy J (sum), methods", f"{sum(t['energy_j'] for t in complete):.1f}, "
            f"{dict(Counter(t['energy_method'] for t in complete))}", "", None),
        Row("telemetry matmul", "SM clock MHz (min of mins / median of medians)",
            f"{min(t['sm_clock_min_mhz'] for t in complete)} / "
            f"{np.median([t['sm_clock_median_mhz'] for t in complete]):.0f}", "", None),
        Row("telemetry matmul", "throttled cases (reasons)",
            f"{sum(bool(t.get('throttled')) for t in complete)} ({dict(throttled)})", "reported", None),
    ]
    counted = [t for t in complete if t["energy_method"] == "energy_counter"]
    if counted:
        ratio = float(np.median([t["energy_j"] / t["energy_window_s"] / t["power_mean_w"] for t in counted]))
        rows.append(Row("telemetry matmul", "median (energy/window) / mean sampled power", f"{ratio:.3f}",
                        "0.8 - 1.25", 0.8 <= ratio <= 1.25))
    return rows


def sampler_cost(out: Path, device: object) -> list[Row]:
    """tools/bench_sampler_cost.py: a ~10 ms matmul with sampling on and off."""
    path = out / "sampler_cost.json"
    proc = subprocess.run([sys.executable, str(SAMPLER_TOOL), "--json", str(path)], capture_output=True, text=True)
    (out / "sampler_cost.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return [Row("sampler cost", "exit code", str(proc.returncode), "0", False)]
    gpu = strict_json.loads(path.read_text())["gpu"]  # the tool writes strict JSON: a NaN comes back as NaN
    if "skipped" in gpu:
        return [Row("sampler cost", "GPU part", f"skipped: {gpu['skipped']}", "run", False)]
    return [Row("sampler cost", f"slowdown of {gpu['case']} (noise floor)",
                f"{gpu['slowdown_pct']:+.3f} % ({gpu['noise_floor_pct']:.3f} %)", f"< {gpu['target_pct']} %",
                gpu["slowdown_pct"] < gpu["target_pct"])]
