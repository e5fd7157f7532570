"""A corpus of hostile inputs for every `python -m reports` command: results files and traces that are broken,
malicious or merely strange, each derived from a real file (tests/data, a hand-made trace) with one thing
changed, so the rest of the format stays real.

Each item is (name, writer): the writer makes the input under a folder and returns its path. Each result item has
one outcome, the set it is in below: REFUSED (the file cannot be used: exit 2 when named, skipped with a warning
in a folder), INVALID_MEDIAN (its case is listed as invalid with why, never shown as a time), LEFT_OUT (the field
named is left out with a warning naming the file and the field), RENAMED (a key named like a report column is
loaded under another name and the column keeps its meaning), SAMPLES_ONLY (a bad raw sample: only `compare` reads
them, and warns), WARNED (another warning naming the file), or BENIGN (read as it is, nothing to warn about).
A trace item is in TRACE_REFUSED (one error line, exit 2), in TRACE_LEFT_OUT (an event without usable times left
out, with a warning), or neither (summarized, its shares within bounds).
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


def _journal(**header: object) -> Writer:
    """The small run as the journal of a killed run, its header line changed."""
    def write(folder: Path) -> Path:
        data = small_run()
        first = {"journal": 2, "schema_version": 1, **{k: data[k] for k in ("machine_info", "commit_info",
                                                                          "datetime", "version")}, **header}
        lines = [first, *({"benchmarks": entry} for entry in data["benchmarks"])]
        path = folder / "run.json.journal"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
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


def _machine(**fields: object) -> Callable[[dict], None]:
    """machine_info with these fields set (a dotted key sets a field inside one: `gpu.name`)."""
    def change(data: dict) -> None:
        for key, value in fields.items():
            *outer, last = key.split(".")
            target = data["machine_info"]
            for part in outer:
                target = target.setdefault(part, {})
            target[last] = value
    return change


def _extra(**fields: object) -> Callable[[dict], None]:
    def change(entry: dict) -> None:
        entry["extra_info"].update(fields)
    return change


def _oom_case_carrying_a_median(data: dict) -> None:
    """The first timed case as an OOM not measured in this run, its extra_info holding a column's name and a time."""
    entry = data["benchmarks"].pop(0)
    entry.pop("stats")
    entry["extra_info"].update(status="oom", reason="CUDA out of memory", median_s=entry["extra_info"]["flops"] / 1e15)
    data["not_measured"].append(entry)


def _lone_surrogates(data: dict) -> None:
    """A lone UTF-16 surrogate in a case name, a param's name and value, and the CPU model (the device's name)."""
    entry = data["benchmarks"][0]
    entry["extra_info"]["case"] = "matmul/\ud800/" + entry["extra_info"]["case"]
    entry["params"]["lay\udfffer"] = "sq\udc00uare"
    data["machine_info"]["cpu_info"]["model"] = "AMD \udbff EPYC"


# Text a spreadsheet runs as a formula (OWASP's CSV injection examples), one per case, in the case name and a param.
FORMULAS = ('=HYPERLINK("http://example.invalid","x")', "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)", "+1+1")


def _names_like_formulas(data: dict) -> None:
    for formula, entry in zip(FORMULAS, data["benchmarks"], strict=True):
        entry["extra_info"]["case"] = f"{formula}/{entry['extra_info']['case']}"
        entry["params"]["label"] = formula
        entry["params"]["offset"] = -3  # a negative number: a number, never text


def _names_with_bare_cr(data: dict) -> None:
    """A bare carriage return in three case names and a param's value (rows split in a CSV that left it bare)."""
    for entry in data["benchmarks"][:3]:
        entry["extra_info"]["case"] = entry["extra_info"]["case"].replace("/", "/\r", 1)
        entry["params"]["label"] = "a\rb"


MARKUP = ("<script>alert(1)</script>", "a|b")  # HTML a page would run, a pipe that ends a markdown table cell


def _names_with_markup(data: dict) -> None:
    """Markup in case names, a param's value, a not-measured case's reason and the device name."""
    data["machine_info"]["cpu_info"]["model"] = f"{MARKUP[0]} {MARKUP[1]}"
    for i, entry in enumerate(data["benchmarks"]):
        entry["extra_info"]["case"] = f"{MARKUP[i % 2]}/{entry['extra_info']['case']}"
        entry["params"]["label"] = MARKUP[i % 2]
    for entry in data["not_measured"]:
        entry["extra_info"]["reason"] = f"{MARKUP[0]} | {MARKUP[1]}"


