"""The suite's own cost per case: what a case spends outside its timed samples, per suite, on this machine.

Runs `pytest bench/test_SUITE.py --benchmark-only --bench-device cpu --bench-profile quick` in a checkout (this
one, or `--root` another: an older commit in a `git worktree`, run with this interpreter), with a small plugin that
sums each test's setup, call and teardown durations as pytest reports them, and reads the run's results: a case's
overhead is its pytest time minus its sampled time (its samples' seconds times the calls per sample). A case not
measured (unsupported) is all overhead. Prints per suite the cases, the pytest time, the sampled time and the
overhead (total and median per case), and the run's time outside every test (start-up, collection, the
achievable search).

    python tools/bench_case_overhead.py [--root DIR] [--suites matmul,conv,attention] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = '''
import json, os
durations = {}
def pytest_runtest_logreport(report):
    durations[report.nodeid] = durations.get(report.nodeid, 0.0) + report.duration
def pytest_sessionfinish(session):
    with open(os.environ["CASE_OVERHEAD_OUT"], "w") as out:
        json.dump(durations, out)
'''


def run_suite(root: Path, suite: str, out: Path) -> dict:
    """One quick run of a suite in `root`; per case: pytest seconds and sampled seconds; and the run's wall."""
    plugin_dir = Path(tempfile.mkdtemp())
    (plugin_dir / "case_overhead_plugin.py").write_text(PLUGIN)
    durations, results = out / f"{suite}.durations.json", out / f"{suite}.json"
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{plugin_dir}", CASE_OVERHEAD_OUT=str(durations))
    command = [sys.executable, "-m", "pytest", f"bench/test_{suite}.py", "--benchmark-only", "--bench-device",
               "cpu", "--bench-profile", "quick", "-q", "-p", "no:cacheprovider", "-p", "case_overhead_plugin",
               f"--benchmark-json={results}"]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if not results.exists() or not durations.exists():
        sys.exit(f"{suite} in {root}: the run wrote no results (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
    pytest_s = json.loads(durations.read_text())
    sampled = {}
    for entry in json.loads(results.read_text())["benchmarks"]:
        sampled[entry["fullname"]] = sum(entry["stats"]["data"]) * entry["extra_info"].get("calls_per_sample", 1)
    cases = {node: (seconds, sampled.get(node, 0.0)) for node, seconds in pytest_s.items()}
    return {"wall_s": wall, "cases": cases}


def summary(suite: str, run: dict) -> str:
    cases = run["cases"]
    pytest_total = sum(p for p, _ in cases.values())
    sampled = sum(s for _, s in cases.values())
    outside = [p - s for p, s in cases.values()]
    return (f"{suite:10} {len(cases):5d} cases  pytest {pytest_total:7.1f} s  sampled {sampled:7.1f} s  "
            f"outside samples {sum(outside):7.1f} s (median {statistics.median(outside) * 1e3:6.0f} ms/case)  "
            f"run {run['wall_s']:6.1f} s, outside tests {run['wall_s'] - pytest_total:5.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run (default: this one)")
    parser.add_argument("--suites", default="matmul,conv,attention", help="comma-separated suites")
    parser.add_argument("--out", type=Path, default=None, help="where the runs are kept (default: a temp dir)")
    args = parser.parse_args()
    if not (args.root / "bench").is_dir():
        parser.error(f"--root {args.root}: no bench/ there")
    out = args.out or Path(tempfile.mkdtemp(prefix="case-overhead-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{args.root} (load average {os.getloadavg()[0]:.1f})")
    for suite in args.suites.split(","):
        print(summary(suite, run_suite(args.root.resolve(), suite, out)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
