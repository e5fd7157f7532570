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
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reports import acceptances, judge  # noqa: E402
from reports.format.load import load  # noqa: E402
from reports.gate import FAILED, NOT_JUDGED, gate_failures, gate_not_judged, gate_status  # noqa: E402
from reports.verdicts import compare  # noqa: E402

SERIES = ROOT / "tests" / "data" / "series"
CAUGHT_WITHIN = 3  # nights from a step's first night to the gate's failure on it
SMALLEST = 1.10  # labelled slower steps at least this large must be caught


@dataclass
class Night:
    """The gate's answer on one night of a series."""

    number: int  # 1-based, as in the file names and labels
    status: int
    slower: list[str]
    shift: str  # the whole run's status
    unjudged: list[str]
    lines: list[str] = field(default_factory=list)


@dataclass
class Score:
    """How the gate fared on a series against its labels."""

    series: str
    nights: list[Night]
    false_alarms: list[int]
    caught: dict[str, int | None]  # labelled step ("case@night") -> the night first failed on, None: missed
    too_early: list[str]


def replay(folder: Path, strict: bool) -> list[Night]:
    """Each night of a series judged against the nights before it, as the nightly workflow does."""
    files = sorted(folder.glob("*.json"))
    frame = load(files, samples=False)
    records: list[acceptances.Record] = []
    found = []
    for k in range(1, len(files)):
        base = frame[frame["file"].isin([str(f) for f in files[:k]])]
        cand = frame[frame["file"] == str(files[k])]
        result = compare(base, cand, accepted=records)
        status = gate_status(result)
        slower = [v.case for v in result.verdicts if v.verdict == "slower"]
        shift = result.shift.status if result.shift is not None else ""
        found.append(Night(k + 1, status, slower, shift, [v.case for v in result.unjudged],
                           gate_failures(result) + gate_not_judged(result)))
        if status == FAILED and not strict:
            whole = shift == judge.SLOWER
            records.append(acceptances.record(cand, "replay: accepted the day it failed", [] if whole else slower))
    return found


def labelled(labels: dict, night: int, case: str) -> bool:
    """Whether a failure of `case` (or "*", the whole run) on `night` is one of the labelled steps that holds then."""
    for step in labels.get("steps", []):
        if step["case"] != case or step["ratio"] <= 1:
            continue
        until = step.get("persists_until")
        if step["night"] <= night and (until is None or night < until):
            return True
    return False


def ambiguous(labels: dict, night: int, case: str) -> bool:
    return any(a["case"] == case and night >= min(a["nights"]) for a in labels.get("ambiguous", []))


def score(name: str, nights: list[Night], labels: dict) -> Score:
    """False alarms: nights that failed for no labelled step (a failure on a case labelled ambiguous is not counted
    either way); each labelled slower step of SMALLEST or more: the first night that failed on it."""
    false_alarms = [n.number for n in nights if n.status == FAILED
                    and not any(labelled(labels, n.number, c) or ambiguous(labels, n.number, c)
                                for c in [*n.slower, *(["*"] if n.shift == judge.SLOWER else [])])]
    caught: dict[str, int | None] = {}
    too_early = []
    for step in labels.get("steps", []):
        if step["ratio"] < SMALLEST:
            continue
        key = f"{step['case'].rsplit('::', 1)[-1]}@{step['night']}"
        if step["night"] <= judge.SETTLED:
            too_early.append(key)
            continue
        hits = [n.number for n in nights if n.number >= step["night"] and n.status == FAILED
                and (step["case"] in n.slower or (step["case"] == "*" and n.shift == judge.SLOWER))]
        caught[key] = hits[0] if hits else None
    return Score(name, nights, false_alarms, caught, too_early)


def report(found: Score, quiet: bool) -> None:
    print(f"== {found.series}: {len(found.nights)} nights judged")
    if not quiet:
        for n in found.nights:
            flagged = ", ".join(c.rsplit("::", 1)[-1] for c in n.slower) or ("whole run" if n.shift else "")
            what = f"failed: {flagged}" if n.status == FAILED else \
                f"not judged: {n.lines[0][:110]}" if n.status == NOT_JUDGED else ""
            mark = " (FALSE ALARM)" if n.number in found.false_alarms else ""
            print(f"  night {n.number:3d}  exit {n.status}  {what}{mark}")
    not_judged = [n.number for n in found.nights if n.status == NOT_JUDGED]
    print(f"  false alarms: {len(found.false_alarms)} night(s) {found.false_alarms}; not judged (exit 3): "
          f"{len(not_judged)} night(s) {not_judged}")
    void = {n.number for n in found.nights if n.shift == judge.MOVED}
    for key, night in found.caught.items():
        start = int(key.rsplit("@", 1)[1])
        calendar = night - start + 1 if night else 0
        judged = calendar - len([v for v in void if start <= v <= night]) if not key.startswith("*") else calendar
        late = "MISSED" if night is None else f"caught on night {night}, {calendar} nights from its start" + (
            f" ({judged} of them judged: on the others the whole run moved, and was not judged)"
            if judged != calendar else "") + ("" if judged <= CAUGHT_WITHIN else " LATE")
        print(f"  step {key}: {late}")
    if found.too_early:
        print(f"  steps before night {judge.SETTLED + 1} (no level to name them from): {', '.join(found.too_early)}")


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