def _ints_beyond_64_bits(data: dict) -> None:
    """A param and an extra_info field of every timed case holding an integer past 64 bits."""
    for entry in data["benchmarks"]:
        entry["params"]["size"] = 2**70
        entry["extra_info"]["seed"] = 2**64 + 1


def _samples_past_a_spreadsheet_cell(entry: dict) -> None:
    """Raw samples whose JSON text is longer than a spreadsheet cell holds (32,767 characters)."""
    median = entry["stats"]["median"]
    entry["stats"]["data"] = [median * (1 + i / 1e6) for i in range(5000)]


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
    # versions this reader does not know: a newer schema renamed or changed what it would read
    "schema_version_2": _top(lambda d: d.update(schema_version=2)),
    "schema_version_text": _top(lambda d: d.update(schema_version="1")),
    "journal_version_99": _journal(journal=99),
    "journal_schema_version_2": _journal(schema_version=2),
    "duplicate_case": _top(lambda d: d["benchmarks"].append(copy.deepcopy(d["benchmarks"][0]))),
    "entries_without_names": _top(lambda d: d["benchmarks"].extend([{}, 3, None])),
    "attention_seq_text": _top(_attention_with_text_seq),
    "batch_seq_text": _top(lambda d: [e["params"].update(batch="many") for e in d["benchmarks"]], BATCH),
    # machine_info of the wrong types: each crashed every command, and aborted a folder holding it
    "machine_gpu_text": _top(_machine(gpu="NVIDIA H100")),
    "machine_gpu_list": _top(_machine(gpu=[1])),
    "machine_gpu_name_number": _top(_machine(**{"gpu.name": 5})),
    "machine_gpu_name_list": _top(_machine(**{"gpu.name": ["NVIDIA H100"]})),
    "machine_cpu_info_text": _top(_machine(cpu_info="AMD EPYC")),
    "machine_torch_threads_text": _top(_machine(**{"cpu_info.torch_threads": "2"})),
    "machine_world_size_text": _top(_machine(distributed={"world_size": "4", "nodes": 1})),
    "machine_nodes_text": _top(_machine(distributed={"world_size": 4, "nodes": "2"})),
    "machine_node_list": _top(_machine(node=["vm"])),
    "machine_identity_list": _top(_machine(identity=[1])),
    "machine_identity_world_size_text": _top(_machine(**{"identity.world_size": "one"})),
    "machine_peak_text": _top(_machine(gpu={"name": "NVIDIA H100", "peaks": {"bfloat16": {"value": "fast"}}})),
    "machine_achievable_odd": _top(_machine(achievable={"flops": {"bfloat16": {"value": [1]}}, "bandwidth": "x"})),
    "commit_id_number": _top(lambda d: d["commit_info"].update(id=12345)),
    # text no terminal, file name or page can encode
    "lone_surrogates": _top(_lone_surrogates),
    # numbers no measurement gives: each made some command overflow or crash
    "median_denormal": _one_case(_stat("median", 5e-324)),
    "median_huge": _one_case(_stat("median", 1.7e308)),
    "median_true": _one_case(_stat("median", True)),
    "round_medians_infinity": _one_case(_extra(round_medians_s=[2e-4, float("inf"), 2e-4])),
    "rounds_text": _one_case(_stat("rounds", "many")),
    "world_size_zero": _one_case(_extra(world_size=0)),
    "flops_huge": _one_case(_extra(flops=1.7e308)),
    # statistics that contradict each other
    "stats_min_above_median": _one_case(_stat("min", 1.0)),
    "stats_q1_above_q3": _one_case(lambda e: e["stats"].update(q1=e["stats"]["q3"] * 1.01)),
    "stats_mean_above_max": _one_case(lambda e: e["stats"].update(mean=e["stats"]["max"] * 2)),
    "stats_iqr_above_range": _one_case(lambda e: e["stats"].update(iqr=e["stats"]["max"] * 2)),
    # dates matplotlib's calendar cannot hold, or no date at all
    "datetime_year_9999": _top(lambda d: d.update(datetime="9999-12-31T23:59:59+00:00")),
    "datetime_year_1": _top(lambda d: d.update(datetime="0001-01-01T00:00:00")),
    "datetime_number": _top(lambda d: d.update(datetime=1764000000)),
    # flags that are not true or false
    "throttled_text": _one_case(_extra(telemetry={"throttled": "no", "sm_clock_median_mhz": "fast"})),
    "converged_text": _one_case(_extra(converged="yes")),
    "host_bound_number": _one_case(_extra(host_bound=1)),
    # keys named like a report column
    "oom_case_carrying_median_s": _top(_oom_case_carrying_a_median),
    "param_named_incomplete_reason": _one_case(lambda e: e["params"].update(incomplete_reason="stopped")),
    "param_named_median_s": _one_case(lambda e: e["params"].update(median_s=1.0)),
    "param_named_stop_reason": _one_case(lambda e: e["params"].update(stop_reason="once")),
    "param_named_tflops": _one_case(lambda e: e["params"].update(tflops="fast")),
    "extra_named_file": _one_case(_extra(file="other.json", machine_id="GPU-0")),
    "extra_named_throttled": _one_case(_extra(throttled=True)),
    # text a CSV and a spreadsheet must keep as text, in one cell
    "names_like_formulas": _top(_names_like_formulas),
    "names_with_bare_cr": _top(_names_with_bare_cr),
    "samples_past_a_spreadsheet_cell": _one_case(_samples_past_a_spreadsheet_cell),
    # integers no 64-bit column holds (Parquet export raised OverflowError)
    "ints_beyond_64_bits": _top(_ints_beyond_64_bits),
    # text a markdown table or a page must show, never run or split on
    "names_with_markup": _top(_names_with_markup),
}

