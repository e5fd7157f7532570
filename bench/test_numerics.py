"""Numerics checks of the mixed-precision recipe (formats, underflow, lost updates, loss scaler, parity, autocast
audit): cases from suites/numerics.py."""

from suites import numerics, plugin


def pytest_generate_tests(metafunc):
    plugin.parametrize(metafunc, numerics.cases)


def test_numerics(case, run_case):
    run_case(case)
