"""Numerics checks of the mixed-precision recipe (formats, underflow, lost updates, loss scaler, parity, autocast
audit): cases from suites/training/numerics.py."""

from suites.harness import pytest_plugin
from suites.training import numerics


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, numerics.cases)


def test_numerics(case, run_case):
    run_case(case)
