"""`python -m reports compare BASELINE CANDIDATE`: did any case get slower? One verdict per case, for nightly CI.

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

What cannot carry a verdict says why, and the gate (`--fail-on-regression`) does not pass it silently. Its exit
status has three answers: 0 passed (every case judged, none slower), 1 failed (a regression, or a comparison
that is broken), `NOT_JUDGED` = 3 could not judge (no regression found, but a change towards slower could not be
told from the machine's noise: re-run); 2 stays the usage error of every command. A regression wins over
could-not-judge. So:
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

import argparse
import math
import textwrap
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from reports import change, noise
from reports.change import ASSUMED_NOISE_PCT, DEFAULT_THRESHOLD_PCT, VERDICTS
from reports.format import identity, strict_json, trust
from reports.format.errors import InputError
from reports.format.load import load, warn
from reports.format.schema import COMPARE_SCHEMA_VERSION
from reports.text import fit, format_time, percent, probability, terminal_width

DEFAULT_ALPHA = 0.01  # many cases are tested per run: a strict level keeps false alarms rare
CLOCK_NOTE_PCT = 3.0  # a difference of median SM clock that can explain a change of time of the same order
DEFAULT_LAST = 5  # baseline runs taken from a history directory
# A level resting on fewer samples (or round medians) than this is one sample or the mean of two: one outlier is
# the figure, and nothing says how far it is from the case's usual time.
MIN_EVIDENCE = 3
# The gate's exit statuses (2 is every command's usage error, reports/__main__.py): could-not-judge differs from
# both a pass and a regression, so that a CI job can re-run instead of going green or red on noise.
PASSED, FAILED, NOT_JUDGED = 0, 1, 3
GATE_STATUS = {PASSED: "passed", FAILED: "failed", NOT_JUDGED: "not judged"}


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


def gate_failures(result: Comparison) -> list[str]:
    """Why `--fail-on-regression` fails (exit 1): a regression, or a comparison that is broken."""
    failures = []
    if result.regressed:
        failures.append(f"{result.count('slower')} case(s) slower, {len(result.broken)} timed before and "
                        "failing now")
    if result.invalid:
        failures.append(f"{len(result.invalid)} case(s) hold values that cannot be times: "
                        + "; ".join(result.invalid))
    if result.incomplete:
        failures.append(f"the candidate run is incomplete ({result.incomplete}): {len(result.unmeasured)} "
                        "baseline case(s) were not measured")
    if not result.verdicts:
        failures.append("no case was timed in both runs: nothing was compared")
    return failures


# What gives the evidence a reason of `not_judged` lacks (the reason's words -> what to do), in the message's order.
ROUNDS = "measure each case's run-to-run noise: --bench-rounds 3 (or a directory of good runs as BASELINE)"
REMEDIES = {
    "contention": "re-run where nothing else takes the host's CPUs (a quiet machine, a runner given this one job)",
    "noise unknown": ROUNDS,
    "not converged": ROUNDS,
    "too thin": ROUNDS,
    "throttled": "re-run once the GPU is no longer throttled (its cooling, its power brake)",
}


def gate_not_judged(result: Comparison) -> list[str]:
    """Why `--fail-on-regression` cannot pass (exit NOT_JUDGED when nothing failed): each change towards slower
    that could not be judged, with its reasons, and what to do to judge it."""
    cases = result.unjudged
    if not cases:
        return []
    found = "; ".join(f"{v.case} {_pct(v.ratio)} ({v.not_judged})" for v in cases)
    todo = dict.fromkeys(text for key, text in REMEDIES.items() if any(key in v.not_judged for v in cases))
    return [f"{len(cases)} change(s) beyond the threshold towards slower could not be judged: {found}",
            "to judge them: " + "; ".join(todo)]


def gate_status(result: Comparison) -> int:
    """The gate's exit status: FAILED wins over NOT_JUDGED, which wins over PASSED."""
    return FAILED if gate_failures(result) else NOT_JUDGED if result.unjudged else PASSED


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


def noise_line(result: Comparison) -> str:
    """What judged the verdicts; when nothing measured the run-to-run noise, that it is assumed, and what follows."""
    sources = noise_sources(result)
    if not sources.get("assumed"):
        return "run-to-run noise: measured (" + ", ".join(f"{n} from {s}" for s, n in sources.items()) + ")"
    which = "every case" if len(sources) == 1 else f"{sources['assumed']} case(s)"
    line = (f"run-to-run noise: unknown for {which} (no rounds, fewer than {noise.MIN_HISTORY} baseline runs): "
            f"each run's level is assumed to move {ASSUMED_NOISE_PCT:g} % between runs, so only a change beyond "
            f"{_pct(smallest_slower(result.threshold_pct, result.alpha))} can be called slower; measure it with "
            "--bench-rounds 3 or a directory of runs as BASELINE")
    assumed = [v for v in result.verdicts if v.source == "assumed"]
    slower, faster = (sum(v.verdict == w for v in assumed) for w in ("slower", "faster"))
    if slower and faster:  # changes both ways beyond the assumption: more likely the machine than the code
        line += (f". {slower} case(s) came out slower and {faster} faster: the runs differ more than the assumed "
                 "noise allows, as on a busy machine, so these verdicts say little about the code")
    return line


