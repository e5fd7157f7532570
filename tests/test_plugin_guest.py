"""The plugin as a guest in another repository: registered by the installed project's `pytest11` entry point, it
coexists with a conftest that defines `--device`, leaves runs that use none of its fixtures to pytest-benchmark
alone (no torch import, no autosave or save-data changes, no journal, no incomplete mark for skips, its
messages kept), handles `-p no:benchmark` and pytest-xdist, and its `device_bench` fixture times a user's
callable into pytest-benchmark's JSON.

Each test writes a small repository under tmp_path and runs pytest there, so this repository's conftest.py (with its
legacy option spellings) is not loaded: what runs is what a user of another repository gets. It runs in a fresh
interpreter where that is what the test checks (the entry point, no torch imported, the first import's warnings,
xdist's workers), in this one otherwise (tests/runs.py's run_guest_in_process).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from suites.core.stopping import rel_iqr
from tests.runs import ProcessRun, run_guest, run_guest_in_process, run_reports_in_process

pytestmark = pytest.mark.slow

HOST_CONFTEST = '''
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="the host repository's own option")
'''
PLAIN_BENCHMARKS = '''
import sys
import time

import pytest

pytestmark = pytest.mark.benchmark(max_time=0.05)  # pytest-benchmark's own: 0.05 s a benchmark, not its 1 s


def test_sleep(benchmark):
    benchmark(time.sleep, 0.0001)


def test_sum(benchmark):
    benchmark(sum, range(100))


@pytest.mark.skip(reason="not today")
def test_skipped(benchmark):
    benchmark(sum, range(10))


def test_plain(request):
    assert request.config.getoption("--device")  # the host's own option


def test_no_torch_was_imported():
    assert "torch" not in sys.modules, "the plugin imported torch in a run that does not use it"
'''
DEVICE_BENCH = '''
import pytest
import torch


def test_matmul(device_bench, request):
    a = torch.randn(128, 128, device=device_bench.device)
    device_bench(lambda: a @ a, flops=2 * 128**3, bytes=3 * 128 * 128 * 4, dtype=torch.float32)
    assert request.config.getoption("--device") == "host-value"  # the host's option, untouched


def test_cold_graph_on_cpu(device_bench):
    a = torch.randn(64, 64)
    device_bench(lambda: a + a, cold=True, graph=True, group="mine")


@pytest.mark.skip(reason="not today")
def test_skipped(device_bench):
    device_bench(lambda: None)


def test_used_twice(device_bench):
    device_bench(lambda: None)
    device_bench(lambda: None)


def test_a_bug_in_the_function(device_bench):
    def broken():
        raise KeyError("the user's own bug")
    device_bench(broken)


def test_out_of_memory(device_bench):
    def too_big():
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
    device_bench(too_big)
'''


def host(tmp_path: Path, **files: str) -> Path:
    repo = tmp_path / "host"
    repo.mkdir()
    (repo / "conftest.py").write_text(HOST_CONFTEST)
    for name, text in files.items():
        (repo / f"{name}.py").write_text(textwrap.dedent(text))
    return repo


def saved_runs(repo: Path) -> list[Path]:
    return sorted((repo / ".benchmarks").rglob("*.json"))


def test_the_plugin_is_registered_by_the_installed_entry_point(tmp_path):
    proc = run_guest(host(tmp_path, test_plain="def test_x():\n    pass\n"), "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--bench-device" in proc.stdout and "--bench-trace-dir" in proc.stdout
    assert "--trace-dir" not in proc.stdout.replace("--bench-trace-dir", "")  # the legacy spellings stay home


def test_a_run_without_the_suites_fixtures_is_pytest_benchmarks_own(tmp_path):
    """The same plain benchmarks with the plugin registered and blocked: the same files and messages."""
    repo = host(tmp_path, test_plain=PLAIN_BENCHMARKS)
    outcomes = {}
    for name, block in (("blocked", ["-p", "no:suites.harness.pytest_plugin"]), ("registered", [])):
        proc = run_guest(repo, *block, "--benchmark-autosave", f"--benchmark-json={tmp_path / name}.json")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "4 passed, 1 skipped" in proc.stdout
        assert "Saved benchmark data in:" in proc.stdout + proc.stderr
        assert "Wrote benchmark data in:" in proc.stdout + proc.stderr
        outcomes[name] = json.loads((tmp_path / f"{name}.json").read_text())
    saved = [json.loads(p.read_text()) for p in saved_runs(repo)]
    assert len(saved) == 2
    assert all("data" not in b["stats"] for run_ in saved for b in run_["benchmarks"])  # save-data stays off
    for data in [*outcomes.values(), *saved]:
        assert sorted(data) == ["benchmarks", "commit_info", "datetime", "machine_info", "version"]
        assert [b["name"] for b in data["benchmarks"]] == ["test_sleep", "test_sum"]  # no incomplete mark
        assert "bench_device" not in data["machine_info"]
    assert not list(repo.rglob("*.journal"))


@pytest.mark.parametrize("args", [["--benchmark-only"], ["--benchmark-disable", "--benchmark-autosave"]],
                         ids=["only", "disable-autosave"])
def test_plain_benchmarks_store_nothing_unasked(tmp_path, args):
    repo = host(tmp_path, test_plain=PLAIN_BENCHMARKS)
    proc = run_guest(repo, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert saved_runs(repo) == []


def test_a_suite_run_whose_cases_were_all_skipped_stores_no_run(tmp_path):
    repo = host(tmp_path, test_mine=DEVICE_BENCH.split("def test_used_twice")[0].replace("def test_matmul",
                                                                                        "def no_test_matmul"))
    proc = run_guest_in_process(repo, "--benchmark-autosave", "-k", "skipped")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 skipped" in proc.stdout and saved_runs(repo) == []


def test_minus_p_no_benchmark_skips_the_suites_tests_with_the_reason(tmp_path):
    repo = host(tmp_path, test_plain="def test_plain():\n    pass\n", test_mine=DEVICE_BENCH)
    proc = run_guest_in_process(repo, "-p", "no:benchmark", "--device", "host-value")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    assert "1 passed, 6 skipped" in proc.stdout
    assert "SKIPPED [5] test_mine.py: needs pytest-benchmark, which is turned off (-p no:benchmark)" in proc.stdout
    assert "SKIPPED [1] test_mine.py:17: not today" in proc.stdout  # a test's own skip keeps its reason


CODSPEEDS_FIXTURE = '''
import pytest
from pytest_benchmark.fixture import BenchmarkFixture


class ForeignBenchmark:
    """What pytest-codspeed 5 puts in place of pytest-benchmark's fixture under --codspeed (its `__class__`
    claims to be pytest-benchmark's fixture class, and it has none of that class's members)."""

    @property
    def __class__(self):
        return BenchmarkFixture

    def __call__(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)


@pytest.fixture
def benchmark():
    return ForeignBenchmark()
'''


def test_a_benchmark_fixture_replaced_by_another_plugin_skips_the_suites_tests_with_the_reason(tmp_path):
    """pytest-codspeed under --codspeed replaces `benchmark` at session start (verified with pytest-codspeed 5.0.4
    in a separate environment: the same skip); its replacement is imitated here as a host's conftest fixture."""
    repo = host(tmp_path, test_mine=WARNINGS_ARE_ERRORS)
    (repo / "conftest.py").write_text(HOST_CONFTEST + CODSPEEDS_FIXTURE)
    proc = run_guest(repo, "-W", "error")
    assert proc.returncode == 0, proc.tail()
    assert "1 passed, 1 skipped" in proc.stdout and "AttributeError" not in proc.stdout, proc.tail()
    assert ("SKIPPED [1] test_mine.py:6: needs pytest-benchmark's benchmark fixture, which conftest replaced "
            "(pytest-codspeed does under --codspeed)") in proc.stdout, proc.tail()


