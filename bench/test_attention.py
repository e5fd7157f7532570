"""Naive attention against SDPA with each backend forced, in time and memory: cases from suites/ops/attention.py."""

from suites.harness import pytest_plugin
from suites.ops import attention


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, attention.cases)


def test_attention(case, run_case):
    run_case(case)
