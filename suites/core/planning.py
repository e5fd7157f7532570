"""What a run of the suite will cost, per suite and in all, before it runs: `python -m suites plan` prints it for
any device (suites/plan.py), and the main job prints its total at its start and its progress line counts down
from it (suites/harness/pytest_plugin.py, suites/harness/progress.py).

Per case the estimate is `measured` where the last results of the same device identity timed it (`case_s`: what
the case cost that run, build, inputs, measurement, check and observers; from `--results FILE` or the newest run
of that identity under .benchmarks/), else `reasoned` from the model of suites/core/estimate.py with its host-side
parts measured here; pytest's own time per case is added to both. The achievable-peak search
(suites/core/achievable.py) is a line of its own: the short search's budget on a device identity with no cached
search, nothing where one is cached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from suites.core import achievable, devices, estimate, peaks
from suites.core.cases import Case
from suites.core.precision import DTYPES
from suites.core.profiles import Profile, search_plan
from suites.core.stopping import StopRule

# The GPU a CPU box plans for when --gpu is not given: the target, a one-GPU H200 box.
DEFAULT_GPU = "H200 SXM"
PYTEST_S_PER_CASE = 0.02  # pytest's own time per test (collection to report), measured by tools/bench_case_overhead.py
SEARCH = "(achievable search)"  # the plan's line for the achievable-peak search


@dataclass(frozen=True)
class SuitePlan:
    """One suite's plan: its cases, the estimated seconds, how many of its cases were measured, and on what the
    estimate rests."""

    suite: str
    cases: int
    seconds: float
    measured: int
    basis: str


def last_case_seconds(results: Path | None, identity: str | None, root: Path) -> tuple[dict[str, float], str]:
    """`case_s` per case id from a results file (given) or the newest results of `identity` under
    root/.benchmarks; and where they came from ('' when none)."""
    files = [results] if results is not None else sorted((root / ".benchmarks").rglob("*.json"),
                                                          key=lambda p: p.stat().st_mtime, reverse=True)
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        machine = data.get("machine_info", {}).get("identity", {}).get("machine")
        if results is None and (identity is None or machine != identity):
            continue
        seconds = {e["extra_info"]["case"]: e["extra_info"]["case_s"]
                   for e in [*data.get("benchmarks", []), *data.get("not_measured", [])]
                   if isinstance(e.get("extra_info", {}).get("case_s"), (int, float))}
        if seconds:
            return seconds, str(path)
    return {}, ""


def vendor_gpu(gpu: str) -> estimate.Target:
    """A GPU of the vendor table by name (suites/core/peaks.py), planned for from a machine without it."""
    part = next((p for p in peaks.VENDOR_PARTS if p.name.lower() == gpu.lower()), None)
    if part is None:
        raise ValueError(f"--gpu {gpu!r}: unknown; known: {', '.join(p.name for p in peaks.VENDOR_PARTS)}")
    tflops = {k: v * 1e12 for k, v in part.tflops.items()}
    return estimate.Target("cuda", part.name, tflops, fp64_flops=tflops["float32"],
                           bandwidth=part.bandwidth_gbps * 1e9, memory=part.min_memory_gib * 2**30)


def this_gpu(device: torch.device) -> estimate.Target:
    """This host's GPU, with the peaks a run of the suite uses (suites/core/devices.py)."""
    info = devices.gpu_info(device)
    peak = {k: v["value"] for k, v in info.peaks.items() if v.get("value")}
    flops = {k: v for k, v in peak.items() if k != "bandwidth"}
    return estimate.Target("cuda", info.name, flops, flops.get("float32", 1e13), peak.get("bandwidth", 1e12),
                           torch.cuda.get_device_properties(device).total_memory)


def this_cpu() -> estimate.Target:
    """This host's CPU: its float32 and bfloat16 matmul rates and copy bandwidth, timed here (tens of ms: the
    main job on a CPU pays it at its start)."""
    def rate(dtype: torch.dtype) -> float:
        a = torch.randn(256, 256).to(dtype)
        a @ a
        start = time.perf_counter()
        for _ in range(5):
            a @ a
        return 5 * 2 * 256**3 / (time.perf_counter() - start)

    x = torch.empty(2**22)
    start = time.perf_counter()
    x.clone()
    bandwidth = 2 * x.numel() * 4 / (time.perf_counter() - start)
    f32, bf16 = rate(torch.float32), rate(torch.bfloat16)
    flops = {"float32": f32, "bfloat16": bf16, "float16": bf16 / 4}
    return estimate.Target("cpu", devices.device_name(torch.device("cpu")), flops, f32 / 2, bandwidth, 8 * 2**30)


