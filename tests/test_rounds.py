"""--bench-rounds: interleaved passes in varying order, one median per round, and the autosave name of a run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from suites.core.profiles import RULES, Profile
from suites.core.stopping import rel_iqr
from suites.harness import entry
from suites.harness.bench_rounds import MAX_ROUNDS, earlier_measurements, in_rounds, measure_rounds, round_order
from suites.harness.bench_session import BenchSession, measure_once
from suites.ops import matmul
from suites.training import numerics
from tests.runs import run_bench_in_process, run_pytest_in_process


@pytest.mark.parametrize("rounds", [2, 3, 5])
@pytest.mark.parametrize("count", [1, 7, 30])
def test_every_round_is_a_permutation_and_positions_vary(rounds, count):
    orders = [round_order(count, r, rounds) for r in range(rounds)]
    assert all(sorted(order) == list(range(count)) for order in orders)
    if count >= rounds:
        for case in range(count):
            positions = {order.index(case) for order in orders}
            assert len(positions) == rounds  # a case sits at another moment of the pass in every round
    assert orders[0] == list(range(count))  # pytest's pass keeps collection order


def test_a_round_is_shorter_than_the_profiles_measurement():
    for rules in RULES.values():
        assert rules.round.min_time_s < rules.stop.min_time_s and rules.round.timeout_s < rules.stop.timeout_s


@pytest.mark.slow
def test_rounds_are_recorded_and_the_autosave_name_is_pytest_benchmarks_tag(tmp_path):
    proc = run_bench_in_process("bench/test_matmul.py", "--bench-profile", "quick", "--bench-dtypes", "float32", "-k",
                                "square and 256x256", "--bench-rounds", "2", f"--benchmark-storage=file://{tmp_path}")
    assert proc.returncode == 0, proc.tail()
    assert "bench round 1/2: 1 cases" in proc.stdout
    (saved,) = tmp_path.rglob("*.json")
    assert re.fullmatch(r"0001_[0-9a-f]{40}_\d{8}_\d{6}(_uncommitt?ed-changes)?\.json", saved.name), saved.name
    data = json.loads(saved.read_text())
    (bench,) = data["benchmarks"]
    info = bench["extra_info"]
    assert info["bench_rounds"] == 2 and len(info["round_medians_s"]) == 2 and info["rounds_converged"] <= 2
    # the JSON's stats are every round's samples, in the order the rounds ran: the headline is all rounds'
    samples = bench["stats"]["data"]
    assert len(samples) == sum(info["round_samples"])
    split = np.split(np.array(samples), np.cumsum(info["round_samples"])[:-1])
    assert [float(np.median(part)) for part in split] == pytest.approx(info["round_medians_s"], rel=1e-12)
    assert info["device_s"] == pytest.approx(bench["stats"]["median"]) == pytest.approx(float(np.median(samples)))
    assert info["rel_iqr"] == pytest.approx(rel_iqr(samples))
    assert data["machine_info"]["identity"]["machine"].endswith(
        f"({data['machine_info']['cpu_info']['torch_threads']} thread"
        f"{'s' if data['machine_info']['cpu_info']['torch_threads'] != 1 else ''})")


@pytest.mark.parametrize("rounds", ["0", "1000"])
def test_a_number_of_rounds_out_of_range_is_a_usage_error(rounds):
    proc = run_pytest_in_process("bench/test_matmul.py", "--benchmark-only", "--device", "cpu", "--bench-rounds",
                                 rounds, "--collect-only")
    assert proc.returncode == 4, proc.tail()
    assert f"--bench-rounds {rounds}: expected 1 to {MAX_ROUNDS} rounds" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_speed_cases_are_measured_in_rounds_and_correctness_experiments_once():
    session = BenchSession(torch.device("cpu"), "quick", None, rounds=3)
    (gemm, *_), (experiment, *_) = matmul.cases("quick"), numerics.cases("quick")
    assert in_rounds(gemm) and session.rule(gemm) == RULES[Profile.QUICK].round
    assert not in_rounds(experiment) and session.rule(experiment) == RULES[Profile.QUICK].stop
    assert BenchSession(torch.device("cpu"), "full", None).rule(gemm) == RULES[Profile.FULL].stop


def test_each_round_pools_the_rounds_before_it():
    """Round r's result pools rounds 1..r, so a run stopped in the earlier rounds keeps a headline of all of them,
    and pytest's round gets each round's own measurement once."""
    session = BenchSession(torch.device("cpu"), "quick", None, rounds=3)
    case = matmul.make_case(matmul.MatmulShape("square", 16, 16, 16), "float32")
    log = measure_rounds([case], 3, lambda c, earlier: measure_once(session, c, earlier), report=lambda _: None)
    first, second = log.results[case.id]
    assert first.measurement.rounds == [] and second.measurement.rounds[0] is first.measurement
    own = second.measurement.rounds[1]
    assert second.measurement.samples_s == first.measurement.samples_s + own.samples_s
    assert second.figures["device_s"] == second.measurement.median_s
    assert earlier_measurements(log.results[case.id]) == [first.measurement, own]
    merged = entry.rounds(second, entry.RunNotes(earlier_rounds=[first]))
    assert merged["round_medians_s"] == [first.measurement.median_s, own.median_s]


@pytest.mark.slow
def test_device_bench_tests_are_measured_in_every_round(tmp_path):
    """`--bench-rounds 3` applies to a device_bench test as to the suites' cases: three rounds of the per-round
    rule, pooled, each round's median listed, and each earlier round journaled (its test is not parametrized)."""
    (tmp_path / "test_mine.py").write_text("def test_noop(device_bench):\n    device_bench(lambda: None)\n")
    out = tmp_path / "run.json"
    proc = run_pytest_in_process("test_mine.py", "--benchmark-only", "--bench-device", "cpu", "--bench-rounds", "3",
                                 f"--benchmark-json={out}", cwd=tmp_path, json_path=out)
    assert proc.returncode == 0, proc.tail()
    (bench,) = proc.json["benchmarks"]
    info = bench["extra_info"]
    assert info["bench_rounds"] == 3 and len(info["round_medians_s"]) == 3 == len(info["round_samples"])
    assert len(bench["stats"]["data"]) == sum(info["round_samples"])
    assert min(info["round_samples"]) >= RULES[Profile.QUICK].round.min_samples
    assert info["calls_per_sample"] > 1
