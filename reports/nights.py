"""A machine's runs as nights: the matrix of levels reports/judge.py judges, and the judgement of the newest night as
`compare` verdicts. `compare` over a history, `history` and the history page all come here, so that the gate, the
steps a person reads and the pictures rest on one judgement of the same nights.

A night is one run of the machine, in the order of its `datetime` (then file name). A case's figure that night is
the run's level (reports/noise.py `level`), left out (NaN) where the run measured it throttled (a thermal or power
brake: what the GPU did, not what the code does). A figure measured under host contention is kept: on a busy
runner it is every night's figure, and its spread is part of the noise the series shows; where it would decide the
candidate's verdict, the verdict says contention explains it and the gate does not judge it (reports/verdicts.py).
A run cut short (`incomplete_reason`) is not a night: what it did not reach would read as missing and what it
reached may be what killed it.

The newest night's verdicts (`history_verdicts`, for `compare` over a history, reports/comparison.py): a case is
`slower` when a change that held (three nights at least) left it the threshold or more above its reference and
nobody accepted it (`python -m reports accept`); a one-night move beyond what the series has shown is not judged
(exit 3: the next night, or a re-run, tells a step from a blip); a night on which the whole run moved is not judged
either, and the shift is named instead of a list of cases.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from reports import acceptances, judge, noise
from reports.format import trust
from reports.text import signed_percent
from reports.verdicts import RunShift, Verdict, finish


@dataclass
class NightMatrix:
    """The levels of one machine's runs, cases x nights, and which figures may be judged."""

    cases: list[str]
    files: list[str]  # one per night, oldest first
    levels: np.ndarray  # seconds, NaN where the night has no figure of the case
    usable: np.ndarray  # bool: the figure can be judged (not throttled)
    groups: list[str | None]

    def judged_levels(self) -> np.ndarray:
        return np.where(self.usable, self.levels, np.nan)


def night_order(frame: pd.DataFrame) -> list[str]:
    """The files of one machine's frame, oldest first (by datetime, then file name)."""
    first = frame.groupby("file", sort=False)["datetime"].first().reset_index()
    return list(first.sort_values(["datetime", "file"], kind="stable")["file"])


def figures_usable(frame: pd.DataFrame) -> pd.Series:
    """Whether each row's figure can be judged (module docstring): not throttled."""
    return ~trust.flagged(frame, "throttled")


def levels(frame: pd.DataFrame) -> pd.Series:
    """Each row's level (reports/noise.py `level`): worked out row by row only where the row has round medians."""
    out = frame["median_s"].astype(float)
    if "round_medians_s" not in frame:
        return out
    rounds = frame["round_medians_s"]
    has = rounds.map(lambda r: isinstance(r, list | tuple) and len(r) > 0)
    out[has] = [noise.level({"round_medians_s": r, "median_s": m})
                for r, m in zip(rounds[has], frame.loc[has, "median_s"], strict=True)]
    return out


def matrix(frame: pd.DataFrame, order: list[str] | None = None) -> NightMatrix:
    """One machine's measured rows (one per case and file) as a NightMatrix, in `order` (default: night_order);
    rows that already carry their `level_s` and `usable` (reports/timeline.py `prepared`) are not worked out again."""
    order = order or night_order(frame)
    table = pd.DataFrame({"file": frame["file"], "case": frame["case"], "group": frame["group"],
                          "level": frame["level_s"] if "level_s" in frame else levels(frame),
                          "usable": frame["usable"] if "usable" in frame else figures_usable(frame)})
    cases = list(dict.fromkeys(table["case"]))
    groups = table.drop_duplicates("case").set_index("case")["group"].reindex(cases)
    return NightMatrix(cases, order, spread(table, "level", cases, order, np.nan),
                       spread(table, "usable", cases, order, False),
                       [g if isinstance(g, str) else None for g in groups])


def spread(table: pd.DataFrame, column: str, cases: list[str], order: list[str], missing: float | bool) -> np.ndarray:
    """The column as cases x nights: each cell the first value of its case and file that is not missing
    (`missing` where there is none), as a pivot table of `first` has it, written in one assignment: a cell's rows
    are written last to first, so the first is the one that stays."""
    values = table[column].to_numpy(dtype=type(missing))
    row, night = pd.Index(cases).get_indexer(table["case"]), pd.Index(order).get_indexer(table["file"])
    keep = (night >= 0) & pd.notna(values)
    out = np.full((len(cases), len(order)), missing, dtype=type(missing))
    out[row[keep][::-1], night[keep][::-1]] = values[keep][::-1]
    return out


