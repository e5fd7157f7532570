"""gpu_check rows of the matmul run: the dtype ladder, and how every case's sampling ended.

Both read `matmul.json` (gpu_check's `matmul` step). The ladder gives, per dtype, the best TFLOP/s of the run
and its percent of the datasheet peak (a figure above 100 % means a wrong peak or a wrong timing, so it fails);
the stopping summary counts stop reasons, host-bound cases and samples the hold dropped, the evidence that the
figures are device time and that the stopping rule ends.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from suites.checks.gpu_check import Row

TIMEOUT_SHARE_LIMIT = 0.1  # more cases than this ending at the timeout: the stopping rule does not fit this GPU


def _run(out: Path) -> dict | None:
    path = out / "matmul.json"
    return json.loads(path.read_text()) if path.exists() else None


def _missing() -> list[Row]:
    return [Row("matmul", "matmul.json not written", "the pytest run failed or was stopped", "", False)]


def dtype_ladder(out: Path) -> list[Row]:
    """Per dtype: the best TFLOP/s of the run, its case, and its percent of peak where a peak is known."""
    run = _run(out)
    if run is None:
        return _missing()
    best: dict[str, dict] = {}
    for bench in run["benchmarks"]:
        info = bench["extra_info"]
        dtype = bench["params"].get("dtype")
        if info.get("status") == "ok" and info.get("tflops") and info["tflops"] > best.get(dtype, {}).get("tflops", 0):
            best[dtype] = info
    rows = []
    for dtype, info in best.items():
        pct = info.get("pct_peak")
        value = f"{info['tflops']:.3g} TFLOP/s ({info['case']})" + (f", {pct:.1f} % of peak" if pct else "")
        rows.append(Row("matmul dtype ladder", dtype, value, "< 100 % of peak" if pct else "",
                        pct < 100 if pct else None))
    for entry in run.get("not_measured", []):
        info = entry.get("extra_info", {})
        rows.append(Row("matmul not measured", info.get("case", entry.get("name", "?")),
                        f"{info.get('status')}: {info.get('reason')}"[:160], "", None))
    return rows


def how_cases_stopped(out: Path) -> list[Row]:
    """Stop reasons, host-bound cases and dropped samples over the run's measured cases."""
    run = _run(out)
    if run is None:
        return _missing()
    infos = [b["extra_info"] for b in run["benchmarks"]]
    reasons = Counter(info.get("stop_reason", "absent") for info in infos)
    timeouts = reasons.get("timeout", 0) / max(len(infos), 1)
    host_bound = [info["case"] for info in infos if info.get("host_bound")]
    dropped = sum(info.get("dropped_samples", 0) for info in infos)
    return [
        Row("matmul stopping", "stop reasons", str(dict(reasons)), f"timeouts <= {TIMEOUT_SHARE_LIMIT:.0%}",
            bool(infos) and timeouts <= TIMEOUT_SHARE_LIMIT),
        Row("matmul stopping", "host-bound cases, samples dropped by the hold",
            f"{len(host_bound)} ({', '.join(host_bound[:3])}{'...' if len(host_bound) > 3 else ''}), {dropped}",
            "", None),
    ]
