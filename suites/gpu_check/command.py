"""`python -m suites.gpu_check`: checks a new GPU box inside a time budget, printing each figure as it is known.

The steps (suites/gpu_check/steps.py) run in order of value to a user of the box, each in a subprocess of its own
(a pytest run of a bench file measured exactly as the main job measures it, a probe function, or a tool) with
its own timeout, never longer than what is left of `--budget-s`. Before anything runs, the plan is made from what
each step is expected to take: its wall time measured by an earlier run on this device identity where there is
one (suites/gpu_check/step_times.py, updated after every step), else its reasoned estimate. A budget in which no step
fits is an error, and `--plan` prints the plan, with which figures are measured and which reasoned, and runs
nothing. A step that no longer fits when its turn comes is skipped with that reason, so the command ends inside
its budget. A pytest step that runs out of time is sent SIGTERM first, so the cases it finished are written;
stopping the check itself (SIGTERM, SIGHUP, Ctrl-C) stops the running step the same way before the check ends,
and on Linux a step also ends when the check is killed outright (suites/core/children.py). A step of more than
`--progress-s` seconds prints a line that often, naming itself, its time and the last line of its log.

Every row is printed and flushed the moment it is known and appended to `rows.jsonl` in `--out`, with the file
it was read from; a step removes its own output files (and a journal a killed run left) before it runs, and
`rows.jsonl` starts empty, so nothing of an earlier run into the same folder is read. On a CPU (`--device
cpu`) the GPU-only steps are skipped with that reason and the rest run small selections on the quick profile.

The bench files and tools run from this checkout of the repository (`checkout`): outside one, the check says
so in one line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tabulate import tabulate

from reports.format import strict_json
from reports.format.errors import InputError
from reports.format.load import output_dir
from suites.core.children import GRACE_S, Finished, run_bounded
from suites.core.defaults import device_type
from suites.gpu_check import step_times
from suites.gpu_check.rows import ROW_PREFIX, Row
from suites.gpu_check.step_times import Measured, StepTimes, plan_key
from suites.gpu_check.steps import PROFILE, STEP_NAMES, STEPS, CheckStep, Reader, StepPlan

# The CUDA steps' reasoned estimates add up to about 700 s (`--plan --device cuda`): every step is scheduled with
# more than the 15 % spare the plan is held to (SPARE_SHARE, tests/test_gpu_check.py).
DEFAULT_BUDGET_S = 900.0
SPARE_SHARE = 0.15
MAX_BUDGET_S = 24 * 3600.0  # longer is a typo (milliseconds?), not a check
READ_MARGIN_S = 5.0  # kept back from each step's timeout for reading its files and printing
PROGRESS_S = 30.0
PROGRESS_RANGE_S = (1.0, 3600.0)
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT_PARTS = ("bench", "tools", "conftest.py")  # what the steps run from the repository's root


class UsageError(Exception):
    """A command line the check cannot run: one line on stderr, exit code 2."""


def checkout() -> Path:
    """The repository root the steps run bench/ and tools/ from; a UsageError when this is not a checkout
    (the package installed elsewhere has no bench files)."""
    missing = [part for part in CHECKOUT_PARTS if not (ROOT / part).exists()]
    if missing:
        raise UsageError(f"gpu_check runs the bench files and tools of a checkout of this repository, and {ROOT} "
                         f"has no {', '.join(missing)}: run it from a clone (python -m suites.gpu_check)")
    return ROOT


def load_function(name: str) -> Callable:
    """A "module:function" name, imported only when run: a missing optional tool (triton) fails one step."""
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


def expected_s(step: CheckStep, device_type: str, times: StepTimes | None) -> tuple[float, Measured | None]:
    """What a step is expected to take here: its measured wall time on this device identity where an earlier run
    kept one for the same plan, else its reasoned estimate (then None beside it)."""
    plan_ = step.plans[device_type]
    measured = times.measured(step.name, plan_key(plan_, PROFILE[device_type])) if times is not None else None
    return (measured.seconds, measured) if measured is not None else (plan_.estimate.seconds, None)


def skip_reason(step: CheckStep, device_type: str, left_s: float, only: set[str] | None,
                seconds: float | None = None) -> str | None:
    """Why a step does not run now, or None when it does (`seconds`: what it is expected to take, by default its
    reasoned estimate)."""
    if only is not None and step.name not in only:
        return "not in --only"
    plan_ = step.plans.get(device_type)
    if plan_ is None:
        return f"needs a {' or '.join(step.plans)} device; this run measures {device_type}"
    need = plan_.estimate.seconds if seconds is None else seconds
    usable = left_s - READ_MARGIN_S - GRACE_S
    if need > usable:
        return f"over budget: needs about {need:.0f} s, {max(usable, 0):.0f} s usable left"
    return None


def step_timeout(seconds: float, left_s: float) -> float:
    """A step's own limit: twice what it is expected to take and half a minute, and never past what the budget has
    left (less the time a stopped pytest needs to write its file and the rows need to be read)."""
    return min(2 * seconds + 30, left_s - READ_MARGIN_S - GRACE_S)


@dataclass
class Planned:
    """A step's place in the plan: what it is expected to take (measured here before, or reasoned), when it would
    start if every step before took what it is expected to, or why it does not run."""

    step: CheckStep
    start_s: float
    skipped: str | None
    seconds: float = 0.0
    measured: Measured | None = None


def plan(device_type: str, budget_s: float, only: set[str] | None, times: StepTimes | None = None) -> list[Planned]:
    """The schedule the expected times give: each step that fits starts when the ones before it would end."""
    planned, clock = [], 0.0
    for step in STEPS:
        seconds, measured = expected_s(step, device_type, times) if device_type in step.plans else (0.0, None)
        reason = skip_reason(step, device_type, budget_s - clock, only, seconds)
        planned.append(Planned(step, clock, reason, seconds, measured))
        if reason is None:
            clock += seconds
    return planned


def budget_for_all(planned: list[Planned], device_type: str) -> float:
    """The budget, in tens of seconds, that schedules every step of this device with SPARE_SHARE to spare."""
    total = sum(p.seconds for p in planned if device_type in p.step.plans and p.skipped != "not in --only")
    return 10 * math.ceil(total / (1 - SPARE_SHARE) / 10)


def plan_table(planned: list[Planned], device_type: str, budget_s: float, learned: str) -> str:
    """--plan's output: every step with what it is expected to take, whether that was measured on this device or
    reasoned (and what it rests on), and whether it is scheduled; then the total, the spare share and what the
    budget leaves out. `learned` says where the measured times come from, or why there are none."""
    rows = []
    for p in planned:
        plan_ = p.step.plans.get(device_type)
        reasoned = f"{plan_.estimate.parts()}: {plan_.estimate.rests_on}" if plan_ else ""
        rests_on = (f"{p.measured.text()}; reasoned {plan_.estimate.seconds:.0f} s: {reasoned}" if p.measured
                    else reasoned)
        rows.append({"step": p.step.name, "at s": f"{p.start_s:.0f}" if p.skipped is None else "",
                     "exp. s": f"{p.seconds:.0f}" if plan_ else "",
                     "from": ("measured" if p.measured else "reasoned") if plan_ else "",
                     "schedule": p.skipped or "scheduled", "shows": p.step.shows, "what it rests on": rests_on})
    scheduled = [p for p in planned if p.skipped is None]
    total = sum(p.seconds for p in scheduled)
    measured = sum(p.measured is not None for p in scheduled)
    lines = [tabulate(rows, headers="keys", tablefmt="github", maxcolwidths=[None, None, None, None, 24, 40, 60]),
             "", f"{len(scheduled)} of {len(planned)} steps scheduled on {device_type} ({PROFILE[device_type]} "
             f"profile), about {total:.0f} s of a {budget_s:.0f} s budget ({100 * (1 - total / budget_s):.0f} % "
             f"spare); {measured} of them expected from times measured on this device, {len(scheduled) - measured} "
             f"reasoned. {learned}"]
    left_out = [p for p in planned if p.skipped and p.skipped.startswith("over budget")]
    if left_out:
        lines.append(f"Left out for time: {', '.join(f'{p.step.name} ({p.seconds:.0f} s)' for p in left_out)}; "
                     f"--budget-s {budget_for_all(planned, device_type):.0f} schedules every step with "
                     f"{SPARE_SHARE:.0%} spare.")
    return "\n".join(lines)


def clean(step: CheckStep, out: Path) -> None:
    """Remove what this step writes (a killed run's journal too), so that its readers see only this run's files
    and pytest does not refuse to start over a journal."""
    for name in (f"{step.name}.json", f"{step.name}.json.journal", f"{step.name}.log", *step.outputs):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _outcome(finished: Finished, timeout_s: float) -> str:
    if finished.returncode is None:
        return f"stopped at its {timeout_s:.0f} s timeout"
    return f"exit {finished.returncode}"


def _pytest_summary(output: str) -> str:
    """pytest's closing line (`3 passed, 1 skipped in 12.3s`), or the last line it wrote."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    closing = [m.group(1) for line in lines if (m := re.fullmatch(r"=+ (.+ in [\d.]+s.*?) =+", line))]
    return (closing or lines or ["no output"])[-1][:160]


@dataclass
class StepRun:
    """What one step runs: where, with which device and profile, within what time; and how it reports."""

    step: CheckStep
    plan: StepPlan
    out: Path
    device: str
    timeout_s: float
    progress: Callable[[float, str], None]
    progress_s: float
    expected_s: float  # what the plan expected it to take (measured here before, or reasoned)

    def command(self) -> list[str]:
        """The step's subprocess: pytest on its bench selection, the probe runner, or its tool."""
        subst = [arg.replace("{out}", str(self.out)) for arg in (*self.plan.pytest_args, *self.plan.tool)]
        if self.plan.pytest_args:
            if "--achievable-peaks" not in subst:  # the search has a step of its own
                subst += ["--achievable-peaks", "off"]
            return [sys.executable, "-m", "pytest", *subst, "--benchmark-only", "--device", self.device,
                    "--bench-profile", PROFILE[device_type(self.device)], "-v", "-p", "no:cacheprovider",
                    f"--benchmark-json={self.out / f'{self.step.name}.json'}"]
        if self.plan.probe:
            return [sys.executable, "-m", "suites.gpu_check.probe", self.plan.probe, str(self.out), self.device]
        return [sys.executable, str(checkout() / "tools" / subst[0]), *subst[1:]]

    def run(self) -> Finished:
        return run_bounded(self.command(), self.timeout_s, self.out / f"{self.step.name}.log", checkout(),
                           self.progress, self.progress_s)


def process_rows(run: StepRun, finished: Finished) -> list[Row]:
    """The rows the subprocess gave: a probe's printed rows, and one row saying how the process went."""
    name = run.step.name
    rows = [Row(**json.loads(line[len(ROW_PREFIX):])) for line in finished.output.splitlines()
            if line.startswith(ROW_PREFIX)]
    for row in rows:
        row.source = row.source or f"probe {run.plan.probe}"
    took = f"{finished.seconds:.0f} s of an expected {run.expected_s:.0f} s"
    if run.plan.pytest_args:
        value = f"{took}, {_pytest_summary(finished.output)} ({_outcome(finished, run.timeout_s)})"
        return [*rows, Row(f"pytest {name}", "wall time, result", value, "exit 0", finished.returncode == 0,
                           source=f"{name}.log")]
    tail = (finished.output.strip().splitlines() or ["no output"])[-1][:160]
    ok = finished.returncode == 0
    return [*rows, Row(name, "wall time, result", f"{took} ({_outcome(finished, run.timeout_s)})"
                       + ("" if ok else f": {tail}"), "exit 0", ok, source=f"{name}.log")]


def reader_rows(reader: Reader, out: Path, step: str) -> list[Row]:
    """The reader's rows from the results of `step`; a reader that fails gives one failing row and never hides
    the others' figures."""
    try:
        return load_function(reader.rows)(out, step)
    except InputError as exc:  # results missing, truncated, or not results at all: named by reports.format.load
        return [Row(reader.rows, "results", str(exc)[:200], "readable results", False, source="reports.format.load")]
    except Exception as exc:  # the readers' boundary: one reader's bug costs its rows only
        return [Row(reader.rows, "error", f"{type(exc).__name__}: {exc}"[:200], "", False, source=reader.rows)]


def read_rows(run: StepRun) -> Iterator[Row]:
    """The rows of the step's readers, from the files it wrote."""
    for reader in run.plan.readers:
        yield from reader_rows(reader, run.out, run.step.name)


class Report:
    """Prints each row as it comes (flushed) and appends it to rows.jsonl with the seconds since the start."""

    def __init__(self, out: Path, clock: Callable[[], float]) -> None:
        self.path, self.clock, self.rows = out / "rows.jsonl", clock, []
        self.path.write_text("")

    def emit(self, row: Row) -> None:
        self.rows.append(row)
        mark = {True: "PASS", False: "FAIL", None: "    "}[row.ok]
        print(f"[{self.clock():6.1f} s] {mark} {row.step:<19} {row.check}: {row.figure} = {row.value}"
              + (f" (target {row.target})" if row.target else ""), flush=True)
        with self.path.open("a") as fh:
            fh.write(strict_json.dumps(asdict(row) | {"t_s": round(self.clock(), 2)}) + "\n")

    def progress(self, step: str, limit_s: float) -> Callable[[float, str], None]:
        """A running step's progress line (printed, not a row): its time so far and its log's last line."""
        def say(elapsed: float, line: str) -> None:
            print(f"[{self.clock():6.1f} s]      {step:<19} running for {elapsed:.0f} s of its {limit_s:.0f} s limit"
                  + (f": {line[:110]}" if line else ""), flush=True)
        return say


@dataclass
class Options:
    """A run's checked options: the absolute --out folder, the device string the steps get, the budget, the
    steps of --only (None: all), the progress interval, and the step times learned on this device (updated as
    the steps end)."""

    out: Path
    device: str
    budget_s: float
    only: set[str] | None
    progress_s: float
    times: StepTimes


def learn(times: StepTimes, run: StepRun, finished: Finished) -> None:
    """Keep a step's wall time for the next plan on this device when it ended on its own (one stopped at its
    limit says only "at least"); a cache that cannot be written costs a warning, not the check."""
    if finished.returncode is None:
        return
    times.record(run.step.name, plan_key(run.plan, PROFILE[device_type(run.device)]), finished.seconds,
                 f"exit {finished.returncode}")
    try:
        times.save()
    except OSError as exc:
        print(f"warning: step times not kept ({times.path}: {exc.strerror or exc})", file=sys.stderr, flush=True)


def check(options: Options, clock: Callable[[], float]) -> list[Row]:
    """Run every step that fits, in order, each expected to take what it took here before (or its reasoned
    estimate); keep each step's wall time for the next plan; return all rows (printed and saved as they came)."""
    report = Report(options.out, clock)
    kind = device_type(options.device)
    for step in STEPS:
        left = options.budget_s - clock()
        seconds = expected_s(step, kind, options.times)[0] if kind in step.plans else 0.0
        reason = skip_reason(step, kind, left, options.only, seconds)
        if reason is not None:
            report.emit(Row(step.name, "skipped", reason, "", None, step.name, "plan"))
            continue
        timeout = step_timeout(seconds, left)
        run = StepRun(step, step.plans[kind], options.out, options.device, timeout,
                      report.progress(step.name, timeout), options.progress_s, seconds)
        clean(run.step, run.out)
        finished = run.run()
        learn(options.times, run, finished)
        for row in [*process_rows(run, finished), *read_rows(run)]:
            row.step = step.name
            report.emit(row)
    return report.rows


def parent_device(option: str) -> str:
    """The device the steps measure, decided without a CUDA context in this process (the steps make their own):
    `auto` is `cuda` when torch sees a GPU, else `cpu`; GPUs that NVML sees and torch cannot use are an error
    (suites.core.devices.resolve), never a quiet CPU plan on a GPU box."""
    from suites.core import devices  # torch: only once a device is decided

    try:
        device = devices.resolve(option, "--device")
    except devices.DeviceError as exc:
        raise UsageError(str(exc)) from None
    return device.type if option == "auto" else option


def plan_device(option: str) -> str:
    """--plan's device type: cpu or cuda as given (no GPU needed to see a GPU's plan), auto as this machine."""
    return device_type(option) or device_type(parent_device(option))


def identity(device: str) -> dict | None:
    """The device's identity as its results record it (`machine_info.identity`), which keys its learned step
    times; None for a CUDA device this machine does not have (a GPU's plan looked at from a CPU box). Asked
    without a CUDA context: device properties and NVML, as the steps' own machine_info asks them."""
    from suites.core import devices

    try:
        return devices.identity(devices.resolve(device, "--device"))
    except devices.DeviceError:
        return None


def learned_times(device: str, directory: Path) -> tuple[StepTimes | None, str]:
    """This device's learned step times and a line saying where they are (or why there are none); a file that
    cannot be used is a warning on stderr, and no times."""
    found = identity(device)
    if found is None:
        return None, f"No measured times: this machine has no {device} device to identify."
    times, warning = StepTimes.load(directory, found)
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    return times, f"Measured times of this device are kept in {times.path}."


def parse_only(text: str | None) -> set[str] | None:
    if text is None:
        return None
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(STEP_NAMES))
    if unknown or not names:
        raise UsageError(f"--only: unknown step {', '.join(unknown) or '(none given)'}; steps: {', '.join(STEP_NAMES)}")
    return names


