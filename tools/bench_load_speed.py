"""How long `reports.load.load` takes on a year of nightly history: 100 result files of 200 cases each.

The files are made from a real run of this suite (default: tests/data/run_cpu_quick.json) by replicating its
measured entries under new case names until there are 200 per file, each file with its own datetime and commit,
so the format, the samples and the extra_info are real. Prints the time; the budget is 5 s.

    python tools/bench_load_speed.py [--source RUN.json] [--files 100] [--cases 200]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reports.load import load  # noqa: E402

BUDGET_S = 5.0


def replicated(source: dict, cases: int, index: int) -> dict:
    """A copy of the run with `cases` measured entries (the real ones cycled under new names) and a new date."""
    real = source["benchmarks"]
    out = copy.deepcopy(source)
    out["benchmarks"] = []
    for i in range(cases):
        entry = copy.deepcopy(real[i % len(real)])
        suffix = f"copy{i // len(real)}"
        entry["name"] = f"{entry['name']}[{suffix}]"
        entry["fullname"] = f"{entry['fullname']}[{suffix}]"
        entry.setdefault("extra_info", {})["case"] = f"{entry['extra_info'].get('case', entry['name'])}/{suffix}"
        out["benchmarks"].append(entry)
    out["not_measured"] = []
    out["datetime"] = f"2026-{1 + index // 28:02d}-{1 + index % 28:02d}T03:00:00+00:00"
    out.setdefault("commit_info", {})["id"] = f"{index:040x}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "tests" / "data" / "run_cpu_quick.json")
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--cases", type=int, default=200)
    args = parser.parse_args()
    source = json.loads(args.source.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.files):
            (Path(tmp) / f"{i:04d}.json").write_text(json.dumps(replicated(source, args.cases, i)))
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        start = time.perf_counter()
        frame = load([tmp])
        elapsed = time.perf_counter() - start
    verdict = "within" if elapsed < BUDGET_S else "OVER"
    print(f"loaded {args.files} files x {args.cases} cases ({size_mb:.1f} MB, {len(frame)} rows, "
          f"{frame['file'].nunique()} runs) in {elapsed:.2f} s: {verdict} the {BUDGET_S:g} s budget")
    return 0 if elapsed < BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
