"""Sizes as people type them (`2GiB`, `512MiB`, `1.5GB`): one parser for every option that takes bytes."""

from __future__ import annotations

import argparse
import math
import re

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """`2GiB`, `512MiB`, `1.5GB`, `1000000` -> bytes; anything else is an argparse error (a one-line usage error
    when pytest parses --bench-mem-budget)."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    size = float(match.group(1)) * _UNITS[unit] if unit in _UNITS else math.nan
    if not (math.isfinite(size) and size >= 1):  # `1e400` is infinite, `0.5` would be a budget of 0 bytes
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive size (one byte or more, finite) such as "
                                         "2GiB, 512MiB, 1.5GB or 1000000")
    return int(size)
