"""The results file of a real run: durable per case, checked before the first case, marked when cut short."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from suites.harness.journal import unused
from suites.harness.results import REGRESSED
from suites.harness.targets import write_atomically
from tests.resultfiles import RUN_A
from tests.runs import (
    ROOT,
    bench_args,
    run_command,
    run_guest,
    run_guest_in_process,
    run_pytest_in_process,
    run_reports_in_process,
    start_pytest,
)


def _quick(*args: str) -> list[str]:
    """A quick benchmark run of the matmul suite on this CPU, without the achievable peaks: what these runs check is
    their results, not a search's (tests/test_achievable.py), which a machine without a cached one would run first."""
    return bench_args("bench/test_matmul.py", "--bench-profile", "quick", "--bench-achievable-peaks", "off", *args)


def _start_quick(*args: str, **kwargs) -> subprocess.Popen:
    """_quick's run in a fresh interpreter, to be signalled or killed, on one intra-op thread: its cases come at
    once beside other work on the host's cores (tests/single_thread.py), as the tests waiting for them want."""
    return start_pytest(*_quick(*args), env={"OMP_NUM_THREADS": "1"}, **kwargs)


def _journal_lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_run_killed_part_way_keeps_its_finished_cases_marked_incomplete(signum, tmp_path):
    """Kill a real quick run once two cases are journaled; the file holds them, says so, and fails the gate."""
    out = tmp_path / "cut.json"
    journal = tmp_path / "cut.json.journal"
    proc = _start_quick("--bench-dtypes", "float32,float16", f"--benchmark-json={out}")
    deadline = time.monotonic() + 300
    while _journal_lines(journal) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # header + two cases on disk
    assert proc.poll() is None, "the run ended before it could be cut short"
    proc.send_signal(signum)
    log = proc.communicate(timeout=120)[0]
    assert proc.returncode == 2, log[-3000:]  # pytest's "interrupted"
    data = json.loads(out.read_text())
    assert data["incomplete"] is True and signal.Signals(signum).name in data["incomplete_reason"], log[-2000:]
    assert len(data["benchmarks"]) >= 2
    assert all(len(b["stats"]["data"]) == b["stats"]["rounds"] > 0 for b in data["benchmarks"])
    assert not journal.exists()  # the final file holds everything the journal did

    gate = run_reports_in_process("compare", str(RUN_A), str(out), "--fail-on-regression", "--allow-different-devices")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "gate failed: the candidate run is incomplete" in gate.stdout
    assert "Not measured (run incomplete)" in gate.stdout and "Removed" not in gate.stdout


@pytest.mark.slow
def test_a_run_of_only_unsupported_cases_still_writes_its_file(tmp_path):
    out = tmp_path / "tf32.json"
    proc = run_pytest_in_process(*_quick("--bench-dtypes", "tf32", "-k", "square", f"--benchmark-json={out}"))
    assert proc.returncode == 0, proc.tail(2000)
    data = json.loads(out.read_text())
    assert data["benchmarks"] == [] and "incomplete" not in data
    assert {e["extra_info"]["status"] for e in data["not_measured"]} == {"unsupported"}
    table = run_reports_in_process("table", str(out))
    assert table.returncode == 0 and "unsupported (3 cases)" in table.stdout


@pytest.mark.parametrize("where", ["storage_is_a_file", "dot_benchmarks_is_a_file", "json_into_missing_folder",
                                   "json_onto_a_folder"])
