"""Each case's level over the stored runs of each machine, and what moved: the data behind `history` and the
history section of the HTML page (reports/history_html.py, drawn by reports/plots/levels.py).

A series (`Trend`) is one case on one machine identity (`machine_id`: a GPU's UUID, so two boxes of one GPU model
are two series), its runs ordered by `datetime`. A run's level of a case is the figure the nightly gate judges
(reports/nights.py `levels`): the median of its round medians, or its median when it ran in one round, so the
picture and the gate never disagree about where a run lies. Steps are reports/judge.py's, the judgement the gate
makes night by night, replayed over the machine's complete runs with the acceptances kept beside them
(reports/accept.py): a change is a step once it has held three nights (more for a case that has come back from
longer moves), a one-night spike never is. Each run of a series keeps what the pictures mark: its marks
(reports/marks.py: contended, unconverged, throttled, above peak) and whether it was cut short (`incomplete_reason`,
or a killed night's journal; such a run is drawn, and is not a night the judgement reads).

The same run given twice (a copy in another folder) is one run: files that share machine, datetime and commit and
hold the same figures are copies, and the second is left out, so a point is never drawn twice; files that share
the key but not the figures are kept apart, with a warning (a clock that did not move, a rerun stamped alike). A
run dated more than a day after the moment the reports run (a wrong clock) cannot be placed among the nights: it
is left out with a warning rather than becoming "the newest run".

The newest run of each machine is judged as the gate judges it (`Gate`, with reports/comparison.py's `compare`
itself, over the machine's runs before it): its verdicts are the cases that moved in the last run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from reports import acceptances, judge, marks, nights, noise
from reports.comparison import Comparison, compare
from reports.format.errors import InputError
from reports.format.load import warn
from reports.verdicts import Verdict

RUN_KEY = ["machine_id", "datetime", "commit"]  # what a run and its copies share (their file names differ)
FUTURE = pd.Timedelta(days=1)  # a run dated this far after now has a wrong clock
KEPT = ("datetime", "commit", "file", "median_s", "q1_s", "q3_s", "torch_version", "level_s")
NO_GROUP = "(no group)"  # a pytest-benchmark file without groups (other projects): its cases still have a history


@dataclass(frozen=True)
class LevelShift:
    """A step of a case's series as drawn and listed: at run index `at` the level goes from `before` to `after`
    (seconds, as the judgement named it, reports/judge.py); `accepted`: why the new level is the reference (an
    improvement, or an acceptance's reason), empty while a regression is open."""

    at: int
    before: float
    after: float
    accepted: str = ""

    @property
    def ratio(self) -> float:
        return self.after / self.before


def fitted(values: np.ndarray, found: list[LevelShift]) -> np.ndarray:
    """The piecewise-constant level drawn under the data, the judgement's own (reports/judge.py): before the first
    step its level before, after each step its level after, so that the jump drawn at a step is the change its
    label names (a median of each segment's runs drew the moves the judgement did not name into it: a step
    labelled +18.6 % was drawn at -79.7 % on a real series). A series without a step: the median of its runs."""
    values = np.asarray(values, dtype=float)
    if not found:
        return np.full(len(values), float(np.nanmedian(values)))
    out = np.full(len(values), found[0].before)
    for step in found:
        out[step.at:] = step.after
    return out


@dataclass
class Trend:
    """One case's history on one machine: the runs in order with their levels, and the steps found."""

    case: str
    group: str | None
    device: str  # the series' label: the device, with the machine when one device name ran on several
    machine: str  # machine_id
    runs: pd.DataFrame  # KEPT columns present, marks, incomplete; oldest first
    steps: list[LevelShift]
    sigma: float = noise.DEFAULT_NOISE_FLOOR_PCT / 100  # the noise the judgement read off the series, log units
    reference: np.ndarray | None = None  # bool per run: the runs whose levels are the case's reference now

    @property
    def levels(self) -> np.ndarray:
        return self.runs["level_s"].to_numpy(dtype=float)

    @property
    def noise(self) -> float:
        """The series' run-to-run noise in log units, the one its nights were judged by (reports/judge.py): robust
        to a step and to a spike."""
        return self.sigma

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
        accepted = f" (accepted: {step.accepted})" if step.accepted else ""
        return (f"{(step.ratio - 1) * 100:+.1f} % at {self.run_label(step.at)}{self.software_change(step.at)}"
                f"{accepted}")

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
    """The frame without the files that repeat a run an earlier file (by name) holds (module docstring): same run
    key and same figures. Files that share the key but differ in their figures are kept, with a warning."""
    keys = run_keys(frame).sort_index()
    copies = []
    for _, files in keys.groupby(keys, sort=False):
        if len(files) < 2:
            continue
        figures = {f: frame.loc[frame["file"] == f].set_index("case")["median_s"].sort_index() for f in files.index}
        first = figures[files.index[0]]
        same = [f for f in files.index[1:] if figures[f].index.equals(first.index)
                and np.allclose(figures[f].to_numpy(dtype=float), first.to_numpy(dtype=float), rtol=1e-9,
                                equal_nan=True)]
        differ = [f for f in files.index[1:] if f not in same]
        if differ:
            warn(f"{len(differ) + 1} files share machine, datetime and commit but hold different figures: kept as "
                 f"separate runs ({', '.join(map(str, [files.index[0], *differ]))})")
        copies += same
    return frame[~frame["file"].isin(copies)]


def without_future(frame: pd.DataFrame, now: pd.Timestamp | None = None) -> pd.DataFrame:
    """The frame without runs dated more than FUTURE after now (module docstring), named in a warning."""
    now = now or pd.Timestamp.now(tz="UTC")
    when = frame["datetime"]
    if when.dt.tz is None:
        when = when.dt.tz_localize("UTC")
    late = frame.loc[when > now + FUTURE, "file"].unique()
    if len(late):
        warn(f"left out {len(late)} run(s) dated after today (a wrong clock cannot be placed among the nights): "
             f"{', '.join(map(str, late))}")
    return frame[~frame["file"].isin(late)]


def prepared(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with a usable time, copies of a run and runs from the future left out, with their level, whether
    the figure can be judged (reports/nights.py), marks, series label and whether the run was cut short."""
    frame = without_future(without_copies(frame))
    measured = frame[frame["median_s"] > 0] if "median_s" in frame else frame.iloc[:0]
    if measured.empty:
        raise InputError("history: the results hold no timed case")
    cut = measured["incomplete_reason"].notna() if "incomplete_reason" in measured else False
    kept = [c for c in dict.fromkeys(["file", *RUN_KEY, "device", "group", "case", *KEPT, "incomplete_reason"])
            if c in measured]  # the columns a history reads, in one block (a loaded frame is many)
    return measured[kept].assign(
        level_s=nights.levels(measured), usable=nights.figures_usable(measured), series=series_labels(measured),
        marks=marks.per_row(measured), incomplete=cut, group=measured["group"].fillna(NO_GROUP))


def machine_judgement(part: pd.DataFrame, min_effect_pct: float, accepted: list[acceptances.Record]
                      ) -> tuple[nights.NightMatrix, judge.Judgement]:
    """The judgement of one machine's complete runs (prepared rows), as the gate makes it night by night."""
    complete = part[~part["incomplete"]] if "incomplete" in part else part
    found = nights.matrix(complete)
    return found, nights.run(found, min_effect_pct, None, noise.DEFAULT_NOISE_FLOOR_PCT,
                             acceptances.for_nights(accepted, complete, found.files))


def case_steps(runs: pd.DataFrame, found: nights.NightMatrix, judgement: judge.Judgement,
               case: str) -> list[LevelShift]:
    """The judgement's steps of one case, placed on the case's own runs (incomplete runs among them), with the
    levels the judgement named them by (as measured, seconds)."""
    if case not in judgement.cases:
        return []
    index = {file: i for i, file in enumerate(runs["file"])}
    return [LevelShift(index[found.files[s.at]], float(np.exp(s.before)), float(np.exp(s.after)), s.accepted)
            for s in judgement.tracks.steps[judgement.index(case)] if found.files[s.at] in index]


def series(rows: pd.DataFrame, min_effect_pct: float = 5.0, accepted: list[acceptances.Record] | None = None
           ) -> list[Trend]:
    """A Trend per (machine, case) of prepared rows; cases with steps first, then by group and case."""
    columns = [c for c in KEPT if c in rows] + ["marks", "incomplete"]
    out = []
    for machine, part in rows.groupby("machine_id", sort=True):
        found, judgement = machine_judgement(part, min_effect_pct, accepted or [])
        for case, one in part.groupby("case", sort=True):
            runs = one.sort_values(["datetime", "file"], kind="stable")[columns].reset_index(drop=True)
            row = judgement.cases.index(case) if case in judgement.cases else None
            used = set() if row is None else {found.files[n] for n in
                                              np.flatnonzero(judgement.tracks.reference_nights(row))}
            out.append(Trend(case, one["group"].iloc[0], one["series"].iloc[0], machine, runs,
                             case_steps(runs, found, judgement, case),
                             nights.last_noise(judgement, row) if row is not None else judgement.floor,
                             runs["file"].isin(used).to_numpy()))
    return sorted(out, key=lambda t: (not t.steps, str(t.group), t.case, t.device))


def trends(frame: pd.DataFrame, min_effect_pct: float = 5.0, accepted: list[acceptances.Record] | None = None
           ) -> list[Trend]:
    """A Trend per (machine, case) with at least one timing; cases with steps first, then by group and case."""
    return series(prepared(frame), min_effect_pct, accepted)


def run_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run of prepared rows, oldest first: when, commit, machine, series label, why it was cut short,
    how many cases it timed and how many of them carry a mark."""
    rows = rows.assign(disturbed=rows["marks"].map(bool))
    if "incomplete_reason" not in rows:
        rows = rows.assign(incomplete_reason=None)
    table = rows.groupby("file", sort=False).agg(
        datetime=("datetime", "first"), commit=("commit", "first"), machine_id=("machine_id", "first"),
        series=("series", "first"), incomplete_reason=("incomplete_reason", "first"),
        timed=("case", "size"), disturbed=("disturbed", "sum"))
    return table.sort_values("datetime", kind="stable").reset_index()


@dataclass
class Gate:
    """The newest run of one machine judged as the nightly gate judges it: by reports/comparison.py against the
    machine's runs before it (the history compare reads), or why it could not be."""

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


def gate(history: pd.DataFrame, accepted: list[acceptances.Record] | None = None) -> list[Gate]:
    """A Gate per machine of the history (loaded rows; copies and runs from the future left out as `prepared`
    does), judged as `compare HISTORY NEWEST` judges it."""
    history = without_future(without_copies(history))
    labels = series_labels(history)
    found = []
    for machine, cand in newest(history).groupby("machine_id", sort=True):
        file, when = cand["file"].iloc[0], cand["datetime"].iloc[0]
        earlier = history[(history["machine_id"] == machine) & (history["file"] != file)
                          & ~(history["datetime"] > when)]
        device = str(labels[cand.index[0]])
        basis = "the runs of this machine before it, as the nightly gate judges them"
        if earlier.empty:
            found.append(Gate(machine, device, file, [], basis, None, "no run of this machine before it"))
            continue
        try:
            comparison = compare(earlier, cand, accepted=accepted, directory=True)
        except InputError as exc:  # every earlier run incomplete, say: the page says why instead of failing
            found.append(Gate(machine, device, file, [], basis, None, str(exc)))
            continue
        used = earlier if "incomplete_reason" not in earlier else earlier[earlier["incomplete_reason"].isna()]
        order = used.groupby("file")["datetime"].first().sort_values(kind="stable").index
        found.append(Gate(machine, device, file, list(order), basis, comparison))
    return found


def reference_files(gates: list[Gate]) -> set[str]:
    """The history's files of the runs each gate used."""
    return {f for g in gates for f in g.reference}


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
