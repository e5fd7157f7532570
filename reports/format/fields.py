"""Every field of a results file that a report reads, with the type it must have and the column it becomes.

Results come from other machines, other projects and hostile hands; a report acts on a field only after
reports.format.validate has checked it against its entry here. A value of the wrong type is left out with a warning
naming the file and the field (never a traceback, never a column taken over), and a field absent or `null` is
simply not there (strict JSON writes a non-finite figure as `null`). Fields not listed are passed through as
they are when they sit in `params` or `extra_info`, and ignored elsewhere: no report reads them.

Paths are dotted from the top of the file (`machine_info.gpu.name`) or, for the entries of `benchmarks` and
`not_measured`, from the entry (`stats.median`, `extra_info.tflops`); `*` stands for any key. This is the
reader's side of the format: the results schema says what a file may hold, this what a report acts on, within
bounds a measurement can have (tests/test_fields.py checks that no figure a report shows goes untyped).

Bounds that no measurement reaches keep the arithmetic of the reports finite: a time lies within
[MIN_TIME_S, MAX_TIME_S] (5e-324 s would make every rate infinite, 1.7e308 s overflow every unit change), a
figure below MAX_FIGURE, a count below MAX_COUNT, a date within the years DATE_YEARS (matplotlib's calendar
ends at 9999, and a plot pads its range). Text is read through `unwrapped`: pytest-benchmark's
`UNSERIALIZABLE[b'...']` around a name is taken off as the file is loaded.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

MIN_TIME_S = 1e-12  # a picosecond: below any clock's resolution (one cycle at 5 GHz is 200 ps)
MAX_TIME_S = 1e6  # 11.6 days: no benchmark sample is this long
MAX_FIGURE = 1e30  # the largest training runs total about 1e26 FLOPs; quotients by a time stay finite
MAX_COUNT = 10**9  # ranks, nodes, threads, rounds
DATE_YEARS = (1970, 2200)


@dataclass(frozen=True)
class Kind:
    """A type a field must have: `check` gives the value as the reports use it, or None when it cannot be right;
    `expect` says what was expected, in a warning; `schema` is the JSON Schema of the values it accepts."""

    name: str
    expect: str
    check: Callable[[Any], Any]
    schema: dict = field(default_factory=dict)


def _real(value: Any) -> float | None:
    """A JSON number as a float (bools are not numbers; an integer beyond a float's range is None)."""
    kind = type(value)
    if kind is float:
        return value
    if kind is not int:
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _within(low: float, high: float) -> Callable[[Any], float | None]:
    def check(value: Any) -> float | None:
        x = value if type(value) is float else _real(value)
        return x if x is not None and low <= x <= high else None  # (NaN is within nothing)
    return check


# pytest-benchmark writes a value json cannot encode as `UNSERIALIZABLE[<its repr>]` (SafeJSONEncoder): a GPU name
# that an older nvidia-ml-py gave as bytes reads `UNSERIALIZABLE[b'Tesla V100-SXM2-32GB']`. Text of that form whose
# repr is a string or bytes literal is read as the text it wraps (bytes as UTF-8); any other repr stays as written.
UNSERIALIZABLE = re.compile(r"UNSERIALIZABLE\[(b?('|\")[^\n]*\2)\]")


def unwrapped(text: str) -> str:
    """The text pytest-benchmark's `UNSERIALIZABLE[b'...']` wraps, else the text itself."""
    found = UNSERIALIZABLE.fullmatch(text) if text.startswith("UNSERIALIZABLE[") else None
    if found is None:
        return text
    try:
        value = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return text
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _text(value: Any) -> str | None:
    return unwrapped(value) if isinstance(value, str) else None


def _label(value: Any) -> str | None:
    """Text as it is (unwrapped); a finite number (a group `7`, cuDNN's version 90100) is that number's text."""
    if isinstance(value, str):
        return unwrapped(value)
    x = _real(value)
    return json.dumps(value) if x is not None and math.isfinite(x) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    x = _real(value)
    return int(x) if x is not None and x.is_integer() and 1 <= x <= MAX_COUNT else None


def _ratio(value: Any) -> float | None:
    """A relative figure that may be infinite (a spread that never settled, an overflowed result), never NaN."""
    x = _real(value)
    return x if x is not None and (0 <= x <= MAX_FIGURE or x == math.inf) else None


def _times(value: Any) -> list[float] | None:
    """A non-empty list of times; the list itself when it holds floats only (a million samples are not copied)."""
    if not isinstance(value, list) or not value:
        return None
    if all(type(x) is float and MIN_TIME_S <= x <= MAX_TIME_S for x in value):
        return value
    times = [TIME.check(x) for x in value]
    return None if any(x is None for x in times) else times


def _date(value: Any) -> datetime | None:
    """An ISO 8601 date and time as an aware datetime (naive ones, pytest-benchmark before 5.0, are UTC)."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return None
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return when if DATE_YEARS[0] <= when.astimezone(timezone.utc).year <= DATE_YEARS[1] else None


def _object(value: Any) -> dict | None:
    return value if isinstance(value, dict) else None


def _axis(value: Any) -> Any:
    """A param value: a scalar as it is (None stays None; text unwrapped), a list or object as its JSON text."""
    if isinstance(value, str):
        return unwrapped(value)
    if value is None or isinstance(value, bool):
        return value
    x = _real(value)
    if x is not None and math.isfinite(x):
        return value
    return json.dumps(value)[:200] if not isinstance(value, float) else str(value)


TEXT = Kind("text", "text", _text, {"type": "string"})
LABEL = Kind("label", "text or a number", _label, {"type": ["string", "number"]})
FLAG = Kind("flag", "true or false", _flag, {"type": "boolean"})
COUNT = Kind("count", "a whole number >= 1", _count, {"type": "integer", "minimum": 1, "maximum": MAX_COUNT})
TIME = Kind("time", f"a time in seconds within [{MIN_TIME_S:g}, {MAX_TIME_S:g}]", _within(MIN_TIME_S, MAX_TIME_S),
            {"type": "number", "minimum": MIN_TIME_S, "maximum": MAX_TIME_S})
SPREAD = Kind("spread", f"a spread in seconds within [0, {MAX_TIME_S:g}]", _within(0.0, MAX_TIME_S),
              {"type": "number", "minimum": 0, "maximum": MAX_TIME_S})
FIGURE = Kind("figure", f"a number within [0, {MAX_FIGURE:g}]", _within(0.0, MAX_FIGURE),
              {"type": "number", "minimum": 0, "maximum": MAX_FIGURE})
RATIO = Kind("ratio", "a number >= 0 or Infinity", _ratio, {"type": "number", "minimum": 0})
TIMES = Kind("times", "a non-empty list of times in seconds", _times,
             {"type": "array", "minItems": 1, "items": TIME.schema})
DATE = Kind("date", f"an ISO 8601 date in the years {DATE_YEARS[0]} to {DATE_YEARS[1]}", _date,
            {"type": "string", "format": "date-time"})
OBJECT = Kind("object", "an object", _object, {"type": "object"})
AXIS = Kind("axis", "a value", _axis, {})  # never wrong: what is no scalar becomes text


@dataclass(frozen=True)
class Field:
    """One field: its kind, the frame column it becomes (None: read into another, e.g. the device name), and why
    the reports read it."""

    kind: Kind
    column: str | None
    why: str
    open: bool = False  # an object whose undescribed members are kept as they are (extra_info)


# The file's own fields: shared by every row of the run.
RUN: dict[str, Field] = {
    "machine_info": Field(OBJECT, None, "the machine that ran the cases"),
    "machine_info.node": Field(TEXT, "machine", "the host name; the device's name when nothing else names it"),
    "machine_info.processor": Field(TEXT, None, "the device's name when no CPU model is recorded"),
    "machine_info.cpu": Field(OBJECT, None, "py-cpuinfo's description of the CPU (pytest-benchmark)"),
    "machine_info.cpu.brand_raw": Field(TEXT, None, "the CPU model (pytest-benchmark 3.4 on)"),
    "machine_info.cpu.brand": Field(TEXT, None, "the CPU model (pytest-benchmark 3.x)"),
    "machine_info.cpu_info": Field(OBJECT, None, "this suite's description of the CPU"),
    "machine_info.cpu_info.model": Field(TEXT, None, "the CPU model: part of a CPU device's name"),
    "machine_info.cpu_info.torch_threads": Field(COUNT, None, "threads torch used: part of a CPU device's name"),
    "machine_info.gpu": Field(OBJECT, None, "the GPU measured, when one was"),
    "machine_info.gpu.name": Field(TEXT, None, "the device's name, by which every report groups"),
    "machine_info.gpu.driver": Field(LABEL, None, "identity stand-in: the driver version"),
    "machine_info.gpu.cuda": Field(LABEL, None, "identity stand-in: the CUDA version"),
    "machine_info.gpu.cudnn": Field(LABEL, None, "identity stand-in: the cuDNN version"),
    "machine_info.gpu.peaks": Field(OBJECT, None, "the datasheet peaks, per dtype and `bandwidth`"),
    "machine_info.gpu.peaks.*": Field(OBJECT, None, "one datasheet peak"),
    "machine_info.gpu.peaks.*.value": Field(FIGURE, None, "FLOP/s, or bytes/s for `bandwidth`"),
    "machine_info.gpu.peaks.*.source": Field(TEXT, None, "where the peak comes from"),
    "machine_info.achievable": Field(OBJECT, None, "the peaks the search reached on this machine"),
    "machine_info.achievable.flops": Field(OBJECT, None, "the best gemm FLOP/s per dtype"),
    "machine_info.achievable.flops.*": Field(OBJECT, None, "one achievable peak"),
    "machine_info.achievable.bandwidth": Field(OBJECT, None, "the best copy/triad bandwidth"),
    "machine_info.torch": Field(OBJECT, None, "the torch build"),
    "machine_info.torch.version": Field(LABEL, None, "identity stand-in: the torch version"),
    "machine_info.identity": Field(OBJECT, None, "which machine and software stack measured the run"),
    "machine_info.identity.machine": Field(LABEL, "machine_id", "the history series: GPU UUID, or CPU and threads"),
    "machine_info.identity.torch": Field(LABEL, "torch_version", "named by compare when it changes"),
    "machine_info.identity.driver": Field(LABEL, "driver_version", "named by compare when it changes"),
    "machine_info.identity.cuda": Field(LABEL, "cuda_version", "named by compare when it changes"),
    "machine_info.identity.cudnn": Field(LABEL, "cudnn_version", "named by compare when it changes"),
    "machine_info.identity.world_size": Field(COUNT, "ranks", "named by compare when it changes"),
    "machine_info.distributed": Field(OBJECT, None, "a run under torchrun"),
    "machine_info.distributed.world_size": Field(COUNT, None, "ranks: part of the device's name"),
    "machine_info.distributed.nodes": Field(COUNT, None, "nodes: part of the device's name"),
    "commit_info": Field(OBJECT, None, "the commit measured"),
    "commit_info.id": Field(TEXT, "commit", "the commit, named at a history step"),
    "datetime": Field(DATE, "datetime", "when the run was made: the order of a history"),
    "version": Field(LABEL, None, "the pytest-benchmark version that wrote the file"),
    "incomplete": Field(FLAG, None, "the run was cut short"),
    "incomplete_reason": Field(TEXT, "incomplete_reason", "why the run was cut short"),
}
for _peak in ("machine_info.achievable.flops.*", "machine_info.achievable.bandwidth"):
    RUN |= {f"{_peak}.value": Field(FIGURE, None, "FLOP/s, or bytes/s for bandwidth"),
            f"{_peak}.searched_value": Field(FIGURE, None, "what the search found, when a case beat it"),
            f"{_peak}.at": Field(TEXT, None, "where the peak was reached"),
            f"{_peak}.how": Field(TEXT, None, "how the peak was found"),
            f"{_peak}.raised_by": Field(TEXT, None, "the case of the run that beat the search")}

# The fields of each entry of `benchmarks` (measured) and `not_measured`.
ENTRY: dict[str, Field] = {
    "group": Field(LABEL, "group", "the suite: tables and plots are per group"),
    "name": Field(TEXT, "name", "the test's name"),
    "fullname": Field(TEXT, "fullname", "the test's full name: the case's key without extra_info.case"),
    "params": Field(OBJECT, None, "the case's axes"),
    "params.*": Field(AXIS, None, "one axis: a column of its own name (see RESERVED)"),
    "stats": Field(OBJECT, None, "pytest-benchmark's statistics, in seconds"),
    "stats.median": Field(TIME, "median_s", "the headline time"),
    "stats.mean": Field(TIME, "mean_s", "statistics shown beside it"),
    "stats.min": Field(TIME, "min_s", "statistics shown beside it"),
    "stats.max": Field(TIME, "max_s", "statistics shown beside it"),
    "stats.q1": Field(TIME, "q1_s", "the lower edge of the IQR band"),
    "stats.q3": Field(TIME, "q3_s", "the upper edge of the IQR band"),
    "stats.stddev": Field(SPREAD, "stddev_s", "statistics shown beside it"),
    "stats.iqr": Field(SPREAD, "iqr_s", "statistics shown beside it"),
    "stats.rounds": Field(COUNT, "rounds", "how many samples"),
    "stats.data": Field(TIMES, "samples_s", "the raw samples: compare's test without rounds (loaded on request)"),
    "options": Field(OBJECT, None, "how pytest-benchmark took the samples"),
    "options.timer": Field(TEXT, "benchmark_timer", "pytest-benchmark's clock (`perf_counter`): what the times of "
                           "an entry without extra_info.timer are"),
    "extra_info": Field(OBJECT, None, "this suite's fields; undescribed ones are columns as they are", open=True),
    "extra_info.case": Field(TEXT, "case", "the case's stable key"),
    "extra_info.status": Field(TEXT, "status", "ok, oom, unsupported, error"),
    "extra_info.reason": Field(TEXT, "reason", "why a case was not measured"),
    "extra_info.device": Field(TEXT, "torch_device", "torch's device string (the `device` column is the device's "
                               "name)"),
    "extra_info.suite": Field(TEXT, "suite", "the suite"),
    "extra_info.timer": Field(TEXT, "timer", "cuda_event, cuda_graph, wall"),
    "extra_info.stop_reason": Field(TEXT, "stop_reason", "`once` marks a correctness experiment, not a speed"),
    "extra_info.strategy": Field(TEXT, "strategy", "ddp, fsdp, local: the levers of a distributed step"),
    "extra_info.converged": Field(FLAG, "converged", "a run that did not converge gets no verdict from samples"),
    "extra_info.host_bound": Field(FLAG, "host_bound", "the host, not the device, set the time"),
    "extra_info.contended": Field(FLAG, "contended", "other work competed for the host while the case was measured: "
                                  "its figure is marked where its timer includes the host"),
    "extra_info.resolution_limited": Field(FLAG, "resolution_limited", "an unconverged spread that is the events' "
                                           "resolution, not the case's noise"),
    "extra_info.rel_iqr": Field(RATIO, "rel_iqr", "the spread of the samples"),
    "extra_info.error_rel": Field(RATIO, "error_rel", "the error against float64"),
    "extra_info.world_size": Field(COUNT, "world_size", "ranks of a collective"),
    "extra_info.torch_threads": Field(COUNT, "torch_threads", "a case measured with another thread count than "
                                      "its run's (the run's is machine_info.cpu_info.torch_threads)"),
    "extra_info.max_batch": Field(COUNT, "max_batch", "the largest batch that fits"),
    "extra_info.round_medians_s": Field(TIMES, "round_medians_s", "each round's median: run-to-run noise"),
    "extra_info.telemetry": Field(OBJECT, None, "NVML telemetry during the measurement"),
    "extra_info.telemetry.throttled": Field(FLAG, "throttled", "a throttled run gets no verdict"),
    "extra_info.telemetry.sm_clock_median_mhz": Field(FIGURE, "sm_clock_mhz", "named by compare when it moved"),
}
ENTRY |= {f"extra_info.{name}": Field(FIGURE, name, "a figure shown in tables and plots") for name in (
    "flops", "bytes", "tflops", "gbps", "pct_peak", "pct_achievable", "peak_mem_bytes", "step_peak_bytes",
    "mem_budget_bytes", "tokens_per_s", "samples_per_s", "mfu", "compile_s", "enqueue_s", "device_s", "step_wall_s",
    "device_busy_s", "device_busy_share", "algbw_gbps", "busbw_gbps", "bytes_per_param", "scaling_efficiency")}

# Columns the loader makes itself, beside those of the fields above.
DERIVED = {"file": "the file the row was read from",
           "case": "the case's key: extra_info.case, else the full name, else the name",
           "reason": "why a measured entry is `invalid`, beside extra_info.reason",
           "device": "the device's name: the GPU's, else the CPU model with its threads, with its ranks",
           "param_names": "the columns holding the case's params",
           "status": "`invalid` for a measured entry without a usable median",
           "marks": "`export` only: how the timed row's figure was taken (reports/marks.py)"}
EXTRA = {path.removeprefix("extra_info."): f for path, f in ENTRY.items() if path.startswith("extra_info.")}
# Columns no params or extra_info key may take (such a key is loaded as `param_KEY` / `extra_KEY`): the run's,
# the loader's, those of the entry's own fields, and those an extra_info field fills under another name.
RESERVED = frozenset({f.column for f in RUN.values() if f.column} | set(DERIVED)
                     | {f.column for path, f in ENTRY.items() if f.column and not path.startswith("extra_info.")}
                     | {f.column for key, f in EXTRA.items() if f.column and f.column != key})
# extra_info fields the reports read with a type, each in the column of its name: a param of that name takes the
# column only where it holds the same value (one fact written twice, as a distributed case's `strategy`).
TYPED_EXTRA = frozenset(key for key, f in EXTRA.items() if f.column == key)


def lookup(table: dict[str, Field], path: str) -> Field | None:
    """The field at a dotted path; a pattern with `*` in the place of one key matches any key there."""
    if path in table:
        return table[path]
    parts = path.split(".")
    for i in range(len(parts)):
        found = table.get(".".join([*parts[:i], "*", *parts[i + 1:]]))
        if found is not None:
            return found
    return None
