"""The achievable-peak search, its roofline percentage, its cache, and a real quick run that uses them.

The search logic is tested on a known landscape of rates (a function of the shape, as a measurement would be)
and a clock that advances per shape, so finding the best shape and keeping the budget are checked exactly; the
measurement itself is checked by a real search on this CPU. No speed is asserted: CPU timings here are noisy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from suites.core import achievable, profiles
from suites.core.cases import Case, Unsupported
from suites.core.measurement import Measurement
from suites.core.runner import CaseResult
from suites.core.stopping import StopRule
from suites.harness.bench_session import BenchSession
from tests.runs import run_bench_in_process, run_guest_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

CPU = torch.device("cpu")
RULE = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=0.2, warmup_s=0.0)


def plan(budget_s: float = 100.0, sizes=(256, 512, 1024, 2048), step=256, min_step=32) -> achievable.SearchPlan:
    return achievable.SearchPlan(sizes, step, min_step, budget_s, (4 * 2**20,), 0.5, RULE)


class SearchClock:
    """Seconds that pass only when a shape is measured: `cost` per shape."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def landscape(best: tuple[int, int, int], clock: SearchClock, cost: float = 1.0):
    """A rate that falls off with the distance from `best` (a single hill, as gemm efficiency is near its top)."""
    calls = []

    def rate(shape):
        clock.now += cost
        calls.append(shape)
        return 1e12 / (1 + sum(abs(s - b) for s, b in zip(shape, best, strict=True)) / 256)

    return rate, calls


def test_search_climbs_from_the_best_cube_to_the_best_shape():
    clock = SearchClock()
    rate, calls = landscape((768, 1280, 544), clock)
    found = achievable.search_gemm("float32", CPU, plan(), clock, rate)
    assert found.at == "768x1280x544" and found.value == pytest.approx(1e12)
    assert found.tried == len(calls) == len(set(calls))  # no shape measured twice
    assert all(min(s) >= 32 for s in calls)


def test_search_stops_within_its_budget():
    clock = SearchClock()
    rate, calls = landscape((768, 1280, 544), clock)
    found = achievable.search_gemm("float32", CPU, plan(budget_s=7.5), clock, rate)
    rate_of = landscape((768, 1280, 544), SearchClock())[0]
    assert len(calls) == 8  # the 8th shape starts before 7.5 s; none starts after
    assert found.seconds == 8.0 and found.value == max(map(rate_of, calls))


def test_a_shape_that_cannot_fit_its_samples_in_the_budget_left_is_skipped():
    clock = SearchClock()
    calls = []

    def rate(shape):  # 1 GFLOP/s: a 2048 cube would take 17 s per call
        clock.now += 0.1
        calls.append(shape)
        return 1e9

    achievable.search_gemm("float32", CPU, plan(budget_s=5.0), clock, rate)
    assert max(max(s) for s in calls) <= 1024


def test_out_of_memory_shapes_are_points_of_the_search():
    clock = SearchClock()

    def rate(shape):
        clock.now += 1
        if max(shape) >= 1024:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return 1e9 * max(shape)

    found = achievable.search_gemm("float32", CPU, plan(budget_s=20), clock, rate)
    assert max(map(int, found.at.split("x"))) < 1024


def test_unsupported_dtype_raises_with_its_reason():
    with pytest.raises(Unsupported, match=r"compute capability 8\.9"):
        achievable.search_gemm("float8_e4m3fn", CPU, plan())


def _case(flops=None, bytes_=None, dtype="float32", suite="matmul") -> Case:
    return Case(suite, f"{suite}/x/{flops}/{bytes_}", {}, build=lambda d: None, flops=flops, bytes=bytes_,
                peak_dtype=dtype)


def _peaks(tflops=1.0, gbps=100.0) -> achievable.Peaks:
    return achievable.Peaks(flops={"float32": achievable.Found(tflops * 1e12, "1x1x1", "test", 1, 0.0)},
                            bandwidth=achievable.Found(gbps * 1e9, "triad", "test", 1, 0.0))


