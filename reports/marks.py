"""How each figure was taken: the marks every report puts on a figure that conditions of its run can have moved.

A busy CI runner or shared node measures most cases under contention (96 of 115 cases of one quick main job
here), and a table or plot that shows those figures like any other lets a reader take a disturbed figure for a
result. So every report marks a timed case with what the run recorded about it:

- `c` contended: the run flagged the case `contended` and its timer includes the host (reports/change.py,
  `host_disturbed`, the one rule: an event- or graph-timed GPU case is not moved by a busy CPU);
- `u` unconverged: `converged` is false, the samples' spread never reached the stopping rule's target;
- `t` throttled: NVML saw the GPU slow its clocks (thermal, power brake, hardware) during the case;
- `p` above peak: the figure beats a peak of its device (`tflops_above_peak`, `gbps_above_peak`,
  `above_achievable`, or a `pct_peak` or `pct_achievable` above 100 however the run flagged it): a FLOP or byte
  model, the peak or the timing is off, or the data sat in a cache;
- `x` contradictory: the case's flags disagree with its own figures (reports/format/trust.py, `contradictions`:
  `converged` beside a spread no stopping rule accepts, `contended` with no contended sample); the mark says the
  record cannot be taken at its word, whichever of the two is wrong.

Marks read the flags and the figures beside them, never the flags alone: a flag is a claim the figures can
contradict. A field the run did not record marks nothing: a mark says what is known to be wrong, not what is
unknown, and a run's `Count` says when it records no contention or convergence at all. Tables carry the symbols in
a `mark` column with a legend under the table; plots draw a marked figure hollow or hatched with a legend entry;
the HTML page counts the disturbed cases of each run at the top.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reports.format import trust

ABOVE_PEAK = ("tflops_above_peak", "gbps_above_peak", "above_achievable")
FLAGS = ("contended", "timer", "converged", "throttled", *ABOVE_PEAK)  # the fields the marks read as recorded
ABOVE_HUNDRED = "pct_above_100"  # what they read of the figures (trust.above_hundred, trust.contradictions)
COLUMN = "mark"  # the tables' column of symbols


@dataclass(frozen=True)
class Mark:
    """One condition a figure can have been taken under: its name, its symbol in tables, what it means, and when
    it applies (to a row of `readings`)."""

    name: str
    symbol: str
    meaning: str
    applies: Callable[[pd.Series], bool]


def readings(frame: pd.DataFrame) -> pd.DataFrame:
    """What the marks read of each row: the flags as recorded (None where absent) and, beside them, booleans for
    what the row's figures say of them (a percentage of a peak above 100, each contradiction of trust.py)."""
    flags = frame[[c for c in FLAGS if c in frame]].astype(object)
    return flags.where(flags.notna(), None).assign(**{ABOVE_HUNDRED: trust.above_hundred(frame)},
                                                   **trust.contradictions(frame))


def _unconverged(read: pd.Series) -> bool:
    return trust.flag(read, "converged", False)


def _throttled(read: pd.Series) -> bool:
    return trust.flag(read, "throttled")


def _above_peak(read: pd.Series) -> bool:
    return bool(read[ABOVE_HUNDRED]) or any(trust.flag(read, field) for field in ABOVE_PEAK)


def _contradictory(read: pd.Series) -> bool:
    return any(bool(read[name]) for name in trust.CONTRADICTIONS)


MARKS = (
    Mark("contended", "c", "measured while other work competed for the host, and its timer includes the host",
         trust.host_disturbed),
    Mark("unconverged", "u", "its samples' spread never reached the stopping rule's target", _unconverged),
    Mark("throttled", "t", "the GPU slowed its clocks (thermal, power brake or hardware) during the case", _throttled),
    Mark("above peak", "p", "beats a peak of its device: a FLOP or byte model, the peak or the timing is off, or "
         "the data sat in a cache (see its note)", _above_peak),
    Mark("contradictory", "x", "its flags disagree with its own figures (" + "; ".join(trust.CONTRADICTIONS.values())
         + "): which one is right cannot be told", _contradictory),
)


def of(row: pd.Series) -> tuple[Mark, ...]:
    """The marks of one row, in MARKS order."""
    return per_row(row.to_frame().T).iloc[0]


