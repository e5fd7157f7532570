"""`python -m reports compare BASELINE CANDIDATE`: did any case get slower? One verdict per case, for nightly CI.

The verdicts are reports/comparison.py's (each case judged by its run-to-run noise, the rule of reports/change.py),
the gate's exit status reports/gate.py's (`--fail-on-regression`: 0 passed, 1 failed, 3 could not judge). This
module is the command: its options, the report as text or markdown (a summary, the noise that judged it, the
cases that changed or are unsure), and the whole comparison as one JSON object (`--json FILE`; docs/results.md,
docs/schema/compare.schema.json).
"""

from __future__ import annotations

import argparse
import math
import textwrap
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from reports import acceptances, baseline, noise
from reports.change import ASSUMED_NOISE_PCT, DEFAULT_THRESHOLD_PCT, VERDICTS
from reports.comparison import Comparison, compare, noise_sources
from reports.format import strict_json
from reports.format.errors import InputError
from reports.format.load import load
from reports.format.outputs import refuse_inputs, write_text
from reports.format.schema import COMPARE_SCHEMA_VERSION
from reports.gate import FAILED, GATE_STATUS, NOT_JUDGED, PASSED, gate_failures, gate_not_judged, gate_status
from reports.pair_judgement import DEFAULT_ALPHA, smallest_slower
from reports.text import (
    MARKDOWN,
    fit,
    format_time,
    markdown_code,
    markdown_text,
    percent,
    probability,
    signed_percent,
    terminal_width,
)
from reports.verdicts import Verdict


def noise_line(result: Comparison) -> str:
    """What judged the verdicts; when nothing measured the run-to-run noise, that it is assumed, and what follows."""
    sources = noise_sources(result)
    if not sources.get("assumed"):
        return "run-to-run noise: measured (" + ", ".join(f"{n} from {s}" for s, n in sources.items()) + ")"
    which = "every case" if len(sources) == 1 else f"{sources['assumed']} case(s)"
    line = (f"run-to-run noise: unknown for {which} (no rounds, fewer than {noise.MIN_POOLED_CASES} cases shared, "
            f"fewer than {baseline.MIN_HISTORY} baseline runs): "
            f"each run's level is assumed to move {ASSUMED_NOISE_PCT:g} % between runs, so only a change beyond "
            f"{signed_percent(smallest_slower(result.threshold_pct, result.alpha))} can be called slower; measure it "
            "with --bench-rounds 3 or a directory of runs as BASELINE")
    assumed = [v for v in result.verdicts if v.source == "assumed"]
    slower, faster = (sum(v.verdict == w for v in assumed) for w in ("slower", "faster"))
    if slower and faster:  # changes both ways beyond the assumption: more likely the machine than the code
        line += (f". {slower} case(s) came out slower and {faster} faster: the runs differ more than the assumed "
                 "noise allows, as on a busy machine, so these verdicts say little about the code")
    return line


def _interval(v: Verdict) -> str:
    if v.ci_low is None or not np.isfinite(v.ci_low):
        return ""
    return f"[{signed_percent(v.ci_low)}, {signed_percent(v.ci_high)}]"