def test_pct_is_against_the_roofline_at_the_case_intensity():
    peaks = _peaks()  # ridge at 1e12 / 1e11 = 10 FLOP/byte
    compute_bound = _case(flops=1e12, bytes_=1e10)  # 100 FLOP/byte: the FLOP roof binds
    assert peaks.pct(compute_bound, 2.0)["pct_achievable"] == pytest.approx(50.0)
    memory_bound = _case(flops=1e11, bytes_=1e11)  # 1 FLOP/byte: attainable 1e11 FLOP/s
    assert peaks.pct(memory_bound, 2.0)["pct_achievable"] == pytest.approx(50.0)
    assert peaks.pct(_case(bytes_=1e11), 2.0)["pct_achievable"] == pytest.approx(50.0)  # a byte model only
    assert peaks.pct(_case(flops=1e12), 2.0)["pct_achievable"] == pytest.approx(50.0)  # a FLOP model only
    assert peaks.pct(_case(flops=1e12, dtype="tf32"), 1.0) == {}  # no roof for its dtype, no byte model


def test_a_case_above_its_roof_reads_100_and_raises_that_roof_only():
    peaks = _peaks()
    fast = _case(flops=2e12, bytes_=1e9)  # 2 TFLOP/s attained against a 1 TFLOP/s roof
    assert peaks.pct(fast, 1.0)["pct_achievable"] == 100.0
    assert peaks.flops["float32"].value == pytest.approx(2e12)
    assert peaks.flops["float32"].raised_by == fast.id and peaks.flops["float32"].searched_value == 1e12
    assert peaks.bandwidth.value == pytest.approx(1e11) and peaks.bandwidth.raised_by is None
    assert peaks.pct(_case(flops=1e12, bytes_=1e9), 1.0)["pct_achievable"] == pytest.approx(50.0)


def test_a_conv_above_the_gemm_roof_raises_its_own_kind_roof_and_says_so():
    """A Winograd conv's direct FLOP model beats any gemm: it must not lower the figures of the gemms after it."""
    peaks = _peaks()
    winograd = _case(flops=2e12, suite="conv")  # 2 TFLOP/s by its model against the 1 TFLOP/s gemm roof
    read = peaks.pct(winograd, 1.0, ["earlier"])
    assert read["pct_achievable"] == 100.0 and read["above_achievable"] is True
    assert read["notes"][0] == "earlier" and read["notes"][1].startswith("2x the achievable conv float32 roof")
    assert peaks.flops["float32"].value == 1e12 and peaks.flops["float32"].raised_by is None
    assert peaks.pct(_case(flops=5e11), 1.0) == {"pct_achievable": pytest.approx(50.0)}  # a later gemm: unchanged
    assert peaks.pct(_case(flops=1e12, suite="conv"), 1.0) == {"pct_achievable": pytest.approx(50.0)}
    kinds = peaks.as_dict()["kinds"]
    conv = kinds["conv"]["float32"]
    assert set(kinds) == {"conv"} and conv["raised_by"] == winograd.id
    assert conv["value"] == pytest.approx(2e12) and conv["searched_value"] == 1e12


def test_another_kind_starts_from_the_searched_roof_not_a_raised_one():
    peaks = _peaks()
    peaks.pct(_case(flops=3e12), 1.0)  # a gemm raises the gemm roof to 3 TFLOP/s
    assert peaks.pct(_case(flops=5e11, suite="attention"), 1.0) == {"pct_achievable": pytest.approx(50.0)}
    assert peaks.as_dict()["kinds"] == {}  # attention raised nothing


