"""reports.hardware, reports.levers and reports.html on real runs of two CPU configurations.

The two systems are the same CPU run with 2 threads and with OMP_NUM_THREADS=1: both real, their machine_info
untouched; the device label carries the thread count torch recorded. No GPU run exists here, so the GPU naming
and %-of-peak paths are tested on machine_info dicts and on a copy marked as a fixture, never as a measurement.
"""

from __future__ import annotations

import base64
import re

import pandas as pd
import pytest

from reports import levers
from reports.__main__ import main
from reports.format.errors import InputError
from reports.format.load import device_name, load
from reports.plots import registry
from reports.sections import systems
from tests.resultfiles import DATA, RUN_A, read, write

# tests/conftest.py: what the reports say and draw, never a pixel nor where an artist lies
pytestmark = pytest.mark.usefixtures("small_pictures", "no_layout")

RUN_1THREAD = DATA / "run_cpu_quick_1thread.json"
PNG = b"\x89PNG\r\n\x1a\n"


def test_side_by_side_has_every_common_case_on_both_systems():
    rows, baseline = systems.side_by_side(load([RUN_A, RUN_1THREAD]))
    assert baseline == load([RUN_A])["device"].iloc[0]  # the first file's system by default
    assert rows["system"].nunique() == 2
    both = rows.groupby("case")["system"].nunique()
    assert (both == 2).sum() >= 10
    base = rows[rows["system"] == baseline]
    assert (base["speedup"] == 1.0).all()
    other = rows[rows["system"] != baseline].set_index("case")
    base = base.set_index("case")
    common = other.index.intersection(base.index)
    assert (other.loc[common, "speedup"] == base.loc[common, "median_s"] / other.loc[common, "median_s"]).all()
    assert rows["tflops"].notna().all()


def test_baseline_by_substring_and_unknown_baseline():
    frame = load([RUN_A, RUN_1THREAD])
    _, baseline = systems.side_by_side(frame, "1 thread")
    assert baseline.endswith("(1 thread)")
    with pytest.raises(InputError, match="--baseline 'H100'"):
        systems.side_by_side(frame, "H100")


def test_one_device_on_two_machines_gets_the_machine_in_its_label(tmp_path):
    copy = read(RUN_A)
    copy["machine_info"]["node"] = "fixture-copy-on-another-node"  # a labelling test, not a measurement
    frame = load([RUN_A, write(copy, tmp_path / "copy.json")])
    labels = set(systems.systems(frame))
    assert len(labels) == 2 and all(" @ " in label for label in labels)


def test_gpu_device_name_comes_from_machine_info_gpu():
    assert device_name({"gpu": {"name": "NVIDIA H200"}, "cpu_info": {"model": "x", "torch_threads": 8}}) == \
        "NVIDIA H200"
    assert device_name({"cpu": {"brand": "Old CPU"}}) == "Old CPU"  # pytest-benchmark 3.x
    assert device_name({"node": "box"}) == "box"