def test_under_xdist_the_cases_run_once_and_no_worker_writes_a_journal(tmp_path):
    """Under xdist, in a host whose pytest.ini turns warnings into errors (pytest-benchmark's own configuration):
    pytest-benchmark's "fixture was not used" of the run xdist disabled fails none of its tests."""
    pytest.importorskip("xdist")
    repo = host(tmp_path, test_plain=PLAIN_BENCHMARKS.replace("test_no_torch", "no_test"),
                test_mine=DEVICE_BENCH.split("@pytest.mark.skip")[0], test_warned=WARNINGS_ARE_ERRORS)
    (repo / "pytest.ini").write_text(ERRORS_INI)
    proc = run_guest(repo, "-n", "2", "--device", "host-value", f"--benchmark-json={tmp_path / 'x.json'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "7 passed, 1 skipped" in proc.stdout  # benchmarks disabled by pytest-benchmark: run once, no stats
    assert "warnings summary" not in proc.stdout, proc.tail()
    assert not list(tmp_path.rglob("*.journal")) and not (tmp_path / "x.json").exists()


WARNINGS_ARE_ERRORS = '''
import pytest
import torch


def test_add(device_bench):
    a = torch.randn(64, 64, device=device_bench.device)
    device_bench(lambda: a + a)


@pytest.mark.benchmark(max_time=0.05)  # pytest-benchmark's own: 0.05 s, not its 1 s
def test_plain(benchmark):
    benchmark(sum, range(10))
'''


ERRORS_INI = "[pytest]\nfilterwarnings =\n    error\n"


@pytest.mark.parametrize(("ini", "args"), [
    (True, ["--bench-device", "cpu"]), (True, []), (True, ["--benchmark-disable"]),
    (False, ["-W", "error", "--benchmark-disable"])], ids=["cpu", "auto", "disable", "W-error-disable"])
def test_a_host_that_turns_warnings_into_errors_runs_device_bench_on_a_machine_without_nvidia(tmp_path, ini, args):
    """pytest-benchmark's own configuration has `filterwarnings = error`: neither the telemetry's absence (no NVIDIA
    driver here) nor pytest-benchmark's "fixture was not used" of a disabled run (--benchmark-disable; xdist's:
    test_under_xdist_...) may fail such a host's device_bench test."""
    repo = host(tmp_path, test_mine=WARNINGS_ARE_ERRORS)
    if ini:
        (repo / "pytest.ini").write_text(ERRORS_INI)
    proc = run_guest(repo, *args)
    assert proc.returncode == 0, proc.tail()
    assert "2 passed" in proc.stdout and "warnings summary" not in proc.stdout, proc.tail()


@pytest.fixture(scope="module")
def device_bench_run(tmp_path_factory) -> dict:
    """One run of the host repository's device_bench tests, with its own --device, into a JSON file."""
    tmp_path = tmp_path_factory.mktemp("device_bench")
    repo = host(tmp_path, test_mine=DEVICE_BENCH)
    out = tmp_path / "out.json"
    proc = run_guest_in_process(repo, "--device", "host-value", "--bench-device", "cpu", f"--benchmark-json={out}")
    return {"proc": proc, "json": json.loads(out.read_text()) if out.exists() else None, "repo": repo}


DROP_IN = '''
import gc
import itertools
import time

import pytest
import torch


def test_arguments_and_result(device_bench):
    device_bench.extra_info["before"] = "set before the call"
    a = torch.randn(8, 8)
    out = device_bench(torch.add, a, a, alpha=2)
    assert torch.equal(out, torch.add(a, a, alpha=2))  # what one call returned, as benchmark(fn, ...) returns it
    device_bench.extra_info["after"] = "set after the call"


def work():
    return sum(range(100))


def test_profiled(device_bench):
    assert device_bench(work) == 4950


def test_gc_off_while_sampling(device_bench):
    seen = set()
    device_bench(lambda: seen.add(gc.isenabled()))
    assert False in seen


def test_steady(device_bench):
    device_bench(time.sleep, 0.01)


def test_growing(device_bench):
    calls = itertools.count(1)
    # never converges: 8 rounds of 10 ms more each outlast 0.3 s before two plateau windows (10 samples) fill
    device_bench(lambda: time.sleep(0.01 * next(calls)))


@pytest.mark.benchmark(min_rounds=6, max_time=0.05)
def test_marked(device_bench):
    device_bench(time.sleep, 0.03)


@pytest.mark.benchmark(max_time=float("nan"))
def test_max_time_nan(device_bench):
    device_bench(lambda: None)


def test_pedantic(device_bench):
    assert device_bench.pedantic(sum, args=([1, 2, 3],), rounds=7, warmup_rounds=4, iterations=3) == 6


def test_pedantic_setup(device_bench):
    device_bench.pedantic(sum, setup=lambda: (([1],), {}))


def test_pedantic_no_rounds(device_bench):
    device_bench.pedantic(sum, args=([1],), rounds=0)


def test_extra_info_clash(device_bench):
    device_bench(lambda: None)
    device_bench.extra_info["device"] = "mine"


def test_extra_info_posing(device_bench):
    device_bench.extra_info["mine"] = "a field of the test's own"
    device_bench(lambda: None)
    device_bench.extra_info["tflops"] = 999  # a no-op given no flops=: the suite measured no tflops
    device_bench.extra_info["pct_peak"] = 100.0


def test_generator(device_bench):
    def matmuls():
        yield torch.ones(512, 512) @ torch.ones(512, 512)
    device_bench(matmuls, flops=2 * 512**3)


def test_exits_at_once(device_bench):
    device_bench(lambda: exit(3))


def test_exits_later(device_bench):
    calls = itertools.count()

    def fn():
        if next(calls) == 5:
            raise SystemExit("exit in the fifth call")
    device_bench(fn)


def test_memory_error(device_bench):
    def fn():
        raise MemoryError()
    device_bench(fn)
'''


@pytest.fixture(scope="module")
def drop_in_run(tmp_path_factory) -> ProcessRun:
    """One run of device_bench used as pytest-benchmark's `benchmark` is, with pytest-benchmark's options."""
    tmp_path = tmp_path_factory.mktemp("drop_in")
    repo = host(tmp_path, test_mine=DROP_IN)
    out = tmp_path / "out.json"
    proc = run_guest_in_process(repo, "--bench-device", "cpu", f"--benchmark-json={out}", "--benchmark-min-rounds",
                                "8", "--benchmark-max-time", "0.3", "--benchmark-cprofile", "tottime")
    proc.json_path = out
    return proc


def entry(proc: ProcessRun, name: str) -> dict:
    (found,) = [b for b in proc.json["benchmarks"] + proc.json["not_measured"] if b["name"] == name]
    return found


def test_device_bench_is_called_as_benchmark_is(drop_in_run):
    out = drop_in_run.stdout
    assert "6 failed, 9 passed, 1 skipped, 2 errors in" in out and "warnings summary" not in out, drop_in_run.tail()
    for name in ("arguments_and_result", "profiled", "gc_off_while_sampling", "pedantic", "steady", "marked"):
        assert f"FAILED test_mine.py::test_{name}" not in out
    info = entry(drop_in_run, "test_arguments_and_result")["extra_info"]
    assert info["before"] == "set before the call" and info["after"] == "set after the call"


def test_min_rounds_and_max_time_hold(drop_in_run):
    """From the command line (8 rounds, 0.3 s) and from a marker (6, 0.05 s: it wins, as in pytest-benchmark)."""
    steady = entry(drop_in_run, "test_steady")
    assert steady["stats"]["rounds"] >= 8 and steady["options"]["min_rounds"] == 8  # the profile stopped at 5
    growing = entry(drop_in_run, "test_growing")
    assert growing["options"]["max_time"] == 0.3 and growing["extra_info"]["stop_reason"] == "timeout"
    assert sum(growing["stats"]["data"]) < 1.0  # the quick profile's 2 s timeout did not run
    marked = entry(drop_in_run, "test_marked")
    assert marked["stats"]["rounds"] >= 6 and marked["options"]["min_rounds"] == 6
    assert marked["options"]["max_time"] == 0.05
    assert "device_bench: max_time=nan: expected a finite number of seconds > 0" in drop_in_run.stdout


def test_pedantic_runs_exactly_what_it_asks_and_refuses_what_it_cannot(drop_in_run):
    pedantic = entry(drop_in_run, "test_pedantic")
    assert pedantic["stats"]["rounds"] == 7 and pedantic["extra_info"]["calls_per_sample"] == 3
    assert pedantic["extra_info"]["warmup_calls"] >= 12 and pedantic["extra_info"]["stop_reason"] == "count"
    out = drop_in_run.stdout
    assert "device_bench.pedantic: setup= is not supported: a sample's calls run back to back" in out
    assert "device_bench: rounds=0: expected an int >= 1" in out


def test_gc_and_cprofile_are_recorded_as_they_ran(drop_in_run):
    for bench in drop_in_run.json["benchmarks"]:
        assert bench["options"]["disable_gc"] is True  # the collector is off while sampling, flag or not
    profiled = entry(drop_in_run, "test_profiled")
    assert any("work" in row["function_name"] for row in profiled["cprofile"])
    assert "cProfile (time in s)" in drop_in_run.stdout


def test_extra_info_never_overwrites_the_suites_fields_silently(drop_in_run):
    assert entry(drop_in_run, "test_extra_info_clash")["extra_info"]["device"] == "cpu"
    assert ("device_bench.extra_info: 'device' the suite records itself (docs/results.md); the entry keeps the "
            "suite's value") in drop_in_run.stdout


def test_a_suite_field_the_suite_did_not_measure_is_never_the_tests_figure(drop_in_run):
    """`tflops = 999` on a no-op was written as a figure: the suite measured none (no flops=), so nothing checked
    the name. The entry holds no such field, its own fields stay, and the test fails naming them."""
    info = entry(drop_in_run, "test_extra_info_posing")["extra_info"]
    assert "tflops" not in info and "pct_peak" not in info and info["mine"] == "a field of the test's own"
    assert info["status"] == "ok" and "device_s" in info  # measured and kept
    assert ("device_bench.extra_info: 'pct_peak', 'tflops' the suite records itself (docs/results.md); the entry "
            "keeps the suite's value, or none where the suite measured none") in drop_in_run.stdout


@pytest.mark.parametrize(("name", "status", "reason"), [
    ("test_generator", "error", "device_bench: fn returned a generator, whose work runs only when it is consumed"),
    ("test_exits_at_once", "error", "SystemExit: 3"),
    ("test_exits_later", "error", "SystemExit: exit in the fifth call"),
    ("test_memory_error", "oom", "MemoryError")])
def test_odd_outcomes_are_recorded_with_their_reason(drop_in_run, name, status, reason):
    info = entry(drop_in_run, name)["extra_info"]
    assert info["status"] == status and info["reason"].startswith(reason), info
    assert "tflops" not in info


EXITS_ONE_DAY = '''
import os


def test_exits_one_day(device_bench):
    def fn():
        if os.environ.get("EXIT_NOW"):
            raise SystemExit(3)
    device_bench(fn)
'''


def test_a_case_that_exits_fails_the_comparison_instead_of_vanishing(tmp_path):
    """Unrecorded, a case that ended in SystemExit read as "removed" to `compare`, which passed."""
    repo = host(tmp_path, test_mine=EXITS_ONE_DAY)
    for name, env in (("before", {}), ("after", {"EXIT_NOW": "1"})):
        proc = run_guest_in_process(repo, "--bench-device", "cpu", f"--benchmark-json={tmp_path / name}.json", env=env)
        assert proc.returncode == (1 if env else 0), proc.tail()
    compared = run_reports_in_process("compare", str(tmp_path / "before.json"), str(tmp_path / "after.json"),
                                      "--fail-on-regression")
    assert compared.returncode == 1, compared.tail()
    assert "test_mine.py::test_exits_one_day (now error: SystemExit: 3)" in compared.stdout, compared.tail()


def test_device_bench_runs_beside_the_hosts_own_device_option(device_bench_run):
    proc = device_bench_run["proc"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the two failing tests below
    assert "2 failed, 2 passed, 2 skipped" in proc.stdout
    assert "Wrote benchmark data in:" in proc.stdout


def test_device_bench_stats_are_its_samples_and_say_which_timer_ran(device_bench_run):
    data = device_bench_run["json"]
    (bench,) = [b for b in data["benchmarks"] if b["name"] == "test_matmul"]
    samples = bench["stats"]["data"]
    assert bench["stats"]["rounds"] == len(samples) > 0
    assert bench["stats"]["median"] == pytest.approx(float(np.median(samples)))
    info = bench["extra_info"]
    assert bench["options"]["timer"] == info["timer"] == "wall"
    assert info["rel_iqr"] == pytest.approx(rel_iqr(samples))
    assert info["device_s"] == pytest.approx(float(np.median(samples)))
    assert info["tflops"] == pytest.approx(2 * 128**3 / np.median(samples) / 1e12)
    assert info["gbps"] == pytest.approx(3 * 128 * 128 * 4 / np.median(samples) / 1e9)
    assert "pct_peak" not in info  # a CPU has no honest peak
    assert info["device"] == "cpu" and info["status"] == "ok" and bench["group"] == "device_bench"
    assert data["machine_info"]["bench_device"] == "cpu"


def test_device_bench_on_a_cpu_says_that_no_flush_or_graph_ran(device_bench_run):
    (bench,) = [b for b in device_bench_run["json"]["benchmarks"] if b["name"] == "test_cold_graph_on_cpu"]
    assert bench["group"] == "mine"
    assert bench["extra_info"]["timer"] == "wall" and bench["extra_info"]["l2_flush"] is False


def test_device_bench_failures_read_as_pytest_benchmarks_do(device_bench_run):
    out = device_bench_run["proc"].stdout
    assert "FixtureAlreadyUsed" in out and "device_bench times one callable per test" in out
    assert "KeyError" in out and "the user's own bug" in out and "def broken" in out  # its own traceback
    assert "SKIPPED" in out and "oom: RuntimeError: CUDA out of memory" in out
    data = device_bench_run["json"]
    assert "incomplete" not in data  # every selected case finished, the skipped one too
    bug, oom = data["not_measured"]  # the bug is recorded too: a case gone from the results reads as "removed"
    assert bug["name"] == "test_a_bug_in_the_function" and bug["extra_info"]["status"] == "error"
    assert bug["extra_info"]["reason"] == "KeyError: \"the user's own bug\""
    assert oom["extra_info"]["status"] == "oom" and oom["extra_info"]["requested_bytes"] == 20 * 2**30
