"""gpu_check rows of the numerics run (read through reports.format.load): every check passed, and each ran once, never
timed as a kernel."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from suites.gpu_check.rows import Row, read_step, sourced, status_text


def ran_once(out: Path, step: str) -> list[Row]:
    run = read_step(out, step)
    statuses = Counter(str(e.get("status")) for e in run.cases)
    measured = [e for e in run.cases if "median_s" in e]
    once = sum(e.get("stop_reason") == "once" for e in measured)
    failed = [e for e in run.cases if e.get("status") not in ("ok", "unsupported")]
    return sourced(run, [
        Row("numerics", "case statuses", str(dict(statuses)), "no error", not failed and bool(run.cases)),
        Row("numerics", "cases run once (not sampled)", f"{once}/{len(measured)}", "all",
            bool(measured) and once == len(measured)),
    ] + [Row("numerics failed", str(e.get("case")), status_text(e), "ok", False) for e in failed])
