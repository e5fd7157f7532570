"""The training step under DDP and FSDP2 against one rank alone: cases from suites/distributed/parallel_step.py."""

from suites.distributed import parallel_step
from suites.harness import pytest_plugin


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, parallel_step.cases)


def test_train_step_distributed(case, run_case):
    run_case(case)
