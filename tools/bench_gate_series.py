"""The nightly gate replayed night by night over real series of other projects, and scored against their labels.

For each series folder (tests/data/series/README.md: real nightly runs of other projects' pytest-benchmark suites on
their GPU runners, with what a person sees in them in labels.json), night k is judged as the nightly workflow would
judge it: `compare` with the runs before it as the history directory and run k as the candidate, the gate's exit
status read off the comparison (reports/gate.py). Where the gate fails, the operator's answer is modelled as the
workflow documents it: the failing cases (or the whole run, for a shift) are accepted the same day
(`python -m reports accept`), so that each real step fails once and the nights after it are judged against the new
level; `--strict` leaves every failure unaccepted instead.

Printed per series: one line per night (exit status, the cases that failed or were not judged, and whether each
failure is a labelled step), then the score: nights that failed for no labelled step (false alarms), nights not
judged (exit 3), and each labelled slower step of 10 % or more with the night the gate first failed on it (caught
within 3 nights of its start, or missed). Steps that start before a series' sixth night cannot be named (their
old level rests on fewer than five nights, judge.SETTLED) and are listed apart.

    python tools/bench_gate_series.py [SERIES_DIR ...] [--strict] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.nightly_replay import SERIES, replay, report, score  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("series", nargs="*", type=Path, help="series folders (default: every one in tests/data/series)")
    parser.add_argument("--strict", action="store_true", help="accept no failure: every later night fails too")
    parser.add_argument("--quiet", action="store_true", help="the score only, not one line per night")
    args = parser.parse_args(argv)
    labels = json.loads((SERIES / "labels.json").read_text())
    folders = args.series or sorted(p for p in SERIES.iterdir() if p.is_dir())
    for folder in folders:
        report(score(folder.name, replay(folder, args.strict), labels.get(folder.name, {})), args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
