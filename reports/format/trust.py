"""What one run's figure of a case can be trusted for, from the fields the run recorded beside it.

One rule that every reader applies (the reports' marks, `compare`'s verdicts, the levers, the training advisor):
a figure is disturbed by host contention only where the case was flagged `contended` and its timer includes the
host; it is in doubt where it did not converge (and no measured run-to-run noise says how far it can be trusted)
or ran throttled. It reads fields of the results format only, so the measuring side applies it too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def flag(row: pd.Series, column: str, value: bool = True) -> bool:
    """Whether the row's field holds exactly this boolean (absent or NaN is neither True nor False)."""
    found = row.get(column)
    return isinstance(found, bool | np.bool_) and bool(found) == value


# Timers whose window holds the host out (suites/core/timing.py): a busy host delays when a sample starts, not
# what the device takes, so host contention says nothing about these figures.
DEVICE_TIMERS = ("cuda_event", "cuda_graph")


def host_disturbed(row: pd.Series) -> bool:
    """Whether host contention can have moved the row's figure: the run flagged the case `contended` and its
    timer includes the host (the wall clock, or a file that does not say which timer ran)."""
    return flag(row, "contended") and row.get("timer") not in DEVICE_TIMERS


def doubts(row: pd.Series, noise_measured: bool) -> list[str]:
    """Why one run's time of a case cannot be judged as it stands: `throttled` (a thermal or hardware slowdown,
    suites/observers/telemetry.py), and `not converged` where no measured run-to-run noise (rounds, a history)
    already says how far the case can be trusted."""
    reasons = [] if noise_measured or not flag(row, "converged", False) else ["not converged"]
    return reasons + (["throttled"] if flag(row, "throttled") else [])
