"""`python -m suites advise MODULE:FACTORY`: every lever of the training recipe on the user's model, and a setting.

It checks the model, batch and loss in one float32 forward (a problem is one line and exit 2), writes a bench
file of the few lines a user would write (suites.training.user_model), and runs it under pytest exactly as the
main job runs its suites, JSON included. From the measured cases it picks the levers that each made the step
faster beyond the noise, measures that combination as one more case, and recommends the fastest measured
setting that fits the memory budget and whose loss over the seeded steps stays finite and close to fp32's.

It ranks only cases whose step time it can trust. A case measured under host contention (its timer includes
the host: reports/change.py `host_disturbed`), one that did not converge or ran throttled (`trust.doubts`)
is measured once more (`remeasure.json`); if it still cannot be trusted it is left out of the ranking, and the
report says which and why. A busy host moves whole windows of the sweep, which no quartile of one case shows:
from a sweep on this project's loaded 2-core CPU whose every case was contended and unconverged, the rule
before said fused AdamW "helps: 29.17x" (tests/data/busy_gate). When the baseline itself cannot be trusted
nothing is ranked (exit
`NOT_JUDGED`, 3, as compare's gate). A setting "diverges" only against fp32's trajectory: its loss at each
seeded step against fp32's at the same step (the same batch), measured in how far fp32's own loss moved over
the steps, so a batch that teaches the model nothing (fp32's loss rising) does not turn rounding into
divergence.

It reads the sweep's results through `reports.format.load` (the project's one checked reader), says every PROGRESS_S
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

import numpy as np
import pandas as pd
import torch
from tabulate import tabulate

from reports.format import load, trust
from reports.format.errors import InputError
from suites.core import children, devices, profiles
from suites.core.units import parse_bytes
from suites.training import user_model
from suites.training.train_step import Levers
from suites.training.user_model import ModelError, UserModel

PARITY_TOLERANCE = 0.10  # largest |loss_i - fp32's loss_i| over the seeded steps / how far fp32's loss moved
MIN_GAIN = 0.03  # a lever helps when it is this much faster and its step times' IQR lies below the baseline's
LEVER_FIELD = {"compile": "compile", "optimizer": "optimizer", "memory_format": "memory_format"}  # combined
MEMORY_LEVERS = ("checkpoint", "accum")  # trade time for memory: chosen only when nothing else fits the budget
USAGE, FAILED, NOT_JUDGED = 2, 1, 3  # exit statuses; NOT_JUDGED as compare's gate: re-run on a quiet machine


@dataclass
class SweepCase:
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
    losses: tuple[float, ...] | None = None  # every seeded step's loss (`seeded_losses`; older files: none)
    n_steps: int | None = None
    parity_rel: float | None = None  # the largest gap to fp32's loss at the same step / how far fp32's moved
    parity_step: int | None = None  # the step (from 1) of that gap
    distrust: str = ""  # why its step time cannot rank it (host contention, not converged, throttled), or ''
    remeasured: str = ""  # why the first measurement was not trusted, when this row is the second one

    @property
    def measured(self) -> bool:
        return self.status == "ok" and self.median_s is not None


def levers_of(params: dict) -> Levers:
    """The settings of a case from its params (the inverse of user_model's params)."""
    return Levers(precision=params["precision"], compile=params["compile"] == "on", optimizer=params["optimizer"],
                  checkpoint=params["checkpoint"] != "off", accum=int(params["accum"]), sync=params["sync"] != "none",
                  memory_format=params["memory_format"])


FIELDS = ("case", "lever", "status", "reason", "median_s", "q1_s", "q3_s", "peak_mem_bytes", "loss_first",
          "loss_after_n", "seeded_losses", "n_steps")


def _present(value: object) -> object:
    """A frame cell as a Python value: None where the case has no such field (pandas' NaN)."""
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(float(x) if x is not None else math.nan for x in value)
    return None if pd.isna(value) else value


def distrust(record: dict) -> str:
    """Why a case's step time cannot rank it, or '': host contention where its timer includes the host
    (reports/change.py, `host_disturbed`), and the doubts compare has of one run's figure (`doubts`: not
    converged, throttled). The one rule of the reports, read from the same fields."""
    reasons = []
    if trust.host_disturbed(record):
        detail = record.get("contention")
        share = detail.get("share") if isinstance(detail, dict) else None
        reasons.append(f"host contention (share {share:.0%})" if isinstance(share, int | float) else "host contention")
    return ", ".join(reasons + trust.doubts(record, noise_measured=False))


def _row(record: dict) -> SweepCase:
    get = {key: _present(record.get(key)) for key in FIELDS}.get
    label = str(get("case") or "").rsplit("/", 1)[-1]
    return SweepCase(get("lever"), label, levers_of(record), get("status") or "error", get("reason"), get("median_s"),
               get("q1_s"), get("q3_s"), get("peak_mem_bytes"), get("loss_first"), get("loss_after_n"),
               get("seeded_losses"), get("n_steps"), distrust=distrust(record) if get("status") == "ok" else "")


def read_rows(path: Path) -> list[SweepCase]:
    """Measured and not-measured cases of a results file written by the sweep, read by the reports' loader (the
    project's one checked reader of results files)."""
    return [_row(record) for record in load.load([path]).to_dict("records")]


def trajectory(row: SweepCase) -> tuple[np.ndarray, list[int]] | None:
    """The losses of a case's seeded steps and their step numbers (from 1): every step's where the file has them,
    else the first and the last (files written before `seeded_losses`)."""
    if row.losses:
        return np.asarray(row.losses, dtype=float), list(range(1, len(row.losses) + 1))
    if row.loss_first is None or row.loss_after_n is None:
        return None
    return np.asarray([row.loss_first, row.loss_after_n], dtype=float), [1, int(row.n_steps or 2)]


def fp32_row(rows: list[SweepCase]) -> SweepCase | None:
    return next((r for r in rows if r.lever == "precision" and r.label == "fp32" and r.loss_after_n is not None),
                None)


def movement(losses: np.ndarray) -> float:
    """How far a loss moved from its first step in either direction over the seeded steps, at least 1 % of the
    first loss: the scale of a gap to fp32. A falling loss moves by its progress; a rising one (a batch that
    teaches the model nothing in a few steps) by its rise, not by nothing, so rounding stays small beside it."""
    return max(float(np.max(np.abs(losses - losses[0]))), 0.01 * abs(float(losses[0])), 1e-12)


def add_parity(rows: list[SweepCase]) -> None:
    """Each case's losses against fp32's at the same seeded steps (the same batches): the largest gap, in units
    of how far fp32's own loss moved, and the step where it lies."""
    fp32 = fp32_row(rows)
    reference = trajectory(fp32) if fp32 else None
    if reference is None:
        return
    for r in rows:
        found = trajectory(r)
        if found is None:
            continue
        (losses, steps), (ref, _) = found, reference
        if len(losses) != len(ref):  # a file with every step's loss beside one with only the ends
            losses, ref, steps = losses[[0, -1]], ref[[0, -1]], [steps[0], steps[-1]]
        if not np.all(np.isfinite(ref)):
            r.parity_rel, r.parity_step = math.nan, None
            continue
        gaps = np.abs(losses - ref)
        if not np.all(np.isfinite(gaps)):  # a loss that is not finite at some step: as far off as can be
            at = int(np.argmax(~np.isfinite(gaps)))
            r.parity_rel, r.parity_step = math.inf, steps[at]
            continue
        at = int(np.argmax(gaps))
        r.parity_rel, r.parity_step = float(gaps[at]) / movement(ref), steps[at]


def rejection(row: SweepCase, budget: int | None) -> str | None:
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
    if row.parity_rel is not None and math.isnan(row.parity_rel):
        return "the loss cannot be compared with fp32's: fp32's own loss is not finite"
    if row.parity_rel is not None and math.isinf(row.parity_rel):
        return f"diverges: its loss is not finite at seeded step {row.parity_step}"
    if row.parity_rel is not None and row.parity_rel > PARITY_TOLERANCE:
        return (f"diverges: at seeded step {row.parity_step} its loss is {row.parity_rel:.1%} of fp32's movement "
                f"away from fp32's at that step (tolerance {PARITY_TOLERANCE:.0%})")
    return None


def _finite(value: float | None) -> bool:
    """Every measured step case records its losses; one that reads as missing was not finite (a results file
    cannot hold NaN or inf as a number), and a setting whose loss is not finite is no setting to recommend."""
    return value is not None and math.isfinite(value)


def speedup(row: SweepCase, base: SweepCase) -> float:
    return base.median_s / row.median_s


def trusted(row: SweepCase) -> bool:
    return row.measured and not row.distrust


def helps(row: SweepCase, base: SweepCase) -> bool:
    """Faster than the baseline beyond the noise: both step times trusted (`distrust`), by MIN_GAIN, and every
    step time of its interquartile range below the baseline's (a shared machine moves single steps a lot; the
    quartiles of both must not overlap). The reports define `faster` in reports/change.py, which says why this
    advisor keeps a rule of its own."""
    return trusted(row) and trusted(base) and speedup(row, base) > 1 + MIN_GAIN and row.q3_s < base.q1_s


def hurts(row: SweepCase, base: SweepCase) -> bool:
    """Slower than the baseline beyond the noise (the mirror of `helps`)."""
    return trusted(row) and trusted(base) and speedup(row, base) < 1 - MIN_GAIN and row.q1_s > base.q3_s


def verdict(row: SweepCase, base: SweepCase | None, budget: int | None) -> str:
    """One lever's effect in words: why it is rejected, or how its speed compares with the baseline's."""
    if reason := rejection(row, budget):
        return reason
    if row.lever == "baseline" or base is None or not base.measured:
        return "reference" if row.lever == "baseline" else "measured (no baseline to compare with)"
    ratio = speedup(row, base)
    if doubt := row.distrust or (base.distrust and f"the baseline's {base.distrust}"):
        if row.lever in MEMORY_LEVERS:
            return (f"{ratio:.2f}x speed, not judged ({doubt}), for {_bytes(row.peak_mem_bytes)} peak (baseline "
                    f"{_bytes(base.peak_mem_bytes)})")
        return f"not judged: {ratio:.2f}x, {doubt}"
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


def combination(rows: list[SweepCase], budget: int | None) -> Levers:
    """The fastest acceptable precision (the baseline's unless another is faster beyond the noise), plus each
    other speed lever that helped alone; a memory lever only when the baseline does not fit the budget."""
    base = next(r for r in rows if r.lever == "baseline")
    ok = [r for r in rows if r.measured and rejection(r, budget) is None]
    fastest = min((r for r in ok if r.lever in ("baseline", "precision") and trusted(r)), key=lambda r: r.median_s,
                  default=base)
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


def recommend(rows: list[SweepCase], budget: int | None) -> SweepCase | None:
    """The fastest measured acceptable setting among the baseline and those faster than it beyond the noise
    (`helps`), so that the recommendation agrees with the verdicts; None when nothing is acceptable. A step that
    syncs every step is no setting to choose, and a memory lever is one only when no setting without it fits."""
    ok = [r for r in rows if r.measured and r.lever != "sync" and rejection(r, budget) is None]
    candidates = [r for r in ok if r.lever not in MEMORY_LEVERS] or ok
    if not candidates:
        return None
    base = next((r for r in candidates if r.lever == "baseline"), None)
    reference = base or min([r for r in candidates if trusted(r)] or candidates, key=lambda r: r.median_s)
    return min([reference, *(r for r in candidates if helps(r, reference))], key=lambda r: r.median_s)


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def table(rows: list[SweepCase], budget: int | None) -> str:
    base = next((r for r in rows if r.lever == "baseline"), None)
    lines = [{"lever": r.lever, "setting": r.label,
              "step": f"{r.median_s * 1e3:.1f} ms" if r.measured else r.status,
              "speed vs baseline": f"{speedup(r, base):.2f}x" if r.measured and base and base.measured else "-",
              "peak memory": _bytes(r.peak_mem_bytes),
              "loss vs fp32": "-" if r.parity_rel is None else f"{r.parity_rel:.1%}",
              "verdict": verdict(r, base, budget)} for r in rows]
    return tabulate(lines, headers="keys", tablefmt="github")


BENCH_FILE = '''"""Written by python -m suites advise: the training-step levers of {model}. Rerun it with
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
    journal = path.with_name(path.name + load.JOURNAL_SUFFIX)
    try:
        data = load.read_json(journal)
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
    parser = argparse.ArgumentParser(prog="python -m suites advise", description=__doc__.splitlines()[0])
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
    loss = user_model.load(args.loss, "loss function") if args.loss else None
    return UserModel(user_model.load(args.model, "model"), user_model.load(batch, "batch"), loss,
                     name=args.name or module.split(".")[-1])


def _budget(args: argparse.Namespace, device: torch.device) -> int | None:
    if args.mem_budget is not None or device.type != "cuda":
        return args.mem_budget
    return torch.cuda.get_device_properties(device).total_memory


def doubted(rows: list[SweepCase], budget: int | None) -> list[SweepCase]:
    """The measured cases that could be recommended but whose step time cannot be trusted."""
    return [r for r in rows if r.measured and r.distrust and rejection(r, budget) is None]


def remeasure(sweep: Sweep, rows: list[SweepCase], budget: int | None) -> list[SweepCase]:
    """Once more, in one run (`remeasure.json`), the cases whose step time cannot be trusted; a measured second
    row replaces the first and keeps why that one was doubted (`remeasured`). Only once: a host busy for the
    whole sweep stays busy, and the report then names the cases left out of the ranking."""
    again = doubted(rows, budget)
    if not again:
        return rows
    say(f"measuring {len(again)} case(s) once more, their step times not trusted: "
        + ", ".join(f"{r.lever}/{r.label} ({r.distrust})" for r in again))
    select = " or ".join(f"{r.lever}/{r.label}" for r in again)
    return merge(rows, read_rows(sweep.run("remeasure.json", select=select)), budget)


def merge(rows: list[SweepCase], again: list[SweepCase], budget: int | None) -> list[SweepCase]:
    """The sweep's rows with each doubted case replaced by its measured second row, which keeps why the first
    was doubted; a case whose second run measured nothing keeps its first row."""
    first = {(r.lever, r.label): r.distrust for r in doubted(rows, budget)}
    second = {(r.lever, r.label): r for r in again if r.measured}
    return [replace(second[key], remeasured=first[key]) if (key := (r.lever, r.label)) in first and key in second
            else r for r in rows]


def measure(sweep: Sweep, budget: int | None) -> list[SweepCase]:
    """The one-lever sweep, once more the cases it cannot trust, then the combination of the levers that helped
    when no case measured it yet."""
    sweep.write()
    rows = read_rows(sweep.run("sweep.json", select="not all_on"))  # the combination replaces the fixed all-on
    add_parity(rows)
    rows = remeasure(sweep, rows, budget)
    add_parity(rows)
    chosen = combination(rows, budget)
    if chosen not in [r.levers for r in rows if r.status == "ok"]:
        sweep.write(((label(chosen), chosen),))
        say(f"measuring the combination {label(chosen)}")
        rows += read_rows(sweep.run("combination.json", select="combination"))
        add_parity(rows)
    return rows


def unranked(rows: list[SweepCase], budget: int | None) -> str | None:
    """Why nothing can be ranked: the baseline, which every lever is compared with, has a step time that cannot
    be trusted (even measured twice); None when it can (or when there is no acceptable baseline)."""
    base = next((r for r in rows if r.lever == "baseline"), None)
    if base is None or base not in doubted(rows, budget):
        return None
    return (f"Nothing ranked: the baseline's step time cannot be trusted ({base.distrust}"
            f"{', measured twice' if base.remeasured else ''}), so no lever can be compared with it. Rerun where "
            "nothing else takes the machine's CPUs.")


def trust_notes(rows: list[SweepCase], budget: int | None) -> list[str]:
    """What the ranking left out and why, and which cases were measured twice (docs/your_model.md)."""
    notes = []
    if twice := [r for r in rows if r.remeasured]:
        notes.append("Measured twice, the first step time not trusted: " + "; ".join(
            f"{r.lever}/{r.label} (first: {r.remeasured}; second: {r.distrust or 'trusted'})" for r in twice) + ".")
    if left := [r for r in doubted(rows, budget) if r.lever != "baseline"]:
        notes.append("Left out of the ranking, their step times not trusted: " + "; ".join(
            f"{r.lever}/{r.label} ({r.distrust})" for r in left) + ". Rerun where nothing else takes the machine's "
            "CPUs to rank them.")
    if (fp32 := fp32_row(rows)) is not None and (found := trajectory(fp32)) and found[0][-1] > found[0][0]:
        (losses, steps) = found
        notes.append(f"fp32's own loss rose over the {steps[-1]} seeded steps ({losses[0]:.4g} -> "
                     f"{losses[-1]:.4g}): its batches teach the model little in that many "
                     "steps. Each setting is compared with fp32 at the same steps, against how far fp32's loss "
                     "moved; give batches with structure for a sharper check.")
    return notes


def advice(rows: list[SweepCase], budget: int | None) -> str | None:
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
    parity = "" if best.parity_rel is None else f", loss within {best.parity_rel:.1%} of fp32's movement of fp32's"
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
    text, status = report(rows, budget)
    print(f"{text} ({time.perf_counter() - start:.0f} s)\nResults: {out}/*.json; python -m reports html {out} -o "
          f"{out}/report")
    return status


def report(rows: list[SweepCase], budget: int | None) -> tuple[str, int]:
    """The table, what the ranking left out, the recommendation, and the exit status: 0 with a recommendation,
    NOT_JUDGED when the baseline's time cannot be trusted (nothing ranked), FAILED when no setting qualifies."""
    blocked = unranked(rows, budget)
    sentence = blocked or advice(rows, budget)
    parts = [table(rows, budget), *trust_notes(rows, budget),
             sentence or "No setting ran within the budget and close to fp32; see the verdicts above."]
    return "\n\n".join(parts), NOT_JUDGED if blocked else 0 if sentence else FAILED