class Ticks:
    """A clock that moves `tick` seconds each time it is read: the search's own reads (one per shape it weighs)
    spend its budget, whatever this machine's speed."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_the_search_says_its_total_and_each_dtype_and_keeps_to_the_total(one_thread):  # noqa: F811
    lines: list[str] = []
    clock = Ticks(0.2)
    peaks = achievable.search(CPU, "quick", ["float32", "bfloat16", "float16"], lines.append, budget_s=3.0,
                              clock=clock)
    assert lines[0].startswith("achievable peaks: searching float32, bfloat16, float16 and the bandwidth on cpu "
                               "(quick plan) in 3 s (3.5 s per dtype, 2 s bandwidth")
    # its cost is said before it starts, with what it is keyed by and how to skip it
    assert "before the next case" in lines[0] and lines[0].endswith(
        "--bench-achievable-peaks off skips it, full runs the long search instead")
    assert [line.split(":")[0] for line in lines[1:]] == ["achievable float32", "achievable bfloat16",
                                                           "achievable float16", "achievable bandwidth"]
    order = ["float32", "bfloat16", "float16", "bandwidth"]
    cut = [name for name in order if peaks.missing.get(name, "").startswith(achievable.NOT_SEARCHED)]
    assert "float32" in peaks.flops and cut == order[-len(cut):]  # searched until the total ran out, then none
    assert {"float16", "bandwidth"} <= set(cut)  # float32 may take 3 - 0.75 (the bandwidth's share) - 0.2 s
    assert all(peaks.missing[name].endswith("the search's 3 s in all were spent") for name in cut)


def test_a_search_cut_by_its_total_is_searched_again_next_run(tmp_path):
    lines: list[str] = []
    cut = achievable.search(CPU, "quick", ["float32"], lines.append, budget_s=0.0)
    assert cut.missing == {"float32": "not searched: the search's 0 s in all were spent",
                           "bandwidth": "not searched: the search's 0 s in all were spent"}
    assert lines[1:] == ["achievable float32: not searched: the search's 0 s in all were spent",
                         "achievable bandwidth: none (not searched: the search's 0 s in all were spent)"]
    cut.identity = achievable.identity(CPU)
    achievable.save(cut, tmp_path)
    small = achievable.SearchPlan((64, 128), 32, 32, 0.5, (2**20,), 0.2, RULE)
    again: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(profiles.rules("quick").search, "cpu", small)
        found = achievable.obtain(CPU, "quick", tmp_path, dtypes=["float32"], log=again.append)
    assert found.source == "searched" and found.flops["float32"].value > 0
    assert again[0].startswith("achievable peaks: searching float32") and again[-1].startswith("achievable peaks: "
                                                                                                "cached in")


def test_cache_round_trip_and_identity(tmp_path):
    peaks = _peaks()
    peaks.profile, peaks.identity = "quick", achievable.identity(CPU)
    path = achievable.save(peaks, tmp_path)
    loaded = achievable.load(tmp_path, achievable.identity(CPU), "quick")
    assert loaded.source == f"loaded from {path}" and loaded.flops["float32"].value == 1e12
    assert achievable.load(tmp_path, achievable.identity(CPU), "full") is None  # a quick search is not a full one
    other = dict(achievable.identity(CPU), torch_threads=99)
    assert achievable.load(tmp_path, other, "quick") is None
    assert json.loads(path.read_text())["identity"]["torch_threads"] == torch.get_num_threads()


def test_a_real_search_on_this_cpu(one_thread):  # noqa: F811
    # budgets that the small grid never reaches, so that a loaded machine still tries every shape of it; on one
    # thread, as the other tests' torch on the other core stalls two threads' barriers (2 s alone, 7-25 s beside it)
    small = achievable.SearchPlan((64, 128), 32, 32, 60.0, (2**20,), 30.0, RULE)
    found = achievable.search_gemm("float32", CPU, small)
    m, n, k = map(int, found.at.split("x"))
    assert found.value > 0 and found.tried >= 2 and min(m, n, k) >= 32
    kernels = achievable.search_bandwidth(CPU, small)
    assert set(kernels) == {"copy", "triad"} and all(f.value > 0 for f in kernels.values())


# The quick plan in small (its grid, budgets and rule: 0.5 s in all) for the runs below, which check what a run does
# with a search, not what the search finds: a case above its roof raises it, so every case still reads 0 < pct <= 100
SMALL_QUICK = achievable.SearchPlan((64, 128), 32, 32, 0.3, (2**20,), 0.2, RULE)


@pytest.mark.slow
def test_a_quick_run_has_pct_achievable_on_every_case_and_reuses_its_search(tmp_path, monkeypatch):
    def run(out: Path) -> dict:
        proc = run_bench_in_process("bench/test_matmul.py", "--bench-dtypes", "float32", "-k", "square",
                                    f"--achievable-cache={tmp_path}", json_path=out)
        assert proc.returncode == 0, proc.tail()
        lines.append(proc.stdout)
        return proc.json

    monkeypatch.setitem(profiles.rules("quick").search, "cpu", SMALL_QUICK)
    lines: list[str] = []
    first = run(tmp_path / "a.json")
    # a plain run says on its terminal what it searches, in how long, each result, and then that it loads it
    assert "achievable peaks: searching float32 and the bandwidth on cpu (quick plan) in 0.5 s" in lines[0]
    assert "\nachievable float32: " in lines[0] and "\nachievable bandwidth: " in lines[0]
    info = first["machine_info"]["achievable"]
    assert info["source"] == "searched" and set(info["flops"]) == {"float32"}
    assert {"copy", "triad"} == set(info["kernels"])
    for bench in first["benchmarks"]:
        assert 0 < bench["extra_info"]["pct_achievable"] <= 100
    second = run(tmp_path / "b.json")
    assert second["machine_info"]["achievable"]["source"].startswith("loaded from")
    assert "achievable peaks: loaded from " in lines[1] and "achievable peaks: searching" not in lines[1]
    assert all(0 < b["extra_info"]["pct_achievable"] <= 100 for b in second["benchmarks"])
    assert math.isclose(second["machine_info"]["achievable"]["kernels"]["copy"]["value"],
                        info["kernels"]["copy"]["value"])


def test_obtain_serves_the_dtypes_the_cache_holds_without_searching(tmp_path):
    peaks = _peaks()
    peaks.profile, peaks.identity, peaks.missing = "quick", achievable.identity(CPU), {"tf32": "not here"}
    peaks.searched_at = "2026-01-01T00:00:00+00:00"
    achievable.save(peaks, tmp_path)
    lines: list[str] = []
    found = achievable.obtain(CPU, "quick", tmp_path, dtypes=["float32", "tf32"], log=lines.append)
    assert found.source.startswith("loaded from") and found.flops["float32"].value == 1e12
    # never silent: where the roofs come from, when and by what they were searched, and what they are
    assert lines == [f"achievable peaks: {found.source} (searched 2026-01-01T00:00:00+00:00 with torch "
                     f"{torch.__version__}, {torch.get_num_threads()} threads): float32 1 TFLOP/s, bandwidth 100 "
                     "GB/s; --bench-achievable-peaks search searches again"]
    lines.clear()
    found.pct(_case(flops=3e12), 1.0)  # a case three times above the loaded roof says so as it happens
    assert len(lines) == 1 and lines[0].startswith("achievable: matmul/x/3000000000000.0/None ran at 3x the gemm "
                                                   "float32 roof (loaded from ")
    assert lines[0].endswith("raised to it for the rest of the run, and `--bench-achievable-peaks search` searches "
                             "again")


def test_the_cache_is_keyed_by_the_torch_version_and_the_runs_threads_on_every_device():
    ident = achievable.identity(CPU)
    assert ident["torch"] == torch.__version__ and ident["torch_threads"] == torch.get_num_threads()
    others = [dict(ident, torch="2.6.0"), dict(ident, torch_threads=ident["torch_threads"] + 1)]
    paths = {achievable.cache_path(Path("c"), i, "quick") for i in (ident, *others)}
    assert len(paths) == 3  # another torch or another thread count is another file, never a stale load


def test_device_bench_uses_the_peaks_only_when_asked_and_the_suites_cases_by_default():
    assert achievable.asked(None, device_bench=False)  # the suite's bench files: auto
    assert not achievable.asked(None, device_bench=True)  # a user's device_bench test: nothing unless given
    assert all(achievable.asked(mode, device_bench=True) for mode in ("auto", "search", "off"))


DEVICE_BENCH_WITH_FLOPS = """
import torch


