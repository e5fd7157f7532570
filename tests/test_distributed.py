"""Distributed runs: nccl-tests' bandwidth formulas, the lockstep stopping rule, and real torchrun runs with gloo
on this CPU (collectives, a rank whose build fails, a rank that fails or hangs inside the timed loop)."""

import json

import pytest
import torch

from suites.core import timing
from suites.core.cases import Unsupported
from suites.core.profiles import rules
from suites.core.timing import measure
from suites.distributed import collectives, parallel_step
from tests.data.distributed import lockstep_ranks
from tests.runs import run_torchrun


@pytest.mark.parametrize(("op", "n", "factor"), [("all_reduce", 8, 1.75), ("all_reduce", 2, 1.0),
                                                   ("all_gather", 8, 0.875), ("reduce_scatter", 4, 0.75),
                                                   ("all_to_all", 2, 0.5), ("broadcast", 8, 1.0)])
def test_bus_factor_is_nccl_tests(op, n, factor):
    assert collectives.bus_factor(op, n) == pytest.approx(factor)


def test_bandwidths_of_one_gigabyte_per_second():
    bw = collectives.bandwidths("all_reduce", 4, 10**9, 1.0)
    assert bw == {"algbw_gbps": pytest.approx(1.0), "busbw_gbps": pytest.approx(1.5)}


def test_unknown_collective_is_an_error():
    with pytest.raises(ValueError, match="all_reduce"):
        collectives.bus_factor("gather", 2)


class Barriers:
    """Counts the barriers; agrees on what this one rank offers (the slowest call time of one rank is its own)."""

    def __init__(self, log: list, agreed: list | None = None) -> None:
        self.log, self.agreed = log, agreed if agreed is not None else []

    def before_sample(self) -> None:
        self.log.append(1)

    def agree(self, seconds: float) -> float:
        self.agreed.append(seconds)
        return seconds


@pytest.mark.parametrize("work", [lambda: None, lambda: sum(range(2000))],
                         ids=["instant", "busy"])  # both well under a millisecond: 20 calls fit in 20 ms
@pytest.mark.parametrize(("kind", "per_sample"), [("op", timing.LOCKSTEP_CALLS), ("step", 1)])
def test_lockstep_rule_takes_the_same_number_of_calls_whatever_the_timing(work, kind, per_sample):
    """Collectives inside the workload must be called as often on every rank: 5 warm-up calls, exactly `samples`
    samples, however fast or noisy the calls are, each of an op's samples 20 calls back to back (nccl-tests' -n
    20), each of a step's one step."""
    calls, barriers = [], []
    m = measure(lambda: calls.append(work()), torch.device("cpu"), rules("quick").stop.counted(7),
                ranks=Barriers(barriers), kind=kind)
    assert (len(m.samples_s), m.calls_per_sample, m.warmup_calls, m.stop_reason) == (7, per_sample, 5, "count")
    assert (len(calls), len(barriers)) == (5 + 7 * per_sample, 7)


@pytest.mark.parametrize(("slowest_s", "calls"), [(1e-5, 20), (1e-3, 20), (2e-3, 10), (7e-3, 2), (0.5, 1)])
def test_a_long_collective_takes_fewer_calls_per_sample_agreed_on_the_slowest_rank(slowest_s, calls):
    """20 calls of a 10 us or 1 ms collective; as many as fill 20 ms of a longer one (the barrier's skew is then a
    small share of one call), on every rank the count the slowest rank's call time gives."""
    class Slowest(Barriers):
        def agree(self, seconds: float) -> float:
            return max(seconds, slowest_s)

    assert timing.lockstep_calls(1e-6, Slowest([])) == calls


@pytest.mark.slow
def test_ranks_agree_on_the_longest_hold_and_keep_the_slowest_samples(tmp_path):
    """Two real gloo ranks: the hold every rank uses is the longest planned, and sample i is the slowest rank's;
    the count stop stays `count` and is judged on the slowest samples against the target."""
    torch.multiprocessing.spawn(lockstep_ranks.agree_and_reduce, args=(f"file://{tmp_path}/rendezvous", str(tmp_path)),
                                nprocs=2)
    ranks = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    for r in ranks:
        assert r["hold"] == 3e-3 and r["samples"] == [1.0, 1.0, 2.0, 2.0] and r["reason"] == "count"
        assert r["converged"] is False  # the slowest samples spread by 67 %, past quick's 5 % target
    assert [r["own"] for r in ranks] == [1.0, 1.5]


