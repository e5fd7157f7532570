"""Every registered plotter draws only its own suite: results of other suites give no plot and no error; another
project's results get the plain time charts (reports/plots/group_times.py) and nothing else."""

from pathlib import Path

import pytest

from reports.format.load import load
from reports.plots import registry

DATA = Path(__file__).parent / "data"


# The plotters that draw a matmul run (the matmul picture, and the roofline of its FLOP and byte models).
MATMUL_PLOTTERS = {"reports.plots.matmul", "reports.plots.roofline"}
OTHER_PROJECTS = "reports.plots.group_times"  # a chart per group of cases without extra_info.suite


@pytest.mark.parametrize("plotter", registry.PLOTTERS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("results", ["run_cpu_quick.json", "pb3_other_project.json", "pb5_other_project.json"])
def test_plotter_skips_results_without_its_suite(plotter, results, tmp_path):
    frame = load([DATA / results])
    drawn = plotter.plots(frame, tmp_path)
    if results == "run_cpu_quick.json" and plotter.__name__ in MATMUL_PLOTTERS:
        assert len(drawn) == 1  # one device
    elif results != "run_cpu_quick.json" and plotter.__name__ == OTHER_PROJECTS:
        assert len(drawn) == 1  # one group on one device
    else:
        assert drawn == []


def test_plot_command_writes_the_batch_plot_from_a_real_run(tmp_path):
    written = registry.write_all(load([DATA / "batch_size_cpu_quick.json"]), tmp_path)
    assert written and all(p.suffix == ".png" and p.stat().st_size > 1000 for p in written)