def test_matmul(device_bench):
    a = torch.randn(64, 64)
    device_bench(lambda: a @ a, flops=2 * 64**3, bytes=3 * 64 * 64 * 4, dtype=torch.float32)
"""


@pytest.mark.slow
def test_a_device_bench_test_never_starts_a_search_unless_the_option_is_given(tmp_path, monkeypatch):
    from tests.test_plugin_guest import host

    repo = host(tmp_path, test_mine=DEVICE_BENCH_WITH_FLOPS)
    cache = tmp_path / "cache"
    monkeypatch.setitem(profiles.rules("quick").search, "cpu", SMALL_QUICK)

    def bench(name: str, *args: str) -> dict:
        out = tmp_path / f"{name}.json"
        proc = run_guest_in_process(repo, "--bench-device", "cpu", "--bench-dtypes", "float32",
                                    f"--bench-achievable-cache={cache}", f"--benchmark-json={out}", *args)
        assert proc.returncode == 0, proc.tail()
        assert ("achievable peaks: searching" in proc.output) is bool(args)
        return json.loads(out.read_text())

    plain = bench("plain")
    [entry] = plain["benchmarks"]
    assert "pct_achievable" not in entry["extra_info"] and "achievable" not in plain["machine_info"]
    assert entry["extra_info"]["tflops"] > 0 and not cache.exists()
    asked = bench("asked", "--bench-achievable-peaks", "auto")
    assert 0 < asked["benchmarks"][0]["extra_info"]["pct_achievable"] <= 100
    assert asked["machine_info"]["achievable"]["source"] == "searched" and list(cache.glob("*.json"))


def _result(case: Case, status: str = "ok") -> CaseResult:
    return CaseResult(case, status, measurement=Measurement([1.0], "wall", 1, "target", StopRule(), 2))


def test_session_gives_pct_only_to_cases_that_passed_and_says_when_it_is_off():
    on = BenchSession(CPU, "quick", None, achievable_mode="auto", _achievable=_peaks())
    assert on.pct_achievable(_result(_case(flops=5e11))) == {"pct_achievable": 50.0}
    assert on.pct_achievable(_result(_case(flops=5e12), "error")) == {}  # a wrong answer never raises a roof
    assert on.achievable_info()["flops"]["float32"]["raised_by"] is None
    above = _result(_case(flops=5e12, suite="conv"))
    above.figures = {"pct_peak": 130.0, "tflops_above_peak": True}
    assert on.pct_achievable(above) == {}  # above the datasheet peak: its FLOPs are not work, no roof rises
    assert on.achievable_info()["kinds"] == {}
    off = BenchSession(CPU, "quick", None, achievable_mode="off")
    assert off.pct_achievable(_result(_case(flops=5e11))) == {}
    assert off.achievable_info() == {"source": None, "reason": "off (--bench-achievable-peaks off)"}


def test_a_full_run_makes_the_short_search_and_the_long_one_only_when_asked(tmp_path):
    """The main job's profile on a GPU is full, yet its first run waits for the short search (a minute there, not
    five); `--bench-achievable-peaks full` runs the long one, which every later run then loads."""
    short = achievable.SearchPlan((64,), 32, 32, 0.3, (2**20,), 0.2, RULE)
    long = achievable.SearchPlan((64, 128), 32, 32, 0.6, (2**20,), 0.2, RULE)

    def peaks(mode: str | None) -> achievable.Peaks:
        session = BenchSession(CPU, "full", ["float32"], achievable_mode=mode, achievable_cache=tmp_path)
        return session.achievable()

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(profiles.rules("quick").search, "cpu", short)
        patch.setitem(profiles.rules("full").search, "cpu", long)
        first = peaks(None)
        assert (first.source, first.profile) == ("searched", "quick")
        assert peaks("auto").source.endswith("-quick.json")  # cached: loaded, not searched again
        asked = peaks("full")
        assert (asked.source, asked.profile) == ("searched", "full")  # a short search does not serve `full`
        assert peaks(None).source.endswith("-full.json") and peaks("full").source.endswith("-full.json")
