"""Nightly histories for the history tests, made from real runs of this project (tests/resultfiles.py's way).

A night is a real run stamped with the night's date (03:00 UTC) and a commit of its own; a history cycles
through several real runs of one machine, so its run-to-run noise is the machine's own. What a test injects is
named where it happens: a case scaled from one night on (a step), on one night only (a spike), a night that is a
real run cut short (a killed run's journal, its header restamped and its lines as they were, or a run stopped by
SIGTERM, restamped), nights of another machine (real runs with another thread count, a different compute
device). The step and spike factors multiply every time of the case (samples, statistics, round medians), as
`resultfiles.scale_entry` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from reports import nights
from reports.format.load import load
from tests.resultfiles import DATA, dated, only, read, scale_entry, write

BUSY = DATA / "busy"
QUICK = DATA / "history"  # five real quick main-job runs of this machine, one after another (README.md there)
KILLED_JOURNAL = BUSY / "conv_cpu_quick_killed.json.journal"  # a real quick conv run killed by SIGKILL
STOPPED = QUICK / "quick_stopped.json"  # a real quick main-job run stopped by SIGTERM after 45 of 207 cases
FIRST_NIGHT = datetime(2026, 9, 1, 3, 0, tzinfo=timezone.utc)


def night(index: int) -> datetime:
    return FIRST_NIGHT + timedelta(days=index)


def commit(index: int) -> str:
    """Night `index`'s commit (every machine tests the same commit that night): 40 hex digits, the first 8 the
    night's number, which is what a label shows."""
    return f"{index:08x}".ljust(40, "0")


def real_runs() -> list[Path]:
    """The whole real quick main-job runs of the 2-thread machine."""
    return sorted(QUICK.glob("quick_[0-9].json"))


@dataclass
class Nights:
    """A history to write: which real run each night is, and what is injected where."""

    sources: list[Path]
    count: int
    steps: dict[str, tuple[int, float]] = field(default_factory=dict)  # case -> (first night, factor)
    spikes: dict[str, tuple[int, float]] = field(default_factory=dict)  # case -> (night, factor)
    cut: dict[int, Path] = field(default_factory=dict)  # nights that are a real run cut short, as it was
    first: int = 0  # number of the first night (a second machine may start later)
    groups: frozenset[str] = frozenset()  # only these suites' cases, as a run of `-k <suite>` holds (empty: all)

    def write(self, folder: Path, prefix: str = "") -> list[Path]:
        """One file per night into folder, named `<prefix>NNN_<date>.json` (or `.json.journal`)."""
        data = [only(read(p), self.groups) for p in self.sources]
        written = []
        for i in range(self.first, self.first + self.count):
            when = night(i)
            name = folder / f"{prefix}{i:03d}_{when:%Y%m%d}.json"
            if i in self.cut and self.cut[i].name.endswith(".journal"):
                written.append(journal(self.cut[i], name.with_name(name.name + ".journal"), when, commit(i)))
                continue
            if i in self.cut:
                written.append(write(dated(read(self.cut[i]), when.isoformat(), commit(i)), name))
                continue
            run = dated(data[i % len(data)], when.isoformat(), commit(i))
            for case, (start, factor) in self.steps.items():
                if i >= start:
                    scale(run, case, factor)
            for case, (at, factor) in self.spikes.items():
                if i == at:
                    scale(run, case, factor)
            written.append(write(run, name))
        return written


def scale(run: dict, case: str, factor: float) -> None:
    """Every time of one case of a run times factor, in place."""
    entry = next(e for e in run["benchmarks"] if e["extra_info"].get("case") == case)
    scale_entry(entry, factor)


def journal(source: Path, path: Path, when: datetime, commit_id: str) -> Path:
    """A real journal with its header restamped (datetime, commit), every other line as it was."""
    lines = source.read_text().splitlines()
    header = json.loads(lines[0])
    header["datetime"] = when.isoformat()
    header.setdefault("commit_info", {})["id"] = commit_id
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


def steady_case(paths: list[Path], group: str) -> str:
    """The case of a group whose level moved least across these real runs (largest / smallest): on this loaded
    machine most cases move by 1.5x to 2x from run to run, and a 1.25x step can only be seen in a steady one."""
    frame = load(paths, samples=False)
    frame = frame[(frame["group"] == group) & (frame["median_s"] > 0)].copy()
    spread = frame.assign(level=nights.levels(frame)).groupby("case")["level"].agg(lambda s: s.max() / s.min())
    return str(spread[frame.groupby("case")["file"].nunique() == len(paths)].idxmin())
