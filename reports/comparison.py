"""Verdicts of `python -m reports compare`: did a case get slower, judged by how it moves from run to run.

The baseline decides how (reports/baseline.py chooses its runs):

- **A history** (a directory with `baseline.MIN_HISTORY` runs of the candidate's machine or more): the runs and
  the candidate are nights, judged by reports/judge.py as the nightly meets them, the same judgement `history`
  and the history page replay (reports/nights.py, `history_verdicts`).
- **One or two baseline runs** (an A/B comparison): the ratio of levels, its interval and a p-value from the
  case's run-to-run noise, measured or assumed, against a minimum effect (reports/pair_judgement.py).

What cannot carry a verdict says why, so that the gate (reports/gate.py) never passes it silently
(reports/verdicts.py). Correctness experiments (`stop_reason` `once`) are not speed figures and get no verdict.
Cases measured in one run only are listed as added or removed (with the status, e.g. oom, that replaced a removed
case's timing); a candidate cut short (`incomplete`) fails the gate, and its unreached cases are listed as not
measured, not as removed. Any difference of machine identity (machine, driver, CUDA, cuDNN, torch, world size) is
named in the header. `--json FILE` writes all of it as one object (docs/results.md,
docs/schema/compare.schema.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reports import acceptances, baseline, noise
from reports.change import DEFAULT_THRESHOLD_PCT, VERDICTS
from reports.format import identity
from reports.format.errors import InputError
from reports.nights import history_verdicts
from reports.pair_judgement import DEFAULT_ALPHA, pair_verdicts
from reports.verdicts import RunShift, Verdict


@dataclass
class Comparison:
    """Every verdict plus the cases only one side measured or that hold no usable time."""

    verdicts: list[Verdict]
    added: list[str]
    removed: list[str]
    baseline: str
    candidate: str
    broken: list[str] = field(default_factory=list)  # timed in the baseline, now oom or error: a regression too
    incomplete: str | None = None  # why the candidate run was cut short, when it was
    unmeasured: list[str] = field(default_factory=list)  # timed in the baseline, not reached by the cut-short run
    identity_changes: list[str] = field(default_factory=list)  # e.g. "torch 2.5.1 -> 2.6.0"
    invalid: list[str] = field(default_factory=list)  # "case: candidate round_medians_s[2]=inf is not a time"
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    alpha: float = DEFAULT_ALPHA
    shift: RunShift | None = None  # the whole run's shift, where enough cases were shared to estimate it
    new_machine: str = ""  # why nothing could be judged: the baseline holds no run of the candidate's machine
    accepted: str = ""  # the acceptance of the candidate's own run (reports/accept.py), where there is one

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def regressed(self) -> bool:
        return self.count("slower") > 0 or bool(self.broken)

    @property
    def unjudged(self) -> list[Verdict]:
        """Changes towards slower that could not be judged: each may be a regression nobody can see."""
        return [v for v in self.verdicts if v.not_judged]

    @property
    def explained(self) -> list[Verdict]:
        """Changes towards faster that baseline contention explains: reported, never blocking a regression gate."""
        return [v for v in self.verdicts if "contention explains" in v.note and not v.not_judged]


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The cases with a speed figure, keyed by case (correctness experiments, `stop_reason` `once`, are not)."""
    if "median_s" not in frame:
        return frame.iloc[:0]
    timed = frame["median_s"].notna() & (frame["status"] != "invalid")  # a round median that is no time, say
    if "stop_reason" in frame:
        timed &= frame["stop_reason"] != "once"
    return frame[timed].set_index("case", drop=False)


def _one_run(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """The measured cases of a single run, keyed by case; more than one run is an InputError."""
    files = frame["file"].unique()
    if len(files) != 1:
        raise InputError(f"{label}: expected one result file, got {len(files)} runs")
    return _measured(frame)


def _with_status(case: str, frame: pd.DataFrame) -> str:
    """A case no longer timed, with why when the run recorded it (a case that now runs out of memory shows)."""
    rows = frame[frame["case"] == case]
    if rows.empty:
        return case
    row = rows.iloc[0]
    reason = row.get("reason")
    return f"{case} (now {row['status']}{': ' + str(reason) if isinstance(reason, str) else ''})"


def compare(base_frame: pd.DataFrame, cand_frame: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
            group_thresholds: dict[str, float] | None = None, alpha: float = DEFAULT_ALPHA,
            allow_different_devices: bool = False, last: int | None = baseline.DEFAULT_LAST,
            noise_floor_pct: float = noise.DEFAULT_NOISE_FLOOR_PCT,
            accepted: list[acceptances.Record] | None = None, directory: bool = False) -> Comparison:
    """Verdicts for every case measured in the candidate and the baseline (module docstring); cases measured in one
    only are added or removed. `accepted`: the acceptances kept with the history (reports/acceptances.py);
    `directory`: the baseline was given as a folder of runs (a history, which may hold the candidate's own run)."""
    _one_run(cand_frame, "candidate")
    group_thresholds, accepted = group_thresholds or {}, accepted or []
    own = acceptances.of_run(accepted, cand_frame)
    try:
        base_frame = baseline.select(base_frame, cand_frame, last, directory)
    except baseline.NewMachine as exc:
        return Comparison([], [], [], baseline="no run of this machine", candidate=cand_frame["file"].iloc[0],
                          threshold_pct=threshold_pct, alpha=alpha, new_machine="" if own else str(exc),
                          accepted=own.reason if own else "")
    baseline.check_devices(base_frame, cand_frame, allow_different_devices)
    base, cand = _measured(base_frame), _measured(cand_frame)
    if base_frame["file"].nunique() >= baseline.MIN_HISTORY:
        verdicts, shift = history_verdicts(base, cand, threshold_pct, group_thresholds, noise_floor_pct, accepted)
    else:
        verdicts, shift = pair_verdicts(base, cand, threshold_pct, group_thresholds, alpha, noise_floor_pct)
    rank = {v: i for i, v in enumerate(VERDICTS)}
    verdicts.sort(key=lambda v: (rank[v.verdict], -abs(np.log(v.ratio))))
    gone = sorted(set(base.index) - set(cand.index))
    status = cand_frame.drop_duplicates("case").set_index("case")["status"]
    failing = {case for case in gone if status.get(case) in ("oom", "error")}
    invalid = [f"{_with_status(case, cand_frame)}: candidate has no valid time" for case in gone
               if status.get(case) == "invalid"]
    incomplete = baseline.incomplete_reason(cand_frame)
    unreached = set(gone) - set(cand_frame["case"]) if incomplete else set()
    return Comparison(verdicts, added=sorted(set(cand.index) - set(base.index)),
                      removed=[_with_status(case, cand_frame) for case in gone
                               if case not in failing and case not in unreached and status.get(case) != "invalid"],
                      baseline=baseline.describe(base_frame), candidate=cand_frame["file"].iloc[0],
                      broken=[_with_status(case, cand_frame) for case in gone if case in failing],
                      incomplete=incomplete, unmeasured=sorted(unreached),
                      identity_changes=identity.differences(base_frame, cand_frame), invalid=invalid,
                      threshold_pct=threshold_pct, alpha=alpha, shift=shift, accepted=own.reason if own else "")


def noise_sources(result: Comparison) -> dict[str, int]:
    """How many verdicts each noise source judged, e.g. {"rounds": 28, "assumed": 2}."""
    counts: dict[str, int] = {}
    for v in result.verdicts:
        counts[v.source] = counts.get(v.source, 0) + 1
    return counts
