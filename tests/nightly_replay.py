"""The nightly gate replayed night by night over a series of runs, as the nightly workflow meets them, and scored
against a person's labels of the series (tests/data/series/labels.json): used by tests/test_gate_series.py and by
tools/bench_gate_series.py, which prints the night-by-night table.

Night k is judged with `compare` over the runs before it as the history directory and run k as the candidate, the
gate's exit status read off the comparison (reports/gate.py). Where the gate fails, the operator's answer is modelled
as the workflow documents it: the failing cases (or the whole run, for a shift) are accepted the same day
(`python -m reports accept`), so that each real step fails once; `strict` accepts nothing instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reports import acceptances, judge
from reports.comparison import compare
from reports.format.load import load
from reports.gate import FAILED, NOT_JUDGED, gate_failures, gate_not_judged, gate_status
from tests.resultfiles import DATA

SERIES = DATA / "series"
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
        result = compare(base, cand, accepted=records, directory=True)
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