def plan(cases: Mapping[str, Sequence[Case]], rule: StopRule, target: estimate.Target, measured: Mapping[str, float],
         host: estimate.HostCosts) -> list[SuitePlan]:
    """Per suite: its cases and estimated seconds, each case measured where `measured` has it, else reasoned."""
    per_case = case_seconds([c for found in cases.values() for c in found], rule, target, measured, host)
    lines, at = [], 0
    for suite, found in cases.items():
        seconds = per_case[at:at + len(found)]
        known = sum(case.id in measured for case in found)
        lines.append(SuitePlan(suite, len(found), sum(seconds), known, basis(known, len(found), suite)))
        at += len(found)
    return lines


def case_seconds(cases: Sequence[Case], rule: StopRule, target: estimate.Target, measured: Mapping[str, float],
                 host: estimate.HostCosts) -> list[float]:
    """Each case's estimated seconds in run order (inputs drawn and references computed once where cases share
    them), pytest's own time included."""
    drawn: set = set()
    return [(measured[case.id] if case.id in measured else estimate.reasoned(case, rule, target, host, drawn))
            + host.pytest_s_per_case for case in cases]


def search_line(target: estimate.Target, cached: Path | None) -> SuitePlan:
    """The achievable search's line: nothing where this device identity has a cached search, else the short
    search's budget over the dtypes the target runs (each part over by at most its last shape)."""
    if cached is not None:
        return SuitePlan(SEARCH, 0, 0.0, 0, f"loaded from {cached}")
    short = search_plan(target.kind, Profile.QUICK)
    dtypes = [d for d in DTYPES if d in target.flops]
    seconds = achievable.total_budget_s(short, dtypes)
    return SuitePlan(SEARCH, 0, seconds, 0, f"reasoned: none cached for this device identity; the short search, "
                     f"{len(dtypes)} dtypes x {short.gemm_budget_s:g} s + {short.bandwidth_budget_s:g} s bandwidth, "
                     "once (then cached)")


def cached_search(device: torch.device, directory: Path) -> Path | None:
    """The achievable search a run on `device` would load from `directory` (None: it would search)."""
    found = achievable.load(directory, achievable.identity(device), Profile.QUICK)
    return Path(found.source.removeprefix("loaded from ")) if found is not None else None


def basis(measured: int, cases: int, suite: str) -> str:
    if measured == cases:
        return "measured (the last run's case_s)"
    reason = REASONED.get(suite, "FLOPs and bytes at half the peaks, the rule at its least")
    return f"{'reasoned' if not measured else f'{measured} measured, the rest reasoned'}: {reason}"


REASONED = {
    "matmul": "FLOPs at 50 % of the dtype's peak, the rule at its least, inputs drawn here",
    "conv": "FLOPs/bytes at 50 % of the peaks, launches at 8 us, inputs drawn once per shape here",
    "attention": "FLOPs at 50 % of the peaks, host-bound ones on the wall clock, fp64 reference per group",
    "train_step": "steps at 35 % MFU, model build 3 s, torch.compile 60 s per compiled case",
    "batch_size": "steps at 35 % MFU; batches: activations per sample in the case's budget (GPU full: 40 GiB), "
                  "bisection to 5 %",
    "numerics": "2 s per correctness experiment (run once)",
    "collectives": "refused without torchrun (10 ms each)",
    "train_step_distributed": "DDP/FSDP refused without torchrun; the local steps at 35 % MFU",
}


def total_line(lines: Iterable[SuitePlan]) -> str:
    lines = list(lines)
    return f"total: {sum(x.cases for x in lines)} cases, about {sum(x.seconds for x in lines) / 60:.0f} min"


def table(lines: list[SuitePlan]) -> str:
    rows = [f"{'suite':24} {'cases':>5} {'min':>6}  rests on"]
    rows += [f"{x.suite:24} {x.cases:5d} {x.seconds / 60:6.1f}  {x.basis}" for x in lines]
    return "\n".join(rows)
