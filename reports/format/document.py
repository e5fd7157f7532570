"""One results file or journal read as it streams: its entries one by one, then its other top-level fields.

A results file is decoded entry by entry (reports.format.jsonstream), so that a huge file never sits in memory
whole; each value is checked for depth, text with a lone surrogate is mended, and the file's `nonfinite` list
(reports.format.strict_json) puts back the figures JSON cannot hold. A schema version newer than this reader's is
refused (docs/results.md, "Versioning").

A run's journal (`RESULTS.json.journal`, one JSON line per finished case, which the suite's plugin writes as
it goes and removes once the results file is whole) is read like a results file marked incomplete: it is what
is left of a run that was killed outright.

What the entries mean is the loader's (reports/format/load.py, which builds the frame of them); a program reading
back a run it started takes the document as written (`read_json`, through reports.format.readback).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from reports.format import strict_json, validate
from reports.format.errors import InputError
from reports.format.jsonstream import JsonStream
from reports.format.schema import JOURNAL_VERSION, RESULTS_SCHEMA_VERSION
from reports.format.validate import warn

JOURNAL_SUFFIX = ".journal"
ENTRY_LISTS = frozenset({"benchmarks", "not_measured"})  # the top-level lists of entries, streamed one by one


class Document:
    """One results file or journal, read as it streams: `entries()` yields (list, entry) for every entry of
    `benchmarks` and `not_measured`; once they are consumed, `top` holds the file's other top-level fields.

    Each value is checked for depth, and text with a lone surrogate is mended (counted in `mended`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.top: dict[str, Any] = {}
        self.mended = 0
        self.nonfinite = strict_json.Listed([])  # the file's `nonfinite`, read before its entries (strict_json)
        self.problems: list[str] = []  # the `nonfinite` entries that could not be used, once the file is read
        self.level = 1  # how deep in the document the values being decoded sit (the top object is level 1)

    def _mend(self, value: Any, text: str, start: int, end: int) -> Any:
        if validate.SURROGATE_ESCAPE.search(text, start, end):
            value, count = validate.without_surrogates(value)
            self.mended += count
        return value

    def warn_problems(self) -> None:
        for problem in self.problems:
            warn(f"{self.path}: {problem}; ignored")

    def entries(self) -> Iterator[tuple[str, Any]]:
        with validate.open_text(self.path) as stream:
            try:
                if self.path.name.endswith(JOURNAL_SUFFIX):
                    yield from self._journal(stream)
                else:
                    yield from self._results(stream)
            except UnicodeDecodeError as exc:
                raise InputError(f"{self.path}: not UTF-8 text ({exc.reason})") from None
            except RecursionError:
                raise InputError(f"{self.path}: JSON nested too deep") from None
            except OSError as exc:
                raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def _results(self, stream: IO[str]) -> Iterator[tuple[str, Any]]:
        reader = JsonStream(stream, self.path, max_value_chars=validate.MAX_FILE_BYTES, decoder=validate.DECODER,
                            big_numbers=validate.BIG_NUMBERS, prefix="not valid JSON: ")

        def on_value(value: Any, start: int, end: int) -> Any:
            validate.checked_depth(self.path, value, self.level, reader.buf, start, end)
            return self._mend(value, reader.buf, start, end)

        reader.on_value = on_value
        first = reader.peek()
        if not first:
            raise InputError(f"{self.path}: file is empty")
        if first != "{":
            for _ in reader.array() if first == "[" else [reader.value()]:
                pass
            raise InputError(f"{self.path}: not a pytest-benchmark result (no 'benchmarks' list)")
        lists = set()
        for key, value in reader.members(ENTRY_LISTS):
            if key == strict_json.NONFINITE:
                self.nonfinite = strict_json.Listed(value)
                continue
            if key == "schema_version":
                check_version(self.path, key, value, RESULTS_SCHEMA_VERSION)
            if not isinstance(value, Iterator):
                self.top[key] = value
                continue
            lists.add(key)
            self.level = 2
            for index, entry in enumerate(value):
                self.nonfinite.restore(entry, (key, str(index)))
                yield key, entry
            self.level = 1
        self.nonfinite.restore(self.top, skip=ENTRY_LISTS)
        self.problems = self.nonfinite.unused()
        if reader.peek():
            reader.fail("unexpected data after the end of the document")
        if "benchmarks" not in lists:
            raise InputError(f"{self.path}: not a pytest-benchmark result (no 'benchmarks' list)")

    def _journal(self, stream: IO[str]) -> Iterator[tuple[str, Any]]:
        """A journal as the results file its run did not get to write, marked incomplete.

        The header line holds the run's machine and commit; each other line one case. A case measured in rounds
        has a line after each round and its last line is its entry (a later line of the same `fullname` supersedes
        an earlier one: a first reading finds each case's last line, so no entry is held meanwhile). A whole line
        that is not JSON is left out with a warning.

        A journal is read while its run may still append to it (`reports table run.json.journal` during the run,
        advise's progress): only its whole lines count, those ending in a newline; a last line without one is
        being written (or was cut by a kill) and is not part of the journal yet. The second reading stops where
        the first did, so both see the same lines however many the run appends meanwhile.
        """
        whole = _WholeLines(stream)
        last = {case: number for number, case, _, _ in self._journal_lines(whole, quiet=True)}
        stream.seek(0)
        for number, case, key, entry in self._journal_lines(_WholeLines(stream, whole.count), quiet=False):
            if last[case] == number:
                yield key, entry
        if not self.top:
            raise InputError(f"{self.path}: file is empty")

    def _journal_lines(self, lines: Iterable[str], quiet: bool) -> Iterator[tuple[int, object, str, Any]]:
        """(line number, the case's fullname or else the line number, list, entry) of each entry line; the header
        line sets `top`."""
        header = None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = self._mend(validate.parse_json(self.path, line), line, 0, len(line))
                unusable = strict_json.restore(record)  # each line is a document with its own `nonfinite`
            except InputError as exc:
                if header is None:
                    raise
                if not quiet:
                    warn(f"{exc} (line {number}); left out")
                continue
            if not quiet:
                self.problems += [f"line {number}: {problem}" for problem in unusable]
            if header is None:
                if not isinstance(record, dict) or "journal" not in record:
                    raise InputError(f"{self.path}: not a results journal (no header line)")
                check_version(self.path, "journal", record["journal"], JOURNAL_VERSION)
                if "schema_version" in record:
                    check_version(self.path, "schema_version", record["schema_version"], RESULTS_SCHEMA_VERSION)
                header = record
                self.top = {key: header[key] for key in ("machine_info", "commit_info", "datetime", "version")
                            if key in header}
                self.top.update(incomplete=True, incomplete_reason="the run ended without writing its results; "
                                "read from its journal")
                continue
            for key in ENTRY_LISTS:
                if isinstance(record, dict) and key in record:
                    entry = record[key]
                    name = entry.get("fullname") if isinstance(entry, dict) else None
                    yield number, name if isinstance(name, str) else number, key, entry


class _WholeLines:
    """The lines of a text stream that end in a newline, at most `limit` of them, counted as they go: a journal's
    lines as far as its run has written them."""

    def __init__(self, stream: IO[str], limit: int | None = None) -> None:
        self.stream, self.limit, self.count = stream, limit, 0

    def __iter__(self) -> Iterator[str]:
        for line in self.stream:
            if (self.limit is not None and self.count >= self.limit) or not line.endswith("\n"):
                return
            self.count += 1
            yield line


def check_version(path: Path, field: str, value: Any, newest: int) -> None:
    """A version this reader knows, else an InputError naming the file and the version: a file of a higher
    version renamed or changed a field (docs/results.md, "Versioning"), so reading it as an older one would
    mislead; a value that is no version at all is refused the same way."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{path}: {field} {json.dumps(value)[:40]} is not a version number")
    if value > newest:
        raise InputError(f"{path}: {field} {value} is newer than this reader's {newest}; read it with a newer "
                         "version of this project")


def read_json(path: Path) -> dict:
    """A results file or journal as one document, as written: `benchmarks`, `not_measured` and its other
    top-level fields (a journal's as the results file its run did not write, marked incomplete). For a program
    reading back a run it started (reports.format.readback); the checked view of the entries is `load`'s frame."""
    document = Document(path)
    data: dict[str, Any] = {key: [] for key in ENTRY_LISTS}
    for key, entry in document.entries():
        data[key].append(entry)
    document.warn_problems()
    return {**document.top, **data}
