"""The edge of reports/: every byte read from disk is checked here once, before any report sees it.

Results and traces come from other machines, other projects and truncated nightly jobs. What cannot be used is
an InputError (one line naming the file, exit 2); what can be worked around is a warning naming the file and
the case, and the value that cannot be right is left out rather than shown:

- only regular files are opened (a FIFO named *.json would block forever, a link to /dev/zero would fill the
  memory), and no file over MAX_FILE_BYTES is read;
- JSON nested deeper than MAX_DEPTH, integers too long for Python's int parser, gzip-compressed or UTF-16 text
  are named as such;
- a time must be a positive finite number of seconds (a zero, negative, NaN or infinite median is not a
  measurement), raw samples a list of them; a figure (`tflops`, `gbps`, ...) must be a number.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

from reports.errors import InputError

MAX_FILE_BYTES = 1 << 30  # results with a million raw samples per case are ~20 MB; traces of a few hundred MB
MAX_DEPTH = 64  # pytest-benchmark files nest 5 deep, Kineto traces 4
MAX_INT_DIGITS = 300  # beyond a float's range; longer integers are parsed as floats (inf), then rejected
GZIP_MAGIC = b"\x1f\x8b"

# Stats that are durations (must be > 0) and spreads (must be >= 0), with the frame column each becomes.
TIME_STATS = {"median": "median_s", "mean": "mean_s", "min": "min_s", "max": "max_s", "q1": "q1_s", "q3": "q3_s"}
SPREAD_STATS = {"stddev": "stddev_s", "iqr": "iqr_s"}
# extra_info fields that are figures: a number or absent. rel_iqr and error_rel may be infinite (a spread that
# never settled, an overflowed result); the others must be finite and not negative.
FIGURES = {"flops", "bytes", "tflops", "gbps", "pct_peak", "peak_mem_bytes", "tokens_per_s", "samples_per_s", "mfu",
           "compile_s", "enqueue_s", "device_s", "step_wall_s", "device_busy_s", "pct_achievable", "algbw_gbps",
           "busbw_gbps", "bytes_per_param"}
MAY_BE_INFINITE = {"rel_iqr", "error_rel"}


def warn(message: str) -> None:
    """A problem the report can work around: one line on stderr, the report goes on."""
    print(f"warning: {message}", file=sys.stderr)


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is an InputError naming what it is."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open itself
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file ({kind_of(info.st_mode)})")
        if info.st_size > limit:
            raise InputError(f"{path}: {info.st_size} bytes, over the {limit} bytes a report reads")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path}: grew past the {limit} bytes a report reads while being read")
    return data


def check_regular(path: Path) -> None:
    """An InputError unless path is a regular file (for readers that open the file themselves)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: not a regular file ({kind_of(mode)})")


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def decode(path: Path, data: bytes) -> str:
    """UTF-8 text (a UTF-8 byte order mark is accepted); gzip and UTF-16 are named, not misread."""
    if data.startswith(GZIP_MAGIC):
        raise InputError(f"{path}: gzip-compressed; decompress it first (gunzip)")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{path}: UTF-16 text; results files are UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _int(text: str) -> int | float:
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


def parse_json(path: Path, text: str) -> Any:
    """The parsed document; malformed, too deep or too long numbers are an InputError naming the file."""
    try:
        data = json.loads(text, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON, truncated? ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if depth(data) > MAX_DEPTH:
        raise InputError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    return data


def depth(value: Any) -> int:
    """How deep containers nest in a parsed document (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, level)
        if level <= MAX_DEPTH:
            stack.extend((child, level + 1) for child in item if isinstance(child, dict | list))
    return deepest


def read_json(path: Path) -> Any:
    """A JSON file, through every check above."""
    text = decode(path, read_bytes(path))
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    return parse_json(path, text)


def number(value: Any) -> float | None:
    """A real number as float, or None for anything else (bools, strings, lists, integers too large)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def positive_time(value: Any) -> float | None:
    x = number(value)
    return x if x is not None and math.isfinite(x) and x > 0 else None


def stats_columns(where: str, stats: Any) -> tuple[dict[str, Any], str | None]:
    """The usable stats of one entry as frame columns, and why the entry has no usable median (or None).

    Columns that cannot be right are left out, with one warning naming the entry and the fields.
    """
    if not isinstance(stats, dict):
        return {}, "no stats" if stats is None else f"stats is a {type(stats).__name__}, not an object"
    columns: dict[str, Any] = {}
    bad = []
    for key, column in TIME_STATS.items():
        if key in stats:
            value = positive_time(stats[key])
            if value is None:
                bad.append(f"{key}={stats[key]!r:.40}")
            else:
                columns[column] = value
    for key, column in SPREAD_STATS.items():
        value = number(stats.get(key))
        if key in stats and (value is None or not math.isfinite(value) or value < 0):
            bad.append(f"{key}={stats[key]!r:.40}")
        elif value is not None:
            columns[column] = value
    rounds = number(stats.get("rounds"))
    if rounds is not None and math.isfinite(rounds) and rounds >= 1:
        columns["rounds"] = int(rounds)
    data = stats.get("data")
    if data is not None:
        if isinstance(data, list) and data and all(positive_time(x) is not None for x in data):
            columns["samples_s"] = [float(x) for x in data]
        else:
            bad.append("data (not a list of positive finite times)")
    if bad:
        warn(f"{where}: left out stats that cannot be right: {', '.join(bad)}")
    if "median_s" not in columns:
        median = stats.get("median", "absent")
        return columns, f"stats.median is {median!r:.40}, not a positive finite time"
    return columns, None


def figures(where: str, extra: dict[str, Any]) -> dict[str, Any]:
    """extra_info with figures that are not numbers (or are negative, or not finite where they must be) left out."""
    kept, bad = {}, []
    for key, value in extra.items():
        if key in FIGURES or key in MAY_BE_INFINITE:
            x = number(value)
            ok = x is not None and not math.isnan(x) and (x >= 0 if key in FIGURES else True) and (
                math.isfinite(x) or key in MAY_BE_INFINITE)
            if not ok and value is not None:
                bad.append(f"{key}={value!r:.40}")
                continue
        kept[key] = value
    if bad:
        warn(f"{where}: left out figures that cannot be right: {', '.join(bad)}")
    return kept


def text_field(value: Any) -> str | None:
    """A name-like field as a string (None stays None): a number or a list where a name belongs is shown as text."""
    return value if value is None or isinstance(value, str) else json.dumps(value)[:200]
