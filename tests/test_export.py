"""`python -m reports export`: the tidy frame of real runs as CSV and Parquet, read back by pandas."""

from __future__ import annotations

import csv
import json
import math
import sys

import pandas as pd
import pytest

from reports import export
from reports.__main__ import main
from reports.format.errors import InputError
from reports.format.load import load
from reports.format.outputs import write_with
from tests import hostile
from tests.resultfiles import DATA, RUN_A
from tests.runs import run_python

# real runs of several suites, another project's file (no params, other stats) and a journal-free mix of kinds
FILES = [RUN_A, DATA / "batch_size_cpu_quick.json", DATA / "dist_cpu_quick.json", DATA / "pb4_other_project.json",
         DATA / "run_cpu_quick_rounds.json"]


def test_csv_has_every_row_and_column_and_lists_as_json(tmp_path, capsys):
    out = tmp_path / "results.csv"
    assert main(["export", *map(str, FILES), "-o", str(out)]) == 0
    frame = load(FILES)
    columns = [*frame.columns, "marks"]  # the loader's, and how each timed figure was taken (reports/marks.py)
    assert capsys.readouterr().out.startswith(f"{out}: {len(frame)} rows x {len(columns)} columns from 5 run")
    back = pd.read_csv(out)
    assert list(back.columns) == columns and len(back) == len(frame)
    assert back["median_s"].to_numpy() == pytest.approx(frame["median_s"].to_numpy(), nan_ok=True)
    # a samples cell longer than a spreadsheet cell is cut with a marker, every other one is whole JSON
    written = back["samples_s"].dropna()
    cut = written.str.endswith("in a Parquet export]")
    long = frame["samples_s"].dropna().map(lambda s: len(json.dumps(s)) > export.CELL_LIMIT)
    assert cut.sum() == long.sum() > 0
    assert written[~cut].map(json.loads).map(len).sum() == frame["samples_s"].dropna()[~long].map(len).sum()
    assert (back["rel_iqr"] == math.inf).any()  # a non-finite figure stays what it was (pandas reads `inf`)