def _pct(ratio: float | None) -> str:
    return "" if ratio is None or not np.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def _interval(v: Verdict) -> str:
    if v.ci_low is None or not np.isfinite(v.ci_low):
        return ""
    return f"[{_pct(v.ci_low)}, {_pct(v.ci_high)}]"


def verdict_table(verdicts: list[Verdict]) -> pd.DataFrame:
    """Rows of the report: times formatted, change in percent with its interval."""
    return pd.DataFrame([{"verdict": v.verdict, "case": v.case, "baseline": format_time(v.baseline_s),
                          "candidate": format_time(v.candidate_s), "change": _pct(v.ratio), "95% CI": _interval(v),
                          "p": "" if v.p_value is None else f"{v.p_value:.2g}",
                          "noise": "" if v.noise_pct is None else f"{v.noise_pct:.1f} %",
                          "threshold": f"{v.threshold_pct:g} %",
                          "note": f"not judged ({v.not_judged}); {v.note}" if v.not_judged else v.note}
                         for v in verdicts])


# Columns left out first when a table must fit the terminal (the case, verdict and change always stay).
DROP_ORDER = ["threshold", "p", "noise", "baseline", "candidate", "95% CI"]
WRAP = {"case": (64, 44), "note": (40, 24)}


def _table(verdicts: list[Verdict], fmt: str, width: int | None) -> str:
    table = verdict_table(verdicts)
    if table["threshold"].nunique() == 1:  # one threshold for all: said in the header, not on every row
        table = table.drop(columns="threshold")
    return fit(table, fmt, width, wrap=WRAP, drop_order=DROP_ORDER)


def summary_line(result: Comparison) -> str:
    counts = ", ".join(f"{result.count(v)} {v}" for v in VERDICTS)
    unmeasured = f", {len(result.unmeasured)} not measured" if result.incomplete else ""
    invalid = f", {len(result.invalid)} invalid" if result.invalid else ""
    unjudged = f", {len(result.unjudged)} not judged" if result.unjudged else ""
    return (f"{counts}{unjudged}; {len(result.broken)} failing now{invalid}{unmeasured}, {len(result.added)} added, "
            f"{len(result.removed)} removed; threshold {result.threshold_pct:g} %")


def render(result: Comparison, markdown: bool, width: int | None = None) -> str:
    """The report: summary, the cases that changed or are unsure, then (collapsed in markdown) the same ones."""
    fmt = "github" if markdown else "simple"
    bold = "**" if markdown else ""
    head = "## Benchmark comparison\n\n" if markdown else ""
    lines = [f"{head}baseline: {result.baseline}\ncandidate: {result.candidate}"]
    if result.identity_changes:
        lines.append(f"{bold}identity differs: {'; '.join(result.identity_changes)}{bold} (a likely cause of any "
                     "change below)")
    if result.verdicts:
        lines.append(noise_line(result) if width is None else textwrap.fill(noise_line(result), width))
    lines += ["", summary_line(result)]
    if result.regressed:
        lines.append(f"\n{bold}REGRESSION: {result.count('slower')} case(s) slower, {len(result.broken)} timed "
                     f"before and failing now{bold}")
    if result.unjudged:
        lines.append(f"\n{bold}NOT JUDGED: {len(result.unjudged)} change(s) towards slower could not be told from "
                     f"the machine's noise (below: not judged); no pass{bold}")
    if result.explained:
        lines.append(f"\n{len(result.explained)} change(s) towards faster measured on a baseline under host "
                     "contention, which explains them: unsure, not gated")
    if result.incomplete:
        lines.append(f"\n{bold}INCOMPLETE candidate: {result.incomplete}; cases it did not reach are not "
                     f"measured, neither passed nor removed{bold}")
    notable = [v for v in result.verdicts if v.verdict != "same"]
    same = [v for v in result.verdicts if v.verdict == "same"]
    if notable:
        lines.append("\n" + _table(notable, fmt, width))
    if same:
        table = _table(same, fmt, width)
        lines.append(f"\n<details><summary>{len(same)} cases the same</summary>\n\n{table}\n\n</details>"
                     if markdown else f"\n{table}")
    for title, cases in (("invalid (values that cannot be times)", result.invalid), ("failing now", result.broken),
                         ("not measured (run incomplete)", result.unmeasured), ("added", result.added),
                         ("removed", result.removed)):
        if cases:
            lines.append(f"\n{title.capitalize()} ({len(cases)}): " + ", ".join(f"`{c}`" if markdown else c
                                                                               for c in cases))
    return "\n".join(lines)


