"""Collectives across message sizes under torchrun: cases from suites/distributed/collectives.py."""

from suites.distributed import collectives
from suites.harness import pytest_plugin


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, collectives.cases)


def test_collectives(case, run_case):
    run_case(case)
