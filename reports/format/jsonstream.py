"""Decode a large JSON document one value at a time, in bounded memory: the arrays that hold its bulk are walked
element by element, everything else is decoded whole.

Results files and traces are one JSON object whose few arrays (`benchmarks`, `traceEvents`) hold almost all of
its bytes; `json.load` would hold the whole text and every parsed value at once. This reads the text in chunks:
the stdlib's C scanner (`JSONDecoder.raw_decode`) decodes one value at a time from a sliding buffer, and the
caller sees each element just long enough to keep what it needs. A value longer than a chunk grows the buffer
geometrically, so a huge value costs linear time. Failures are InputError naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any, NoReturn

from reports.format.errors import InputError

CHUNK_CHARS = 1 << 20
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonStream:
    """A cursor over a text stream that decodes one JSON value at a time.

    `buf[pos:]` is the not yet consumed text; it is refilled chunk by chunk, so memory holds about one chunk plus
    the value being decoded. `decoder` decodes one value (`big_numbers` one that `decoder` refuses for an integer
    too long for Python's int parser); `on_value(value, start, end)` may replace each
    decoded value, seeing the text it came from as `buf[start:end]`; `prefix` starts every error message.
    """

    def __init__(self, stream: IO[str], path: object, *, chunk_chars: int | None = None, max_value_chars: int,
                 decoder: json.JSONDecoder = _DECODER, big_numbers: json.JSONDecoder | None = None,
                 on_value: Callable[[Any, int, int], Any] | None = None, prefix: str = "") -> None:
        self.stream = stream
        self.path = path
        self.chunk_chars = chunk_chars or CHUNK_CHARS
        self.max_value_chars = max_value_chars
        self.decoder = decoder
        self.big_numbers = big_numbers  # decodes a value holding an integer past Python's digit limit
        self.on_value = on_value
        self.prefix = prefix
        self.buf = ""
        self.pos = 0
        self.eof = False

    def members(self, streamed: frozenset[str] | set[str]) -> Iterator[tuple[str, Any]]:
        """The members of the top-level object in file order: (key, value), where the value of a key in
        `streamed` that holds an array is an iterator over its elements, to be consumed before the next member."""
        self.expect("{")
        while self.peek() != "}":
            key = self.value()
            if not isinstance(key, str):
                self.fail("malformed JSON: expected a member name")
            self.expect(":")
            if key in streamed and self.peek() == "[":
                yield key, self.array()
            else:
                yield key, self.value()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "}":
                self.fail("malformed JSON: expected ',' or '}'")
        self.pos += 1

    def array(self) -> Iterator[Any]:
        """Yield the elements of the array at the cursor.

        The fast path decodes an element and matches the separator after it straight from the buffer (most of the
        time spent on a large file is here); when either runs past the end of the buffer, or is malformed, the slow
        path reads more text or reports the error.
        """
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        scan, separator = self.decoder.scan_once, _SEPARATOR.match
        while True:
            start = self.pos
            try:
                value, end = scan(self.buf, start)
                found = separator(self.buf, end)
            except (StopIteration, ValueError):  # incomplete, malformed, or an integer past int's digit limit
                found = None
            if found:
                if self.on_value is not None:
                    value = self.on_value(value, start, end)
                self.pos = found.end()
                closing = found.group(1)
            else:
                value = self.value()
                closing = self.peek()
                if closing not in (",", "]"):
                    self.fail("malformed JSON: expected ',' or ']' in an array (truncated file?)")
                self.pos += 1
                self.peek()  # the fast path starts at a value, not at whitespace
            yield value
            if closing == "]":
                return

    def value(self) -> Any:
        """Decode the value at the cursor, reading more text until it is complete.

        A decode that ends exactly at the end of the buffer is retried with more text, since a number cut by
        the chunk boundary ('12' of '125') decodes without error.
        """
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    self.fail(f"malformed or truncated JSON: {exc.msg} at character {exc.pos}")
                if len(self.buf) - self.pos > self.max_value_chars:
                    self.fail(f"malformed JSON: no complete value within {self.max_value_chars} characters")
                self._fill(grow=True)
                continue
            except ValueError as exc:  # an integer past Python's digit limit
                if self.big_numbers is None:
                    self.fail(f"malformed JSON: {exc}")
                value, end = self.big_numbers.raw_decode(self.buf, self.pos)
            if end < len(self.buf) or self.eof:
                start, self.pos = self.pos, end
                return value if self.on_value is None else self.on_value(value, start, end)
            self._fill(grow=True)

    def peek(self) -> str:
        """Skip whitespace and return the next character ('' at the end of the file) without consuming it."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self._fill()

    def expect(self, char: str) -> None:
        if self.peek() != char:
            self.fail(f"malformed JSON: expected '{char}' (truncated file?)")
        self.pos += 1

    def _fill(self, grow: bool = False) -> None:
        """More text; while one value spans the buffer, as much again as it holds (linear time for a huge value)."""
        chunk = self.stream.read(max(self.chunk_chars, len(self.buf) - self.pos) if grow else self.chunk_chars)
        self.eof = not chunk
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0

    def fail(self, message: str) -> NoReturn:
        raise InputError(f"{self.path}: {self.prefix}{message}")
