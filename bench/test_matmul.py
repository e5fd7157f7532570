"""Matmul across dtypes and alignments: cases from suites/ops/matmul.py."""

from suites.harness import plugin
from suites.ops import matmul


def pytest_generate_tests(metafunc):
    plugin.parametrize(metafunc, matmul.cases)


def test_matmul(case, run_case):
    run_case(case)
