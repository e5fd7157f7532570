"""Strict JSON out, and back in: what the project writes parses with every JSON reader.

Python's `json` writes a float that is not finite as a bare `NaN`, `Infinity` or `-Infinity`: JavaScript's
`JSON.parse`, orjson, jq and the benchmark-tracking actions of CI services reject the whole document, since RFC
8259 has no such values. A results file holds them legitimately (the relative spread of a one-sample case is
infinite, so is the error of an overflowed result), so they are written as `null`, and the document's top level
gains `nonfinite` (before the entries, so that a streaming reader knows it in time): one entry per such
value, `{"path": "/benchmarks/3/extra_info/rel_iqr", "value": "Infinity"}`,
the path a JSON Pointer (RFC 6901) into the document and the value one of `Infinity`, `-Infinity`, `NaN`. A
reader that knows the convention puts them back (`restore`); one that does not sees a null and, beside it, why.
docs/results.md describes the field; every writer of the project (the results file and its journal, `compare
--json`, `trace --json`, the GPU check's rows, the achievable-peak cache) goes through `dumps`.

Standard library only: the benchmarking side imports it too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

NONFINITE = "nonfinite"
SPELLING = {math.inf: "Infinity", -math.inf: "-Infinity"}
VALUES = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def pointer(parts: list[str]) -> str:
    """The JSON Pointer of a path of keys and list indices (`~` and `/` escaped as RFC 6901 says)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python number it holds (json cannot encode numpy's float32 or int64)."""
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def _finite_numbers(items: list | tuple) -> bool:
    """Whether a list holds numbers only, no float among them that is not finite: nothing in it to replace, told
    in one pass in C over raw samples (up to millions), which took seconds to walk one by one."""
    if not all(issubclass(kind, int | float) for kind in set(map(type, items))):
        return False
    try:
        return math.isfinite(sum(items))
    except OverflowError:  # an integer beyond a float's range: the sum cannot tell, the walk can
        return False


def encode(value: Any) -> tuple[Any, list[dict[str, str]]]:
    """A copy of `value` with every non-finite float as None, and one `nonfinite` entry per value replaced."""
    found: list[dict[str, str]] = []

    def walk(item: Any, parts: list[str]) -> Any:
        item = _plain(item)
        if isinstance(item, float) and not math.isfinite(item):
            found.append({"path": pointer(parts), "value": SPELLING.get(item, "NaN")})
            return None
        if isinstance(item, dict):
            return {key: walk(child, [*parts, str(key)]) for key, child in item.items()}
        if isinstance(item, list | tuple):
            if _finite_numbers(item):
                return list(item)
            return [walk(child, [*parts, str(i)]) for i, child in enumerate(item)]
        return item

    return walk(value, []), found


class _NumpyScalar(Exception):
    """A numpy scalar json cannot encode (float32, int64, bool_): the document is walked, which writes its number."""


def _unless_numpy(default: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """json's `default` for a first pass: a numpy scalar stops it, anything else is what `default` makes of it."""
    def fallback(value: Any) -> Any:
        if type(value).__module__ == "numpy":
            raise _NumpyScalar
        if default is None:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        return default(value)
    return fallback


def dumps(document: dict, default: Callable[[Any], Any] | None = repr, **kwargs: Any) -> str:
    """`document` as strict JSON: non-finite floats written as null and listed under its top-level `nonfinite`.

    `default` turns what json cannot encode into something it can (repr, as the journal always did); keyword
    arguments go to json.dumps (indent, ensure_ascii).
    """
    if not isinstance(document, dict):
        raise TypeError(f"a strict JSON document is an object, not {type(document).__name__}")
    try:  # nothing to replace (every float finite, no numpy scalar): json's own pass, in C, writes it as it is
        return json.dumps(document, allow_nan=False, default=_unless_numpy(default), **kwargs)
    except (ValueError, _NumpyScalar):
        pass
    clean, found = encode(document)
    if found:  # first (after schema_version), so that a reader streaming the entries knows them in time
        earlier = _listed(clean.pop(NONFINITE, None))
        version = {key: clean.pop(key) for key in ("schema_version",) if key in clean}
        clean = {**version, NONFINITE: [*earlier, *found], **clean}
    return json.dumps(clean, allow_nan=False, default=default, **kwargs)


def _listed(earlier: Any) -> list:
    """The entries a document listed under `nonfinite` before: its list, none for null, and anything else (another
    writer's field of that name) kept as one entry, never dropped: a reader names it as an entry it cannot use."""
    if isinstance(earlier, list):
        return earlier
    return [] if earlier is None else [earlier]


def _parts(path: str) -> list[str] | None:
    if path == "":
        return []
    if not path.startswith("/"):
        return None
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _null_at(document: Any, parts: list[str]) -> tuple[Any, Any] | None:
    """(container, key) of the null that `parts` point at, or None when they point at anything else or nowhere."""
    node = document
    for depth, part in enumerate(parts):
        if isinstance(node, dict) and part in node:
            key: Any = part
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            key = int(part)
        else:
            return None
        if depth == len(parts) - 1:
            return (node, key) if node[key] is None else None
        node = node[key]
    return None


class Listed:
    """The `nonfinite` entries of one document, put back part by part: a reader that streams a file's entries
    restores each entry as it arrives (`restore(entry, ("benchmarks", "3"))`), then the rest (`restore(top)`).

    Only a null is ever replaced, so an entry cannot change a value that was written. `problems` holds one line
    per entry that could not be used (not an object, an unknown value, a path to no null), for the caller to
    warn about; an entry for a part already read counts as one (`unused`).
    """

    def __init__(self, entries: Any) -> None:
        self.problems: list[str] = []
        self._by_part: dict[tuple[str, ...], list[tuple[list[str], float, Any]]] = {}
        if not isinstance(entries, list):
            self.problems.append(f"'{NONFINITE}' is a {type(entries).__name__}, not a list")
            return
        for entry in entries:
            path = entry.get("path") if isinstance(entry, dict) else None
            value = entry.get("value") if isinstance(entry, dict) else None
            parts = _parts(path) if isinstance(path, str) else None
            if not parts or not isinstance(value, str) or value not in VALUES:
                self.problems.append(_unusable(entry))
                continue
            self._by_part.setdefault(tuple(parts[:2]), []).append((parts, VALUES[value], entry))

    def restore(self, part: Any, at: tuple[str, ...] = (), skip: frozenset[str] = frozenset()) -> None:
        """Put back the values that lie in `part`, the value at `at` (no more than two keys deep) in the document;
        with `at` empty, every value still listed but those under the top-level keys in `skip` (parts read
        already)."""
        keys = [key for key in self._by_part if key[:len(at)] == at and key[0] not in skip] if len(at) < 2 else [at]
        for key in keys:
            for parts, value, entry in self._by_part.pop(key, []):
                place = _null_at(part, parts[len(at):])
                if place is None:
                    self.problems.append(_unusable(entry))
                    continue
                container, name = place
                container[name] = value

    def unused(self) -> list[str]:
        """The problems, with every entry not yet restored (its part was read before the list)."""
        left = [_unusable(entry, "comes after the part it names: that value stays missing")
                for entries in self._by_part.values() for *_, entry in entries]
        self._by_part.clear()
        return [*self.problems, *left]


def _unusable(entry: Any, why: str = "points at no null") -> str:
    return f"{NONFINITE} entry {json.dumps(entry, default=repr)[:80]} {why}"


def restore(document: Any) -> list[str]:
    """Put the values listed under `nonfinite` back in place of their nulls (in place), and drop the list; the
    problems returned are those of `Listed`."""
    if not isinstance(document, dict) or NONFINITE not in document:
        return []
    listed = Listed(document.pop(NONFINITE))
    listed.restore(document)
    return listed.unused()


def loads(text: str) -> Any:
    """A document written by `dumps`, with its non-finite values back in place (unusable entries are ignored)."""
    document = json.loads(text)
    restore(document)
    return document
