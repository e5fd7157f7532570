"""reports.history: steps in nightly history built from two real runs (reports/judge.py is tested on known series in
tests/test_judge.py)."""

from __future__ import annotations

import numpy as np
import pytest

from reports import judge
from reports.__main__ import main
from reports.format.load import load
from reports.text import file_stem
from reports.timeline import trends
from tests.resultfiles import RUN_A, RUN_B, converged_case, dated, read, scaled, with_identity, write

STEP_AT = 8
RUNS = 14


@pytest.fixture
def history_dir(tmp_path):
    """14 nightly runs, alternating the two real runs (real run-to-run noise); one case 30 % slower from run 8.

    File names do not sort in time order, so the history must order by each file's datetime.
    """
    a, b = read(RUN_A), read(RUN_B)
    case = converged_case(a)
    for i in range(RUNS):
        data = a if i % 2 == 0 else b
        if i >= STEP_AT:
            data = scaled(data, case, 1.3)
        commit = f"{i:08x}".ljust(40, "0")
        write(dated(data, f"2026-11-{i + 1:02d}T03:00:00+00:00", commit), tmp_path / f"run_{RUNS - i:02d}.json")
    return tmp_path, case


def test_step_is_found_at_the_run_where_it_happened(history_dir):
    directory, case = history_dir
    found = trends(load([directory]))
    stepped = [t for t in found if t.steps]
    assert [t.case for t in stepped] == [case]
    (step,) = stepped[0].steps
    assert step.at == STEP_AT and step.ratio == pytest.approx(1.3, rel=0.1)
    assert stepped[0].run_label(step.at).startswith(f"2026-11-{STEP_AT + 1:02d} 03:00 {STEP_AT:08x}")


def test_history_command_names_the_run_and_writes_plots(history_dir, tmp_path, capsys):
    directory, case = history_dir
    out = tmp_path / "plots"
    assert main(["history", str(directory), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 with a step" in text and case in text and f"run_{RUNS - STEP_AT:02d}.json" in text and "+3" in text
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert any(name.startswith("history_step_") for name in pngs) and "history_matmul" in " ".join(pngs)
    assert all((out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in pngs)


def test_no_step_in_a_history_without_change(tmp_path):
    a, b = read(RUN_A), read(RUN_B)
    for i in range(10):
        write(dated(a if i % 2 else b, f"2026-10-{i + 1:02d}T03:00:00+00:00", f"{i:040x}"), tmp_path / f"{i}.json")
    assert not any(t.steps for t in trends(load([tmp_path])))


def test_history_of_a_directory_with_no_results(tmp_path, capsys):
    assert main(["history", str(tmp_path)]) == 2
    assert "holds no .json" in capsys.readouterr().err


def test_two_boxes_of_one_gpu_model_are_two_series_and_a_torch_upgrade_is_named_at_its_step(tmp_path):
    """A labelling test on copies of real runs: the GPU name and identities are set, the timings are real."""
    a, b = read(RUN_A), read(RUN_B)
    case = converged_case(a)
    for box in ("GPU-1111", "GPU-2222"):
        for i in range(9):
            data = with_identity(a if i % 2 == 0 else b, machine=box, torch="2.5.1" if i < 6 else "2.6.0")
            data["machine_info"]["gpu"] = {"name": "NVIDIA H100 80GB HBM3"}
            if i >= 6 and box == "GPU-2222":
                data = scaled(data, case, 1.5)
            write(dated(data, f"2026-11-{i + 1:02d}T03:00:00+00:00", f"{i:08x}".ljust(40, "0")),
                  tmp_path / f"{box}_{i}.json")
    found = [t for t in trends(load([tmp_path])) if t.case == case]
    assert sorted(t.device for t in found) == ["NVIDIA H100 80GB HBM3 [GPU-1111]", "NVIDIA H100 80GB HBM3 [GPU-2222]"]
    stepped = [t for t in found if t.steps]
    assert [t.device for t in stepped] == ["NVIDIA H100 80GB HBM3 [GPU-2222]"]
    assert stepped[0].steps[0].at == 6 and "(torch 2.5.1 -> 2.6.0)" in stepped[0].describe_steps()


def test_cases_whose_ids_differ_only_in_separators_get_their_own_plot_files():
    assert file_stem("cpu", "matmul/a/b") != file_stem("cpu", "matmul/a:b")
    assert len(file_stem("d" * 300, "c" * 300)) < 255


@pytest.mark.parametrize("median", [0, -1e-3])
def test_one_run_with_a_median_that_cannot_be_a_time_does_not_hide_the_step(history_dir, median, capsys):
    directory, case = history_dir
    path = directory / f"run_{RUNS - 2:02d}.json"
    data = read(path)
    next(e for e in data["benchmarks"] if e["extra_info"]["case"] == case)["stats"]["median"] = median
    write(data, path)
    stepped = [t for t in trends(load([directory])) if t.steps]
    assert [t.case for t in stepped] == [case] and len(stepped[0].runs) == RUNS - 1
    assert f"warning: {path}: case {case!r}" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "five"])
def test_a_min_effect_that_is_no_percentage_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["history", str(RUN_A), "--min-effect", value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err and f"--min-effect: {value!r} is not a" in err


def test_two_runs_name_no_step_and_say_why(capsys):
    """Two real runs a minute apart differ by more than 5 % in many cases: that is one comparison, not 13 steps."""
    assert main(["history", str(RUN_A), str(RUN_B)]) == 0
    out = capsys.readouterr().out
    assert "0 with a step" in out
    assert (f"a step needs {judge.SETTLED} runs before it and {judge.PERSIST} after, and the longest history here "
            "has 2 runs") in out


def quiet_history(folder, factors: dict[int, float], runs: int = 60, seed: int = 0) -> str:
    """`runs` nightly runs of one real case with 1 % run-to-run noise (seeded), scaled by factors[i] on run i."""
    data = read(RUN_A)
    case = converged_case(data)
    data["benchmarks"] = [e for e in data["benchmarks"] if e["extra_info"]["case"] == case]
    data["not_measured"] = []
    rng = np.random.default_rng(seed)
    for i in range(runs):
        run = scaled(data, case, float(np.exp(rng.normal(0, 0.01))) * factors.get(i, 1.0))
        write(dated(run, f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T03:00:00+00:00", f"{i:040x}"), folder / f"{i}.json")
    return case


def test_a_one_night_spike_in_60_quiet_runs_is_no_step(tmp_path):
    quiet_history(tmp_path, {30: 1.2})
    (trend,) = trends(load([tmp_path]))
    assert trend.steps == []


def test_a_change_is_a_step_once_it_has_lasted_min_runs(tmp_path):
    """The same change seen on its second night is not yet a step; on its third it is, named at its first run."""
    for nights in (judge.PERSIST - 1, judge.PERSIST):
        folder = tmp_path / str(nights)
        folder.mkdir()
        quiet_history(folder, {i: 1.2 for i in range(60 - nights, 60)})
        (trend,) = trends(load([folder]))
        assert [s.at for s in trend.steps] == ([] if nights < judge.PERSIST else [60 - nights]), nights
