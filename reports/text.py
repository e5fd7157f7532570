"""The text the report commands share: results as tables that fit a terminal, times and percentages read and
written one way, file-name slugs, and the notes said under or above a table.

They live here, not in a command, so that a command never imports another for a helper (tests/test_layout.py).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import math
import re
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import tabulate

from reports import marks

SOFT_WRAP = 24  # narrowest a wrapped text column gets before columns are left out


MIN_WRAP = 12  # narrowest it gets at all


def axes_of(frame: pd.DataFrame) -> list[str]:
    """The param columns of the group's cases, first-seen order; `name` first when some case records no params
    (other projects' files) or when two tests share param values (kornia's `rgb_to_yuv` and `yuv_to_rgb`, each
    over the same shapes), so every row stays identifiable."""
    names: dict[str, None] = {}
    for text in frame.get("param_names", pd.Series(dtype=object)).dropna():
        names.update(dict.fromkeys(n for n in str(text).split(",") if n))
    axes = [n for n in names if n in frame and frame[n].notna().any()]
    if not axes or frame[axes].isna().all(axis=1).any() or tests_share_params(frame, axes):
        return ["name", *axes]
    return axes


def tests_share_params(frame: pd.DataFrame, axes: list[str]) -> bool:
    """Whether rows of different tests (names) hold the same values of the axes: without the name they look the
    same. The same test in several runs does not count (a `run` column tells those apart)."""
    if "name" not in frame:
        return False
    return bool(frame.groupby(axes, dropna=False, sort=False)["name"].nunique().gt(1).any())


def terminal_width() -> int:
    """The terminal's width in characters (COLUMNS when set; 120 when the output is not a terminal, e.g. a CI log)."""
    return shutil.get_terminal_size((120, 24)).columns


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


MARKDOWN = "github"  # tabulate's format of a GitHub markdown table


def markdown_text(text: object) -> str:
    """Text from a results file as GitHub markdown shows it, never runs it: HTML's special characters as entities
    (a `<script>` in a case name is shown as text), `|` escaped (it ends a table cell: the columns of a CI job
    summary shifted), a line break as a space (it ends a table row)."""
    return html.escape(" ".join(str(text).splitlines()), quote=False).replace("|", "\\|")


