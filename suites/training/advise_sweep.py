"""How `python -m suites advise` measures: a bench file of the few lines a user would write
(suites.training.user_model), run under pytest exactly as the main job runs its suites, JSON included; once more
the cases whose step time cannot be trusted (`remeasure`); then the combination of the levers that helped.

Each pytest run is a child that ends with advise (suites/core/children.py's `run_bounded`, the one runner of
the project's child runs, gpu_check's steps too): stopping advise never leaves a run measuring behind it. While
it runs, a line every PROGRESS_S says how many cases it has finished (from the run's journal), and the user's
factories, which may take minutes, get a line every PROGRESS_S too (`heartbeat`).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reports.format import document
from reports.format.errors import InputError
from suites.core import children
from suites.training.advise_rules import SweepCase, add_parity, combination, doubted, label, merge, read_rows

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
        run ends with this process (suites/core/children.py), in the working directory, whose modules the bench
        file names as advise's own command line does."""
        path = self.out / json_name
        # -p: the plugin also where autoloading is off; --bench-device: the caller's repository may define --device
        cmd = [sys.executable, "-m", "pytest", "-p", "suites.harness.pytest_plugin", str(self.bench),
               "--benchmark-only", "--bench-device", self.device, "--bench-profile", self.profile, "-q",
               "-p", "no:cacheprovider", f"--benchmark-json={path}", *(["-k", select] if select else [])]
        log = path.with_suffix(".log")

        def progress(elapsed_s: float, _: str) -> None:
            done = finished_cases(path)
            say(f"{json_name}: {done if done is not None else 'no'} cases finished after {elapsed_s:.0f} s "
                f"(log: {log})")

        code = children.run_bounded(cmd, math.inf, log, Path.cwd(), progress, PROGRESS_S).returncode
        if code not in (0, 1) or not path.exists():
            raise RuntimeError(f"pytest exited with {code} without results; see {log}")
        return path


PROGRESS_S = 15.0  # seconds between progress lines while a factory or a sweep is slow


def say(message: str) -> None:
    print(f"advise: {message}", flush=True)


def finished_cases(path: Path) -> int | None:
    """How many cases a running sweep has finished: the entries of its journal (None before it has one)."""
    journal = path.with_name(path.name + document.JOURNAL_SUFFIX)
    try:
        data = document.read_json(journal)
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