# The file cannot be used: exit 2 with one line naming it; inside a folder, skipped with a warning.
REFUSED = {"empty", "whitespace", "truncated", "binary_garbage", "gzip", "utf16", "top_level_list",
           "benchmarks_not_a_list", "nested_100000_deep", "nested_900_deep", "fifo", "link_to_dev_zero",
           "folder_named_json", "schema_version_2", "schema_version_text", "journal_version_99",
           "journal_schema_version_2"}
# Items whose first case's median cannot be right, or whose statistics contradict each other: never shown as a
# time, listed as invalid.
INVALID_MEDIAN = {"int_of_5000_digits", "int_of_400_digits", "median_zero", "median_negative", "median_nan",
                  "median_inf", "median_string", "median_list", "median_missing", "stats_missing", "stats_string",
                  "stats_list", "median_denormal", "median_huge", "median_true", "stats_min_above_median",
                  "stats_q1_above_q3", "stats_mean_above_max", "stats_iqr_above_range"}
# Items with a field of the wrong type: left out, with a warning naming the file and this field.
LEFT_OUT = {
    "tflops_list": "extra_info.tflops", "tflops_negative": "extra_info.tflops", "name_list": "name",
    "incomplete_not_bool": "incomplete", "machine_info_list": "machine_info", "commit_info_string": "commit_info",
    "datetime_garbage": "datetime", "machine_gpu_text": "machine_info.gpu", "machine_gpu_list": "machine_info.gpu",
    "machine_gpu_name_number": "machine_info.gpu.name", "machine_gpu_name_list": "machine_info.gpu.name",
    "machine_cpu_info_text": "machine_info.cpu_info",
    "machine_torch_threads_text": "machine_info.cpu_info.torch_threads",
    "machine_world_size_text": "machine_info.distributed.world_size",
    "machine_nodes_text": "machine_info.distributed.nodes", "machine_node_list": "machine_info.node",
    "machine_identity_list": "machine_info.identity",
    "machine_identity_world_size_text": "machine_info.identity.world_size",
    "machine_peak_text": "machine_info.gpu.peaks.bfloat16.value",
    "machine_achievable_odd": "machine_info.achievable.flops.bfloat16.value",
    "commit_id_number": "commit_info.id", "round_medians_infinity": "extra_info.round_medians_s",
    "rounds_text": "stats.rounds", "world_size_zero": "extra_info.world_size", "flops_huge": "extra_info.flops",
    "datetime_year_9999": "datetime", "datetime_year_1": "datetime", "datetime_number": "datetime",
    "throttled_text": "extra_info.telemetry.throttled", "converged_text": "extra_info.converged",
    "host_bound_number": "extra_info.host_bound",
}
# Keys named like a report column: loaded under another name, the column keeps its meaning (key -> its column).
RENAMED = {"param_named_device": ("device", "param_device"),
           "oom_case_carrying_median_s": ("median_s", "extra_median_s"),
           "param_named_incomplete_reason": ("incomplete_reason", "param_incomplete_reason"),
           "param_named_median_s": ("median_s", "param_median_s"),
           "param_named_stop_reason": ("stop_reason", "param_stop_reason"),
           "param_named_tflops": ("tflops", "param_tflops"), "extra_named_file": ("file", "extra_file"),
           "extra_named_throttled": ("throttled", "extra_throttled")}
