"""Time `python -m reports trace` against HolisticTraceAnalysis on the same ~100k-event trace, in one run.

The goal is a summarizer at least 3x faster than HolisticTraceAnalysis (HTA) loading a trace and computing
its temporal breakdown. Both run as whole subprocesses, so both pay interpreter start-up and imports, a few times
each, round-robin; the script prints medians of wall and CPU time, their ratios, and each process's peak RSS
(from os.wait4, per child). `python -m reports` imports every command module before it parses its arguments, so
the same command is also timed through a parser that imports reports.trace only ("alone"): the difference
is the start-up cost of the other commands.
With --big-mb it also writes a trace of that many MB and reports our peak RSS on it, to show that memory follows
the number of GPU events, not the size of the file.

The trace is built by tiling a real one (default: the 68,692-event V100 trace in tests/data/traces) with shifted
timestamps, correlation and flow ids, and step numbers, then keeping the first --events events.

HTA is not a dependency of the project: `pip install holistictraceanalysis==0.5.0` to run this.
Usage: python tools/bench_trace_speed.py [--source TRACE] [--events 100000] [--repeat 5] [--big-mb 300]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO / "tests" / "data" / "traces" / "ns_resolution_trace.json.gz"
HTA_SCRIPT = (
    "import logging, sys\n"
    "logging.disable(logging.WARNING)\n"
    "from hta.trace_analysis import TraceAnalysis\n"
    "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)\n"
)
ID_ARGS = ("correlation", "External id")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="Kineto trace to tile")
    parser.add_argument("--events", type=int, default=100_000, help="events in the timed trace")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each tool")
    parser.add_argument("--big-mb", type=int, default=0, help="also measure our RSS on a trace of this many MB")
    args = parser.parse_args()
    if importlib.util.find_spec("hta") is None:
        print("HolisticTraceAnalysis is missing: pip install holistictraceanalysis==0.5.0", file=sys.stderr)
        return 1
    source = load_source(args.source)
    with tempfile.TemporaryDirectory(prefix="bench_trace_") as workdir:
        # HTA reads every trace file of a directory, one per rank, named rank-<N>...
        trace = Path(workdir) / "hta" / "rank-0.json.gz"
        trace.parent.mkdir()
        with gzip.open(trace, "wt", compresslevel=1) as out:
            write_trace(out, source, itertools.islice(tiled_events(source["traceEvents"]), args.events))
        print(f"trace: {args.events} events, {trace.stat().st_size / 1e6:.1f} MB gzip, from {args.source.name}")
        contenders = {
            "python -m reports trace": reports_command(trace),
            "reports.trace alone": light_command(trace),
            "HTA load + temporal breakdown": [sys.executable, "-c", HTA_SCRIPT, str(trace.parent)],
        }
        runs: dict[str, list[TraceTiming]] = {label: [] for label in contenders}
        for _ in range(args.repeat):  # round-robin, so load from other processes hits every contender alike
            for label, command in contenders.items():
                runs[label].append(run_child(command))
        medians = {label: TraceTiming.median(found) for label, found in runs.items()}
        for label, run in medians.items():
            print(
                f"{label:32s} median {run.wall_s:6.3f} s wall, {run.cpu_s:6.3f} s CPU, peak RSS {run.rss_mib:4.0f} MiB"
            )
        hta = medians["HTA load + temporal breakdown"]
        for label in ("python -m reports trace", "reports.trace alone"):
            ours = medians[label]
            print(f"ratio HTA / {label}: {hta.wall_s / ours.wall_s:.1f}x wall, {hta.cpu_s / ours.cpu_s:.1f}x CPU")
        print(f"(repeat={args.repeat}; 'alone' = the same command without importing the other reports commands)")
        if args.big_mb:
            measure_big(Path(workdir) / "big.json", source, args.big_mb)
    return 0


def load_source(path: Path) -> dict[str, Any]:
    """The whole source trace (a few tens of MB at most: this is the tile, not the benchmarked file)."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as stream:
        return json.load(stream)


