"""reports.format.load: this suite's files, other projects' pytest-benchmark 3.x/4.x/5.x files, storage dirs, bad
input."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pandas as pd
import pytest

from reports.__main__ import main
from reports.format import jsonstream
from reports.format.document import read_json
from reports.format.errors import InputError
from reports.format.load import load
from tests.resultfiles import DATA, RUN_A, RUN_B, read, write


def test_own_run_has_run_device_and_our_fields_on_every_row():
    frame = load([RUN_A])
    data = read(RUN_A)
    assert len(frame) == len(data["benchmarks"]) + len(data["not_measured"])
    for column in ("file", "datetime", "commit", "machine", "device", "group", "case", "status"):
        assert frame[column].notna().all(), column
    assert frame["device"].nunique() == 1 and frame["device"].iloc[0].startswith(data["machine_info"]["cpu_info"]
                                                                                 ["model"])
    assert str(frame["datetime"].dtype).startswith("datetime64") and frame["datetime"].dt.tz is not None
    assert frame["case"].is_unique
    ok = frame[frame["status"] == "ok"]
    first = data["benchmarks"][0]
    row = ok[ok["case"] == first["extra_info"]["case"]].iloc[0]
    assert row["median_s"] == first["stats"]["median"] and row["samples_s"] == first["stats"]["data"]
    assert row["dtype"] == first["params"]["dtype"] and row["tflops"] == first["extra_info"]["tflops"]
    skipped = frame[frame["status"] != "ok"]
    assert skipped["median_s"].isna().all() and skipped["reason"].notna().all()


@pytest.mark.parametrize(("name", "version", "device", "cases"), [
    ("pb3_other_project.json", "3.2.3", "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz",
     ["tests/test_speed.py::test_parse[small]", "tests/test_speed.py::test_tokenize"]),
    ("pb4_other_project.json", "4.0.0", "AMD Ryzen 7 5800X 8-Core Processor",
     ["bench/test_resize.py::test_resize[bilinear-512]", "bench/test_resize.py::test_resize[nearest-512]"]),
    ("pb5_other_project.json", "5.1.0", "Apple M2 Pro", ["benchmarks/test_decode.py::test_decode[twitter.json]"]),
])
def test_other_projects_files_of_each_major_version(name, version, device, cases):
    assert read(DATA / name)["version"] == version
    frame = load([DATA / name])
    assert frame["case"].tolist() == cases  # no extra_info.case: the fullname is the stable key
    assert (frame["device"] == device).all()
    assert (frame["status"] == "ok").all() and frame["median_s"].notna().all()
    assert frame["datetime"].dt.tz is not None  # naive (3.x, 4.x) read as UTC, aware (5.x) kept


def test_naive_datetime_of_old_versions_is_utc():
    frame = load([DATA / "pb4_other_project.json"])
    assert frame["datetime"].iloc[0] == pd.Timestamp("2022-11-03T14:25:31.908712", tz="UTC")


def test_null_params_and_group_and_empty_extra_info():
    frame = load([DATA / "pb3_other_project.json"])
    tokenize = frame[frame["name"] == "test_tokenize"].iloc[0]
    assert pd.isna(tokenize["group"]) and pd.isna(tokenize["size"])
    assert frame[frame["name"] == "test_parse[small]"].iloc[0]["size"] == "small"


def test_benchmarks_storage_directory(tmp_path):
    storage = tmp_path / ".benchmarks" / "Linux-CPython-3.11-64bit"
    storage.mkdir(parents=True)
    shutil.copy(RUN_A, storage / "0001_abc_20261129_094457.json")
    shutil.copy(DATA / "pb5_other_project.json", storage / "0002_def_20261130_094457.json")
    frame = load([tmp_path / ".benchmarks"])
    assert frame["file"].nunique() == 2 and frame["device"].nunique() == 2


def test_large_raw_data_arrays(tmp_path):
    data = read(DATA / "pb5_other_project.json")
    data["benchmarks"][0]["stats"]["data"] = [1e-3 + i * 1e-12 for i in range(400_000)]  # several MB of JSON
    path = write(data, tmp_path / "big.json")
    assert path.stat().st_size > 5_000_000
    assert len(load([path])["samples_s"].iloc[0]) == 400_000


@pytest.mark.parametrize(("content", "problem"), [
    ("", "file is empty"),
    ('{"benchmarks": [{"name": "x", "stats": {"median": 1', "not valid JSON"),
    ("not json at all", "not valid JSON"),
    ('{"results": []}', "not a pytest-benchmark result"),
    ("[1, 2, 3]", "not a pytest-benchmark result"),
])
def test_bad_file_is_one_line_error_exit_2(tmp_path, capsys, content, problem):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError, match=problem):
        load([path])
    assert main(["table", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and problem in err


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load([tmp_path / "absent.json"])


def test_bad_file_inside_a_directory_is_skipped_with_a_warning(tmp_path, capsys):
    shutil.copy(RUN_A, tmp_path / "good.json")
    (tmp_path / "truncated.json").write_text(RUN_A.read_text()[:500])
    frame = load([tmp_path])
    assert frame["file"].nunique() == 1
    err = capsys.readouterr().err
    assert "truncated.json" in err and "skipped" in err


def test_unknown_fields_warn_and_the_rest_is_used(tmp_path, capsys):
    data = read(RUN_A)
    data["my_own_field"] = {"x": 1}
    data["benchmarks"][0]["unknown_entry_field"] = 3
    frame = load([write(data, tmp_path / "extra.json")])
    assert len(frame) == len(load([RUN_A]))
    assert "unknown top-level field(s) my_own_field" in capsys.readouterr().err


def test_duplicate_case_warns_and_keeps_the_first(tmp_path, capsys):
    data = read(RUN_A)
    duplicate = json.loads(json.dumps(data["benchmarks"][0]))
    duplicate["stats"]["median"] *= 10
    data["benchmarks"].append(duplicate)
    frame = load([write(data, tmp_path / "dup.json")])
    case = duplicate["extra_info"]["case"]
    assert (frame["case"] == case).sum() == 1
    assert frame.loc[frame["case"] == case, "median_s"].iloc[0] == data["benchmarks"][0]["stats"]["median"]
    assert "duplicate case" in capsys.readouterr().err


def test_entries_without_a_name_are_left_out_with_a_warning(tmp_path, capsys):
    data = read(RUN_A)
    data["benchmarks"].append({"stats": {"median": 1.0}})
    data["benchmarks"].append("garbage")
    frame = load([write(data, tmp_path / "odd.json")])
    assert len(frame) == len(load([RUN_A]))
    assert "2 entries of 'benchmarks' have no name" in capsys.readouterr().err


def test_file_with_no_entries_at_all_is_an_error(tmp_path):
    data = read(RUN_A)
    data["benchmarks"], data["not_measured"] = [], []
    with pytest.raises(InputError, match="no benchmark entries"):
        load([write(data, tmp_path / "empty_run.json")])


def test_a_param_named_device_keeps_its_own_column(tmp_path, capsys):
    data = read(RUN_A)
    for i, entry in enumerate(data["benchmarks"]):
        entry["params"]["device"] = "cuda" if i % 2 else "cpu"
    frame = load([write(data, tmp_path / "run.json")])
    timed = frame[frame["median_s"].notna()]
    assert set(timed["param_device"]) == {"cpu", "cuda"} and timed["device"].nunique() == 1
    assert "param_device" in timed["param_names"].iloc[0].split(",")
    assert main(["table", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert "param_device" in out and " cuda " in out


@pytest.mark.parametrize("median", [0, -1e-3, float("nan"), float("inf"), "fast", [1e-3], None])
def test_a_median_that_cannot_be_a_time_is_invalid_with_a_warning_naming_file_and_case(median, tmp_path, capsys):
    data = read(RUN_A)
    entry = data["benchmarks"][0]
    entry["stats"]["median"] = median
    path = write(data, tmp_path / "run.json")
    row = load([path]).set_index("case").loc[entry["extra_info"]["case"]]
    assert row["status"] == "invalid" and pd.isna(row["median_s"]) and "stats.median" in row["reason"]
    err = capsys.readouterr().err
    assert f"{path}: case {entry['extra_info']['case']!r}" in err


def test_several_runs_in_one_table_are_told_apart(tmp_path, capsys):
    shutil.copy(RUN_A, tmp_path / "a.json")
    shutil.copy(DATA / "run_cpu_quick_b.json", tmp_path / "b.json")
    assert main(["table", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "same on every row: status ok" and lines[4].split()[0] == "run"
    assert any(line.startswith("a.json ") for line in lines) and any(line.startswith("b.json ") for line in lines)


@pytest.mark.parametrize("chunk", [1, 7, 61, 4093])
def test_a_file_read_in_small_pieces_loads_as_it_does_whole(chunk, monkeypatch):
    """Entries, numbers and escapes cut by a chunk's end load the same (the loader streams each file)."""
    whole = load([RUN_A, DATA / "dist_cpu_quick.json", DATA / "pb3_other_project.json"])
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)
    pieces = load([RUN_A, DATA / "dist_cpu_quick.json", DATA / "pb3_other_project.json"])
    pd.testing.assert_frame_equal(whole, pieces)


