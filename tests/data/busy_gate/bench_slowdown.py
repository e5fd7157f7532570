"""Two matmul cases of the suite's kind (`run_case`, so that `--bench-rounds` applies; group `matmul`):
`busy_gate/changed` does BUSY_GATE_WORK 512x512 float32 matmuls per call (2 by default, 3 for the candidate
runs: a real 1.5x of work, not a scaled number), `busy_gate/unchanged` always 2. Not a test module (its name
keeps pytest from collecting it); tests/data/busy_gate/README.md says how its runs were recorded (record.sh)."""

import os

import torch

from suites.core.cases import Case, Workload
from suites.harness import pytest_plugin

WORK = int(os.environ.get("BUSY_GATE_WORK", "2"))
N = 1024


def matmuls(count: int):
    def build(device: torch.device) -> Workload:
        a = torch.randn(N, N, device=device)
        return Workload(fn=lambda: [a @ a for _ in range(count)])
    return build


def cases(profile: str) -> list[Case]:
    return [Case(suite="matmul", id=f"matmul/busy_gate/{name}", params={"dtype": "float32", "shape": f"{N}x{N}x{N}"},
                 build=matmuls(count), flops=2 * N**3 * count, peak_dtype="float32")
            for name, count in (("changed", WORK), ("unchanged", 2))]


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, cases)


def test_matmuls(case, run_case):
    run_case(case)