def tiled_events(events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The source's events repeated without end, each copy shifted past the previous one in time and ids."""
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    start = min(float(e["ts"]) for e in timed)
    shift_us = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - start + 1000.0
    shift_id = 1 + max(max(_ids(e), default=0) for e in events)
    steps = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    yield from events
    for copy in itertools.count(1):
        for event in timed:
            yield _shifted(event, copy * shift_us, copy * shift_id, copy * steps)


def _ids(event: dict[str, Any]) -> Iterable[int]:
    args = event.get("args", {})
    yield from (int(args[key]) for key in ID_ARGS if isinstance(args.get(key), int))
    if isinstance(event.get("id"), int):
        yield event["id"]


def _shifted(event: dict[str, Any], shift_us: float, shift_id: int, shift_step: int) -> dict[str, Any]:
    copy = {**event, "ts": float(event["ts"]) + shift_us}
    if isinstance(event.get("id"), int):  # flow events (ac2g, fwdbwd) link by id
        copy["id"] = event["id"] + shift_id
    if "args" in event:
        copy["args"] = {**event["args"]}
        for key in ID_ARGS:
            if isinstance(copy["args"].get(key), int):
                copy["args"][key] += shift_id
    name = str(event.get("name", ""))
    if name.startswith("ProfilerStep#"):
        copy["name"] = f"ProfilerStep#{int(name.split('#')[1]) + shift_step}"
    return copy


def write_trace(out: TextIO, source: dict[str, Any], events: Iterable[dict[str, Any]]) -> None:
    """Write a Kineto-shaped JSON object, one event at a time, so a large trace never sits in memory."""
    header = {key: value for key, value in source.items() if key != "traceEvents"}
    out.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
    for index, event in enumerate(events):
        out.write((",\n" if index else "") + json.dumps(event))
    out.write("\n]}\n")


def reports_command(trace: Path) -> list[str]:
    return [sys.executable, "-m", "reports", "trace", str(trace), "--json"]


def light_command(trace: Path) -> list[str]:
    """The same `trace` command and arguments, through a parser that imports only reports.trace."""
    driver = (
        "import argparse, sys\n"
        "from reports import trace\n"
        "parser = argparse.ArgumentParser()\n"
        "trace.register(parser.add_subparsers())\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "sys.exit(args.func(args))\n"
    )
    return [sys.executable, "-c", driver, "trace", str(trace), "--json"]


@dataclass(frozen=True)
class TraceTiming:
    """One child process: wall and CPU (user + system) seconds, peak resident memory."""

    wall_s: float
    cpu_s: float
    rss_mib: float

    @staticmethod
    def median(runs: list[TraceTiming]) -> TraceTiming:
        """Median times; the largest peak RSS."""
        return TraceTiming(
            statistics.median(r.wall_s for r in runs),
            statistics.median(r.cpu_s for r in runs),
            max(r.rss_mib for r in runs),
        )


def run_child(command: list[str]) -> TraceTiming:
    """Run one child to completion and measure it (os.wait4 gives that child's own rusage); exit if it fails."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            stderr.seek(0)
            raise SystemExit(f"{command[:4]} failed ({child.returncode}):\n{stderr.read().decode()[-2000:]}")
    return TraceTiming(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)  # Linux: ru_maxrss in KiB


def measure_big(path: Path, source: dict[str, Any], megabytes: int) -> None:
    """Write a plain-JSON trace of about `megabytes` MB and report our time and peak RSS on it."""
    events = source["traceEvents"]
    bytes_per_event = sum(len(json.dumps(event)) + 2 for event in events) / len(events)
    count = int(megabytes * 10**6 / bytes_per_event)
    with open(path, "w") as out:
        write_trace(out, source, itertools.islice(tiled_events(events), count))
    print(f"big trace: {path.stat().st_size / 1e6:.0f} MB JSON, {count} events")
    for label, command in (
        ("python -m reports trace", reports_command(path)),
        ("reports.trace alone", light_command(path)),
    ):
        run = run_child(command)
        print(f"{label:32s} {run.wall_s:6.1f} s wall, {run.cpu_s:6.1f} s CPU, peak RSS {run.rss_mib:4.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
