"""The batch-size sweep and the largest-batch search: the budget option, the search, real peaks on the CPU, and the
quick profile end to end (with the same answer on a second run)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from suites.core.cases import Case
from suites.core.units import parse_bytes
from suites.training import batch_size
from suites.training.batch_size import Fit, largest_batch, try_batch
from suites.training.model_spec import ModelSpec
from tests.runs import ROOT, run_bench, run_bench_in_process, run_pytest_in_process, run_reports_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.usefixtures("one_thread")

CPU = torch.device("cpu")
GPT = ModelSpec("gpt", "tiny")
CNN = ModelSpec("cnn", "tiny")


@pytest.mark.parametrize(("text", "expected"), [("2GiB", 2 * 2**30), ("512MiB", 512 * 2**20), ("1.5GB", 1.5e9),
                                                ("1000000", 10**6), ("64 kib", 64 * 1024), ("1e9", 10**9)])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "2XB", "-1GiB", "0", "GiB", "1.2.3MB", "1e400", "0.5", "1e400TiB"])
def test_parse_bytes_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected a positive size"):
        parse_bytes(text)


def _threshold(limit: int):
    return lambda b: Fit(b, b <= limit, b)


@pytest.mark.parametrize("limit", [1, 2, 5, 37, 64, 100])
def test_search_finds_the_exact_largest(limit):
    found = largest_batch(_threshold(limit), cap=1024, tolerance=0.0)
    assert found.largest == limit and found.exact and not found.capped
    assert len(found.tries) <= 2 * limit.bit_length() + 1


@pytest.mark.parametrize("limit", [5, 19, 37, 100, 1000, 2900])
def test_search_stops_within_a_few_percent_in_fewer_tries(limit):
    """Exact up to 20 (1 / 5 %), within 5 % below the answer above it, with the last bisections saved."""
    found = largest_batch(_threshold(limit), cap=4096)
    exact = largest_batch(_threshold(limit), cap=4096, tolerance=0.0)
    assert limit / 1.05 <= found.largest <= limit and (not found.exact or found.largest == limit)
    if limit <= 20:
        assert found.largest == limit
    if limit >= 100:
        assert len(found.tries) <= len(exact.tries) - 2


def test_search_stops_at_the_cap_and_the_try_bound():
    capped = largest_batch(_threshold(10**6), cap=100)
    assert capped.largest == 64 and capped.capped and max(t.batch for t in capped.tries) == 64
    bounded = largest_batch(_threshold(1000), cap=4096, max_tries=12)
    assert len(bounded.tries) == 12 and bounded.largest <= 1000 and not bounded.exact
    assert largest_batch(_threshold(0), cap=64).largest == 0


def test_peak_grows_with_batch_and_checkpointing_lowers_it():
    peaks = {b: try_batch(GPT, "fp32", False, b, CPU, None).peak_bytes for b in (1, 8, 32)}
    assert peaks[1] < peaks[8] < peaks[32]
    checkpointed = try_batch(GPT, "fp32", True, 32, CPU, None).peak_bytes
    assert checkpointed < peaks[32]


def test_budget_decides_fit_from_the_measured_peak():
    fit = try_batch(GPT, "amp_bf16", False, 4, CPU, None)
    assert fit.fits and fit.peak_bytes > 0
    assert try_batch(GPT, "amp_bf16", False, 4, CPU, fit.peak_bytes).fits
    refused = try_batch(GPT, "amp_bf16", False, 4, CPU, fit.peak_bytes // 2)
    assert not refused.fits and "exceeds" in refused.reason


TIGHT = 6 * 2**20  # 2 or 3 samples of the tiny GPT: a few cheap tries


def _search() -> batch_size.Search:
    """A real search of the tiny GPT's largest fp32 batch within TIGHT."""
    return largest_batch(lambda b: try_batch(GPT, "fp32", False, b, CPU, TIGHT), cap=256)


