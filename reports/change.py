"""What `faster` and `slower` mean, in every report that says it: one rule for a ratio of times and its interval.

A change of time is a ratio, new / old: candidate / baseline in `compare` (one case in two runs), variant /
baseline in `levers` (two cases of one run that differ in one lever). It is known to within a 95 % interval,
made from the noise of the two figures by the caller. With a minimum effect of `threshold_pct` (default 5 %):

- `slower`: the whole interval lies above 1 + threshold (and the change is significant, where the caller tests
  for it: `compare` asks p < alpha, since it tests many cases per run);
- `faster`: the whole interval lies below 1 / (1 + threshold) (the same);
- `same`: the ratio itself lies within [1 / (1 + threshold), 1 + threshold];
- `unsure`: anything else: a change beyond the threshold whose interval reaches back inside it.

So `faster` always reads "at least threshold faster, beyond the noise of what was compared". Where the noise
comes from is the caller's: `compare` uses each case's run-to-run noise (reports/noise.py, or an assumed one
when the runs hold none, `ASSUMED_NOISE_PCT`); `levers` uses the same per-case noise and the spread between the
lever's pairs. The training-step advisor (`suites/training/advise.py`) decides for one user model with a rule of
its own, a minimum gain and disjoint interquartile ranges of step times measured minutes apart in one sweep,
because it must rank settings from one short run per setting, without rounds; its docstring says so.
"""

from __future__ import annotations

import math

VERDICTS = ("slower", "faster", "unsure", "same")
DEFAULT_THRESHOLD_PCT = 5.0
# Without rounds or a history, how much a case moves from one run to the next is not known. Two quick runs of
# one commit on the shared 2-core CPU of this project's sessions (tests/data/run_cpu_quick.json and _b) moved
# their converged cases by up to 11 % and the others by up to 47 %: each run's level is assumed to carry this
# much noise (one standard deviation), so a change of about 1.42x (at the default threshold and alpha) is the
# smallest called slower from two single runs, and a 1.5x slowdown still is. (It cannot be more and still catch
# 1.5x: at 12 % the smallest would be 1.51x.)
ASSUMED_NOISE_PCT = 10.0


def classify(ratio: float, low: float | None, high: float | None, threshold_pct: float,
             significant: bool = True) -> str:
    """The verdict of a time ratio (new / old) with its 95 % interval, by the rule of the module docstring."""
    limit = 1 + threshold_pct / 100
    known = low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
    if known and significant and low > limit:
        return "slower"
    if known and significant and high < 1 / limit:
        return "faster"
    if 1 / limit <= ratio <= limit:
        return "same"
    return "unsure"
