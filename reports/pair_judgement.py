"""The verdict of an A/B comparison: each case measured in one or two baseline runs and in the candidate.

The ratio of levels, candidate / baseline, its 95 % interval and a p-value (Student's t on log levels) come from
the case's run-to-run noise (reports/noise.py: the spread of its round medians, `--bench-rounds N`, and what all
the cases of the two runs say together: the shift the whole run shares, taken out, and the noise one case shows
about it), against a minimum effect (default 5 %, settable per group). The verdict is the rule of
reports/change.py, the one definition of `faster` and `slower` in the reports. Where too few cases are shared to
pool and no rounds were run, each run's level is assumed to carry `change.ASSUMED_NOISE_PCT` of run-to-run noise,
the report says so in its header (with the smallest change it can then call slower, `smallest_slower`), and the
JSON names the noise source of every verdict (`rounds`, `pooled`, `rounds and pooled` or `assumed`). A whole run
that moved by the threshold or more is named, and not judged (`pair_shift`). A level resting on fewer than
`MIN_EVIDENCE` samples, or a timing the trust rule doubts (reports/format/trust.py), cannot carry a verdict
whatever the numbers say; what that means for the gate is reports/verdicts.py's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from reports import change, judge, noise
from reports.change import ASSUMED_NOISE_PCT
from reports.format import trust
from reports.verdicts import RunShift, Verdict, finish

DEFAULT_ALPHA = 0.01  # many cases are tested per run: a strict level keeps false alarms rare


# A level resting on fewer samples (or round medians) than this is one sample or the mean of two: one outlier is
# the figure, and nothing says how far it is from the case's usual time.
MIN_EVIDENCE = 3


def _doubts(base: list[pd.Series], cand: pd.Series, measured: bool) -> list[str]:
    """Why a timing cannot carry a verdict whatever the numbers say (reports/change.py, `doubts`), per side."""
    reasons = [f"{side} {why}" for side, row in [*(("baseline", r) for r in base), ("candidate", cand)]
               for why in trust.doubts(row, measured)]
    return list(dict.fromkeys(reasons))


def evidence(row: pd.Series) -> int | None:
    """How many measurements a run's level rests on: its round medians when it has several, else its samples."""
    rounds = noise.round_medians(row)
    if len(rounds) > 1:
        return len(rounds)
    samples = row.get("samples_s")
    if isinstance(samples, list):
        return len(samples)
    count = trust.number(row.get("rounds"))  # pytest-benchmark's count of samples, also in files without raw `data`
    return None if count is None else int(count)


def _thin(base: list[pd.Series], cand: pd.Series) -> str:
    found = [f"{side} {n} sample{'s' if n != 1 else ''}" for side, row in [("baseline", base[-1]), ("candidate", cand)]
             if (n := evidence(row)) is not None and n < MIN_EVIDENCE]
    return f"too thin to judge ({', '.join(found)}; at least {MIN_EVIDENCE} needed)" if found else ""


def _source(base: list[pd.Series], cand: pd.Series, pool: noise.Pooled | None) -> str:
    rounds = any(len(noise.round_medians(r)) > 1 for r in [*base, cand])
    return {(True, True): "rounds and pooled", (True, False): "rounds", (False, True): "pooled"}.get(
        (rounds, pool is not None), "assumed")


def _level(verdict: Verdict, base: list[pd.Series], cand: pd.Series, noise_floor_pct: float,
           pool: noise.Pooled | None) -> None:
    """Ratio of levels, interval and p-value judged by the case's run-to-run noise (reports/noise.py), or by
    ASSUMED_NOISE_PCT where the runs hold none."""
    verdict.source = _source(base, cand, pool)
    floor = noise_floor_pct if verdict.source != "assumed" else max(noise_floor_pct, ASSUMED_NOISE_PCT)
    found = noise.estimate(base, cand, floor, pool)
    verdict.ratio, verdict.ci_low, verdict.ci_high, verdict.p_value = (found.ratio, found.ci_low, found.ci_high,
                                                                       found.p_value)
    verdict.baseline_s = float(np.median([noise.level(r) for r in base]))
    verdict.candidate_s = noise.level(cand)
    verdict.noise_pct = found.noise_pct
    verdict.basis = found.basis if verdict.source != "assumed" else \
        f"assumed {floor:g} % (no rounds, {len(base)} baseline run{'s' if len(base) != 1 else ''})"


