"""What every plot shares: the dtype ladder's colours (its order is reports/dtypes.py's), FLOP/s units that read
well, file names, text from the data made safe for matplotlib, titles that name their run, and how a disturbed
figure is drawn (reports/marks.py): a bar hatched and hollow in its own colour, a point hollow, with a legend
entry naming its marks.

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

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from reports import marks

DTYPE_COLORS = {"float32": "#4c72b0", "tf32": "#8172b3", "float16": "#dd8452", "bfloat16": "#55a868",
                "float8_e4m3fn": "#c44e52"}
ALIGN_LABEL = {"64": "multiple of 64", "8": "multiple of 8 only", "odd": "odd"}
TITLE_WIDTH = 80  # characters of a title line: the narrowest figure (8 inches) holds them at the default size


def flops_unit(largest: float) -> tuple[str, float]:
    """(unit, scale) for FLOP/s figures: TFLOP/s on a GPU, GFLOP/s where the largest is under 1 TFLOP/s."""
    return ("TFLOP/s", 1e12) if largest >= 1e12 else ("GFLOP/s", 1e9)


TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))  # reports/text.py's `format_time` gives text


def time_unit(typical: float) -> tuple[str, float]:
    """(unit, scale) that shows a typical time with one to three digits before the point: the ticks of a log axis
    spanning decades around it read 0.01 to 1000."""
    return next(((name, scale) for name, scale in TIME_UNITS if typical >= scale), TIME_UNITS[-1])


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


HATCH = "////"


def hatch_bar(bar: Rectangle) -> None:
    """A bar of a disturbed figure: hollow and hatched in its own colour, so it still reads as its dtype's or
    system's, but not as a solid result."""
    bar.set(edgecolor=bar.get_facecolor(), facecolor="white", hatch=HATCH, linewidth=0.8)


def hatched_entry(found: list[tuple[marks.Mark, ...]]) -> list[Patch]:
    """The legend entry of a picture's hatched bars, naming their marks; none when no bar is disturbed."""
    label = marks.plot_label(found, "hatched")
    return [Patch(facecolor="white", edgecolor="#444", hatch=HATCH, label=label)] if label else []


def hollow_entry(found: list[tuple[marks.Mark, ...]], marker: str = "o") -> list[Line2D]:
    """The legend entry of a picture's hollow points, naming their marks; none when no point is disturbed."""
    label = marks.plot_label(found, "hollow")
    return [Line2D([], [], marker=marker, linestyle="none", markerfacecolor="white", markeredgecolor="#444",
                   label=label)] if label else []


def hollow_points(ax: Axes, line: Line2D, disturbed: pd.Series) -> None:
    """The line's points of disturbed figures (a boolean per point, in the line's order) drawn over as hollow
    markers of the line's colour: the line still runs through them, the point no longer looks solid. Its colour
    is given, so the axes' colour cycle does not move on: the next line keeps the colour it has in other panels."""
    mask = np.asarray(disturbed, dtype=bool)
    if mask.any():
        ax.plot(np.asarray(line.get_xdata())[mask], np.asarray(line.get_ydata())[mask], linestyle="none",
                marker=line.get_marker(), markersize=line.get_markersize(), color=line.get_color(),
                markerfacecolor="white", alpha=line.get_alpha(), zorder=line.get_zorder() + 0.1)


def log_axis(ax: Axes, values: object) -> None:
    """A log x axis with as many labelled ticks as the span of these values (any array of numbers) allows without
    crowding: decades over more than 2.5 of them, else 1-2-5 or finer."""
    finite = np.asarray(values, dtype=float).ravel()
    finite = finite[np.isfinite(finite) & (finite > 0)]
    span = np.log10(finite.max() / finite.min()) if finite.size else 0
    subs = (1.0,) if span > 2.5 else (1.0, 2.0, 5.0) if span > 1 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.grid(True, axis="x", which="major", alpha=0.3)
