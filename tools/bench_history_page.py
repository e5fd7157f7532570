"""How long `python -m reports html DIR` takes over a year of nightly runs: the history page's speed, measured.

The nights are made from one real run of this suite (default: the first of tests/data/history's real quick
main-job runs, 115 timed cases of 207): night i is that run stamped with its own date (03:00 UTC) and commit,
every timed case's times (samples, statistics, round medians) multiplied by a seeded log-normal factor of
`--noise` (default 2 %) run-to-run noise, and one case 1.25x slower from night `--step-at` on, so the page has
noise to band, a step to mark and a change to name. `--cases N` replicates the run's timed entries under new
names (as tools/bench_load_speed.py does) to N cases, for a full suite's few hundred. The command runs in a child
process, as a user runs it, and its wall time is printed against the budget (60 s), with the page's size.

    python tools/bench_history_page.py                    # 365 nights of the quick suite
    python tools/bench_history_page.py --cases 400        # 365 nights of a suite of 400 timed cases
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 60.0
TIME_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def widened(source: dict, cases: int | None) -> dict:
    """The run with its timed entries replicated under new names to `cases` of them (None: as it is)."""
    if not cases:
        return source
    real = source["benchmarks"]
    out = copy.deepcopy(source)
    out["benchmarks"] = []
    for i in range(cases):
        entry = copy.deepcopy(real[i % len(real)])
        suffix = f"copy{i // len(real)}"
        entry["name"], entry["fullname"] = f"{entry['name']}[{suffix}]", f"{entry['fullname']}[{suffix}]"
        entry["extra_info"]["case"] = f"{entry['extra_info'].get('case', entry['name'])}/{suffix}"
        out["benchmarks"].append(entry)
    return out


def scale(entry: dict, factor: float) -> None:
    """Every time of one entry times factor, in place (its rates divided by it)."""
    stats = entry["stats"]
    for key in TIME_STATS:
        if isinstance(stats.get(key), int | float):
            stats[key] *= factor
    stats["data"] = [x * factor for x in stats.get("data", [])]
    if isinstance(stats.get("ops"), int | float):
        stats["ops"] /= factor
    extra = entry.get("extra_info", {})
    for key in ("tflops", "gbps"):
        if isinstance(extra.get(key), int | float):
            extra[key] /= factor
    if isinstance(extra.get("round_medians_s"), list):
        extra["round_medians_s"] = [x * factor for x in extra["round_medians_s"]]


def write_nights(source: dict, folder: Path, nights: int, noise: float, step_at: int, seed: int) -> str:
    """The nights as files in folder; returns the case with the injected step."""
    rng = np.random.default_rng(seed)
    stepped = next(e for e in source["benchmarks"] if e["extra_info"].get("converged"))["extra_info"]["case"]
    first = datetime(2026, 1, 1, 3, 0, tzinfo=timezone.utc)
    text = json.dumps(source)
    for i in range(nights):
        run = json.loads(text)  # a fresh copy, faster than deepcopy
        run["datetime"] = (first + timedelta(days=i)).isoformat()
        run["commit_info"] = {**run.get("commit_info", {}), "id": f"{i:08x}".ljust(40, "0")}  # 8 digits shown
        for entry, factor in zip(run["benchmarks"], np.exp(rng.normal(0, noise, len(run["benchmarks"]))),
                                 strict=True):
            scale(entry, float(factor) * (1.25 if i >= step_at and entry["extra_info"]["case"] == stepped else 1))
        (folder / f"{i:04d}.json").write_text(json.dumps(run))
    return stepped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "tests" / "data" / "history" / "quick_1.json")
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--cases", type=int, help="timed cases per night (default: the source's)")
    parser.add_argument("--noise", type=float, default=0.02, help="run-to-run noise, log sigma (default 0.02)")
    parser.add_argument("--step-at", type=int, default=350, help="night from which one case is 1.25x slower")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    source = widened(json.loads(args.source.read_text()), args.cases)
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp) / "runs", Path(tmp) / "page"
        folder.mkdir()
        stepped = write_nights(source, folder, args.nights, args.noise, args.step_at, args.seed)
        size_mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        start = time.perf_counter()
        child = subprocess.run([sys.executable, "-m", "reports", "html", str(folder), "-o", str(out)], cwd=ROOT,
                               capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if child.returncode:
            print(child.stderr.strip().splitlines()[-1] if child.stderr.strip() else f"exit {child.returncode}")
            return 1
        page = (out / "index.html").read_text()
        pictures = len(list((out / "history").glob("*.png")))
        named = stepped in page.split("History per suite")[0]  # the summary: moved or open steps
    over = elapsed >= BUDGET_S
    print(f"html over {args.nights} nights x {len(source['benchmarks'])} timed cases ({size_mb:.0f} MB of JSON): "
          f"{elapsed:.1f} s, {'OVER' if over else 'within'} the {BUDGET_S:g} s budget; page {len(page) / 1e6:.1f} MB "
          f"with {pictures} history pictures; the injected step ({stepped}) "
          f"{'is' if named else 'is NOT'} in the summary")
    return 1 if over or not named else 0


if __name__ == "__main__":
    sys.exit(main())