def decide(base: pd.Series | list[pd.Series], cand: pd.Series, threshold_pct: float, alpha: float = DEFAULT_ALPHA,
           noise_floor_pct: float = noise.DEFAULT_NOISE_FLOOR_PCT, pool: noise.Pooled | None = None) -> Verdict:
    """The verdict for one case measured in one or two baseline runs and the candidate (the module docstring)."""
    base = [base] if isinstance(base, pd.Series) else base
    verdict = Verdict(case=cand["case"], group=cand.get("group"), verdict="unsure", ratio=None, ci_low=None,
                      ci_high=None, p_value=None, baseline_s=None, candidate_s=None, threshold_pct=threshold_pct)
    _level(verdict, base, cand, noise_floor_pct, pool)
    measured = verdict.source != "assumed"
    # the cases' pooled spread is the run's noise, not this case's: it does not vouch for a case that did not converge
    doubts = _doubts(base, cand, measured and verdict.source != "pooled")
    doubt = ", ".join(doubts)
    thin = _thin(base, cand)
    verdict.thin = bool(thin)
    significant = verdict.p_value < alpha
    found = change.classify(verdict.ratio, verdict.ci_low, verdict.ci_high, threshold_pct, significant)
    if doubt or thin:
        verdict.note = "; ".join(n for n in (thin, doubt) if n)
        verdict.looks = found
    else:
        verdict.verdict = found
    if verdict.verdict == "unsure" and not verdict.note:
        where = f"this case's run-to-run noise ({verdict.noise_pct:.1f} % per run, {verdict.basis})" if measured \
            else f"the assumed run-to-run noise ({verdict.noise_pct:g} % per run)"
        verdict.note = f"within {where}" if not significant else \
            f"the 95 % interval reaches inside the {threshold_pct:g} % threshold"
    return finish(verdict, base, cand, doubts)


def pair_pool(rows: dict[str, list[pd.Series]], cands: dict[str, pd.Series]) -> noise.Pooled | None:
    """What all the cases shared by the candidate and the baseline run(s) say together (reports/noise.py
    `Pooled`): their figures that can be judged (trust), as log ratios of levels. `rows`: each shared case's
    baseline rows, `cands` its candidate row."""
    ratios = []
    for case, base in rows.items():
        if any(trust.host_disturbed(r) or trust.flag(r, "throttled") for r in [*base, cands[case]]):
            continue
        ratios.append(math.log(noise.level(cands[case])) - float(np.mean(np.log([noise.level(r) for r in base]))))
    return noise.pooled(np.array(ratios))


def pair_shift(pool: noise.Pooled | None, threshold_pct: float) -> RunShift | None:
    """The whole run's shift in an A/B comparison: every case together `slower` (a failure: one line for the run,
    not a list of cases) or `faster` where the median case moved the threshold or more. One pair cannot tell the
    machine's state from a change every case shares; a history can (reports/judge.py), and the note says so."""
    if pool is None:
        return None
    ratio = math.exp(pool.shift)
    limit = math.log1p(threshold_pct / 100)
    status = judge.SAME if abs(pool.shift) < limit else judge.SLOWER if pool.shift > 0 else judge.FASTER
    note = f"the whole run moved {(ratio - 1) * 100:+.1f} % ({pool.cases} cases, median): taken out of every case"
    if status == judge.SLOWER:
        note = (f"the whole run is {(ratio - 1) * 100:+.1f} % slower ({pool.cases} cases, median): a change every "
                "case shares, or the machine's state; one pair cannot tell which (re-run both on a quiet machine, "
                "or judge it against a history of runs)")
    return RunShift(status, ratio, pool.cases, note)


def pair_verdicts(base: pd.DataFrame, cand: pd.DataFrame, threshold_pct: float, group_thresholds: dict[str, float],
                  alpha: float, noise_floor_pct: float) -> tuple[list[Verdict], RunShift | None]:
    """Every common case judged against one or two baseline runs, with the pooled noise and shift."""
    runs = {file: part for file, part in base.groupby("file", sort=False)}
    order = list(base.groupby("file")["datetime"].first().sort_values(kind="stable").index)
    measured = set(cand.index)
    common = [case for case in dict.fromkeys(base.index) if case in measured]  # in the baseline's order
    rows = {case: [runs[f].loc[case] for f in order if case in runs[f].index] for case in common}
    cands = {case: cand.loc[case] for case in common}  # each row looked up once, for the pool and the verdict
    pool = pair_pool(rows, cands)
    found = [decide(rows[case], cands[case], group_thresholds.get(cands[case]["group"], threshold_pct), alpha,
                    noise_floor_pct, pool) for case in common]
    return found, pair_shift(pool, threshold_pct)


def smallest_slower(threshold_pct: float, alpha: float, noise_pct: float = ASSUMED_NOISE_PCT) -> float:
    """The smallest ratio two single runs can call `slower` when each run's level carries `noise_pct` of noise:
    its whole 95 % interval above the threshold, and p < alpha (reports/noise.py with one baseline run)."""
    error = math.log1p(noise_pct / 100) * math.sqrt(2)
    return math.exp(max(math.log1p(threshold_pct / 100) + float(stats.norm.ppf(0.975)) * error,
                        float(stats.norm.ppf(1 - alpha / 2)) * error))
