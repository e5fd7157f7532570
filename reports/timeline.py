"""Each case's level over the stored runs of each machine, and what moved: the data behind `history` and the
history section of the HTML page (reports/history_html.py, drawn by reports/plots/levels.py).

A series (`Trend`) is one case on one machine identity (`machine_id`: a GPU's UUID, so two boxes of one GPU model
are two series), its runs ordered by `datetime`. A run's level of a case is the figure the nightly gate judges
(reports/noise.py `level`): the median of its round medians, or its median when it ran in one round, so the
picture and the gate never disagree about where a run lies. Steps come from reports/stats.py (asv's
piecewise-constant fit; a change must last `stats.MIN_RUNS` runs). Each run of a series keeps what the pictures
mark: its marks (reports/marks.py: contended, unconverged, throttled, above peak), whether it was cut short
(`incomplete_reason`, or a killed night's journal) and whether it is a good run.

Good runs are the runs the gate may use as its reference: the nightly workflow copies a run into
`good/<machine>/` only when its gate passed, nothing errored and the run ended cleanly. The copy has another file
name than the history's entry, so a run is matched to its good copy by (machine, datetime, commit), which both
share. The same run given twice (a good copy in a folder beside its original) is one run: the second file is left
out, so a point is never drawn twice.

The newest run of each machine is judged as the gate judges it (`Gate`, with reports/verdicts.py itself): against
the last `verdicts.DEFAULT_LAST` good runs before it, or, where no good runs are given, the last complete runs
before it (what `compare` does with a history directory). Its verdicts are the cases that moved in the last run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from reports import marks, noise, stats, verdicts
from reports.format.errors import InputError
from reports.stats import LevelShift
from reports.verdicts import Comparison, Verdict

RUN_KEY = ["machine_id", "datetime", "commit"]  # what a run and its good copy share (their file names differ)
KEPT = ("datetime", "commit", "file", "median_s", "q1_s", "q3_s", "torch_version", "level_s")
NO_GROUP = "(no group)"  # a pytest-benchmark file without groups (other projects): its cases still have a history


@dataclass
class Trend:
    """One case's history on one machine: the runs in order with their levels, and the steps found."""

    case: str
    group: str | None
    device: str  # the series' label: the device, with the machine when one device name ran on several
    machine: str  # machine_id
    runs: pd.DataFrame  # KEPT columns present, marks, incomplete, good; oldest first
    steps: list[LevelShift]

    @property
    def levels(self) -> np.ndarray:
        return self.runs["level_s"].to_numpy(dtype=float)

    @property
    def noise(self) -> float:
        """The series' own run-to-run noise in log units (reports/stats.py `noise`, what its steps are judged
        by): robust to a step and to a spike."""
        return stats.noise(np.log(self.levels))

    @property
    def marked(self) -> str | None:
        """The symbols of the marks the case's runs carry and in how many runs (`cu in 3 of 8 runs`), None when
        no run of it was disturbed."""
        found = self.runs["marks"]
        if not found.map(bool).any():
            return None
        symbols = "".join(m.symbol for m in marks.present(found))
        return f"{symbols} in {int(found.map(bool).sum())} of {len(found)} runs"

    def run_label(self, index: int) -> str:
        """`2026-11-09 03:00 00000008 (run_08.json)`: what a person bisecting needs to find the run."""
        run = self.runs.iloc[index]
        return f"{stamp(run['datetime'])} {short_commit(run['commit'])} ({Path(run['file']).name})"

    def software_change(self, index: int) -> str:
        """` (torch A -> B)` when the torch version changed at this run, a likely cause of a step there."""
        if "torch_version" not in self.runs or index == 0:
            return ""
        before, after = self.runs["torch_version"].iloc[index - 1], self.runs["torch_version"].iloc[index]
        return f" (torch {before} -> {after})" if before != after else ""

    def describe(self, step: LevelShift) -> str:
        return f"{(step.ratio - 1) * 100:+.1f} % at {self.run_label(step.at)}{self.software_change(step.at)}"

    def describe_steps(self) -> str:
        return "; ".join(self.describe(s) for s in self.steps)


