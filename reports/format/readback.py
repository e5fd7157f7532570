"""A program reading back the results file of a pytest run it started (the GPU check's steps, a sweep of advise).

The run may have ended any way: whole, stopped at a timeout (the file is written and marked incomplete), killed
outright (only its journal `NAME.json.journal` is left), or not at all (no file). `read_run` takes whichever is
there through `reports.format.load` (the one checked reader: regular files only, bounded size, typed figures, journals
read as incomplete runs) and keeps, beside the cases, the run's `machine_info`, why it is incomplete, the
warnings the load printed, and which file was read, so every figure taken from it can say where it came from.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reports.format import document, load
from reports.format.errors import InputError


@dataclass
class RunRecord:
    """The cases of one results file (one dict per case, measured or not, with reports.format.load's columns and no
    missing values), its machine_info, and where it came from."""

    path: Path
    cases: list[dict[str, Any]]
    machine_info: dict[str, Any]
    incomplete_reason: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        """The file's name, with what is wrong with it: `matmul.json`, `matmul.json.journal (incomplete: ...)`."""
        notes = []
        if self.incomplete_reason:
            notes.append(f"incomplete: {self.incomplete_reason}")
        if self.warnings:
            notes.append(f"{len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}: "
                         f"{self.warnings[0].removeprefix('warning: ')[:120]}")
        return self.path.name + (f" ({'; '.join(notes)})" if notes else "")

    def measured(self) -> list[dict[str, Any]]:
        """The cases with a usable time (status ok and a median)."""
        return [c for c in self.cases if c.get("status") == "ok" and "median_s" in c]


def _present(value: Any) -> bool:
    """Whether a frame cell holds a value (pandas fills the columns a case lacks with NaN or None)."""
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per row of a loaded frame, without the cells the case did not have, and with Python values
    (pandas hands out numpy scalars: `np.True_ is True` is false, `isinstance(np.int64(1), int)` too)."""
    return [{k: v.item() if isinstance(v, np.generic) else v for k, v in row.items() if _present(v)}
            for row in frame.to_dict("records")]


def results_path(path: Path) -> Path:
    """The file to read for results written to `path`: itself, else the journal its killed run left."""
    if path.exists():
        return path
    journal = path.with_name(path.name + document.JOURNAL_SUFFIX)
    if journal.exists():
        return journal
    raise InputError(f"{path}: not written (the run did not start, failed before its first case, or was left out)")


def read_run(path: str | Path) -> RunRecord:
    """The run whose results were written to `path` (or its journal); an InputError (one line, naming the file)
    when neither can be read. A run that recorded no case at all has an empty `cases`."""
    source = results_path(Path(path))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        data = document.read_json(source)
        cases = records(load.load([source])) if data.get("benchmarks") or data.get("not_measured") else []
    machine = data.get("machine_info") if isinstance(data.get("machine_info"), dict) else {}
    reason = data.get("incomplete_reason") if data.get("incomplete") is True else None
    if data.get("incomplete") is True and not reason:
        reason = "no reason recorded"
    return RunRecord(source, cases, machine, reason, [line for line in stderr.getvalue().splitlines() if line.strip()])
