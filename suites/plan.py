"""`python -m suites plan [--device cuda] [--bench-profile P] [--gpu NAME] [--results FILE]`: what the main job
will cost, before it runs, on any machine (a CPU box plans for a GPU one: no device is used, no case runs).

It collects the cases as `pytest bench/` would (each suite's case table, `SUITES`, the bench files' sources) for
the profile the run would get (given, or the device's default: full on CUDA), and prints per suite its cases and
estimated minutes, with what the estimate rests on: `measured` where the last results of the same device identity
timed the case (`--results FILE`, else the newest run of that identity under .benchmarks/), `reasoned` from the
model of suites/core/estimate.py otherwise, with the host-side parts measured here. Its last line is
`total: N cases, about M min`, the figure the main job prints at its start (suites/harness/pytest_plugin.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from suites.core import defaults

# The suites as bench/ collects them, in its order: (bench file, the module and function of its cases).
SUITES = (
    ("attention", "bench/test_attention.py", "suites.ops.attention"),
    ("batch_size", "bench/test_batch_size.py", "suites.training.batch_size"),
    ("collectives", "bench/test_collectives.py", "suites.distributed.collectives"),
    ("conv", "bench/test_conv.py", "suites.ops.conv"),
    ("matmul", "bench/test_matmul.py", "suites.ops.matmul"),
    ("numerics", "bench/test_numerics.py", "suites.training.numerics"),
    ("train_step", "bench/test_train_step.py", "suites.training.train_step"),
    ("train_step_distributed", "bench/test_train_step_distributed.py", "suites.distributed.parallel_step"),
)
# The GPU a CPU box plans for when --gpu is not given: the target, a one-GPU H200 box.
DEFAULT_GPU = "H200 SXM"
PYTEST_S_PER_CASE = 0.02  # pytest's own time per test (collection to report), measured by tools/bench_case_overhead.py


@dataclass(frozen=True)
class SuitePlan:
    """One suite's plan: its cases, the estimated seconds and how many of its cases were measured."""

    suite: str
    cases: int
    seconds: float
    measured: int
    basis: str


def collect(profile: str) -> dict[str, list]:
    """Every suite's cases for a profile, as the bench files parametrize them (no dtype filter)."""
    import importlib

    return {name: importlib.import_module(module).cases(profile) for name, _, module in SUITES}


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


def target_for(kind: str, gpu: str):
    """The device planned for: a GPU of the vendor table by name (suites/core/peaks.py), or this host's CPU."""
    from suites.core import estimate, peaks

    if kind == "cuda":
        part = next((p for p in peaks.VENDOR_PARTS if p.name.lower() == gpu.lower()), None)
        if part is None:
            raise ValueError(f"--gpu {gpu!r}: unknown; known: {', '.join(p.name for p in peaks.VENDOR_PARTS)}")
        tflops = {k: v * 1e12 for k, v in part.tflops.items()}
        return estimate.Target("cuda", part.name, tflops, fp64_flops=tflops["float32"],
                               bandwidth=part.bandwidth_gbps * 1e9, memory=part.min_memory_gib * 2**30)
    return cpu_target()


def this_gpu():
    """This host's GPU, with the peaks a run of the suite uses (suites/core/devices.py)."""
    import torch

    from suites.core import devices, estimate

    device = torch.device("cuda")
    info = devices.gpu_info(device)
    peak = {k: v["value"] for k, v in info.peaks.items() if v.get("value")}
    flops = {k: v for k, v in peak.items() if k != "bandwidth"}
    return estimate.Target("cuda", info.name, flops, flops.get("float32", 1e13), peak.get("bandwidth", 1e12),
                           torch.cuda.get_device_properties(device).total_memory)