# A bad raw sample: only compare loads the samples, and warns; the other commands never read them.
SAMPLES_ONLY = {"data_strings", "data_negative"}
# Other warnings naming the file: what could be worked around was.
WARNED = {"unknown_top_level", "duplicate_case", "entries_without_names", "lone_surrogates"}
# Items the reports read as they are (a byte order mark is still UTF-8 text, a number is a fine group name).
BENIGN = {"attention_seq_text", "bom", "case_ids_differing_in_separator", "mathtext_names", "mathtext_batch_device",
          "names_300_chars", "group_number", "params_list_values", "batch_seq_text", "names_like_formulas",
          "names_with_bare_cr", "samples_past_a_spreadsheet_cell", "names_with_markup",
          "ints_beyond_64_bits"}
OUTCOMES = {"refused": REFUSED, "invalid": INVALID_MEDIAN, "left out": set(LEFT_OUT), "renamed": set(RENAMED),
            "samples only": SAMPLES_ONLY, "warned": WARNED, "benign": BENIGN}

# Items read as they are, whose plots cannot use one case: the plotting commands warn.
PLOT_WARNINGS = {"attention_seq_text"}


def _event(name: object = "volta_h884gemm_64x64_nt", ts: object = 1000, dur: object = 10, cat: str = "kernel",
           **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "correlation": 1, **args}}


def _trace(*events: dict, **top: object) -> Writer:
    def write(folder: Path) -> Path:
        good = [_event(), _event("volta_sgemm_128x64_nn", 1020, 5, correlation=2)]
        path = folder / "trace.json"
        path.write_text(json.dumps({"traceEvents": [*good, *events], **top}))
        return path
    return write


def many_devices_trace(folder: Path, devices: int = 20_000) -> Path:
    """One kernel on each of `devices` device ids (a pass over every event per device was quadratic: 67 to 120
    s for 100,000 ids, which tools/bench_trace_devices.py times; the tests check the figures on 20,000, a
    fifth of the time); kernel i lasts 1 + i % 5 us."""
    events = [{"ph": "X", "cat": "kernel", "name": f"kernel_{i % 7}", "pid": 0, "tid": 7, "ts": 1000 + i,
               "dur": 1 + i % 5, "args": {"device": i, "correlation": i}} for i in range(devices)]
    path = folder / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


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
    "trace_device_text_and_number": _trace(_event(ts=1040, device="0"), _event(ts=1060, device=0.0)),
    "trace_fifo": lambda folder: _fifo_named(folder, "trace.json"),
    "trace_link_to_dev_zero": lambda folder: _link_named(folder, "trace.json"),
    "trace_20k_device_ids": many_devices_trace,
    # times missing or not numbers: once the whole trace was refused for one such event, while a NaN was left out
    "trace_ts_missing": _trace({k: v for k, v in _event(ts=1040).items() if k != "ts"}),
    "trace_dur_null": _trace(_event(ts=1040, dur=None)),
    "trace_copy_bytes_text": _trace(_event("Memcpy HtoD (Pageable -> Device)", 1040, cat="gpu_memcpy", bytes="many")),
    # what a JSON reader reads otherwise, or a structure that holds no events
    "trace_events_twice": _raw(f'{{"traceEvents": [{json.dumps(_event())}], '
                               f'"traceEvents": [{json.dumps(_event(ts=5000))}]}}', "trace.json"),
    "trace_events_an_object": _raw(f'{{"traceEvents": {{"0": {json.dumps(_event())}}}}}', "trace.json"),
    "trace_entry_not_an_event": _trace([_event(ts=1040)]),
    "trace_device_true_and_1": _trace(_event(ts=1040, device=True), _event(ts=1060, device=1)),
    "trace_device_properties_object": _trace(deviceProperties={"id": 0, "name": "NVIDIA A100"}),
    "trace_gzip_truncated": _raw(gzip.compress(json.dumps({"traceEvents": [_event()] * 200}).encode())[:-4],
                                 "trace.json.gz"),  # every event there, the end of the gzip stream cut
}

# Traces with events whose times cannot be used: left out, counted in one warning naming the file.
TRACE_LEFT_OUT = {"trace_negative_duration", "trace_nan_duration", "trace_ts_text", "trace_ts_missing",
                  "trace_dur_null"}
# Traces that cannot be read as they are: one error line naming the file, exit 2.
TRACE_REFUSED = {"trace_empty", "trace_truncated", "trace_gzip_garbage", "trace_deep", "trace_fifo",
                 "trace_link_to_dev_zero", "trace_events_twice", "trace_events_an_object",
                 "trace_entry_not_an_event", "trace_gzip_truncated"}


def _fifo_named(folder: Path, name: str) -> Path:
    os.mkfifo(folder / name)
    return folder / name


def _link_named(folder: Path, name: str) -> Path:
    (folder / name).symlink_to("/dev/zero")
    return folder / name
