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
import sys
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


def collect(profile: str) -> dict[str, list]:
    """Every suite's cases for a profile, as the bench files parametrize them (no dtype filter)."""
    import importlib

    return {name: importlib.import_module(module).cases(profile) for name, _, module in SUITES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites plan", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    parser.add_argument("--bench-profile", choices=defaults.PROFILES, default=None,
                        help="the profile (default: the device's, as pytest bench/ chooses it)")
    parser.add_argument("--gpu", default=None, help="the GPU to plan for without one (default H200 SXM)")
    parser.add_argument("--results", type=Path, default=None,
                        help="results of the device's last run (default: the newest of its identity in .benchmarks)")
    parser.add_argument("--bench-achievable-cache", type=Path, default=defaults.achievable_cache(),
                        help="where a run looks for this machine's achievable search (default: %(default)s)")
    args = parser.parse_args(argv)
    kind = defaults.device_type(args.device)
    if args.device != "auto" and kind is None:
        parser.error(f"--device {args.device!r}: expected auto, cpu, cuda or cuda:N")
    if args.results is not None and not args.results.is_file():
        parser.error(f"--results {args.results}: no such file")
    import torch

    from suites.core import devices, estimate, planning
    from suites.core.profiles import rules

    here_cuda = torch.cuda.is_available()
    kind = kind or ("cuda" if here_cuda else "cpu")
    profile = args.bench_profile or str(defaults.default_profile(kind))
    source = "--bench-profile" if args.bench_profile else f"the default on {kind}"
    device = torch.device(kind) if kind == "cpu" or here_cuda else None  # this machine's, when it has one
    try:
        target = (planning.vendor_gpu(args.gpu or planning.DEFAULT_GPU) if device is None
                  else planning.this_gpu(device) if kind == "cuda" else planning.this_cpu())
    except ValueError as exc:
        parser.error(str(exc))
    identity = devices.identity(device)["machine"] if device is not None else None
    measured, source_file = planning.last_case_seconds(args.results, identity, Path.cwd())
    host = estimate.HostCosts.measure(planning.PYTEST_S_PER_CASE)
    cached = planning.cached_search(device, args.bench_achievable_cache) if device is not None else None
    lines = [planning.search_line(target, cached),
             *planning.plan(collect(profile), rules(profile).stop, target, measured, host)]
    where = "measured on this host" if device is not None else "no GPU here: reasoned"
    print(f"plan for {target.name} ({kind}, {where}), profile {profile} ({source})")
    print(f"measured: {source_file or 'no results of this device identity (--results FILE)'}; host parts "
          f"measured here: randn {host.randn_s_per_element * 1e9:.1f} ns/element, pytest "
          f"{host.pytest_s_per_case * 1e3:.0f} ms/case")
    print(planning.table(lines))
    print(planning.total_line(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