def test_raw_samples_are_loaded_only_when_asked_for():
    assert "samples_s" not in load([RUN_A], samples=False)
    with_samples = load([RUN_A])
    assert with_samples["samples_s"].dropna().map(len).sum() == sum(len(e["stats"]["data"])
                                                                      for e in read(RUN_A)["benchmarks"])


def test_a_param_and_an_extra_info_field_holding_one_fact_share_its_column():
    """The distributed cases write `strategy` in params and extra_info: one column, the case's axis."""
    frame = load([DATA / "dist_cpu_quick.json"])
    assert "param_strategy" not in frame and "extra_strategy" not in frame
    strategies = frame[frame["strategy"].notna()]
    assert len(strategies) and strategies["param_names"].str.split(",").map(lambda axes: "strategy" in axes).all()


def test_a_param_named_like_a_typed_figure_keeps_it_a_number(tmp_path):
    data = read(RUN_A)
    data["benchmarks"][0]["params"]["tflops"] = "fast"  # with extra_info.tflops a number beside it
    data["benchmarks"][1]["params"]["converged"] = data["benchmarks"][1]["extra_info"]["converged"]  # the same
    frame = load([write(data, tmp_path / "run.json")]).set_index("case")
    first, second = (e["extra_info"]["case"] for e in data["benchmarks"][:2])
    assert frame.loc[first, "param_tflops"] == "fast" and frame.loc[first, "tflops"] == data["benchmarks"][0][
        "extra_info"]["tflops"]
    assert frame.loc[second, "converged"] is True and pd.isna(frame.loc[second].get("param_converged"))