def per_row(frame: pd.DataFrame) -> pd.Series:
    """Each row's marks (a tuple, empty for a clean figure), indexed like the frame. The figures are read once
    for all rows (trust's rules are over columns), then the marks are worked out once per distinct reading (a
    handful), not row by row: a storage folder of a hundred runs holds tens of thousands of rows."""
    read = readings(frame)
    keys = list(read.itertuples(index=False, name=None))
    found = {key: tuple(mark for mark in MARKS if mark.applies(pd.Series(key, index=read.columns, dtype=object)))
             for key in dict.fromkeys(keys)}
    return pd.Series([found[key] for key in keys], index=frame.index, dtype=object)


def symbols(frame: pd.DataFrame) -> pd.Series:
    """Each row's symbols (`cu`), None for a clean figure: the tables' `mark` column."""
    return per_row(frame).map(lambda found: "".join(m.symbol for m in found) or None)


def present(found: Iterable[tuple[Mark, ...]]) -> list[Mark]:
    """The marks that occur among these rows' marks, in MARKS order."""
    seen = {mark for marks in found for mark in marks}
    return [mark for mark in MARKS if mark in seen]


def legend(marks: list[Mark]) -> str:
    """One line saying what each of these marks means (`marks: c contended: ...; u unconverged: ...`); empty for
    none, so a clean table carries no legend."""
    return "marks: " + "; ".join(f"{m.symbol} {m.name}: {m.meaning}" for m in marks) if marks else ""


def legend_of(column: pd.Series | None, width: int | None = None) -> str:
    """The legend of the marks a `mark` column of symbols shows (None: a table without one), wrapped at `width`
    (None: one line, for markdown and HTML)."""
    shown = set("".join(column.dropna().astype(str))) if column is not None else set()
    line = legend([m for m in MARKS if m.symbol in shown])
    return textwrap.fill(line, width) if line and width is not None else line


def letters(found: Iterable[tuple[Mark, ...]]) -> str:
    """The symbols of these rows' marks with their names (`c contended, u unconverged`): a picture's short key."""
    return ", ".join(f"{m.symbol} {m.name}" for m in present(found))


def plot_label(found: Iterable[tuple[Mark, ...]], drawn: str) -> str:
    """The legend entry of a plot's disturbed figures (`drawn` says how: `hollow`, `hatched`), naming the marks
    its own cases carry; empty when none is marked, so a clean plot has no such entry."""
    names = [m.name for m in present(found)]
    return f"{drawn}: disturbed ({', '.join(names)})" if names else ""


@dataclass(frozen=True)
class Count:
    """How many timed cases of one run carry each mark, and how many the run could say it about."""

    run: str
    timed: int
    disturbed: int
    by_mark: dict[str, int]
    recorded: dict[str, int]  # cases that record the field a mark reads (`contended`, `converged`)

    @property
    def text(self) -> str:
        """`44 of 45 timed cases of this run disturbed: 44 contended, 35 unconverged, 1 above peak`, with a note
        where the run does not record contention or convergence at all."""
        named = ", ".join(f"{n} {name}" for name, n in self.by_mark.items() if n)
        line = f"{self.disturbed} of {self.timed} timed cases of run {self.run} disturbed" + (f": {named}" if named
                                                                                               else "")
        silent = [what for field, what in (("contended", "host contention"), ("converged", "convergence"))
                  if not self.recorded[field]]
        return line + (f" (the run records no {' and no '.join(silent)})" if silent else "")


def counts(frame: pd.DataFrame) -> list[Count]:
    """Per run (file), in the frame's order, the count of its timed cases and of each mark among them."""
    timed = frame[frame["median_s"].notna()] if "median_s" in frame else frame.iloc[:0]
    found = []
    for file, rows in timed.groupby("file", sort=False):
        marks = per_row(rows)
        found.append(Count(Path(str(file)).name, len(rows), int(marks.map(bool).sum()),
                           {m.name: int(marks.map(lambda f, m=m: m in f).sum()) for m in MARKS},
                           {c: int(rows[c].notna().sum()) if c in rows else 0 for c in ("contended", "converged")}))
    return found
