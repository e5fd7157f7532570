"""What each step of the GPU check took on this device, kept between runs so that the next plan rests on it.

Why: a step's reasoned estimate (suites/gpu_check/steps.py) is a model of a GPU nobody measured; the first run on a
device measures every step's wall time, and from then on the plan on that device uses what it saw. The times are
kept per device identity, the `machine_info.identity` every results file carries (suites/core/devices.py: the
GPU's UUID, or the CPU model with torch's threads; driver, CUDA, cuDNN, torch): another GPU, another driver or
another torch is another file, because each changes how long the steps take.

One small JSON file per identity, `<machine>-<hash>.json` in `--times-cache` (default
`~/.cache/torchbench-levers/gpu_check`, beside the achievable peaks' cache), written through the project's strict
JSON writer, atomically. Per step it keeps the plan the times were taken with (a hash of the step's command:
another selection is another step) and the last `KEEP_RUNS` wall times of runs that ended on their own; the plan
uses the longest of them, so one quick run does not squeeze the next. A step stopped at its timeout is not kept
(its time says only "at least"). A file that cannot be read is a one-line warning and no learned times, never a
crash; the next run writes it anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from reports.format import strict_json
from suites.core import defaults
from suites.gpu_check.steps import StepPlan

FORMAT = 1  # the file's layout; a file of another format is read as none and rewritten
KEEP_RUNS = 3


def default_dir() -> Path:
    """$XDG_CACHE_HOME/torchbench-levers/gpu_check (~/.cache/...): per user and machine, beside the peaks."""
    return defaults.achievable_cache().parent / "gpu_check"


def plan_key(plan: StepPlan, profile: str) -> str:
    """What a step runs, hashed: its bench selection, probe or tool and the profile; times taken with another
    selection are not this step's."""
    text = json.dumps([list(plan.pytest_args), plan.probe, list(plan.tool), profile])
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def file_for(directory: Path, identity: dict) -> Path:
    """`<machine>-<hash of the identity>.json` under directory."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", str(identity.get("machine", "device"))).strip("-")[:60] or "device"
    digest = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    return directory / f"{name}-{digest}.json"


@dataclass(frozen=True)
class WallTime:
    """One run of a step on this device: its wall seconds, when it ended (UTC) and how."""

    seconds: float
    at: str
    outcome: str  # `exit 0`, `exit 1`: a step that ended on its own


@dataclass
class StepHistory:
    """A step's kept runs, measured with the plan `plan` (plan_key)."""

    plan: str
    runs: list[WallTime] = field(default_factory=list)


@dataclass(frozen=True)
class Measured:
    """What the plan uses for a step that ran here before: the longest kept run, and how many runs there are."""

    seconds: float
    runs: int
    latest: str

    def text(self) -> str:
        return (f"measured on this device: the longest of {self.runs} run{'s' if self.runs != 1 else ''} "
                f"(latest {self.latest})")


@dataclass
class StepTimes:
    """The learned step times of one device identity, read from and written to `path`."""

    identity: dict
    path: Path
    steps: dict[str, StepHistory] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path, identity: dict) -> tuple[StepTimes, str | None]:
        """This identity's times (none when there is no file yet), and a one-line warning when its file cannot be
        used (unreadable, not JSON, another layout or identity): then no times, and the next save replaces it."""
        path = file_for(directory, identity)
        times = cls(identity, path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return times, None
        except OSError as exc:
            return times, f"{path}: cannot be read ({exc.strerror or exc}); the plan uses reasoned estimates"
        try:
            data = strict_json.loads(text)
            if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("identity") == identity):
                raise ValueError("another format or identity")
            times.steps = {name: StepHistory(str(h["plan"]), [WallTime(float(r["seconds"]), str(r["at"]),
                                                                       str(r["outcome"])) for r in h["runs"]])
                           for name, h in data["steps"].items()}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return cls(identity, path), (f"{path}: not a step-times file of this device ({exc}); the plan uses "
                                         "reasoned estimates and this run rewrites it")
        return times, None

    def measured(self, step: str, plan: str) -> Measured | None:
        """The time the plan uses for `step` run with `plan`, or None when it never ran so here."""
        history = self.steps.get(step)
        if history is None or history.plan != plan or not history.runs:
            return None
        return Measured(max(run.seconds for run in history.runs), len(history.runs), history.runs[-1].at)

    def record(self, step: str, plan: str, seconds: float, outcome: str) -> None:
        """Keep a run that ended on its own; times of another plan of the step are dropped."""
        history = self.steps.get(step)
        if history is None or history.plan != plan:
            history = self.steps[step] = StepHistory(plan)
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        history.runs = [*history.runs, WallTime(round(seconds, 2), at, outcome)][-KEEP_RUNS:]

    def save(self) -> Path:
        """Write the file (a temporary beside it, then renamed: a killed run never leaves half a file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"format": FORMAT, "identity": self.identity,
                    "steps": {name: asdict(history) for name, history in self.steps.items()}}
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(strict_json.dumps(document, indent=1))
        temporary.replace(self.path)
        return self.path
