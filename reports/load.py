"""pytest-benchmark JSON -> one tidy pandas DataFrame: one row per case per run.

Reads files written by this suite and by any project using pytest-benchmark 3.x to 5.x (their `params` may be
null, `group` null, `extra_info` empty, `datetime` naive UTC before 5.0, `machine_info.cpu` three keys in 3.x and
everything py-cpuinfo says from 3.4 on), and directories such as `.benchmarks/` (every *.json below them). Our
own fields (`extra_info`, machine_info's `gpu` and `cpu_info`, the `not_measured` list) become columns when present.
Every row carries the run (file, datetime, commit), the machine and the device, so runs can be mixed freely.

Bad input: a file named on the command line that cannot be used is an InputError (one line, exit 2); a bad file
found inside a directory, an unknown top-level field, a malformed entry or a duplicate case is a warning on
stderr and the rest is used, so one truncated nightly file does not hide a year of history.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from reports.errors import InputError
from reports.identity import identity_fields

STAT_COLUMNS = {"median": "median_s", "mean": "mean_s", "min": "min_s", "max": "max_s", "stddev": "stddev_s",
                "iqr": "iqr_s", "q1": "q1_s", "q3": "q3_s", "rounds": "rounds"}
RUN_COLUMNS = ["file", "datetime", "commit", "machine", "device", "machine_id", "group", "name", "fullname", "case",
               "status"]
# Top-level fields of pytest-benchmark 2.5 to 5.x files plus the one this suite adds; others get a warning.
KNOWN_FIELDS = {"machine_info", "commit_info", "benchmarks", "datetime", "version", "not_measured"}


def warn(message: str) -> None:
    """A problem the report can work around: one line on stderr, the report goes on."""
    print(f"warning: {message}", file=sys.stderr)


def sources(paths: list[str | Path]) -> list[tuple[Path, bool]]:
    """(file, named) pairs: files as given (named=True), directories as every *.json below them, sorted."""
    files: list[tuple[Path, bool]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.rglob("*.json"))
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
    """The parsed file, or an InputError naming the file and what is wrong with it."""
    try:
        text = path.read_bytes().decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON, truncated? ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path}: not a pytest-benchmark result (no 'benchmarks' list)")
    return data


def device_name(machine_info: dict) -> str:
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
    return {"file": str(path), "datetime": data.get("datetime"), "commit": commit.get("id"),
            "machine": machine.get("node"), "device": device} | identity_fields(machine, device)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _row(run: dict, bench: dict, measured: bool) -> dict:
    extra = bench.get("extra_info") if isinstance(bench.get("extra_info"), dict) else {}
    params = bench.get("params") if isinstance(bench.get("params"), dict) else {}
    row = dict(run)
    row.update({"group": bench.get("group"), "name": bench.get("name"), "fullname": bench.get("fullname")})
    row["case"] = extra.get("case") or bench.get("fullname") or bench.get("name")
    row["status"] = extra.get("status", "ok" if measured else "error")
    row["param_names"] = ",".join(params)  # which columns are the case's axes (levers pair cases on them)
    for key, value in params.items():
        row[key if key not in row else f"param_{key}"] = value if _scalar(value) else str(value)
    for key, value in extra.items():
        if key not in ("case", "status"):
            row[key if key not in row else f"extra_{key}"] = value
    telemetry = extra.get("telemetry")
    if isinstance(telemetry, dict) and "throttled" in telemetry:
        row["throttled"] = bool(telemetry["throttled"])
    stats = bench.get("stats") if isinstance(bench.get("stats"), dict) else {}
    for key, column in STAT_COLUMNS.items():
        if isinstance(stats.get(key), int | float):
            row[column] = stats[key]
    if isinstance(stats.get("data"), list):
        row["samples_s"] = stats["data"]
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
    rows = [_row(run, b, True) for b in _entries(path, data, "benchmarks")]
    rows += [_row(run, b, False) for b in _entries(path, data, "not_measured")]
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
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot create output directory ({exc.strerror or exc})") from None
    return path


def runs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run (file) with its datetime, commit, machine and device, oldest first."""
    return frame.groupby("file", sort=False)[["datetime", "commit", "machine", "device"]].first().sort_values(
        "datetime", kind="stable").reset_index()