@pytest.fixture(scope="module")
def tight_search(one_thread) -> batch_size.Search:  # noqa: F811  (one_thread first: the fixture)
    """One search that the tests of the boundary read (each of them once ran its own, to the same answer)."""
    return _search()


def test_search_on_real_peaks_is_tight_and_repeatable(tight_search):
    first, second = tight_search, _search()
    assert first.largest == second.largest and first.largest > 1 and first.exact
    by_batch = {t.batch: t for t in first.tries}
    assert by_batch[first.largest].peak_bytes <= TIGHT < by_batch[first.largest + 1].peak_bytes


def _boundary_case(found: batch_size.Search, refuse: set[int]) -> Case:
    """A case that times the search's answer as search_case does, with the batches in `refuse` failing as they
    are built again: a real allocation the allocator refuses (4 PiB), as a CUDA rebuild at the boundary can fail
    when its free memory is not what the search saw."""
    def build_at(batch: int):
        if batch in refuse:
            torch.empty(2**50, dtype=torch.float32)
        return batch_size._workload(GPT, "fp32", False, batch, CPU, TIGHT, {"max_batch": found.largest})

    return Case(suite="train_step", id="train_step/max_batch/boundary", params={}, kind="step",
                build=lambda device: batch_size.timed_where_it_fits(found, build_at, lambda: None))


def test_the_largest_batch_is_timed_where_it_fits_when_the_boundary_fails_again(tight_search):
    from suites.core.runner import execute
    from suites.harness.bench_session import SMOKE

    found = tight_search
    exact = execute(_boundary_case(found, refuse=set()), CPU, SMOKE)
    assert exact.status == "ok" and exact.figures["timed_batch"] == found.largest
    assert "timed_batch_reason" not in exact.figures
    case = _boundary_case(found, refuse={found.largest})
    fits = sorted(t.batch for t in found.tries if t.fits)
    result = execute(case, CPU, SMOKE)
    assert result.status == "ok" and result.measurement is not None  # the row is kept, timed
    info = result.figures
    assert info["max_batch"] == found.largest and info["timed_batch"] == fits[-2] == info["samples_per_step"]
    assert info["timed_batch_reason"].startswith(f"batch {found.largest} (RuntimeError: ")
    assert "can't allocate memory" in info["timed_batch_reason"]
    assert f"timed at {fits[-2]}" in info["timed_batch_reason"]


def test_when_no_batch_that_fit_fits_again_the_case_is_oom(tight_search):
    from suites.core.runner import execute
    from suites.harness.bench_session import SMOKE

    case = _boundary_case(tight_search, refuse={t.batch for t in tight_search.tries})
    result = execute(case, CPU, SMOKE)
    assert result.status == "oom" and result.reason.startswith("OutOfMemoryError: out of memory: no batch that fit")


def test_sweep_case_over_budget_is_recorded_as_oom():
    from suites.core.runner import execute
    from suites.harness.bench_session import SMOKE

    case = batch_size.sweep_case(GPT, "fp32", 16, "quick", budget=2**20)
    result = execute(case, CPU, SMOKE)
    assert result.status == "oom" and "exceeds" in result.reason
    fits = execute(batch_size.sweep_case(GPT, "fp32", 2, "quick", budget=None), CPU, SMOKE)
    assert fits.status == "ok" and fits.figures["step_peak_bytes"] <= batch_size.PROFILES["quick"].cpu_budget
    assert fits.figures["tokens_per_s"] > 0 and fits.figures["samples_per_step"] == 2
    assert 0 < fits.figures["peak_mem_bytes"] < fits.figures["step_peak_bytes"]


def test_bad_budget_is_a_one_line_usage_error():
    proc = run_pytest_in_process("bench/test_batch_size.py", "--collect-only", "--device", "cpu", "--bench-mem-budget",
                                 "lots")
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "--bench-mem-budget" in errors[0] and "Traceback" not in proc.stderr