def parse_budget(seconds: float) -> float:
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_BUDGET_S):
        raise UsageError(f"--budget-s {seconds:g}: expected seconds between 0 and {MAX_BUDGET_S:.0f}")
    return seconds


def parse_progress(seconds: float) -> float:
    low, high = PROGRESS_RANGE_S
    if not (math.isfinite(seconds) and low <= seconds <= high):
        raise UsageError(f"--progress-s {seconds:g}: expected seconds between {low:g} and {high:g}")
    return seconds


def nothing_fits(planned: list[Planned], device_type: str, budget_s: float) -> str | None:
    """Why a budget is an error: no step it would run (every one skipped for time, device or --only)."""
    if any(p.skipped is None for p in planned):
        return None
    candidates = [p.seconds for p in planned if device_type in p.step.plans and p.skipped != "not in --only"]
    if not candidates:
        return "no step selected runs on this device"
    need = min(candidates) + READ_MARGIN_S + GRACE_S
    return f"--budget-s {budget_s:g}: no step fits; the smallest needs about {need:.0f} s (see --plan)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m suites.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu_check", help="directory for rows.jsonl, JSON and logs")
    p.add_argument("--device", default="auto", help="auto (default: cuda when available), cuda, cuda:N or cpu")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help=f"seconds the whole check may take (default {DEFAULT_BUDGET_S:g}, at most {MAX_BUDGET_S:g})")
    p.add_argument("--only", help=f"comma-separated steps to run (default: all): {', '.join(STEP_NAMES)}")
    p.add_argument("--plan", action="store_true",
                   help="print the schedule for this budget and device (which expected times were measured on this "
                   "device and which reasoned, and what they rest on); run nothing")
    p.add_argument("--times-cache", type=Path, default=step_times.default_dir(),
                   help="directory of the step times learned per device identity (default: %(default)s)")
    p.add_argument("--progress-s", type=float, default=PROGRESS_S,
                   help=f"a running step prints a progress line this often (default {PROGRESS_S:g} s)")
    return p


