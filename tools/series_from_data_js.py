"""Turns one entry of a github-action-benchmark `data.js` into a folder of pytest-benchmark-shaped nightly runs.

Projects that publish their benchmarks with github-action-benchmark (`tool: pytest`) keep the whole history on
their gh-pages branch in `dev/bench/data.js`: one entry per benchmark job, one record per run, and per case only
what the action kept of pytest-benchmark's JSON: ops/s (`value`), `range: "stddev: S"` (seconds) and
`extra: "mean: M <unit>\\nrounds: N"`. Such a history is a real series of nights on someone else's runner, which
is what the gate and the history page are tested against (tests/data/series/README.md). This writes each run as
`NNNN_<commit8>.json` (NNNN its 1-based place in the entry, oldest first) with only the fields those read:
`machine_info` `{"node", "gpu": {"name"}}` (given here: data.js does not say which machine ran), `commit_info.id`,
`datetime` (the record's `date`), and per case `name`, `fullname`, `group: null` and `stats` with `median` and
`mean` both the mean (there are no samples, hence no median), `stddev` and `rounds`. The mean comes from
`extra`; a record whose `extra` lacks it falls back to 1/ops, which is how pytest-benchmark computes ops.

    python tools/series_from_data_js.py DATA_JS ENTRY OUTDIR --node NAME --gpu NAME

DATA_JS may be the file as gh-pages serves it (`window.BENCHMARK_DATA = {...}`) or its bare JSON. OUTDIR must not
hold runs already, so that two series are never mixed in one folder. Bad input ends with one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

PREFIX = "window.BENCHMARK_DATA ="
UNITS = {"sec": 1.0, "msec": 1e-3, "usec": 1e-6, "nsec": 1e-9}
MEAN = re.compile(r"mean:\s*([0-9.eE+-]+)\s*(sec|msec|usec|nsec)\b")
ROUNDS = re.compile(r"rounds:\s*(\d+)")
STDDEV = re.compile(r"stddev:\s*([0-9.eE+-]+)")


class BadInput(Exception):
    """Input this cannot convert; its message is the one line the user sees."""


@dataclass
class BenchRecord:
    """One case of one run, as the action kept it."""

    fullname: str
    mean_s: float
    stddev_s: float
    rounds: int

    def entry(self) -> dict:
        """The case as a pytest-benchmark `benchmarks` entry with the fields the reports read."""
        return {"group": None, "name": self.fullname.rsplit("::", 1)[-1], "fullname": self.fullname,
                "stats": {"median": self.mean_s, "mean": self.mean_s, "stddev": self.stddev_s,
                          "rounds": self.rounds}}


def read_data_js(path: Path) -> dict:
    """The BENCHMARK_DATA object of a data.js file (with or without its `window.` assignment)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as err:
        raise BadInput(f"cannot read {path}: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise BadInput(f"{path} is not UTF-8 text: {err.reason} at byte {err.start}") from err
    if text.startswith(PREFIX):
        text = text[len(PREFIX):].strip().rstrip(";")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise BadInput(f"{path} is not a data.js of github-action-benchmark: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise BadInput(f"{path} has no `entries` object")
    return data


def parse_case(bench: dict, where: str) -> BenchRecord:
    """One bench record of `tool: pytest`; the mean from `extra`, else 1/ops."""
    try:
        fullname, value = str(bench["name"]), float(bench["value"])
        stddev = STDDEV.search(str(bench.get("range", "")))
        extra = str(bench.get("extra", ""))
    except (KeyError, TypeError, ValueError) as err:
        raise BadInput(f"{where}: a bench without a name and a numeric value ({err})") from err
    mean, rounds = MEAN.search(extra), ROUNDS.search(extra)
    if stddev is None or rounds is None or (mean is None and value <= 0):
        raise BadInput(f"{where} {fullname}: not a pytest bench (needs `range: stddev: S` and `extra: ... rounds: N`)")
    mean_s = float(mean.group(1)) * UNITS[mean.group(2)] if mean else 1.0 / value
    return BenchRecord(fullname, mean_s, float(stddev.group(1)), int(rounds.group(1)))


def run_file(record: dict, where: str, node: str, gpu: str) -> tuple[str, dict]:
    """The commit id of one record and its run as a pytest-benchmark-shaped file."""
    if not isinstance(record, dict) or record.get("tool") != "pytest":
        tool = record.get("tool") if isinstance(record, dict) else None
        raise BadInput(f"{where}: tool is {tool!r}, not 'pytest'")
    try:
        commit = str(record["commit"]["id"])
        when = datetime.fromtimestamp(int(record["date"]) / 1000, tz=timezone.utc)
        benches = list(record["benches"])
    except (KeyError, TypeError, ValueError) as err:
        raise BadInput(f"{where}: a record without commit.id, date and benches ({err})") from err
    cases = [parse_case(bench, where) for bench in benches]
    return commit, {"machine_info": {"node": node, "gpu": {"name": gpu}}, "commit_info": {"id": commit},
                    "datetime": when.isoformat(), "benchmarks": [case.entry() for case in cases]}


def convert(data_js: Path, entry: str, outdir: Path, node: str, gpu: str) -> int:
    """Writes the entry's runs into outdir and returns how many."""
    entries = read_data_js(data_js)["entries"]
    if entry not in entries:
        raise BadInput(f"no entry {entry!r} in {data_js}; it has {', '.join(map(repr, entries)) or 'none'}")
    if not isinstance(entries[entry], list):
        raise BadInput(f"entry {entry!r} of {data_js} is not a list of runs")
    if outdir.exists() and any(outdir.glob("*.json")):
        raise BadInput(f"{outdir} already holds runs; give an empty or new folder")
    files = [run_file(record, f"{entry} run {k}", node, gpu) for k, record in enumerate(entries[entry], 1)]
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        for k, (commit, run) in enumerate(files, 1):
            (outdir / f"{k:04d}_{commit[:8]}.json").write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    except OSError as err:
        raise BadInput(f"cannot write to {outdir}: {err.strerror}") from err
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_js", type=Path, help="the data.js file (or its JSON)")
    parser.add_argument("entry", help="the entry's name, e.g. 'GPU Benchmark Results'")
    parser.add_argument("outdir", type=Path, help="the folder the runs go to (new or empty)")
    parser.add_argument("--node", required=True, help="machine_info.node: the runner, e.g. linux.g5.4xlarge.nvidia.gpu")
    parser.add_argument("--gpu", required=True, help="machine_info.gpu.name, e.g. 'NVIDIA A10G'")
    args = parser.parse_args(argv)
    try:
        count = convert(args.data_js, args.entry, args.outdir, args.node, args.gpu)
    except BadInput as err:
        print(f"series_from_data_js: {err}", file=sys.stderr)
        return 2
    print(f"{count} runs written to {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
