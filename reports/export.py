"""`python -m reports export RESULTS... -o FILE.csv|FILE.parquet`: the tidy frame of reports.format.load, for
other tools.

One row per case per run, the columns of `reports.format.load` (the run, the params, the `extra_info` fields, the
stats in seconds; docs/results.md) and `marks`, how each timed figure was taken (reports/marks.py). A cell that
holds a list or an object (raw samples, round medians, telemetry) is written as its strict JSON text in both
formats, so a spreadsheet, DuckDB or pandas reads every column without knowing this suite; Parquet keeps numbers,
booleans and timestamps typed. Parquet needs pyarrow, an optional extra (`pip install -e '.[parquet]'`); without it
the command says so in one line. """

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pandas as pd

from reports import marks
from reports.format import strict_json
from reports.format.errors import InputError
from reports.format.load import load

FORMATS = {".csv": "CSV", ".parquet": "Parquet"}


def _cell(value: object) -> object:
    """A list or object as strict JSON text; anything else as it is."""
    if isinstance(value, list | tuple | dict):
        return json.dumps(strict_json.encode(value)[0], allow_nan=False, default=repr)
    return value


def flat(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every list or object cell as JSON text, and every column of mixed kinds (numbers in one
    file, text in another) as text, so that each column has one type."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype != object:
            continue
        out[column] = out[column].map(_cell)
        kinds = {type(v) for v in out[column] if v is not None and not (isinstance(v, float) and pd.isna(v))}
        if len(kinds) > 1 and not kinds <= {int, float}:
            out[column] = out[column].map(lambda v: v if v is None or (isinstance(v, float) and pd.isna(v)) else str(v))
    return out


def write(frame: pd.DataFrame, path: Path) -> Path:
    """The frame as CSV or Parquet by the file's suffix; an InputError for another suffix, a missing pyarrow or
    a folder that does not exist."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"-o {path}: expected a .csv or .parquet file name")
    if kind == "Parquet":
        try:
            importlib.import_module("pyarrow")
        except ImportError:
            raise InputError(f"-o {path}: writing Parquet needs pyarrow; install it with pip install pyarrow "
                             "(or the project's extra: pip install -e '.[parquet]'), or write .csv") from None
    if not path.parent.is_dir():
        raise InputError(f"-o {path}: folder {path.parent} does not exist")
    table = flat(frame)
    if kind == "CSV":
        table.to_csv(path, index=False)
    else:
        table.to_parquet(path, index=False)
    return path


def with_marks(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with a `marks` column: the names of each timed row's marks (reports/marks.py), comma-separated,
    empty for a clean figure and missing for a row without a time, so a spreadsheet filters the disturbed figures
    by the reports' own rule (contention counts only where the timer includes the host)."""
    timed = frame["median_s"].notna() if "median_s" in frame else pd.Series(False, index=frame.index)
    names = marks.per_row(frame[timed]).map(lambda found: ",".join(m.name for m in found))
    return pd.concat([frame, names.reindex(frame.index).rename("marks")], axis=1)


def run(args: argparse.Namespace) -> int:
    frame = with_marks(load(args.results))
    path = write(frame, Path(args.out))
    print(f"{path}: {len(frame)} rows x {len(frame.columns)} columns from {frame['file'].nunique()} run(s)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="the results as one tidy table, CSV or Parquet")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("-o", "--out", required=True, help="FILE.csv or FILE.parquet (Parquet needs pyarrow)")
    parser.set_defaults(func=run)
