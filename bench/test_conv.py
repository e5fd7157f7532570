"""Convolutions across dtypes, memory formats and passes: cases from suites/ops/conv.py."""

from suites.harness import pytest_plugin
from suites.ops import conv


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, conv.cases)


def test_conv(case, run_case):
    run_case(case)