def markdown_code(text: object) -> str:
    """Text as a markdown code span, shown as it is (a code span runs no HTML): fenced by one backtick more than
    the longest run of backticks inside it, as CommonMark has it, on one line."""
    text = " ".join(str(text).splitlines())
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell and column name as `markdown_text`; numbers stay numbers."""
    out = table.rename(columns=markdown_text)
    for column in out.select_dtypes(include=["object", "string"]).columns:
        # built as objects: a map would infer text and turn a missing value (None, drawn blank) into NaN ("nan")
        out[column] = pd.Series([markdown_text(v) if isinstance(v, str) else v for v in out[column]],
                                index=out.index, dtype=object)
    return out


def fit(table: pd.DataFrame, fmt: str, width: int | None, wrap: dict[str, int | tuple[int, int]] | None = None,
        drop_order: list[str] | tuple[str, ...] = (), **options: object) -> str:
    """The table as text no wider than `width` (None: as wide as it comes). Until it fits: the `wrap` columns
    (text) wrap at their width, narrowing down to their soft minimum (`(width, soft)`, else SOFT_WRAP), then the
    `drop_order` columns are left out one by one (named under the table), then the wrapped columns narrow down
    to MIN_WRAP."""
    options = {"headers": "keys", "tablefmt": fmt, "showindex": False, "missingval": ""} | options
    if fmt == MARKDOWN:
        table = markdown_frame(table)

    def draw(frame: pd.DataFrame, limits: dict[str, int]) -> str:
        widths = [limits.get(c) for c in frame.columns]
        return tabulate(frame, maxcolwidths=widths if any(widths) else None, **options)

    def narrower(limits: dict[str, int], floors: dict[str, int]) -> dict[str, int] | None:
        if all(w <= floors[c] for c, w in limits.items()):
            return None
        return {c: max(floors[c], w * 3 // 4) for c, w in limits.items()}

    if width is None:
        return draw(table, {})
    given = {c: w if isinstance(w, tuple) else (w, min(w, SOFT_WRAP)) for c, w in (wrap or {}).items() if c in table}
    limits = {c: w for c, (w, _) in given.items()}
    soft, hard = {c: s for c, (_, s) in given.items()}, dict.fromkeys(given, MIN_WRAP)
    droppable = [c for c in drop_order if c in table]
    shown, dropped = table, []
    text = draw(shown, limits)
    while widest(text) > width:
        if (smaller := narrower(limits, soft)) is not None:
            limits = smaller
        elif droppable:
            dropped.append(droppable.pop(0))
            shown = shown.drop(columns=dropped[-1])
        elif (smaller := narrower(limits, hard)) is not None:
            limits = smaller
        else:
            break
        text = draw(shown, limits)
    if dropped:
        text += "\n" + textwrap.fill(f"(left out to fit {width} characters: {', '.join(dropped)}; --wide shows every "
                                     "column)", width)
    return text


def format_time(seconds: float) -> str:
    """A duration with a unit that keeps three to four significant digits readable."""
    if pd.isna(seconds):
        return ""
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


# What a median is, by the timer that took it (`extra_info.timer`, docs/results.md "Timers").
TIMERS = {"cuda_event": "device time per call (CUDA events)",
          "cuda_graph": "device time per call (CUDA events around CUDA-graph replays)",
          "wall": "wall-clock time per call (time.perf_counter; of a training step, the step's)"}


def timer_text(timer: object, benchmark_timer: object) -> str:
    """What one case's median is: its timer's meaning; for a file that names no timer of this suite (another
    project's), the wall-clock time per call of pytest-benchmark's own timer, named where its `options` name it."""
    if isinstance(timer, str):
        return TIMERS.get(timer, f"time per call by a timer named {timer!r}")
    if isinstance(benchmark_timer, str):
        return f"wall-clock time per call by pytest-benchmark's {benchmark_timer} timer"
    return "wall-clock time per call by pytest-benchmark's timer (time.perf_counter unless its project chose another)"


def times_are(rows: pd.DataFrame) -> str:
    """What the medians of these timed rows are, `device time per call (CUDA events)`; where they mix timers, each
    with its count of cases (`device time ... for 40 cases; wall-clock time ... for 2 cases`)."""
    timers = rows.get("timer", pd.Series(None, index=rows.index)).astype(object)
    clocks = rows.get("benchmark_timer", pd.Series(None, index=rows.index)).astype(object)
    counts = pd.Series([timer_text(t, c) for t, c in zip(timers, clocks, strict=True)], dtype=object).value_counts(
        sort=False)
    if len(counts) == 1:
        return str(counts.index[0])
    return "; ".join(f"{text} for {n} case{'s' if n != 1 else ''}" for text, n in counts.items())


KEEP = ("time", marks.COLUMN, "run")  # columns kept as columns even when one value fills them


def constant_columns(table: pd.DataFrame, keep: tuple[str, ...] = KEEP) -> tuple[pd.DataFrame, str]:
    """The table without the columns that hold one value on every row, and that value of each as one line
    (`same on every row: model gpt-tiny, compile off`); a table of one row is left as it is."""
    if len(table) < 2:
        return table, ""
    same = [c for c in table.columns if c not in keep and table[c].notna().all()
            and table[c].astype(str).nunique() == 1]
    if not same:
        return table, ""
    said = ", ".join(f"{c} {table[c].iloc[0]}" for c in same)
    return table.drop(columns=same), f"same on every row: {said}"


def run_notes(frame: pd.DataFrame) -> list[str]:
    """One line per run that was cut short: a table of it holds only the cases it finished."""
    if "incomplete_reason" not in frame:
        return []
    cut = frame[frame["incomplete_reason"].notna()].groupby("file", sort=False)["incomplete_reason"].first()
    return [f"INCOMPLETE run {Path(file).name}: {reason}; it holds only the cases it finished"
            for file, reason in cut.items()]


def not_measured(frame: pd.DataFrame) -> str:
    """Cases without a timing, counted by status and reason (the reason is the same for whole dtypes)."""
    if "median_s" in frame:
        frame = frame[frame["median_s"].isna()]
    if frame.empty:
        return ""
    reasons = frame.get("reason", pd.Series(None, index=frame.index)).fillna("no reason recorded")
    counts = frame.assign(reason=reasons).groupby(["status", "reason"]).size()
    return "\n".join(f"- {status} ({n} cases): {reason}" for (status, reason), n in counts.items())


def by_case(table: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The table with its axes replaced by one `case` column (the case id without its group), for a suite with
    more axes than a terminal holds (train_step's levers)."""
    axes = [c for c in axes_of(measured) if c in table]
    group = measured["group"].fillna("").astype(str) + "/"
    cases = [str(c).removeprefix(g) for c, g in zip(measured["case"], group, strict=True)]
    shown = table.drop(columns=axes)
    shown.insert(1 if "run" in shown else 0, "case", cases)
    return shown


def with_legend(text: str, table: pd.DataFrame, width: int | None) -> str:
    """The table's text with the legend of its marks under it (none for a clean table)."""
    key = marks.legend_of(table.get(marks.COLUMN), width)
    return f"{text}\n\n{key}" if key else text


def fitted(table: pd.DataFrame, rows: pd.DataFrame, fmt: str, width: int | None, wrap: dict[str, int],
           drop_order: list[str]) -> str:
    """One group's table fitted to `width` (None: markdown, which a browser wraps): the constant columns said once
    above it, then `fit` with the `wrap` and `drop_order` columns; where the axes alone are too wide, the case id
    of `rows` (the table's rows, in its order) stands in for them, and the table says so. The legend of its marks
    goes under it."""
    shown, head = constant_columns(table)
    text = fit(shown, fmt, width, wrap={c: w for c, w in wrap.items() if c in shown}, drop_order=drop_order,
               floatfmt=".4g")
    if width is not None and widest(text) > width:
        text = fit(by_case(shown, rows), fmt, width, wrap={"case": (48, 32)}, drop_order=drop_order,
                   floatfmt=".4g") + "\n" + textwrap.fill("(each case named by its id: its params do not fit; --wide "
                                                          "shows them)", width)
    text = with_legend(text, table, width)
    head = textwrap.fill(head, width) if head and width is not None else head
    head = markdown_text(head) if head and fmt == MARKDOWN else head
    return f"{head}\n\n{text}" if head else text


MAX_EFFECT_PCT = 1000.0  # a minimum effect beyond 11x lets any regression a benchmark can show pass


def percent(text: str) -> float:
    """An option's minimum effect: a percentage from 0 to MAX_EFFECT_PCT (`nan` would make every comparison false,
    a pass; `1e308` would too, and is no more a threshold than `inf`)."""
    value = _number(text)
    if not (math.isfinite(value) and 0 <= value <= MAX_EFFECT_PCT):
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage from 0 to {MAX_EFFECT_PCT:g}")
    return value


def probability(text: str) -> float:
    """A significance level strictly between 0 and 1."""
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a significance level between 0 and 1, e.g. 0.01")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def natural_key(text: object) -> tuple[tuple[int, float | str], ...]:
    """A sort key that orders text as a person reads it: runs of digits compared as numbers, so `size-500` comes
    before `size-4500` and `size-5000` (as text, 500 sorts between them), the rest compared as text."""
    return tuple((0, float(part)) if part.isdecimal() else (1, part) for part in re.split(r"(\d+)", str(text)) if part)


def slug(text: str) -> str:
    """A file-name-safe version of a case id or device name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120]


def signed_percent(ratio: float | None) -> str:
    """A ratio as a signed change, `+12.3 %`; empty when there is none."""
    return "" if ratio is None or not np.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def file_stem(*names: str) -> str:
    """A file name for these names that no other names get: slugs (lossy: `a/b` and `a:b` give one slug, and
    are cut at 120 characters) joined, then a short hash of the names themselves."""
    digest = hashlib.sha1("\0".join(names).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return "_".join(slug(n)[:100] for n in names) + f"_{digest}"