def test_contradictory_statistics_make_the_case_invalid_with_why(tmp_path, capsys):
    data = read(RUN_A)
    entry = data["benchmarks"][0]
    entry["stats"]["q1"], entry["stats"]["q3"] = entry["stats"]["q3"], entry["stats"]["q1"]
    path = write(data, tmp_path / "run.json")
    row = load([path]).set_index("case").loc[entry["extra_info"]["case"]]
    assert row["status"] == "invalid" and pd.isna(row["median_s"]) and pd.isna(row["q1_s"])
    assert row["reason"].startswith("stats contradict each other: q1 ")
    assert f"{path}: case {entry['extra_info']['case']!r}: stats contradict each other" in capsys.readouterr().err


def test_a_real_run_has_no_contradictory_statistics_nor_wrong_types(capsys):
    """The checks reject nothing in real files of this suite and of other projects (no false alarms)."""
    frame = load(sorted(DATA.glob("*.json")))
    assert "warning" not in capsys.readouterr().err
    assert not (frame["status"] == "invalid").any()


def test_more_cases_than_a_report_holds_are_refused_with_the_numbers(tmp_path, monkeypatch, capsys):
    """Even inside a folder: skipping the file would hide it, reading on would fill the memory."""
    shutil.copy(RUN_A, tmp_path / "a.json")
    shutil.copy(RUN_B, tmp_path / "b.json")
    monkeypatch.setattr("reports.format.load.MAX_ROWS", len(load([RUN_A])) + 5)
    assert main(["table", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'b.json'}: at its case 6, over the ") and "GB as a table" in line


def test_a_journal_gives_each_case_from_its_last_line_and_leaves_out_a_cut_one(tmp_path, capsys):
    """What a run killed in its third round leaves: rounds 1 and 2 of a case, a garbled line, then a line cut by
    the kill. The cut last line is not written yet (a running journal's last line may be half-way): left out
    without a word; a whole line that is no JSON is left out with a warning."""
    data = read(RUN_A)
    first, second = data["benchmarks"][:2]
    later = json.loads(json.dumps(first))
    later["stats"]["median"] = first["stats"]["median"] * 1.01
    header = {"journal": 1, "machine_info": data["machine_info"], "commit_info": data["commit_info"],
              "datetime": data["datetime"], "version": data["version"]}
    lines = [header, {"benchmarks": first}, {"benchmarks": second}, {"benchmarks": later}]
    journal = tmp_path / "run.json.journal"
    lines.insert(3, "garbled")
    journal.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
                       + '{"benchmarks": {"name": "cut')
    frame = load([journal]).set_index("case")
    assert frame.loc[first["extra_info"]["case"], "median_s"] == later["stats"]["median"] and len(frame) == 2
    assert frame["incomplete_reason"].notna().all() and frame["device"].iloc[0].startswith("AMD EPYC")
    err = capsys.readouterr().err
    assert "duplicate" not in err and f"{journal}: not valid JSON" in err and "(line 4); left out" in err
    assert "line 6" not in err and err.count("warning") == 1, err


