"""What every plot shares: the dtype ladder's colours (its order is reports/dtypes.py's), FLOP/s units that read
well, file names, text from the data made safe for matplotlib, and titles that name their run.

One colour per dtype in every figure, so a reader who learned that bfloat16 is green on the matmul picture
finds it green on the roofline too. matplotlib's mathtext stays on (log axes label their ticks `10^2` with it);
text that comes from the data (a case, a model, a device name) goes through `text` so that a `$` in it is a
dollar sign, not the start of a formula.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path

import pandas as pd

DTYPE_COLORS = {"float32": "#4c72b0", "tf32": "#8172b3", "float16": "#dd8452", "bfloat16": "#55a868",
                "float8_e4m3fn": "#c44e52"}
ALIGN_LABEL = {"64": "multiple of 64", "8": "multiple of 8 only", "odd": "odd"}
TITLE_WIDTH = 80  # characters of a title line: the narrowest figure (8 inches) holds them at the default size


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


def text(value: object) -> str:
    """A name from the data as matplotlib shows it literally: every `$` escaped, so it never opens mathtext."""
    return str(value).replace("$", r"\$")


def title(what: str, rows: pd.DataFrame) -> str:
    """A figure's title (`what`, from the data: escaped) with the run it shows below it, and when that run was cut
    short, INCOMPLETE with why: a picture copied out of its report still says what it is."""
    files = list(dict.fromkeys(rows["file"].dropna())) if "file" in rows else []
    if len(files) == 1:
        stamps = pd.to_datetime(rows["datetime"], utc=True, errors="coerce").dropna() if "datetime" in rows else []
        run = f"run {Path(files[0]).name}" + (f", {stamps.iloc[0]:%Y-%m-%d %H:%M} UTC" if len(stamps) else "")
    else:
        run = f"{len(files)} runs" if files else ""
    cut = rows["incomplete_reason"].dropna().unique() if "incomplete_reason" in rows else []
    lines = [*what.split("\n"), run, f"INCOMPLETE run: {cut[0]}" if len(cut) else ""]  # each line wrapped alone
    return text("\n".join(textwrap.fill(line, TITLE_WIDTH) for line in lines if line))
