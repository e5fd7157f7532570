"""`python -m suites.gpu_check`: checks a new GPU box in minutes and prints a short table at the end.

It runs each suite's GPU must-show cases through pytest (so they are measured exactly as the main job measures
them, JSON included) and then each suite's cross-checks against peer tools (triton.testing.do_bench, ...).
A suite adds its checks by appending to PYTEST_RUNS and CROSS_CHECKS. Every JSON lands in --out.
Cross-checks are named as "module:function" and imported only when run: a check module may import this one
(for Row) without an import cycle, and a missing optional tool (triton) fails one row, not the command.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate


@dataclass(frozen=True)
class PytestRun:
    """One pytest invocation over a bench file (or a -k selection of it) with the full profile on CUDA.
    `{out}` in an argument stands for the --out directory."""

    name: str
    args: tuple[str, ...]


@dataclass
class Row:
    """One line of the final table: a figure, what it is compared with, and whether it passes."""

    check: str
    figure: str
    value: str
    target: str
    ok: bool | None


PYTEST_RUNS: list[PytestRun] = [
    # the full matmul profile (read by suites.checks.crosscheck).
    PytestRun("matmul", ("bench/test_matmul.py",)),
    # profiler traces of one matmul in three precisions (read by suites.checks.profiling).
    PytestRun("trace", ("bench/test_matmul.py", "-k", "4096x4096x4096", "--bench-dtypes", "bfloat16,tf32,float32",
                        "--trace-dir", "{out}/traces")),
    # flash and naive attention, bfloat16, head dim 128, at 4k and 16k tokens (suites.checks.attention).
    PytestRun("attention", ("bench/test_attention.py", "-k",
                            "bfloat16 and (flash or naive) and (4x16x4096x128 or 1x16x16384x128)")),
    # the 3x3 convolutions at 56x56, float32 and bfloat16, both memory formats (suites.checks.conv).
    PytestRun("conv", ("bench/test_conv.py", "-k", "k3s1 and x56x56 and (bfloat16 or float32) and fwd_bwd")),
    # GPT-2 124M training step in four precisions, compile off and on (suites.checks.train_step).
    PytestRun("train_step", ("bench/test_train_step.py", "-k", "gpt2-124m and (baseline or precision)")),
    # numerics (parity of the small GPT in three precisions, audits of GPT-2 124M and ResNet-50: ~1 min).
    PytestRun("numerics", ("bench/test_numerics.py",)),
    # largest batch of GPT-2 124M at seq 1024: fp32, amp_bf16, amp_bf16 + checkpointing (~3 min).
    PytestRun("batch_size", ("bench/test_batch_size.py", "-k",
                             "max_batch and gpt2-124m and (checkpoint-off or amp_bf16)")),
]

# "module:function" names; each function takes the --out directory (where the PYTEST_RUNS' JSON files are)
# and returns rows for the table.
CROSS_CHECKS: list[str] = [
    "suites.checks.crosscheck:matmul_do_bench_check",
    "suites.checks.profiling:trace_tensor_cores",
    "suites.checks.profiling:telemetry_of_run",
    "suites.checks.profiling:sampler_cost",
    "suites.checks.attention:flash_vs_naive",
    "suites.checks.attention:flash_do_bench",
    "suites.checks.conv:formats_and_dtypes",
    "suites.checks.train_step:gpt2_grid",
    "suites.checks.batch_size:largest_batches",
]


def load_check(name: str) -> Callable[[Path], list[Row]]:
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


def run_pytest(run: PytestRun, out: Path, device: str) -> Row:
    json_path = out / f"{run.name}.json"
    args = [arg.replace("{out}", str(out)) for arg in run.args]
    cmd = [sys.executable, "-m", "pytest", *args, "--benchmark-only", "--device", device, "--bench-profile",
           "full", "-q", "-p", "no:cacheprovider", f"--benchmark-json={json_path}"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (out / f"{run.name}.log").write_text(proc.stdout + proc.stderr)
    summary = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    return Row(f"pytest {run.name}", "wall time, result", f"{seconds:.0f} s, {summary}", "exit 0", proc.returncode == 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check", help="directory for JSON and logs (default: gpu_check)")
    parser.add_argument("--device", default="cuda", help="the CUDA device to check (default: cuda)")
    parser.add_argument("--only", help="comma-separated names of the pytest runs to do (default: all)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    rows = [run_pytest(run, out, args.device) for run in PYTEST_RUNS if only is None or run.name in only]
    for name in CROSS_CHECKS:
        try:
            rows.extend(load_check(name)(out))
        except Exception as exc:  # one failing check must not hide the others' figures
            rows.append(Row(name, "error", f"{type(exc).__name__}: {exc}"[:160], "", False))
    print(tabulate([vars(r) for r in rows], headers="keys", tablefmt="github"))
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
