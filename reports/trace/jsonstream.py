"""Stream the events of a Chrome/Kineto trace file one at a time, in bounded memory.

A Kineto trace is one JSON object whose `traceEvents` array holds almost all of its bytes; traces of hundreds of MB
are common. `json.load` would hold the whole text and every event dict at once, so this reader decodes the file
in chunks instead: the stdlib's C scanner (`JSONDecoder.raw_decode`) decodes one value at a time from a sliding
text buffer, and the caller sees each event dict just long enough to keep the few fields it needs.
Any reading or decoding failure becomes `InputError` naming the file, never a traceback.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from reports.errors import InputError
from reports.validate import check_regular

CHUNK_CHARS = 1 << 20
# No single JSON value of a trace (one event, or a top-level field such as deviceProperties) comes near this;
# a longer unparsable stretch means the file is malformed, and stopping there keeps memory bounded.
MAX_VALUE_CHARS = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def iter_trace_events(path: Path, metadata: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Yield every entry of the trace's `traceEvents` array (or of a top-level array, the other Chrome form).

    Top-level fields other than `traceEvents` (deviceProperties, distributedInfo, ...) are stored into
    `metadata` when a dict is given, else dropped.
    """
    check_regular(path)  # a FIFO would block, a link to /dev/zero would never end
    try:
        with _open_text(path) as stream:
            yield from _JsonStream(stream, path).trace_events({} if metadata is None else metadata)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read trace: {exc}") from exc
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep for a trace") from None


def _open_text(path: Path) -> IO[str]:
    """Open plain or gzip-compressed JSON as text, choosing by the file's magic bytes rather than its name."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


class _JsonStream:
    """A cursor over a text stream that decodes one JSON value at a time.

    `buf[pos:]` is the not yet consumed text; it is refilled chunk by chunk, so memory holds at most about one
    chunk plus the value being decoded.
    """

    def __init__(self, stream: IO[str], path: Path) -> None:
        self.stream = stream
        self.path = path
        self.buf = ""
        self.pos = 0
        self.eof = False

    def trace_events(self, metadata: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Walk the top level: an array of events, or an object whose `traceEvents` member is that array."""
        first = self._peek()
        if first == "[":
            yield from self._array()
        elif first == "{":
            yield from self._object_members(metadata)
        else:
            self._fail("not a JSON trace (expected '{' or '[' at the start)")
        if self._peek():
            self._fail("unexpected data after the end of the JSON document")

    def _object_members(self, metadata: dict[str, Any]) -> Iterator[dict[str, Any]]:
        self.pos += 1
        found_events = False
        while self._peek() != "}":
            key = self._value()
            if not isinstance(key, str):
                self._fail("malformed JSON: expected a member name")
            self._expect(":")
            if key == "traceEvents":
                found_events = True
                yield from self._array()
            else:
                metadata[key] = self._value()
            if self._peek() == ",":
                self.pos += 1
            elif self._peek() != "}":
                self._fail("malformed JSON: expected ',' or '}'")
        self.pos += 1
        if not found_events:
            self._fail("not a Chrome/Kineto trace (no traceEvents)")

    def _array(self) -> Iterator[Any]:
        """Yield the elements of the array at the cursor.

        The fast path decodes an element and matches the separator after it straight from the buffer (most of the
        time spent on a trace is here); when either runs past the end of the buffer, or is malformed, the slow
        path reads more text or reports the error.
        """
        self._expect("[")
        if self._peek() == "]":
            self.pos += 1
            return
        scan, separator = _DECODER.scan_once, _SEPARATOR.match
        while True:
            try:
                value, end = scan(self.buf, self.pos)
                found = separator(self.buf, end)
            except (StopIteration, json.JSONDecodeError):
                found = None
            if found:
                self.pos = found.end()
                closing = found.group(1)
            else:
                value = self._value()
                closing = self._peek()
                if closing not in (",", "]"):
                    self._fail("malformed JSON: expected ',' or ']' in an array (truncated file?)")
                self.pos += 1
                self._peek()  # the fast path starts at a value, not at whitespace
            yield value
            if closing == "]":
                return

    def _value(self) -> Any:
        """Decode the value at the cursor, reading more text until it is complete.

        A decode that ends exactly at the end of the buffer is retried with more text, since a number cut by
        the chunk boundary ('12' of '125') decodes without error.
        """
        self._peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    self._fail(f"malformed or truncated JSON: {exc.msg} at character {exc.pos}")
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    self._fail(f"malformed JSON: no complete value within {MAX_VALUE_CHARS} characters")
                self._fill()
                continue
            if end < len(self.buf) or self.eof:
                self.pos = end
                return value
            self._fill()

    def _peek(self) -> str:
        """Skip whitespace and return the next character ('' at the end of the file) without consuming it."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self._fill()

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            self._fail(f"malformed JSON: expected '{char}' (truncated file?)")
        self.pos += 1

    def _fill(self) -> None:
        chunk = self.stream.read(CHUNK_CHARS)
        self.eof = not chunk
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0

    def _fail(self, message: str) -> NoReturn:
        raise InputError(f"{self.path}: {message}")