def verdict_table(verdicts: list[Verdict]) -> pd.DataFrame:
    """Rows of the report: times formatted, change in percent with its interval."""
    return pd.DataFrame([{"verdict": v.verdict, "case": v.case, "baseline": format_time(v.baseline_s),
                          "candidate": format_time(v.candidate_s), "change": signed_percent(v.ratio),
                          "95% CI": _interval(v),
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
    fmt = MARKDOWN if markdown else "simple"
    bold = "**" if markdown else ""
    head = "## Benchmark comparison\n\n" if markdown else ""
    shown = markdown_text if markdown else str  # names from the results files
    lines = [f"{head}baseline: {shown(result.baseline)}\ncandidate: {shown(result.candidate)}"]
    if result.identity_changes:
        differs = shown("; ".join(result.identity_changes))
        lines.append(f"{bold}identity differs: {differs}{bold} (a likely cause of any change below)")
    if result.verdicts:
        lines.append(noise_line(result) if width is None else textwrap.fill(noise_line(result), width))
    if result.shift is not None:
        whole = f"whole run: {result.shift.status}, {signed_percent(result.shift.ratio)} ({result.shift.cases} cases)"
        lines.append(whole + (f": {result.shift.note}" if result.shift.note else ""))
    if result.new_machine:
        lines.append(f"\n{bold}NEW MACHINE: {shown(result.new_machine)}{bold}")
    if result.accepted:
        lines.append(f"\nthis run was accepted as a reference: {shown(result.accepted)}")
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
            lines.append("\n" + case_list(title, cases, markdown))
    return "\n".join(lines)


LISTED = 10  # cases named one per line under a heading; more are counted by group (--json names every one)


def case_list(title: str, cases: list[str], markdown: bool) -> str:
    """Cases one per line under their heading (75 removed cases on one line read as none): the first `LISTED`,
    then the rest counted by group; in markdown every case, folded under the heading."""
    heading = f"{title.capitalize()} ({len(cases)}):"
    if markdown:
        items = "\n".join(f"- {markdown_code(c)}" for c in cases)
        return f"<details><summary>{heading}</summary>\n\n{items}\n\n</details>"
    shown = [f"  {c}" for c in cases[:LISTED]]
    rest = cases[LISTED:]
    if rest:
        groups = pd.Series([c.split("/", 1)[0] if "/" in c else "other" for c in rest]).value_counts(sort=False)
        counted = ", ".join(f"{group} {n}" for group, n in groups.items())
        shown.append(f"  ... and {len(rest)} more ({counted}); --json FILE lists every one")
    return "\n".join([heading, *shown])


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
            "shift": asdict(result.shift) if result.shift is not None else None, "new_machine": result.new_machine,
            "accepted": result.accepted,
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
    if args.last is not None and args.last < 1:
        raise InputError(f"--last {args.last}: expected a number of nights >= 1")
    if not (math.isfinite(args.noise_floor) and args.noise_floor >= 0):
        raise InputError(f"--noise-floor {args.noise_floor}: must be a finite percentage >= 0")
    if args.json:
        refuse_inputs("--json", [args.json], [args.baseline, args.candidate])
    base, cand = load([args.baseline]), load([args.candidate])
    result = compare(base, cand, args.threshold, group_thresholds, args.alpha, args.allow_different_devices,
                     args.last, args.noise_floor, acceptances.of_paths([args.baseline]),
                     directory=Path(args.baseline).is_dir())
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
    write_text(path, strict_json.dumps(found, indent=1) + "\n", option="--json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("compare", help="per-case verdicts between a baseline and a candidate run")
    parser.add_argument("baseline", help="pytest-benchmark JSON of the reference run (an A/B comparison), or a "
                        "directory of runs (a history: the candidate's machine's nights, judged as the nightly meets "
                        "them, with the acceptances kept there, accepted.jsonl)")
    parser.add_argument("candidate", help="pytest-benchmark JSON of the run to judge")
    parser.add_argument("--threshold", type=percent, default=DEFAULT_THRESHOLD_PCT,
                        help="minimum effect in percent (default: 5)")
    parser.add_argument("--threshold-group", action="append", default=[], metavar="GROUP=PERCENT",
                        help="minimum effect for one group, e.g. attention=10 (repeatable)")
    parser.add_argument("--alpha", type=probability, default=DEFAULT_ALPHA,
                        help="significance level of a change (default: 0.01)")
    parser.add_argument("--last", type=int, default=baseline.DEFAULT_LAST,
                        help="the newest N nights of a history directory are read (default: every night, as "
                        "`history` and the history page read them)")
    parser.add_argument("--noise-floor", type=float, default=noise.DEFAULT_NOISE_FLOOR_PCT,
                        help="smallest run-to-run noise assumed for a case, percent (default: "
                        f"{noise.DEFAULT_NOISE_FLOOR_PCT:g})")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown, e.g. for $GITHUB_STEP_SUMMARY")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {FAILED} when any case is slower or fails now, holds a value that cannot be a "
                        "time, when the candidate run is incomplete, when the whole run's shift held, or when no case "
                        f"could be compared; else exit {NOT_JUDGED} (could not judge: re-run) when a change beyond the "
                        "threshold towards slower could not be told from noise (in a history: a one-night move, a "
                        "whole run that moved, a regression this night may have undone; candidate measured under "
                        "host contention with a timer that includes the host, run-to-run noise unknown, too few "
                        "samples, not converged, throttled) or the baseline holds no run of the candidate's machine; "
                        f"else {PASSED}. Exit 2 is a usage error")
    parser.add_argument("--allow-different-devices", action="store_true",
                        help="compare runs of different devices anyway (with a warning)")
    parser.add_argument("--json", help="also write the whole comparison to this JSON file (verdicts, the gate's "
                        "result, added, removed and not measured cases, noise sources, identity differences)")
    parser.add_argument("--wide", action="store_true", help="every column, however wide (default: fit the terminal)")
    parser.set_defaults(func=run)
