"""Matmul across dtypes and alignments: cases from suites/ops/matmul.py."""

from suites.harness import pytest_plugin
from suites.ops import matmul


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, matmul.cases)


def test_matmul(case, run_case):
    run_case(case)