def test_an_unusable_output_location_stops_the_run_before_the_first_case(where, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    args, cwd = {
        "storage_is_a_file": (["--benchmark-storage", str(blocker)], ROOT),
        "dot_benchmarks_is_a_file": ([f"--rootdir={ROOT}", str(ROOT / "bench" / "test_matmul.py")], tmp_path),
        "json_into_missing_folder": ([f"--benchmark-json={tmp_path / 'no' / 'run.json'}"], ROOT),
        "json_onto_a_folder": ([f"--benchmark-json={tmp_path}"], ROOT),
    }[where]
    if where == "dot_benchmarks_is_a_file":
        (tmp_path / ".benchmarks").write_text("not a folder")
    proc = run_pytest_in_process(*_quick("-k", "square and float32", *args), cwd=cwd)
    assert proc.returncode == 4, proc.tail(2000)
    assert "passed" not in proc.stdout and "Traceback" not in proc.stderr
    assert "error" in proc.stderr.lower()


def _chattr(flag: str, path: Path) -> bool:
    """`chattr FLAG PATH`; False where it cannot be set (not root, no such attribute on this filesystem)."""
    return run_command(["chattr", flag, str(path)]).returncode == 0 if shutil.which("chattr") else False


@pytest.mark.parametrize("where", ["immutable_file", "append_only_file", "immutable_folder", "read_only_file"])
def test_a_target_that_would_refuse_the_results_is_refused_before_the_first_case(where, tmp_path):
    """pytest-benchmark before 5.3 opened --benchmark-json while parsing it, so such a target failed at once; from
    5.3 nothing opens it until the end, and the writer's check of the folder's mode bits saw nothing wrong (root
    passes it everywhere): the run measured, then lost its results' file. Each is one line before any case."""
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "run.json"
    if where != "immutable_folder":
        target.write_text('{"earlier": "results"}')
    flag = {"immutable_file": ("+i", target), "append_only_file": ("+a", target),
            "immutable_folder": ("+i", folder)}.get(where)
    if flag is None:
        if os.geteuid() == 0:
            pytest.skip("root writes a read-only file, as the shell's > does: nothing to refuse")
        target.chmod(0o444)
    elif not _chattr(*flag):
        pytest.skip(f"chattr {flag[0]} needs root and a filesystem that keeps it")
    try:
        proc = run_pytest_in_process(*_quick("-k", "square and float32", f"--benchmark-json={target}"))
    finally:
        if flag is not None:
            _chattr(flag[0].replace("+", "-"), flag[1])
    assert proc.returncode == 4, proc.tail(2000)
    assert "passed" not in proc.stdout and "Traceback" not in proc.stderr
    expected = (f"{folder}: cannot write there" if where == "immutable_folder"
                else f"--benchmark-json {target}: the file there cannot be replaced (")
    assert len([line for line in proc.stderr.splitlines() if expected in line]) == 1, proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == ([] if where == "immutable_folder" else ["run.json"])
    if where != "immutable_folder":
        assert target.read_text() == '{"earlier": "results"}'


def test_an_atomic_write_leaves_the_old_file_or_the_new_one(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("old")
    write_atomically(target, "new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["run.json"]
    with pytest.raises(OSError):
        write_atomically(tmp_path / "missing" / "run.json", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


PAUSED_BENCH = '''
import time
from pathlib import Path


def test_pause(device_bench):
    pause = float((Path(__file__).parent / "pause_s").read_text())
    device_bench(lambda: time.sleep(pause))
'''


@pytest.mark.slow
def test_compare_fail_fails_every_run_after_a_regression_until_it_is_gone(tmp_path):
    """`--benchmark-only` autosaves a device_bench run on its own; a run whose --benchmark-compare-fail failed must
    not become the baseline of the next, which would then pass (exit 1, then 0). The first run is a nightly job's
    first: --benchmark-compare finds no saved run, and --benchmark-compare-fail ended the run in pytest-benchmark's
    traceback; it is one line, exit 4 as before, and the run is still saved (the baseline of the next)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_paused.py").write_text(PAUSED_BENCH)
    compare = ["--benchmark-only", "--benchmark-compare"]
    (repo / "pause_s").write_text("0.001")
    runs = [run_guest_in_process(repo, *compare, "--benchmark-compare-fail=median:10%")]
    assert [p.name.split("_")[0] for p in (repo / ".benchmarks").rglob("*.json")] == ["0001"]
    for pause_s in ("0.005", "0.005", "0.001"):
        (repo / "pause_s").write_text(pause_s)
        runs.append(run_guest_in_process(repo, *compare, "--benchmark-compare-fail=median:100%"))  # exit 1 if slower
    assert [run.returncode for run in runs] == [4, 1, 1, 0], [run.tail(1500) for run in runs]
    assert "Traceback" not in runs[0].output, runs[0].tail()
    assert "--benchmark-compare-fail median:10%: nothing was compared (--benchmark-compare found no saved run in " \
           in runs[0].output, runs[0].tail()
    saved = sorted(p.name.split("_")[0] for p in (repo / ".benchmarks").rglob("*.json"))
    assert saved == ["0001", "0002", f"{REGRESSED}0002", f"{REGRESSED}0002"]
    baseline = next((repo / ".benchmarks").rglob("0001_*.json"))
    for run in runs[1:3]:  # each regression in one line, against the same saved run; no traceback
        said = [line for line in run.output.splitlines() if line.startswith("regression: ")]
        assert "Traceback" not in run.output and "PerformanceRegression" not in run.output, run.tail()
        assert len(said) == 1 and said[0].startswith("regression: test_paused.py::test_pause median "), said
        assert f" in {baseline}: +" in said[0], said
        assert said[0].endswith(" % (--benchmark-compare-fail median:100% allows +100 %)"), said
    assert not any(line.startswith("regression: ") for line in runs[3].output.splitlines())


def test_a_regressed_run_is_kept_beside_one_of_the_same_name_and_never_over_it(tmp_path):
    """The runs after a regression take its number again, and pytest-benchmark's name is the same within a second:
    quick runs (the test above) set a second regression aside under the first one's name. It goes beside it."""
    first = tmp_path / f"{REGRESSED}0002_unversioned_20261205_063012.json"
    assert unused(first) == first
    first.write_text("{}")
    second = unused(first)
    assert second.name == f"{REGRESSED}0002_unversioned_20261205_063012-2.json"
    second.symlink_to(tmp_path / "nowhere")  # a dangling link is a name taken too: writing there would follow it
    assert unused(first).name == f"{REGRESSED}0002_unversioned_20261205_063012-3.json"


def test_compare_fail_without_compare_is_a_usage_error_before_the_first_case():
    refused = run_pytest_in_process(*_quick("-k", "square and float32", "--benchmark-compare-fail=median:10%"))
    assert refused.returncode == 4 and "passed" not in refused.stdout and "Traceback" not in refused.stderr
    assert "--benchmark-compare-fail: compares against the run --benchmark-compare loads; without " \
           "--benchmark-compare it can compare nothing" in refused.stderr


MIXED_BENCH = '''
import pytest


@pytest.mark.benchmark(max_time=0.05)  # pytest-benchmark's own: 0.05 s, not its 1 s
def test_plain_sum(benchmark):
    benchmark(sum, range(1000))


def test_device_sum(device_bench):
    device_bench(lambda: sum(range(1000)))
'''


def _samples_kept(path: Path) -> dict[str, bool]:
    return {e["name"]: "data" in e["stats"] for e in json.loads(path.read_text())["benchmarks"]}


@pytest.mark.slow
def test_a_plain_benchmark_keeps_its_raw_samples_where_pytest_benchmark_keeps_them(tmp_path):
    """In a mixed run the device_bench case keeps its samples everywhere (compare decides from them); the plain
    `benchmark` case keeps them in --benchmark-json, and in the storage only with --benchmark-save-data."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_mixed.py").write_text(MIXED_BENCH)
    out = tmp_path / "run.json"
    first = run_guest_in_process(repo, "--benchmark-only", "--benchmark-autosave", f"--benchmark-json={out}")
    second = run_guest_in_process(repo, "--benchmark-only", "--benchmark-autosave", "--benchmark-save-data")
    assert first.returncode == second.returncode == 0, first.tail() + second.tail()
    stored = sorted((repo / ".benchmarks").rglob("*.json"))
    assert [_samples_kept(p) for p in stored] == [{"test_plain_sum": False, "test_device_sum": True},
                                                  {"test_plain_sum": True, "test_device_sum": True}]
    assert _samples_kept(out) == {"test_plain_sum": True, "test_device_sum": True}


THREADS_BENCH = '''
from pathlib import Path

import pytest
import torch


def _work():
    return sum(range(1000))


def test_a_before(device_bench):
    (Path(__file__).parent / "started_with").write_text(str(torch.get_num_threads()))
    device_bench(_work)


def test_b_changes_threads(device_bench):
    torch.set_num_threads(1 if torch.get_num_threads() != 1 else 2)
    device_bench(_work)


def test_c_after(device_bench):
    device_bench(_work)


@pytest.mark.benchmark(max_time=0.05)  # pytest-benchmark's own: 0.05 s, not its 1 s
def test_d_plain(benchmark):
    benchmark(_work)
'''


@pytest.mark.slow
def test_a_test_that_changes_torchs_threads_relabels_only_the_cases_it_measured(tmp_path):
    """`torch.set_num_threads(1)` in one test relabelled the whole run "(1 thread)", the cases measured with 2
    threads included: the run keeps the count it started with, each case measured with another count says so."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_threads.py").write_text(THREADS_BENCH)
    out = tmp_path / "run.json"
    proc = run_guest(repo, "--benchmark-only", f"--benchmark-json={out}")
    assert proc.returncode == 0, proc.tail()
    started = int((repo / "started_with").read_text())
    changed = 1 if started != 1 else 2
    data = json.loads(out.read_text())
    assert data["machine_info"]["cpu_info"]["torch_threads"] == started
    assert data["machine_info"]["identity"]["machine"].endswith(f"({started} thread{'s' if started != 1 else ''})")
    marked = {e["name"]: e["extra_info"].get("torch_threads") for e in data["benchmarks"]}
    assert marked == {"test_a_before": None, "test_b_changes_threads": changed, "test_c_after": changed,
                      "test_d_plain": changed}
