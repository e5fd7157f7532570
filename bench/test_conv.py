"""Convolutions across dtypes, memory formats and passes: cases from suites/ops/conv.py."""

from suites.harness import plugin
from suites.ops import conv


def pytest_generate_tests(metafunc):
    plugin.parametrize(metafunc, conv.cases)


def test_conv(case, run_case):
    run_case(case)