def thresholds(found: NightMatrix, threshold_pct: float, group_thresholds: dict[str, float] | None) -> np.ndarray:
    """Each case's minimum effect as a fraction (its group's where one is set)."""
    group_thresholds = group_thresholds or {}
    return np.array([group_thresholds.get(g, threshold_pct) / 100 for g in found.groups]) if found.cases \
        else np.zeros(0)


def run(found: NightMatrix, threshold_pct: float, group_thresholds: dict[str, float] | None, floor_pct: float,
        acceptances: list[judge.Acceptance] = ()) -> judge.Judgement:
    """The judgement of every night of `found`."""
    return judge.judge(found.judged_levels(), found.cases, thresholds(found, threshold_pct, group_thresholds),
                       floor_pct / 100, acceptances)


def p_value(change: float, sigma: float) -> float:
    """Two-sided p-value of a change of level (log units) against the reference, in units of the noise."""
    return float(2 * stats.norm.sf(abs(change) / sigma)) if sigma > 0 and np.isfinite(change) else 1.0


def night_label(frame: pd.DataFrame, file: str) -> str:
    """`2024-05-23 8c30fbc6 (0009_8c30fbc6.json)`: what a person bisecting needs to find the night."""
    row = frame[frame["file"] == file].iloc[0]
    when = row["datetime"].strftime("%Y-%m-%d") if pd.notna(row["datetime"]) else "no date"
    commit = str(row["commit"])[:8] if isinstance(row.get("commit"), str) else "no commit"
    return f"{when} {commit} ({str(file).rsplit('/', 1)[-1]})"


def last_noise(found: judge.Judgement, row: int) -> float:
    """The noise a case was last judged by (log units), what the gate reports and the history page draws; the
    judgement's floor where no night of it was judged (a night set aside, the whole run moved, has none of its own)."""
    seen = found.tracks.sigma_at[row][np.isfinite(found.tracks.sigma_at[row])]
    return float(seen[-1]) if len(seen) else found.floor


def night_verdict(found: judge.Judgement, nights_of: NightMatrix, frame: pd.DataFrame, cand: pd.Series,
                  base: list[Mapping], threshold_pct: float) -> Verdict:
    """One case's verdict on the newest night of a history, from the judgement's outcome (module docstring)."""
    row, last = found.index(cand["case"]), found.nights - 1
    out = judge.outcome(found.tracks, row, last, found.threshold[row], found.shifts[last])
    own = found.tracks.raw_reference[row]
    reference = float(np.exp(own)) if np.isfinite(own) else float(np.median([noise.level(r) for r in base]))
    level = noise.level(cand)
    ratio = level / reference
    verdict = Verdict(case=cand["case"], group=cand.get("group"), verdict="unsure", ratio=ratio, ci_low=out.ci_low,
                      ci_high=out.ci_high, p_value=p_value(math.log(ratio), out.sigma), baseline_s=reference,
                      candidate_s=level, threshold_pct=threshold_pct, status=out.status, source="history",
                      noise_pct=float(np.expm1(last_noise(found, row)) * 100),
                      basis=f"{int(np.isfinite(nights_of.levels[row]).sum())} nights of this machine")
    def label(at: int) -> str:
        return night_label(frame, nights_of.files[at])

    beyond = ratio > 1 + threshold_pct / 100
    if out.status == judge.SLOWER:
        verdict.verdict = "slower"
        since = f" from {label(out.step.at)}, held {last - out.step.at + 1} nights" if out.step else ""
        verdict.note = (f"a change that held: {signed_percent(out.ratio)} against its reference{since}; open until "
                        "it is fixed or accepted (python -m reports accept)")
    elif out.status == judge.UNDONE:
        verdict.not_judged = (f"a regression{' from ' + label(out.step.at) if out.step else ''} is open, and this "
                              "night is back within the threshold of its reference: re-run to see it hold")
    elif out.status == judge.MOVED:
        verdict.not_judged = (f"moved {signed_percent(out.ratio)} on this night alone ({out.z:.0f} x its noise, "
                              f"beyond what this machine's cases show once in {judge.NIGHTS_PER_ALARM} nights): "
                              f"re-run; a regression if it holds {judge.PERSIST} nights")
    elif out.status == judge.FASTER:
        verdict.verdict = "faster"
        verdict.note = f"a change that held: {signed_percent(out.step.ratio)} from {label(out.step.at)}"
    elif out.status == judge.SHIFTED:
        verdict.note = "the whole run moved this night (below): its cases are judged as a whole, not one by one"
    elif out.status == judge.MISSING:
        verdict.note = "this night's figure cannot be judged (the GPU throttled while it was measured)"
        verdict.looks = "slower" if beyond else ""
    elif out.status == judge.NEW:
        verdict.note = "no earlier figure of it could be judged"
        verdict.not_judged = "no earlier figure that could be judged" if beyond else ""
    else:
        verdict.verdict = "same" if 1 / (1 + threshold_pct / 100) <= out.ratio <= 1 + threshold_pct / 100 else "unsure"
        if out.status == judge.SEEN:
            verdict.note = (f"moved {signed_percent(out.ratio)}, as far as on {out.blips} earlier nights it came "
                            "back from")
        elif out.status == judge.MOVED_FASTER:
            verdict.note = f"moved {signed_percent(out.ratio)} on this night alone"
        elif out.status == judge.BEHIND:
            verdict.note = ("slower than the whole run (which moved more), no slower than its own reference: not a "
                            "regression of this case")
        elif verdict.verdict == "unsure":
            verdict.note = f"within this case's noise ({verdict.noise_pct:.1f} % per night, {verdict.basis})"
    return finish(verdict, base, cand, [f"candidate {why}" for why in trust.doubts(cand, True)])