def test_without_a_process_group_the_cases_say_how_to_launch():
    case = collectives.cases("quick")[0]
    with pytest.raises(Unsupported, match="torchrun --nproc-per-node"):
        case.build(torch.device("cpu"))
    with pytest.raises(Unsupported, match="torchrun"):
        parallel_step.cases("quick")[2].build(torch.device("cpu"))


def test_every_collective_and_size_in_the_sweep():
    ids = {c.id for c in collectives.cases("full")}
    assert len(ids) == len(collectives.OPS) * 2 * 10
    assert "collectives/all_reduce/bfloat16/1024MiB" in ids and "collectives/broadcast/float32/4KiB" in ids


COLLECTIVES, TRAIN_STEP = "bench/test_collectives.py", "bench/test_train_step_distributed.py"
SKEWED = "tests/data/distributed/skewed_ranks.py"


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory) -> dict:
    """One torchrun of 2 ranks that measures what the tests below read, each file's cases apart in its JSON: the
    collectives at 4 and 64 KiB, the training step alone, under DDP and FSDP, and the collective with a skewed
    rank (its skew on that case's barriers only)."""
    out = tmp_path_factory.mktemp("dist") / "r.json"
    proc = run_torchrun(COLLECTIVES, TRAIN_STEP, SKEWED, "--benchmark-only", "--bench-profile", "quick", "-k",
                        "4KiB or 64KiB or (local and not accum) or bucket-view or (fsdp and not bf16 and not reshard) "
                        "or skewed", json_path=out)
    assert proc.returncode == 0, proc.tail()
    return {"json": proc.json, "stdout": proc.stdout}


def of_file(run: dict, path: str, kind: str = "benchmarks") -> list[dict]:
    """The run's entries (measured, or not_measured) of one file's cases."""
    return [entry for entry in run["json"][kind] if entry["fullname"].startswith(f"{path}::")]


slow = pytest.mark.slow  # each reads a torchrun with 2 processes, or runs one


@slow
def test_one_json_with_every_collective_checked(measured_run):
    data = measured_run["json"]
    assert data["machine_info"]["distributed"] | {"hosts": None, "ranks": None} == {
        "world_size": 2, "nodes": 1, "ranks_per_node": 2, "backend": "gloo", "hosts": None, "ranks": None}
    assert [r["device"] for r in data["machine_info"]["distributed"]["ranks"]] == ["cpu", "cpu"]
    found = {(b["params"]["op"], b["params"]["dtype"], b["params"]["size"]) for b in of_file(measured_run, COLLECTIVES)}
    assert found == {(op, dt, size) for op in collectives.OPS for dt in ("float32", "bfloat16")
                     for size in ("4KiB", "64KiB")}
    for b in of_file(measured_run, COLLECTIVES):
        info = b["extra_info"]
        assert info["status"] == "ok" and info["world_size"] == 2
        assert info["error_rel"] <= info["tolerance"]
        if b["params"]["op"] not in collectives.REDUCING:
            assert info["error_rel"] == 0.0


@slow
def test_the_figure_is_the_slowest_ranks(measured_run):
    """Each sample is the maximum over ranks, so the median is at least every rank's own median; the
    bandwidths follow from that median and the message size."""
    for b in of_file(measured_run, COLLECTIVES):
        info, median = b["extra_info"], b["stats"]["median"]
        assert len(b["stats"]["data"]) == rules("quick").lockstep_samples and info["stop_reason"] == "count"
        assert median >= max(info["rank_median_s"]) * (1 - 1e-9)
        algbw = info["message_bytes"] / median / 1e9
        assert info["algbw_gbps"] == pytest.approx(algbw)
        assert info["busbw_gbps"] == pytest.approx(algbw * collectives.bus_factor(info["op"], 2))


