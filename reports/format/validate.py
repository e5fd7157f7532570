"""The edge of reports/: every byte read from disk is checked here once, before any report sees it.

Results and traces come from other machines, other projects and truncated nightly jobs. What cannot be used is
an InputError (one line naming the file, exit 2); what can be worked around is a warning naming the file and
the field (and the case), and the value that cannot be right is left out rather than shown:

- only regular files are opened (a FIFO named *.json would block forever, a link to /dev/zero would fill the
  memory), and no file over MAX_FILE_BYTES is read;
- JSON nested deeper than MAX_DEPTH, integers too long for Python's int parser, gzip-compressed or UTF-16 text
  are named as such; text holding a lone UTF-16 surrogate (`"\\ud800"`, which no terminal, file name or page
  can encode) is shown with U+FFFD in its place;
- every field a report reads is checked against its type in reports.format.fields (`checked`): a time within
  a picosecond and 11 days, a figure a number, a flag true or false, a count a whole number, a date a date;
- a measured entry's statistics must agree with each other (min <= q1 <= median <= q3 <= max, the mean within
  min and max): statistics that contradict each other are not shown, the case is `invalid` with why.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import IO, Any

from reports.format.errors import InputError
from reports.format.fields import Field

MAX_FILE_BYTES = 1 << 30  # results with a million raw samples per case are ~20 MB; traces of a few hundred MB
MAX_DEPTH = 64  # pytest-benchmark files nest 5 deep, Kineto traces 4
MAX_INT_DIGITS = 300  # beyond a float's range; longer integers are parsed as floats (inf), then rejected
GZIP_MAGIC = b"\x1f\x8b"
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # JSON's escape of a UTF-16 surrogate (valid pairs too)
SURROGATE = re.compile("[\ud800-\udfff]")
# Order the statistics of one sample must have: each of these at most the next.
ORDER = (("min_s", "q1_s"), ("q1_s", "median_s"), ("median_s", "q3_s"), ("q3_s", "max_s"), ("min_s", "median_s"),
         ("median_s", "max_s"), ("min_s", "mean_s"), ("mean_s", "max_s"))
CONTAINERS = frozenset({dict, list})
SLACK = 1e-9  # relative: statistics written as decimal text round in their last digits


def warn(message: str) -> None:
    """A problem the report can work around: one line on stderr, the report goes on."""
    print(f"warning: {message}", file=sys.stderr)


def _open_regular(path: Path, limit: int) -> int:
    """A read-only descriptor of a regular file of at most `limit` bytes; anything else is an InputError."""
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
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is an InputError naming what it is."""
    fd = _open_regular(path, limit)
    try:
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path}: grew past the {limit} bytes a report reads while being read")
    return data


def open_text(path: Path, limit: int = MAX_FILE_BYTES) -> IO[str]:
    """A regular file of at most `limit` bytes as UTF-8 text to read in pieces (a UTF-8 byte order mark is
    skipped); gzip and UTF-16 are named, an empty file is an InputError."""
    fd = _open_regular(path, limit)
    raw = os.fdopen(fd, "rb")
    try:
        head = raw.read(4)
        _check_encoding(path, head)
        if not head:
            raise InputError(f"{path}: file is empty")
        raw.seek(0)
    except OSError as exc:
        raw.close()
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except InputError:
        raw.close()
        raise
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict")


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


def _check_encoding(path: Path, head: bytes) -> None:
    if head.startswith(GZIP_MAGIC):
        raise InputError(f"{path}: gzip-compressed; decompress it first (gunzip)")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{path}: UTF-16 text; results files are UTF-8")


def decode(path: Path, data: bytes) -> str:
    """UTF-8 text (a UTF-8 byte order mark is accepted); gzip and UTF-16 are named, not misread."""
    _check_encoding(path, data[:4])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _int(text: str) -> int | float:
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


# Integers are parsed by Python's own int unless one is too long for it (over sys.get_int_max_str_digits(), 4300 by
# default, or any length when that limit is off: then every integer goes through _int, and none costs quadratic time).
BIG_NUMBERS = json.JSONDecoder(parse_int=_int)
DECODER = json.JSONDecoder() if 0 < sys.get_int_max_str_digits() <= 4300 else BIG_NUMBERS


