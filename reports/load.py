"""pytest-benchmark JSON -> one tidy pandas DataFrame: one row per case per run.

Reads files written by this suite and by any project using pytest-benchmark 3.x to 5.x (their `params` may be
null, `group` null, `extra_info` empty, `datetime` naive UTC before 5.0, `machine_info.cpu` three keys in 3.x and
everything py-cpuinfo says from 3.4 on), and directories such as `.benchmarks/` (every *.json below them). Our
own fields (`extra_info`, machine_info's `gpu` and `cpu_info`, the `not_measured` list) become columns when present.
Every row carries the run (file, datetime, commit), the machine and the device, so runs can be mixed freely.

A run's journal (`RESULTS.json.journal`, one JSON line per finished case, which the suite's plugin writes as
it goes and removes once the results file is whole) is read like a results file marked incomplete: it is what
is left of a run that was killed outright.

Bad input: a file named on the command line that cannot be used is an InputError (one line, exit 2); a bad file
found inside a directory, an unknown top-level field, a malformed entry or a duplicate case is a warning on
stderr and the rest is used, so one truncated nightly file does not hide a year of history.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from reports import validate
from reports.errors import InputError
from reports.identity import identity_fields
from reports.validate import warn

RUN_COLUMNS = ["file", "datetime", "commit", "machine", "device", "machine_id", "group", "name", "fullname", "case",
               "status"]
JOURNAL_SUFFIX = ".journal"
# extra_info fields whose name is a run column's: `device` is torch's device string (cuda:0), the run's `device`
# column the device's name (NVIDIA H200), by which every report groups.
RENAMED_EXTRA = {"device": "torch_device"}
# Top-level fields of pytest-benchmark 2.5 to 5.x files plus the one this suite adds; others get a warning.
KNOWN_FIELDS = {"machine_info", "commit_info", "benchmarks", "datetime", "version", "not_measured", "incomplete",
                "incomplete_reason"}


def sources(paths: list[str | Path]) -> list[tuple[Path, bool]]:
    """(file, named) pairs: files as given (named=True), directories as every *.json below them, sorted."""
    files: list[tuple[Path, bool]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):
                raise InputError(f"{path}: cannot read directory (permission denied)")
            found = sorted([*path.rglob("*.json"), *path.rglob(f"*.json{JOURNAL_SUFFIX}")])
            if not found:
                raise InputError(f"{path}: directory holds no .json result files")
            files.extend((f, False) for f in found)
        elif path.exists():
            files.append((path, True))
        else:
            raise InputError(f"{path}: no such file or directory")
    return files


def expand(paths: list[str | Path]) -> list[Path]:
    """Files as given, directories as every *.json below them, sorted; a missing path is an InputError."""
    return [path for path, _ in sources(paths)]


def read_json(path: Path) -> dict:
    """The parsed file, or an InputError naming the file and what is wrong with it (see reports.validate)."""
    data = read_journal(path) if path.name.endswith(JOURNAL_SUFFIX) else validate.read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path}: not a pytest-benchmark result (no 'benchmarks' list)")
    return data


def read_journal(path: Path) -> dict:
    """A journal as the results file its run did not get to write, marked incomplete.

    The header line holds the run's machine and commit; each other line one case. A case measured in rounds has
    a line after each round and its last line is its entry (a later line of the same `fullname` supersedes an
    earlier one). A line cut short by the kill is left out with a warning.
    """
    lines = validate.decode(path, validate.read_bytes(path)).splitlines()
    if not lines:
        raise InputError(f"{path}: file is empty")
    header = validate.parse_json(path, lines[0])
    if not isinstance(header, dict) or "journal" not in header:
        raise InputError(f"{path}: not a results journal (no header line)")
    data = {key: header.get(key) for key in ("machine_info", "commit_info", "datetime", "version")}
    data.update(benchmarks=[], not_measured=[], incomplete=True,
                incomplete_reason="the run ended without writing its results; read from its journal")
    latest: dict[object, tuple[str, object]] = {}  # by fullname (or line number when it has none): last wins
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = validate.parse_json(path, line)
        except InputError as exc:
            warn(f"{exc} (line {number}); left out")
            continue
        for key in ("benchmarks", "not_measured"):
            if isinstance(record, dict) and key in record:
                name = record[key].get("fullname") if isinstance(record[key], dict) else None
                latest[name if isinstance(name, str) else number] = (key, record[key])
    for key, entry in latest.values():
        data[key].append(entry)
    return data


def device_name(machine_info: dict) -> str:
    """The device, and with several ranks how many (`... x 16 ranks on 2 nodes`): a run under torchrun is one
    machine whose identity includes its world size, never compared as if it were one device."""
    name = single_device_name(machine_info)
    dist = machine_info.get("distributed") if isinstance(machine_info.get("distributed"), dict) else {}
    world, nodes = dist.get("world_size") or 1, dist.get("nodes") or 1
    if world > 1:
        name += f" x {world} ranks" + (f" on {nodes} nodes" if nodes > 1 else "")
    return name


def single_device_name(machine_info: dict) -> str:
    """The GPU's name when the run measured a GPU, else the CPU with the threads torch used, else the node name.

    The thread count is part of a CPU device: a 1-thread and a 2-thread run of one CPU are different compute
    devices, and `compare` should not call the difference a regression.
    """
    gpu = machine_info.get("gpu") or {}
    if gpu.get("name"):
        return gpu["name"]
    ours = machine_info.get("cpu_info") or {}
    cpu = machine_info.get("cpu") if isinstance(machine_info.get("cpu"), dict) else {}
    brand = ours.get("model") or cpu.get("brand_raw") or cpu.get("brand")
    if brand and ours.get("torch_threads"):
        threads = ours["torch_threads"]
        return f"{brand} ({threads} thread{'s' if threads != 1 else ''})"
    return brand or machine_info.get("processor") or machine_info.get("node") or "unknown"


def run_fields(path: Path, data: dict) -> dict:
    """The columns every row of one file shares: which run, on which machine and device."""
    machine = data.get("machine_info") if isinstance(data.get("machine_info"), dict) else {}
    commit = data.get("commit_info") if isinstance(data.get("commit_info"), dict) else {}
    device = device_name(machine)
    fields = {"file": str(path), "datetime": data.get("datetime"), "commit": commit.get("id"),
              "machine": machine.get("node"), "device": device} | identity_fields(machine, device)
    if data.get("incomplete") is True:  # the run was cut short: its missing cases were not measured, not removed
        reason = data.get("incomplete_reason")
        fields["incomplete_reason"] = reason if isinstance(reason, str) and reason else "no reason recorded"
    return fields


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _row(path: Path, run: dict, bench: dict, measured: bool) -> dict:
    extra = bench.get("extra_info") if isinstance(bench.get("extra_info"), dict) else {}
    params = bench.get("params") if isinstance(bench.get("params"), dict) else {}
    row = dict(run)
    row.update({key: validate.text_field(bench.get(key)) for key in ("group", "name", "fullname")})
    row["case"] = validate.text_field(extra.get("case") or bench.get("fullname") or bench.get("name"))
    status = extra.get("status", "ok" if measured else "error")
    row["status"] = validate.text_field(status)
    where = f"{path}: case {row['case']!r:.120}"
    axes = []  # the columns that hold the case's axes (levers pair cases on them); a param named like a run
    for key, value in params.items():  # column (`device`, `file`) keeps its own column, never the run's
        column = str(key) if str(key) not in row else f"param_{key}"
        axes.append(column)
        row[column] = value if _scalar(value) else str(value)
    row["param_names"] = ",".join(axes)
    for key, value in validate.figures(where, extra).items():
        if key not in ("case", "status"):
            key = RENAMED_EXTRA.get(key, key)
            row[key if key not in row else f"extra_{key}"] = value
    telemetry = extra.get("telemetry")
    if isinstance(telemetry, dict):
        if "throttled" in telemetry:
            row["throttled"] = bool(telemetry["throttled"])
        if isinstance(telemetry.get("sm_clock_median_mhz"), int | float):
            row["sm_clock_mhz"] = float(telemetry["sm_clock_median_mhz"])
    if measured:
        columns, invalid = validate.stats_columns(where, bench.get("stats"))
        row.update(columns)
        if invalid:  # listed with what was wrong, never as "ok" without a time
            warn(f"{where}: {invalid}; listed as invalid")
            row.update(status="invalid", reason=invalid)
    return row


def _entries(path: Path, data: dict, key: str) -> list[dict]:
    """The usable entries of one list; malformed ones are warned about and left out."""
    entries = data.get(key) or []
    if not isinstance(entries, list):
        warn(f"{path}: '{key}' is not a list; ignored")
        return []
    good = [e for e in entries if isinstance(e, dict) and (e.get("name") or e.get("fullname"))]
    if len(good) < len(entries):
        warn(f"{path}: {len(entries) - len(good)} entries of '{key}' have no name; ignored")
    return good


def _unique(path: Path, rows: list[dict]) -> list[dict]:
    """The first row of each case; a case listed twice in one run is a warning, not two measurements."""
    seen: set[str] = set()
    kept = []
    for row in rows:
        if row["case"] in seen:
            warn(f"{path}: duplicate case {row['case']!r}; the first entry is used")
            continue
        seen.add(row["case"])
        kept.append(row)
    return kept


def rows_of(path: Path) -> list[dict]:
    """One row per measured benchmark and per case recorded as not measured."""
    data = read_json(path)
    unknown = sorted(set(data) - KNOWN_FIELDS)
    if unknown:
        warn(f"{path}: unknown top-level field(s) {', '.join(unknown)}; ignored")
    run = run_fields(path, data)
    rows = [_row(path, run, b, True) for b in _entries(path, data, "benchmarks")]
    rows += [_row(path, run, b, False) for b in _entries(path, data, "not_measured")]
    return _unique(path, rows)


def _timestamps(values: pd.Series) -> pd.Series:
    """ISO datetimes as UTC timestamps; naive ones (pytest-benchmark before 5.0 wrote utcnow()) are UTC."""
    return pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")


def load(paths: list[str | Path]) -> pd.DataFrame:
    """Every case of every file as one DataFrame; an InputError when nothing at all can be read."""
    rows: list[dict] = []
    for path, named in sources(paths):
        try:
            rows.extend(rows_of(path))
        except InputError as exc:
            if named:
                raise
            warn(f"{exc}; skipped")
    if not rows:
        raise InputError(f"{', '.join(map(str, paths))}: no benchmark entries")
    frame = pd.DataFrame(rows)
    frame["datetime"] = _timestamps(frame["datetime"])
    ordered = [c for c in RUN_COLUMNS if c in frame.columns]
    return frame[ordered + [c for c in frame.columns if c not in ordered]]


def output_dir(path: str | Path) -> Path:
    """A directory for a report's files, created if needed; one that cannot be made is an InputError."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: is a file; the output needs a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot create output directory ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write into this directory (permission denied)")
    return path


def runs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run (file) with its datetime, commit, machine and device, oldest first."""
    return frame.groupby("file", sort=False)[["datetime", "commit", "machine", "device"]].first().sort_values(
        "datetime", kind="stable").reset_index()
