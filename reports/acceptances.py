"""Acceptances: a run's level taken as the new reference, kept beside a history (`python -m reports accept`,
reports/accept.py, writes them; `compare`, `history` and the history page read them).

A regression the gate found fails every night until it is fixed or accepted (reports/judge.py): after an intended
trade-off (a kernel that is slower but exact), a driver upgrade or a new machine, a person says so once, with a
reason, and the nights after it are judged against the new level. The acceptance is a line appended to
`DIR/accepted.jsonl` (JSON lines, so that it can be kept in git or beside the nightly history and read by a
person): the run it names (by machine, datetime and commit, what the run and its copies share, and by file name for
the reader), the cases it covers (`--case`, repeatable; none: every case and the whole run's shift), the reason,
who and when. `compare DIR ...`, `history DIR` and `html DIR` read the acceptances of every directory they are
given, and the history page lists them beside the steps they closed.

Accepting a run covers the change under way at that run: a step that was named, or a move not yet named (the
first night of an intended change), whose nights become the new level. It never rewrites a result file.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from reports import judge
from reports.format.errors import InputError
from reports.format.load import warn

FILE = "accepted.jsonl"


@dataclass(frozen=True)
class Record:
    """One acceptance: the run whose level becomes the reference, for which cases (empty: all), and why."""

    machine: str
    datetime: str | None
    commit: str | None
    file: str
    reason: str
    cases: tuple[str, ...] = ()
    accepted_at: str = ""
    by: str = ""

    def key(self) -> tuple:
        return self.machine, pd.Timestamp(self.datetime) if self.datetime else None, self.commit


def read(folder: Path) -> list[Record]:
    """The acceptances kept in a history folder (none where it has no FILE); a line that is not one is left out
    with a warning naming it."""
    path = folder / FILE
    if not path.is_file():
        return []
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            found.append(Record(**{**raw, "cases": tuple(raw.get("cases") or ())}))
        except (ValueError, TypeError) as exc:
            warn(f"{path}: line {number} is not an acceptance ({exc}); left out")
    return found


def of_paths(paths: list[str | Path]) -> list[Record]:
    """The acceptances of every directory among `paths` (result files carry none)."""
    return [r for p in paths if Path(p).is_dir() for r in read(Path(p))]


def run_key(frame: pd.DataFrame, file: str) -> tuple:
    return key_of(frame[frame["file"] == file].iloc[0])


def key_of(row: pd.Series) -> tuple:
    """What an acceptance names its run by, read off one of the run's rows."""
    when = row["datetime"] if pd.notna(row["datetime"]) else None
    return row["machine_id"], when, row["commit"] if isinstance(row.get("commit"), str) else None


def for_nights(records: list[Record], frame: pd.DataFrame, files: list[str]) -> list[judge.Acceptance]:
    """The acceptances of these nights (files in night order), by night index, for reports/judge.py."""
    if not records:
        return []
    first = frame.drop_duplicates("file").set_index("file", drop=False)  # each night's first row, found at once
    keys = {key_of(first.loc[f]): i for i, f in enumerate(files)}
    return [judge.Acceptance(keys[r.key()], r.reason, frozenset(r.cases) or None) for r in records
            if r.key() in keys]


def of_run(records: list[Record], frame: pd.DataFrame) -> Record | None:
    """The acceptance of a one-run frame's own run, if any (the newest one)."""
    key = run_key(frame, frame["file"].iloc[0])
    return next((r for r in reversed(records) if r.key() == key), None)


def record(run: pd.DataFrame, reason: str, cases: list[str]) -> Record:
    """The acceptance of a loaded run (one file) for these cases; unknown cases are an InputError."""
    known = set(run["case"])
    unknown = [c for c in cases if c not in known]
    if unknown:
        raise InputError(f"--case {unknown[0]!r}: not a case of {run['file'].iloc[0]} ({len(known)} cases)")
    machine, when, commit = run_key(run, run["file"].iloc[0])
    return Record(str(machine), when.isoformat() if when is not None else None, commit,
                  Path(str(run["file"].iloc[0])).name, reason, tuple(cases),
                  datetime.now(timezone.utc).isoformat(timespec="seconds"), getpass.getuser())


def append(folder: Path, found: Record) -> Path:
    path = folder / FILE
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(found)) + "\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot write the acceptance ({exc.strerror})") from None
    return path
