"""Convolutions across dtypes, memory formats and passes: cases from suites/conv.py."""

from suites import conv, plugin


def pytest_generate_tests(metafunc):
    plugin.parametrize(metafunc, conv.cases)


def test_conv(case, run_case):
    run_case(case)
