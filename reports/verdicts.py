"""Verdicts of `python -m reports compare`: did a case get slower, judged by how it moves from run to run.

The baseline decides how (reports/baseline.py chooses its runs):

- **A history** (a directory with `baseline.MIN_HISTORY` runs of the candidate's machine or more): the runs and
  the candidate are nights, judged by reports/judge.py as the nightly meets them, the same judgement `history`
  and the history page replay. A case is `slower` when a change that held (three nights at least) left it the
  threshold or more above its reference and nobody accepted it (`python -m reports accept`); a one-night move
  beyond what the series has shown is not judged (exit 3: the next night, or a re-run, tells a step from a blip);
  a night on which the whole run moved is not judged either, and the shift is named instead of a list of cases.
- **One or two baseline runs** (an A/B comparison): the ratio of levels, candidate / baseline, its 95 % interval
  and a p-value (Student's t on log levels) from the case's run-to-run noise (reports/noise.py: the spread of its
  round medians, `--bench-rounds N`, and what all the cases of the two runs say together: the shift the whole run
  shares, taken out, and the noise one case shows about it), against a minimum effect (default 5 %, settable per
  group). The verdict is the rule of reports/change.py, the one definition of `faster` and `slower` in the
  reports. Where too few cases are shared to pool and no rounds were run, each run's level is assumed to carry
  `change.ASSUMED_NOISE_PCT` of run-to-run noise, the report says so in its header (with the smallest change it
  can then call slower), and the JSON names the noise source of every verdict (`rounds`, `pooled`, `rounds and
  pooled`, `history` or `assumed`). A whole run that moved by the threshold or more is named, and not judged.

What cannot carry a verdict says why, so that the gate (reports/gate.py) never passes it silently:
- a case with a value that cannot be a time (an infinite or negative round median, an invalid median) is
  `invalid`, named with the field, and fails the gate;
- a case `unsure` whose ratio lies beyond the threshold towards slower is not judged (exit 3) when what kept it
  from a verdict is missing evidence, not the case's measured noise (in a history: a one-night move, a regression
  this night may have undone, a candidate figure that could not be judged): host contention on the candidate
  (`extra_info.contended` where the timer includes the host, reports/change.py `host_disturbed`: event- and
  graph-timed cases are judged on their own noise however busy the host was), run-to-run noise that is only
  assumed (no rounds, no history), a level resting on fewer than `MIN_EVIDENCE` samples (too thin), a run
  that did not converge (without measured noise) or was throttled. Each such case names its reasons, and the
  message says what gives the missing evidence (a quiet machine, `--bench-rounds 3`). A case `unsure` within its
  measured run-to-run noise was judged: that noise is the case's own, and a re-run would not remove it;
- a candidate measured under host contention whose numbers alone say `slower` is `unsure` with the note
  "contention explains the change" (and not judged, above); a baseline measured under contention explains a
  `faster` the same way, which is reported under the gate's `not_gated` and cannot block a regression gate;
- a throttled run (thermal or hardware slowdown, power brake; see suites/observers/telemetry.py; running at the
  power cap is the normal state of a busy GPU and is not doubt) makes the case `unsure`.
Where the median SM clock of the newest baseline run and the candidate differs by `CLOCK_NOTE_PCT` or more, the
verdict's note says so: a change of clock explains a change of time. Correctness experiments (`stop_reason`
`once`) are not speed figures and get no verdict. Cases measured in one run only are listed as added or removed
(with the status, e.g. oom, that replaced a removed case's timing); a candidate cut short (`incomplete`) fails
the gate, and its unreached cases are listed as not measured, not as removed. Any difference of machine
identity (machine, driver, CUDA, cuDNN, torch, world size) is named in the header. `--json FILE` writes all of
it as one object (docs/results.md, docs/schema/compare.schema.json).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from reports import acceptances, baseline, change, judge, nights, noise
from reports.change import ASSUMED_NOISE_PCT, DEFAULT_THRESHOLD_PCT, VERDICTS
from reports.format import identity, trust
from reports.format.errors import InputError

DEFAULT_ALPHA = 0.01  # many cases are tested per run: a strict level keeps false alarms rare


CLOCK_NOTE_PCT = 3.0  # a difference of median SM clock that can explain a change of time of the same order


# A level resting on fewer samples (or round medians) than this is one sample or the mean of two: one outlier is
# the figure, and nothing says how far it is from the case's usual time.
MIN_EVIDENCE = 3


@dataclass
class Verdict:
    """The comparison of one case between two runs."""

    case: str
    group: str | None
    verdict: str
    ratio: float | None  # candidate level / baseline level
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    baseline_s: float | None
    candidate_s: float | None
    threshold_pct: float
    note: str = ""
    noise_pct: float | None = None  # the case's run-to-run noise (one run's level), measured or assumed
    basis: str = ""  # what the noise was estimated from, e.g. "3 rounds x 2 runs"
    source: str = "assumed"  # `rounds`, `pooled`, `rounds and pooled`, `history`, or `assumed` (nothing measured it)
    contended: bool = False  # a side was measured under host contention
    thin: bool = False  # a side's level rests on fewer than MIN_EVIDENCE samples
    looks: str = ""  # what the numbers alone say where doubt, thinness or contention made the verdict `unsure`
    not_judged: str = ""  # why a change towards slower could not be judged (blocks the gate with NOT_JUDGED)
    status: str = ""  # in a history, what the judgement says of the candidate's night (reports/judge.py)


@dataclass
class RunShift:
    """What the whole candidate run did, all its cases together: the shift they share (reports/noise.py `Pooled`
    for a pair, reports/judge.py's shift series for a history) and what the judgement says of it."""

    status: str  # judge's statuses: `same`, `moved` (not judged), `slower` (a shift that held), `undone`, ...
    ratio: float  # the median case's candidate / baseline level
    cases: int  # cases it rests on
    note: str = ""

    @property
    def blocks(self) -> bool:
        return self.status in (judge.MOVED, judge.UNDONE, judge.SLOWER)


@dataclass
class Comparison:
    """Every verdict plus the cases only one side measured or that hold no usable time."""

    verdicts: list[Verdict]
    added: list[str]
    removed: list[str]
    baseline: str
    candidate: str
    broken: list[str] = field(default_factory=list)  # timed in the baseline, now oom or error: a regression too
    incomplete: str | None = None  # why the candidate run was cut short, when it was
    unmeasured: list[str] = field(default_factory=list)  # timed in the baseline, not reached by the cut-short run
    identity_changes: list[str] = field(default_factory=list)  # e.g. "torch 2.5.1 -> 2.6.0"
    invalid: list[str] = field(default_factory=list)  # "case: candidate round_medians_s[2]=inf is not a time"
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    alpha: float = DEFAULT_ALPHA
    shift: RunShift | None = None  # the whole run's shift, where enough cases were shared to estimate it
    new_machine: str = ""  # why nothing could be judged: the baseline holds no run of the candidate's machine
    accepted: str = ""  # the acceptance of the candidate's own run (reports/accept.py), where there is one

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def regressed(self) -> bool:
        return self.count("slower") > 0 or bool(self.broken)

    @property
    def unjudged(self) -> list[Verdict]:
        """Changes towards slower that could not be judged: each may be a regression nobody can see."""
        return [v for v in self.verdicts if v.not_judged]

    @property
    def explained(self) -> list[Verdict]:
        """Changes towards faster that baseline contention explains: reported, never blocking a regression gate."""
        return [v for v in self.verdicts if "contention explains" in v.note and not v.not_judged]


def _doubts(base: list[pd.Series], cand: pd.Series, measured: bool) -> list[str]:
    """Why a timing cannot carry a verdict whatever the numbers say (reports/change.py, `doubts`), per side."""
    reasons = [f"{side} {why}" for side, row in [*(("baseline", r) for r in base), ("candidate", cand)]
               for why in trust.doubts(row, measured)]
    return list(dict.fromkeys(reasons))


def clock_note(base: pd.Series, cand: pd.Series) -> str:
    """`SM clock 1980 -> 1755 MHz (-11.4 %)` where both runs have a median SM clock and it moved enough to matter."""
    b, c = base.get("sm_clock_mhz"), cand.get("sm_clock_mhz")
    if not isinstance(b, int | float) or not isinstance(c, int | float) or not b > 0 or not np.isfinite(c):
        return ""
    moved = (c / b - 1) * 100
    return f"SM clock {b:.0f} -> {c:.0f} MHz ({moved:+.1f} %)" if abs(moved) >= CLOCK_NOTE_PCT else ""


def evidence(row: pd.Series) -> int | None:
    """How many measurements a run's level rests on: its round medians when it has several, else its samples."""
    rounds = noise.round_medians(row)
    if len(rounds) > 1:
        return len(rounds)
    samples = row.get("samples_s")
    if isinstance(samples, list):
        return len(samples)
    count = row.get("rounds")  # pytest-benchmark's count of samples, also in files without raw `data`
    return int(count) if isinstance(count, int | float) and math.isfinite(count) else None


def _thin(base: list[pd.Series], cand: pd.Series) -> str:
    found = [f"{side} {n} sample{'s' if n != 1 else ''}" for side, row in [("baseline", base[-1]), ("candidate", cand)]
             if (n := evidence(row)) is not None and n < MIN_EVIDENCE]
    return f"too thin to judge ({', '.join(found)}; at least {MIN_EVIDENCE} needed)" if found else ""


def _contention(row: pd.Series) -> str:
    """`contended (share 35 %)` when the run measured the case under host contention, else ''; for a timer that
    holds the host out of its window (trust.host_disturbed), also that the contention does not count."""
    if not trust.flag(row, "contended"):
        return ""
    detail = row.get("contention")
    share = detail.get("share") if isinstance(detail, dict) else None
    known = isinstance(share, int | float) and not isinstance(share, bool) and math.isfinite(share)
    text = f"contended (share {share:.0%})" if known else "contended"
    if trust.host_disturbed(row):
        return text
    return f"{text}, not counted: the {row.get('timer')} timer holds the host out"


def _contention_note(verdict: Verdict, base: list[pd.Series], cand: pd.Series) -> str:
    """Name the contention of either side, and turn a change that host contention explains into `unsure`: only
    where the timer includes the host (trust.host_disturbed); a device-timed case keeps its verdict."""
    cand_busy, base_busy = _contention(cand), next((t for t in map(_contention, base) if t), "")
    verdict.contended = bool(cand_busy or base_busy)
    explains = ((verdict.verdict == "slower" and trust.host_disturbed(cand))
                or (verdict.verdict == "faster" and any(map(trust.host_disturbed, base))))
    if explains:
        verdict.looks, verdict.verdict = verdict.verdict, "unsure"
    parts = [f"{side} {text}" for side, text in (("baseline", base_busy), ("candidate", cand_busy)) if text]
    return "; ".join(parts) + (": contention explains the change" if explains else "")


def not_judged(verdict: Verdict, doubts: list[str], cand: pd.Series) -> str:
    """Why the gate cannot judge this case (see the module docstring), or '': an `unsure` change beyond the
    threshold towards slower, kept from a verdict by missing evidence rather than by the case's measured noise."""
    if verdict.verdict != "unsure" or not verdict.ratio > 1 + verdict.threshold_pct / 100:
        return ""
    numbers = verdict.looks or verdict.verdict  # what the ratio and its interval alone say
    reasons = ["candidate host contention"] if trust.host_disturbed(cand) else []
    reasons += ["run-to-run noise unknown"] if numbers != "slower" and verdict.source == "assumed" else []
    reasons += ["too thin"] if verdict.thin else []
    return ", ".join(reasons + doubts)


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


def finish(verdict: Verdict, base: list[pd.Series], cand: pd.Series, doubts: list[str]) -> Verdict:
    """What both ways of judging add: contention and clock notes, and why the gate cannot judge the case."""
    notes = (verdict.note, _contention_note(verdict, base, cand), clock_note(base[-1], cand))
    verdict.note = "; ".join(note for note in notes if note)
    verdict.not_judged = not_judged(verdict, doubts, cand) or verdict.not_judged
    return verdict


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The cases with a speed figure, keyed by case (correctness experiments, `stop_reason` `once`, are not)."""
    if "median_s" not in frame:
        return frame.iloc[:0]
    timed = frame["median_s"].notna() & (frame["status"] != "invalid")  # a round median that is no time, say
    if "stop_reason" in frame:
        timed &= frame["stop_reason"] != "once"
    return frame[timed].set_index("case", drop=False)


def _one_run(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """The measured cases of a single run, keyed by case; more than one run is an InputError."""
    files = frame["file"].unique()
    if len(files) != 1:
        raise InputError(f"{label}: expected one result file, got {len(files)} runs")
    return _measured(frame)


def _with_status(case: str, frame: pd.DataFrame) -> str:
    """A case no longer timed, with why when the run recorded it (a case that now runs out of memory shows)."""
    rows = frame[frame["case"] == case]
    if rows.empty:
        return case
    row = rows.iloc[0]
    reason = row.get("reason")
    return f"{case} (now {row['status']}{': ' + str(reason) if isinstance(reason, str) else ''})"


def pair_pool(runs: dict[str, pd.DataFrame], order: list[str], cand: pd.DataFrame) -> noise.Pooled | None:
    """What all the cases shared by the candidate and the baseline run(s) say together (reports/noise.py
    `Pooled`): their figures that can be judged (trust), as log ratios of levels."""
    ratios = []
    for case in cand.index.intersection(pd.Index([c for f in order for c in runs[f].index]).unique()):
        rows = [runs[f].loc[case] for f in order if case in runs[f].index]
        if any(trust.host_disturbed(r) or trust.flag(r, "throttled") for r in [*rows, cand.loc[case]]):
            continue
        ratios.append(math.log(noise.level(cand.loc[case])) - float(np.mean(np.log([noise.level(r) for r in rows]))))
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
    pool = pair_pool(runs, order, cand)
    common = sorted(set(base.index) & set(cand.index), key=list(dict.fromkeys(base.index)).index)
    found = [decide([runs[f].loc[case] for f in order if case in runs[f].index], cand.loc[case],
                    group_thresholds.get(cand.loc[case, "group"], threshold_pct), alpha, noise_floor_pct, pool)
             for case in common]
    return found, pair_shift(pool, threshold_pct)


def night_label(frame: pd.DataFrame, file: str) -> str:
    """`2024-05-23 8c30fbc6 (0009_8c30fbc6.json)`: what a person bisecting needs to find the night."""
    row = frame[frame["file"] == file].iloc[0]
    when = row["datetime"].strftime("%Y-%m-%d") if pd.notna(row["datetime"]) else "no date"
    commit = str(row["commit"])[:8] if isinstance(row.get("commit"), str) else "no commit"
    return f"{when} {commit} ({str(file).rsplit('/', 1)[-1]})"


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f} %"


def _last_noise(found: judge.Judgement, row: int) -> float:
    """The noise a case was last judged by (log units): a night set aside (the whole run moved) has none of its own."""
    seen = found.tracks.sigma_at[row][np.isfinite(found.tracks.sigma_at[row])]
    return float(seen[-1]) if len(seen) else found.floor


def night_verdict(found: judge.Judgement, nights_of: nights.NightMatrix, frame: pd.DataFrame, cand: pd.Series,
                  base: list[pd.Series], threshold_pct: float) -> Verdict:
    """One case's verdict on the newest night of a history, from the judgement's outcome (module docstring)."""
    row, last = found.index(cand["case"]), found.nights - 1
    out = judge.outcome(found.tracks, row, last, found.threshold[row], found.shifts[last])
    own = found.tracks.raw_reference[row]
    reference = float(np.exp(own)) if np.isfinite(own) else float(np.median([noise.level(r) for r in base]))
    level = noise.level(cand)
    ratio = level / reference
    verdict = Verdict(case=cand["case"], group=cand.get("group"), verdict="unsure", ratio=ratio, ci_low=out.ci_low,
                      ci_high=out.ci_high, p_value=nights.p_value(math.log(ratio), out.sigma), baseline_s=reference,
                      candidate_s=level, threshold_pct=threshold_pct, status=out.status, source="history",
                      noise_pct=float(np.expm1(_last_noise(found, row)) * 100),
                      basis=f"{int(np.isfinite(nights_of.levels[row]).sum())} nights of this machine")
    def label(at: int) -> str:
        return night_label(frame, nights_of.files[at])

    beyond = ratio > 1 + threshold_pct / 100
    if out.status == judge.SLOWER:
        verdict.verdict = "slower"
        since = f" from {label(out.step.at)}, held {last - out.step.at + 1} nights" if out.step else ""
        verdict.note = (f"a change that held: {_percent(out.ratio)} against its reference{since}; open until it is "
                        "fixed or accepted (python -m reports accept)")
    elif out.status == judge.UNDONE:
        verdict.not_judged = (f"a regression{' from ' + label(out.step.at) if out.step else ''} is open, and this "
                              "night is back within the threshold of its reference: re-run to see it hold")
    elif out.status == judge.MOVED:
        verdict.not_judged = (f"moved {_percent(out.ratio)} on this night alone ({out.z:.0f} x its noise, beyond what "
                              f"this machine's cases show once in {judge.NIGHTS_PER_ALARM} nights): re-run; a "
                              f"regression if it holds {judge.PERSIST} nights")
    elif out.status == judge.FASTER:
        verdict.verdict = "faster"
        verdict.note = f"a change that held: {_percent(out.step.ratio)} from {label(out.step.at)}"
    elif out.status == judge.SHIFTED:
        verdict.note = "the whole run moved this night (below): its cases are judged as a whole, not one by one"
    elif out.status == judge.MISSING:
        verdict.note = "this night's figure cannot be judged (host contention or throttling)"
        verdict.looks = "slower" if beyond else ""
    elif out.status == judge.NEW:
        verdict.note = "no earlier figure of it could be judged"
        verdict.not_judged = "no earlier figure that could be judged" if beyond else ""
    else:
        verdict.verdict = "same" if 1 / (1 + threshold_pct / 100) <= out.ratio <= 1 + threshold_pct / 100 else "unsure"
        if out.status == judge.SEEN:
            verdict.note = f"moved {_percent(out.ratio)}, as far as on {out.blips} earlier nights it came back from"
        elif out.status == judge.MOVED_FASTER:
            verdict.note = f"moved {_percent(out.ratio)} on this night alone"
        elif out.status == judge.BEHIND:
            verdict.note = ("slower than the whole run (which moved more), no slower than its own reference: not a "
                            "regression of this case")
        elif verdict.verdict == "unsure":
            verdict.note = f"within this case's noise ({verdict.noise_pct:.1f} % per night, {verdict.basis})"
    return finish(verdict, base, cand, [f"candidate {why}" for why in trust.doubts(cand, True)])


def history_verdicts(base: pd.DataFrame, cand: pd.DataFrame, threshold_pct: float,
                     group_thresholds: dict[str, float], noise_floor_pct: float,
                     accepted: list[acceptances.Record]) -> tuple[list[Verdict], RunShift]:
    """Every common case judged on the newest night of a history (module docstring), and the whole run's shift."""
    frame = pd.concat([base, cand], ignore_index=True)
    found_nights = nights.matrix(frame, [*nights.night_order(base), str(cand["file"].iloc[0])])
    found = nights.run(found_nights, threshold_pct, group_thresholds, noise_floor_pct,
                       acceptances.for_nights(accepted, frame, found_nights.files))
    runs = {file: part for file, part in base.groupby("file", sort=False)}
    found_verdicts = []
    for case in [c for c in cand.index if c in set(base.index)]:
        rows = [runs[f].loc[case] for f in found_nights.files[:-1] if case in runs[f].index]
        found_verdicts.append(night_verdict(found, found_nights, frame, cand.loc[case], rows,
                                            group_thresholds.get(cand.loc[case, "group"], threshold_pct)))
    out = judge.outcome(found.shift, 0, found.nights - 1, float(np.median(found.threshold)))
    moved = sum(v.ratio > 1 + v.threshold_pct / 100 for v in found_verdicts)
    note = (f"the whole run moved {_percent(out.ratio)} this night ({moved} of {len(found_verdicts)} cases beyond "
            "their threshold): the machine, not one case; re-run" if out.status == judge.MOVED else
            f"the whole run is {_percent(out.ratio)} against its reference, a shift that held: the machine (a driver, "
            "a clock) or a change every case shares; accept it if it is meant" if out.status == judge.SLOWER else "")
    return found_verdicts, RunShift(out.status, out.ratio, int(np.isfinite(found_nights.levels[:, -1]).sum()), note)


def compare(base_frame: pd.DataFrame, cand_frame: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
            group_thresholds: dict[str, float] | None = None, alpha: float = DEFAULT_ALPHA,
            allow_different_devices: bool = False, last: int | None = baseline.DEFAULT_LAST,
            noise_floor_pct: float = noise.DEFAULT_NOISE_FLOOR_PCT,
            accepted: list[acceptances.Record] | None = None, directory: bool = False) -> Comparison:
    """Verdicts for every case measured in the candidate and the baseline (module docstring); cases measured in one
    only are added or removed. `accepted`: the acceptances kept with the history (reports/acceptances.py);
    `directory`: the baseline was given as a folder of runs (a history, which may hold the candidate's own run)."""
    _one_run(cand_frame, "candidate")
    group_thresholds, accepted = group_thresholds or {}, accepted or []
    own = acceptances.of_run(accepted, cand_frame)
    try:
        base_frame = baseline.select(base_frame, cand_frame, last, directory)
    except baseline.NewMachine as exc:
        return Comparison([], [], [], baseline="no run of this machine", candidate=cand_frame["file"].iloc[0],
                          threshold_pct=threshold_pct, alpha=alpha, new_machine="" if own else str(exc),
                          accepted=own.reason if own else "")
    baseline.check_devices(base_frame, cand_frame, allow_different_devices)
    base, cand = _measured(base_frame), _measured(cand_frame)
    if base_frame["file"].nunique() >= baseline.MIN_HISTORY:
        verdicts, shift = history_verdicts(base, cand, threshold_pct, group_thresholds, noise_floor_pct, accepted)
    else:
        verdicts, shift = pair_verdicts(base, cand, threshold_pct, group_thresholds, alpha, noise_floor_pct)
    rank = {v: i for i, v in enumerate(VERDICTS)}
    verdicts.sort(key=lambda v: (rank[v.verdict], -abs(np.log(v.ratio))))
    gone = sorted(set(base.index) - set(cand.index))
    status = cand_frame.drop_duplicates("case").set_index("case")["status"]
    failing = {case for case in gone if status.get(case) in ("oom", "error")}
    invalid = [f"{_with_status(case, cand_frame)}: candidate has no valid time" for case in gone
               if status.get(case) == "invalid"]
    incomplete = baseline.incomplete_reason(cand_frame)
    unreached = set(gone) - set(cand_frame["case"]) if incomplete else set()
    return Comparison(verdicts, added=sorted(set(cand.index) - set(base.index)),
                      removed=[_with_status(case, cand_frame) for case in gone
                               if case not in failing and case not in unreached and status.get(case) != "invalid"],
                      baseline=baseline.describe(base_frame), candidate=cand_frame["file"].iloc[0],
                      broken=[_with_status(case, cand_frame) for case in gone if case in failing],
                      incomplete=incomplete, unmeasured=sorted(unreached),
                      identity_changes=identity.differences(base_frame, cand_frame), invalid=invalid,
                      threshold_pct=threshold_pct, alpha=alpha, shift=shift, accepted=own.reason if own else "")


def smallest_slower(threshold_pct: float, alpha: float, noise_pct: float = ASSUMED_NOISE_PCT) -> float:
    """The smallest ratio two single runs can call `slower` when each run's level carries `noise_pct` of noise:
    its whole 95 % interval above the threshold, and p < alpha (reports/noise.py with one baseline run)."""
    error = math.log1p(noise_pct / 100) * math.sqrt(2)
    return math.exp(max(math.log1p(threshold_pct / 100) + float(stats.norm.ppf(0.975)) * error,
                        float(stats.norm.ppf(1 - alpha / 2)) * error))


def noise_sources(result: Comparison) -> dict[str, int]:
    """How many verdicts each noise source judged, e.g. {"rounds": 28, "assumed": 2}."""
    counts: dict[str, int] = {}
    for v in result.verdicts:
        counts[v.source] = counts.get(v.source, 0) + 1
    return counts
