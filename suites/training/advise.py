"""`python -m suites.advise MODULE:FACTORY`: every lever of the training recipe on the user's model, and a setting.

It checks the model, batch and loss in one float32 forward (a problem is one line and exit 2), writes a bench
file of the few lines a user would write (suites.training.user_model), and runs it under pytest exactly as the
main job runs its suites, JSON included. From the measured cases it picks the levers that each made the step
faster beyond the noise, measures that combination as one more case, and recommends the fastest measured
setting that fits the memory budget and whose loss after the seeded steps stays finite and close to fp32's.

It reads the sweep's results through `reports.load` (the project's one checked reader), says every PROGRESS_S
what it is doing (a slow factory, how many cases the sweep has finished), and its pytest child ends with it
(suites/core/children.py): stopping advise never leaves a run measuring behind it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import torch
from tabulate import tabulate

from reports import load as results
from reports.errors import InputError
from suites.core import children, profiles
from suites.core import device as devices
from suites.core.units import parse_bytes
from suites.training.train_step import Levers
from suites.training.user_model import ModelError, UserModel, load

PARITY_TOLERANCE = 0.10  # |loss_n - fp32's loss_n| / (fp32's first loss - its loss_n), after the seeded steps
MIN_GAIN = 0.03  # a lever helps when it is this much faster and its step times' IQR lies below the baseline's
LEVER_FIELD = {"compile": "compile", "optimizer": "optimizer", "memory_format": "memory_format"}  # combined
MEMORY_LEVERS = ("checkpoint", "accum")  # trade time for memory: chosen only when nothing else fits the budget
USAGE, FAILED = 2, 1


@dataclass
class Row:
    """One case of the sweep as the JSON holds it."""

    lever: str
    label: str
    levers: Levers
    status: str
    reason: str | None = None
    median_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    peak_mem_bytes: int | None = None
    loss_first: float | None = None
    loss_after_n: float | None = None
    parity_rel: float | None = None

    @property
    def measured(self) -> bool:
        return self.status == "ok" and self.median_s is not None


def levers_of(params: dict) -> Levers:
    """The settings of a case from its params (the inverse of user_model's params)."""
    return Levers(precision=params["precision"], compile=params["compile"] == "on", optimizer=params["optimizer"],
                  checkpoint=params["checkpoint"] != "off", accum=int(params["accum"]), sync=params["sync"] != "none",
                  memory_format=params["memory_format"])


FIELDS = ("case", "lever", "status", "reason", "median_s", "q1_s", "q3_s", "peak_mem_bytes", "loss_first",
          "loss_after_n")


def _present(value: object) -> object:
    """A frame cell as a Python value: None where the case has no such field (pandas' NaN)."""
    return None if pd.isna(value) else value


def _row(record: dict) -> Row:
    get = {key: _present(record.get(key)) for key in FIELDS}.get
    label = str(get("case") or "").rsplit("/", 1)[-1]
    return Row(get("lever"), label, levers_of(record), get("status") or "error", get("reason"), get("median_s"),
               get("q1_s"), get("q3_s"), get("peak_mem_bytes"), get("loss_first"), get("loss_after_n"))


def read_rows(path: Path) -> list[Row]:
    """Measured and not-measured cases of a results file written by the sweep, read by the reports' loader (the
    project's one checked reader of results files)."""
    return [_row(record) for record in results.load([path]).to_dict("records")]


def add_parity(rows: list[Row]) -> None:
    """Each case's loss after the seeded steps against fp32's, relative to the progress fp32 made in them."""
    fp32 = next((r for r in rows if r.lever == "precision" and r.label == "fp32" and r.loss_after_n is not None),
                None)
    if fp32 is None:
        return
    # progress below 1 % of the first loss (a batch the model cannot learn from in a few steps) would turn
    # rounding differences into huge ratios: the scale is at least that 1 %
    scale = max(fp32.loss_first - fp32.loss_after_n, 0.01 * abs(fp32.loss_first), 1e-12)
    for r in rows:
        if r.loss_after_n is not None:
            r.parity_rel = abs(r.loss_after_n - fp32.loss_after_n) / scale


def rejection(row: Row, budget: int | None) -> str | None:
    """Why a case cannot be recommended whatever its speed, or None."""
    if row.status == "unsupported":
        reason = row.reason or ""
        return ("fails to compile: " if reason.startswith("torch.compile failed") else "unsupported here: ") + reason
    if row.status == "oom":
        return f"does not fit (out of memory): {row.reason}"
    if row.status != "ok":
        return f"fails: {row.reason}"
    if budget is not None and row.peak_mem_bytes is not None and row.peak_mem_bytes > budget:
        return f"over the memory budget ({_bytes(row.peak_mem_bytes)} > {_bytes(budget)})"
    if not _finite(row.loss_first) or not _finite(row.loss_after_n):
        return ("no finite loss: the seeded steps ended with a loss of "
                f"{'NaN or inf' if row.loss_after_n is None else row.loss_after_n} (first {row.loss_first})")
    if row.parity_rel is not None and not math.isfinite(row.parity_rel):
        return "the loss cannot be compared with fp32's: fp32's own loss is not finite"
    if row.parity_rel is not None and row.parity_rel > PARITY_TOLERANCE:
        return (f"diverges: loss after the seeded steps {row.parity_rel:.1%} of fp32's progress away "
                f"(tolerance {PARITY_TOLERANCE:.0%})")
    return None


def _finite(value: float | None) -> bool:
    """Every measured step case records its losses; one that reads as missing was not finite (a results file
    cannot hold NaN or inf as a number), and a setting whose loss is not finite is no setting to recommend."""
    return value is not None and math.isfinite(value)


def speedup(row: Row, base: Row) -> float:
    return base.median_s / row.median_s


def helps(row: Row, base: Row) -> bool:
    """Faster than the baseline beyond the noise: by MIN_GAIN, and every step time of its interquartile range
    below the baseline's (a shared machine moves single steps a lot; the quartiles of both must not overlap).
    The reports define `faster` in reports/change.py, which says why this advisor keeps a rule of its own."""
    return speedup(row, base) > 1 + MIN_GAIN and row.q3_s < base.q1_s


def hurts(row: Row, base: Row) -> bool:
    """Slower than the baseline beyond the noise (the mirror of `helps`)."""
    return speedup(row, base) < 1 - MIN_GAIN and row.q1_s > base.q3_s


def verdict(row: Row, base: Row | None, budget: int | None) -> str:
    """One lever's effect in words: why it is rejected, or how its speed compares with the baseline's."""
    if reason := rejection(row, budget):
        return reason
    if row.lever == "baseline" or base is None or not base.measured:
        return "reference" if row.lever == "baseline" else "measured (no baseline to compare with)"
    ratio = speedup(row, base)
    if row.lever == "sync":
        return (f"a loss.item() every step costs {1 / ratio - 1:.0%} step time: log less often" if hurts(row, base)
                else "no clear cost of a loss.item() every step here")
    if row.lever in MEMORY_LEVERS:
        return f"{ratio:.2f}x speed for {_bytes(row.peak_mem_bytes)} peak (baseline {_bytes(base.peak_mem_bytes)})"
    if helps(row, base):
        return f"helps: {ratio:.2f}x"
    if hurts(row, base):
        return f"slower here: {ratio:.2f}x"
    return f"no clear effect: {ratio:.2f}x, the step times' quartiles overlap the baseline's"


def combination(rows: list[Row], budget: int | None) -> Levers:
    """The fastest acceptable precision (the baseline's unless another is faster beyond the noise), plus each
    other speed lever that helped alone; a memory lever only when the baseline does not fit the budget."""
    base = next(r for r in rows if r.lever == "baseline")
    ok = [r for r in rows if r.measured and rejection(r, budget) is None]
    fastest = min((r for r in ok if r.lever in ("baseline", "precision")), key=lambda r: r.median_s, default=base)
    keep = base in ok and (fastest is base or not helps(fastest, base))
    chosen = base.levers if keep else replace(base.levers, precision=fastest.levers.precision)
    for r in ok:
        if r.lever in LEVER_FIELD and base.measured and helps(r, base):
            chosen = replace(chosen, **{LEVER_FIELD[r.lever]: getattr(r.levers, LEVER_FIELD[r.lever])})
    if not base.measured or (budget is not None and (base.peak_mem_bytes or 0) > budget):
        saver = min((r for r in ok if r.lever in MEMORY_LEVERS), key=lambda r: r.peak_mem_bytes or 0, default=None)
        if saver is not None:
            chosen = replace(chosen, checkpoint=saver.levers.checkpoint, accum=saver.levers.accum)
    return chosen


def label(levers: Levers) -> str:
    """`fp32-compiled-fused-channels_last`: the settings that differ from an eager foreach contiguous step."""
    parts = [levers.precision, "compiled" if levers.compile else "eager"]
    parts += [p for p, on in (("fused", levers.optimizer == "fused"), ("checkpoint", levers.checkpoint),
                              (f"accum{levers.accum}", levers.accum > 1),
                              ("channels_last", levers.memory_format == "channels_last")) if on]
    return "-".join(parts)


def recommend(rows: list[Row], budget: int | None) -> Row | None:
    """The fastest measured acceptable setting among the baseline and those faster than it beyond the noise
    (`helps`), so that the recommendation agrees with the verdicts; None when nothing is acceptable. A step that
    syncs every step is no setting to choose, and a memory lever is one only when no setting without it fits."""
    ok = [r for r in rows if r.measured and r.lever != "sync" and rejection(r, budget) is None]
    candidates = [r for r in ok if r.lever not in MEMORY_LEVERS] or ok
    if not candidates:
        return None
    base = next((r for r in candidates if r.lever == "baseline"), None)
    reference = base or min(candidates, key=lambda r: r.median_s)
    return min([reference, *(r for r in candidates if helps(r, reference))], key=lambda r: r.median_s)


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def table(rows: list[Row], budget: int | None) -> str:
    base = next((r for r in rows if r.lever == "baseline"), None)
    lines = [{"lever": r.lever, "setting": r.label,
              "step": f"{r.median_s * 1e3:.1f} ms" if r.measured else r.status,
              "speed vs baseline": f"{speedup(r, base):.2f}x" if r.measured and base and base.measured else "-",
              "peak memory": _bytes(r.peak_mem_bytes),
              "loss vs fp32": "-" if r.parity_rel is None else f"{r.parity_rel:.1%}",
              "verdict": verdict(r, base, budget)} for r in rows]
    return tabulate(lines, headers="keys", tablefmt="github")


BENCH_FILE = '''"""Written by python -m suites.advise: the training-step levers of {model}. Rerun it with
pytest {path} --benchmark-only --bench-device DEVICE"""

from suites.harness import pytest_plugin
from suites.training.train_step import Levers
from suites.training.user_model import UserModel, load

MODEL = UserModel(
    load({model!r}, "model"),
    load({batch!r}, "batch"),
    {loss},
    name={name!r},
    combinations={combinations!r},
)


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, MODEL.cases)


def test_levers(case, run_case):
    run_case(case)
'''


@dataclass
class Sweep:
    """Where a sweep's files go, and what every pytest run of it is given."""

    out: Path
    model: str
    batch: str
    loss: str | None
    name: str
    device: str
    profile: str

    @property
    def bench(self) -> Path:
        return self.out / f"bench_{self.name}.py"

    def write(self, combinations: tuple = ()) -> None:
        loss = f'load({self.loss!r}, "loss")' if self.loss else "None"
        self.bench.write_text(BENCH_FILE.format(model=self.model, batch=self.batch, loss=loss, name=self.name,
                                                path=self.bench, combinations=tuple(combinations)))

    def run(self, json_name: str, select: str | None = None) -> Path:
        """One pytest run of the bench file; its JSON path. pytest's exit 1 (a case failed) still wrote results.
        While it runs, a line every PROGRESS_S says how many cases have finished (from the run's journal); the
        run ends with this process (suites/core/children.py)."""
        path = self.out / json_name
        # -p: the plugin also where autoloading is off; --bench-device: the caller's repository may define --device
        cmd = [sys.executable, "-m", "pytest", "-p", "suites.harness.pytest_plugin", str(self.bench),
               "--benchmark-only", "--bench-device", self.device, "--bench-profile", self.profile, "-q",
               "-p", "no:cacheprovider", f"--benchmark-json={path}", *(["-k", select] if select else [])]
        log = path.with_suffix(".log")
        with log.open("w") as sink, children.stop_with_parent(children.start(cmd, stdout=sink,
                                                                             stderr=subprocess.STDOUT)) as proc:
            start = time.perf_counter()
            while (code := _wait(proc, PROGRESS_S)) is None:
                done = finished_cases(path)
                say(f"{json_name}: {done if done is not None else 'no'} cases finished after "
                    f"{time.perf_counter() - start:.0f} s (log: {log})")
        if code not in (0, 1) or not path.exists():
            raise RuntimeError(f"pytest exited with {code} without results; see {log}")
        return path


PROGRESS_S = 15.0  # seconds between progress lines while a factory or a sweep is slow


def say(message: str) -> None:
    print(f"advise: {message}", flush=True)


def _wait(proc: subprocess.Popen, seconds: float) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def finished_cases(path: Path) -> int | None:
    """How many cases a running sweep has finished: the entries of its journal (None before it has one)."""
    journal = path.with_name(path.name + results.JOURNAL_SUFFIX)
    try:
        data = results.read_json(journal)
    except (InputError, OSError):
        return None
    return len(data["benchmarks"]) + len(data["not_measured"])


@contextlib.contextmanager
def heartbeat(what: str, every_s: float | None = None) -> Iterator[None]:
    """A line every `every_s` (default PROGRESS_S) while the block runs (the user's factories may take minutes),
    so a slow model is told apart from a hung command."""
    done, every_s = threading.Event(), every_s or PROGRESS_S
    start = time.perf_counter()

    def beat() -> None:
        while not done.wait(every_s):
            say(f"still {what} ({time.perf_counter() - start:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m suites.advise", description=__doc__.splitlines()[0])
    parser.add_argument("model", metavar="MODULE:FACTORY", help="a function returning the torch.nn.Module")
    parser.add_argument("--batch", metavar="MODULE:FACTORY",
                        help="a function (taking the device) returning one batch (default: make_batch of MODULE)")
    parser.add_argument("--loss", metavar="MODULE:FN", help="loss_fn(output, batch), when the output has no loss")
    parser.add_argument("--name", help="the model's name in case ids (default: the module's last part)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    parser.add_argument("--bench-profile", default="quick", choices=profiles.NAMES, dest="profile",
                        help="quick: minutes on a small CPU; full: the real sweep for a GPU")
    parser.add_argument("--mem-budget", type=parse_bytes, help="peak memory a setting may use, e.g. 20GiB "
                        "(default: the GPU's memory; none on a CPU)")
    parser.add_argument("--out", default="advise", help="directory for the bench file, JSON and logs")
    return parser.parse_args(argv)


def _user_model(args: argparse.Namespace) -> UserModel:
    module = args.model.partition(":")[0]
    batch = args.batch or f"{module}:make_batch"
    loss = load(args.loss, "loss function") if args.loss else None
    return UserModel(load(args.model, "model"), load(batch, "batch"), loss, name=args.name or module.split(".")[-1])


def _budget(args: argparse.Namespace, device: torch.device) -> int | None:
    if args.mem_budget is not None or device.type != "cuda":
        return args.mem_budget
    return torch.cuda.get_device_properties(device).total_memory


def measure(sweep: Sweep, budget: int | None) -> list[Row]:
    """The one-lever sweep, then the combination of the levers that helped when no case measured it yet."""
    sweep.write()
    rows = read_rows(sweep.run("sweep.json", select="not all_on"))  # the combination replaces the fixed all-on
    add_parity(rows)
    chosen = combination(rows, budget)
    if chosen not in [r.levers for r in rows if r.status == "ok"]:
        sweep.write(((label(chosen), chosen),))
        say(f"measuring the combination {label(chosen)}")
        rows += read_rows(sweep.run("combination.json", select="combination"))
        add_parity(rows)
    return rows


def advice(rows: list[Row], budget: int | None) -> str | None:
    """The recommendation in one sentence (None when no setting qualifies)."""
    best, base = recommend(rows, budget), next(r for r in rows if r.lever == "baseline")
    if best is None:
        return None
    if best is base:
        return (f"Recommended: keep {label(best.levers)} (the baseline, {best.median_s * 1e3:.1f} ms per step): "
                "no lever made the step faster beyond the noise here.")
    versus = f", {speedup(best, base):.2f}x the baseline's speed" if base.measured else ""
    if reason := rejection(base, budget):
        versus += f" (the baseline is rejected: {reason.split(':')[0]})"
    parity = "" if best.parity_rel is None else f", loss {best.parity_rel:.1%} of fp32's progress from fp32's"
    return (f"Recommended: {label(best.levers)} ({best.lever} case): {best.median_s * 1e3:.1f} ms per step{versus}, "
            f"peak memory {_bytes(best.peak_mem_bytes)}{parity}.")


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a case-id part and a file name: no path separators


def usable_out(out: Path) -> str | None:
    """Why --out cannot hold the sweep's files, or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out}: is a file; the sweep needs a directory"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, "")  # the user's modules are named from the working directory, as `python -m` does
    out = Path(args.out)
    if problem := usable_out(out):
        print(f"advise: {problem}", file=sys.stderr)
        return USAGE
    try:
        device = devices.resolve(args.device)
        say(f"checking {args.model} with one batch on {device}")
        with heartbeat("building and checking the model and its batch"):
            user = _user_model(args)
            if not NAME.fullmatch(user.name):
                raise ModelError(f"--name {user.name!r}: use letters, digits, '_', '.' and '-' (it names files)")
            user.probe(device)
    except (ModelError, devices.DeviceError) as exc:
        print(f"advise: {exc}", file=sys.stderr)
        return USAGE
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the probe's memory goes back before the sweep's process measures peaks
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"advise: --out {out}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE
    sweep = Sweep(out, args.model, args.batch or f"{args.model.partition(':')[0]}:make_batch", args.loss,
                  user.name, str(device), args.profile)
    budget, start = _budget(args, device), time.perf_counter()
    say(f"measuring {user.name} on {device} ({args.profile} profile); bench file {sweep.bench}")
    try:
        rows = measure(sweep, budget)
    except (RuntimeError, InputError) as exc:
        print(f"advise: {exc}", file=sys.stderr)
        return FAILED
    print(f"\n{user.name} on {device}, {args.profile} profile: one lever at a time from the baseline "
          f"(amp_bf16, eager, foreach AdamW); step = median wall time per step\n")
    print(table(rows, budget))
    sentence = advice(rows, budget)
    print(f"\n{sentence or 'No setting ran within the budget and close to fp32; see the verdicts above.'} "
          f"({time.perf_counter() - start:.0f} s)\nResults: {out}/*.json; python -m reports html {out} -o {out}/report")
    return 0 if sentence else FAILED
