"""Verdicts of `python -m reports compare`: did a case get slower, judged by its run-to-run noise.

A nightly job compares runs, so a verdict is judged against how much the case moves from one run to the next
(reports/noise.py): the spread of its round medians (`--bench-rounds N`) and, when BASELINE is a directory of
runs, the spread of the last K runs of the candidate's machine (`--last`, default 5), which are also the
baseline level, so one lucky or unlucky night is not the reference. From that noise come the ratio of levels,
candidate / baseline, its 95 % interval and a p-value (Student's t on log levels), against a minimum effect
(default 5 %, settable per group: attention kernels are noisier than a big GEMM). The verdict is the rule of
reports/change.py, the one definition of `faster` and `slower` in the reports.

Two single runs without rounds carry no between-run information, and the samples of one run, taken within a
second or two, share that moment's machine state: judged from them, two full quick runs of one commit came out
"4 slower, 23 faster ... REGRESSION" on this project's shared CPU. So no verdict is taken from one run's
samples: each run's level is assumed to carry `change.ASSUMED_NOISE_PCT` of run-to-run noise, the report says so
in its header (with the smallest change it can then call slower), and the JSON names the noise source of every
verdict (`rounds`, `history`, `rounds and history` or `assumed`). A large change still fails the gate; a run
that did not converge is then `unsure` too.

What cannot carry a verdict says why, so that the gate (reports/gate.py) never passes it silently:
- a case with a value that cannot be a time (an infinite or negative round median, an invalid median) is
  `invalid`, named with the field, and fails the gate;
- a case `unsure` whose ratio lies beyond the threshold towards slower is not judged (exit 3) when what kept it
  from a verdict is missing evidence, not the case's measured noise: host contention on the candidate
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

from reports import change, noise
from reports.change import ASSUMED_NOISE_PCT, DEFAULT_THRESHOLD_PCT, VERDICTS
from reports.format import identity, trust
from reports.format.errors import InputError
from reports.format.load import warn

DEFAULT_ALPHA = 0.01  # many cases are tested per run: a strict level keeps false alarms rare


CLOCK_NOTE_PCT = 3.0  # a difference of median SM clock that can explain a change of time of the same order


DEFAULT_LAST = 5  # baseline runs taken from a history directory


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
    source: str = "assumed"  # `rounds`, `history`, `rounds and history`, or `assumed` (nothing measured it)
    contended: bool = False  # a side was measured under host contention
    thin: bool = False  # a side's level rests on fewer than MIN_EVIDENCE samples
    looks: str = ""  # what the numbers alone say where doubt, thinness or contention made the verdict `unsure`
    not_judged: str = ""  # why a change towards slower could not be judged (blocks the gate with NOT_JUDGED)


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


def _source(base: list[pd.Series], cand: pd.Series) -> str:
    rounds = any(len(noise.round_medians(r)) > 1 for r in [*base, cand])
    history = len(base) >= noise.MIN_HISTORY
    return {(True, True): "rounds and history", (True, False): "rounds", (False, True): "history"}.get(
        (rounds, history), "assumed")


def _level(verdict: Verdict, base: list[pd.Series], cand: pd.Series, noise_floor_pct: float) -> None:
    """Ratio of levels, interval and p-value judged by the case's run-to-run noise (reports/noise.py), or by
    ASSUMED_NOISE_PCT where the runs hold none."""
    verdict.source = _source(base, cand)
    floor = noise_floor_pct if verdict.source != "assumed" else max(noise_floor_pct, ASSUMED_NOISE_PCT)
    found = noise.estimate(base, cand, floor)
    verdict.ratio, verdict.ci_low, verdict.ci_high, verdict.p_value = (found.ratio, found.ci_low, found.ci_high,
                                                                       found.p_value)
    verdict.baseline_s = float(np.median([noise.level(r) for r in base]))
    verdict.candidate_s = noise.level(cand)
    verdict.noise_pct = found.noise_pct
    verdict.basis = found.basis if verdict.source != "assumed" else \
        f"assumed {floor:g} % (no rounds, {len(base)} baseline run{'s' if len(base) != 1 else ''})"


def decide(base: pd.Series | list[pd.Series], cand: pd.Series, threshold_pct: float, alpha: float = DEFAULT_ALPHA,
           noise_floor_pct: float = noise.DEFAULT_NOISE_FLOOR_PCT) -> Verdict:
    """The verdict for one case measured in the baseline run(s) and the candidate (see the module docstring)."""
    base = [base] if isinstance(base, pd.Series) else base
    verdict = Verdict(case=cand["case"], group=cand.get("group"), verdict="unsure", ratio=None, ci_low=None,
                      ci_high=None, p_value=None, baseline_s=None, candidate_s=None, threshold_pct=threshold_pct)
    _level(verdict, base, cand, noise_floor_pct)
    measured = verdict.source != "assumed"
    doubts = _doubts(base, cand, measured)
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
    notes = (verdict.note, _contention_note(verdict, base, cand), clock_note(base[-1], cand))
    verdict.note = "; ".join(note for note in notes if note)
    verdict.not_judged = not_judged(verdict, doubts, cand)
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


def history_baseline(base_frame: pd.DataFrame, cand_frame: pd.DataFrame, last: int) -> pd.DataFrame:
    """The last `last` runs of the candidate's machine in a baseline of several runs (a history directory).

    The candidate's own file and runs marked incomplete are left out; which runs are good enough to be a
    baseline is the caller's choice of directory (the nightly workflow keeps only runs that passed).
    """
    files = base_frame["file"].unique()
    if len(files) == 1:
        return base_frame
    frame = base_frame[~base_frame["file"].isin(cand_frame["file"].unique())]
    if "incomplete_reason" in frame:
        frame = frame[frame["incomplete_reason"].isna()]
    machine = cand_frame["machine_id"].iloc[0]
    same = frame[frame["machine_id"] == machine]
    if same.empty:
        found = ", ".join(sorted(frame["machine_id"].dropna().unique())) or "none"
        raise InputError(f"baseline: no run of the candidate's machine {machine!r} among {len(files)} runs "
                         f"(machines there: {found})")
    order = same.groupby("file")["datetime"].first().sort_values(kind="stable")
    return same[same["file"].isin(order.index[-last:])]


def _describe(frame: pd.DataFrame) -> str:
    files = frame["file"].unique()
    if len(files) == 1:
        return str(files[0])
    newest = frame.sort_values("datetime", kind="stable")["file"].iloc[-1]
    return f"{len(files)} runs of machine {frame['machine_id'].iloc[0]!r}, newest {newest}"


def check_devices(base: pd.DataFrame, cand: pd.DataFrame, allow: bool) -> None:
    """Runs of different devices are not a regression test: refuse unless asked, and warn when asked."""
    b, c = base["device"].iloc[0], cand["device"].iloc[0]
    if b == c:
        return
    message = f"baseline ran on {b!r}, candidate on {c!r}"
    if not allow:
        raise InputError(f"{message}; pass --allow-different-devices to compare anyway")
    warn(f"{message}: differences are the hardware's, not the code's")


def _with_status(case: str, frame: pd.DataFrame) -> str:
    """A case no longer timed, with why when the run recorded it (a case that now runs out of memory shows)."""
    rows = frame[frame["case"] == case]
    if rows.empty:
        return case
    row = rows.iloc[0]
    reason = row.get("reason")
    return f"{case} (now {row['status']}{': ' + str(reason) if isinstance(reason, str) else ''})"


def compare(base_frame: pd.DataFrame, cand_frame: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
            group_thresholds: dict[str, float] | None = None, alpha: float = DEFAULT_ALPHA,
            allow_different_devices: bool = False, last: int = DEFAULT_LAST,
            noise_floor_pct: float = noise.DEFAULT_NOISE_FLOOR_PCT) -> Comparison:
    """Verdicts for every case measured in the candidate and the baseline; cases measured in one only are added
    or removed. A baseline of several runs is a history: its last `last` runs of the candidate's machine."""
    _one_run(cand_frame, "candidate")
    base_frame = history_baseline(base_frame, cand_frame, last)
    check_devices(base_frame, cand_frame, allow_different_devices)
    base, cand = _measured(base_frame), _measured(cand_frame)
    runs = {file: part for file, part in base.groupby("file", sort=False)}
    order = base.groupby("file")["datetime"].first().sort_values(kind="stable").index
    group_thresholds = group_thresholds or {}
    common = sorted(set(base.index) & set(cand.index), key=list(dict.fromkeys(base.index)).index)
    verdicts, invalid = [], []
    for case in common:
        rows = [runs[f].loc[case] for f in order if case in runs[f].index]
        verdicts.append(decide(rows, cand.loc[case], group_thresholds.get(cand.loc[case, "group"], threshold_pct),
                               alpha, noise_floor_pct))
    rank = {v: i for i, v in enumerate(VERDICTS)}
    verdicts.sort(key=lambda v: (rank[v.verdict], -abs(np.log(v.ratio))))
    gone = sorted(set(base.index) - set(cand.index))
    status = cand_frame.drop_duplicates("case").set_index("case")["status"]
    failing = {case for case in gone if status.get(case) in ("oom", "error")}
    invalid += [f"{_with_status(case, cand_frame)}: candidate has no valid time" for case in gone
                if status.get(case) == "invalid"]
    incomplete = incomplete_reason(cand_frame)
    unreached = set(gone) - set(cand_frame["case"]) if incomplete else set()
    return Comparison(verdicts, added=sorted(set(cand.index) - set(base.index)),
                      removed=[_with_status(case, cand_frame) for case in gone
                               if case not in failing and case not in unreached and status.get(case) != "invalid"],
                      baseline=_describe(base_frame), candidate=cand_frame["file"].iloc[0],
                      broken=[_with_status(case, cand_frame) for case in gone if case in failing],
                      incomplete=incomplete, unmeasured=sorted(unreached),
                      identity_changes=identity.differences(base_frame, cand_frame), invalid=invalid,
                      threshold_pct=threshold_pct, alpha=alpha)


def incomplete_reason(frame: pd.DataFrame) -> str | None:
    """Why a run was cut short (its file's `incomplete_reason`), or None for a run that finished."""
    if "incomplete_reason" not in frame:
        return None
    reasons = frame["incomplete_reason"].dropna()
    return str(reasons.iloc[0]) if len(reasons) else None


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
