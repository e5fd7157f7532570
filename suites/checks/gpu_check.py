"""`python -m suites.gpu_check`: checks a new GPU box inside a time budget, printing each figure as it is known.

The steps run in order of value: a preflight (what machine, driver, versions, and whether Triton and Inductor
can build here), then the figures that verify the measurement itself (the stream hold keeps a slow host out of
device time; our timer agrees with torch.utils.benchmark and triton's do_bench), then the suites' must-shows
(the matmul dtype ladder, tensor cores in traces, flash vs naive attention, conv formats, the GPT-2 step, the
numerics checks, the largest batch, the telemetry sampler's cost).

Each step is one subprocess (a pytest run of a bench file measured exactly as the main job measures it, or a
probe function), with its own timeout, never longer than what is left of `--budget-s`; a step whose estimate no
longer fits is skipped with that reason, so the command ends inside its budget and never ends empty. A pytest
step that runs out of time is sent SIGTERM first, so the cases it finished are written. Every row is printed
and flushed the moment it is known and appended to `rows.jsonl` in `--out`; a step removes its own output files
before it runs, and `rows.jsonl` starts empty, so nothing of an earlier run into the same folder is read. On a
CPU (`--device cpu`) the steps that need a GPU are skipped with that reason and the rest run on the quick profile.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tabulate import tabulate

from reports import strict_json

DEFAULT_BUDGET_S = 480.0
TERM_GRACE_S = 20.0  # after SIGTERM, how long a pytest step has to write the cases it finished
READ_MARGIN_S = 5.0  # kept back from each step's timeout for reading its files and printing
ROW_PREFIX = "GPU_CHECK_ROW "


@dataclass
class Row:
    """One figure: what it checks, its value, the target it is held to, and whether it passes (None: a figure
    to read, not a verdict)."""

    check: str
    figure: str
    value: str
    target: str
    ok: bool | None
    step: str = ""


@dataclass(frozen=True)
class StepPlan:
    """What a step does on one kind of device: its estimated seconds, then a pytest run (bench file and
    selection; `{out}` stands for --out) or a probe ("module:function" taking (out, device), run in a
    subprocess), and readers ("module:function" taking out) that turn the files written into rows."""

    estimate_s: float
    pytest_args: tuple[str, ...] = ()
    probe: str | None = None
    readers: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckStep:
    """A step of the check: a plan per device type (`cuda`, `cpu`); a device type without one is skipped."""

    name: str
    plans: dict[str, StepPlan]
    outputs: tuple[str, ...] = field(default=())  # files and folders under --out besides NAME.json and NAME.log


MATMUL_READERS = ("suites.checks.matmul:dtype_ladder", "suites.checks.matmul:how_cases_stopped")
STEPS: tuple[CheckStep, ...] = (
    CheckStep("preflight", {"cuda": StepPlan(20, probe="suites.checks.preflight:preflight"),
                       "cpu": StepPlan(8, probe="suites.checks.preflight:preflight")}),
    CheckStep("timing", {"cuda": StepPlan(45, probe="suites.checks.timing:timing_checks"),
                    "cpu": StepPlan(20, probe="suites.checks.timing:timing_checks")}),
    CheckStep("matmul", {
        "cuda": StepPlan(120, ("bench/test_matmul.py",),
                     readers=(*MATMUL_READERS, "suites.checks.profiling:telemetry_of_run")),
        "cpu": StepPlan(15, ("bench/test_matmul.py", "-k", "256x256x256 and (float32 or bfloat16)"),
                    readers=MATMUL_READERS)}),
    CheckStep("trace", {"cuda": StepPlan(30, ("bench/test_matmul.py", "-k", "4096x4096x4096", "--bench-dtypes",
                                     "bfloat16,tf32,float32", "--trace-dir", "{out}/traces"),
                                readers=("suites.checks.profiling:trace_tensor_cores",))}, outputs=("traces",)),
    CheckStep("achievable", {"cuda": StepPlan(160, ("bench/test_matmul.py", "-k", "4096x4096x4096", "--bench-dtypes",
                                           "bfloat16,float8_e4m3fn", "--achievable-peaks", "search",
                                           "--achievable-cache", "{out}/achievable_cache"),
                                     readers=("suites.checks.matmul:achievable_peaks",))},
         outputs=("achievable_cache",)),
    CheckStep("attention", {"cuda": StepPlan(60, ("bench/test_attention.py", "-k",
                                         "bfloat16 and (flash or naive) and (4x16x4096x128 or 1x16x16384x128)"),
                                    readers=("suites.checks.attention:flash_vs_naive",))}),
    CheckStep("attention_do_bench", {"cuda": StepPlan(25, probe="suites.checks.attention:flash_do_bench")}),
    CheckStep("conv", {"cuda": StepPlan(45, ("bench/test_conv.py", "-k",
                                    "k3s1 and x56x56 and (bfloat16 or float32) and fwd_bwd"),
                               readers=("suites.checks.conv:formats_and_dtypes",))}),
    CheckStep("train_step", {
        "cuda": StepPlan(150, ("bench/test_train_step.py", "-k",
                           "gpt2-124m and (baseline or (precision and (eager or amp_bf16)))"),
                     readers=("suites.checks.train_step:gpt2_grid", "suites.checks.train_step:steps_and_hosts")),
        "cpu": StepPlan(25, ("bench/test_train_step.py", "-k", "gpt-tiny and baseline"),
                    readers=("suites.checks.train_step:steps_and_hosts",))}),
    CheckStep("numerics", {"cuda": StepPlan(60, ("bench/test_numerics.py",),
                                            readers=("suites.checks.numerics:ran_once",)),
                      "cpu": StepPlan(12, ("bench/test_numerics.py", "-k", "format or loss_scaler"),
                                  readers=("suites.checks.numerics:ran_once",))}),
    CheckStep("train_step_compiled", {"cuda": StepPlan(200, ("bench/test_train_step.py", "-k",
                                                    "gpt2-124m and precision and compiled and not amp_bf16"),
                                              readers=("suites.checks.train_step:steps_and_hosts",))}),
    CheckStep("batch_size", {"cuda": StepPlan(180, ("bench/test_batch_size.py", "-k",
                                           "max_batch and gpt2-124m and (checkpoint-off or amp_bf16)"),
                                     readers=("suites.checks.batch_size:largest_batches",))}),
    CheckStep("sampler_cost", {"cuda": StepPlan(40, probe="suites.checks.profiling:sampler_cost")}),
)
STEP_NAMES = tuple(step.name for step in STEPS)


def load_function(name: str) -> Callable:
    """A "module:function" name, imported only when run: a missing optional tool (triton) fails one step."""
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


def skip_reason(step: CheckStep, device_type: str, left_s: float, only: set[str] | None) -> str | None:
    """Why a step does not run now, or None when it does."""
    if only is not None and step.name not in only:
        return "not in --only"
    plan = step.plans.get(device_type)
    if plan is None:
        return f"needs a {' or '.join(step.plans)} device; this run measures {device_type}"
    usable = left_s - READ_MARGIN_S - TERM_GRACE_S
    if plan.estimate_s > usable:
        return f"over budget: needs about {plan.estimate_s:.0f} s, {max(usable, 0):.0f} s usable left"
    return None


def step_timeout(plan: StepPlan, left_s: float) -> float:
    """A step's own limit: twice its estimate and half a minute, and never past what the budget has left (less
    the time a stopped pytest needs to write its file and the rows need to be read)."""
    return min(2 * plan.estimate_s + 30, left_s - READ_MARGIN_S - TERM_GRACE_S)


class Budget:
    """Seconds left of --budget-s, from the moment the check started."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()