def parse_json(path: Path, text: str) -> Any:
    """The parsed document; malformed, too deep or too long numbers are an InputError naming the file."""
    try:
        data = BIG_NUMBERS.decode(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON, truncated? ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    return checked_depth(path, data, 0, text)


def checked_depth(path: Path, value: Any, level: int, text: str, start: int = 0, end: int | None = None) -> Any:
    """value, decoded from text[start:end], unless it nests deeper than MAX_DEPTH levels below `level` (an
    InputError). The walk is spared when the text opens too few brackets to nest that deep."""
    if text.count("[", start, end) + text.count("{", start, end) + level > MAX_DEPTH and depth(value) + level > \
            MAX_DEPTH:
        raise InputError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    return value


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
        if level <= MAX_DEPTH and not CONTAINERS.isdisjoint(map(type, item)):  # (a list of a million floats is
            stack.extend((child, level + 1) for child in item if isinstance(child, dict | list))  # scanned in C)
    return deepest


def read_json(path: Path) -> Any:
    """A JSON file, through every check above, whole (for small files; reports.format.load streams results)."""
    text = decode(path, read_bytes(path))
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    return parse_json(path, text)


def without_surrogates(value: Any) -> tuple[Any, int]:
    """value with every lone UTF-16 surrogate in its text (keys too) replaced by U+FFFD, and how many were."""
    if isinstance(value, str):
        return SURROGATE.subn("\ufffd", value)
    if isinstance(value, list):
        pairs = [without_surrogates(item) for item in value]
        return [item for item, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        pairs = [(without_surrogates(key), without_surrogates(item)) for key, item in value.items()]
        return {key: item for (key, _), (item, _) in pairs}, sum(a + b for (_, a), (_, b) in pairs)
    return value, 0


class Node:
    """A described field and the fields below it: reports.format.fields' dotted table as a tree, walked once per value
    (per entry of a million-case file: what a check needs is kept on the node)."""

    __slots__ = ("any", "check", "children", "expect", "field", "leaf", "open")

    def __init__(self) -> None:
        self.field: Field | None = None
        self.children: dict[str, Node] = {}
        self.any: Node | None = None  # the `*` member
        self.check, self.expect, self.open, self.leaf = None, "", False, True

    def describe(self, described: Field) -> None:
        self.field, self.check, self.expect, self.open = described, described.kind.check, described.kind.expect, \
            described.open


def tree(table: dict[str, Field]) -> Node:
    root = Node()
    for path, described in table.items():
        node = root
        for part in path.split("."):
            node.leaf = False
            if part == "*":
                node.any = node.any or Node()
                node = node.any
            else:
                node = node.children.setdefault(part, Node())
        node.describe(described)
    return root


def shown(value: Any) -> str:
    """A value as a warning shows it: short, and never the whole of a million-element list."""
    if isinstance(value, list | dict):
        return f"a {'list' if isinstance(value, list) else 'object'} of {len(value)}"
    return f"{value!r:.40}"


def checked(node: Node, value: Any, path: str, bad: list[str]) -> Any:
    """value as the reports use it, if it has its field's type; else None, with `path=value (expected)` added
    to `bad`. An object keeps its described members that are right (each checked the same way); an open one
    (extra_info) keeps its undescribed members as they are, and `null` members are absent."""
    if node.check is not None:
        out = node.check(value)
        if out is None:
            bad.append(f"{path}={shown(value)} (expected {node.expect})")
            return None
        value = out
    if node.leaf or type(value) is not dict:
        return value
    result = {}
    children, star, keep = node.children, node.any, node.open
    for key, item in value.items():
        child = children.get(key, star)
        if child is None:
            if keep:
                result[key] = item
        elif item is None:
            continue
        elif child.leaf:  # most members: checked here rather than in a call of their own
            out = child.check(item)
            if out is None:
                bad.append(f"{path}.{key}={shown(item)} (expected {child.expect})" if path else
                           f"{key}={shown(item)} (expected {child.expect})")
            else:
                result[key] = out
        elif (out := checked(child, item, f"{path}.{key}" if path else key, bad)) is not None:
            result[key] = out
    return result


def outside_rounds(median: float, rounds: object) -> str | None:
    """Why a median over every round's samples cannot be right beside its rounds' medians, or None: the median of
    the rounds' samples pooled lies between the smallest and the largest round median, whatever the rounds' sizes
    (each round has half its samples on either side of its own median). A file whose `stats` say 2x slower than
    its `round_medians_s` would read 2x slower in `table` and the same in `compare`."""
    if not isinstance(rounds, list) or not rounds or not all(isinstance(r, int | float) for r in rounds):
        return None
    low, high = min(rounds), max(rounds)
    if low / (1 + SLACK) <= median <= high * (1 + SLACK):
        return None
    return (f"stats.median {median:.6g} s lies outside its round medians [{low:.6g}, {high:.6g}] s: the figures "
            "contradict each other")


def contradiction(stats: dict[str, float]) -> str | None:
    """Why an entry's statistics (as frame columns) cannot all be right, or None when they agree."""
    for low, high in ORDER:
        if low in stats and high in stats and stats[low] > stats[high] * (1 + SLACK):
            return (f"stats contradict each other: {low.removesuffix('_s')} {stats[low]:.6g} s > "
                    f"{high.removesuffix('_s')} {stats[high]:.6g} s")
    spread = stats.get("max_s", math.inf) - stats.get("min_s", 0.0)
    for key in ("iqr_s", "stddev_s"):
        if stats.get(key, 0.0) > spread * (1 + SLACK) + 0.0:
            return (f"stats contradict each other: {key.removesuffix('_s')} {stats[key]:.6g} s > max - min "
                    f"{spread:.6g} s")
    return None
