"""`python -m reports export`: the tidy frame of real runs as CSV and Parquet, read back by pandas."""

from __future__ import annotations

import json
import math
import sys

import pandas as pd
import pytest

from reports.__main__ import main
from reports.format.load import load
from tests.resultfiles import DATA, RUN_A

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
    samples = back["samples_s"].dropna().map(json.loads)
    assert samples.map(len).sum() == frame["samples_s"].dropna().map(len).sum()
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