def document(result: Comparison, gate: bool) -> dict:
    """The whole comparison as one JSON object (docs/results.md, "compare --json"; docs/schema/compare.schema.json)."""
    status = gate_status(result)
    return {"schema_version": COMPARE_SCHEMA_VERSION, "baseline": result.baseline, "candidate": result.candidate,
            "threshold_pct": result.threshold_pct, "alpha": result.alpha,
            "gate": {"enabled": gate, "passed": status == PASSED, "status": GATE_STATUS[status], "exit_code": status,
                     "failures": gate_failures(result), "not_judged": gate_not_judged(result),
                     "not_gated": [f"{v.case}: {v.note}" for v in result.explained]},
            "counts": {v: result.count(v) for v in VERDICTS},
            "noise": {"sources": noise_sources(result), "assumed_pct": ASSUMED_NOISE_PCT,
                      "smallest_slower_pct": (smallest_slower(result.threshold_pct, result.alpha) - 1) * 100},
            "identity_changes": result.identity_changes, "incomplete": result.incomplete,
            "verdicts": [asdict(v) for v in result.verdicts], "added": result.added, "removed": result.removed,
            "failing_now": result.broken, "not_measured": result.unmeasured, "invalid": result.invalid}


def parse_group_thresholds(items: list[str]) -> dict[str, float]:
    """`attention=10` -> {'attention': 10.0}; a malformed item is an InputError naming it."""
    out = {}
    for item in items:
        group, _, value = item.partition("=")
        try:
            out[group] = percent(value)
        except argparse.ArgumentTypeError as exc:
            raise InputError(f"--threshold-group {item!r}: {exc}; expected GROUP=PERCENT, e.g. attention=10") \
                from None
        if not group:
            raise InputError(f"--threshold-group {item!r}: expected GROUP=PERCENT, e.g. attention=10")
    return out


def run(args: argparse.Namespace) -> int:
    group_thresholds = parse_group_thresholds(args.threshold_group)
    if args.last < 1:
        raise InputError(f"--last {args.last}: expected a number of baseline runs >= 1")
    if not (math.isfinite(args.noise_floor) and args.noise_floor >= 0):
        raise InputError(f"--noise-floor {args.noise_floor}: must be a finite percentage >= 0")
    base, cand = load([args.baseline]), load([args.candidate])
    result = compare(base, cand, args.threshold, group_thresholds, args.alpha, args.allow_different_devices,
                     args.last, args.noise_floor)
    if args.json:
        write_document(document(result, args.fail_on_regression), args.json)
    print(render(result, args.markdown, None if args.wide or args.markdown else terminal_width()))
    if not args.fail_on_regression:
        return PASSED
    for failure in gate_failures(result):
        print(f"gate failed: {failure}")
    status = gate_status(result)
    if status == NOT_JUDGED:
        print("\n".join(f"gate not judged: {line}" for line in gate_not_judged(result)))
        print(f"gate: exit {NOT_JUDGED}, could not judge: not a pass and not a regression; re-run as above")
    return status


def write_document(found: dict, path: str) -> None:
    """The comparison as strict JSON; a path that cannot be written is an InputError before anything is printed."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(strict_json.dumps(found, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"--json {path}: cannot write ({exc.strerror or exc})") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("compare", help="per-case verdicts between a baseline and a candidate run")
    parser.add_argument("baseline", help="pytest-benchmark JSON of the reference run, or a directory of good runs "
                        "(a history: the last --last runs of the candidate's machine are the baseline)")
    parser.add_argument("candidate", help="pytest-benchmark JSON of the run to judge")
    parser.add_argument("--threshold", type=percent, default=DEFAULT_THRESHOLD_PCT,
                        help="minimum effect in percent (default: 5)")
    parser.add_argument("--threshold-group", action="append", default=[], metavar="GROUP=PERCENT",
                        help="minimum effect for one group, e.g. attention=10 (repeatable)")
    parser.add_argument("--alpha", type=probability, default=DEFAULT_ALPHA,
                        help="significance level of a change (default: 0.01)")
    parser.add_argument("--last", type=int, default=DEFAULT_LAST,
                        help=f"baseline runs taken from a history directory (default: {DEFAULT_LAST})")
    parser.add_argument("--noise-floor", type=float, default=noise.DEFAULT_NOISE_FLOOR_PCT,
                        help="smallest run-to-run noise assumed for a case, percent (default: "
                        f"{noise.DEFAULT_NOISE_FLOOR_PCT:g})")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown, e.g. for $GITHUB_STEP_SUMMARY")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {FAILED} when any case is slower or fails now, holds a value that cannot be a "
                        "time, when the candidate run is incomplete, or when no case could be compared; else exit "
                        f"{NOT_JUDGED} (could not judge: re-run) when a change beyond the threshold towards slower "
                        "could not be told from noise (candidate measured under host contention with a timer that "
                        "includes the host, run-to-run noise unknown, too few samples, not converged, throttled); "
                        f"else {PASSED}. Exit 2 is a usage error")
    parser.add_argument("--allow-different-devices", action="store_true",
                        help="compare runs of different devices anyway (with a warning)")
    parser.add_argument("--json", help="also write the whole comparison to this JSON file (verdicts, the gate's "
                        "result, added, removed and not measured cases, noise sources, identity differences)")
    parser.add_argument("--wide", action="store_true", help="every column, however wide (default: fit the terminal)")
    parser.set_defaults(func=run)
