"""gpu_check rows of the numerics run: every check passed, and each ran once, never timed as a kernel."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from suites.checks.gpu_check import Row


def ran_once(out: Path) -> list[Row]:
    path = out / "numerics.json"
    if not path.exists():
        return [Row("numerics", "numerics.json not written", "the pytest run failed or was stopped", "", False)]
    run = json.loads(path.read_text())
    entries = run["benchmarks"] + run.get("not_measured", [])
    statuses = Counter(e["extra_info"].get("status") for e in entries)
    once = sum(e["extra_info"].get("stop_reason") == "once" for e in run["benchmarks"])
    failed = [e["extra_info"]["case"] for e in entries if e["extra_info"].get("status") == "error"]
    return [
        Row("numerics", "case statuses", str(dict(statuses)), "no error", not failed and bool(entries)),
        Row("numerics", "cases run once (not sampled)", f"{once}/{len(run['benchmarks'])}", "all",
            once == len(run["benchmarks"])),
    ] + [Row("numerics failed", case, "error", "ok", False) for case in failed]