@pytest.mark.parametrize("name, change, said", [
    ("run.json", lambda d: d.update(schema_version=2), "schema_version 2 is newer than this reader's 1"),
    ("run.json.journal", lambda header: header.update(journal=99), "journal 99 is newer than this reader's 2"),
], ids=["results", "journal"])
def test_a_file_of_a_newer_version_is_refused_in_one_line_naming_it(name, change, said, tmp_path, capsys):
    """A newer version renamed or changed a field: read as version 1 it would mislead without a word."""
    data = read(RUN_A)
    path = tmp_path / name
    if name.endswith(".journal"):
        header = {"journal": 2, "schema_version": 1, "machine_info": data["machine_info"]}
        change(header)
        path.write_text("".join(json.dumps(line) + "\n" for line in [header, {"benchmarks": data["benchmarks"][0]}]))
    else:
        change(data)
        write(data, path)
    assert main(["table", str(path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {path}: {said}; read it with a newer version of this project"]
    shutil.copy(RUN_B, tmp_path / "b.json")  # in a folder: that file skipped with a warning, the others read
    assert main(["table", str(tmp_path)]) == 0
    assert f"warning: {path}: {said}" in capsys.readouterr().err


def test_a_journal_read_while_its_run_appends_gives_its_whole_lines_every_time(tmp_path, capsys):
    """A thread appends cases to a journal, each line in two writes (so a reader sees half lines), while this
    thread reads it again and again as `reports table` and advise's progress check do: every read gives the cases
    of the whole lines so far, never a KeyError (25 to 79 of 120 reads raised one) nor a warning."""
    data = read(RUN_A)
    header = {"journal": 2, "schema_version": 1, "machine_info": data["machine_info"], "datetime": data["datetime"]}
    lines = [json.dumps(line) + "\n" for line in [header, *({"benchmarks": e} for e in data["benchmarks"])]]
    journal = tmp_path / "run.json.journal"
    journal.write_text(lines[0])
    done = threading.Event()

    def append() -> None:
        with open(journal, "a", buffering=1) as fh:
            for line in lines[1:]:
                half = len(line) // 2
                fh.write(line[:half])
                fh.flush()
                time.sleep(0.002)
                fh.write(line[half:])
                fh.flush()
                time.sleep(0.002)
        done.set()

    threading.Thread(target=append, daemon=True).start()
    counts, finished = [], False
    while not finished or len(counts) < 120:
        finished = done.is_set()  # before the read: the last read starts after the last line was written
        counts.append(len(read_json(journal)["benchmarks"]))
        if counts[-1]:
            assert len(load([journal], samples=False)) >= counts[-1]
    assert counts == sorted(counts) and counts[-1] == len(data["benchmarks"])
    assert len(set(counts)) > 2, "the reads did not overlap the appends"
    assert "warning" not in capsys.readouterr().err
