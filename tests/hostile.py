"""A corpus of hostile inputs for every `python -m reports` command: results files and traces that are broken,
malicious or merely strange, each derived from a real file (tests/data, a hand-made trace) with one thing
changed, so the rest of the format stays real.

Each item is (name, writer): the writer makes the input under a folder and returns its path. `defects` names
the result items whose one case must never be shown as a normal timing (`invalid` instead).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

from tests.resultfiles import DATA, RUN_A, read

BATCH = DATA / "batch_size_cpu_quick.json"
Writer = Callable[[Path], Path]


def small_run() -> dict:
    """RUN_A cut to its first four timed cases: every command stays fast over hundreds of inputs."""
    data = read(RUN_A)
    del data["benchmarks"][4:]
    return data


def good_run(folder: Path) -> Path:
    """The unchanged small run, the other side of a comparison."""
    return _dump(folder / "good.json", small_run())


def _dump(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def _one_case(change: Callable[[dict], None]) -> Writer:
    """RUN_A with its first timed entry changed in place."""
    def write(folder: Path) -> Path:
        data = small_run()
        change(data["benchmarks"][0])
        return _dump(folder / "run.json", data)
    return write


def _median_of_digits(digits: int) -> Writer:
    """A median written as an integer literal of this many digits (json.dumps cannot write one past 4300)."""
    def write(folder: Path) -> Path:
        path = _one_case(_stat("median", "BIG"))(folder)
        path.write_text(path.read_text().replace('"median": "BIG"', '"median": ' + "9" * digits))
        return path
    return write


def _stat(key: str, value: object) -> Callable[[dict], None]:
    def change(entry: dict) -> None:
        entry["stats"][key] = value
    return change


def _top(change: Callable[[dict], None], source: Path | None = None) -> Writer:
    def write(folder: Path) -> Path:
        data = small_run() if source is None else read(source)
        change(data)
        return _dump(folder / "run.json", data)
    return write


def _raw(text: bytes | str, name: str = "run.json") -> Writer:
    def write(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path
    return write


def _folder_named_json(folder: Path) -> Path:
    (folder / "run.json").mkdir()
    return folder / "run.json"


def _names(value: str) -> Callable[[dict], None]:
    """Every name the reports print or turn into file names set to value (device via the CPU model)."""
    def change(data: dict) -> None:
        data["machine_info"]["cpu_info"]["model"] = value
        for entry in data["benchmarks"]:
            entry["extra_info"]["case"] = f"{value}/{entry['extra_info']['case']}"
    return change


def _case_ids_differing_in_separator(data: dict) -> None:
    first, second = data["benchmarks"][:2]
    first["extra_info"]["case"] = "matmul/a/b"
    second["extra_info"]["case"] = "matmul/a:b"


def _attention_with_text_seq(data: dict) -> None:
    """The small run's cases as attention cases (the axes the attention plots read), one with seq `abc`."""
    for seq, entry in zip(("512", "1024", "2048", "abc"), data["benchmarks"], strict=True):
        entry["group"] = entry["extra_info"]["suite"] = "attention"
        entry["extra_info"]["case"] = f"attention/naive/{seq}"
        entry["params"] = {"impl": "naive", "dtype": "float32", "batch": "1", "heads": "8", "head_dim": "64",
                           "seq": seq, "causal": "False", "pass": "fwd"}
    data["not_measured"] = []


def _param_device(data: dict) -> None:
    for i, entry in enumerate(data["benchmarks"]):
        entry["params"]["device"] = "cuda" if i % 2 else "cpu"


def _incomplete_not_bool(data: dict) -> None:
    data.update(incomplete="yes", incomplete_reason=["not", "text"])


def _deep(depth: int) -> bytes:
    return b'{"benchmarks": [' + b"[" * depth + b"]" * depth + b"]}"


