"""Result files for the reports tests, derived from real runs: scaled timings, new dates, replicated entries.

Every helper starts from a real pytest-benchmark JSON of this suite (tests/data/run_cpu_quick*.json) and changes
only what a test needs changed, so the rest of the format stays real.
"""

from __future__ import annotations

import copy
from pathlib import Path

from reports.format import strict_json

DATA = Path(__file__).parent / "data"
RUN_A = DATA / "run_cpu_quick.json"  # real quick CPU run of bench/test_matmul.py
RUN_B = DATA / "run_cpu_quick_b.json"  # a second real run of the same suite on the same machine, right after
# two real runs of the quick matmul `square` cases with --bench-rounds 3, a minute apart, on the shared 2-core CPU
ROUNDS_A = DATA / "run_cpu_quick_rounds.json"
ROUNDS_B = DATA / "run_cpu_quick_rounds_b.json"
# real torch.profiler traces of V100, A100 and MI250 runs (HolisticTraceAnalysis's test data, MIT): traces/README.md
TRACES = DATA / "traces"
TIME_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def read(path: Path) -> dict:
    """A results file as the writer meant it: the non-finite values it lists under `nonfinite` back in place."""
    return strict_json.loads(path.read_text())


def write(data: dict, path: Path) -> Path:
    """The data as this suite's writer writes it: strict JSON, non-finite values listed under `nonfinite`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(strict_json.dumps(data))
    return path


def measured(data: dict) -> list[dict]:
    """The entries with timings (pytest-benchmark's `benchmarks`)."""
    return data["benchmarks"]


def scale_entry(entry: dict, factor: float) -> None:
    """Every time of one entry (samples and the statistics derived from them) times factor, in place."""
    stats = entry["stats"]
    for key in TIME_STATS:
        if key in stats:
            stats[key] *= factor
    stats["data"] = [x * factor for x in stats["data"]]
    stats["ops"] /= factor
    for key in ("tflops", "gbps", "pct_peak"):
        if key in entry.get("extra_info", {}):
            entry["extra_info"][key] /= factor
    if "round_medians_s" in entry.get("extra_info", {}):
        entry["extra_info"]["round_medians_s"] = [x * factor for x in entry["extra_info"]["round_medians_s"]]


def scaled(data: dict, case: str, factor: float) -> dict:
    """A copy of a run in which one case's timings are multiplied by factor."""
    out = copy.deepcopy(data)
    entry = next(e for e in measured(out) if e["extra_info"]["case"] == case)
    scale_entry(entry, factor)
    return out


def only(data: dict, groups: frozenset[str]) -> dict:
    """A copy of a run with the cases, measured or not, of these groups alone (all where groups is empty), as a run
    of `-k <suite>` holds: a page over fewer suites draws fewer pictures, for a test that reads one suite."""
    out = copy.deepcopy(data)
    if groups:
        for key in ("benchmarks", "not_measured"):
            out[key] = [e for e in out.get(key, []) if e.get("group") in groups]
    return out


def dated(data: dict, when: str, commit: str) -> dict:
    """A copy of a run stamped with another datetime and commit (what a later nightly run would carry)."""
    out = copy.deepcopy(data)
    out["datetime"] = when
    out["commit_info"]["id"] = commit
    return out


def converged_case(data: dict) -> str:
    """The converged case with the most samples: one whose timing the run knows well enough for a verdict.

    (A 5-sample case whose slowest sample is itself 1.5x the others cannot tell a 1.5x slowdown from that outlier;
    compare rightly calls it unsure, tested in test_compare.py.)
    """
    steady = [e for e in measured(data) if e["extra_info"].get("converged")]
    return max(steady, key=lambda e: len(e["stats"]["data"]))["extra_info"]["case"]


def with_identity(data: dict, **fields: object) -> dict:
    """A copy of a run whose machine identity (machine_info.identity) has these fields changed."""
    out = copy.deepcopy(data)
    out["machine_info"].setdefault("identity", {}).update(fields)
    return out