@slow
def test_a_collectives_sample_spreads_the_ranks_skew_over_its_calls(measured_run):
    """Rank 1 leaves every barrier 50 ms after rank 0 (hosts leave it 5-30 us apart; 50 ms stands out of gloo's
    own time on this loaded machine, 0.3-4 ms a call): rank 0's first call of each sample waits for it inside its
    window, and the figure is the slowest rank's. With one call per sample a 4 KiB all_reduce read at least the
    50 ms; calls back to back between one pair of events, as nccl-tests times them (20, or as many as fill 20 ms
    of the slowest rank's warm-up call), spread it over them."""
    [entry] = of_file(measured_run, SKEWED)
    assert entry["extra_info"]["calls_per_sample"] > 1
    assert entry["stats"]["median"] < 50e-3 / 2


@slow
def test_only_rank_0_prints_the_table(measured_run):
    assert measured_run["stdout"].count("benchmark 'collectives'") == 1
    assert measured_run["stdout"].count("benchmark 'train_step'") == 1


@slow
def test_ddp_and_fsdp_steps_with_bytes_per_param_per_rank(measured_run):
    """FSDP's 2 ranks each hold half of the 16 bytes per parameter that one rank (and DDP with gradient views)
    holds; the scaling efficiency divides by the local reference measured earlier in the same run."""
    found = {b["params"]["lever"] + "/" + b["params"]["strategy"]: b["extra_info"]
             for b in of_file(measured_run, TRAIN_STEP)}
    unsupported = parallel_step.fsdp_unsupported(torch.device("cpu"))  # torch 2.6: FSDP2 cannot run on a CPU
    if unsupported:
        assert [e["extra_info"]["reason"] for e in of_file(measured_run, TRAIN_STEP, "not_measured")] == [
            f"rank 0: {unsupported}"]
    measured = {"baseline/local", "bucket_view/ddp"} | (set() if unsupported else {"baseline/fsdp"})
    assert set(found) == measured
    local, ddp = found["baseline/local"], found["bucket_view/ddp"]
    assert local["bytes_per_param"] == pytest.approx(16, rel=1e-3)
    assert ddp["bytes_per_param"] == pytest.approx(16, rel=1e-3)
    if not unsupported:
        assert found["baseline/fsdp"]["bytes_per_param"] == pytest.approx(local["bytes_per_param"] / 2, rel=1e-3)
    for info in (found[name] for name in measured - {"baseline/local"}):
        assert info["tokens_per_s"] == pytest.approx(2 * info["tokens_per_s_per_rank"])
        assert info["scaling_efficiency"] == pytest.approx(local["step_wall_s"] / info["step_wall_s"])
    assert "scaling_efficiency" not in local


@slow
def test_a_failing_rank_fails_the_run_with_its_message():
    """A build failing on rank 1 is recorded on both ranks and the run goes on; an exception inside rank 1's
    timed loop ends the run with rank 1's message (torchrun stops rank 0, which waits in a barrier)."""
    proc = run_torchrun("tests/data/distributed/ranks_failing.py", "-rs", "--dist-timeout-s", "60")
    out = proc.output
    assert proc.returncode != 0
    assert "unsupported: rank 1: this rank lacks the feature" in out
    assert "rank 1: failing/loop: RuntimeError: injected failure in the timed loop" in out
    assert "Timed out" not in out  # the failing rank ended the run, not rank 0's 60 s timeout


@slow
def test_a_hanging_rank_times_out_instead_of_hanging():
    """Rank 0's collective gives up after the 3 s timeout (gloo's "Timed out waiting 3000ms"), rather than the run
    waiting for the hung rank (run_torchrun's own timeout would fail the test). The timeout is every collective's,
    the ranks' first meeting included: 3 s leaves room for one rank to start later than the other on a loaded
    machine."""
    proc = run_torchrun("tests/data/distributed/ranks_failing.py", "--dist-timeout-s", "3",
                        env={"RANKS_FAILING_MODE": "hang"})
    assert proc.returncode != 0
    assert "rank 0: failing/loop:" in proc.output and "Timed out waiting 3000ms" in proc.output, proc.tail()


@slow
def test_ranks_that_collect_other_cases_stop_before_measuring():
    proc = run_torchrun("tests/data/distributed/ranks_failing.py", env={"RANKS_FAILING_MODE": "collect"})
    out = proc.output
    assert proc.returncode != 0
    assert "collected other cases than rank" in out and "failing/extra" in out
    assert "benchmark 'failing'" not in out  # nothing was measured
