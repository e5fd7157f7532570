"""How long `reports.format.load.load` takes, and how much memory, on a year of history or on one huge file.

The files are made from a real run of this suite (default: tests/data/run_cpu_quick.json) by replicating its
measured entries under new case names, each file with its own datetime and commit, so the format, the samples
and the extra_info are real. `--samples K` keeps the first K raw samples of each entry (0: none, as in a file
saved without them); the statistics stay as measured. The load runs in a child process, so that its peak
resident memory is the loader's, not the writer's: the figure printed is that peak and, beside it, the child's
memory before the load (the interpreter with pandas imported).

    python tools/bench_load_speed.py                          # 100 files x 200 cases: a year of nightly runs
    python tools/bench_load_speed.py --files 1 --cases 1000000 --samples 0   # one file of a million cases
    python tools/bench_load_speed.py --files 1 --cases 4000000 --samples 0   # the same near the 1 GiB read cap

The budget is 5 s for the year of history; a huge file has no time budget, only a memory figure to read.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUDGET_S = 5.0


def entry_copy(real: dict, index: int, count: int, samples: int | None) -> dict:
    """The real entry `index % count` under a new name, with at most `samples` raw samples."""
    entry = copy.deepcopy(real)
    suffix = f"copy{index // count}"
    entry["name"] = f"{entry['name']}[{suffix}]"
    entry["fullname"] = f"{entry['fullname']}[{suffix}]"
    entry.setdefault("extra_info", {})["case"] = f"{entry['extra_info'].get('case', entry['name'])}/{suffix}"
    if samples is not None:
        if samples:
            entry["stats"]["data"] = entry["stats"].get("data", [])[:samples]
        else:
            entry["stats"].pop("data", None)
    return entry


def write_file(path: Path, source: dict, cases: int, index: int, samples: int | None) -> None:
    """One results file of `cases` entries, written entry by entry (a million cases never sit in memory)."""
    head = {key: value for key, value in source.items() if key not in ("benchmarks", "not_measured")}
    head["datetime"] = f"2026-{1 + index // 28 % 12:02d}-{1 + index % 28:02d}T03:00:00+00:00"
    head["commit_info"] = {**head.get("commit_info", {}), "id": f"{index:040x}"}
    real = source["benchmarks"]
    with path.open("w") as out:
        out.write(json.dumps(head)[:-1] + ', "not_measured": [], "benchmarks": [')
        for i in range(cases):
            out.write(("," if i else "") + json.dumps(entry_copy(real[i % len(real)], i, len(real), samples)))
        out.write("]}")


def measure(folder: str, samples: bool) -> None:
    """In the child: load the folder, print seconds, rows, runs and memory (MB) as one JSON line."""
    from reports.format.load import load

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    frame = load([folder]) if samples else load([folder], samples=False)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "rows": len(frame), "runs": int(frame["file"].nunique()),
                      "peak_mb": peak, "before_mb": before}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "tests" / "data" / "run_cpu_quick.json")
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--samples", type=int, help="raw samples kept per entry (default: all the source has)")
    parser.add_argument("--with-samples", action="store_true",
                        help="load the raw samples too, as compare does (the other reports leave them out)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.with_samples)
        return 0
    source = json.loads(args.source.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.files):
            write_file(Path(tmp) / f"{i:04d}.json", source, args.cases, i, args.samples)
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        child = subprocess.run([sys.executable, __file__, "--measure", tmp, *(["--with-samples"] if args.with_samples
                                else [])], capture_output=True, text=True)
    if child.returncode:
        print(child.stderr.strip().splitlines()[-1] if child.stderr.strip() else f"exit {child.returncode}")
        return 1
    result = json.loads(child.stdout.strip().splitlines()[-1])
    over = args.files > 1 and result["seconds"] >= BUDGET_S
    budget = f": {'OVER' if over else 'within'} the {BUDGET_S:g} s budget" if args.files > 1 else ""
    what = "with" if args.with_samples else "without"
    print(f"loaded {args.files} files x {args.cases} cases {what} raw samples ({size_mb:.1f} MB, "
          f"{result['rows']} rows, {result['runs']} runs) in {result['seconds']:.2f} s{budget}; peak memory "
          f"{result['peak_mb']:.0f} MB ({result['before_mb']:.0f} MB before the load)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
