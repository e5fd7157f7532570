"""What the installed plugin costs a pytest run that does not use it: start-up time, and whether torch is imported.

The plugin is registered in every pytest run of an environment that installs the project (its `pytest11` entry
point), so a repository's own test run pays for its import. This makes a throw-away repository with one plain test,
runs `pytest` there N times with the plugin registered and N times with it blocked
(`-p no:suites.harness.pytest_plugin`), alternating, and prints the median wall time of each and the import time
of the plugin module alone (`python -X importtime`, cumulative microseconds). The load average is printed before
and after: on a shared machine other jobs move the figures.

    python tools/bench_plugin_cost.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = "suites.harness.pytest_plugin"
TEST = 'import sys\n\n\ndef test_plain():\n    assert "torch" not in sys.modules\n'


def timed_run(repo: Path, *args: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=repo,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed in {repo}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds


def import_us(module: str) -> int:
    """The cumulative import time of `module` in microseconds, as `python -X importtime` reports it."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                          text=True, check=True)
    line = next(line for line in proc.stderr.splitlines() if line.rstrip().endswith(f"| {module}"))
    return int(line.split("|")[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        (repo / "test_plain.py").write_text(TEST)
        times: dict[str, list[float]] = {"registered": [], "blocked": []}
        for _ in range(args.runs):
            times["registered"].append(timed_run(repo))
            times["blocked"].append(timed_run(repo, "-p", f"no:{PLUGIN}"))
    for name, values in times.items():
        print(f"pytest run, plugin {name}: median {statistics.median(values):.3f} s over {len(values)} runs "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    print(f"import {PLUGIN}: {import_us(PLUGIN) / 1e3:.1f} ms cumulative (pytest: {import_us('pytest') / 1e3:.1f} ms)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
