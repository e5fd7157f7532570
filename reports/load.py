"""pytest-benchmark JSON -> one tidy pandas DataFrame: one row per case per run.

Reads files written by this suite and by any project using pytest-benchmark 3.x to 5.x (their `params` may be
null, `group` null, `extra_info` empty), and directories such as `.benchmarks/` (every *.json below them). Our
own fields (`extra_info`, machine_info's `gpu`, the `not_measured` list) become columns when present.
Every row carries the run (file, datetime, commit), the machine and the device, so runs can be mixed freely.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reports.errors import InputError

STAT_COLUMNS = {"median": "median_s", "mean": "mean_s", "min": "min_s", "max": "max_s", "stddev": "stddev_s",
                "iqr": "iqr_s", "rounds": "rounds"}
RUN_COLUMNS = ["file", "datetime", "commit", "machine", "device", "group", "name", "fullname", "case", "status"]


def expand(paths: list[str | Path]) -> list[Path]:
    """Files as given, directories as every *.json below them, sorted; a missing path is an InputError."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.rglob("*.json"))
            if not found:
                raise InputError(f"{path}: directory holds no .json result files")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise InputError(f"{path}: no such file or directory")
    return files


def read_json(path: Path) -> dict:
    """The parsed file, or an InputError naming the file and what is wrong with it."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path}: not a pytest-benchmark result (no 'benchmarks' list)")
    return data


def device_name(machine_info: dict) -> str:
    """The GPU's name when the run measured a GPU, else the CPU's brand, else the node name."""
    gpu = machine_info.get("gpu") or {}
    if gpu.get("name"):
        return gpu["name"]
    cpu = machine_info.get("cpu_info", {}).get("model") or (machine_info.get("cpu") or {}).get("brand_raw")
    return cpu or machine_info.get("node") or "unknown"


def _run_fields(path: Path, data: dict) -> dict:
    machine = data.get("machine_info") or {}
    commit = data.get("commit_info") or {}
    return {"file": str(path), "datetime": data.get("datetime"), "commit": commit.get("id"),
            "machine": machine.get("node"), "device": device_name(machine)}


def _row(run: dict, bench: dict, measured: bool) -> dict:
    extra = bench.get("extra_info") or {}
    params = bench.get("params") or {}
    row = dict(run)
    row.update({"group": bench.get("group"), "name": bench.get("name"), "fullname": bench.get("fullname")})
    row["case"] = extra.get("case") or bench.get("fullname") or bench.get("name")
    row["status"] = extra.get("status", "ok" if measured else "error")
    for key, value in params.items():
        row[key if key not in row else f"param_{key}"] = value if _scalar(value) else str(value)
    for key, value in extra.items():
        if key not in ("case", "status"):
            row[key if key not in row else f"extra_{key}"] = value
    stats = bench.get("stats") or {}
    for key, column in STAT_COLUMNS.items():
        if key in stats:
            row[column] = stats[key]
    if "data" in stats:
        row["samples_s"] = stats["data"]
    return row


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def rows_of(path: Path) -> list[dict]:
    """One row per measured benchmark and per case recorded as not measured."""
    data = read_json(path)
    run = _run_fields(path, data)
    rows = [_row(run, b, True) for b in data["benchmarks"] if isinstance(b, dict)]
    rows += [_row(run, b, False) for b in data.get("not_measured", []) if isinstance(b, dict)]
    return rows


def load(paths: list[str | Path]) -> pd.DataFrame:
    """Every case of every file as one DataFrame; an InputError when nothing at all can be read."""
    rows = [row for path in expand(paths) for row in rows_of(path)]
    if not rows:
        raise InputError(f"{', '.join(map(str, paths))}: no benchmark entries")
    frame = pd.DataFrame(rows)
    ordered = [c for c in RUN_COLUMNS if c in frame.columns]
    return frame[ordered + [c for c in frame.columns if c not in ordered]]
