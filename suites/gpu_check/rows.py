"""What the GPU check prints: rows, each one figure with its target, its verdict and where it was read from.

Every reader of a step's results goes through `read_step` (reports.format.readback: the checked reader, journals of
killed runs included), so a row's `source` names the file and says when it was incomplete or warned about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reports.format.readback import RunRecord, read_run

ROW_PREFIX = "GPU_CHECK_ROW "  # a probe's stdout line that carries a row as JSON


@dataclass
class Row:
    """One figure: what it checks, its value, the target it is held to, whether it passes (None: a figure to
    read, not a verdict), the step that gave it and the file or process it was read from."""

    check: str
    figure: str
    value: str
    target: str
    ok: bool | None
    step: str = ""
    source: str = ""


def read_step(out: Path, name: str) -> RunRecord:
    """The results of the check's pytest step `name` (out/NAME.json, or the journal of a killed run); an
    InputError naming the file when there is neither (the check turns it into a failing row)."""
    return read_run(out / f"{name}.json")


def sourced(run: RunRecord, rows: Iterable[Row]) -> list[Row]:
    """The rows, each saying it was read from `run`."""
    listed = list(rows)
    for row in listed:
        row.source = row.source or run.source
    return listed


def number(entry: dict, key: str) -> float | None:
    """A figure of a case as a float, None when the case lacks it or holds something else (a hostile file)."""
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def status_text(entry: dict) -> str:
    """`oom: CUDA out of memory ...`: why a case has no figure."""
    return f"{entry.get('status', 'no status')}: {entry.get('reason') or 'no reason recorded'}"[:160]


def on_cpu(entry: dict) -> bool:
    """Whether a case ran on a CPU (its torch device), where the GPU's must-shows are figures, not verdicts."""
    return str(entry.get("torch_device", "")).startswith("cpu")


def size_text(n_bytes: float) -> str:
    """`1.50 GiB`, `3.2 MiB`: a memory figure in the unit that keeps it readable."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} B"