@dataclass
class Finished:
    """A subprocess's outcome: its exit code (None when it was stopped at its timeout), output and seconds."""

    returncode: int | None
    output: str
    seconds: float


def run_bounded(cmd: list[str], timeout_s: float, log: Path) -> Finished:
    """Run `cmd` for at most `timeout_s`; at the limit send SIGTERM (pytest then writes what it finished), and
    SIGKILL after TERM_GRACE_S. The output goes to `log` as well."""
    start = time.perf_counter()
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return Finished(code, log.read_text(errors="replace"), time.perf_counter() - start)


def clean(step: CheckStep, out: Path) -> None:
    """Remove what this step writes, so that its readers see only this run's files."""
    for name in (f"{step.name}.json", f"{step.name}.log", *step.outputs):
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _outcome(finished: Finished, timeout_s: float) -> str:
    if finished.returncode is None:
        return f"stopped at its {timeout_s:.0f} s timeout"
    return f"exit {finished.returncode}"


def pytest_rows(step: CheckStep, plan: StepPlan, out: Path, device: str, profile: str, timeout_s: float) -> list[Row]:
    """Run the step's bench selection under pytest into out/NAME.json; one row says how it went."""
    args = [arg.replace("{out}", str(out)) for arg in plan.pytest_args]
    if "--achievable-peaks" not in args:
        args += ["--achievable-peaks", "off"]  # the search has a step of its own; minutes are not spent per step
    cmd = [sys.executable, "-m", "pytest", *args, "--benchmark-only", "--device", device, "--bench-profile",
           profile, "-q", "-p", "no:cacheprovider", f"--benchmark-json={out / f'{step.name}.json'}"]
    finished = run_bounded(cmd, timeout_s, out / f"{step.name}.log")
    summary = next((line for line in reversed(finished.output.splitlines()) if " in " in line and "=" not in line),
                   (finished.output.strip().splitlines() or ["no output"])[-1])
    return [Row(f"pytest {step.name}", "wall time, result",
                f"{finished.seconds:.0f} s, {summary.strip()[:160]} ({_outcome(finished, timeout_s)})", "exit 0",
                finished.returncode == 0)]


