"""`python -m reports compare BASELINE CANDIDATE`: did any case get slower? One verdict per case, for nightly CI.

A nightly job compares runs, so a verdict is judged against how much the case moves from one run to the next
(reports/noise.py): the spread of its round medians (`--bench-rounds N`) and, when BASELINE is a directory of
runs, the spread of the last K runs of the candidate's machine (`--last`, default 5), which are also the
baseline level, so one lucky or unlucky night is not the reference. From that noise come the ratio of levels,
candidate / baseline, its 95 % interval and a p-value (Student's t on log levels), against a minimum effect
(default 5 %, settable per group: attention kernels are noisier than a big GEMM).

`slower`: the whole interval lies above 1 + threshold and p < alpha; `faster`: the whole interval lies below
1 / (1 + threshold) and p < alpha; `same`: the ratio lies within the band; `unsure`: everything else, with the
reason: the change is outside the band but within the case's own run-to-run noise, or a run was throttled.
So `slower` means "at least threshold slower, beyond this case's run-to-run noise", and an `unsure` case never
fails CI. Two single runs without rounds carry no between-run information; they are judged, as before, from
their raw samples (a two-sided Mann-Whitney U test and a bootstrap interval of the ratio of medians), which
understates run-to-run noise: on this 2-core CPU shared with other jobs, two quick runs a minute apart made
nightly CI fail two times in three that way. A run that did not converge is then `unsure` too; with rounds it
is not, since the spread between rounds is what judges it. Cases measured in one run only are listed as added
or removed (with the status, e.g. oom, that replaced a removed case's timing), and any difference of machine
identity (machine, driver, CUDA, cuDNN, torch, world size) is named in the header.
Throttled means what makes a timing untrustworthy (thermal or hardware slowdown, power brake; see
suites/observers/telemetry.py); running at the power cap is the normal state of a busy GPU and is not doubt. Where
the median SM clock of the newest baseline run and the candidate differs by `CLOCK_NOTE_PCT` or more, the
verdict's note says so: a change of clock explains a change of time. Correctness experiments (`stop_reason`
`once`) are not speed figures and get no verdict. A candidate cut short (`incomplete`) fails the gate, and its
unreached cases are listed as not measured, not as removed.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from tabulate import tabulate

from reports import identity, noise
from reports.errors import InputError
from reports.load import load, warn
from reports.table import format_time

VERDICTS = ("slower", "faster", "unsure", "same")
DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_ALPHA = 0.01  # many cases are tested per run: a strict level keeps false alarms rare
CLOCK_NOTE_PCT = 3.0  # a difference of median SM clock that can explain a change of time of the same order
DEFAULT_LAST = 5  # baseline runs taken from a history directory


@dataclass
class Verdict:
    """The comparison of one case between two runs."""

    case: str
    group: str | None
    verdict: str
    ratio: float | None  # candidate median / baseline median
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    baseline_s: float | None
    candidate_s: float | None
    threshold_pct: float
    note: str = ""
    noise_pct: float | None = None  # the case's run-to-run noise (one run's level), when known
    basis: str = "samples"  # what judged the change: "samples" of one run each, or rounds and runs


@dataclass
class Comparison:
    """Every verdict plus the cases only one side measured."""

    verdicts: list[Verdict]
    added: list[str]
    removed: list[str]
    baseline: str
    candidate: str
    broken: list[str] = field(default_factory=list)  # timed in the baseline, now oom or error: a regression too
    incomplete: str | None = None  # why the candidate run was cut short, when it was
    unmeasured: list[str] = field(default_factory=list)  # timed in the baseline, not reached by the cut-short run
    identity_changes: list[str] = field(default_factory=list)  # e.g. "torch 2.5.1 -> 2.6.0"

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def regressed(self) -> bool:
        return self.count("slower") > 0 or bool(self.broken)


BOOTSTRAP_MAX_SAMPLES = 5000  # per run; other projects' files can hold a million samples of one case


def ratio_interval(base: np.ndarray, cand: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of median(cand) / median(base), resampling each run independently.

    A run with more than BOOTSTRAP_MAX_SAMPLES samples is bootstrapped from a random subset of that size: the
    interval is then a little wider than the full data would give (conservative), and time and memory stay
    bounded (2000 resamples of a million samples would be 16 GB).
    """
    if len(base) < 2 or len(cand) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    base, cand = (x if len(x) <= BOOTSTRAP_MAX_SAMPLES else rng.choice(x, BOOTSTRAP_MAX_SAMPLES, replace=False)
                  for x in (base, cand))

    def ratio(b: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(c, axis=axis) / np.median(b, axis=axis)

    result = stats.bootstrap((base, cand), ratio, n_resamples=2000, batch=200, method="percentile",
                             vectorized=True, random_state=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _flag(row: pd.Series, column: str, value: bool) -> bool:
    """Whether the row's field holds exactly this boolean (absent or NaN is neither True nor False)."""
    field = row.get(column)
    return isinstance(field, bool | np.bool_) and bool(field) == value


def _doubt(base: list[pd.Series], cand: pd.Series, from_samples: bool) -> str:
    """Why a timing cannot carry a verdict whatever the numbers say, or '' when every run is trustworthy.

    Judged from one run's samples, a run that did not converge or has no raw samples cannot be judged; judged
    from rounds and runs, their spread already says how far a case can be trusted, and only throttling counts.
    """
    reasons = []
    sides = [("baseline", row) for row in base] + [("candidate", cand)]
    for side, row in sides:
        if from_samples and _flag(row, "converged", False):
            reasons.append(f"{side} not converged")
        if _flag(row, "throttled", True):
            reasons.append(f"{side} throttled")
        if from_samples and not isinstance(row.get("samples_s"), list):
            reasons.append(f"{side} has no raw samples")
    return ", ".join(dict.fromkeys(reasons))


def clock_note(base: pd.Series, cand: pd.Series) -> str:
    """`SM clock 1980 -> 1755 MHz (-11.4 %)` where both runs have a median SM clock and it moved enough to matter."""
    b, c = base.get("sm_clock_mhz"), cand.get("sm_clock_mhz")
    if not isinstance(b, int | float) or not isinstance(c, int | float) or not b > 0 or not np.isfinite(c):
        return ""
    change = (c / b - 1) * 100
    return f"SM clock {b:.0f} -> {c:.0f} MHz ({change:+.1f} %)" if abs(change) >= CLOCK_NOTE_PCT else ""


def _from_samples(verdict: Verdict, base: pd.Series, cand: pd.Series) -> None:
    """p-value and interval from the raw samples of two single-round runs (no between-run information)."""
    if isinstance(base.get("samples_s"), list) and isinstance(cand.get("samples_s"), list):
        b, c = np.asarray(base["samples_s"], float), np.asarray(cand["samples_s"], float)
        verdict.p_value = float(stats.mannwhitneyu(b, c, alternative="two-sided").pvalue)
        verdict.ci_low, verdict.ci_high = ratio_interval(b, c)


def _from_noise(verdict: Verdict, base: list[pd.Series], cand: pd.Series, noise_floor_pct: float) -> None:
    """Ratio of levels, interval and p-value judged by the case's run-to-run noise (reports/noise.py)."""
    found = noise.estimate(base, cand, noise_floor_pct)
    verdict.ratio, verdict.ci_low, verdict.ci_high, verdict.p_value = (found.ratio, found.ci_low, found.ci_high,
                                                                       found.p_value)
    verdict.baseline_s = float(np.median([noise.level(r) for r in base]))
    verdict.candidate_s = noise.level(cand)
    verdict.noise_pct, verdict.basis = found.noise_pct, found.basis


def decide(base: pd.Series | list[pd.Series], cand: pd.Series, threshold_pct: float, alpha: float = DEFAULT_ALPHA,
           noise_floor_pct: float = noise.DEFAULT_NOISE_FLOOR_PCT) -> Verdict:
    """The verdict for one case measured in the baseline run(s) and the candidate (see the module docstring)."""
    base = [base] if isinstance(base, pd.Series) else base
    limit = 1 + threshold_pct / 100
    newest = base[-1]
    verdict = Verdict(case=cand["case"], group=cand.get("group"), verdict="unsure",
                      ratio=cand["median_s"] / newest["median_s"], ci_low=None, ci_high=None, p_value=None,
                      baseline_s=newest["median_s"], candidate_s=cand["median_s"], threshold_pct=threshold_pct)
    from_samples = not noise.has_between_run_data(base, cand)
    if from_samples:  # nothing beyond one run's samples: the newest baseline run against the candidate
        _from_samples(verdict, newest, cand)
    else:
        _from_noise(verdict, base, cand, noise_floor_pct)
    doubt = _doubt([newest] if from_samples else base, cand, from_samples)
    significant = verdict.p_value is not None and verdict.p_value < alpha
    if doubt:
        verdict.note = doubt
    elif significant and verdict.ci_low > limit:
        verdict.verdict = "slower"
    elif significant and verdict.ci_high < 1 / limit:
        verdict.verdict = "faster"
    elif 1 / limit <= verdict.ratio <= limit:
        verdict.verdict = "same"
    elif not significant and not from_samples:
        verdict.note = f"within this case's run-to-run noise ({verdict.noise_pct:.1f} % per run, {verdict.basis})"
    elif not significant:
        verdict.note = f"not significant (p={verdict.p_value:.2g}, {len(newest['samples_s'])} vs " \
                       f"{len(cand['samples_s'])} samples)"
    else:
        verdict.note = f"the 95 % interval reaches inside the {threshold_pct:g} % threshold"
    verdict.note = "; ".join(note for note in (verdict.note, clock_note(newest, cand)) if note)
    return verdict


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The cases with a speed figure, keyed by case (correctness experiments, `stop_reason` `once`, are not)."""
    if "median_s" not in frame:
        return frame.iloc[:0]
    timed = frame["median_s"].notna()
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
    verdicts = [decide([runs[f].loc[case] for f in order if case in runs[f].index], cand.loc[case],
                       group_thresholds.get(cand.loc[case, "group"], threshold_pct), alpha, noise_floor_pct)
                for case in common]
    rank = {v: i for i, v in enumerate(VERDICTS)}
    verdicts.sort(key=lambda v: (rank[v.verdict], -abs(np.log(v.ratio))))
    gone = sorted(set(base.index) - set(cand.index))
    failing = set(cand_frame.loc[cand_frame["status"].isin(["oom", "error"]), "case"])
    incomplete = incomplete_reason(cand_frame)
    unreached = set(gone) - set(cand_frame["case"]) if incomplete else set()
    return Comparison(verdicts, added=sorted(set(cand.index) - set(base.index)),
                      removed=[_with_status(case, cand_frame) for case in gone
                               if case not in failing and case not in unreached],
                      baseline=_describe(base_frame), candidate=cand_frame["file"].iloc[0],
                      broken=[_with_status(case, cand_frame) for case in gone if case in failing],
                      incomplete=incomplete, unmeasured=sorted(unreached),
                      identity_changes=identity.differences(base_frame, cand_frame))


def incomplete_reason(frame: pd.DataFrame) -> str | None:
    """Why a run was cut short (its file's `incomplete_reason`), or None for a run that finished."""
    if "incomplete_reason" not in frame:
        return None
    reasons = frame["incomplete_reason"].dropna()
    return str(reasons.iloc[0]) if len(reasons) else None


def gate_failures(result: Comparison) -> list[str]:
    """Why `--fail-on-regression` must not pass: a regression, or a comparison that could not check enough."""
    failures = []
    if result.regressed:
        failures.append(f"{result.count('slower')} case(s) slower, {len(result.broken)} timed before and "
                        "failing now")
    if result.incomplete:
        failures.append(f"the candidate run is incomplete ({result.incomplete}): {len(result.unmeasured)} "
                        "baseline case(s) were not measured")
    if not result.verdicts:
        failures.append("no case was timed in both runs: nothing was compared")
    return failures


def _pct(ratio: float | None) -> str:
    return "" if ratio is None or not np.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def _interval(v: Verdict) -> str:
    if v.ci_low is None or not np.isfinite(v.ci_low):
        return ""
    return f"[{_pct(v.ci_low)}, {_pct(v.ci_high)}]"


def verdict_table(verdicts: list[Verdict]) -> list[dict]:
    """Rows for tabulate: times formatted, change in percent with its interval."""
    return [{"verdict": v.verdict, "case": v.case, "baseline": format_time(v.baseline_s),
             "candidate": format_time(v.candidate_s), "change": _pct(v.ratio), "95% CI": _interval(v),
             "p": "" if v.p_value is None else f"{v.p_value:.2g}",
             "noise": "" if v.noise_pct is None else f"{v.noise_pct:.1f} %", "threshold": f"{v.threshold_pct:g} %",
             "note": v.note} for v in verdicts]


def summary_line(result: Comparison) -> str:
    counts = ", ".join(f"{result.count(v)} {v}" for v in VERDICTS)
    unmeasured = f", {len(result.unmeasured)} not measured" if result.incomplete else ""
    return (f"{counts}; {len(result.broken)} failing now{unmeasured}, {len(result.added)} added, "
            f"{len(result.removed)} removed")


def render(result: Comparison, markdown: bool) -> str:
    """The report: summary, the cases that changed or are unsure, then (collapsed in markdown) the same ones."""
    fmt = "github" if markdown else "simple"
    head = "## Benchmark comparison\n\n" if markdown else ""
    lines = [f"{head}baseline: {result.baseline}\ncandidate: {result.candidate}"]
    if result.identity_changes:
        changed = "; ".join(result.identity_changes)
        lines.append(f"{'**' if markdown else ''}identity differs: {changed}{'**' if markdown else ''}"
                     " (a likely cause of any change below)")
    lines.append("")
    lines.append(summary_line(result))
    if result.regressed:
        lines.append(f"\n{'**' if markdown else ''}REGRESSION: {result.count('slower')} case(s) slower, "
                     f"{len(result.broken)} timed before and failing now{'**' if markdown else ''}")
    if result.incomplete:
        lines.append(f"\n{'**' if markdown else ''}INCOMPLETE candidate: {result.incomplete}; cases it did not "
                     f"reach are not measured, neither passed nor removed{'**' if markdown else ''}")
    notable = [v for v in result.verdicts if v.verdict != "same"]
    same = [v for v in result.verdicts if v.verdict == "same"]
    if notable:
        lines.append("\n" + tabulate(verdict_table(notable), headers="keys", tablefmt=fmt))
    if same:
        table = tabulate(verdict_table(same), headers="keys", tablefmt=fmt)
        lines.append(f"\n<details><summary>{len(same)} cases the same</summary>\n\n{table}\n\n</details>"
                     if markdown else f"\n{table}")
    for title, cases in (("failing now", result.broken), ("not measured (run incomplete)", result.unmeasured),
                         ("added", result.added), ("removed", result.removed)):
        if cases:
            lines.append(f"\n{title.capitalize()} ({len(cases)}): " + ", ".join(f"`{c}`" if markdown else c
                                                                               for c in cases))
    return "\n".join(lines)


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


def percent(text: str) -> float:
    """An option's minimum effect: a finite percentage >= 0 (`nan` would make every comparison false: a pass)."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite percentage >= 0")
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
        write_verdicts(result, args.json)
    print(render(result, args.markdown))
    failures = gate_failures(result) if args.fail_on_regression else []
    for failure in failures:
        print(f"gate failed: {failure}")
    return 1 if failures else 0


def write_verdicts(result: Comparison, path: str) -> None:
    """The verdicts as JSON records; a path that cannot be written is an InputError before anything is printed."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            pd.DataFrame([asdict(v) for v in result.verdicts]).to_json(fh, orient="records", indent=1)
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
                        help="significance level of the Mann-Whitney U test (default: 0.01)")
    parser.add_argument("--last", type=int, default=DEFAULT_LAST,
                        help=f"baseline runs taken from a history directory (default: {DEFAULT_LAST})")
    parser.add_argument("--noise-floor", type=float, default=noise.DEFAULT_NOISE_FLOOR_PCT,
                        help="smallest run-to-run noise assumed for a case, percent (default: "
                        f"{noise.DEFAULT_NOISE_FLOOR_PCT:g})")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown, e.g. for $GITHUB_STEP_SUMMARY")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when any case is slower or fails now, when the candidate run is incomplete, "
                        "or when no case could be compared")
    parser.add_argument("--allow-different-devices", action="store_true",
                        help="compare runs of different devices anyway (with a warning)")
    parser.add_argument("--json", help="also write the verdicts to this JSON file")
    parser.set_defaults(func=run)
