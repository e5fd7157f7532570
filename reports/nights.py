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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from reports import judge, noise


@dataclass
class NightMatrix:
    """The levels of one machine's runs, cases x nights, and which figures may be judged."""

    cases: list[str]
    files: list[str]  # one per night, oldest first
    levels: np.ndarray  # seconds, NaN where the night has no figure of the case
    usable: np.ndarray  # bool: the figure can be judged (not host-disturbed, not throttled)
    groups: list[str | None]

    def judged_levels(self) -> np.ndarray:
        return np.where(self.usable, self.levels, np.nan)


def night_order(frame: pd.DataFrame) -> list[str]:
    """The files of one machine's frame, oldest first (by datetime, then file name)."""
    first = frame.groupby("file", sort=False)["datetime"].first().reset_index()
    return list(first.sort_values(["datetime", "file"], kind="stable")["file"])


def figures_usable(frame: pd.DataFrame) -> pd.Series:
    """Whether each row's figure can be judged (module docstring): not throttled."""
    if "throttled" not in frame:
        return pd.Series(True, index=frame.index)
    return ~frame["throttled"].map(lambda v: isinstance(v, bool) and v).astype(bool)


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
    wide = table.pivot_table(index="case", columns="file", values="level", aggfunc="first").reindex(
        index=cases, columns=order)
    usable = table.pivot_table(index="case", columns="file", values="usable", aggfunc="first").reindex(
        index=cases, columns=order)
    groups = table.drop_duplicates("case").set_index("case")["group"].reindex(cases)
    return NightMatrix(cases, order, wide.to_numpy(dtype=float), usable.fillna(False).to_numpy(dtype=bool),
                  [g if isinstance(g, str) else None for g in groups])


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