def probe_rows(step: CheckStep, plan: StepPlan, out: Path, device: str, timeout_s: float) -> list[Row]:
    """Run the step's probe in a subprocess (suites.checks.probe) and read the rows it printed."""
    cmd = [sys.executable, "-m", "suites.checks.probe", plan.probe, str(out), device]
    finished = run_bounded(cmd, timeout_s, out / f"{step.name}.log")
    rows = [Row(**json.loads(line[len(ROW_PREFIX):])) for line in finished.output.splitlines()
            if line.startswith(ROW_PREFIX)]
    if finished.returncode != 0:
        tail = (finished.output.strip().splitlines() or ["no output"])[-1]
        rows.append(Row(step.name, "probe", f"{_outcome(finished, timeout_s)}: {tail[:160]}", "exit 0", False))
    return rows


def reader_rows(name: str, out: Path) -> list[Row]:
    try:
        return load_function(name)(out)
    except json.JSONDecodeError as exc:
        return [Row(name, "results", f"not complete JSON ({exc.msg}): the run was stopped before it wrote them",
                    "", False)]
    except Exception as exc:  # one failing reader must not hide the others' figures
        return [Row(name, "error", f"{type(exc).__name__}: {exc}"[:160], "", False)]


def run_step(step: CheckStep, plan: StepPlan, out: Path, device: str, timeout_s: float) -> Iterator[Row]:
    clean(step, out)
    profile = "full" if device.startswith("cuda") else "quick"
    if plan.pytest_args:
        yield from pytest_rows(step, plan, out, device, profile, timeout_s)
    if plan.probe:
        yield from probe_rows(step, plan, out, device, timeout_s)
    for name in plan.readers:
        yield from reader_rows(name, out)


class Report:
    """Prints each row as it comes (flushed) and appends it to rows.jsonl with the seconds since the start."""

    def __init__(self, out: Path, budget: Budget) -> None:
        self.path, self.budget, self.rows = out / "rows.jsonl", budget, []
        self.path.write_text("")

    def emit(self, row: Row) -> None:
        self.rows.append(row)
        mark = {True: "PASS", False: "FAIL", None: "    "}[row.ok]
        print(f"[{self.budget.elapsed():6.1f} s] {mark} {row.step:<20} {row.check}: {row.figure} = {row.value}"
              + (f" (target {row.target})" if row.target else ""), flush=True)
        with self.path.open("a") as fh:
            fh.write(strict_json.dumps(asdict(row) | {"t_s": round(self.budget.elapsed(), 2)}) + "\n")


def resolve_device(option: str) -> str:
    """`auto` is `cuda` when torch sees a GPU, else `cpu`."""
    if option != "auto":
        return option
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_only(text: str | None) -> set[str] | None:
    if not text:
        return None
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(STEP_NAMES))
    if unknown or not names:
        raise SystemExit(f"error: --only: unknown step {', '.join(unknown) or '(none given)'}; "
                         f"steps: {', '.join(STEP_NAMES)}")
    return names


def check(out: Path, device: str, budget: Budget, only: set[str] | None) -> list[Row]:
    """Run every step that fits, in order; return all rows (printed and saved as they came)."""
    report = Report(out, budget)
    device_type = device.split(":")[0]
    for step in STEPS:
        reason = skip_reason(step, device_type, budget.left(), only)
        if reason is not None:
            report.emit(Row(step.name, "skipped", reason, "", None, step.name))
            continue
        plan = step.plans[device_type]
        for row in run_step(step, plan, out, device, step_timeout(plan, budget.left())):
            row.step = step.name
            report.emit(row)
    return report.rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check", help="directory for rows.jsonl, JSON and logs")
    parser.add_argument("--device", default="auto", help="auto (default: cuda when available), cuda, cuda:N or cpu")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds the whole check may take (default {DEFAULT_BUDGET_S:g})")
    parser.add_argument("--only", help=f"comma-separated steps to run (default: all): {', '.join(STEP_NAMES)}")
    args = parser.parse_args(argv)
    if not args.budget_s > 0 or args.budget_s == float("inf"):
        parser.error(f"--budget-s {args.budget_s}: expected a positive number of seconds")
    only = parse_only(args.only)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--out {out}: {exc.strerror or exc}")
    budget = Budget(args.budget_s)
    rows = check(out, resolve_device(args.device), budget, only)
    print()
    print(tabulate([{k: v for k, v in asdict(r).items()} for r in rows], headers="keys", tablefmt="github"))
    failed = sum(r.ok is False for r in rows)
    print(f"\n{len(rows)} rows, {failed} failed, in {budget.elapsed():.0f} s of a {args.budget_s:.0f} s budget; "
          f"rows in {out / 'rows.jsonl'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
