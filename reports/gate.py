"""The gate of `python -m reports compare --fail-on-regression`: its exit status, and why it did not pass.

For a CI gate "could not judge" and "passed" must differ. The status has three answers: 0 passed (every case
judged, none slower), 1 failed (a regression, or a comparison that is broken: a value that cannot be a time, a
candidate cut short, nothing compared), `NOT_JUDGED` = 3 could not judge (no regression found, but a change
towards slower could not be told from the machine's noise: re-run, with what gives the missing evidence); 2 stays
the usage error of every command. A regression wins over could-not-judge. Which verdicts are not judged, and
why, is reports/verdicts.py's.
"""

from __future__ import annotations

from reports.comparison import Comparison
from reports.text import signed_percent

# The gate's exit statuses (2 is every command's usage error, reports/__main__.py): could-not-judge differs from
# both a pass and a regression, so that a CI job can re-run instead of going green or red on noise.
PASSED, FAILED, NOT_JUDGED = 0, 1, 3


GATE_STATUS = {PASSED: "passed", FAILED: "failed", NOT_JUDGED: "not judged"}


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
    if result.shift is not None and result.shift.status == "slower":
        failures.append(result.shift.note)
    if not result.verdicts and not result.new_machine and not result.accepted:
        failures.append("no case was timed in both runs: nothing was compared")
    return failures


# What gives the evidence a reason of `not_judged` lacks (the reason's words -> what to do), in the message's order.
ROUNDS = "measure each case's run-to-run noise: --bench-rounds 3 (or a directory of earlier runs as BASELINE)"


REMEDIES = {
    "contention": "re-run where nothing else takes the host's CPUs (a quiet machine, a runner given this one job)",
    "noise unknown": ROUNDS,
    "not converged": ROUNDS,
    "contradicted": ROUNDS,
    "too thin": ROUNDS,
    "throttled": "re-run once the GPU is no longer throttled (its cooling, its power brake)",
    "night alone": "re-run (or wait for the next night): a move that holds is a regression, one that does not is not",
    "back within": "re-run (or wait for the next night) to see whether the regression is fixed",
    "earlier figure": "re-run where nothing else takes the host's CPUs: the case has no undisturbed earlier figure",
}


def gate_not_judged(result: Comparison) -> list[str]:
    """Why `--fail-on-regression` cannot pass (exit NOT_JUDGED when nothing failed): a new machine, a whole run
    that moved, each change towards slower that could not be judged, with its reasons, and what to do."""
    lines = [result.new_machine] if result.new_machine else []
    if result.shift is not None and result.shift.status in ("moved", "undone"):
        lines.append(result.shift.note or f"the whole run moved {signed_percent(result.shift.ratio)}: re-run")
    cases = result.unjudged
    if not cases:
        return lines
    found = "; ".join(f"{v.case} {signed_percent(v.ratio)} ({v.not_judged})" for v in cases)
    todo = dict.fromkeys(text for key, text in REMEDIES.items() if any(key in v.not_judged for v in cases))
    return [*lines, f"{len(cases)} change(s) beyond the threshold towards slower could not be judged: {found}",
            *(["to judge them: " + "; ".join(todo)] if todo else [])]


def gate_status(result: Comparison) -> int:
    """The gate's exit status: FAILED wins over NOT_JUDGED, which wins over PASSED."""
    return FAILED if gate_failures(result) else NOT_JUDGED if gate_not_judged(result) else PASSED
