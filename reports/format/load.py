"""pytest-benchmark JSON -> one tidy pandas DataFrame: one row per case per run.

Reads files written by this suite and by any project using pytest-benchmark 3.x to 5.x (their `params` may be
null, `group` null, `extra_info` empty, `datetime` naive UTC before 5.0, `machine_info.cpu` three keys in 3.x and
everything py-cpuinfo says from 3.4 on), and directories such as `.benchmarks/` (every *.json below them). Our
own fields (`extra_info`, machine_info's `gpu` and `cpu_info`, the `not_measured` list) become columns when present.
Every row carries the run (file, datetime, commit), the machine and the device, so runs can be mixed freely.

A run's journal (`RESULTS.json.journal`, what is left of a run that was killed outright) is read like a results
file marked incomplete; reading either as it streams is reports/format/document.py's.

Every field read is checked against its type (reports.format.fields, through reports.format.validate). A column
means one thing: the run's columns and the loader's own (`fields.RESERVED`) are never taken by a `params` or
`extra_info` key, which is loaded as `param_KEY` or `extra_KEY` instead, and a param named like an extra_info field
the reports read (`tflops`, `stop_reason`) takes that column only where both hold the same value.

Memory stays bounded on huge files: each file is decoded entry by entry (reports.format.document), rows are kept as
one list per column, repeated short text is stored once, and raw samples (`stats.data`, the bulk of most files,
which only `compare` reads) are loaded only when asked for.

Bad input: a file named on the command line that cannot be used is an InputError (one line, exit 2); a bad file
found inside a directory, an unknown top-level field, a malformed entry or a duplicate case is a warning on
stderr and the rest is used, so one truncated nightly file does not hide a year of history.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from reports.format import fields, validate
from reports.format.document import ENTRY_LISTS, JOURNAL_SUFFIX, Document
from reports.format.errors import InputError
from reports.format.identity import identity_fields
from reports.format.validate import warn

RUN_COLUMNS = ["file", "datetime", "commit", "machine", "device", "machine_id", "group", "name", "fullname", "case",
               "status"]
# Top-level fields of pytest-benchmark 2.5 to 5.x files plus the ones this suite adds; others get a warning.
KNOWN_FIELDS = {"machine_info", "commit_info", "benchmarks", "datetime", "version", "not_measured", "incomplete",
                "incomplete_reason", "schema_version"}
RUN_TREE = validate.tree(fields.RUN)
ENTRY_TREE = validate.tree(fields.ENTRY)
ENTRY_TREE_NO_SAMPLES = validate.tree({path: f for path, f in fields.ENTRY.items() if path != "stats.data"})
STATS = {path.removeprefix("stats."): f.column for path, f in fields.ENTRY.items() if path.startswith("stats.")
         and f.column}
# extra_info fields inside an object of extra_info (telemetry.throttled -> throttled)
NESTED_EXTRA = [(*key.split("."), f.column) for key, f in fields.EXTRA.items() if "." in key and f.column]
# What a case's time is judged by: one of these that is no time makes the case invalid, not just left out.
TIMING_FIELDS = ("stats=", "stats.median=", "extra_info.round_medians_s=")
UNIQUE_TEXT = {"name", "fullname", "case"}  # columns whose text differs from row to row: not worth storing once
SHARED_TEXT_CHARS = 64  # shorter text is stored once per load (a million rows of `float32` hold one string)
# A loaded case costs up to about ROW_BYTES at the peak (tools/bench_load_speed.py: 0.85 KB for a million cases of
# a plain pytest-benchmark file, 1.3 KB for this suite's, whose entries hold more fields); more than MAX_ROWS
# cases are refused rather than filling the memory.
ROW_BYTES = 1300
MAX_ROWS = 2_000_000
_MISSING = object()


def sources(paths: list[str | Path]) -> list[tuple[Path, bool]]:
    """(file, named) pairs: files as given (named=True), directories as every *.json below them, sorted."""
    files: list[tuple[Path, bool]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):
                raise InputError(f"{path}: cannot read directory (permission denied)")
            found = sorted(results_below(path))
            if not found:
                raise InputError(f"{path}: directory holds no .json result files")
            files.extend((f, False) for f in found)
        elif path.exists():
            files.append((path, True))
        else:
            raise InputError(f"{path}: no such file or directory")
    return files


def results_below(folder: Path) -> list[Path]:
    """Every *.json and journal below a folder, symlinked folders followed (Path.rglob before Python 3.13 does not
    enter them: a machine's folder linked into the history vanished from the page), each folder once."""
    found, seen = [], set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # a link back up the tree, or two links to one folder
            dirs.clear()
            continue
        seen.add(real)
        # a folder named like a results file is found too, so that reading it fails with a warning naming it
        found += [Path(root) / f for f in [*files, *dirs] if f.endswith((".json", f".json{JOURNAL_SUFFIX}"))]
    return found


def expand(paths: list[str | Path]) -> list[Path]:
    """Files as given, directories as every *.json below them, sorted; a missing path is an InputError."""
    return [path for path, _ in sources(paths)]


def device_name(machine_info: dict) -> str:
    """The device, and with several ranks how many (`... x 16 ranks on 2 nodes`): a run under torchrun is one
    machine whose identity includes its world size, never compared as if it were one device.
    (machine_info as reports.format.validate.checked gives it: every field of its type.)"""
    name = single_device_name(machine_info)
    dist = machine_info.get("distributed", {})
    world, nodes = dist.get("world_size", 1), dist.get("nodes", 1)
    if world > 1:
        name += f" x {world} ranks" + (f" on {nodes} nodes" if nodes > 1 else "")
    return name


def single_device_name(machine_info: dict) -> str:
    """The GPU's name when the run measured a GPU, else the CPU with the threads torch used, else the node name.

    The thread count is part of a CPU device: a 1-thread and a 2-thread run of one CPU are different compute
    devices, and `compare` should not call the difference a regression.
    """
    gpu = machine_info.get("gpu", {})
    if gpu.get("name"):
        return gpu["name"]
    ours, cpu = machine_info.get("cpu_info", {}), machine_info.get("cpu", {})
    brand = ours.get("model") or cpu.get("brand_raw") or cpu.get("brand")
    if brand and ours.get("torch_threads"):
        threads = ours["torch_threads"]
        return f"{brand} ({threads} thread{'s' if threads != 1 else ''})"
    return brand or machine_info.get("processor") or machine_info.get("node") or "unknown"


def run_fields(path: Path, top: dict) -> dict:
    """The columns every row of one file shares: which run, on which machine and device (warning about the
    fields that cannot be right)."""
    bad: list[str] = []
    run = validate.checked(RUN_TREE, top, "", bad)
    if bad:
        warn(f"{path}: left out what cannot be right: {', '.join(bad)}")
    machine = run.get("machine_info", {})
    device = device_name(machine)
    columns = {"file": str(path), "datetime": run.get("datetime"), "commit": run.get("commit_info", {}).get("id"),
               "machine": machine.get("node"), "device": device} | identity_fields(machine, device)
    if run.get("incomplete") is True:  # the run was cut short: its missing cases were not measured, not removed
        columns["incomplete_reason"] = run.get("incomplete_reason") or "no reason recorded"
    return columns


def machine_info(path: Path) -> dict:
    """A file's machine_info, checked (for readers of fields the frame does not hold, such as the peaks); the
    file was loaded before, so what cannot be right was warned about then and is left out quietly now."""
    document = Document(path)
    for _ in document.entries():
        pass
    return validate.checked(RUN_TREE, document.top, "", []).get("machine_info", {})


def _column(candidates: list[str], row: dict) -> str | None:
    """The first of these column names that is neither reserved nor taken in the row."""
    return next((c for c in candidates if c not in fields.RESERVED and c not in row), None)


def entry_row(path: Path, key: str, raw: Any, samples: bool) -> dict | None:
    """One entry as the row's own columns (the run's are added by the caller), or None when it has no name."""
    bad: list[str] = []
    entry = validate.checked(ENTRY_TREE if samples else ENTRY_TREE_NO_SAMPLES, raw, "", bad) if isinstance(
        raw, dict) else {}
    extra, params = entry.get("extra_info", {}), entry.get("params", {})
    row = {column: entry.get(column) for column in ("group", "name", "fullname")}
    row["case"] = extra.get("case") or row["fullname"] or row["name"]
    where = f"{path}: case {row['case']!r:.120}"
    measured = key == "benchmarks"
    timing = [b for b in bad if b.startswith(TIMING_FIELDS)] if measured else []
    if len(bad) > len(timing):
        warn(f"{where}: left out what cannot be right: {', '.join(b for b in bad if b not in timing)}")
    if not (row["name"] or row["fullname"]):
        return None
    row["status"] = extra.get("status", "ok" if measured else "error")
    axes = []  # the columns that hold the case's axes (levers pair cases on them)
    for name, value in params.items():
        if name in fields.RESERVED or (name in fields.TYPED_EXTRA and extra.get(name, _MISSING) != value):
            column = _column([f"param_{name}"], row)
        else:
            column = name if name not in row else _column([f"param_{name}"], row)
        if column is None:
            warn(f"{where}: params.{name} left out: its column and param_{name} are both taken")
            continue
        axes.append(column)
        row[column] = value
    row["param_names"] = ",".join(axes)
    for name, value in extra.items():
        described = fields.EXTRA.get(name)
        if described is None:
            column = name if name not in fields.RESERVED and name not in row else _column([f"extra_{name}"], row)
            if column is None:
                warn(f"{where}: extra_info.{name} left out: its column and extra_{name} are both taken")
            else:
                row[column] = value
        elif described.kind is not fields.OBJECT and name not in ("case", "status") and described.column not in row:
            row[described.column] = value  # (a param of this name holding the same value has the column)
    for outer, inner, column in NESTED_EXTRA:
        value = extra.get(outer, {}).get(inner)
        if value is not None:
            row[column] = value
    if measured:
        _add_stats(row, entry, timing, where)
        if (clock := entry.get("options", {}).get("timer")) is not None:
            row["benchmark_timer"] = clock
    return row


def _add_stats(row: dict, entry: dict, timing: list[str], where: str) -> None:
    """The stats as columns; without a usable median (`timing` says what was wrong with it, if it was there), or
    with statistics that contradict each other, the case is invalid with why, never "ok" without a time."""
    columns = {STATS[name]: value for name, value in entry.get("stats", {}).items()}
    invalid = validate.contradiction(columns)
    if invalid:  # which of them is wrong cannot be told: none is shown
        columns = {k: v for k, v in columns.items() if k == "rounds"}
    elif "median_s" not in columns:
        invalid = timing[0] if timing else "stats.median is absent" if "stats" in entry else "no stats"
    elif timing:  # a round median that is no time: the case's run-to-run noise cannot be told
        invalid = timing[0]
    else:
        invalid = validate.outside_rounds(columns["median_s"], row.get("round_medians_s"))
    row.update(columns)
    if invalid:
        warn(f"{where}: {invalid}; listed as invalid")
        row.update(status="invalid", reason=invalid)


class TooManyRows(InputError):
    """More cases than a report holds in memory: refused with the numbers, whatever file it is in."""


class Columns:
    """Rows kept as one list per column: a dict per row of a million-case file would hold several times the
    memory. Short repeated text is stored once."""

    def __init__(self) -> None:
        self.data: dict[str, list] = {}
        self.length = 0
        self.shared: dict[str, str] = {}
        self.last: tuple[tuple[str, ...], list[list]] = ((), [])  # the previous row's keys and their columns

    def append(self, row: dict) -> None:
        shared = self.shared
        keys, columns = self.last
        if tuple(row) != keys:  # (most rows of a file have the keys of the row before: their columns are aligned)
            keys, columns = tuple(row), [self._column(key) for key in row]
            self.last = keys, columns
        for key, column, value in zip(keys, columns, row.values(), strict=True):
            if type(value) is str and len(value) <= SHARED_TEXT_CHARS and key not in UNIQUE_TEXT:
                value = shared.setdefault(value, value)
            column.append(value)
        self.length += 1

    def _column(self, key: str) -> list:
        """The column of this name, padded to the rows so far."""
        column = self.data.setdefault(key, [])
        column.extend([None] * (self.length - len(column)))
        return column

    def fill(self, values: dict, start: int) -> None:
        """Give rows start.. (one file's) the same value in each of these columns."""
        self.last = ((), [])
        for key, value in values.items():
            column = self.data.setdefault(key, [])
            column.extend([None] * (start - len(column)))
            column.extend([value] * (self.length - start))

    def drop_from(self, start: int) -> None:
        """Forget rows start.. (a file that turned out unreadable half way)."""
        self.last = ((), [])
        for column in self.data.values():
            del column[start:]
        self.length = start

    def frame(self, first: list[str]) -> pd.DataFrame:
        """The rows as a DataFrame, `first` columns first; each list is freed once its column is made."""
        order = [c for c in first if c in self.data] + [c for c in self.data if c not in first]
        columns = {}
        for key in order:
            values = self.data.pop(key)
            values.extend([None] * (self.length - len(values)))
            columns[key] = pd.Series(values, name=key)
            del values
        columns["datetime"] = pd.to_datetime(columns["datetime"], utc=True)
        return pd.DataFrame(columns, copy=False)


def _read_file(path: Path, table: Columns, samples: bool) -> None:
    """Every usable entry of one file appended to the table, then the run's columns for them."""
    start = table.length
    document = Document(path)
    seen: set[str] = set()
    nameless = dict.fromkeys(ENTRY_LISTS, 0)
    for key, raw in document.entries():
        row = entry_row(path, key, raw, samples)
        if row is None:
            nameless[key] += 1
        elif row["case"] in seen:
            warn(f"{path}: duplicate case {row['case']!r}; the first entry is used")
        elif table.length >= MAX_ROWS:
            raise TooManyRows(f"{path}: at its case {len(seen) + 1}, over the {MAX_ROWS} cases a report holds "
                              f"(about {ROW_BYTES * MAX_ROWS / 1e9:.1f} GB as a table); read fewer files")
        else:
            seen.add(row["case"])
            table.append(row)
    for key, count in nameless.items():
        if count:
            warn(f"{path}: {count} entries of '{key}' have no name; ignored")
    if document.mended:
        warn(f"{path}: {document.mended} lone UTF-16 surrogate(s) in its text, shown as U+FFFD")
    document.warn_problems()
    unknown = sorted(set(document.top) - KNOWN_FIELDS)
    if unknown:
        warn(f"{path}: unknown top-level field(s) {', '.join(unknown)}; ignored")
    if document.top.get("not_measured") is not None:
        warn(f"{path}: 'not_measured' is not a list; ignored")
    table.fill(run_fields(path, document.top), start)


def load(paths: list[str | Path], samples: bool = True) -> pd.DataFrame:
    """Every case of every file as one DataFrame; an InputError when nothing at all can be read.

    `samples=False` leaves the raw samples out (no `samples_s` column): every report but `compare` does without
    them, and they are most of the bytes.
    """
    table = Columns()
    for path, named in sources(paths):
        start = table.length
        try:
            _read_file(path, table, samples)
        except InputError as exc:
            table.drop_from(start)
            if named or isinstance(exc, TooManyRows):
                raise
            warn(f"{exc}; skipped")
    if not table.length:
        raise InputError(f"{', '.join(map(str, paths))}: no benchmark entries")
    return table.frame(RUN_COLUMNS)


def output_dir(path: str | Path) -> Path:
    """A directory for a report's files, created if needed; one that cannot be made is an InputError."""
    path = Path(path)
    try:
        if path.exists() and not path.is_dir():
            raise InputError(f"{path}: is a file; the output needs a directory")
        if path.is_symlink() and not path.exists():
            raise InputError(f"{path}: is a symlink that leads nowhere (a loop, or a missing target); the output "
                             "needs a directory")
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a name too long, a loop further up the path
        raise InputError(f"{path}: cannot create output directory ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write into this directory (permission denied)")
    return path


def runs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run (file) with its datetime, commit, machine and device, oldest first."""
    return frame.groupby("file", sort=False)[["datetime", "commit", "machine", "device"]].first().sort_values(
        "datetime", kind="stable").reset_index()