def base_rows(base: pd.DataFrame, cand: pd.DataFrame, files: list[str]) -> dict[str, list[Mapping]]:
    """Each case the candidate shares with the history (in the candidate's order): its rows of the history, oldest
    night first, each a dict of its fields (what a verdict reads of them, as of a row: a dict is a tenth of the
    cost of a Series to make). One pass over the history's rows, not one lookup per case and night: a year of
    nights of a few hundred cases is a hundred thousand rows."""
    shared = base[base.index.isin(cand.index)]
    night = shared["file"].map({file: i for i, file in enumerate(files)})
    held = set(shared.index)
    found: dict[str, list[Mapping]] = {case: [] for case in cand.index if case in held}
    for case, row in zip(shared.index[order := np.argsort(night.to_numpy(), kind="stable")],
                         shared.iloc[order].to_dict("records"), strict=True):
        found[case].append(row)
    return found


def history_verdicts(base: pd.DataFrame, cand: pd.DataFrame, threshold_pct: float,
                     group_thresholds: dict[str, float], noise_floor_pct: float,
                     accepted: list[acceptances.Record]) -> tuple[list[Verdict], RunShift]:
    """Every common case judged on the newest night of a history (module docstring), and the whole run's shift."""
    frame = pd.concat([base, cand], ignore_index=True)
    found_nights = matrix(frame, [*night_order(base), str(cand["file"].iloc[0])])
    found = run(found_nights, threshold_pct, group_thresholds, noise_floor_pct,
                       acceptances.for_nights(accepted, frame, found_nights.files))
    found_verdicts = []
    for case, rows in base_rows(base, cand, found_nights.files).items():
        found_verdicts.append(night_verdict(found, found_nights, frame, cand.loc[case], rows,
                                            group_thresholds.get(cand.loc[case, "group"], threshold_pct)))
    out = judge.outcome(found.shift, 0, found.nights - 1, float(np.median(found.threshold)))
    moved = sum(v.ratio > 1 + v.threshold_pct / 100 for v in found_verdicts)
    note = (f"the whole run moved {signed_percent(out.ratio)} this night ({moved} of {len(found_verdicts)} cases "
            "beyond their threshold): the machine, not one case; re-run" if out.status == judge.MOVED else
            f"the whole run is {signed_percent(out.ratio)} against its reference, a shift that held: the machine "
            "(a driver, a clock) or a change every case shares; accept it if it is meant"
            if out.status == judge.SLOWER else "")
    return found_verdicts, RunShift(out.status, out.ratio, int(np.isfinite(found_nights.levels[:, -1]).sum()), note)
