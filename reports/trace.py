"""`python -m reports trace FILE... [--json]`: summarize Kineto / torch.profiler traces (.json or .json.gz).

Per GPU device: span, busy, idle, compute and non-compute time, tensor-core share of gemm time, kernels by name
and by class, the same per ProfilerStep; on the host: synchronizing calls and bytes copied to and from the device.
Definitions are in reports/format/kineto/summary.py; how kernels are classed is in reports/format/kineto/kernels.py.

`--json` prints one strict-JSON object (a figure that is not finite is null, listed under `nonfinite`:
docs/results.md): for one FILE `{"file", "devices": [...], "host": {...}, "steps": [...],
"message"}`; for several, `{"files": [that object per FILE, in order], "ranks": {...}}`: several files are read
as the ranks of one run (reports/format/kineto/ranks.py): one row per rank, the straggler, and the share of each rank's
communication kernels that overlaps its compute.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from reports.format import strict_json
from reports.format.kineto.events import read_trace
from reports.format.kineto.kernels import NAME_NOISE
from reports.format.kineto.ranks import RankSpread, spread
from reports.format.kineto.summary import (
    FIGURES,
    Breakdown,
    DeviceSummary,
    HostSummary,
    TraceSummary,
    no_gpu_message,
    summarize_trace,
    summary_to_json,
)

NAME_WIDTH = 90
# Devices given a full section each (figures, classes, top kernels, steps); a trace of more (a hostile one held
# 100,000 device ids) gives the rest one row each in one table, which takes seconds, not minutes. --json has every
# device in full.
DEVICES_IN_FULL = 16


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `trace` command."""
    parser = subparsers.add_parser("trace", help=__doc__.splitlines()[0], description=__doc__)
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="Kineto trace, .json or .json.gz")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--top", type=int, default=10, help="kernels listed per device and step (default 10)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Summarize each file; bad input raises InputError, which __main__ turns into one line and exit code 2."""
    traces = [read_trace(path) for path in args.files]
    summaries = [summarize_trace(trace) for trace in traces]
    ranks = spread(traces) if len(traces) > 1 else None
    if args.json:
        objects = [summary_to_json(summary, args.top) for summary in summaries]
        document = objects[0] if len(objects) == 1 else {"files": objects, "ranks": ranks.to_json()}
        print(strict_json.dumps(document, indent=1))  # a NaN or infinity is null, listed under `nonfinite`
    else:
        texts = [summary_to_text(summary, args.top) for summary in summaries]
        print("\n\n".join(texts + ([ranks_to_text(ranks)] if ranks else [])))
    return 0


def ranks_to_text(ranks: RankSpread) -> str:
    """Several traces as the ranks of one run: one row per rank, then the straggler and the spread."""
    head = f"== ranks (numbered by {ranks.ranks_from}): one row per trace"
    rows = [{"rank": r.rank, "span_us": r.span_us, "busy_us": r.busy_us, "compute_us": r.compute_us,
             "communication_us": r.communication_us, "overlapped_us": r.overlapped_us,
             "exposed_comm_us": r.exposed_communication_us, "overlap_share": r.overlap_share,
             "file": Path(r.file).name} for r in ranks.ranks]
    table = tabulate(rows, headers="keys", floatfmt=".1f", missingval="-")
    if ranks.straggler is None:
        return f"{head}\n{table}\nno GPU events in these traces: no straggler to name"
    tail = (f"straggler: rank {ranks.straggler} (most compute); compute spread {ranks.compute_spread_us:.1f} us, "
            f"span spread {ranks.span_spread_us:.1f} us")
    return f"{head}\n{table}\n{tail}"


def summary_to_text(summary: TraceSummary, top: int) -> str:
    """Tables for one file: per device its figures, classes, top kernels and steps; then the host line."""
    parts = [f"== {summary.path}"]
    message = no_gpu_message(summary)
    if message:
        parts.append(message)
    for device in summary.devices[:DEVICES_IN_FULL]:
        parts.append(_device_text(device, top))
    if rest := summary.devices[DEVICES_IN_FULL:]:
        parts.append(f"{len(rest)} more GPU devices, one row each (--json gives each in full):\n{_devices_table(rest)}")
    parts.append(_host_text(summary.host))
    return "\n\n".join(parts)


def _device_text(device: DeviceSummary, top: int) -> str:
    figures = device.overall
    header = f"{_title(device)}: {figures.event_count} GPU events, {figures.kernel_count} kernels"
    tables = [header, _figures_table([("all", figures)])]
    tables.append(
        tabulate(
            [(c.name, c.count, c.total_us, 100 * c.share) for c in figures.classes],
            headers=("class", "count", "total_us", "% GPU time"),
            floatfmt=".1f",
        )
    )
    tables.append(
        tabulate(
            [
                (_shorten(k.name), k.kernel_class, k.count, k.total_us, k.mean_us, 100 * k.share)
                for k in figures.kernels[:top]
            ],
            headers=(f"top {top} kernels", "class", "count", "total_us", "mean_us", "% kernel time"),
            floatfmt=".1f",
        )
    )
    if device.steps:
        tables.append(_figures_table([(step.step, step.breakdown) for step in device.steps]))
    return "\n\n".join(tables)


def _devices_table(devices: list[DeviceSummary]) -> str:
    """One row per device: its figures as `_figures_table` has them, drawn by pandas, which takes a second or two
    for 100,000 rows where tabulate took a minute (imported here only: a trace of a few devices never needs it)."""
    import pandas as pd

    rows = [(_title(d), *(getattr(d.overall, key) for key in FIGURES), _share(d.overall), d.overall.kernel_count)
            for d in devices]
    table = pd.DataFrame(rows, columns=["device", *FIGURES, "tensor_core_share", "kernels"])
    return table.to_string(index=False, float_format=lambda x: f"{x:.2f}")


def _share(figures: Breakdown) -> str:
    return "-" if figures.tensor_core_share is None else f"{100 * figures.tensor_core_share:.1f}%"


def _title(device: DeviceSummary) -> str:
    return f"GPU {device.device}" + (f" ({device.name})" if device.name else "")


def _figures_table(rows: list[tuple[str, Breakdown]]) -> str:
    """One row per (label, breakdown): times, tensor-core share, kernel count."""
    return tabulate(
        [
            (
                label,
                *(getattr(figures, key) for key in FIGURES),
                _share(figures),
                figures.kernel_count,
            )
            for label, figures in rows
        ],
        headers=("scope", *FIGURES, "tensor_core_share", "kernels"),
        floatfmt=".2f",
        colalign=("left",),
    )


def _host_text(host: HostSummary) -> str:
    calls = ", ".join(f"{name} x{count}" for name, count in host.sync_calls.items()) or "none"
    lines = [
        f"host: {sum(host.sync_calls.values())} synchronizing calls ({calls}), {host.sync_us:.1f} us",
        f"host: HtoD {host.htod_bytes} bytes in {host.htod_copies} copies, "
        f"DtoH {host.dtoh_bytes} bytes in {host.dtoh_copies} copies",
    ]
    if host.copies_without_bytes:
        lines.append(f"host: {host.copies_without_bytes} HtoD/DtoH copies without a size in the trace")
    return "\n".join(lines)


def _shorten(name: str) -> str:
    """A kernel name cut to one table cell: C++ noise removed, then truncated."""
    name = NAME_NOISE.sub("", name)
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "..."
