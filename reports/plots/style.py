"""What every plot shares: the dtype ladder's colours (its order is reports/dtypes.py's), FLOP/s units that read
well, file names.

One colour per dtype in every figure, so a reader who learned that bfloat16 is green on the matmul picture
finds it green on the roofline too.
"""

from __future__ import annotations

import hashlib
import re

DTYPE_COLORS = {"float32": "#4c72b0", "tf32": "#8172b3", "float16": "#dd8452", "bfloat16": "#55a868",
                "float8_e4m3fn": "#c44e52"}
ALIGN_LABEL = {"64": "multiple of 64", "8": "multiple of 8 only", "odd": "odd"}


def flops_unit(largest: float) -> tuple[str, float]:
    """(unit, scale) for FLOP/s figures: TFLOP/s on a GPU, GFLOP/s where the largest is under 1 TFLOP/s."""
    return ("TFLOP/s", 1e12) if largest >= 1e12 else ("GFLOP/s", 1e9)


MAX_NAME_CHARS = 150  # file systems allow 255 bytes per name; a 300-character CPU model must not stop a plot


def file_name(*parts: str) -> str:
    """A PNG's name from these parts; a long one is cut and ends in a hash of the parts, so names stay apart."""
    name = re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(parts)).strip("-")
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha1("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = f"{name[:MAX_NAME_CHARS]}-{digest}"
    return name + ".png"
