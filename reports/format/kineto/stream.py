"""Stream the events of a Chrome/Kineto trace file one at a time, in bounded memory.

A Kineto trace is one JSON object whose `traceEvents` array holds almost all of its bytes; traces of hundreds of MB
are common. `json.load` would hold the whole text and every event dict at once, so this reader walks the file with
reports.format.jsonstream instead, and the caller sees each event dict just long enough to keep the few fields it needs.
Any reading or decoding failure becomes `InputError` naming the file, never a traceback.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from reports.format.errors import InputError
from reports.format.jsonstream import JsonStream
from reports.format.validate import check_regular

CHUNK_CHARS = 1 << 20
# No single JSON value of a trace (one event, or a top-level field such as deviceProperties) comes near this;
# a longer unparsable stretch means the file is malformed, and stopping there keeps memory bounded.
MAX_VALUE_CHARS = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"


def iter_trace_events(path: Path, metadata: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Yield every entry of the trace's `traceEvents` array (or of a top-level array, the other Chrome form).

    Top-level fields other than `traceEvents` (deviceProperties, distributedInfo, ...) are stored into
    `metadata` when a dict is given, else dropped.
    """
    check_regular(path)  # a FIFO would block, a link to /dev/zero would never end
    try:
        with _open_text(path) as stream:
            yield from _trace_events(stream, path, {} if metadata is None else metadata)
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


def _trace_events(stream: IO[str], path: Path, metadata: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Walk the top level: an array of events, or an object whose `traceEvents` member is that array."""
    reader = JsonStream(stream, path, chunk_chars=CHUNK_CHARS, max_value_chars=MAX_VALUE_CHARS)
    first = reader.peek()
    if first == "[":
        yield from reader.array()
    elif first == "{":
        found_events = False
        for key, value in reader.members(frozenset({"traceEvents"})):
            if key != "traceEvents":
                metadata[key] = value
            elif found_events:  # a JSON reader keeps the last, this one has read the first: each count would be off
                reader.fail("traceEvents appears twice; which one holds the events is not knowable")
            elif isinstance(value, Iterator):
                found_events = True
                yield from value
            else:
                reader.fail(f"traceEvents is not a list of events but {json.dumps(value)[:60]}")
        if not found_events:
            reader.fail("not a Chrome/Kineto trace (no traceEvents)")
    else:
        reader.fail("not a JSON trace (expected '{' or '[' at the start)")
    if reader.peek():
        reader.fail("unexpected data after the end of the JSON document")
