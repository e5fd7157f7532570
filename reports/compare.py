"""`python -m reports compare BASELINE CANDIDATE`: did any case get slower? One verdict per case, for nightly CI.

A verdict needs both a real difference and a large enough one, read from the raw samples of the two runs:
- the ratio of medians, candidate / baseline, and a 95 % bootstrap interval of it (scipy.stats.bootstrap,
  each run resampled on its own), against a minimum effect (default 5 %, settable per group: attention
  kernels are noisier than a big GEMM);
- a two-sided Mann-Whitney U test (scipy), which assumes nothing about the shape of timing distributions
  (skewed, with outliers) and needs no equal variances.

`slower`: the whole interval lies above 1 + threshold and the rank test is significant; `faster`: the whole
interval lies below 1 / (1 + threshold) and the test is significant; `same`: the ratio lies within the band;
`unsure`: everything else: the ratio is outside the band but the samples cannot show that the change reaches
the threshold (too few, too noisy), or either run did not converge, was throttled, or has no raw samples.
So `slower` means "at least threshold slower, with 95 % confidence", and an `unsure` case never fails CI.
Throttled means what makes a timing untrustworthy (thermal or hardware slowdown, power brake; see
suites/observers/telemetry.py); running at the power cap is the normal state of a busy GPU and is not doubt. Where
the median SM clock of the two runs differs by `CLOCK_NOTE_PCT` or more, the verdict's note says so: a change of
clock explains a change of time. Correctness experiments (`stop_reason` `once`) are not speed figures and get no
verdict.
(On this 2-core CPU shared with other jobs, two back-to-back runs differed by +5.4 % [+2.4 %, +13 %] on one
case with fully separated samples: a rank test alone would have failed CI on noise.) Cases measured in one
run only are listed as added or removed (with the status, e.g. oom, that replaced a removed case's timing).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from tabulate import tabulate

from reports.errors import InputError
from reports.load import load, warn
from reports.table import format_time

VERDICTS = ("slower", "faster", "unsure", "same")
DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_ALPHA = 0.01  # many cases are tested per run: a strict level keeps false alarms rare
CLOCK_NOTE_PCT = 3.0  # a difference of median SM clock that can explain a change of time of the same order


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


@dataclass
class Comparison:
    """Every verdict plus the cases only one side measured."""

    verdicts: list[Verdict]
    added: list[str]
    removed: list[str]
    baseline: str
    candidate: str
    broken: list[str] = field(default_factory=list)  # timed in the baseline, now oom or error: a regression too

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


def _doubt(base: pd.Series, cand: pd.Series) -> str:
    """Why a timing cannot carry a verdict whatever the numbers say, or '' when both runs are trustworthy."""
    reasons = []
    for side, row in (("baseline", base), ("candidate", cand)):
        if _flag(row, "converged", False):
            reasons.append(f"{side} not converged")
        if _flag(row, "throttled", True):
            reasons.append(f"{side} throttled")
        if not isinstance(row.get("samples_s"), list):
            reasons.append(f"{side} has no raw samples")
    return ", ".join(reasons)


def clock_note(base: pd.Series, cand: pd.Series) -> str:
    """`SM clock 1980 -> 1755 MHz (-11.4 %)` where both runs have a median SM clock and it moved enough to matter."""
    b, c = base.get("sm_clock_mhz"), cand.get("sm_clock_mhz")
    if not isinstance(b, int | float) or not isinstance(c, int | float) or not b > 0 or not np.isfinite(c):
        return ""
    change = (c / b - 1) * 100
    return f"SM clock {b:.0f} -> {c:.0f} MHz ({change:+.1f} %)" if abs(change) >= CLOCK_NOTE_PCT else ""


def decide(base: pd.Series, cand: pd.Series, threshold_pct: float, alpha: float = DEFAULT_ALPHA) -> Verdict:
    """The verdict for one case measured in both runs (see the module docstring for the rule)."""
    limit = 1 + threshold_pct / 100
    ratio = cand["median_s"] / base["median_s"]
    verdict = Verdict(case=base["case"], group=base.get("group"), verdict="unsure", ratio=ratio, ci_low=None,
                      ci_high=None, p_value=None, baseline_s=base["median_s"], candidate_s=cand["median_s"],
                      threshold_pct=threshold_pct)
    doubt = _doubt(base, cand)
    if isinstance(base.get("samples_s"), list) and isinstance(cand.get("samples_s"), list):
        b, c = np.asarray(base["samples_s"], float), np.asarray(cand["samples_s"], float)
        verdict.p_value = float(stats.mannwhitneyu(b, c, alternative="two-sided").pvalue)
        verdict.ci_low, verdict.ci_high = ratio_interval(b, c)
    significant = verdict.p_value is not None and verdict.p_value < alpha
    if doubt:
        verdict.note = doubt
    elif significant and verdict.ci_low > limit:
        verdict.verdict = "slower"
    elif significant and verdict.ci_high < 1 / limit:
        verdict.verdict = "faster"
    elif 1 / limit <= ratio <= limit:
        verdict.verdict = "same"
    elif not significant:
        verdict.note = f"not significant (p={verdict.p_value:.2g}, {len(base['samples_s'])} vs " \
                       f"{len(cand['samples_s'])} samples)"
    else:
        verdict.note = f"the 95 % interval reaches inside the {threshold_pct:g} % threshold"
    verdict.note = "; ".join(note for note in (verdict.note, clock_note(base, cand)) if note)
    return verdict


def _one_run(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """The measured cases of a single run, keyed by case; more than one run is an InputError."""
    files = frame["file"].unique()
    if len(files) != 1:
        raise InputError(f"{label}: expected one result file, got {len(files)} runs")
    if "median_s" not in frame:
        return frame.iloc[:0]
    timed = frame["median_s"].notna()
    if "stop_reason" in frame:
        timed &= frame["stop_reason"] != "once"  # correctness experiments: not speed figures
    return frame[timed].set_index("case", drop=False)


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
            allow_different_devices: bool = False) -> Comparison:
    """Verdicts for every case measured in both runs; cases measured in one only are added or removed."""
    check_devices(base_frame, cand_frame, allow_different_devices)
    base, cand = _one_run(base_frame, "baseline"), _one_run(cand_frame, "candidate")
    group_thresholds = group_thresholds or {}
    common = [case for case in base.index if case in cand.index]
    verdicts = [decide(base.loc[case], cand.loc[case], group_thresholds.get(base.loc[case, "group"], threshold_pct),
                       alpha) for case in common]
    order = {v: i for i, v in enumerate(VERDICTS)}
    verdicts.sort(key=lambda v: (order[v.verdict], -abs(np.log(v.ratio))))
    gone = sorted(set(base.index) - set(cand.index))
    failing = set(cand_frame.loc[cand_frame["status"].isin(["oom", "error"]), "case"])
    return Comparison(verdicts, added=sorted(set(cand.index) - set(base.index)),
                      removed=[_with_status(case, cand_frame) for case in gone if case not in failing],
                      baseline=base_frame["file"].iloc[0], candidate=cand_frame["file"].iloc[0],
                      broken=[_with_status(case, cand_frame) for case in gone if case in failing])


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
             "p": "" if v.p_value is None else f"{v.p_value:.2g}", "threshold": f"{v.threshold_pct:g} %",
             "note": v.note} for v in verdicts]


def summary_line(result: Comparison) -> str:
    counts = ", ".join(f"{result.count(v)} {v}" for v in VERDICTS)
    return f"{counts}; {len(result.broken)} failing now, {len(result.added)} added, {len(result.removed)} removed"


def render(result: Comparison, markdown: bool) -> str:
    """The report: summary, the cases that changed or are unsure, then (collapsed in markdown) the same ones."""
    fmt = "github" if markdown else "simple"
    head = "## Benchmark comparison\n\n" if markdown else ""
    lines = [f"{head}baseline: {result.baseline}\ncandidate: {result.candidate}\n", summary_line(result)]
    if result.regressed:
        lines.append(f"\n{'**' if markdown else ''}REGRESSION: {result.count('slower')} case(s) slower, "
                     f"{len(result.broken)} timed before and failing now{'**' if markdown else ''}")
    notable = [v for v in result.verdicts if v.verdict != "same"]
    same = [v for v in result.verdicts if v.verdict == "same"]
    if notable:
        lines.append("\n" + tabulate(verdict_table(notable), headers="keys", tablefmt=fmt))
    if same:
        table = tabulate(verdict_table(same), headers="keys", tablefmt=fmt)
        lines.append(f"\n<details><summary>{len(same)} cases the same</summary>\n\n{table}\n\n</details>"
                     if markdown else f"\n{table}")
    for title, cases in (("failing now", result.broken), ("added", result.added), ("removed", result.removed)):
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
            out[group] = float(value)
        except ValueError:
            raise InputError(f"--threshold-group {item!r}: expected GROUP=PERCENT, e.g. attention=10") from None
        if not group or out[group] < 0:
            raise InputError(f"--threshold-group {item!r}: expected GROUP=PERCENT, e.g. attention=10")
    return out


def run(args: argparse.Namespace) -> int:
    base, cand = load([args.baseline]), load([args.candidate])
    if args.threshold < 0:
        raise InputError(f"--threshold {args.threshold}: must be a percentage >= 0")
    result = compare(base, cand, args.threshold, parse_group_thresholds(args.threshold_group), args.alpha,
                     args.allow_different_devices)
    print(render(result, args.markdown))
    if args.json:
        pd.DataFrame([asdict(v) for v in result.verdicts]).to_json(args.json, orient="records", indent=1)
    return 1 if args.fail_on_regression and result.regressed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("compare", help="per-case verdicts between a baseline and a candidate run")
    parser.add_argument("baseline", help="pytest-benchmark JSON of the reference run")
    parser.add_argument("candidate", help="pytest-benchmark JSON of the run to judge")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT,
                        help="minimum effect in percent (default: 5)")
    parser.add_argument("--threshold-group", action="append", default=[], metavar="GROUP=PERCENT",
                        help="minimum effect for one group, e.g. attention=10 (repeatable)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help="significance level of the Mann-Whitney U test (default: 0.01)")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown, e.g. for $GITHUB_STEP_SUMMARY")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any case is slower")
    parser.add_argument("--allow-different-devices", action="store_true",
                        help="compare runs of different devices anyway (with a warning)")
    parser.add_argument("--json", help="also write the verdicts to this JSON file")
    parser.set_defaults(func=run)
