"""`python -m reports export RESULTS... -o FILE.csv|FILE.parquet`: the tidy frame of reports.format.load, for
other tools.

One row per case per run, the columns of `reports.format.load` (the run, the params, the `extra_info` fields, the
stats in seconds; docs/results.md) and `marks`, how each timed figure was taken (reports/marks.py). A cell that
holds a list or an object (raw samples, round medians, telemetry) is written as its strict JSON text in both
formats, so a spreadsheet, DuckDB or pandas reads every column without knowing this suite; Parquet keeps numbers,
booleans and timestamps typed. Parquet needs pyarrow, an optional extra (`pip install -e '.[parquet]'`); without it
the command says so in one line.

A CSV is made safe for the spreadsheet that opens it (docs/reports.md, "export"): rows end in CRLF, as RFC 4180
has them, so a bare carriage return in a name is quoted rather than read as the end of a row; a text cell that a
spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a leading
`'`, as OWASP's guidance on CSV injection recommends, while numbers stay numbers; and a cell longer than a
spreadsheet cell holds (32,767 characters: the raw samples of a long run) is cut there, ending in a marker that
says so (the whole value is in the results file and in a Parquet export). """

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
from reports.format.outputs import refuse_inputs, write_with
from reports.format.validate import warn

FORMATS = {".csv": "CSV", ".parquet": "Parquet"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP, CSV injection: what a spreadsheet reads as a formula
CELL_LIMIT = 32_767  # characters in one cell of Excel or LibreOffice Calc
INT64 = range(-(2**63), 2**63)  # the integers a Parquet integer column holds


def _cell(value: object) -> object:
    """A list or object as strict JSON text; anything else as it is."""
    if isinstance(value, list | tuple | dict):
        return json.dumps(strict_json.encode(value)[0], allow_nan=False, default=repr)
    return value


def _text(value: object) -> object:
    """A value as text; a missing one stays missing."""
    return value if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


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
            out[column] = out[column].map(_text)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def spreadsheet_cell(value: object) -> object:
    """A text cell a spreadsheet shows as text: `'` before what it would run as a formula (a number written as
    text, `-1.5`, is read as a number, not run), and cut at CELL_LIMIT with a marker saying how long it was.
    Anything but text is left as it is."""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_STARTS) and not _is_number(value):
        value = "'" + value
    if len(value) > CELL_LIMIT:
        marker = (f" ...[cut: {len(value)} characters, more than a spreadsheet cell holds; the whole value is in "
                  "the results file and in a Parquet export]")
        value = value[:CELL_LIMIT - len(marker)] + marker
    return value


def csv_table(table: pd.DataFrame) -> pd.DataFrame:
    """The flat table with every text cell made safe for a spreadsheet (`spreadsheet_cell`)."""
    out = table.copy()
    for column in out.select_dtypes(include=["object", "string"]).columns:
        out[column] = out[column].map(spreadsheet_cell)
    return out


def _beyond_int64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value not in INT64


def parquet_table(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The flat table with each column holding an integer beyond 64 bits written as text, with a warning naming
    it: a Parquet integer column holds 64 bits (pyarrow raised OverflowError), and text keeps every digit."""
    out = table.copy()
    for column in out.columns:
        if pd.api.types.is_object_dtype(out[column]) and any(map(_beyond_int64, out[column])):
            out[column] = out[column].map(_text)
            warn(f"-o {path}: column {column!r} holds integers beyond 64 bits; written as text, every digit kept")
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
        safe = csv_table(table)
        return write_with(path, lambda temporary: safe.to_csv(temporary, index=False, lineterminator="\r\n"))
    typed = parquet_table(table, path)
    return write_with(path, lambda temporary: typed.to_parquet(temporary, index=False))


def with_marks(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with a `marks` column: the names of each timed row's marks (reports/marks.py), comma-separated,
    empty for a clean figure and missing for a row without a time, so a spreadsheet filters the disturbed figures
    by the reports' own rule (contention counts only where the timer includes the host)."""
    timed = frame["median_s"].notna() if "median_s" in frame else pd.Series(False, index=frame.index)
    names = marks.per_row(frame[timed]).map(lambda found: ",".join(m.name for m in found))
    return pd.concat([frame, names.reindex(frame.index).rename("marks")], axis=1)


def run(args: argparse.Namespace) -> int:
    refuse_inputs("-o", [args.out], args.results)
    frame = with_marks(load(args.results))
    path = write(frame, Path(args.out))
    print(f"{path}: {len(frame)} rows x {len(frame.columns)} columns from {frame['file'].nunique()} run(s)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="the results as one tidy table, CSV or Parquet")
    parser.add_argument("results", nargs="+", help="pytest-benchmark JSON files or directories of them")
    parser.add_argument("-o", "--out", required=True, help="FILE.csv or FILE.parquet (Parquet needs pyarrow)")
    parser.set_defaults(func=run)