def stamp(when: pd.Timestamp, form: str = "%Y-%m-%d %H:%M") -> str:
    """A run's date as text, `no date` for a run whose file had none that could be read."""
    return when.strftime(form) if pd.notna(when) else "no date"


def short_commit(commit: object) -> str:
    return str(commit)[:8] if isinstance(commit, str) else "no commit"


def series_labels(frame: pd.DataFrame) -> pd.Series:
    """Each row's series label: its device, plus the machine when one device name ran on several machines."""
    machines = frame.groupby("device")["machine_id"].nunique()
    shared = frame["device"].isin(machines[machines > 1].index)
    return frame["device"].where(~shared, frame["device"] + " [" + frame["machine_id"].astype(str) + "]")


def run_keys(frame: pd.DataFrame) -> pd.Series:
    """Each dated file's run key (machine, datetime, commit) as a tuple, indexed by file. A file without a
    readable date has none: two undated runs of one commit are not known to be one run."""
    first = frame.groupby("file", sort=False)[RUN_KEY].first()
    first = first[first["datetime"].notna()]
    return pd.Series(list(first.astype(object).where(first.notna(), None).itertuples(index=False, name=None)),
                     index=first.index, dtype=object)


def without_copies(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without the files that repeat a run an earlier file (by name) holds: a good copy beside its
    original is one run."""
    keys = run_keys(frame).sort_index()
    return frame[~frame["file"].isin(keys.index[keys.duplicated()])]


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


def prepared(frame: pd.DataFrame, good: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows with a usable time, copies of a run left out, with their level, marks, series label, whether the
    run was cut short (`incomplete`) and whether it is one of the good runs (`good`: the good runs' rows, or
    None)."""
    frame = without_copies(frame)
    measured = frame[frame["median_s"] > 0] if "median_s" in frame else frame.iloc[:0]
    if measured.empty:
        raise InputError("history: the results hold no timed case")
    cut = measured["incomplete_reason"].notna() if "incomplete_reason" in measured else False
    kept = [c for c in dict.fromkeys(["file", *RUN_KEY, "device", "group", "case", *KEPT, "incomplete_reason"])
            if c in measured]  # the columns a history reads, in one block (a loaded frame is many)
    return measured[kept].assign(
        level_s=levels(measured), series=series_labels(measured), marks=marks.per_row(measured), incomplete=cut,
        good=measured["file"].isin(good_runs(measured, good)), group=measured["group"].fillna(NO_GROUP))


def good_runs(history: pd.DataFrame, good: pd.DataFrame | None) -> set[str]:
    """The files of the history whose run is among the good runs (matched by run key, see the docstring)."""
    if good is None or good.empty:
        return set()
    known = set(run_keys(good))
    keys = run_keys(history)
    return set(keys.index[keys.isin(known)])


def series(rows: pd.DataFrame, min_effect_pct: float = 5.0) -> list[Trend]:
    """A Trend per (machine, case) of prepared rows; cases with steps first, then by group and case."""
    columns = [c for c in KEPT if c in rows] + ["marks", "incomplete", "good"]
    out = []
    for (machine, case), part in rows.groupby(["machine_id", "case"], sort=True):
        runs = part.sort_values(["datetime", "file"], kind="stable")[columns].reset_index(drop=True)
        out.append(Trend(case, part["group"].iloc[0], part["series"].iloc[0], machine, runs,
                         stats.steps(runs["level_s"].to_numpy(), min_effect_pct / 100)))
    return sorted(out, key=lambda t: (not t.steps, str(t.group), t.case, t.device))


def trends(frame: pd.DataFrame, min_effect_pct: float = 5.0, good: pd.DataFrame | None = None) -> list[Trend]:
    """A Trend per (machine, case) with at least one timing; cases with steps first, then by group and case."""
    return series(prepared(frame, good), min_effect_pct)


def run_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run of prepared rows, oldest first: when, commit, machine, series label, why it was cut short,
    whether it is good, how many cases it timed and how many of them carry a mark."""
    rows = rows.assign(disturbed=rows["marks"].map(bool))
    if "incomplete_reason" not in rows:
        rows = rows.assign(incomplete_reason=None)
    table = rows.groupby("file", sort=False).agg(
        datetime=("datetime", "first"), commit=("commit", "first"), machine_id=("machine_id", "first"),
        series=("series", "first"), incomplete_reason=("incomplete_reason", "first"), good=("good", "first"),
        timed=("case", "size"), disturbed=("disturbed", "sum"))
    return table.sort_values("datetime", kind="stable").reset_index()


@dataclass
class Gate:
    """The newest run of one machine judged as the nightly gate judges it: by reports/verdicts.py against the last
    runs of the reference (good runs when given, else complete runs), or why it could not be."""

    machine: str
    device: str
    last: str  # the newest run's file
    reference: list[str]  # the files it was judged against, oldest first
    basis: str  # what the reference runs are, in words
    comparison: Comparison | None
    note: str = ""  # why there is no comparison
    verdicts: dict[str, Verdict] = field(init=False)

    def __post_init__(self) -> None:
        self.verdicts = {v.case: v for v in self.comparison.verdicts} if self.comparison else {}


def newest(frame: pd.DataFrame) -> pd.DataFrame:
    """Each machine's newest run (by datetime, then file name)."""
    order = frame.groupby("file", sort=False)[["machine_id", "datetime"]].first().reset_index()
    last = order.sort_values(["datetime", "file"], kind="stable").groupby("machine_id").tail(1)["file"]
    return frame[frame["file"].isin(last)]


def gate(history: pd.DataFrame, good: pd.DataFrame | None, last: int = verdicts.DEFAULT_LAST) -> list[Gate]:
    """A Gate per machine of the history (a history of loaded rows, good: the good runs' rows or None)."""
    history = without_copies(history)
    labels = series_labels(history)
    found = []
    for machine, cand in newest(history).groupby("machine_id", sort=True):
        file, when = cand["file"].iloc[0], cand["datetime"].iloc[0]
        pool = history if good is None else good
        earlier = pool[(pool["machine_id"] == machine) & (pool["datetime"] < when) & (pool["file"] != file)]
        basis = (f"the last {last} good runs of this machine before it" if good is not None
                 else f"the last {last} complete runs of this machine before it (no good runs given)")
        device = str(labels[cand.index[0]])
        if earlier.empty:
            found.append(Gate(machine, device, file, [], basis, None,
                              f"no {'good' if good is not None else 'complete'} run of this machine before it"))
            continue
        try:
            reference = verdicts.history_baseline(earlier, cand, last)
            comparison = verdicts.compare(reference, cand, last=last)
        except InputError as exc:  # every earlier run incomplete, say: the page says why instead of failing
            found.append(Gate(machine, device, file, [], basis, None, str(exc)))
            continue
        order = reference.groupby("file")["datetime"].first().sort_values(kind="stable").index
        found.append(Gate(machine, device, file, list(order), basis, comparison))
    return found


def reference_files(gates: list[Gate], history: pd.DataFrame, good: pd.DataFrame | None) -> set[str]:
    """The history's files of the runs each gate used (its reference files are good copies when good runs were
    given: matched back to the history's entries by run key)."""
    used = [f for g in gates for f in g.reference]
    if good is None:
        return set(used)
    wanted = set(run_keys(good[good["file"].isin(used)]))
    keys = run_keys(history)
    return set(keys.index[keys.isin(wanted)])


MOVED = ("slower", "faster")


def moved(gates: list[Gate]) -> list[tuple[Gate, Verdict]]:
    """The cases of the last runs that moved, worst first: slower (largest first), changes towards slower the
    gate could not judge (re-run), then faster (largest first)."""
    found = [(g, v) for g in gates for v in g.verdicts.values() if v.verdict in MOVED or v.not_judged]
    rank = {"slower": 0, "faster": 2}
    return sorted(found, key=lambda gv: (rank.get(gv[1].verdict, 1), -abs(np.log(gv[1].ratio))))


def open_steps(found: list[Trend]) -> list[Trend]:
    """The series whose latest step still holds (every series' current level is its last step's), worst first:
    the largest slowdown first, improvements last."""
    return sorted((t for t in found if t.steps), key=lambda t: -np.log(t.steps[-1].ratio))
