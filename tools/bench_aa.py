"""A/A test of `reports compare`: the same code measured several times must compare as `same`.

Makes real runs of the quick CPU profile with the nightly settings scaled to it (`--bench-rounds 3`, the quick
per-round rule), then compares consecutive runs pairwise, and each run against a history of the runs before it,
and prints for each comparison the exit code `--fail-on-regression` would give and the count per verdict. Then
the same comparisons with the candidate's cases slowed by a known factor (1.25x and 1.10x: samples, statistics
and round medians multiplied), to show what is still caught. Every case is slowed at once: verdicts are per
case, so this gives for each case what slowing it alone would, and `caught` counts the cases found `slower`.
For contrast, the pairs are also judged as one run each without rounds (pytest's round only, the old rule).

The goal on a noisy 2-core machine: no A/A pair exits 1, at most 1 case in 50 not `same`, and a 1.25x slowdown
caught in every pair. Run by hand (several minutes per run on a loaded 2-core machine); the load average
before and after each run is printed, since other jobs on the machine move the figures, and so is each run's
own record of contention (the cases whose samples the host's other work slowed: extra_info `contended`, see
suites/core/host_load.py). `--neighbour` runs one CPU-bound process (a Python busy loop) beside every run, the
busy host the verdicts must hold on; the A/A rows then also count the verdicts other than `same` that fall on
cases marked contended in either run.

    python tools/bench_aa.py [--runs 6] [--rounds 3] [--threads 1] [--dir aa-runs] [--reuse] [--neighbour]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reports.change import VERDICTS  # noqa: E402
from reports.comparison import compare  # noqa: E402
from reports.format.load import load  # noqa: E402
from reports.gate import gate_status  # noqa: E402

SELECTION = ["bench/test_matmul.py", "bench/test_conv.py"]
TIME_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def make_run(path: Path, rounds: int, dtypes: str, threads: int | None) -> float:
    """One real quick run with rounds into `path`; returns its wall time. Exits if pytest wrote nothing."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    command = [sys.executable, "-m", "pytest", *SELECTION, "--benchmark-only", "--device", "cpu",
               "--bench-profile", "quick", "-q", "-p", "no:cacheprovider", "--bench-rounds", str(rounds),
               "--bench-dtypes", dtypes, f"--benchmark-json={path}"]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if not path.exists() or not path.stat().st_size:
        sys.exit(f"run failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.perf_counter() - start


@contextlib.contextmanager
def neighbour(enabled: bool):
    """One CPU-bound process for the duration of the block (when enabled), ended by its own pid afterwards."""
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def contended_cases(path: Path) -> set[str]:
    """The cases of a run that recorded `contended` true."""
    entries = json.loads(path.read_text())["benchmarks"]
    return {e["extra_info"]["case"] for e in entries if e.get("extra_info", {}).get("contended") is True}


def contention_line(path: Path) -> str:
    """How much of a run the host's other work touched: cases contended, and the median share of samples."""
    entries = json.loads(path.read_text())["benchmarks"]
    shares = sorted(e["extra_info"]["contention"]["share"] for e in entries if "contention" in e.get("extra_info", {}))
    if not shares:
        return "no contention recorded"
    return (f"{len(contended_cases(path))} of {len(entries)} cases contended, median share of contended samples "
            f"{shares[len(shares) // 2]:.2f}, largest {shares[-1]:.2f}")


def slowed(data: dict, factor: float) -> dict:
    """A copy of a run with every measured case's times (samples, statistics, round medians) times factor."""
    out = copy.deepcopy(data)
    for entry in out["benchmarks"]:
        stats = entry["stats"]
        for key in TIME_STATS:
            if key in stats:
                stats[key] *= factor
        stats["data"] = [x * factor for x in stats["data"]]
        info = entry.get("extra_info", {})
        if "round_medians_s" in info:
            info["round_medians_s"] = [x * factor for x in info["round_medians_s"]]
    return out


def without_rounds(data: dict) -> dict:
    """A copy judged as one single-round run: pytest's round only (what compare saw before rounds existed). The
    stats of a case measured in rounds are over every round's samples, so they are taken again from the last
    round's (`round_samples` says which)."""
    out = copy.deepcopy(data)
    for entry in out["benchmarks"]:
        info, stats = entry.get("extra_info", {}), entry["stats"]
        for key in ("round_medians_s", "bench_rounds"):
            info.pop(key, None)
        counts = info.pop("round_samples", None)
        if counts:
            last = np.array(stats["data"][-counts[-1]:])
            q1, median, q3 = np.percentile(last, [25, 50, 75])
            stats.update(data=last.tolist(), rounds=len(last), min=float(last.min()), max=float(last.max()),
                         mean=float(last.mean()), stddev=float(last.std(ddof=1)) if len(last) > 1 else 0.0,
                         median=float(median), q1=float(q1), q3=float(q3), iqr=float(q3 - q1))
    return out


def row(label: str, base: list[Path], cand: Path) -> dict:
    result = compare(load(base), load([cand]))
    contended = set().union(*(contended_cases(p) for p in [*base, cand]))
    off = [v for v in result.verdicts if v.verdict != "same"]
    return {"comparison": label, "exit": gate_status(result), **{v: result.count(v) for v in VERDICTS},
            "not same, contended": sum(v.case in contended for v in off)}


def print_rows(title: str, rows: list[dict]) -> None:
    columns = [*VERDICTS, "not same, contended"]
    print(f"\n{title}")
    print("| comparison | exit | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for r in rows:
        print(f"| {r['comparison']} | {r['exit']} | " + " | ".join(str(r[v]) for v in columns) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs to make (pairs: runs - 1)")
    parser.add_argument("--rounds", type=int, default=3, help="--bench-rounds of each run (default 3, nightly)")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="--bench-dtypes (CPU float16 GEMMs take "
                        "seconds per call)")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the runs (default: torch's)")
    parser.add_argument("--dir", default="aa-runs", help="where the runs are written (default: ./aa-runs)")
    parser.add_argument("--reuse", action="store_true", help="use runs already in --dir, make only missing ones")
    parser.add_argument("--neighbour", action="store_true", help="run one CPU-bound process beside every run")
    args = parser.parse_args()
    if not 2 <= args.runs <= 100:
        parser.error(f"--runs {args.runs}: expected 2 to 100 runs (pairs are consecutive runs)")
    outdir = Path(args.dir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = [outdir / f"run{i + 1}.json" for i in range(args.runs)]
    for path in paths:
        if args.reuse and path.exists() and path.stat().st_size:
            continue
        load_before = os.getloadavg()[0]
        with neighbour(args.neighbour) as busy:
            seconds = make_run(path, args.rounds, args.dtypes, args.threads)
        beside = f", beside a CPU-bound neighbour (pid {busy.pid})" if busy else ""
        print(f"{path}: {seconds:.0f} s{beside}, load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} "
              f"after; {contention_line(path)}", flush=True)
    cases = len(json.loads(paths[0].read_text())["benchmarks"])
    pairs = list(itertools.pairwise(paths))
    print(f"\n{len(paths)} runs of {cases} measured cases; {len(pairs)} consecutive pairs")

    histories = [(paths[max(0, i - 5):i], p) for i, p in enumerate(paths) if i >= 3]
    aa = [row(f"{a.stem} vs {b.stem}", [a], b) for a, b in pairs]
    aa += [row(f"last {len(base)} runs vs {p.stem}", base, p) for base, p in histories]
    print_rows("A/A (rounds, and history baselines of the runs before)", aa)
    scratch = outdir / "derived"
    scratch.mkdir(exist_ok=True)
    for factor in (1.25, 1.10):
        rows = []
        for base, b in [([a], b) for a, b in pairs] + histories:
            cand = scratch / f"{b.stem}_x{factor:g}.json"
            cand.write_text(json.dumps(slowed(json.loads(b.read_text()), factor)))
            label = base[0].stem if len(base) == 1 else f"last {len(base)} runs"
            rows.append(row(f"{label} vs {b.stem} x{factor:g}", base, cand))
        print_rows(f"every case slowed {factor:g}x in the candidate (slower = caught)", rows)
    old = []
    for a, b in pairs:
        files = []
        for p in (a, b):
            files.append(scratch / f"{p.stem}_one_round.json")
            files[-1].write_text(json.dumps(without_rounds(json.loads(p.read_text()))))
        old.append(row(f"{a.stem} vs {b.stem}, pytest's round only", [files[0]], files[1]))
    print_rows("A/A without rounds: one run's samples each (the rule before rounds)", old)


if __name__ == "__main__":
    main()
