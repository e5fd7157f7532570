"""What one run's figure of a case can be trusted for, from the fields the run recorded beside it.

One rule that every reader applies (the reports' marks, `compare`'s verdicts, the levers, the training advisor):
a figure is disturbed by host contention only where the case was flagged `contended` and its timer includes the
host; it is in doubt where it did not converge (and no measured run-to-run noise says how far it can be trusted)
or ran throttled. It reads fields of the results format only, so the measuring side applies it too.

A flag is believed only where the figures recorded beside it do not contradict it (`contradictions`): a case
that says `converged` with a spread wider than any stopping rule of this suite accepts, or `contended` with no
contended sample, holds two answers to one question, and which one is right cannot be told from the file.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def holds(found: object, value: bool) -> bool:
    """Whether a field's value is exactly this boolean (absent, NaN or `"yes"` is neither True nor False)."""
    return isinstance(found, bool | np.bool_) and bool(found) == value


def flag(row: pd.Series, column: str, value: bool = True) -> bool:
    """Whether the row's field holds exactly this boolean."""
    return holds(row.get(column), value)


# Timers whose window holds the host out (suites/core/timing.py): a busy host delays when a sample starts, not
# what the device takes, so host contention says nothing about these figures.
DEVICE_TIMERS = ("cuda_event", "cuda_graph")


def host_disturbed(row: pd.Series) -> bool:
    """Whether host contention can have moved the row's figure: the run flagged the case `contended` and its
    timer includes the host (the wall clock, or a file that does not say which timer ran)."""
    return flag(row, "contended") and row.get("timer") not in DEVICE_TIMERS


def number(value: object) -> float | None:
    """A frame's cell as a float when it is a finite number, None for anything else (absent, text, a bool, NaN). A
    column of integers in every row (pytest-benchmark's `rounds` in a file without raw samples) gives numpy
    integers, which are not Python ints."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        return None
    return float(value) if np.isfinite(value) else None


def contention_share(value: object) -> float | None:
    """The share of contended samples in a case's `contention` record (suites/core/host_load.py), when it holds a
    finite number within [0, 1]; None for anything else (absent, text, a bool)."""
    share = number(value.get("share") if isinstance(value, dict) else None)
    return share if share is not None and 0 <= share <= 1 else None


# The widest spread (rel-IQR) a case of this suite can be `converged` with: a plateau, or rounds pooled, within
# twice the target (suites/core/timing.py, `converged`), the widest target of the profiles being quick's 5 %
# (suites/core/profiles.py). A case that says `converged` beside a wider spread contradicts itself.
MAX_CONVERGED_REL_IQR = 0.10
# Percentages of a peak that no figure can exceed: the suite reads a case above its roof as 100 and flags it.
PEAK_PERCENTS = ("pct_peak", "pct_achievable")


def _numbers(frame: pd.DataFrame, column: str) -> pd.Series:
    """A column as floats, NaN where it is absent or holds no number (a flag is no number)."""
    if column not in frame:
        return pd.Series(np.nan, index=frame.index)
    values = frame[column].map(lambda v: np.nan if isinstance(v, bool | np.bool_) else v)
    return pd.to_numeric(values, errors="coerce").astype(float)


def flagged(frame: pd.DataFrame, column: str, value: bool = True) -> pd.Series:
    """Per row, `flag` of the column: the field holds exactly this boolean."""
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column].map(lambda v: holds(v, value)).astype(bool)


# Each way a record can contradict itself, with what the legend of the `x` mark says of it.
CONTRADICTIONS = {
    "converged_spread": f"`converged` with a rel-IQR above {MAX_CONVERGED_REL_IQR:.0%}, wider than any stopping "
                        "rule accepts",
    "contended_share": "`contended` with a contended share of 0 in its `contention` record",
}


def contradictions(frame: pd.DataFrame) -> pd.DataFrame:
    """Per row, one boolean per entry of CONTRADICTIONS: whether its flags and its own figures disagree."""
    shares = frame["contention"].map(contention_share) if "contention" in frame else pd.Series(None, index=frame.index)
    return pd.DataFrame({
        "converged_spread": flagged(frame, "converged") & (_numbers(frame, "rel_iqr") > MAX_CONVERGED_REL_IQR),
        "contended_share": flagged(frame, "contended") & (pd.to_numeric(shares, errors="coerce") == 0),
    }, index=frame.index)


def above_hundred(frame: pd.DataFrame) -> pd.Series:
    """Per row, whether a percentage of a peak it holds (`pct_peak`, `pct_achievable`) is above 100: the figure
    beats the peak the same table divides it by, whether or not the run flagged it."""
    over = pd.Series(False, index=frame.index)
    for column in PEAK_PERCENTS:
        over |= _numbers(frame, column) > 100
    return over


def doubts(row: pd.Series, noise_measured: bool) -> list[str]:
    """Why one run's time of a case cannot be judged as it stands: `throttled` (a thermal or hardware slowdown,
    suites/observers/telemetry.py), and `not converged` where no measured run-to-run noise (rounds, a history)
    already says how far the case can be trusted; a `converged` flag that its own spread contradicts (the `x` mark)
    is not believed."""
    spread = row.get("rel_iqr")
    contradicted = flag(row, "converged") and isinstance(spread, int | float) and spread > MAX_CONVERGED_REL_IQR
    unconverged = flag(row, "converged", False) or contradicted
    reasons = [] if noise_measured or not unconverged else [
        "converged flag contradicted by its spread" if contradicted else "not converged"]
    return reasons + (["throttled"] if flag(row, "throttled") else [])