def test_parquet_keeps_types_and_reads_back(tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "results.parquet"
    assert main(["export", *map(str, FILES), "-o", str(out)]) == 0
    back = pd.read_parquet(out)
    frame = load(FILES)
    assert len(back) == len(frame) and set(back.columns) == {*frame.columns, "marks"}
    assert str(back["datetime"].dtype).startswith("datetime64") and back["median_s"].dtype == float
    rounds = back["round_medians_s"].dropna().map(json.loads)
    assert len(rounds) and all(len(r) == 3 for r in rounds)


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what `import pyarrow` meets where it is not installed
    assert main(["export", str(RUN_A), "-o", str(tmp_path / "r.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs pyarrow" in err and ".[parquet]" in err
    assert not (tmp_path / "r.parquet").exists()


@pytest.mark.parametrize("name", ["r.xlsx", "missing/r.csv"])
def test_an_output_it_cannot_write_is_one_line(name, tmp_path, capsys):
    assert main(["export", str(RUN_A), "-o", str(tmp_path / name)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# A child that may write files of at most LIMIT bytes: past it a write fails with EFBIG, as on a full disk.
SIZE_LIMIT = 4096
LIMITED = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
           f"resource.setrlimit(resource.RLIMIT_FSIZE, ({SIZE_LIMIT}, {SIZE_LIMIT})); "
           "from reports.__main__ import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("command", [["export", *map(str, FILES), "-o"],
                                     ["compare", str(RUN_A), str(DATA / "run_cpu_quick_rounds.json"),
                                      "--allow-different-devices", "--json"]], ids=["export", "compare_json"])
def test_a_write_that_fails_midway_leaves_the_old_file_whole(command, tmp_path):
    """A file-size limit (a full disk's error) met halfway: exit 2 naming the file, which keeps its old bytes,
    and no temporary file is left beside it."""
    out = tmp_path / ("old.csv" if command[0] == "export" else "old.json")
    out.write_text("the old file, whole\n")
    proc = run_python("-c", LIMITED, *command, str(out))
    assert proc.returncode == 2, proc.tail()
    assert proc.stderr.strip().splitlines()[-1].endswith(f" {out}: cannot write (File too large); the file is "
                                                    "left as it was")
    assert out.read_text() == "the old file, whole\n"
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_a_writer_that_raises_leaves_no_file(tmp_path):
    out = tmp_path / "results.csv"

    def half_then_fail(temporary):
        load([RUN_A]).to_csv(temporary, index=False)
        raise OSError(28, "No space left on device")

    with pytest.raises(InputError, match="No space left on device"):
        write_with(out, half_then_fail)
    assert list(tmp_path.iterdir()) == []


def _csv_rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", ["names_like_formulas", "names_with_bare_cr"])
def test_csv_keeps_one_row_per_case_and_formulas_as_text(name, tmp_path):
    """A bare carriage return is quoted (3 cases once read back as 4 rows); a cell a spreadsheet would run as a
    formula starts with `'` (OWASP), a negative number stays a number."""
    source = hostile.RESULTS[name](tmp_path)
    frame = load([source])
    out = tmp_path / "results.csv"
    assert main(["export", str(source), "-o", str(out)]) == 0
    rows, back = _csv_rows(out), pd.read_csv(out)
    assert len(rows) == len(back) == len(frame)
    def as_text(value: str) -> str:
        return "'" + value if value.startswith(export.FORMULA_STARTS) else value

    assert [r["case"] for r in rows] == [as_text(c) for c in frame["case"]] == list(back["case"])
    labelled = frame["label"].notna().to_numpy()
    assert [r["label"] for r, has in zip(rows, labelled, strict=True) if has] == list(frame["label"].dropna().map(
        as_text)) == list(back["label"].dropna())
    if name == "names_like_formulas":
        assert [r["label"] for r in rows][:4] == ["'" + f for f in hostile.FORMULAS]
        assert all(r["case"].startswith("'") for r in rows[:4])
        assert back["offset"].dropna().tolist() == [-3] * 4 and back["offset"].dtype.kind in "if"


def test_a_cell_past_a_spreadsheet_cell_is_cut_with_a_marker(tmp_path):
    source = hostile.RESULTS["samples_past_a_spreadsheet_cell"](tmp_path)
    out = tmp_path / "results.csv"
    assert main(["export", str(source), "-o", str(out)]) == 0
    rows, back = _csv_rows(out), pd.read_csv(out)
    assert len(rows) == len(back) == len(load([source]))
    cut = rows[0]["samples_s"]
    assert len(cut) == export.CELL_LIMIT and "...[cut: " in cut
    assert cut.endswith("characters, more than a spreadsheet cell holds; the whole value is in the results file "
                        "and in a Parquet export]")
    assert max(len(v) for r in rows for v in r.values()) <= export.CELL_LIMIT
    assert all(json.loads(r["samples_s"]) for r in rows[1:4])  # the other timed cases whole


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_integers_beyond_64_bits_keep_every_digit(suffix, tmp_path, capsys):
    """Parquet holds them as text, with a warning naming the column (pyarrow raised OverflowError); CSV as
    they are."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="Parquet export needs pyarrow (the parquet extra), not installed here")
    source = hostile.RESULTS["ints_beyond_64_bits"](tmp_path)
    out = tmp_path / f"results{suffix}"
    assert main(["export", str(source), "-o", str(out)]) == 0
    back = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out, dtype={"size": str, "seed": str})
    assert back["size"].dropna().tolist() == [str(2**70)] * 4 and back["seed"].dropna().tolist() == [str(2**64 + 1)] * 4
    err = capsys.readouterr().err
    if suffix == ".parquet":
        assert "column 'size' holds integers beyond 64 bits; written as text" in err
    else:
        assert "warning" not in err
