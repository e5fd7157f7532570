"""Batch-size sweep and largest-batch search of the training step: cases from suites/training/batch_size.py."""

import functools

from suites.harness import pytest_plugin
from suites.training import batch_size


def pytest_generate_tests(metafunc):
    budget = metafunc.config.getoption("bench_mem_budget")
    pytest_plugin.parametrize(metafunc, functools.partial(batch_size.cases, budget=budget))


def test_batch_size(case, run_case):
    run_case(case)
