"""Matmul across dtypes and alignments: cases from suites/matmul.py."""

from suites import matmul, plugin


def pytest_generate_tests(metafunc):
    plugin.parametrize(metafunc, matmul.cases)


def test_matmul(case, run_case):
    run_case(case)