RESULTS: dict[str, Writer] = {
    # the file itself
    "empty": _raw(""),
    "whitespace": _raw("  \n"),
    "truncated": _raw(json.dumps(small_run())[:2000]),
    "binary_garbage": _raw(bytes(range(256)) * 4),
    "gzip": _raw(gzip.compress(json.dumps(small_run()).encode())),
    "utf16": _raw(json.dumps(small_run()).encode("utf-16")),
    "bom": _raw(b"\xef\xbb\xbf" + json.dumps(small_run()).encode()),
    "top_level_list": _raw("[1, 2]"),
    "benchmarks_not_a_list": _raw('{"benchmarks": {"a": 1}}'),
    "nested_100000_deep": _raw(_deep(100_000)),
    "nested_900_deep": _raw(_deep(900)),
    "int_of_5000_digits": _median_of_digits(5000),
    "int_of_400_digits": _median_of_digits(400),
    "fifo": lambda folder: _fifo_named(folder, "run.json"),
    "link_to_dev_zero": lambda folder: _link_named(folder, "run.json"),
    "folder_named_json": _folder_named_json,
    # stats that cannot be a time
    "median_zero": _one_case(_stat("median", 0)),
    "median_negative": _one_case(_stat("median", -1e-3)),
    "median_nan": _one_case(_stat("median", float("nan"))),
    "median_inf": _one_case(_stat("median", float("inf"))),
    "median_string": _one_case(_stat("median", "fast")),
    "median_list": _one_case(_stat("median", [1e-3])),
    "median_missing": _one_case(lambda e: e["stats"].pop("median")),
    "stats_missing": _one_case(lambda e: e.pop("stats")),
    "stats_string": _one_case(lambda e: e.update(stats="n/a")),
    "stats_list": _one_case(lambda e: e.update(stats=[1, 2])),
    "data_strings": _one_case(_stat("data", ["a", "b"])),
    "data_negative": _one_case(_stat("data", [-1.0, 2.0])),
    # figures and names
    "tflops_list": _one_case(lambda e: e["extra_info"].update(tflops=[1, 2])),
    "tflops_negative": _one_case(lambda e: e["extra_info"].update(tflops=-3.0)),
    "group_number": _one_case(lambda e: e.update(group=7)),
    "name_list": _one_case(lambda e: e.update(name=["x"], fullname=["x"])),
    "params_list_values": _one_case(lambda e: e["params"].update(shape=[1, 2], dtype={"a": 1})),
    "mathtext_names": _top(_names("$\\frac{a}{b$ x^")),
    "mathtext_batch_device": _top(lambda d: d["machine_info"]["cpu_info"].update(model="$\\sqrt{$"), BATCH),
    "names_300_chars": _top(_names("n" * 300)),
    "case_ids_differing_in_separator": _top(_case_ids_differing_in_separator),
    "param_named_device": _top(_param_device),
    "incomplete_not_bool": _top(_incomplete_not_bool),
    "machine_info_list": _top(lambda d: d.update(machine_info=[1])),
    "commit_info_string": _top(lambda d: d.update(commit_info="abc")),
    "datetime_garbage": _top(lambda d: d.update(datetime="yesterday")),
    "unknown_top_level": _top(lambda d: d.update(surprise=1)),
    "duplicate_case": _top(lambda d: d["benchmarks"].append(copy.deepcopy(d["benchmarks"][0]))),
    "entries_without_names": _top(lambda d: d["benchmarks"].extend([{}, 3, None])),
    "attention_seq_text": _top(_attention_with_text_seq),
    "batch_seq_text": _top(lambda d: [e["params"].update(batch="many") for e in d["benchmarks"]], BATCH),
}

# Items whose first case's median cannot be right: never shown as a time, listed as invalid.
INVALID_MEDIAN = {"int_of_5000_digits", "int_of_400_digits", "median_zero", "median_negative", "median_nan",
                  "median_inf", "median_string", "median_list", "median_missing", "stats_missing", "stats_string",
                  "stats_list"}
# Items the reports read as they are (a byte order mark is still UTF-8 text).
BENIGN = {"attention_seq_text", "bom",
          "case_ids_differing_in_separator", "param_named_device", "mathtext_names", "mathtext_batch_device",
          "names_300_chars", "group_number", "name_list", "params_list_values", "batch_seq_text",
          "incomplete_not_bool", "machine_info_list", "commit_info_string", "datetime_garbage"}

# Items read as they are, whose plots cannot use one case: the plotting commands warn.
PLOT_WARNINGS = {"attention_seq_text"}


def _event(name: object = "volta_h884gemm_64x64_nt", ts: object = 1000, dur: object = 10, **args: object) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "correlation": 1, **args}}


def _trace(*events: dict, **top: object) -> Writer:
    def write(folder: Path) -> Path:
        good = [_event(), _event("volta_sgemm_128x64_nn", 1020, 5, correlation=2)]
        path = folder / "trace.json"
        path.write_text(json.dumps({"traceEvents": [*good, *events], **top}))
        return path
    return write


TRACES: dict[str, Writer] = {
    "trace_empty": _raw("", "trace.json"),
    "trace_truncated": _raw('{"traceEvents": [{"ph": "X", "cat": "kernel", "na', "trace.json"),
    "trace_gzip_garbage": _raw(b"\x1f\x8b\x08\x00garbage", "trace.json.gz"),
    "trace_deep": _raw(b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "trace.json"),
    "trace_name_number": _trace(_event(name=12345, ts=1040)),
    "trace_name_list": _trace(_event(name=["a", "b"], ts=1040)),
    "trace_device_list": _trace(_event(ts=1040, device=[0, 1])),
    "trace_correlation_huge": _trace(_event(ts=1040, correlation=1e30)),
    "trace_negative_duration": _trace(_event(ts=1040, dur=-500)),
    "trace_nan_duration": _trace(_event(ts=1040, dur=float("nan"))),
    "trace_ts_text": _trace(_event(ts="soon")),
    "trace_name_40kb": _trace(_event(name="gemm" + "x" * 40_000, ts=1040)),
    "trace_device_properties_odd": _trace(deviceProperties=[{"id": [1], "name": 5}, 3]),
    "trace_fifo": lambda folder: _fifo_named(folder, "trace.json"),
    "trace_link_to_dev_zero": lambda folder: _link_named(folder, "trace.json"),
}


def _fifo_named(folder: Path, name: str) -> Path:
    os.mkfifo(folder / name)
    return folder / name


def _link_named(folder: Path, name: str) -> Path:
    (folder / name).symlink_to("/dev/zero")
    return folder / name
