"""gpu_check rows of the matmul runs: the dtype ladder, how every case's sampling ended, the achievable peaks.

The ladder and the stopping summary read `matmul.json` (gpu_check's `matmul` step) through reports.format.load. The
ladder gives, per dtype, the best TFLOP/s of the run and its percent of the datasheet peak (a figure above 100 %
means a wrong peak or a wrong timing, so it fails), and one row per case not measured (unsupported dtypes,
out of memory) with its reason; the stopping summary counts stop reasons, host-bound cases and samples the
hold dropped, the evidence that the figures are device time and that the stopping rule ends.

`achievable_search` is a probe: a search shorter than the full profile's (the check cannot spend minutes on
it), its peaks beside the datasheet's; mamf-finder found about 80 % (bf16) and 71-73 % (fp8) on H100/H200.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import torch

from reports.format import strict_json
from reports.format.errors import InputError
from suites.core import achievable, devices, profiles
from suites.core.cases import Unsupported
from suites.gpu_check.rows import Row, number, read_step, sourced, status_text

TIMEOUT_SHARE_LIMIT = 0.1  # more cases than this ending at the timeout: the stopping rule does not fit this GPU
# The check's search: the plan of the device's profile with shorter budgets (CUDA: 20 s per dtype instead of 60).
SEARCH_BUDGETS_S = {"cuda": (20.0, 5.0), "cpu": (3.5, 2.0)}  # (per dtype, bandwidth)
SEARCH_PROFILE = {"cuda": "full", "cpu": "quick"}
SEARCH_DTYPES = {"cuda": ("bfloat16", "float8_e4m3fn"), "cpu": ("float32", "bfloat16")}
# What a float8 figure is (suites.core.gemm.FP8_FAST_ACCUM): the accurate accumulation's, not the fastest float8.
ACCURATE_ACCUMULATION = ("accurate accumulation (use_fast_accum=False); cuBLASLt's fast accumulation is faster and "
                         "not measured here")


def ladder_rows(cases: list[dict]) -> Iterator[Row]:
    """The best measured case of each dtype, then every case not measured with its reason."""
    best: dict[str, dict] = {}
    for entry in cases:
        tflops = number(entry, "tflops")
        if entry.get("status") == "ok" and tflops and tflops > (number(best.get(entry.get("dtype"), {}), "tflops")
                                                                or 0):
            best[entry.get("dtype")] = entry
    for dtype, entry in best.items():
        pct = number(entry, "pct_peak")
        value = f"{entry['tflops']:.3g} TFLOP/s ({entry.get('case')})" + (f", {pct:.1f} % of peak" if pct else "")
        if entry.get("fast_accum") is False:
            value += f"; {ACCURATE_ACCUMULATION}"
        yield Row("matmul dtype ladder", str(dtype), value, "< 100 % of peak" if pct else "",
                  pct < 100 if pct else None)
    for entry in cases:
        if entry.get("status") != "ok":
            yield Row("matmul not measured", str(entry.get("case")), status_text(entry), "", None)


def dtype_ladder(out: Path, step: str) -> list[Row]:
    """Per dtype: the best TFLOP/s of the run, its case, and its percent of peak where a peak is known."""
    run = read_step(out, step)
    rows = list(ladder_rows(run.cases))
    return sourced(run, rows or [Row("matmul dtype ladder", "cases", "none recorded", "some", False)])


def ladder_gaps(cases: list[dict]) -> list[str]:
    """The ladder needs float32 and bfloat16 at least (the dtypes every device runs)."""
    return [f"no {dtype} case" for dtype in ("float32", "bfloat16") if not any(c.get("dtype") == dtype for c in cases)]


def stopping_rows(cases: list[dict]) -> list[Row]:
    """Stop reasons, host-bound cases and dropped samples over the measured cases."""
    measured = [c for c in cases if "median_s" in c]
    reasons = Counter(str(c.get("stop_reason", "absent")) for c in measured)
    timeouts = reasons.get("timeout", 0) / max(len(measured), 1)
    host_bound = [str(c.get("case")) for c in measured if c.get("host_bound") is True]
    dropped = int(sum(number(c, "dropped_samples") or 0 for c in measured))
    listed = ", ".join(host_bound[:3]) + ("..." if len(host_bound) > 3 else "")
    return [
        Row("matmul stopping", "stop reasons", str(dict(reasons)), f"timeouts <= {TIMEOUT_SHARE_LIMIT:.0%}",
            bool(measured) and timeouts <= TIMEOUT_SHARE_LIMIT),
        Row("matmul stopping", "host-bound cases, samples dropped by the hold", f"{len(host_bound)} ({listed}), "
            f"{dropped}", "", None),
    ]


def how_cases_stopped(out: Path, step: str) -> list[Row]:
    run = read_step(out, step)
    return sourced(run, stopping_rows(run.cases))


def search_plan(device_type: str) -> achievable.SearchPlan:
    """The profile's search plan with the check's shorter budgets."""
    gemm_s, bandwidth_s = SEARCH_BUDGETS_S[device_type]
    return dataclasses.replace(profiles.search_plan(device_type, SEARCH_PROFILE[device_type]),
                               gemm_budget_s=gemm_s, bandwidth_budget_s=bandwidth_s)


def measured_best(out: Path, step: str = "matmul") -> dict[str, tuple[float, str]]:
    """The best FLOP/s per dtype among the matmul step's measured cases, with the case (empty when that step did
    not run or left nothing readable); a case above its datasheet peak is no speed and is left out."""
    try:
        run = read_step(out, step)
    except InputError:
        return {}
    best: dict[str, tuple[float, str]] = {}
    for entry in run.cases:
        tflops, dtype = number(entry, "tflops"), str(entry.get("dtype"))
        if entry.get("status") == "ok" and tflops and not entry.get("tflops_above_peak") and (
                tflops * 1e12 > best.get(dtype, (0.0, ""))[0]):
            best[dtype] = (tflops * 1e12, str(entry.get("case")))
    return best


def peak_rows(peaks: achievable.Peaks, datasheet: dict, plan: achievable.SearchPlan,
              measured: dict[str, tuple[float, str]] | None = None) -> Iterator[Row]:
    """Each searched figure beside the datasheet's (CUDA), and why a dtype has none. A searched figure below what
    the matmul step measured in the same dtype says so: the short search missed that shape, and the achievable
    roof is at least the measured figure (never silently below a measured case)."""
    short = f"a {plan.gemm_budget_s:g} s search per dtype"
    for dtype, found in peaks.flops.items():
        sheet = number(datasheet.get(dtype) or {}, "value")
        share = f", {100 * found.value / sheet:.1f} % of the datasheet's {sheet / 1e12:.0f}" if sheet else ""
        value = f"{found.value / 1e12:.4g} TFLOP/s at {found.at}{share} ({short}, {found.tried} shapes)"
        best, case = (measured or {}).get(dtype, (0.0, ""))
        if best > found.value:
            value += (f"; below the {best / 1e12:.4g} TFLOP/s that {case} measured in the matmul step: the short "
                      "search missed that shape, so the achievable roof is at least the measured figure")
        yield Row("achievable gemm", dtype, value, "< datasheet" if sheet else "",
                  found.value < sheet if sheet else None)
    for what, reason in peaks.missing.items():
        yield Row("achievable", what, f"none: {reason}"[:160], "a figure", False)
    if peaks.bandwidth is not None:
        sheet = number(datasheet.get("bandwidth") or {}, "value")
        share = f", {100 * peaks.bandwidth.value / sheet:.1f} % of the datasheet" if sheet else ""
        yield Row("achievable bandwidth", peaks.bandwidth.at, f"{peaks.bandwidth.value / 1e9:.0f} GB/s{share}",
                  "< datasheet" if sheet else "", peaks.bandwidth.value < sheet if sheet else None)


def achievable_search(out: Path, device: torch.device) -> Iterator[Row]:
    """Search the gemm peaks of two dtypes and the bandwidth with the check's plan, save them in
    out/achievable.json, and give them beside the datasheet peaks."""
    plan = search_plan(device.type)
    peaks = achievable.Peaks(profile=f"gpu_check ({SEARCH_PROFILE[device.type]}, shortened)",
                             identity=achievable.identity(device), source="searched by gpu_check")
    for dtype in SEARCH_DTYPES[device.type]:
        try:
            peaks.flops[dtype] = achievable.search_gemm(dtype, device, plan)
        except Unsupported as exc:
            peaks.missing[dtype] = str(exc)
    peaks.kernels = achievable.search_bandwidth(device, plan)
    if peaks.kernels:
        peaks.bandwidth = max(peaks.kernels.values(), key=lambda f: f.value)
    else:
        peaks.missing["bandwidth"] = "no copy or triad array size of the plan fits in memory"
    (out / "achievable.json").write_text(strict_json.dumps(peaks.as_dict(), indent=1))
    datasheet = devices.gpu_info(device).peaks if device.type == "cuda" else {}
    for row in peak_rows(peaks, datasheet, plan, measured_best(out)):
        row.source = "achievable.json"
        yield row
