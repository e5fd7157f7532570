"""What a verdict on one case is (`Verdict`) and what the whole candidate run did (`RunShift`), with the notes both
ways of judging add to a verdict (`finish`): reports/pair_judgement.py judges an A/B pair, reports/nights.py the
newest night of a history, and reports/comparison.py's `compare` puts their verdicts together.

What cannot carry a verdict says why, so that the gate (reports/gate.py) never passes it silently:
- a case with a value that cannot be a time (an infinite or negative round median, an invalid median) is
  `invalid`, named with the field, and fails the gate;
- a case `unsure` whose ratio lies beyond the threshold towards slower is not judged (exit 3) when what kept it
  from a verdict is missing evidence, not the case's measured noise (in a history: a one-night move, a regression
  this night may have undone, a candidate figure that could not be judged): host contention on the candidate
  (`extra_info.contended` where the timer includes the host, reports/change.py `host_disturbed`: event- and
  graph-timed cases are judged on their own noise however busy the host was), run-to-run noise that is only
  assumed (no rounds, no history), a level resting on fewer than `MIN_EVIDENCE` samples (too thin,
  reports/pair_judgement.py), a run that did not converge (without measured noise) or was throttled. Each such
  case names its reasons, and the message says what gives the missing evidence (a quiet machine,
  `--bench-rounds 3`). A case `unsure` within its measured run-to-run noise was judged: that noise is the case's
  own, and a re-run would not remove it;
- a candidate measured under host contention whose numbers alone say `slower` is `unsure` with the note
  "contention explains the change" (and not judged, above); a baseline measured under contention explains a
  `faster` the same way, which is reported under the gate's `not_gated` and cannot block a regression gate;
- a throttled run (thermal or hardware slowdown, power brake; see suites/observers/telemetry.py; running at the
  power cap is the normal state of a busy GPU and is not doubt) makes the case `unsure`.
Where the median SM clock of the newest baseline run and the candidate differs by `CLOCK_NOTE_PCT` or more, the
verdict's note says so: a change of clock explains a change of time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from reports import judge
from reports.format import trust

CLOCK_NOTE_PCT = 3.0  # a difference of median SM clock that can explain a change of time of the same order


@dataclass
class Verdict:
    """The comparison of one case between two runs."""

    case: str
    group: str | None
    verdict: str
    ratio: float | None  # candidate level / baseline level
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    baseline_s: float | None
    candidate_s: float | None
    threshold_pct: float
    note: str = ""
    noise_pct: float | None = None  # the case's run-to-run noise (one run's level), measured or assumed
    basis: str = ""  # what the noise was estimated from, e.g. "3 rounds x 2 runs"
    source: str = "assumed"  # `rounds`, `pooled`, `rounds and pooled`, `history`, or `assumed` (nothing measured it)
    contended: bool = False  # a side was measured under host contention
    thin: bool = False  # a side's level rests on fewer than MIN_EVIDENCE samples (pair_judgement)
    looks: str = ""  # what the numbers alone say where doubt, thinness or contention made the verdict `unsure`
    not_judged: str = ""  # why a change towards slower could not be judged (blocks the gate with NOT_JUDGED)
    status: str = ""  # in a history, what the judgement says of the candidate's night (reports/judge.py)


@dataclass
class RunShift:
    """What the whole candidate run did, all its cases together: the shift they share (reports/noise.py `Pooled`
    for a pair, reports/judge.py's shift series for a history) and what the judgement says of it."""

    status: str  # judge's statuses: `same`, `moved` (not judged), `slower` (a shift that held), `undone`, ...
    ratio: float  # the median case's candidate / baseline level
    cases: int  # cases it rests on
    note: str = ""

    @property
    def blocks(self) -> bool:
        return self.status in (judge.MOVED, judge.UNDONE, judge.SLOWER)


def clock_note(base: Mapping, cand: Mapping) -> str:
    """`SM clock 1980 -> 1755 MHz (-11.4 %)` where both runs have a median SM clock and it moved enough to matter."""
    b, c = trust.number(base.get("sm_clock_mhz")), trust.number(cand.get("sm_clock_mhz"))
    if b is None or c is None or not b > 0:
        return ""
    moved = (c / b - 1) * 100
    return f"SM clock {b:.0f} -> {c:.0f} MHz ({moved:+.1f} %)" if abs(moved) >= CLOCK_NOTE_PCT else ""


def _contention(row: Mapping) -> str:
    """`contended (share 35 %)` when the run measured the case under host contention, else ''; for a timer that
    holds the host out of its window (trust.host_disturbed), also that the contention does not count."""
    if not trust.flag(row, "contended"):
        return ""
    share = trust.contention_share(row.get("contention"))
    text = f"contended (share {share:.0%})" if share is not None else "contended"
    if trust.host_disturbed(row):
        return text
    return f"{text}, not counted: the {row.get('timer')} timer holds the host out"


def _contention_note(verdict: Verdict, base: list[Mapping], cand: pd.Series) -> str:
    """Name the contention of either side, and turn a change that host contention explains into `unsure`: only
    where the timer includes the host (trust.host_disturbed); a device-timed case keeps its verdict."""
    cand_busy, base_busy = _contention(cand), next((t for t in map(_contention, base) if t), "")
    verdict.contended = bool(cand_busy or base_busy)
    explains = ((verdict.verdict == "slower" and trust.host_disturbed(cand))
                or (verdict.verdict == "faster" and any(map(trust.host_disturbed, base))))
    if explains:
        verdict.looks, verdict.verdict = verdict.verdict, "unsure"
    parts = [f"{side} {text}" for side, text in (("baseline", base_busy), ("candidate", cand_busy)) if text]
    return "; ".join(parts) + (": contention explains the change" if explains else "")


def not_judged(verdict: Verdict, doubts: list[str], cand: pd.Series) -> str:
    """Why the gate cannot judge this case (see the module docstring), or '': an `unsure` change beyond the
    threshold towards slower, kept from a verdict by missing evidence rather than by the case's measured noise."""
    if verdict.verdict != "unsure" or not verdict.ratio > 1 + verdict.threshold_pct / 100:
        return ""
    numbers = verdict.looks or verdict.verdict  # what the ratio and its interval alone say
    reasons = ["candidate host contention"] if trust.host_disturbed(cand) else []
    reasons += ["run-to-run noise unknown"] if numbers != "slower" and verdict.source == "assumed" else []
    reasons += ["too thin"] if verdict.thin else []
    return ", ".join(reasons + doubts)


def finish(verdict: Verdict, base: list[Mapping], cand: pd.Series, doubts: list[str]) -> Verdict:
    """What both ways of judging add: contention and clock notes, and why the gate cannot judge the case. `base`:
    the baseline's rows of the case, Series or dicts of their fields (a history's, reports/nights.py)."""
    notes = (verdict.note, _contention_note(verdict, base, cand), clock_note(base[-1], cand))
    verdict.note = "; ".join(note for note in notes if note)
    verdict.not_judged = not_judged(verdict, doubts, cand) or verdict.not_judged
    return verdict
