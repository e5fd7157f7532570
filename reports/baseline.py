"""What `compare` judges the candidate against: the runs of the baseline it may use, and why the others are left out.

A baseline given as one file is that run (an A/B comparison, whatever machine it ran on: `check_devices` refuses a
different device unless asked). A baseline given as a directory is a history: the runs of the candidate's machine
(`machine_id`), oldest first, less

- the candidate itself, however it is named: a copy in the directory (the nightly keeps every run in its history
  before judging it; the README's `.benchmarks` flow autosaves it there), found by its run key (machine, datetime,
  commit) or by being the same file; a candidate among its own baseline runs makes its change part of the noise;
- runs cut short (`incomplete_reason`): what they did not reach reads as missing, what they reached may be what
  killed them;
- runs dated after the candidate: a history is judged as the nightly meets it, and a run dated later (a wrong
  clock, a file copied in from another history) cannot be a night before it. Each left-out run is named in a
  warning, so that a run never disappears from a judgement without a word.

Every night of the machine is read (`--last N` keeps the newest N): the judgement of a night rests on every night
before it (the reference, the acceptances), and `history` and the history page replay them all.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.format.errors import InputError
from reports.format.load import warn

MIN_HISTORY = 2  # baseline runs of the candidate's machine that make a history (reports/judge.py); one is a pair
DEFAULT_LAST = None  # nights of a history the judgement reads: every one, so that `history` and the page agree


def run_key(frame: pd.DataFrame) -> tuple:
    """The (machine, datetime, commit) of a one-run frame: what a run and its copies share."""
    row = frame.iloc[0]
    return tuple(None if pd.isna(row.get(c)) else row.get(c) for c in ("machine_id", "datetime", "commit"))


def same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def without_candidate(base: pd.DataFrame, cand: pd.DataFrame) -> pd.DataFrame:
    """The baseline without the candidate's own run (module docstring), with a warning naming what was left out."""
    key, file = run_key(cand), str(cand["file"].iloc[0])
    dated = key[1] is not None
    copies = [f for f, part in base.groupby("file", sort=False) if same_file(str(f), file)
              or (dated and run_key(part) == key)]
    if copies:
        warn(f"baseline: left out {len(copies)} file(s) holding the candidate's own run "
             f"({', '.join(map(str, copies))}): a run is never its own baseline")
    return base[~base["file"].isin(copies)]


class NewMachine(InputError):
    """The baseline holds no run of the candidate's machine (or none but the candidate): the gate cannot judge it
    (exit 3), which is not a usage error."""


def history(base: pd.DataFrame, cand: pd.DataFrame, last: int | None) -> pd.DataFrame:
    """The runs of a history directory the candidate is judged against (module docstring), oldest first."""
    if "incomplete_reason" in base:
        cut = base.loc[base["incomplete_reason"].notna(), "file"].unique()
        if len(cut):
            warn(f"baseline: left out {len(cut)} run(s) cut short: {', '.join(map(str, cut))}")
        base = base[base["incomplete_reason"].isna()]
    machine = cand["machine_id"].iloc[0]
    same = base[base["machine_id"] == machine]
    if same.empty:
        found = ", ".join(sorted(base["machine_id"].dropna().astype(str).unique())) or "none"
        raise NewMachine(f"baseline: no run of the candidate's machine {machine!r} (machines there: {found}); a "
                         "changed machine (a lost core, another GPU) starts a history of its own: accept its first "
                         "run with `python -m reports accept` once it is known to be right")
    when = cand["datetime"].iloc[0]
    if pd.notna(when):
        later = same.loc[same["datetime"] > when, "file"].unique()
        if len(later):
            warn(f"baseline: left out {len(later)} run(s) dated after the candidate: {', '.join(map(str, later))}")
        same = same[~same["file"].isin(later)]
    order = same.groupby("file")["datetime"].first().sort_values(kind="stable")
    return same[same["file"].isin(order.index[-last:] if last else order.index)]


def select(base: pd.DataFrame, cand: pd.DataFrame, last: int | None, directory: bool) -> pd.DataFrame:
    """The baseline rows to judge the candidate against: one file named as the baseline as given (whatever it holds:
    the user chose it), a directory (or several runs) as a history."""
    if base["file"].nunique() == 1 and not directory:
        return base
    kept = without_candidate(base, cand)
    if kept["file"].nunique() == 0:
        raise NewMachine("baseline: holds no run but the candidate's own: nothing to judge the first run of a "
                         "machine against; accept it with `python -m reports accept` once it is known to be right")
    return kept if kept["file"].nunique() == 1 else history(kept, cand, last)


def check_devices(base: pd.DataFrame, cand: pd.DataFrame, allow: bool) -> None:
    """Runs of different devices are not a regression test: refuse unless asked, and warn when asked."""
    b, c = base["device"].iloc[0], cand["device"].iloc[0]
    if b == c:
        return
    message = f"baseline ran on {b!r}, candidate on {c!r}"
    if not allow:
        raise InputError(f"{message}; pass --allow-different-devices to compare anyway")
    warn(f"{message}: differences are the hardware's, not the code's")


def describe(frame: pd.DataFrame) -> str:
    files = frame["file"].unique()
    if len(files) == 1:
        return str(files[0])
    newest = frame.sort_values("datetime", kind="stable")["file"].iloc[-1]
    return f"{len(files)} runs of machine {frame['machine_id'].iloc[0]!r}, newest {newest}"


def incomplete_reason(frame: pd.DataFrame) -> str | None:
    """Why a run was cut short (its file's `incomplete_reason`), or None for a run that finished."""
    if "incomplete_reason" not in frame:
        return None
    reasons = frame["incomplete_reason"].dropna()
    return str(reasons.iloc[0]) if len(reasons) else None
