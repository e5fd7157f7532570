"""Other projects' pytest-benchmark files in every report (users compare their runs with other projects' public
results): the page says what their times are, shows no levers they cannot have, `hardware` orders their sizes as
numbers, names come without pytest-benchmark's `UNSERIALIZABLE[...]` wrapper, and `plot` draws them.

Real files: tests/data/pb3-5_other_project.json (pytest-benchmark 3.2 to 5.1), and /work/shared/series'
converted nightly runs of pytorch/tensordict on an A10G (read where the machine has them)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from pytest_benchmark.utils import safe_dumps

from reports import html
from reports.format.load import load
from tests.resultfiles import DATA, RUN_A
from tests.runs import run_reports_in_process

PB3, PB4 = DATA / "pb3_other_project.json", DATA / "pb4_other_project.json"
TENSORDICT = Path("/work/shared/series/tensordict_a10g/0011_d652d02e.json")  # converted: no options.timer
CUDA_EVENT = DATA / "busy_gate" / "nice0_base.DERIVED_cuda_event.json"  # a real CPU run relabelled cuda_event
needs_tensordict = pytest.mark.skipif(not TENSORDICT.exists(), reason="the shared tensordict series is not here")


def intro(page: str) -> str:
    """The line under the page's title."""
    return re.search(r"<h1>.*?</h1><p class='muted'>(.*?)</p>", page).group(1)


@pytest.mark.parametrize(("path", "said"), [
    (RUN_A, "Times are medians of wall-clock time per call (time.perf_counter; of a training step, the step&#x27;s)."),
    (CUDA_EVENT, "Times are medians of device time per call (CUDA events)."),
    (PB3, "Times are medians of wall-clock time per call by pytest-benchmark&#x27;s perf_counter timer."),
    pytest.param(TENSORDICT, "Times are medians of wall-clock time per call by pytest-benchmark&#x27;s timer "
                 "(time.perf_counter unless its project chose another).", marks=needs_tensordict),
], ids=["this suite's wall timer", "cuda_event", "perf_counter named", "no timer named"])
def test_the_page_says_what_the_times_are(path, said, tmp_path):
    """It said "medians of device time per call" of any input, perf_counter results of other projects too."""
    frame = load([path], samples=False)
    assert html.times_html(frame) == said.replace("&#x27;", "'")
    if path in (PB3, TENSORDICT):  # small pages: the whole page, plots and all
        assert intro(html.page(frame, tmp_path)).endswith(said)


def test_mixed_inputs_say_each_groups_timer():
    frame = load([CUDA_EVENT, PB4], samples=False)
    assert html.times_html(frame).startswith("Times are medians per call, taken by different timers")
    results = html.results_section(frame)
    for group, said in (("resize", "wall-clock time per call by pytest-benchmark&#x27;s perf_counter timer"),
                        ("matmul", "device time per call (CUDA events)")):
        heading = results.index(f"<h3>{group} on ")
        assert results.index(f"Times are medians of {said}.", heading) < results.index("<table>", heading)


def test_no_levers_for_a_project_that_has_none():
    """21 "not measured" levers per machine for files of another project said nothing true."""
    section = html.levers_section(load([PB3, PB4], samples=False))
    assert "not measured" not in section and "<table>" not in section
    assert section.endswith("<p class='muted'>The files hold no case of a suite whose cases pair into levers "
                            "(matmul, conv, train_step, attention): no lever to show.</p>")
    mixed = html.levers_section(load([RUN_A, PB4], samples=False))
    assert mixed.count("<table>") == 1 and "This run holds no case of a suite" in mixed  # the Ryzen's run


def sized(size: int, node: str) -> dict:
    """pb4's bilinear resize case at another size, in a run of machine `node`."""
    data = json.loads(PB4.read_text())
    template = next(e for e in data["benchmarks"] if e["params"]["mode"] == "bilinear")
    entry = copy.deepcopy(template)
    entry["params"]["size"] = size
    entry["name"] = f"test_resize[bilinear-{size}]"
    entry["fullname"] = f"tests/test_resize.py::{entry['name']}"
    entry["param"] = f"bilinear-{size}"
    data["benchmarks"] = [entry]
    data["machine_info"]["node"] = node
    data["machine_info"]["cpu"]["brand_raw"] = f"CPU of {node}"
    return data


def test_hardware_orders_sizes_as_numbers(tmp_path):
    """Input size 500 came between 4500 and 5000: the rows were sorted as text."""
    files = []
    for node in ("box-a", "box-b"):
        runs = [sized(size, node) for size in (5000, 500, 4500)]
        merged = {**runs[0], "benchmarks": [e for run in runs for e in run["benchmarks"]]}
        files.append(tmp_path / f"{node}.json")
        files[-1].write_text(json.dumps(merged))
    run = run_reports_in_process("hardware", *map(str, files), "--wide")
    assert run.returncode == 0, run.tail()
    sizes = [int(m) for m in re.findall(r"^bilinear\s+(\d+)\s+CPU of box", run.stdout, re.M)]
    assert sizes == [500, 500, 4500, 4500, 5000, 5000], run.stdout


def test_names_are_read_without_pytest_benchmarks_unserializable_wrapper(tmp_path):
    """pytest-benchmark writes what json cannot encode as `UNSERIALIZABLE[<repr>]` (a GPU name an older
    nvidia-ml-py gave as bytes): the loader takes the wrapper off a string or bytes literal, and only there."""
    data = json.loads(PB4.read_text())
    machine = json.loads(safe_dumps({"gpu": {"name": b"Tesla V100-SXM2-32GB"}, "node": b"dgx-7"}))
    assert machine == {"gpu": {"name": "UNSERIALIZABLE[b'Tesla V100-SXM2-32GB']"}, "node": "UNSERIALIZABLE[b'dgx-7']"}
    data["machine_info"].update(machine)
    data["benchmarks"][0]["params"]["mode"] = json.loads(safe_dumps(b"bilinear"))
    data["benchmarks"][1]["params"]["mode"] = "UNSERIALIZABLE[torch.float32]"  # no literal: kept as written
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps(data))
    frame = load([path], samples=False)
    assert set(frame["device"]) == {"Tesla V100-SXM2-32GB"} and set(frame["machine"]) == {"dgx-7"}
    assert list(frame["mode"]) == ["bilinear", "UNSERIALIZABLE[torch.float32]"]


@pytest.mark.parametrize("path", [PB3, PB4, pytest.param(TENSORDICT, marks=needs_tensordict)], ids=lambda p: p.name)
def test_plot_draws_another_projects_times(path, tmp_path):
    """`plot` drew nothing for them (`no plots: the results hold no suite with a plot`)."""
    run = run_reports_in_process("plot", str(path), "-o", str(tmp_path))
    assert run.returncode == 0, run.tail()
    written = [Path(line) for line in run.stdout.splitlines() if line.endswith(".png")]
    groups = load([path], samples=False)["group"].fillna("(no group)").nunique()
    assert len(written) == groups and all(p.name.startswith("times-") for p in written)
    assert all(p.read_bytes().startswith(b"\x89PNG") and p.stat().st_size > 10_000 for p in written)