def run_check(options: Options) -> int:
    start = time.perf_counter()
    try:
        rows = check(options, lambda: time.perf_counter() - start)
    except KeyboardInterrupt:  # Ctrl-C: the running step was stopped first (suites/core/children.py)
        print(f"\ngpu_check stopped; the rows so far are in {options.out / 'rows.jsonl'}", file=sys.stderr)
        return 130
    print()
    print(tabulate([asdict(r) for r in rows], headers="keys", tablefmt="github"))
    failed = sum(r.ok is False for r in rows)
    skipped = sum(r.figure == "skipped" and r.value.startswith("over budget") for r in rows)
    print(f"\n{len(rows)} rows, {failed} failed, {skipped} steps skipped for time, in {time.perf_counter() - start:.0f}"
          f" s of a {options.budget_s:.0f} s budget; rows in {options.out / 'rows.jsonl'}; step times for the next "
          f"plan on this device in {options.times.path}")
    return 1 if failed else 0


def options(args: argparse.Namespace) -> Options:
    """The run's options, checked: a UsageError for a bad value, for a budget that runs nothing, outside a
    checkout; an InputError when --out cannot be made or written."""
    budget_s, only, progress_s = parse_budget(args.budget_s), parse_only(args.only), parse_progress(args.progress_s)
    checkout()
    device = parent_device(args.device)
    kind = device_type(device)
    times, why_none = learned_times(device, args.times_cache)
    if times is None:  # parent_device resolved it, so it has an identity; kept for what resolve may change
        raise UsageError(f"--device {device}: {why_none}")
    if reason := nothing_fits(plan(kind, budget_s, only, times), kind, budget_s):
        raise UsageError(reason)
    out = output_dir(Path(os.path.abspath(args.out)))  # not resolve(): it raises RuntimeError at a symlink loop
    try:
        (out / "rows.jsonl").open("a").close()  # a folder or an unwritable file in its place is found before any step
    except OSError as exc:
        raise InputError(f"{args.out}: cannot write rows.jsonl there ({exc.strerror or exc})") from None
    return Options(out, device, budget_s, only, progress_s, times)


def main(argv: list[str] | None = None) -> int:
    try:
        return checked_main(parser().parse_args(argv))
    except BrokenPipeError:  # `... | head`: the reader left; no traceback, and no second error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def checked_main(args: argparse.Namespace) -> int:
    try:
        if args.plan:
            budget_s, only = parse_budget(args.budget_s), parse_only(args.only)
            kind = plan_device(args.device)
            times, learned = learned_times(kind if args.device == "auto" else args.device, args.times_cache)
            print(plan_table(plan(kind, budget_s, only, times), kind, budget_s, learned))
            return 0
        checked = options(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"error: --out {exc}", file=sys.stderr)
        return 2
    return run_check(checked)
