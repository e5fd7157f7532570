"""`python -m reports table` on real runs: tables fit the terminal, say what they left out, name runs cut short."""

from __future__ import annotations

import re
import shutil

import pytest

from reports.__main__ import main
from tests import hostile
from tests.resultfiles import DATA, RUN_A, RUN_B, read, write
from tests.runs import run_pytest_in_process

# every suite's real runs: the widest tables (train_step's 15 params, collectives, the batch sweep), two runs of one
# device (a run column), another project's file
FILES = [RUN_A, RUN_B, DATA / "batch_size_cpu_quick.json", DATA / "dist_cpu_quick.json",
         DATA / "advise_conv_cpu_quick" / "sweep.json", DATA / "pb4_other_project.json"]


def _table(capsys, *args: str) -> list[str]:
    assert main(["table", *map(str, FILES), *args]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("width", [100, 120, 160])
def test_every_line_fits_the_terminal_and_wide_shows_every_column(width, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(width))
    fitted = _table(capsys)
    assert max(map(len, fitted)) <= width
    wide = _table(capsys, "--wide")
    assert max(map(len, wide)) > 250  # as the tables were before: every param and figure on every row
    assert any(line.startswith("(left out to fit") for line in fitted)
    assert any("each case named by its id" in line for line in fitted)  # train_step's params do not fit
    assert not any(line.startswith("(left out") for line in wide)


def test_what_is_left_out_is_named_and_constant_columns_are_said_once(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    lines = _table(capsys)
    matmul = lines[lines.index("## matmul on AMD EPYC (2 threads)"):]
    assert matmul[2] == "same on every row: status ok"
    left_out = next(line for line in matmul if line.startswith("(left out to fit 100 characters: "))
    header = next(line for line in matmul if line.startswith("run "))
    for column in left_out.split(": ", 1)[1].split(";")[0].split(", "):
        assert column not in header.split()
    assert "time" in header.split() and "tflops" in header.split()  # the figures that matter stay


def test_an_incomplete_run_says_so_first(tmp_path, capsys):
    data = read(RUN_A)
    del data["benchmarks"][5:]
    data.update(incomplete=True, incomplete_reason="stopped by SIGTERM; 5 of 21 selected cases finished")
    assert main(["table", str(write(data, tmp_path / "cut.json"))]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "INCOMPLETE run cut.json: stopped by SIGTERM; 5 of 21 selected cases finished; it holds only " \
        "the cases it finished"


def test_a_killed_runs_journal_says_so_in_the_table(tmp_path, capsys):
    journal = tmp_path / "run.json.journal"
    shutil.copy(RUN_A, tmp_path / "a.json")
    data = read(RUN_A)
    from reports.format import strict_json
    lines = [strict_json.dumps({"journal": 1, "machine_info": data["machine_info"], "datetime": data["datetime"]}),
             strict_json.dumps({"benchmarks": data["benchmarks"][0]})]
    journal.write_text("\n".join(lines) + "\n")
    assert main(["table", str(journal)]) == 0
    assert capsys.readouterr().out.startswith("INCOMPLETE run run.json.journal: the run ended without writing")


def _cells(line: str) -> list[str]:
    """A markdown table row's cells, split where GitHub splits them: at every `|` not escaped."""
    return re.split(r"(?<!\\)\|", line.strip().strip("|"))


def _markdown_tables_hold(out: str) -> None:
    """Every row of every markdown table has its header's columns, and no markup from the file is left raw."""
    assert "<script>" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    tables = re.findall(r"(?:^\|.*\n?)+", out, flags=re.MULTILINE)
    assert tables
    for table in tables:
        widths = {len(_cells(line)) for line in table.splitlines()}
        assert len(widths) == 1, table


@pytest.mark.parametrize("command", ["table", "compare"])
def test_markdown_escapes_pipes_and_html_from_the_results(command, tmp_path, capsys):
    """A `|` in a case name or param shifted the columns of a CI job summary; `<script>` went through raw."""
    path = str(hostile.RESULTS["names_with_markup"](tmp_path))
    argv = ["table", path] if command == "table" else ["compare", path, path]
    assert main([*argv, "--markdown"]) == 0
    out = capsys.readouterr().out
    _markdown_tables_hold(out)
    assert "a\\|b" in out


def test_the_html_report_escapes_every_name_from_the_results(tmp_path, capsys):
    path = hostile.RESULTS["names_with_markup"](tmp_path)
    assert main(["html", str(path), "-o", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


TWO_TESTS_SAME_PARAMS = '''
import pytest

@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("shape", [32, 64])
def test_rgb_to_yuv(benchmark, batch, shape):
    benchmark(sum, range(batch * shape))

@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("shape", [32, 64])
def test_yuv_to_rgb(benchmark, batch, shape):
    benchmark(sum, range(batch * shape))
'''


def test_two_tests_over_the_same_params_keep_their_names(tmp_path, capsys):
    """kornia's `rgb_to_yuv` and `yuv_to_rgb` rows (same params) could not be told apart: a real pytest-benchmark
    run of two such tests, and every row of its table says which test it is."""
    (tmp_path / "test_color.py").write_text(TWO_TESTS_SAME_PARAMS)
    out = tmp_path / "color.json"
    proc = run_pytest_in_process("test_color.py", f"--benchmark-json={out}", "--benchmark-max-time=0.001",
                                 "--benchmark-min-rounds=1", "--benchmark-warmup=off", cwd=tmp_path)
    assert proc.returncode == 0, proc.tail()
    assert main(["table", str(out), "--wide"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("test_")]
    assert len(rows) == 8 and len({line.split()[0] for line in rows}) == 8
    assert sum(line.startswith("test_rgb_to_yuv[") for line in rows) == 4


def test_one_test_in_several_runs_gets_no_name_column(capsys):
    assert main(["table", str(RUN_A), str(RUN_B), "--wide"]) == 0
    assert "name" not in capsys.readouterr().out.split("\n\n")[2].splitlines()[0].split()
