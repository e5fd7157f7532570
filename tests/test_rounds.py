"""--bench-rounds: interleaved passes in varying order, one median per round, and the autosave name of a run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from suites.core.timing import RULES
from suites.harness.rounds import ROUND_RULES, in_rounds, round_order
from suites.harness.session import BenchSession
from suites.ops import matmul
from suites.training import numerics
from tests.runs import run_bench, run_pytest_in_process


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
    for profile, rule in RULES.items():
        per_round = ROUND_RULES[profile]
        assert per_round.min_time_s < rule.min_time_s and per_round.timeout_s < rule.timeout_s


@pytest.mark.slow
def test_rounds_are_recorded_and_the_autosave_name_is_pytest_benchmarks_tag(tmp_path):
    proc = run_bench("bench/test_matmul.py", "--bench-profile", "quick", "--bench-dtypes", "float32", "-k",
                     "square and 256x256", "--bench-rounds", "2", f"--benchmark-storage=file://{tmp_path}")
    assert proc.returncode == 0, proc.tail()
    assert "bench round 1/2: 1 cases" in proc.stdout
    (saved,) = tmp_path.rglob("*.json")
    assert re.fullmatch(r"0001_[0-9a-f]{40}_\d{8}_\d{6}(_uncommitt?ed-changes)?\.json", saved.name), saved.name
    data = json.loads(saved.read_text())
    (bench,) = data["benchmarks"]
    info = bench["extra_info"]
    assert info["bench_rounds"] == 2 and len(info["round_medians_s"]) == 2 and info["rounds_converged"] <= 2
    # the JSON's stats are pytest's round, the last one
    assert info["round_medians_s"][-1] == pytest.approx(float(np.median(bench["stats"]["data"])))
    assert data["machine_info"]["identity"]["machine"].endswith(
        f"({data['machine_info']['cpu_info']['torch_threads']} thread"
        f"{'s' if data['machine_info']['cpu_info']['torch_threads'] != 1 else ''})")


def test_zero_rounds_is_a_usage_error():
    proc = run_pytest_in_process("bench/test_matmul.py", "--benchmark-only", "--device", "cpu", "--bench-rounds", "0",
                                 "--collect-only")
    assert proc.returncode == 4 and "--bench-rounds 0: expected a number of rounds >= 1" in proc.stderr


def test_speed_cases_are_measured_in_rounds_and_correctness_experiments_once():
    session = BenchSession(torch.device("cpu"), "quick", None, rounds=3)
    (gemm, *_), (experiment, *_) = matmul.cases("quick"), numerics.cases("quick")
    assert in_rounds(gemm) and session.rule(gemm) == ROUND_RULES["quick"]
    assert not in_rounds(experiment) and session.rule(experiment) == RULES["quick"]
    assert BenchSession(torch.device("cpu"), "full", None).rule(gemm) == RULES["full"]