def test_hardware_command_tables_and_bar_plots(tmp_path, capsys):
    assert main(["hardware", str(RUN_A), str(RUN_1THREAD), "-o", str(tmp_path), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "## matmul" in out and "| system" in out and "speedup" in out
    png = tmp_path / "hardware_matmul.png"
    assert png.read_bytes()[:8] == PNG


def test_levers_measured_from_the_matmul_run_and_not_measured_otherwise():
    frame = load([RUN_A])
    found = {(e.lever, e.comparison): e for e in levers.effects(frame)}
    bf16 = next(e for (lever, comp), e in found.items() if lever == "dtype speed-up" and "-> bfloat16" in comp
                and comp.startswith("matmul"))
    pairs = levers.pairs(frame, levers.Spec("x", "matmul", "dtype", "float32", "bfloat16"))
    trusted = pairs[pairs["doubt"] == ""]  # both cases converged (this loaded CPU left most quick cases short)
    assert len(pairs) >= 5 and bf16.pairs == len(trusted) >= 1
    assert bf16.doubt == f"{len(pairs) - len(trusted)} doubtful pair(s) left out"
    expected = (trusted["baseline"] / trusted["variant"]).prod() ** (1 / len(trusted))
    assert bf16.ratio == pytest.approx(expected) and bf16.ci_low < bf16.ratio < bf16.ci_high
    align = next(e for (lever, comp), e in found.items() if lever == "alignment penalty" and "64 -> odd" in comp
                 and comp.startswith("matmul"))
    assert align.pairs + int(align.doubt.split()[0] if align.doubt else 0) == 3  # the square cubes, per dtype
    table = levers.table(frame)
    for lever in ("flash vs naive attention", "channels-last", "torch.compile", "activation checkpointing",
                  "bytes/param"):
        assert table.loc[table["lever"] == lever, "effect on this machine"].tolist() == ["not measured"]


def test_a_lever_from_noise_is_marked_uncertain_with_why_and_shown_pale():
    """The real quick conv run on this loaded CPU: every channels-last pair has a case that did not converge
    (ranges of 0.006x to 309x), so the figure is marked, not stated."""
    frame = load([DATA / "run_cpu_quick_achievable.json"])
    (effect,) = [e for e in levers.effects(frame) if e.lever == "channels-last" and e.pairs]
    assert effect.uncertain and effect.doubt == "every pair has a case not converged"
    assert effect.figure.startswith("uncertain: ") and effect.high / effect.low > 1000
    from reports.html import levers_section
    section = levers_section(frame)
    row = next(r for r in section.split("<tr") if "channels-last" in r)
    assert row.startswith(" class=uncertain>") and "every pair has a case not converged" in row


def test_lever_intervals_come_from_the_cases_rounds_and_widen_with_their_noise():
    """Two matmul cases measured in 3 rounds each: the interval of their speed-up is their round spread's."""
    base = {"group": "matmul", "status": "ok", "layer": "square", "shape": "256", "param_names": "dtype,layer,shape",
            "converged": True}
    quiet = pd.DataFrame([base | {"dtype": "float32", "median_s": 2.0, "round_medians_s": [2.0, 2.02, 1.98]},
                          base | {"dtype": "bfloat16", "median_s": 1.0, "round_medians_s": [1.0, 1.01, 0.99]}])
    noisy = quiet.copy()
    noisy.at[1, "round_medians_s"] = [1.0, 3.0, 0.4]
    spec = levers.Spec("x", "matmul", "dtype", "float32", "bfloat16")
    calm, loud = levers.effect(quiet, spec), levers.effect(noisy, spec)
    assert calm.ratio == pytest.approx(2.0) and calm.verdict == "faster" and not calm.uncertain
    assert calm.ci_high / calm.ci_low < 1.1
    assert loud.ci_high / loud.ci_low > levers.WIDE_FACTOR and loud.uncertain


def test_html_page_is_self_contained_escaped_and_complete_and_a_failing_plotter_costs_it_only_its_own_plots(
        tmp_path, monkeypatch, capsys):
    class Broken:
        __name__ = "reports.plot_broken"

        @staticmethod
        def plots(frame, outdir):
            raise KeyError("pass")

    monkeypatch.setattr(registry, "PLOTTERS", [*registry.PLOTTERS, Broken()])
    hostile = read(RUN_A)
    hostile["benchmarks"][0]["params"]["layer"] = "<script>alert(1)</script>"
    hostile["benchmarks"][0]["extra_info"]["case"] = "matmul/<b>bold</b>&co"
    path = write(hostile, tmp_path / "hostile.json")
    out = tmp_path / "report"
    assert main(["html", str(path), str(RUN_1THREAD), "-o", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>bold</b>" not in page
    for heading in ("Runs", "Levers", "Devices side by side", "Results", "Plots"):
        assert f"<h2>{heading}" in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert images and all(base64.b64decode(data)[:8] == PNG for data in images)
    assert "src=\"plots/" not in page and "not measured" in page
    assert "<b>Plot failed</b>: reports.plot_broken: KeyError: &#x27;pass&#x27;" in page
    assert "hardware_matmul.png" in page  # the rest of the report stands
    assert "reports.plot_broken" in capsys.readouterr().err



def test_systems_without_common_cases_get_tables_but_no_bars(tmp_path, capsys):
    """Two other projects' files (pytest-benchmark 3.x and 4.x): nothing in common, so nothing to set against."""
    files = [str(DATA / "pb3_other_project.json"), str(DATA / "pb4_other_project.json")]
    assert main(["hardware", *files, "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "test_tokenize" in out  # no params: identified by its name
    assert "nearest " in out and "bilinear " in out  # params: identified by them
    assert list(tmp_path.glob("*.png")) == []
    rows, _ = systems.side_by_side(load(files))
    assert systems.shared(rows).empty


def test_train_step_levers_pair_cases_that_name_different_experiments():
    """train_step names each case's experiment in a `lever` param; pairs must ignore it, and resolve off/on.

    The rows are written out here: no train_step run was in the fixtures when this was written (docs/reports.md
    has the effects measured from a real quick CPU run of bench/test_train_step.py)."""
    base = {"group": "train_step", "status": "ok", "model": "tiny", "precision": "amp_bf16", "dtype": "bfloat16",
            "compile": "off", "checkpoint": "off", "param_names": "model,lever,precision,dtype,compile,checkpoint"}
    rows = pd.DataFrame([
        base | {"lever": "baseline", "median_s": 1.0, "peak_mem_bytes": 100.0},
        base | {"lever": "precision", "compile": "on", "median_s": 0.5, "peak_mem_bytes": 90.0},
        base | {"lever": "checkpoint", "checkpoint": "block", "median_s": 1.25, "peak_mem_bytes": 40.0},
        base | {"lever": "precision", "precision": "fp32", "dtype": "float32", "median_s": 3.0,
                "peak_mem_bytes": 150.0},
        # a CNN case with a param the GPT cases lack (NaN in their rows): it must not drop them from pairing
        base | {"lever": "baseline", "model": "cnn", "memory_format": "contiguous", "median_s": 2.0,
                "param_names": base["param_names"] + ",memory_format"},
    ])
    found = {(e.lever, e.comparison.split(", ")[-1]): e for e in levers.effects(rows)}
    assert found["torch.compile", "speed-up (baseline time / time)"].ratio == pytest.approx(2.0)
    assert found["activation checkpointing", "peak memory ratio (variant / baseline)"].ratio == pytest.approx(0.4)
    assert found["activation checkpointing", "speed-up (baseline time / time)"].ratio == pytest.approx(0.8)
    bf16 = next(e for e in levers.effects(rows) if e.comparison.startswith("train_step: precision fp32 -> amp_bf16"))
    assert bf16.ratio == pytest.approx(3.0) and bf16.pairs == 1


def test_largest_batch_searches_are_never_paired():
    """Each max_batch case is timed at its own largest batch: checkpoint off vs block is not like for like."""
    rows = load([DATA / "batch_size_cpu_quick.json"])
    assert set(rows["lever"]) >= {"batch", "max_batch"}
    checkpoint = [e for e in levers.effects(rows) if e.lever == "activation checkpointing"]
    assert checkpoint and all(e.pairs == 0 for e in checkpoint)
    with_search_only = rows[rows["lever"] == "max_batch"]
    assert all(levers.pairs(with_search_only, spec).empty for spec in levers.SPECS)


@pytest.mark.parametrize("command", ["html", "history", "hardware"])
def test_output_directory_that_cannot_be_made_is_one_line_exit_2(command, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main([command, str(RUN_A), "-o", str(blocker / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot create output directory" in err


def test_two_boxes_of_one_name_are_two_systems_and_torch_can_be_a_column(tmp_path, capsys):
    """Copies of a real run that differ only in identity (a labelling test, not a measurement)."""
    other = read(RUN_A)
    other["machine_info"]["identity"] = {"machine": "box-2", "torch": "2.14.1+cpu"}
    frame = load([RUN_A, write(other, tmp_path / "other.json")])
    labels = set(systems.systems(frame))
    assert len(labels) == 2 and any(label.endswith("[box-2]") for label in labels)
    assert main(["hardware", str(RUN_A), str(tmp_path / "other.json"), "--torch"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "2.14.1+cpu" in out and "2.13.0+cpu" in out
    assert main(["table", str(tmp_path / "other.json"), "--torch"]) == 0
    assert "2.14.1+cpu" in capsys.readouterr().out


def test_html_of_results_with_nothing_timed_still_writes_the_page(tmp_path, capsys):
    data = read(RUN_A)
    for entry in data["benchmarks"]:
        entry["extra_info"].update(status="unsupported", reason="needs a GPU")
        entry.pop("stats")
        data["not_measured"].append(entry)
    data["benchmarks"] = []
    assert main(["html", str(write(data, tmp_path / "run.json")), "-o", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    assert "Not measured" in page and "needs a GPU" in page


def test_several_runs_of_one_device_are_shown_as_runs_never_pooled(tmp_path, capsys):
    """A `.benchmarks`-like folder of the two real runs of one device: levers, tables and plots per run."""
    storage = tmp_path / "storage"
    write(read(RUN_A), storage / "0001_a.json")
    write(read(DATA / "run_cpu_quick_b.json"), storage / "0002_b.json")
    assert main(["html", str(storage), "-o", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<h3>AMD EPYC (2 threads), run 0001_a.json</h3>" in page
    assert "<h3>AMD EPYC (2 threads), run 0002_b.json</h3>" in page
    assert "<h3>Run 0001_a</h3>" in page and "<h3>Run 0002_b</h3>" in page
    assert "<th>run</th>" in page
    folders = sorted(p.parent.name for p in (tmp_path / "out" / "plots").rglob("matmul-*.png"))
    assert folders == ["0001_a", "0002_b"]  # `plot`'s folders: the page draws them as it does (registry.write_all)


def test_an_incomplete_run_says_so_on_the_page_in_its_plots_and_beside_the_hardware_table(tmp_path, capsys):
    data = read(RUN_A)
    del data["benchmarks"][10:]
    data.update(incomplete=True, incomplete_reason="stopped by SIGTERM; 10 of 21 selected cases finished")
    cut = write(data, tmp_path / "cut.json")
    assert main(["html", str(cut), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<p class='warning'><b>INCOMPLETE run cut.json: stopped by SIGTERM" in page
    assert "<td>no: stopped by SIGTERM; 10 of 21 selected cases finished</td>" in page
    from reports.plots import matmul
    from reports.plots.style import title
    assert "INCOMPLETE run: stopped by SIGTERM" in title("matmul", matmul.measured(load([cut])))
    assert main(["hardware", str(cut), str(RUN_1THREAD)]) == 0
    assert capsys.readouterr().out.startswith("INCOMPLETE run cut.json: stopped by SIGTERM")


BUSY_OPS = DATA / "busy" / "ops_cpu_quick_contended.json"  # matmul and conv quick beside two `yes` processes


def test_a_run_taken_on_a_busy_host_makes_the_hardware_plots_and_its_levers_say_why(tmp_path, capsys):
    """The real busy run: every pair of every lever has a case contended and unconverged (doubts of two words
    and several reasons per case once crashed the page), and the levers say so instead. (Its page is made, and
    read, in tests/test_busy_reports.py, with every busy run's.)"""
    assert main(["hardware", str(BUSY_OPS), str(RUN_A), "-o", str(tmp_path / "hw")]) == 0
    capsys.readouterr()
    measured = [e for e in levers.effects(load([BUSY_OPS])) if e.pairs]
    assert measured and all(e.uncertain for e in measured)
    assert {e.doubt for e in measured} == {"every pair has a case contended or not converged"}


def test_the_hardware_plots_of_every_real_run_in_the_repository(tmp_path, capsys):
    """Every real run of tests/data at once (CPU runs of one and two threads, torchrun ranks, rounds, busy hosts,
    other projects' files): a system whose levers no other system measured once crashed the lever picture, in
    `hardware -o` and in the page's hardware section alike."""
    assert main(["hardware", str(DATA), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert (tmp_path / "hardware-levers.png").read_bytes().startswith(PNG)


def test_a_system_without_a_lever_another_system_measured_does_not_stop_the_page(tmp_path, capsys):
    """Two systems share the matmul levers; a third (two ranks: collectives and train_step only) shares none. Its
    empty row of bars once raised IndexError in the levers picture, and the page was not written."""
    runs = [RUN_A, RUN_1THREAD, DATA / "dist_cpu_quick.json"]
    assert main(["html", *map(str, runs), "-o", str(tmp_path)]) == 0
    assert "hardware-levers" in (tmp_path / "index.html").read_text()