def cpu_target():
    """This host's CPU: its float32 and bfloat16 matmul rates and copy bandwidth, timed here (a second)."""
    import time

    import torch

    from suites.core import estimate
    from suites.core.devices import device_name

    def rate(dtype: torch.dtype) -> float:
        a = torch.randn(512, 512).to(dtype)
        a @ a
        start = time.perf_counter()
        for _ in range(5):
            a @ a
        return 5 * 2 * 512**3 / (time.perf_counter() - start)

    x = torch.empty(2**24)
    start = time.perf_counter()
    x.clone()
    bandwidth = 2 * x.numel() * 4 / (time.perf_counter() - start)
    f32, bf16 = rate(torch.float32), rate(torch.bfloat16)
    flops = {"float32": f32, "bfloat16": bf16, "float16": bf16 / 4}
    return estimate.Target("cpu", device_name(torch.device("cpu")), flops, f32 / 2, bandwidth, 8 * 2**30)


def plan(cases: Mapping[str, list], profile: str, target, measured: Mapping[str, float],
         host) -> list[SuitePlan]:
    """Per suite: its cases and estimated seconds, each case measured where `measured` has it, else reasoned."""
    from suites.core import estimate
    from suites.core.profiles import rules

    rule = rules(profile).stop
    drawn: set = set()
    lines = []
    for suite, found in cases.items():
        seconds, known = 0.0, 0
        for case in found:
            if case.id in measured:
                seconds += measured[case.id]
                known += 1
            else:
                seconds += estimate.reasoned(case, rule, target, host, drawn)
            seconds += host.pytest_s_per_case
        lines.append(SuitePlan(suite, len(found), seconds, known, basis(known, len(found), suite)))
    return lines


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
    "batch_size": "steps at 35 % MFU; searches: activations per sample in a 40 GiB budget, bisection to 5 %",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites plan", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    parser.add_argument("--bench-profile", choices=defaults.PROFILES, default=None,
                        help="the profile (default: the device's, as pytest bench/ chooses it)")
    parser.add_argument("--gpu", default=DEFAULT_GPU, help=f"the GPU to plan for without one (default {DEFAULT_GPU})")
    parser.add_argument("--results", type=Path, default=None,
                        help="results of the device's last run (default: the newest of its identity in .benchmarks)")
    args = parser.parse_args(argv)
    kind = defaults.device_type(args.device)
    if args.device != "auto" and kind is None:
        parser.error(f"--device {args.device!r}: expected auto, cpu, cuda or cuda:N")
    if args.results is not None and not args.results.is_file():
        parser.error(f"--results {args.results}: no such file")
    import torch

    from suites.core import estimate

    here_cuda = torch.cuda.is_available()
    kind = kind or ("cuda" if here_cuda else "cpu")
    profile = args.bench_profile or str(defaults.default_profile(kind))
    source = "--bench-profile" if args.bench_profile else f"the default on {kind}"
    try:
        target = this_gpu() if kind == "cuda" and here_cuda else target_for(kind, args.gpu)
    except ValueError as exc:
        parser.error(str(exc))
    identity = device_identity(kind, here_cuda)
    measured, source_file = last_case_seconds(args.results, identity, Path.cwd())
    host = estimate.HostCosts.measure(PYTEST_S_PER_CASE)
    lines = plan(collect(profile), profile, target, measured, host)
    where = "measured on this host" if kind == "cpu" or here_cuda else "no GPU here: reasoned"
    print(f"plan for {target.name} ({kind}, {where}), profile {profile} ({source})")
    print(f"measured: {source_file or 'no results of this device identity (--results FILE)'}; host parts "
          f"measured here: randn {host.randn_s_per_element * 1e9:.1f} ns/element, pytest "
          f"{host.pytest_s_per_case * 1e3:.0f} ms/case")
    print(table(lines))
    print(total_line(lines))
    return 0


def device_identity(kind: str, here_cuda: bool) -> str | None:
    """The identity whose last run measures this plan: this machine's device of that kind, when it has one."""
    import torch

    from suites.core import devices

    if kind == "cuda" and not here_cuda:
        return None
    device = torch.device("cuda" if kind == "cuda" else "cpu")
    return devices.identity(device)["machine"]


if __name__ == "__main__":
    sys.exit(main())