# Half the quick profile's CPU budget (16 MiB): the searches' answers (4, 7, 5 and 7 samples) still order the
# levers, in half the tries and steps of the default's (10, 17, 12 and 17; docs/batch_size.md).
BUDGET = "8MiB"


def _quick_gpt_run(json_path: Path, select: str, fresh: bool) -> dict:
    """The quick profile's run of `select`: in this interpreter (on the module's one thread), or in a fresh one."""
    args = ("bench/test_batch_size.py", "-k", select, "--bench-profile", "quick", "--bench-mem-budget", BUDGET)
    proc = run_bench(*args, json_path=json_path, env={"OMP_NUM_THREADS": "1"}) if fresh else \
        run_bench_in_process(*args, json_path=json_path)
    assert proc.returncode == 0, proc.tail(2000)
    return proc.json


def _largest(data: dict) -> dict[str, int]:
    return {b["extra_info"]["case"]: b["extra_info"]["max_batch"] for b in data["benchmarks"]
            if b["params"]["lever"] == "max_batch"}


@pytest.mark.slow
def test_quick_profile_for_the_tiny_gpt(tmp_path):
    """The sweep and searches of the tiny GPT within a budget, and the same answer when a search runs again in a
    fresh process. The runs use one intra-op thread (see tests/single_thread.py), which keeps this test steady on a
    shared machine; docs/batch_size.md gives the run's time."""
    data = _quick_gpt_run(tmp_path / "first.json", "gpt-tiny", fresh=False)
    sweep = [b for b in data["benchmarks"] if b["params"]["lever"] == "batch"]
    assert {b["params"]["precision"] for b in sweep} == {"fp32", "amp_bf16"}
    assert all(b["extra_info"]["step_peak_bytes"] <= b["extra_info"]["mem_budget_bytes"] == parse_bytes(BUDGET)
               for b in sweep)
    refused = [e for e in data["not_measured"] if e["extra_info"]["status"] == "oom"]
    assert refused, "the sweep should end where the budget does"
    largest = _largest(data)
    assert len(largest) == 4
    fp32, bf16 = (largest[f"train_step/max_batch/gpt-tiny/{p}/checkpoint-off"] for p in ("fp32", "amp_bf16"))
    assert bf16 > fp32
    for p in ("fp32", "amp_bf16"):
        assert largest[f"train_step/max_batch/gpt-tiny/{p}/checkpoint-block"] > \
               largest[f"train_step/max_batch/gpt-tiny/{p}/checkpoint-off"]
    again = _quick_gpt_run(tmp_path / "second.json", "gpt-tiny and max_batch and fp32 and checkpoint-off", fresh=True)
    case = "train_step/max_batch/gpt-tiny/fp32/checkpoint-off"
    assert _largest(again) == {case: largest[case]}


DATA = ROOT / "tests" / "data"


def test_plot_draws_throughput_and_memory_per_precision(tmp_path):
    """From a real quick CPU run of the tiny GPT (tests/data/batch_size_cpu_quick.json)."""
    from reports.format.load import load
    from reports.plots import batch as plot_batch

    frame = load([DATA / "batch_size_cpu_quick.json"])
    written = plot_batch.plots(frame, tmp_path)
    assert [p.name for p in written] == [f"batch_size_gpt-tiny_{plot_batch._slug(frame['device'].iloc[0])}.png"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_batch._largest(frame, "gpt-tiny", frame["device"].iloc[0]) == {"fp32": 10, "amp_bf16": 12}
    assert plot_batch.plots(load([DATA / "run_cpu_quick.json"]), tmp_path / "none") == []



def test_plot_command_lists_the_batch_plot(tmp_path):
    proc = run_reports_in_process("plot", str(DATA / "batch_size_cpu_quick.json"), "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert [Path(line).name for line in proc.stdout.split()] == ["batch_size_gpt-tiny_AMD-EPYC-2-threads.png"]


# What torch's cuDNN paths raise near the memory limit, as the CUDA build words them (checked in its libraries below)
CUDNN_EDGE = ("FIND was unable to find an engine to execute this computation",
              "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED")


@pytest.fixture
def cudnn_fails_from(request):
    """Every forward of a module with a batch of at least `request.param[0]` samples raises cuDNN's message
    `request.param[1]`, as a convolution without an engine whose workspace fits does near the memory limit."""
    least, message = request.param

    def hook(module, args, output):
        if args and isinstance(args[0], torch.Tensor) and args[0].dim() > 1 and args[0].shape[0] >= least:
            raise RuntimeError(message)

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    yield least
    handle.remove()


@pytest.mark.parametrize("cudnn_fails_from", [(5, m) for m in CUDNN_EDGE], indirect=True, ids=CUDNN_EDGE)
def test_cudnn_failing_at_the_memory_edge_ends_the_search_as_out_of_memory(cudnn_fails_from):
    """ResNet-50 near the memory limit: cuDNN finds no engine (or fails inside) from batch 5 on. Inside a search
    try, above a batch that fit, that is the memory edge: the search ends at 4, the failed tries saying why."""
    found = largest_batch(lambda b: try_batch(CNN, "fp32", False, b, CPU, None), cap=64)
    assert found.largest == cudnn_fails_from - 1 and found.exact
    refused = [t for t in found.tries if not t.fits]
    assert refused and all(t.reason.startswith("taken as out of memory at the memory edge (a smaller batch fit): ")
                           for t in refused)


@pytest.mark.parametrize("cudnn_fails_from", [(1, CUDNN_EDGE[1])], indirect=True)
def test_cudnn_failing_at_batch_1_or_outside_a_search_stays_an_error(cudnn_fails_from):
    """At batch 1 nothing fit before, so memory is not the likely cause: the try raises. Outside a search try (a
    sweep's case, any other case) the same message is an `error` of the case."""
    from suites.core.runner import execute
    from suites.harness.bench_session import SMOKE

    with pytest.raises(RuntimeError, match="CUDNN_STATUS_INTERNAL_ERROR"):
        try_batch(CNN, "fp32", False, 1, CPU, None)
    sweep = batch_size.sweep_case(CNN, "fp32", 2, "quick", None)
    result = execute(sweep, CPU, SMOKE)
    assert result.status == "error" and "CUDNN_STATUS_INTERNAL_ERROR" in result.reason


@pytest.mark.skipif(torch.version.cuda is None, reason="needs torch's CUDA build (it runs on a CPU): its libraries")
def test_the_cuda_builds_libraries_word_the_memory_edge_as_recognised():
    """The messages `at_memory_edge` reads are the CUDA build's own: torch's "GET/FIND was unable to find an engine
    to execute this computation" and "cuDNN error: " with cuDNN's status names (cudnnGetErrorString)."""
    from suites.core.runner import _MEMORY_EDGE_MARKERS

    site = Path(torch.__file__).parent
    libraries = [*site.glob("lib/libtorch_cuda*.so*"), *site.parent.glob("nvidia/cudnn/lib/libcudnn*.so*")]
    assert libraries
    text = b"".join(path.read_bytes() for path in libraries).lower()
    for marker in _MEMORY_EDGE_MARKERS:
        assert marker.encode() in text, marker
    assert b"cudnn error: " in text


@pytest.mark.parametrize(("profile", "given", "expected"), [
    ("full", None, 40 * 2**30), ("exhaustive", None, 40 * 2**30), ("quick", None, None), ("full", 2**30, 2**30)])
def test_on_cuda_full_searches_within_40_gib_unless_a_budget_is_given(profile, given, expected):
    """The full sweep reports the largest batch within 40 GiB (docs/batch_size.md); what the plan reasons from is
    the same limit."""
    cuda = torch.device("cuda")
    assert batch_size.budget_for(profile, given, cuda) == expected
    search = next(c for c in batch_size.cases(profile, given) if c.params["lever"] == "max_batch")
    assert search.batch_memory.limits.get("cuda") == expected
